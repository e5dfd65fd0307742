"""Persistence behind the ``Store`` Protocol; ``open_store`` picks the implementation."""
