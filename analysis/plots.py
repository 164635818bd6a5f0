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
