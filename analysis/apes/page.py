"""APES/S-APES (apes-shuffle-clip-laplace.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import THEORY, Page, integer_x, new_figure, series
from privgames.environments.apes import APESConfig, APESModel


def apes_agents(env: APESModel) -> Figure:
    """The users' budgets (left) and the last round's reports of one dimension as the analyzer
    receives them, shuffled (right: report against the position it arrived in)."""
    fig, (ax, bx) = new_figure(2)
    ax.hist(env.budgets, bins=30, color="#7570b3")
    ax.set(xlabel="local ε", ylabel="users", title=f"{env.budgets.size} users' budgets")
    reports = env.shuffled_reports()[:, 0]
    bx.scatter(np.arange(reports.size), reports, s=4, color="#1b9e77")
    bx.set(xlabel="arrival (shuffled)", ylabel="report (dimension 1)",
           title=f"round {env.steps}: {env.config.framework}")
    return fig


def apes_measures(env: APESModel) -> Figure:
    fig, (ax, bx) = new_figure(2)
    accuracy, error = series(env, "test_accuracy"), series(env, "gradient_error")
    rounds = np.arange(1, accuracy.size + 1)
    ax.plot(rounds, accuracy, marker="o", markersize=3)
    ax.axhline(0.1, **THEORY, label="chance (10 classes)")
    ax.set(xlabel="round", ylabel="test accuracy", title="accuracy", ylim=(0, 1))
    ax.legend(fontsize="small")
    bx.plot(rounds, error, marker="o", markersize=3, color="#d95f02")
    bx.set(xlabel="round", ylabel="gradient RMS error", title="analyzer's estimate")
    integer_x(ax, bx)
    return fig


def apes_readings(env: APESModel) -> dict[str, float]:
    theory = env.predicted()
    return {"rounds": env.steps, "test accuracy": env.test_accuracy(),
            "central ε": float(theory["eps_central"]),
            "smallest local ε": float(env.budgets.min())}


PAGE = Page("apes", "APES shuffle", APESModel, APESConfig,
            ("n", "distribution", "framework", "C", "rounds", "samples"),
            apes_agents, apes_measures, apes_readings, size="n", fixed={"n": 1000, "rounds": 30},
            display_max={"n": 20000, "C": 5.0, "rounds": 200, "samples": 100})
