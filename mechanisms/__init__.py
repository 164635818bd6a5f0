"""Pure mathematics of the papers: noise mechanisms, privacy accounting, equilibria.

Nothing here knows about Mesa or Ray; functions that draw take a ``numpy.random.Generator``.
"""
