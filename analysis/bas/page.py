"""The BAS chain (chained-dp-bas-sar.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import (
    MANY,
    THEORY,
    Page,
    dots,
    integer_x,
    legend_below,
    new_figure,
    series,
)
from privgames.environments.bas_chain import BASChainConfig, BASChainModel


def bas_agents(env: BASChainModel) -> Figure:
    """Users in sequence order, each coloured by its learned noise sigma^2 (a disc, or a point
    above :data:`~privgames.analysis.pages.MANY` users), the NE's sigma^2 of the same position
    as a black tick (a step line above ``MANY``)."""
    fig, ax = new_figure()
    learned, nash = env.learned(), env.predicted()["nash"]
    x = np.arange(1, learned.size + 1)
    scale = max(float(nash.max()), float(learned.max()), 1e-12)
    points = ax.scatter(x, learned, c=learned, cmap="viridis", vmin=0, vmax=scale, zorder=3,
                        label="learned σ²", **dots(learned.size))
    if learned.size <= MANY:
        ax.scatter(x, nash, marker="_", s=200, color="black", zorder=4,
                   label="NE σ² (Theorem 1)")
    else:
        ax.step(x, nash, where="mid", color="black", linewidth=1, zorder=2,
                label="NE σ² (Theorem 1)")
    if len(env.sequences) > 1:
        for end in np.cumsum([s.size for s in env.sequences])[:-1]:
            ax.axvline(end + 0.5, color="grey", linewidth=0.8)
    fig.colorbar(points, ax=ax, label="σ²")
    ax.set(xlabel="position in the chain (BAS order)", ylabel="noise variance σ²",
           title=f"{learned.size} users after round {env.steps}")
    legend_below(fig, ax)
    integer_x(ax)
    return fig


def bas_measures(env: BASChainModel) -> Figure:
    fig, ax = new_figure()
    distance = series(env, "distance")
    ax.plot(np.arange(1, distance.size + 1), distance, marker="o", markersize=3,
            label="learned profile")
    ax.axhline(0.0, **THEORY, label="NE (Theorem 1)")
    ax.axhline(env.config.tolerance, color="grey", linewidth=0.8, label="tolerance")
    ax.set(xlabel="round", ylabel="distance to the NE (relative)",
           title="distance to the Nash equilibrium")
    integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def bas_readings(env: BASChainModel) -> dict[str, float]:
    leader = int(env.order[0])
    return {"rounds": env.steps, "σ² of the first user": env.users[leader].sigma2,
            "NE σ² of the first user": float(env.predicted()["nash"][0]),
            "total σ²": float(env.learned().sum()),
            "distance to the NE": env.distance()}


def bas_detail(env: BASChainModel, position: int) -> dict[str, float]:
    """The user at ``position`` of the chain (1 is the first; past the end: the last)."""
    k = min(position, env.config.K)
    user = int(env.order[k - 1])
    return {f"user at position {k}: β": float(env.beta[user]),
            f"user at position {k}: σ²": float(env.learned()[k - 1]),
            f"user at position {k}: NE σ²": float(env.predicted()["nash"][k - 1])}


PAGE = Page("bas", "BAS chain", BASChainModel, BASChainConfig,
            ("K", "d", "beta_max", "learner", "feedback", "damping", "observation", "prior",
             "subsequences", "split", "rounds"),
            bas_agents, bas_measures, bas_readings, detail=bas_detail, size="K",
            fixed={"rounds": 100},
            display_max={"K": 1000, "d": 500, "beta_max": 5.0, "rounds": 500})
