"""Summaries of tidy result rows: pooled Monte-Carlo means with standard errors, profiles."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def pooled(rows: pd.DataFrame, metric: str, by: Sequence[str] = (),
           theory: str = "predicted") -> pd.DataFrame:
    """Pool per-population Monte-Carlo means into one mean and standard error per group.

    Each population reports ``metric`` (a mean of ``metric_n`` draws) and ``metric_var`` (their
    sample variance); the pooled variance adds the within- and between-population parts and the
    standard error is ``sqrt(pooled variance / total draws)``. ``metric_predicted`` (the theory)
    is averaged over populations (``metric_bound`` with ``theory="bound"``: an inequality, not a
    prediction). Groups are ``by`` and ``method``.
    """
    names = [metric, f"{metric}_var", f"{metric}_n", f"{metric}_{theory}"]
    wide = rows[rows["metric"].isin(names)].pivot_table(
        index=[*by, "method", "population"], columns="metric", values="value",
        aggfunc="first").reset_index().reindex(columns=[*by, "method", "population", *names])

    def pool(g: pd.DataFrame) -> pd.Series:
        n, m, v = g[f"{metric}_n"].to_numpy(), g[metric].to_numpy(), g[f"{metric}_var"].to_numpy()
        total = n.sum()
        grand = float(np.sum(n * m) / total)
        var = (np.sum((n - 1) * v) + np.sum(n * (m - grand) ** 2)) / max(total - 1, 1)
        return pd.Series({metric: grand, f"{metric}_se": float(np.sqrt(var / total)),
                          f"{metric}_{theory}": float(g[f"{metric}_{theory}"].mean())})

    return wide.groupby([*by, "method"], sort=False)[names].apply(pool).reset_index()


def mean_rows(name: str, samples: np.ndarray, predicted: float,
              theory: str = "predicted") -> list[dict]:
    """Tidy rows ``name``, ``name_var``, ``name_n``, ``name_predicted`` for :func:`pooled`
    (``name_bound`` with ``theory="bound"``)."""
    return [{"metric": name, "value": float(samples.mean())},
            {"metric": f"{name}_var", "value": float(samples.var(ddof=1)) if samples.size > 1
             else 0.0},
            {"metric": f"{name}_n", "value": float(samples.size)},
            {"metric": f"{name}_{theory}", "value": float(predicted)}]


def metric_means(rows: pd.DataFrame, metric: str, by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean of a final metric over populations, per group and method."""
    sel = rows[rows["metric"] == metric]
    return sel.groupby([*by, "method"], sort=False)["value"].mean().rename(metric).reset_index()


def mean_profile(rows: pd.DataFrame, method: str) -> list[float]:
    """Mean over populations of a profile's variances, in sequence order."""
    sel = rows[(rows["metric"] == "sigma2") & (rows["method"] == method)]
    return sel.groupby("position")["value"].mean().tolist()
