"""``python -m parley`` runs the CLI (and only then: a spawned child process imports
this module again, as ``__mp_main__``)."""

from parley.cli import main

if __name__ == "__main__":
    main()
