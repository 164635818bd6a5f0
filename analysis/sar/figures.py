"""SAR slicing (chained-dp-bas-sar.txt), its experiments' figures: each takes a results frame and
returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside
from privgames.analysis.metrics import pooled


def attack(rows: pd.DataFrame) -> plt.Figure:
    """sar-attack: each measured rate (2 pooled SE) beside its theory (dashed tick)."""
    names = ["success_rate", "exposed_fraction", "whole_vector_exposure"]
    table = pd.concat([pooled(rows, n).rename(columns={n: "measured", f"{n}_se": "se",
                                                       f"{n}_predicted": "theory"})
                       .assign(rate=n) for n in names], ignore_index=True)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    xs = np.arange(len(table))
    ax.errorbar(xs, table["measured"], yerr=ERROR_BAR_SE * table["se"], fmt="o", capsize=4,
                label=f"measured ({ERROR_BAR_SE} SE)")
    ax.hlines(table["theory"], xs - 0.3, xs + 0.3, colors="C1", linestyles="--",
              label="theory (eq 31 / corrected eq 32)")
    ax.set_xticks(xs, [f"{r}\n({m})" for r, m in zip(table["rate"], table["method"],
                                                    strict=True)], fontsize="small")
    ax.set(ylabel="rate per round", title="Collusion attack on one victim")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def measured_vs_predicted(rows: pd.DataFrame, x: str, metric: str,
                          hue: str | None = None) -> plt.Figure:
    """Measured rate (markers, 2 pooled SE) and theory (dashed) against ``x``, per attacker."""
    by = [x] + ([hue] if hue and hue != x else [])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, attacker in zip(axes, ("weak", "strong"), strict=True):
        table = pooled(rows[rows["attacker"] == attacker], metric, by)
        groups = table.groupby(by[1:]) if len(by) > 1 else [(None, table)]
        colours = sns.color_palette("viridis", n_colors=max(len(groups), 1))
        for colour, (key, g) in zip(colours, groups, strict=True):
            g = g.sort_values(x)
            name = "" if key is None else f"{hue}={key[0] if isinstance(key, tuple) else key}"
            ax.errorbar(g[x], g[metric], yerr=ERROR_BAR_SE * g[f"{metric}_se"], fmt="o",
                        color=colour, capsize=3, label=f"measured {name}".strip())
            ax.plot(g[x], g[f"{metric}_predicted"], "--", color=colour, lw=1)
        ax.plot([], [], "--", color="grey", label="theory (dashed)")
        ax.set(title=f"{attacker} attacker", xlabel=x, ylabel=metric.replace("_", " "))
        legend_outside(ax)
    fig.tight_layout()
    return fig


def thresholds(rows: pd.DataFrame) -> plt.Figure:
    """Fig 8: the colluder threshold p_k vs K, and the failure rate measured at it against the
    target 1/K^2."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    sel = rows[rows["metric"] == "threshold"]
    sns.lineplot(sel, x="K", y="value", hue="attacker", marker="o", ax=axes[0], errorbar=None)
    axes[0].set(xscale="log", yscale="log", xlabel="K", ylabel="p_k (failure <= 1/K^2)",
                title="Thresholds (eq 33; strong by root finding)")
    legend_outside(axes[0])
    ax = axes[1]
    for colour, attacker in zip(("C0", "C1"), ("weak", "strong"), strict=True):
        t = pooled(rows[rows["attacker"] == attacker], "success_rate", ["K"]).sort_values("K")
        ax.errorbar(t["K"], t["success_rate"], yerr=ERROR_BAR_SE * t["success_rate_se"], fmt="o",
                    color=colour, capsize=3, label=f"measured at p_k ({attacker})")
    k = np.sort(rows["K"].unique())
    ax.plot(k, 1.0 / k**2, "--", color="grey", label="target 1/K^2")
    ax.set(xscale="log", yscale="log", xlabel="K", ylabel="failure rate",
           title="Failure rate at the threshold")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def participation(rows: pd.DataFrame) -> plt.Figure:
    """Participants and attack success per round, a colour per p (line style: attacker). The
    theory, dotted in the same colour: the largest K whose threshold admits p (left) and the
    failure probability of eq (31) / corrected eq (32) at each round's participation (right)."""
    from privgames.mechanisms.sar import failure_probability

    ps = sorted(rows["p"].unique())
    palette = dict(zip(ps, sns.color_palette("viridis", n_colors=len(ps)), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    wide = rows.pivot_table(index=["p", "attacker", "population", "round"], columns="metric",
                            values="value").reset_index()
    wide["theory"] = [failure_probability(int(k), p, a) if k >= 3 else np.nan for k, p, a in
                      zip(wide["participants"], wide["p"], wide["attacker"], strict=True)]
    for ax, metric in zip(axes, ("participants", "success_rate"), strict=True):
        sns.lineplot(wide, x="round", y=metric, hue="p", style="attacker", ax=ax,
                     palette=palette, errorbar=None)
        ax.set(xlabel="round", ylabel=metric.replace("_", " "))
        integer_ticks(ax)
    for (p, attacker), g in wide.groupby(["p", "attacker"]):
        axes[1].plot(*zip(*g.groupby("round")["theory"].mean().items(), strict=True), ":",
                     color=palette[p], lw=1.2)
        admitted = rows[(rows["metric"] == "predicted_largest_admitting_K") & (rows["p"] == p)
                        & (rows["attacker"] == attacker)]["value"]
        if not admitted.empty:
            axes[0].axhline(admitted.iloc[0], linestyle=":", color=palette[p], lw=1.2)
    for ax in axes:
        ax.plot([], [], ":", color="grey", label="theory (dotted)")
        legend_outside(ax)
    axes[0].set_title("participants (dotted: largest K admitting p)")
    axes[1].set_title("attack success (dotted: eq 31 / 32 at the participation)")
    fig.tight_layout()
    return fig
