"""privgames: agent-based simulation of privacy-preserving aggregation games.

``privgames.run(name, seed=..., workers=..., **params)`` runs a registered experiment and returns
a result with ``.rows``, ``.summary``, ``.claims()`` and ``.plot()``; ``privgames.experiments()``
lists them. The layers are ``privgames.mechanisms`` (the papers' mathematics),
``privgames.agents``, ``privgames.environments`` (one ``mesa.Model`` per system) and
``privgames.analysis`` (experiments, sweeps, plots, the CLI).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Result", "experiments", "run"]


def __getattr__(name: str) -> Any:  # imported on first use: ``import privgames`` stays cheap
    if name in __all__:
        from privgames.analysis import api

        return getattr(api, name)
    raise AttributeError(f"module 'privgames' has no attribute {name!r}")
