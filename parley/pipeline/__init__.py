"""The request's path, one stage a module, in the order a call takes them:

authenticate → admit → route → relay → meter
"""
