"""A second program that ships with the gateway: local engines to put behind it.

``engine/`` is ``parley engine serve`` (eSpeak NG speech and PocketSphinx transcription
behind OpenAI's audio API, in a process of its own) and ``demo/`` is ``parley serve
--demo`` (those engines and a llama.cpp server started as children, with a config that
points Parley at them). The command line starts them when they run (the ``local``
extra): ``parley engine`` by its name in the command table (``engine/command.py``),
``parley serve --demo`` through ``parley.cli.demo``, which hands the demo what it needs of
the gateway. No other module of the gateway imports this package, and it never imports
the command line.
"""
