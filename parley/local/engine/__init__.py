"""Parley's local engine server (``parley engine serve``): offline speech and transcription.

eSpeak NG (``espeak``) speaks, PocketSphinx (``sphinx``) hears, PyAV (``sound``) converts;
``speech`` and ``hearing`` serve them with OpenAI's audio API, the protocol Parley's
``openai-audio`` and ``openai`` transcription adapters speak; ``workers`` keeps the
blocking work off the event loop; ``app`` puts it together. Needs the ``local`` extra.
"""
