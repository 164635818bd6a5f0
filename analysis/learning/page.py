"""Learning dynamics (every paper's game), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import math

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
from privgames.environments.learning_dynamics import LearningConfig, LearningModel


def learning_agents(env: LearningModel) -> Figure:
    """Each agent's current strategy (its most likely grid action) against the predicted
    equilibrium's action, agents sorted by their type (under incomplete information: each
    client's L row, then its H row; an action is a report and a noise)."""
    fig, ax = new_figure()
    g = env.game
    mode, nash = env.last_iterate(), env.references[env.predicted_name]
    if env.config.game == "bas-sequential":  # the users on the path, at the states they get
        rows = g.path(mode)[0]
        mode, nash = mode[rows], nash[rows]
    index = lambda v: np.searchsorted(g.grid, v)  # noqa: E731 - the grid position of a value
    x = np.arange(1, mode.size + 1)
    ax.scatter(x, index(mode), c=index(mode), cmap="viridis", vmin=0, vmax=g.grid.size - 1,
               label=f"{env.config.learner}", **dots(mode.size))
    if mode.size <= MANY:
        ax.scatter(x, index(nash), marker="_", s=200, color="black", label=env.predicted_name)
    else:
        ax.step(x, index(nash), where="mid", color="black", linewidth=1,
                label=env.predicted_name)
    ticks = np.linspace(0, g.grid.size - 1, min(6, g.grid.size)).astype(int)
    ax.set_yticks(ticks, [g.label(g.grid[t]) for t in ticks])
    who, xlabel = f"{mode.size} agents", "agent"
    if env.config.game == "pricing-bayes":  # rows: every client's L row, then its H row
        ax.axvline(mode.size / 2 + 0.5, color="grey", linewidth=0.8)
        who, xlabel = (f"{mode.size // 2} clients x 2 types",
                       "client's row: type L (left), type H (right)")
    elif env.config.game == "bas-sequential":
        who, xlabel = (f"{mode.size} users", "user in chain order (leader first), its reply "
                       "at the level it receives")
    ax.set(xlabel=xlabel, ylabel="action (grid)",
           title=f"{env.config.game}: {who}, round {env.steps}")
    legend_below(fig, ax)
    return fig


def learning_measures(env: LearningModel) -> Figure:
    fig, (ax, bx) = new_figure(2)
    distance, regret = series(env, "distance"), series(env, "max_average_regret")
    rounds = np.arange(1, distance.size + 1)
    ax.plot(rounds, distance, label="last iterate")
    ax.axhline(0.0, color="grey", linewidth=0.8, label="NE (distance 0)")
    ax.set(xlabel="round", ylabel="distance to the NE", title="distance")
    bx.plot(rounds, regret, color="C1", label="largest average regret")
    bound = env.learner.regret_bound(env.config.rounds)
    if bound is not None:
        bx.plot(rounds, [env.learner.regret_bound(t) / t for t in rounds], **THEORY,
                label="the learner's bound")
    bx.set(xlabel="round", ylabel="average regret", title="regret")
    legend_below(fig, ax, bx)
    integer_x(ax, bx)
    return fig


def learning_readings(env: LearningModel) -> dict[str, float]:
    return {"rounds": env.steps, "distance to the NE": env.distance(),
            "largest deviation gain (of own cost)": env.nash_gap_relative(),
            "largest average regret": env.max_average_regret() if env.steps else math.nan,
            "CCE gap": env.cce_gap() if env.steps else math.nan}


def learning_detail(env: LearningModel, agent: int) -> dict[str, float]:
    """Agent ``agent`` (1-based, in the agents' order; past the end: the last; a client's
    type rows under incomplete information): its current action, the predicted one."""
    mode, nash = env.last_iterate(), env.references[env.predicted_name]
    k = min(agent, mode.size)
    return {f"agent {k}: action": float(mode[k - 1]),
            f"agent {k}: {env.predicted_name} action": float(nash[k - 1])}


PAGE = Page("learning", "Learning dynamics", LearningModel, LearningConfig,
            ("game", "learner", "feedback", "start", "agents", "rounds", "grid_points",
             "aggregation", "pricing"),
            learning_agents, learning_measures, learning_readings, detail=learning_detail,
            size="agents", fixed={"agents": 12, "rounds": 300},
            display_max={"agents": 1000, "rounds": 5000, "grid_points": 101})
