"""What lives as long as the process, for the request's path to use: the circuit breakers
(``breaker.py`` decides, ``circuit.py`` is one breaker's state, ``shared_breakers.py``
shares them through Redis), the in-memory books read on the hot path (``directory.py``
the keys, ``budget.py`` the spend, ``channel_book.py`` the stored channels,
``response_book.py`` the stored responses, ``in_flight.py`` the calls in flight,
``health.py`` each channel's recent health) and the usage writer (``writer.py``).

Nothing here knows the request's stages (``parley.pipeline``); they use it.
"""
