"""The Gaussian mechanism and its accounting (Chained-DP paper, eq 2-3 and Corollary 1).

Two accountings of a release carrying ``N(0, sigma^2)`` noise on a query of l2 sensitivity
``Delta``:

* :func:`analytic_epsilon` / :func:`analytic_sigma` — exact at every epsilon (Balle & Wang 2018,
  "Improving the Gaussian Mechanism for Differential Privacy", Theorem 8): the smallest
  ``epsilon`` with ``Phi(Delta/2sigma - epsilon sigma/Delta) - e^epsilon Phi(-Delta/2sigma -
  epsilon sigma/Delta) <= delta``. Every epsilon privgames reports comes from here.
* :func:`classical_epsilon` / :func:`classical_sigma` — eq (3) of the paper, ``sigma = Delta
  sqrt(2 log(1.25/delta)) / epsilon``, valid only for ``epsilon < 1`` (Dwork & Roth, Theorem
  A.1). It is reported beside the exact value as ``epsilon_paper``; outside ``epsilon < 1`` it is
  not a guarantee (``docs/errata.md``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize.elementwise import find_root
from scipy.special import log_ndtr

from privgames.mechanisms.validation import ConfigError


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta={delta!r} is out of range: delta must lie in (0, 1)")


def _check_positive(name: str, value: ArrayLike) -> NDArray:
    v = np.asarray(value, dtype=float)
    if np.any(np.isnan(v)) or np.any(v <= 0):
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be > 0")
    return v


def gaussian_delta(epsilon: ArrayLike, sigma: ArrayLike, sensitivity: float) -> NDArray:
    """Exact ``delta(epsilon)`` of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    The hockey-stick divergence ``E_P[(1 - e^(epsilon - L))_+]`` of the privacy loss
    ``L ~ N(mu, 2 mu)``, ``mu = Delta^2 / (2 sigma^2)``, in closed form. Evaluated in log space,
    so tiny deltas keep their relative precision.
    """
    return np.exp(_log_delta(np.asarray(epsilon, dtype=float),
                             np.asarray(sensitivity, dtype=float) / np.asarray(sigma, dtype=float)))


def _log_delta(epsilon: NDArray, u: NDArray) -> NDArray:
    """``log delta(epsilon)`` with ``u = Delta / sigma``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        high = log_ndtr(u / 2.0 - epsilon / u)
        low = epsilon + log_ndtr(-u / 2.0 - epsilon / u)
        return high + np.log1p(-np.exp(np.minimum(low - high, 0.0)))


def analytic_epsilon(sigma: ArrayLike, delta: float, sensitivity: float) -> NDArray:
    """Exact epsilon of one Gaussian release with noise standard deviation ``sigma``.

    The smallest ``epsilon >= 0`` with ``delta(epsilon) <= delta`` (:func:`gaussian_delta`),
    vectorized over ``sigma`` with a bracketing root finder on ``log delta(epsilon)``, which is
    decreasing. The bracket's upper end comes from the tail bound ``P(L > epsilon) <=
    exp(-(epsilon - mu)^2 / (4 mu))``. ``sigma = 0`` gives ``inf``, ``sigma = inf`` gives 0.
    """
    _check_delta(delta)
    _check_positive("sensitivity", sensitivity)
    s = np.asarray(sigma, dtype=float)
    if np.any(np.isnan(s)) or np.any(s < 0):
        raise ConfigError(f"sigma={sigma!r} is out of range: sigma must be >= 0")
    with np.errstate(divide="ignore"):
        u = np.broadcast_to(sensitivity / s, s.shape).astype(float)
    out = np.where(u == 0.0, 0.0, np.inf)
    work = (u > 0) & np.isfinite(u)
    if np.any(work):
        uw = u[work]
        log_target = math.log(delta)
        needs_noise = _log_delta(np.zeros_like(uw), uw) > log_target
        mu = uw * uw / 2.0
        hi = mu + 2.0 * np.sqrt(mu * math.log(1.0 / delta)) + 1.0
        res = find_root(lambda e, uu: _log_delta(e, uu) - log_target,
                        (np.zeros_like(uw), hi), args=(uw,),
                        tolerances={"xatol": 1e-14, "xrtol": 4 * np.finfo(float).eps})
        out[work] = np.where(needs_noise, res.x, 0.0)
    return out if out.ndim else out[()]


def analytic_sigma(epsilon: ArrayLike, delta: float, sensitivity: float) -> NDArray:
    """The smallest noise standard deviation giving ``(epsilon, delta)``-DP exactly.

    The inverse of :func:`analytic_epsilon`: ``delta(epsilon)`` falls as ``sigma`` grows, so the
    root of ``log delta = log target`` is bracketed in ``log(Delta / sigma)``.
    """
    _check_delta(delta)
    _check_positive("sensitivity", sensitivity)
    eps = _check_positive("epsilon", epsilon)
    log_target = math.log(delta)
    # u = Delta/sigma: delta(eps) -> 0 as u -> 0 and -> 1 as u -> inf; bracket log u
    lo = np.full(eps.shape, -30.0)
    hi = np.log(2.0 * eps + 2.0 * math.sqrt(2.0 * math.log(2.0 / delta)) + 10.0)
    res = find_root(lambda t, e: _log_delta(e, np.exp(t)) - log_target, (lo, hi), args=(eps,),
                    tolerances={"xatol": 1e-15, "xrtol": 4 * np.finfo(float).eps})
    out = sensitivity / np.exp(res.x)
    return out if out.ndim else out[()]


def classical_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Noise standard deviation of the classical Gaussian mechanism, eq (3).

    ``sigma = sensitivity / epsilon * sqrt(2 log(1.25 / delta))``; a guarantee only for
    ``epsilon < 1`` (Dwork & Roth, Theorem A.1). Use :func:`analytic_sigma` to calibrate.
    """
    _check_delta(delta)
    if epsilon <= 0:
        raise ConfigError(f"epsilon={epsilon!r} is out of range: epsilon must be > 0")
    if sensitivity <= 0:
        raise ConfigError(f"sensitivity={sensitivity!r} is out of range: must be > 0")
    return sensitivity / epsilon * math.sqrt(2.0 * math.log(1.25 / delta))


def classical_epsilon(sigma: ArrayLike, delta: float, sensitivity: float) -> NDArray:
    """Eq (3) inverted (the paper's epsilon, reported as ``epsilon_paper``).

    ``epsilon = sensitivity sqrt(2 log(1.25/delta)) / sigma``. Corollary 1 applies it to the sum
    of independent noises (``sigma^2 = sum_i sigma_i^2``). Where this exceeds 1 it is outside
    the formula's range of validity and is no DP guarantee; :func:`analytic_epsilon` is exact.
    """
    _check_delta(delta)
    s = np.asarray(sigma, dtype=float)
    with np.errstate(divide="ignore"):
        return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / s


def gaussian_mechanism(
    value: ArrayLike, variance: float, rng: np.random.Generator
) -> NDArray:
    """Release ``value + N(0, variance I)``, eq (2)."""
    if variance < 0:
        raise ConfigError(f"variance={variance!r} is out of range: variance must be >= 0")
    v = np.asarray(value, dtype=float)
    return v + math.sqrt(variance) * rng.standard_normal(v.shape)
