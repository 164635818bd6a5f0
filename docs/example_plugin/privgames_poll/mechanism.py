"""The poll's mathematics (pure functions, numpy only).

Respondent ``i`` answers ``x_i`` in ``[0, Delta]`` plus ``Laplace(b_i)`` noise; the pollster
publishes the mean. Its cost is its privacy loss ``a_i epsilon_i = a_i Delta / b_i`` plus the
published mean's variance ``sum_j 2 b_j^2 / n^2``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def respondent_cost(b: ArrayLike, a: ArrayLike, Delta: float) -> NDArray:
    """Each respondent's cost at the scale profile ``b``."""
    b, a = np.asarray(b, dtype=float), np.asarray(a, dtype=float)
    return a * Delta / b + 2.0 * np.sum(b * b) / b.size**2


def equilibrium_scale(a: ArrayLike, Delta: float) -> NDArray:
    """The dominant-strategy equilibrium: ``b_i = (a_i Delta n^2 / 4)^(1/3)`` (first-order
    condition of :func:`respondent_cost` in ``b_i``; the cost is convex in ``b_i``)."""
    a = np.asarray(a, dtype=float)
    return (a * Delta * a.size**2 / 4.0) ** (1.0 / 3.0)


def mean_mse(b: ArrayLike) -> float:
    """Variance of the published mean: ``sum_j 2 b_j^2 / n^2``."""
    b = np.asarray(b, dtype=float)
    return float(2.0 * np.sum(b * b) / b.size**2)
