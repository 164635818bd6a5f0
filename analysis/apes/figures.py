"""APES/S-APES (apes-shuffle-clip-laplace.txt), its experiments' figures: each takes a results
frame and returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside
from privgames.analysis.metrics import pooled


def apes_training(rows: pd.DataFrame) -> plt.Figure:
    """Test accuracy per round per framework (mean over populations), and the final accuracy
    beside each framework's central epsilon (the Table 3 analogue)."""
    per_round = rows[(rows["metric"] == "test_accuracy") & rows["round"].notna()]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    sns.lineplot(per_round, x="round", y="value", hue="method", ax=axes[0], errorbar=None)
    axes[0].set(xlabel="round", ylabel="test accuracy", title="Training")
    integer_ticks(axes[0])
    final = pooled(rows, "accuracy")
    eps = rows[rows["metric"] == "eps_central"].groupby("method")["value"].mean()
    x = np.arange(len(final))
    axes[1].errorbar(x, final["accuracy"], yerr=ERROR_BAR_SE * final["accuracy_se"], fmt="o")
    axes[1].set_xticks(x, [f"{m}\neps_c={eps[m]:.3g}" for m in final["method"]], fontsize="small",
                       rotation=30, ha="right")
    axes[1].set(ylabel=f"final test accuracy ({ERROR_BAR_SE} SE)",
                title="Accuracy and central epsilon")
    legend_outside(axes[0], "framework")
    fig.tight_layout()
    return fig


def apes_sweep(rows: pd.DataFrame, x: str, label: str, logx: bool) -> plt.Figure:
    """Final test accuracy (2 pooled SE) vs a swept parameter, one line per method (or
    sparsification)."""
    by = [x, "sparsify"] if "sparsify" in rows.columns and rows["sparsify"].nunique() > 1 \
        else [x]
    table = pooled(rows, "accuracy", by)
    hue = "sparsify" if len(by) == 2 else "method"
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, g in table.groupby(hue):
        g = g.sort_values(x)
        ax.errorbar(g[x], g["accuracy"], yerr=ERROR_BAR_SE * g["accuracy_se"], marker="o",
                    capsize=2, label=str(name))
    ax.set(xlabel=label, ylabel=f"final test accuracy ({ERROR_BAR_SE} SE)",
           xscale="log" if logx else "linear")
    legend_outside(ax, hue)
    fig.tight_layout()
    return fig


def apes_bounds(rows: pd.DataFrame) -> plt.Figure:
    """Fig 2(a): central epsilon vs n, one panel per budget distribution; solid: numerical
    (the clone reduction evaluated exactly), dashed: the printed closed forms."""
    eps = rows[rows["metric"] == "eps_central"]
    dists = sorted(eps["distribution"].unique())
    fig, axes = plt.subplots(1, len(dists), figsize=(4.4 * len(dists), 4.2), squeeze=False,
                             sharey=True)
    colours = {"baseline": "C0", "eon": "C1", "erlingsson19": "C2"}
    for ax, dist in zip(axes[0], dists, strict=True):
        sel = eps[eps["distribution"] == dist]
        for method, g in sel.groupby("method"):
            bound, form = method.split("/")
            g = g.groupby("n")["value"].mean()
            ax.plot(g.index, g.to_numpy(), "-" if form == "numerical" else "--", marker="o",
                    color=colours[bound], label=method)
        ax.set(xscale="log", yscale="log", xlabel="users n", title=dist)
    axes[0][0].set_ylabel("central epsilon (dimension level)")
    legend_outside(axes[0][-1], "bound/form")
    fig.tight_layout()
    return fig


def apes_audit(rows: pd.DataFrame) -> plt.Figure:
    """The audit's interval (Clopper-Pearson) beside the upper bounds, per n."""
    wide = rows.pivot_table(index="n", columns="metric", values="value").sort_index()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    x = np.arange(len(wide))
    lo, hi = wide["audit_eps_lower"], wide["audit_eps_upper"].clip(upper=10)
    ax.bar(x, hi - lo, bottom=lo, width=0.35, color="C0", alpha=0.6,
           label="audit: Clopper-Pearson interval")
    ax.scatter(x, wide["audit_eps_estimate"], color="C0", marker="o", label="audit estimate")
    for key, style, label in (("eon_numerical", "C1_", "EoN (numerical)"),
                              ("eon_closed", "C1x", "EoN (closed)"),
                              ("baseline_numerical", "C2_", "baseline (numerical)")):
        ax.plot(x, wide[key], style, markersize=25 if style.endswith("_") else 8,
                linestyle="none", label=label)
    ax.set_xticks(x, [f"n = {int(n)}" for n in wide.index])
    ax.set(ylim=(0, None), ylabel="central epsilon (dimension level)",
           title="Empirical lower vs upper bounds")
    legend_outside(ax)
    fig.tight_layout()
    return fig
