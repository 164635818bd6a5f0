"""SAR slicing (chained-dp-bas-sar.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import dataclasses
import math

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import THEORY, Page, integer_x, legend_below, new_figure, series
from privgames.environments.sar import SARConfig, SARModel


def sar_agents(env: SARModel) -> Figure:
    """Each slice's chain (rows) of the last round: colluders red, honest users whose slice the
    coalition reconstructed orange, the others green; users who opted out are listed."""
    fig, ax = new_figure()
    attack = env.attack
    if attack is None:  # before the first round, or after the last: nobody is attacked
        taking_part = np.array([u.participating for u in env.users], dtype=float)[None]
        cmap = matplotlib.colors.ListedColormap(["#bdbdbd", "#4daf4a"])
        ax.imshow(taking_part, cmap=cmap, vmin=0, vmax=1, aspect="auto",
                  interpolation="nearest")
        title = (f"round {env.steps}: fewer than 3 participants left, the run has ended"
                 if env.ended else f"{env.config.K} users before round 1: press Step")
        ax.set(xlabel="user", yticks=[], title=title)
        ax.legend(handles=[matplotlib.patches.Patch(color=cmap(i), label=text) for i, text in
                           enumerate(("opted out", "taking part"))],
                  loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize="small")
        return fig
    order, colluding, success = attack["order"], attack["colluding"], attack["success"]
    broken = np.zeros(colluding.size, dtype=bool)[None].repeat(order.shape[0], axis=0)
    broken[:, attack["victims"]] = success.T
    state = np.where(colluding[order], 2, np.take_along_axis(broken, order, axis=1))
    cmap = matplotlib.colors.ListedColormap(["#4daf4a", "#ff7f00", "#e41a1c"])
    ax.imshow(state, cmap=cmap, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
    ax.set(xlabel="position in the slice's chain", ylabel="slice",
           title=f"round {env.steps}: {int(colluding.sum())} colluders of {colluding.size}"
                 f" taking part, {env.config.K - colluding.size} left")
    legend_below(fig, ax, handles=[
        matplotlib.patches.Patch(color=cmap(i), label=text) for i, text in
        enumerate(("honest, safe", "honest, slice reconstructed", "colluder"))])
    return fig


def sar_predicted(env: SARModel, participants: float) -> float:
    """Eq (31)/(32) (corrected) at ``participants`` users."""
    if not participants >= 3:
        return math.nan
    return dataclasses.replace(env.config, K=int(participants)).predicted()["failure_probability"]


def sar_measures(env: SARModel) -> Figure:
    fig, ax = new_figure()
    rate, k = series(env, "success_rate"), series(env, "participants")
    rounds = np.arange(1, rate.size + 1)
    ax.plot(rounds, rate, marker="o", markersize=3, label="measured success per slice")
    ax.plot(rounds, [sar_predicted(env, n) for n in k], **THEORY,
            label=f"eq ({'31' if env.config.attacker == 'weak' else '32'}) at the participants")
    ax.set(xlabel="round", ylabel="attack success", title="attack success against the theory",
           ylim=(-0.02, 1.02))
    integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def sar_readings(env: SARModel) -> dict[str, float]:
    stats = env.round_stats
    return {"rounds": env.steps, "participants": stats.get("participants", env.config.K),
            "attack success": stats.get("success_rate", math.nan),
            "eq (31)/(32)": sar_predicted(env, stats.get("participants", env.config.K))}


PAGE = Page("sar", "SAR slicing", SARModel, SARConfig,
            ("K", "d", "N", "p", "attacker", "mitigation_p", "min_observations", "rounds"),
            sar_agents, sar_measures, sar_readings, size="K", fixed={"K": 30, "d": 20, "N": 10},
            display_max={"K": 300, "d": 200, "min_observations": 200, "rounds": 400})
