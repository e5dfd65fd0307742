"""Request and token rate limits behind the ``Limiter`` Protocol."""
