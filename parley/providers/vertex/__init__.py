"""Vertex AI channels: Google's and Anthropic's models on Google Cloud, authenticated with
a service account (``account.py``, ``tokens.py``); the adapter is ``adapter.py``, built by
the registry with ``channels.vertex_channels``."""
