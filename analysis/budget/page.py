"""Series budget allocation and DP k-means (budget-allocation-series.txt), its page for ``privgames
viz`` (a :class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside
the theory, the numbers it shows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.page_server import DATA_ENV
from privgames.analysis.pages import THEORY, Page, integer_x, new_figure, series
from privgames.environments.dp_kmeans import DPKMeansModel, KMeansConfig
from privgames.environments.kmeans_data import BUILT_IN
from privgames.mechanisms.budget import PROTECTIONS, STRATEGIES

#: At most this many CSV files of ``--data DIR`` are offered on the kmeans page, each of at
#: most this many bytes.
MAX_DATA_FILES, MAX_DATA_BYTES = 200, 100 * 2**20


def page_data_sets() -> tuple[str, ...]:
    """The data sets the kmeans page may load: the shipped ones, and the CSV files under the
    folder ``privgames viz --data DIR`` names that are regular files in it (a symlink out of
    it, a FIFO or a file past :data:`MAX_DATA_BYTES` is left out), named by the path given (no
    other path ever reaches the server)."""
    from privgames.analysis.results import regular_file

    folder = os.environ.get(DATA_ENV)
    found = sorted(str(p) for p in Path(folder).rglob("*.csv")
                   if regular_file(p, Path(folder), MAX_DATA_BYTES)) if folder else []
    return (*BUILT_IN, *found[:MAX_DATA_FILES])


def budget_methods() -> tuple[str, ...]:
    """Every ``method`` the config takes: a strategy, alone or with a protection."""
    return tuple(s if protection == "none" else f"{s}/{protection}"
                 for s in STRATEGIES for protection in PROTECTIONS)


def kmeans_agents(env: DPKMeansModel) -> Figure:
    """The data (grey), the first repetition's centroids (red crosses) and the budget each
    iteration spends (right), the current one marked."""
    fig, (ax, bx) = new_figure(2)
    points = env.points[:: max(1, env.points.shape[0] // 4000)]
    ax.scatter(points[:, 0], points[:, 1], s=2, color="grey", alpha=0.4)
    c = env.centroids[0]
    ax.scatter(c[:, 0], c[:, 1], marker="x", s=90, color="red", linewidths=2.5,
               label="centroids (repetition 1)")
    ax.set(title=f"iteration {env.steps} of {env.config.iterations}", xlabel="x₁", ylabel="x₂")
    ax.legend(fontsize="small", loc="lower left")
    budgets = env.budgets[0]
    colours = ["#d95f02" if i == env.steps - 1 else "#1b9e77" for i in range(budgets.size)]
    bx.bar(np.arange(1, budgets.size + 1), budgets, color=colours)
    bx.set(xlabel="iteration", ylabel="ε of the iteration",
           title=f"{env.config.method}: total ε {budgets.sum():.3g}")
    return fig


def kmeans_measures(env: DPKMeansModel) -> Figure:
    fig, ax = new_figure()
    spent = series(env, "epsilon_spent")
    total = env.budgets.sum(axis=1).mean()
    ax.plot(np.arange(1, spent.size + 1), spent, marker="o", label="ε spent (mean)")
    ax.axhline(total, **THEORY, label="total budget")
    ax.set(xlabel="iteration", ylabel="ε", title="budget spent against the total",
           xlim=(0.5, env.config.iterations + 0.5))
    integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def kmeans_readings(env: DPKMeansModel) -> dict[str, float]:
    scores = env.scores()
    return {"iterations": env.steps, env.score_name: float(scores.mean()),
            "ε spent": float(env.budgets[:, : env.steps].sum(axis=1).mean()),
            "last count noise var (predicted)": env.predicted()["last_count_noise_var"]}


PAGE = Page("kmeans", "DP k-means", DPKMeansModel, KMeansConfig,
            ("data", "method", "iterations", "epsilon", "repetitions"),
            kmeans_agents, kmeans_measures, kmeans_readings,
            fixed={"iterations": 10, "repetitions": 4, "epsilon": 0.3}, steps="iterations",
            choices={"data": page_data_sets, "method": budget_methods},
            display_max={"epsilon": 5.0, "repetitions": 100})
