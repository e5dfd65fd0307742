"""The admin API (``/admin``): groups and keys over HTTP, for dashboards and automation."""
