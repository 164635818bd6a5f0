"""One ``mesa.Model`` per system: protocol rounds, learning rounds and data collection.

Every environment shares one surface: ``Model(config, seed)``, ``step()``, ``run(rounds)``,
``results()`` and ``predicted()``.
"""
