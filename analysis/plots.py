"""Seaborn figures: each takes a results frame and returns a matplotlib Figure."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

LABELS = {"chained": "Chained-DP (learned)", "nash": "NE (Theorem 1)", "ldp": "LDP",
          "optimum": "centralized optimum"}


def convergence(rows: pd.DataFrame) -> plt.Figure:
    """Distance of the learned profile to the NE per round (one line per population)."""
    sel = rows[(rows["metric"] == "distance") & (rows["method"] == "chained")].copy()
    sel["value"] = sel["value"].clip(lower=1e-16)
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(sel, x="round", y="value", hue="population", ax=ax, marker="o",
                 palette="viridis", legend=False)
    ax.set(yscale="log", ylabel="max |sigma2 - sigma2*| / max sigma2*",
           title="Learning the Chained-DP equilibrium")
    fig.tight_layout()
    return fig


def methods_vs(rows: pd.DataFrame, x: str, metrics: Sequence[str],
               style: str | None = None) -> plt.Figure:
    """One panel per final metric against grid parameter ``x``, a line per method."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    keep = rows[rows["method"] != "nash"].assign(method=lambda f: f["method"].map(LABELS))
    for ax, metric in zip(axes[0], metrics, strict=True):
        sel = keep[keep["metric"] == metric]
        sns.lineplot(sel, x=x, y="value", hue="method", style=style, marker="o", ax=ax,
                     errorbar=("se", 2))
        ax.set(yscale="log", ylabel=metric)
    fig.tight_layout()
    return fig


def measured_vs_predicted(rows: pd.DataFrame, x: str, metric: str,
                          hue: str | None = None) -> plt.Figure:
    """Measured rate (markers, 2-SE bars) and theory (dashed) against ``x``, per attacker
    (rows of a sweep over ``attacker``)."""
    measured = rows[rows["metric"] == metric]
    predicted = rows[rows["metric"] == f"{metric}_predicted"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, attacker in zip(axes, ("weak", "strong"), strict=True):
        m = measured[measured["attacker"] == attacker]
        sns.lineplot(m, x=x, y="value", hue=hue, marker="o", errorbar=("se", 2), ax=ax,
                     linestyle="none", palette="viridis" if hue else None, err_style="bars")
        sns.lineplot(predicted[predicted["attacker"] == attacker], x=x, y="value", hue=hue,
                     ax=ax, linestyle="--", legend=False, errorbar=None,
                     palette="viridis" if hue else None)
        ax.set(title=f"{attacker} attacker (dashed: theory)", ylabel=metric)
    fig.tight_layout()
    return fig


def thresholds(rows: pd.DataFrame) -> plt.Figure:
    """Fig 8: the colluder threshold p_k vs K for weak and strong attackers."""
    sel = rows[rows["metric"] == "threshold"]
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(sel, x="K", y="value", hue="attacker", marker="o", ax=ax, errorbar=None)
    ax.set(yscale="log", ylabel="p_k threshold (failure <= 1/K^2)")
    fig.tight_layout()
    return fig


def participation(rows: pd.DataFrame) -> plt.Figure:
    """Participants and attack success per round, a line per p."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, ("participants", "success_rate"), strict=True):
        sel = rows[rows["metric"] == metric]
        sns.lineplot(sel, x="round", y="value", hue="p", style="attacker", ax=ax,
                     palette="viridis", errorbar=None)
        ax.set(ylabel=metric)
    fig.tight_layout()
    return fig


def ring_error(rows: pd.DataFrame) -> plt.Figure:
    """Estimator error sum_i |y_i - sum s| per step: measured (mean over replications and
    populations), the exact prediction (dashed) and Theorem 1's asymptotic bound (dotted)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for metric, style in (("error", "-"), ("error_predicted", "--")):
        sel = rows[rows["metric"] == metric]
        if not sel.empty:
            mean = sel.groupby("step")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), style, label=metric)
    bound = rows.loc[rows["metric"] == "utility_bound", "value"]
    if not bound.empty:
        ax.axhline(bound.iloc[0], linestyle=":", color="grey", label="Theorem 1 bound")
    ax.set(yscale="log", xlabel="step", ylabel="sum_i |y_i - sum s|")
    ax.legend()
    fig.tight_layout()
    return fig


def example2(rows: pd.DataFrame) -> plt.Figure:
    """Figs 2-3 of the PPSP paper: estimates y_i(k) and the summed error, with join/leave."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    y = rows[(rows["metric"] == "y") & (rows["population"] == 0)].pivot_table(
        index="step", columns="node", values="value")
    steps = rows.loc[rows["metric"] == "error", "step"].drop_duplicates().sort_values()
    axes[0].plot(y.reindex(steps).index, y.reindex(steps).to_numpy(), lw=0.8)  # gaps: absent
    axes[0].set(ylim=(0, 1000), ylabel="y_i(k)", title="estimates (replication 0)")
    err = rows[rows["metric"] == "error"]
    sns.lineplot(err, x="step", y="value", ax=axes[1], errorbar=None)
    axes[1].set(yscale="log", ylabel="sum_i |y_i - sum s|", title="error (mean)")
    fig.tight_layout()
    return fig


def theory_vs_measured(rows: pd.DataFrame, x: str, theory: str, measured: str) -> plt.Figure:
    """A theoretical quantity (dashed) and its measured counterpart (markers) against ``x``."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for metric, style in ((theory, "--"), (measured, "-")):
        sel = rows[rows["metric"] == metric]
        sns.lineplot(sel, x=x, y="value", hue="method", ax=ax, linestyle=style, marker="o",
                     errorbar=None, legend=style == "-")
    ax.set(xscale="log", yscale="log", ylabel=f"{measured} (solid), {theory} (dashed)")
    fig.tight_layout()
    return fig


def learned_c(rows: pd.DataFrame) -> plt.Figure:
    """Each node's c per best-response round (population 0), per weighting."""
    sel = rows[(rows["metric"] == "c") & (rows["population"] == 0)]
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(sel, x="round", y="value", hue="method", units="node", estimator=None, ax=ax)
    ax.set(yscale="log", ylabel="c_i")
    fig.tight_layout()
    return fig
