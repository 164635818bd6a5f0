"""The PPSP ring (ppsp-ring-summation.txt), its experiments' figures: each takes a results frame
and returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside
from privgames.analysis.metrics import pooled


def ring_error(rows: pd.DataFrame) -> plt.Figure:
    """Estimator error sum_i |y_i - sum s| per step: measured (mean over replications and
    populations), the exact prediction (dashed) and Theorem 1's asymptotic bound (dotted)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for metric, style, label in (("error", "-", "measured"),
                                 ("error_predicted", "--", "exact formula")):
        sel = rows[rows["metric"] == metric]
        if not sel.empty:
            mean = sel.groupby("step")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), style, label=label)
    bound = rows.loc[rows["metric"] == "utility_bound", "value"]
    if not bound.empty:
        ax.axhline(bound.iloc[0], linestyle=":", color="grey", label="Theorem 1 bound")
    ax.set(yscale="log", xlabel="step k", ylabel="sum_i |y_i(k) - sum s|")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def example2(rows: pd.DataFrame) -> plt.Figure:
    """Figs 2-3 of the PPSP paper: estimates y_i(k) beside the active nodes' sum (dashed), and
    the summed error with the leave and the join marked (dotted)."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    y = rows[(rows["metric"] == "y") & (rows["population"] == 0)].pivot_table(
        index="step", columns="node", values="value")
    steps = rows.loc[rows["metric"] == "error", "step"].drop_duplicates().sort_values()
    axes[0].plot(y.reindex(steps).index, y.reindex(steps).to_numpy(), lw=0.8)  # gaps: absent
    target = rows[(rows["metric"] == "target") & (rows["population"] == 0)].sort_values("step")
    axes[0].plot(target["step"], target["value"], "k--", lw=1.2, label="sum of active secrets")
    axes[0].set(ylim=(0, 1000), xlabel="step k", ylabel="y_i(k)",
                title="estimates (replication 0, one line per node)")
    legend_outside(axes[0])
    err = rows[rows["metric"] == "error"].groupby("step")["value"].mean()
    axes[1].plot(err.index, err.to_numpy(), lw=1, label="measured")
    events = rows.loc[rows["metric"] == "event", "value"].unique()
    for i, step in enumerate(sorted(events)):
        axes[1].axvline(step, linestyle=":", color="grey",
                        label="leave / join" if i == 0 else None)
    axes[1].set(yscale="log", xlabel="step k", ylabel="sum_i |y_i - sum s|",
                title="error (mean over replications)")
    legend_outside(axes[1])
    fig.tight_layout()
    return fig


def theory_vs_measured(rows: pd.DataFrame, x: str, theory: str, measured: str,
                       yscale: str = "log") -> plt.Figure:
    """A theoretical quantity (dashed) and its measured counterpart (markers, 2 pooled SE where
    the measurement is a Monte-Carlo mean) against ``x``, a colour per method."""
    fig, ax = plt.subplots(figsize=(7, 4))
    has_se = (rows["metric"] == f"{measured}_var").any()
    for colour, (method, g) in zip(sns.color_palette(), rows.groupby("method"), strict=False):
        t = g[g["metric"] == theory].groupby(x)["value"].mean()
        ax.plot(t.index, t.to_numpy(), "--", color=colour, label=f"{theory} ({method})")
        if has_se:
            m = pooled(g, measured, [x], theory=theory.removeprefix(f"{measured}_"))
            ax.errorbar(m[x], m[measured], yerr=ERROR_BAR_SE * m[f"{measured}_se"], fmt="o",
                        color=colour, capsize=3, label=f"{measured} ({method}, {ERROR_BAR_SE} SE)")
        else:
            m = g[g["metric"] == measured].groupby(x)["value"].max()
            ax.plot(m.index, m.to_numpy(), "o", color=colour, label=f"{measured} ({method})")
    ax.set(xscale="log", yscale=yscale, xlabel=x,
           ylabel=f"{measured} (markers) vs {theory} (dashed)")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def tradeoff(rows: pd.DataFrame) -> plt.Figure:
    """Theorem 4: c from the cubic (line) and from numerical minimisation (markers) vs gamma_p,
    a colour per K."""
    wide = rows.pivot_table(index=["gamma_p", "K"], columns="metric", values="value")
    wide = wide.reset_index()
    fig, ax = plt.subplots(figsize=(7, 4))
    for colour, (k, g) in zip(sns.color_palette(n_colors=wide["K"].nunique()),
                              wide.groupby("K"), strict=True):
        ax.plot(g["gamma_p"], g["c_cubic"], "-", color=colour, label=f"cubic, K={k}")
        ax.plot(g["gamma_p"], g["c_numeric"], "o", mfc="none", color=colour,
                label=f"numerical, K={k}")
    ax.set(xscale="log", yscale="log", xlabel="gamma_p (privacy weight)",
           ylabel="optimal c", title="Theorem 4: cubic root vs numerical minimum")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def learned_c(rows: pd.DataFrame) -> plt.Figure:
    """Each node's c per best-response round (population 0), per weighting, with Theorem 4's
    optimum for the summed weights (dashed, same colour)."""
    sel = rows[(rows["metric"] == "c") & (rows["population"] == 0)]
    methods = sorted(sel["method"].unique())
    palette = dict(zip(methods, sns.color_palette(n_colors=len(methods)), strict=True))
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(sel, x="round", y="value", hue="method", units="node", estimator=None, ax=ax,
                 lw=0.8, palette=palette)
    optimum = rows[(rows["metric"] == "optimal_c") & (rows["population"] == 0)]
    for _, r in optimum.iterrows():
        ax.axhline(r["value"], linestyle="--", color=palette[r["method"]], lw=1.2)
    ax.plot([], [], "--", color="grey", label="Theorem 4 optimum")
    ax.set(yscale="log", xlabel="best-response round", ylabel="c_i",
           title="Nodes learning their noise scale")
    integer_ticks(ax)
    legend_outside(ax, "weighting")
    fig.tight_layout()
    return fig
