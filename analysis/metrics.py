"""Summaries of tidy result rows: pooled Monte-Carlo means with standard errors, profiles."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def pooled_mse(rows: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Pool per-population MSE means into one mean and standard error per group and method.

    Each population reports ``mse`` (mean of ``mse_n`` squared errors) and ``mse_var``;
    the pooled variance adds the within- and between-population parts, and the standard error
    is ``sqrt(pooled variance / total draws)``. ``mse_predicted`` (eq 9) is averaged.
    """
    keys = [*by, "method", "population"]
    wide = rows[rows["metric"].isin(["mse", "mse_var", "mse_n", "mse_predicted"])].pivot_table(
        index=keys, columns="metric", values="value", aggfunc="first").reset_index()

    def pool(g: pd.DataFrame) -> pd.Series:
        n, m, v = g["mse_n"].to_numpy(), g["mse"].to_numpy(), g["mse_var"].to_numpy()
        total = n.sum()
        grand = float(np.sum(n * m) / total)
        var = (np.sum((n - 1) * v) + np.sum(n * (m - grand) ** 2)) / max(total - 1, 1)
        return pd.Series({"mse": grand, "mse_se": float(np.sqrt(var / total)),
                          "mse_predicted": float(g["mse_predicted"].mean())})

    return (wide.groupby([*by, "method"], sort=False)[["mse_n", "mse", "mse_var", "mse_predicted"]]
            .apply(pool).reset_index())


def metric_means(rows: pd.DataFrame, metric: str, by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean of a final metric over populations, per group and method."""
    sel = rows[rows["metric"] == metric]
    return sel.groupby([*by, "method"], sort=False)["value"].mean().rename(metric).reset_index()


def mean_profile(rows: pd.DataFrame, method: str) -> list[float]:
    """Mean over populations of a profile's variances, in sequence order."""
    sel = rows[(rows["metric"] == "sigma2") & (rows["method"] == method)]
    return sel.groupby("position")["value"].mean().tolist()
