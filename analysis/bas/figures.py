"""The BAS chain (chained-dp-bas-sar.txt), its experiments' figures: each takes a results frame and
returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside
from privgames.analysis.metrics import pooled

LABELS = {"chained": "Chained-DP (learned)", "nash": "NE (Theorem 1)", "ldp": "LDP (eq 26)",
          "optimum": "centralized optimum"}
MARKERS = {"Chained-DP (learned)": "o", "NE (Theorem 1)": "x", "LDP (eq 26)": "s",
           "centralized optimum": "^"}
YLABELS = {"mse": "MSE  E||mu_hat - mu||^2", "epsilon": "epsilon (worst user)",
           "mean_cost": "mean user cost (eq 14)"}


def convergence(rows: pd.DataFrame) -> plt.Figure:
    """Distance of the learned profile to the NE per round, one line per population; the NE
    itself is distance 0 (bottom), the tolerance is dotted."""
    sel = rows[(rows["metric"] == "distance") & (rows["method"] == "chained")].copy()
    sel["value"] = sel["value"].clip(lower=1e-16)
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(sel, x="round", y="value", hue="population", ax=ax, marker="o",
                 palette="viridis", legend="full")
    ax.axhline(1e-6, linestyle=":", color="grey", label="tolerance 1e-6")
    ax.set(yscale="log", xlabel="learning round",
           ylabel="max |sigma2 - sigma2_NE| / max sigma2_NE",
           title="Distance of the learned profile to Theorem 1's NE")
    integer_ticks(ax)
    legend_outside(ax, "population")
    fig.tight_layout()
    return fig


def methods_vs(rows: pd.DataFrame, x: str, metrics: Sequence[str],
               style: str | None = None) -> plt.Figure:
    """One panel per final metric against grid parameter ``x``, a colour per method.

    MSE: measured (markers, 2 pooled SE) and eq (9) (dashed). Epsilon: exact (solid) and the
    paper's eq (3) (dashed). Mean cost: the learned profile and the NE's (dashed)."""
    by = [x] + ([style] if style else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.2), squeeze=False)
    palette = dict(zip(LABELS.values(), sns.color_palette(n_colors=4), strict=True))
    for ax, metric in zip(axes[0], metrics, strict=True):
        if metric == "mse":
            table = pooled(rows, "mse", by).assign(method=lambda f: f["method"].map(LABELS))
            for (method, *rest), g in table.groupby(["method", *by[1:]], sort=False):
                g = g.sort_values(x)
                tag = f" ({rest[0]})" if rest else ""
                ax.errorbar(g[x], g["mse"], yerr=ERROR_BAR_SE * g["mse_se"], marker=MARKERS[method],
                            ms=7, linestyle="none",
                            color=palette[method], label=f"{method}{tag}",
                            mfc="none" if rest and rest[0] == "sorted" else None)
                ax.plot(g[x], g["mse_predicted"], "--", color=palette[method], lw=1)
            ax.plot([], [], "--", color="grey", label="eq (9) (dashed)")
        elif metric == "epsilon":
            sel = rows[rows["metric"].isin(["epsilon", "epsilon_paper"])
                       & (rows["method"] != "nash")].assign(
                method=lambda f: f["method"].map(LABELS),
                accounting=lambda f: f["metric"].map({"epsilon": "exact (analytic)",
                                                      "epsilon_paper": "eq (3) (paper)"}))
            sns.lineplot(sel, x=x, y="value", hue="method", style="accounting", marker="o",
                         ax=ax, errorbar=None, palette=palette)
        else:
            sel = rows[rows["metric"] == metric].assign(method=lambda f: f["method"].map(LABELS))
            sns.lineplot(sel, x=x, y="value", hue="method", style=style, marker="o", ax=ax,
                         errorbar=("se", ERROR_BAR_SE), palette=palette)
        ax.set(yscale="log", xlabel=x, ylabel=YLABELS.get(metric, metric))
        legend_outside(ax)
    fig.tight_layout()
    return fig


def properties(rows: pd.DataFrame) -> plt.Figure:
    """E1-E4 per population: the PoA measured against Theorem 5's closed form and bound, and the
    truthfulness gain, fairness spread and participation margin against their claimed zero."""
    v = rows.pivot_table(index="population", columns="metric", values="value").reset_index()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    ax.plot(v["population"], v["poa_measured"], "o", label="measured (learned profile)")
    ax.plot(v["population"], v["poa_predicted"], "x", ms=10, label="closed form (Theorem 5)")
    ax.plot(v["population"], v["poa_bound"], "_", ms=18, mew=2,
            label="bound max beta / min beta")
    ax.axhline(1.0, linestyle=":", color="grey", label="PoA = 1")
    ax.set(yscale="log", xlabel="population", ylabel="price of anarchy",
           title="Efficiency (E4)")
    integer_ticks(ax)
    legend_outside(ax)
    ax = axes[1]
    long = v.melt(id_vars="population", value_vars=["truthful_max_gain", "fairness_spread",
                                                     "participation_min_margin"])
    long["metric"] = long["metric"].map({
        "truthful_max_gain": "E1 truthfulness: best misreport gain (claim <= 0)",
        "fairness_spread": "E2 fairness: cost spread / mean (claim = 0)",
        "participation_min_margin": "E3 participation: leave - stay (claim > 0)"})
    sns.barplot(long, x="population", y="value", hue="metric", ax=ax)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(xlabel="population", ylabel="measured",
           title="Truthfulness, fairness, participation (claims relative to 0)")
    legend_outside(ax)
    fig.tight_layout()
    return fig
