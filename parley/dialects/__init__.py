"""Dialects: the wire formats callers and upstreams speak, and the canonical call between
them (``canonical.py``); one codec module per dialect and one sans-IO translator per
stream direction (``translator.py`` is the seam)."""
