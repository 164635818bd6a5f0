"""The PPSP ring (ppsp-ring-summation.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import MANY, THEORY, Page, dots, log_y, new_figure
from privgames.environments.ppsp_ring import PPSPConfig, PPSPModel


def ppsp_agents(env: PPSPModel) -> Figure:
    """Nodes on a circle in ring order with their state (colour) and estimate of the sum
    (label; above 24 nodes only the first's, above :data:`~privgames.analysis.pages.MANY`
    the nodes are edgeless points whose colours read as a band); a node that left is drawn
    hollow outside the ring."""
    fig, ax = new_figure()
    ids = env.ids
    angle = 2 * np.pi * np.arange(ids.size) / ids.size
    state = env.state[0]
    estimates = env.window.estimates[-1] if env.window.estimates else np.full(
        env.config.capacity, np.nan)
    style = {"s": 220, "edgecolors": "black"} if ids.size <= MANY else dots(ids.size)
    points = ax.scatter(np.cos(angle), np.sin(angle), c=state, cmap="coolwarm", zorder=3,
                        **style)
    ax.plot(np.cos(np.append(angle, 0)), np.sin(np.append(angle, 0)), color="grey",
            linewidth=0.8, zorder=1)
    show = ids.size <= 24
    for i, (node, a) in enumerate(zip(ids, angle, strict=True)):
        if show or i == 0:
            ax.annotate(f"{node}: y={estimates[node]:.4g}", (1.3 * np.cos(a), 1.3 * np.sin(a)),
                        ha="left" if np.cos(a) > 0.3 else "right" if np.cos(a) < -0.3
                        else "center", va="center", fontsize=7)
    gone = sorted(set(range(env.config.capacity)) - set(ids.tolist()))
    for j, node in enumerate(gone):
        ax.scatter([1.75], [1.2 - 0.3 * j], s=220, facecolors="none", edgecolors="black")
        ax.annotate(f"node {node} left", (1.75, 1.2 - 0.3 * j - 0.22), ha="center", fontsize=7)
    fig.colorbar(points, ax=ax, label="state x_i")
    target = float(env.secrets[ids].sum())
    ax.set(xlim=(-2, 2.1), ylim=(-1.6, 1.6), aspect="equal",
           title=f"step {env.steps}: {ids.size} nodes, sum of secrets {target:.5g}")
    ax.set_axis_off()
    return fig


def ppsp_measures(env: PPSPModel) -> Figure:
    fig, ax = new_figure()
    error = env.record().error.mean(axis=1) if env.steps else np.zeros(0)
    steps = np.arange(1, error.size + 1)
    ax.plot(steps, error, label=f"measured (mean of {env.config.replications} rings)")
    exact = [env.exact_error(k) for k in steps]
    c = env.config
    full = np.isfinite(exact).any()  # the formula needs full windows: from step n - 1
    ax.plot(steps, exact, **THEORY, label="exact formula (static Gaussian ring)" if full
            else f"exact formula: from step {c.n - 1} (full windows)")
    for at, what in ((c.leave_at, f"node {c.leave_node} leaves"),
                     (c.join_at, f"node {c.join_node} joins")):
        if at is not None and at < env.steps:
            ax.axvline(at + 1, color="#d95f02", linewidth=0.8, linestyle=":", label=what)
    log_y(ax)
    ax.set(xlabel="step", ylabel="Σ_i |y_i − Σ secrets|",
           title="estimator error against the exact formula")
    ax.legend(fontsize="small")
    return fig


def ppsp_readings(env: PPSPModel) -> dict[str, float]:
    error = env.record().error if env.steps else None
    return {"steps": env.steps, "nodes": env.ids.size,
            "estimator error": math.nan if error is None else float(error[-1].mean()),
            "exact error": env.exact_error(env.steps) if env.steps else math.nan}


def ppsp_detail(env: PPSPModel, position: int) -> dict[str, float]:
    """The node at ``position`` of the ring (1 is the first; past the end: the last)."""
    k = min(position, env.ids.size)
    node = int(env.ids[k - 1])
    estimates = env.window.estimates[-1] if env.window.estimates else None
    return {f"node at position {k}: id": node,
            f"node at position {k}: secret": float(env.secrets[node]),
            f"node at position {k}: state": float(env.state[0][k - 1]),
            f"node at position {k}: estimate": (float(estimates[node]) if estimates is not None
                                                else math.nan)}


PAGE = Page("ppsp", "PPSP ring", PPSPModel, PPSPConfig,
            ("n", "K", "schedule", "noise", "protocol", "leave_at", "leave_node", "join_at",
             "replications"),
            ppsp_agents, ppsp_measures, ppsp_readings, detail=ppsp_detail, size="n",
            fixed={"n": 10, "K": 400, "c": 100.0, "leave_at": 150, "leave_node": 3,
                   "join_at": 250, "replications": 20},
            display_max={"n": 1000, "K": 10000, "replications": 200}, steps="K")
