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
)
from privgames.environments.learning_dynamics import LearningConfig, LearningModel


def learning_agents(env: LearningModel) -> Figure:
    """Each agent's current strategy (its most likely grid action) against the predicted
    equilibrium's action, agents sorted by their type (under incomplete information: each
    client's L row, then its H row; an action is a report and a noise)."""
    fig, ax = new_figure()
    grid = env.grid
    mode, nash = env.last_iterate(), env.reference()
    if env.config.game == "bas-sequential" and env.steps:  # the path, at the states it gets
        rows = env.path_rows()
        mode, nash = mode[rows], nash[rows]
    index = lambda v: np.searchsorted(grid, v)  # noqa: E731 - the grid position of a value
    x = np.arange(1, mode.size + 1)
    ax.scatter(x, index(mode), c=index(mode), cmap="viridis", vmin=0, vmax=grid.size - 1,
               label=f"{env.config.learner}", **dots(mode.size))
    if mode.size <= MANY:
        ax.scatter(x, index(nash), marker="_", s=200, color="black", label=env.predicted_name)
    else:
        ax.step(x, index(nash), where="mid", color="black", linewidth=1,
                label=env.predicted_name)
    ticks = np.linspace(0, grid.size - 1, min(6, grid.size)).astype(int)
    ax.set_yticks(ticks, [env.label(grid[t]) for t in ticks])
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
    distance, regret = env.trace("distance"), env.trace("max_average_regret")
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
    type rows under incomplete information), read from its shard as a Mesa agent: its
    private type, the action it played, its current strategy's action, the predicted one, and
    its cost against last round's play."""
    players = env.agents
    player = players[min(agent, len(players)) - 1]
    view = player.view()
    k = view.index + 1
    played = view.action
    cost = (math.nan if math.isnan(played)
            else float(view.costs[int(np.searchsorted(env.grid, played))]))
    return {**{f"agent {k}: {name}": value for name, value in view.private.items()},
            f"agent {k}: action played": played, f"agent {k}: action": view.iterate,
            f"agent {k}: {env.predicted_name} action": view.reference,
            f"agent {k}: its cost": cost}


PAGE = Page("learning", "Learning dynamics", LearningModel, LearningConfig,
            ("game", "learner", "feedback", "start", "agents", "rounds", "grid_points",
             "aggregation", "pricing"),
            learning_agents, learning_measures, learning_readings, detail=learning_detail,
            size="agents", fixed={"agents": 12, "rounds": 300},
            display_max={"agents": 1000, "rounds": 5000, "grid_points": 101})
