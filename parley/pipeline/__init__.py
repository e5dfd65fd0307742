"""The request's path: ``runner.py`` takes every operation through the stages, one module
a stage, in the order a call takes them:

authenticate → admit → route → relay → meter

``job.py`` holds what an ``api/`` module hands the runner; ``services.py`` the one object
the runner reads everything from. What lives as long as the process (breakers, in-memory
books, the usage writer) is ``parley.runtime``.
"""
