"""Series budget allocation and DP k-means (budget-allocation-series.txt), its experiments'
figures: each takes a results frame and returns a matplotlib Figure, the measurement beside the
theory (shared style: :mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside
from privgames.analysis.metrics import pooled


def budget_noise(rows: pd.DataFrame) -> plt.Figure:
    """Table 2: simulated total noise per strategy (markers, 2 pooled SE), the expectation
    sum_i 2/eps_i^2 (dashed ticks) and the printed values (crosses); one panel per N."""
    from privgames.analysis.budget.experiments import TABLE2, TABLE2_EPSILON

    epsilon = float(rows["epsilon"].iloc[0]) if "epsilon" in rows else TABLE2_EPSILON
    table = pooled(rows, "mse", ["N"])
    ns = sorted(table["N"].unique())
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 4.2), squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        t = table[table["N"] == n].reset_index(drop=True)
        x = np.arange(len(t))
        ax.errorbar(x, t["mse"], yerr=ERROR_BAR_SE * t["mse_se"], fmt="o",
                    label=f"simulated ({ERROR_BAR_SE} SE)")
        ax.scatter(x, t["mse_predicted"], marker="_", s=600, color="black",
                   label="sum 2/eps_i^2")
        if epsilon == TABLE2_EPSILON:  # the printed values are for that budget only
            printed = [TABLE2.get((m, int(n)), np.nan) for m in t["method"]]
            ax.scatter(x, printed, marker="x", color="C3", label="printed (Table 2)")
        ax.set_xticks(x, t["method"], rotation=45, ha="right")
        ax.set(yscale="log", title=f"N = {n}", ylabel="mean total squared noise")
    legend_outside(axes[0][-1])
    fig.suptitle(f"Table 2: total noise of N sum queries (eps = {epsilon:g})")
    fig.tight_layout()
    return fig


def budget_us_bounds(rows: pd.DataFrame) -> plt.Figure:
    """Tables 3-5: the U_s interval per N as computed (lines) and as printed (markers), one
    panel per table; Lemma 3's literal upper end is off the scale and left out."""
    tables = sorted(rows["table"].unique())
    fig, axes = plt.subplots(1, len(tables), figsize=(4.6 * len(tables), 4.2), squeeze=False)
    for ax, t in zip(axes[0], tables, strict=True):
        w = rows[rows["table"] == t].pivot_table(index="N", columns="metric", values="value")
        for end, colour in (("low", "C0"), ("high", "C1")):
            ax.plot(w.index, w[end], "-", color=colour, label=f"{end} (computed)")
            ax.plot(w.index, w[f"printed_{end}"], "o", color=colour, mfc="none",
                    label=f"{end} (printed)")
        if "high_floor_t" in w:
            ax.plot(w.index, w["high_floor_t"], ":", color="grey",
                    label="high, t = e^(1 - floor(n/2))")
        method = rows[rows["table"] == t]["method"].iloc[0]
        eps = rows[rows["table"] == t]["epsilon"].iloc[0]
        ax.set(xlabel="total iterations N", ylabel="U_s",
               title=f"Table {t}: {method}, eps = {eps}")
        integer_ticks(ax)
    legend_outside(axes[0][-1])
    fig.tight_layout()
    return fig


def budget_kmeans(rows: pd.DataFrame) -> plt.Figure:
    """Figs 10-14: the DP k-means score vs total iterations per method (2 pooled SE), and its
    standard deviation over repetitions."""
    score = "f1" if (rows["metric"] == "f1").any() else "nivc"
    table = pooled(rows, score, ["iterations"])
    sd = rows[rows["metric"] == f"{score}_sd"]
    methods = list(dict.fromkeys(table["method"]))
    colours = dict(zip(methods, sns.color_palette("tab20", len(methods)), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.4))
    for method, g in table.groupby("method", sort=False):
        g = g.sort_values("iterations")
        axes[0].errorbar(g["iterations"], g[score], yerr=ERROR_BAR_SE * g[f"{score}_se"],
                         marker="o", capsize=2, label=method,
                         linestyle="--" if "/" in method else "-", color=colours[method])
    sns.lineplot(sd, x="iterations", y="value", hue="method", marker="o", ax=axes[1],
                 errorbar=None, legend=False, palette=colours)
    label = "weighted F1 (higher is better)" if score == "f1" else "NIVC (lower is better)"
    axes[0].set(xlabel="total iterations N", ylabel=label, title="DP k-means per strategy")
    axes[1].set(xlabel="total iterations N", ylabel=f"SD of {score} over repetitions",
                title="Stability (Fig 14)")
    for ax in axes:
        integer_ticks(ax)
    legend_outside(axes[0], "method")
    fig.tight_layout()
    return fig


def budget_collusion(rows: pd.DataFrame) -> plt.Figure:
    """The colluders' error on the most-budgeted query per method (bars: measured, 2 pooled
    SE; black ticks: what the budgets predict); higher is safer."""
    t = pooled(rows, "attack_mse").reset_index(drop=True)
    x = np.arange(len(t))
    fig, ax = plt.subplots(figsize=(9, 4.4))
    ax.bar(x, t["attack_mse"], yerr=ERROR_BAR_SE * t["attack_mse_se"], color="C0", alpha=0.8,
           label=f"attack MSE (measured, {ERROR_BAR_SE} SE)")
    ax.scatter(x, t["attack_mse_predicted"], marker="_", s=500, color="black",
               label="predicted from the budgets")
    ax.set_xticks(x, t["method"], rotation=45, ha="right")
    ax.set(yscale="log", ylabel="pooled estimate's squared error",
           title="Collusion (section 6.1): the attack's error per strategy/protection")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def budget_analysts(rows: pd.DataFrame) -> plt.Figure:
    """The analysts' cumulative regret against the offline-best strategy per round (one line
    per task), and the share ending with each strategy."""
    path = rows[rows["metric"] == "regret"]
    fav = rows[rows["metric"] == "favourite_share"]
    tasks = sorted(path["task"].unique())
    fig, axes = plt.subplots(1, len(tasks) + 1, figsize=(4.6 * (len(tasks) + 1), 4.2))
    for ax, task in zip(axes[:-1], tasks, strict=True):
        sel = path[path["task"] == task]
        sns.lineplot(sel, x="round", y="value", ax=ax, errorbar=None)
        # linear below 1% of the largest regret: the early rounds' jump and the late growth
        # both show, with labelled decades over the panel's own range
        ax.set_yscale("symlog", linthresh=max(float(sel["value"].max()) / 100, 1e-9))
        ax.set(xlabel="round", ylabel="mean cumulative regret", ylim=(0, None),
               title=f"{task}: regret (offline best {sel['best'].iloc[0]})")
    sns.barplot(fav, x="arm", y="value", hue="task", ax=axes[-1], errorbar=None)
    axes[-1].set(xlabel="", ylabel="share of analysts", title="strategy they end with")
    axes[-1].tick_params(axis="x", rotation=45)
    legend_outside(axes[-1], "task")
    fig.tight_layout()
    return fig
