"""``parley serve --demo``: Parley in front of local engines, offline (``pip install
'parley[local]'``): llama.cpp for chat, ``parley engine serve`` for speech and
transcription, started as children (``children``) and configured (``config``) by ``run``.
"""
