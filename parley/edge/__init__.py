"""The HTTP edge: what Parley does with a request before (and around) the app.

* ``protocol``: aiohttp's connection protocol, answering requests its parser refuses
  (oversized or broken headers, bad framing, TLS or HTTP/2 bytes) with the OpenAI
  envelope, and logging them in one short, rate-limited line (``refusals``).
* ``runner``: ``EdgeRunner`` (aiohttp's ``AppRunner`` building those connections, with
  the header, keep-alive and linger bounds), what ``parley serve`` runs.
* ``bodies``: the time a request body may take, and how many bodies one key may have
  arriving at once.
* ``started``: what happens when something fails after a reply has begun.
* ``deferred``: route handlers whose module is imported by their first request (the
  admin API, the dashboard, ``/openapi.json``), so a worker holds only what ``/v1`` needs.

The bounds are listed in ``docs/operations.md`` (Bounds).
"""
