"""The ``/v1`` HTTP surface: one module per resource, the table in ``routes.py``."""
