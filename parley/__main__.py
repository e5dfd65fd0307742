"""``python -m parley`` runs the CLI."""

from parley.cli import main

main()
