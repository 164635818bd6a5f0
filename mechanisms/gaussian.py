"""The Gaussian mechanism and its accounting (Chained-DP paper, eq 2-3 and Corollary 1)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta={delta!r} is out of range: delta must lie in (0, 1)")


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Noise standard deviation of the Gaussian mechanism, eq (3).

    sigma = sensitivity / epsilon * sqrt(2 log(1.25 / delta)).
    """
    _check_delta(delta)
    if epsilon <= 0:
        raise ValueError(f"epsilon={epsilon!r} is out of range: epsilon must be > 0")
    if sensitivity <= 0:
        raise ValueError(f"sensitivity={sensitivity!r} is out of range: must be > 0")
    return sensitivity / epsilon * math.sqrt(2.0 * math.log(1.25 / delta))


def gaussian_epsilon(total_variance: ArrayLike, delta: float, sensitivity: float) -> NDArray:
    """Privacy budget of a release carrying Gaussian noise of ``total_variance`` (Corollary 1).

    Independent Gaussian noises add their variances, so eq (3) is inverted at
    ``sigma^2 = sum_i sigma_i^2``: ``epsilon = sensitivity * sqrt(2 log(1.25/delta) / sigma^2)``.
    Corollary 1 states only the order ``O(1/sqrt(sum sigma_i^2))``; this is the exact constant.
    A release without noise has ``epsilon = inf``.
    """
    _check_delta(delta)
    v = np.asarray(total_variance, dtype=float)
    with np.errstate(divide="ignore"):
        return sensitivity * np.sqrt(2.0 * math.log(1.25 / delta) / v)


def gaussian_mechanism(
    value: ArrayLike, variance: float, rng: np.random.Generator
) -> NDArray:
    """Release ``value + N(0, variance I)``, eq (2)."""
    if variance < 0:
        raise ValueError(f"variance={variance!r} is out of range: variance must be >= 0")
    v = np.asarray(value, dtype=float)
    return v + math.sqrt(variance) * rng.standard_normal(v.shape)
