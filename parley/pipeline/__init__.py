"""The request's path: ``runner.py`` takes every operation through the stages, one module
a stage, in the order a call takes them:

authenticate → admit → route → relay → meter

``job.py`` holds what an ``api/`` module hands the runner; ``streams.py`` the registry of
open streams that shutdown ends.
"""
