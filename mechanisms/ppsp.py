"""Privacy-preserving summation on a directed ring (Liu et al., SI-/AI-PPSP).

Node ``i`` holds ``x_i(k)``, draws ``beta_i(k)`` with standard deviation ``v_i(k)`` (the paper's
step 2: "variance ``v_i^2(k)``"), sends ``d_i(k) = x_i(k) - beta_i(k)`` to its successor and sets
``x_i(k+1) = beta_i(k) + d_{pred(i)}(k)``; in vector form ``x(k+1) = A x(k) + (I - A) beta(k)``
with ``A`` the cyclic shift. Schedules: harmonic ``v_i(k) = c_i / (k + d_i)`` and geometric
``v_i(k) = c_i phi_i^k``. Departures from the printed paper are listed in ``docs/errata.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms.gaussian import analytic_epsilon
from privgames.mechanisms.validation import ConfigError

SCHEDULES = ("harmonic", "geometric")


def noise_std(k: ArrayLike, c: ArrayLike, d: ArrayLike | None = None,
              phi: ArrayLike | None = None) -> NDArray:
    """``v_i(k)``: ``c/(k+d)`` when ``phi`` is None, else ``c phi^k`` (broadcasts)."""
    k = np.asarray(k, dtype=float)
    c = np.asarray(c, dtype=float)
    if phi is None:
        return c / (k + np.asarray(0.0 if d is None else d, dtype=float))
    return c * np.asarray(phi, dtype=float) ** k


def shift_step(x: NDArray, beta: NDArray) -> NDArray:
    """One SI-PPSP step over the last axis (ring order): ``x(k+1) = A x(k) + (I - A) beta(k)``."""
    return np.roll(x - beta, 1, axis=-1) + beta


def estimator_error_variance(std: Iterable[NDArray]) -> NDArray:
    """Exact ``var(y_i(k))`` from the noise standard deviations of the window's steps.

    Derived (not in the paper): ``y(k) - s 1 = sum_{j=k}^{k+n-2} (I - A^(k+n-1-j)) beta(j)``;
    older noise cancels because ``J A = J`` for the all-ones ``J``. So with ``t = k+n-1-j``,
    ``var(y_i(k)) = sum_{t=1}^{n-1} v_i(j)^2 + v_{i-t}(j)^2``. ``std`` gives the ``n - 1`` rows
    (an ``(n-1, n)`` array or any iterable of rows, so a large ring needs one row at a time):
    row ``r`` holds ``v(k + r)`` in ring order. This tends to 0, far inside the bounds of
    Theorems 1-2.
    """
    var = None
    for r, row in enumerate(std):
        n = row.size
        if var is None:
            var = np.zeros(n)
        var += row**2 + np.roll(row, n - 1 - r) ** 2
    return var


def utility_bound(c: ArrayLike, n: int, phi: ArrayLike | None = None) -> float:
    """Theorem 1: ``lim E sum_i |y_i(k) - sum s|`` is at most ``c_M pi n sqrt(n/6)`` (harmonic)
    or ``max_i c_i n sqrt(n / (1 - phi_i^2))`` (geometric)."""
    c = np.atleast_1d(np.asarray(c, dtype=float))
    if phi is None:
        return float(c.max() * math.pi * n * math.sqrt(n / 6.0))
    phi = np.broadcast_to(np.asarray(phi, dtype=float), c.shape)
    return float(np.max(c * n * np.sqrt(n / (1.0 - phi**2))))


def variance_bound(c: ArrayLike, n: int, phi: ArrayLike | None = None) -> float:
    """Theorem 2: ``lim sum_i var(y_i(k))`` is at most ``c_M^2 pi^2 n^2 / 3`` (harmonic) or
    ``max_i 2 n^2 c_i^2 / (1 - phi_i^2)`` (geometric)."""
    c = np.atleast_1d(np.asarray(c, dtype=float))
    if phi is None:
        return float(c.max() ** 2 * math.pi**2 * n**2 / 3.0)
    phi = np.broadcast_to(np.asarray(phi, dtype=float), c.shape)
    return float(np.max(2.0 * n**2 * c**2 / (1.0 - phi**2)))


def epsilon(K: int, delta: float, c: ArrayLike, d: ArrayLike | None = None,
            phi: ArrayLike | None = None, paper: bool = False) -> float:
    """Theorem 3: privacy budget of K-step SI-PPSP with Laplace noise against a global
    eavesdropper, for delta-adjacent secrets.

    The eavesdropper can form ``S_i(k) = s_i - beta_i(k)`` for every ``k`` (see
    :func:`eavesdropper_statistics`), so the privacy loss is ``delta sum_k 1/b_i(k)`` for Laplace
    scale ``b``. The paper's proof uses scale ``b = v`` while its protocol gives ``beta`` standard
    deviation ``v`` (scale ``v/sqrt(2)``); we keep the protocol's convention, so the budget is
    ``sqrt(2)`` times the printed one: harmonic ``sqrt(2) delta K ((K-1)/2 + d_M) / c_m``,
    geometric ``sqrt(2) delta (1 - phi_m^K) / (c_m (phi_m^(K-1) - phi_m^K))``. The K steps
    compose by basic (pure-DP) composition, which is exact here: the privacy loss attains
    the sum when every ``S_i(k)`` lies beyond the neighbouring secret. ``paper=True`` gives the
    printed budget (Laplace scale ``v``).
    """
    c_m = float(np.min(c))
    if phi is None:
        d_max = float(np.max(0.0 if d is None else d))
        total = K * ((K - 1) / 2.0 + d_max)
    else:
        p = float(np.min(phi))
        total = (1.0 - p**K) / (p ** (K - 1) - p**K)
    return (1.0 if paper else math.sqrt(2.0)) * delta * total / c_m


def gaussian_epsilon(K: int, delta: float, c: ArrayLike, d: ArrayLike | None = None,
                     phi: ArrayLike | None = None, dp_delta: float = 1e-5) -> float:
    """Exact epsilon of K-step SI-PPSP with Gaussian noise (Theorem 3 covers Laplace only).

    The eavesdropper's view of node ``i`` is ``S_i(k) = s_i - beta_i(k)``, ``k < K``
    (:func:`eavesdropper_statistics`): K Gaussian releases of ``s_i`` with sensitivity
    ``delta`` and standard deviations ``v_i(k)``. Their privacy-loss distributions compose by
    adding ``mu_k = delta^2 / (2 v_i(k)^2)``, i.e. one Gaussian release with
    ``sigma^-2 = sum_k v_i(k)^-2``; the exact epsilon at ``dp_delta`` is the analytic Gaussian's
    (:func:`~privgames.mechanisms.gaussian.analytic_epsilon`), for the worst node.
    """
    k = np.arange(K)[:, None]
    c = np.atleast_1d(np.asarray(c, dtype=float))
    v = noise_std(k, c, d, phi)
    sigma = float(np.min(np.sum(v**-2.0, axis=0) ** -0.5))
    return float(analytic_epsilon(sigma, dp_delta, delta))


def _privacy_coefficient(K: int, delta: float, d: float = 0.0) -> float:
    """``epsilon * c_m`` for the harmonic schedule (Theorem 3 with our convention)."""
    return math.sqrt(2.0) * delta * K * ((K - 1) / 2.0 + d)


def tradeoff_cost(c_max: ArrayLike, c_min: ArrayLike, gamma_u: float, gamma_a: float,
                  gamma_p: float, n: int, K: int, delta: float, d: float = 0.0) -> NDArray:
    """Theorem 4's weighted cost ``gamma_u M_u + gamma_a M_a + gamma_p M_p`` (harmonic schedule):
    utility and accuracy (Theorems 1-2) grow with the largest ``c``, the privacy budget
    (Theorem 3) with the inverse of the smallest."""
    c_max, c_min = np.asarray(c_max, dtype=float), np.asarray(c_min, dtype=float)
    return (gamma_u * c_max * math.pi * n * math.sqrt(n / 6.0)
            + gamma_a * c_max**2 * math.pi**2 * n**2 / 3.0
            + gamma_p * _privacy_coefficient(K, delta, d) / c_min)


def tradeoff_objective(c: ArrayLike, gamma_u: float, gamma_a: float, gamma_p: float, n: int,
                       K: int, delta: float, d: float = 0.0) -> NDArray:
    """:func:`tradeoff_cost` when every node uses the same ``c`` (the problem of Theorem 4)."""
    return tradeoff_cost(c, c, gamma_u, gamma_a, gamma_p, n, K, delta, d)


def optimal_c(gamma_u: float, gamma_a: float, gamma_p: float, n: int, K: int, delta: float,
              d: float = 0.0) -> float:
    """Theorem 4: the minimiser of :func:`tradeoff_objective`, the positive root of
    ``4 g_a pi^2 n^2 c^3 + sqrt(6) g_u pi n^(3/2) c^2 - 6 g_p E = 0`` with ``E = epsilon c_m``.

    With ``d = 0`` and the paper's Laplace convention ``E = delta K (K-1)/2`` this is the printed
    cubic (``6 E = 3 delta K (K-1)``); with ours ``E`` carries the factor ``sqrt(2)``. The root is
    unique: the cubic increases on ``c > 0`` from a negative value; it is found by
    :func:`optimal_c_each` (Newton, exact to a few ulps).
    """
    for name, g in (("gamma_u", gamma_u), ("gamma_a", gamma_a), ("gamma_p", gamma_p)):
        if g <= 0:
            raise ConfigError(f"{name}={g!r} is out of range: {name} must be > 0")
    return float(optimal_c_each(np.array([[gamma_u, gamma_a, gamma_p]], dtype=float), n, K,
                                delta, d)[0])


def _theorem4_cubic(gamma_u: ArrayLike, gamma_a: ArrayLike, gamma_p: ArrayLike, n: int,
                    K: int, delta: float, d: float) -> tuple:
    """Theorem 4's cubic ``A c^3 + B c^2 - E' = 0`` as ``(A, B, E')``."""
    return (4 * np.asarray(gamma_a) * math.pi**2 * n**2,
            math.sqrt(6) * np.asarray(gamma_u) * math.pi * n**1.5,
            6.0 * np.asarray(gamma_p) * _privacy_coefficient(K, delta, d))


def optimal_c_each(weights: NDArray, n: int, K: int, delta: float, d: float = 0.0) -> NDArray:
    """:func:`optimal_c` for each row ``(gamma_u, gamma_a, gamma_p)`` of ``weights`` at once
    (positive weights): Newton's method from above the root, where the cubic is convex and
    increasing, so the iterates fall monotonically to it; stopped when they no longer fall."""
    a, b, e = _theorem4_cubic(weights[:, 0], weights[:, 1], weights[:, 2], n, K, delta, d)
    c = np.maximum(np.cbrt(e / a), np.sqrt(e / b))  # each term alone reaches e there
    for _ in range(200):
        step = (c * c * (a * c + b) - e) / (c * (3.0 * a * c + 2.0 * b))
        nxt = c - np.maximum(step, 0.0)  # never above c
        if np.all(nxt >= c):  # no longer falls anywhere
            break
        c = nxt
    return c


def neighbour_statistics(sent_to: NDArray, sent_by: NDArray) -> NDArray:
    """``S_i(k) = s_i - beta_i(k)`` from what node ``i``'s two neighbours hold (axis -2: ``k``).

    ``sent_to`` are the messages ``d_{i-1}(k)`` the predecessor sent to ``i``, ``sent_by`` the
    ``d_i(k)`` the successor received from it. From ``x_i(k+1) - x_i(k) = d_{i-1}(k) - d_i(k)``,
    ``S_i(k) = d_i(k) + sum_{j<k} (d_i(j) - d_{i-1}(j))``.
    """
    drift = sent_by - sent_to
    return sent_by + np.cumsum(drift, axis=-2) - drift


def eavesdropper_statistics(messages: NDArray) -> NDArray:
    """``S_i(k)`` for every node from all transmitted ``d`` (``(..., K, n)``): a global
    eavesdropper can do for every node what colluding neighbours do for theirs."""
    return neighbour_statistics(np.roll(messages, 1, axis=-1), messages)


def best_linear_estimate(statistics: NDArray, std: NDArray) -> tuple[NDArray, NDArray]:
    """Best linear unbiased estimate of the secrets from ``S_i(k) = s_i - beta_i(k)``.

    Inverse-variance weights ``v_i(k)^-2``; returns the estimate and its variance
    ``1 / sum_k v_i(k)^-2``.
    """
    w = 1.0 / std**2
    return (statistics * w).sum(axis=-2) / w.sum(axis=-2), 1.0 / w.sum(axis=-2)


def distinguishing_accuracy_bound(eps: float) -> float:
    """Best balanced accuracy of any test between two neighbouring inputs under eps-DP."""
    return math.exp(eps) / (1.0 + math.exp(eps)) if eps < 700 else 1.0


def privacy_loss(statistics: NDArray, std: NDArray, secret: ArrayLike, other: ArrayLike,
                 noise: str = "laplace") -> NDArray:
    """Log-likelihood ratio ``log f(obs | s) - log f(obs | s')`` of a node's transcript.

    Given ``S(k) = s - beta(k)`` (axis -2 is ``k``), the transcript's density is
    ``prod_k f_k(s - S(k))``; for Laplace noise of standard deviation ``v`` (scale
    ``v/sqrt(2)``) the ratio is ``sum_k (|s' - S(k)| - |s - S(k)|) sqrt(2)/v(k)``, bounded by
    the budget of :func:`epsilon`; for Gaussian noise it is the quadratic analogue.
    """
    s, t = np.asarray(secret, dtype=float), np.asarray(other, dtype=float)
    if noise == "laplace":
        terms = (np.abs(t - statistics) - np.abs(s - statistics)) * math.sqrt(2.0) / std
    else:
        terms = ((t - statistics) ** 2 - (s - statistics) ** 2) / (2.0 * std**2)
    return terms.sum(axis=-2)
