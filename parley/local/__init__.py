"""A second program that ships with the gateway: local engines to put behind it.

``engine/`` is ``parley engine serve`` (eSpeak NG speech and PocketSphinx transcription
behind OpenAI's audio API, in a process of its own) and ``demo/`` is ``parley serve
--demo`` (those engines and a llama.cpp server started as children, with a config that
points Parley at them). Each has its CLI command in ``command.py``. The gateway never
imports this package: only these commands do, when they run (the ``local`` extra).
"""
