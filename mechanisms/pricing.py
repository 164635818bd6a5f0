"""The pricing game that regulates FL clients' noise (Hong & Duan, ``papers/pricing-fl-noise.txt``).

Client ``i`` with privacy sensitivity ``alpha_i`` adds ``N(0, sigma_i^2)`` to its parameters and
pays ``J_i = (1 - alpha_i) L^u(sigma) + alpha_i c S / sigma_i`` (eq 4-5), where the loss bound is
``L^u = kappa Delta (1 + Delta / (2 L_F))`` (eq 9) and ``Delta`` the aggregate's error scale:
``(sum_j sigma_j^-2)^(-1/2)`` for the MLE rule (eq 8) or ``sqrt(sum_j sigma_j^2) / N`` for the
plain mean (eq 7). ``sigma_i = inf`` (opting out) is a legal strategy. The server may charge
``P_i = beta_i (w~_i - mean w~)^2 - q`` (Definition 4), whose expectation per coordinate is
``beta_i [((N-1)/N)^2 sigma_i^2 + sum_{j != i} sigma_j^2 / N^2] - q``.

Where the printed formulas fail (eq 12's ``beta_i*``, the compensation ``q``, the claim that the
solution of eq 10 is an equilibrium), the docstrings say what is derived instead and
``docs/errata.md`` lists it with its test.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from privgames.mechanisms.validation import ConfigError

AGGREGATIONS = ("mle", "mean")
#: Grid of the global best response: sigma from ``ref * 10^-GRID_DECADES`` to ``ref * 10^+``,
#: then a bisection between the best point's neighbours to ``LOG_TOLERANCE`` in ``log sigma``
#: (1e-13 relative in sigma).
GRID_DECADES = 8.0
GRID_POINTS = 161
LOG_TOLERANCE = 1e-13


def _alpha(alpha: ArrayLike) -> NDArray:
    a = np.asarray(alpha, dtype=float)
    if a.ndim != 1 or a.size < 2:
        raise ConfigError(f"alpha must list N >= 2 sensitivities, got shape {a.shape}")
    if np.any(~np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ConfigError(f"alpha={a.tolist()!r} is out of range: every alpha_i must lie in [0, 1]")
    return a


def _check_aggregation(aggregation: str) -> None:
    if aggregation not in AGGREGATIONS:
        raise ConfigError(f"aggregation={aggregation!r} is not allowed: aggregation must be one of "
                         + ", ".join(AGGREGATIONS))


def error_scale(sigma: ArrayLike, aggregation: str = "mle") -> NDArray:
    """``Delta``: ``(sum_j sigma_j^-2)^(-1/2)`` (MLE, eq 8-9; opted-out clients add nothing) or
    ``sqrt(sum_j sigma_j^2) / N`` (mean, eq 7; one opted-out client makes it infinite). Works
    on the last axis."""
    _check_aggregation(aggregation)
    s = np.asarray(sigma, dtype=float)
    with np.errstate(divide="ignore"):
        if aggregation == "mle":
            return np.sum(s**-2.0, axis=-1) ** -0.5
        return np.sqrt(np.sum(s * s, axis=-1)) / s.shape[-1]


def loss_bound(delta: ArrayLike, kappa: float, L_F: float) -> NDArray:
    """Eq (9): ``kappa Delta (1 + Delta / (2 L_F))``."""
    d = np.asarray(delta, dtype=float)
    return kappa * d * (1.0 + d / (2.0 * L_F))


def privacy_loss(sigma: ArrayLike, c: float, S: float) -> NDArray:
    """Eq (4): the Gaussian mechanism's ``c S / sigma`` (0 when opting out, ``inf`` at 0)."""
    with np.errstate(divide="ignore"):
        return c * S / np.asarray(sigma, dtype=float)


def client_costs(sigma: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float, c: float,
                 S: float, aggregation: str = "mle") -> NDArray:
    """Eq (5): every client's ``J_i`` at the profile ``sigma``."""
    a = _alpha(alpha)
    u = loss_bound(error_scale(sigma, aggregation), kappa, L_F)
    with np.errstate(invalid="ignore"):  # alpha = 0 with sigma = 0: no privacy cost
        p = np.where(a > 0, a * privacy_loss(sigma, c, S), 0.0)
    return (1.0 - a) * u + p


def social_cost(sigma: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float, c: float,
                S: float, aggregation: str = "mle") -> float:
    """Eq (6): ``sum_i J_i`` (prices are transfers and cancel out)."""
    return float(np.sum(client_costs(sigma, alpha, kappa, L_F, c, S, aggregation)))


def expected_penalty(sigma: ArrayLike) -> NDArray:
    """``E[(w~_i - mean w~)^2] = ((N-1)/N)^2 sigma_i^2 + sum_{j != i} sigma_j^2 / N^2`` per
    coordinate (the clients' noises are independent)."""
    s2 = np.asarray(sigma, dtype=float) ** 2
    n = s2.size
    return ((n - 1) / n) ** 2 * s2 + (s2.sum() - s2) / n**2


def foc_summands(alpha: NDArray, aggregation: str) -> dict[str, NDArray]:
    """Per client, what the first-order profiles sum over all clients (so that a population
    split over shards computes them from totals, :func:`foc_profile_from`): ``1 - alpha_i``
    (``W``), ``(alpha_i / (1 - alpha_i))^e`` (eq 10) and ``alpha_i^e`` (eq 11, over ``W^e``),
    ``e = 2`` (MLE) or ``2/3`` (mean)."""
    if np.any((alpha <= 0) | (alpha >= 1)):
        raise ConfigError(f"alpha={alpha.tolist()!r}: the first-order conditions have an interior "
                         "solution only for every alpha_i in (0, 1) (at 0 or 1 the model is "
                         "degenerate: a client who ignores privacy adds no noise, one who "
                         "ignores accuracy opts out)")
    e = 2.0 if aggregation == "mle" else 2.0 / 3.0
    return {"W": 1.0 - alpha, "private": (alpha / (1.0 - alpha)) ** e, "social": alpha**e}


def foc_profile_from(alpha: NDArray, totals: dict[str, float], n: int, kappa: float,
                     L_F: float, c: float, S: float, aggregation: str,
                     social: bool) -> NDArray:
    """The profile at which every client's first-order condition holds, for the clients
    ``alpha`` of a population of ``n`` whose :func:`foc_summands` add up to ``totals``.

    MLE: the condition ``kappa w_i Delta^3 (Delta + L_F) / L_F = alpha_i c S sigma_i`` makes
    ``sigma_i = (w_i / alpha_i) g(Delta)``; summing ``sigma_i^-2`` gives the cubic
    ``Delta^2 (Delta + L_F) = L_F c S / (kappa R)``, ``R = (sum_i (alpha_i / w_i)^2)^(-1/2)``,
    with one positive root. Mean: ``d Delta / d sigma_i = sigma_i / (N^2 Delta)`` makes
    ``sigma_i^3 = alpha_i c S N^2 Delta / (kappa w_i (1 + Delta / L_F))``; ``Delta`` solves the
    scalar fixed point ``N Delta = sqrt(sum_i sigma_i(Delta)^2)``, where ``sum_i sigma_i^2 =
    (c S N^2 Delta / (kappa (1 + Delta / L_F)))^(2/3) sum_i (alpha_i / w_i)^(2/3)``. O(N).
    """
    big_w = totals["W"]
    w = np.full(alpha.size, big_w) if social else 1.0 - alpha
    spread = (totals["social"] / big_w ** (2.0 if aggregation == "mle" else 2.0 / 3.0)
              if social else totals["private"])  # sum_i (alpha_i / w_i)^e
    with np.errstate(divide="ignore", invalid="ignore"):
        if aggregation == "mle":
            ratio = w / alpha  # sigma_i / g(Delta)
            t = L_F * c * S * math.sqrt(spread) / kappa
            hi = min(t ** (1 / 3), math.sqrt(t / L_F))
            delta = brentq(lambda d: d * d * (d + L_F) - t, 0.0, hi * (1 + 1e-12) + 1e-300,
                           xtol=1e-300, rtol=4 * np.finfo(float).eps)
            return ratio * kappa * delta**3 * (delta + L_F) / (L_F * c * S)

        def drive(d: float) -> float:  # sigma_i(d)^3 = drive(d) alpha_i / w_i
            return c * S * n * n * d / (kappa * (1 + d / L_F))

        def gap(log_d: float) -> float:
            d = math.exp(log_d)
            return math.log(math.sqrt(drive(d) ** (2.0 / 3.0) * spread) / n) - log_d

        scale = (c * S / kappa) ** 0.5 + L_F  # gap falls through 0 once on the log scale
        lo, hi = math.log(scale) - 5.0, math.log(scale) + 5.0
        while gap(lo) < 0:
            lo -= 10.0
        while gap(hi) > 0:
            hi += 10.0
        return np.cbrt(alpha * drive(math.exp(brentq(gap, lo, hi, xtol=1e-15))) / w)


def _foc_profile(alpha: NDArray, kappa: float, L_F: float, c: float, S: float,
                 aggregation: str, social: bool) -> NDArray:
    """:func:`foc_profile_from` for a whole population."""
    totals = {k: float(np.sum(v)) for k, v in foc_summands(alpha, aggregation).items()}
    return foc_profile_from(alpha, totals, alpha.size, kappa, L_F, c, S, aggregation, social)


def equilibrium_noise(alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                      aggregation: str = "mle") -> NDArray:
    """The solution of eq (10) (every client's first-order condition, ``w_i = 1 - alpha_i``).

    Whether it is a Nash equilibrium is a separate question (:func:`is_equilibrium`): the
    first-order point can be a local maximum of ``J_i`` or be beaten by opting out.
    """
    _check_aggregation(aggregation)
    return _foc_profile(_alpha(alpha), kappa, L_F, c, S, aggregation, social=False)


def optimal_noise(alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                  aggregation: str = "mle") -> NDArray:
    """The solution of eq (11) (the social cost's first-order conditions, ``w_i = sum_j (1 -
    alpha_j)``); :func:`social_optimum` checks it against direct minimisation."""
    _check_aggregation(aggregation)
    return _foc_profile(_alpha(alpha), kappa, L_F, c, S, aggregation, social=True)


def penalty_coefficients(alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                         aggregation: str = "mle") -> NDArray:
    """Penalty coefficients ``beta_i`` that make the social optimum ``sigma**`` (eq 11) every
    client's first-order point under the penalty (Definition 4), derived here.

    At ``sigma**`` client ``i``'s marginal privacy gain ``alpha_i c S / sigma_i^2`` exceeds its
    own marginal accuracy loss by the externality it imposes on the others; the penalty's
    marginal cost ``2 beta_i ((N-1)/N)^2 sigma_i`` must equal it:
    ``beta_i = (N / (N-1))^2 (W - w_i) L'(Delta) dDelta/dsigma_i / (2 sigma_i)`` with
    ``W = sum_j (1 - alpha_j)``, ``L'`` the derivative of eq (9). For MLE that is
    ``beta_i = N^2 (W - (1 - alpha_i)) alpha_i c S / (2 (N-1)^2 W sigma_i**^3)``; the printed
    eq (12) (``alpha_j`` inside the sum, ``sum_i (1 - alpha_i) sigma_i**^3`` below) does not
    satisfy the first-order condition (``docs/errata.md``).
    """
    a = _alpha(alpha)
    s = optimal_noise(a, kappa, L_F, c, S, aggregation)
    return penalty_from(a, s, float(error_scale(s, aggregation)), float(np.sum(1.0 - a)),
                        a.size, kappa, L_F, aggregation)


def penalty_from(alpha: NDArray, s: NDArray, d: float, total: float, n: int, kappa: float,
                 L_F: float, aggregation: str) -> NDArray:
    """:func:`penalty_coefficients` of clients ``alpha`` at eq (11)'s ``s``, from the
    population's ``Delta = d``, ``W = total`` and size ``n`` (a population over shards)."""
    slope = kappa * (1.0 + d / L_F)  # dL^u/dDelta
    dd = d**3 / s**3 if aggregation == "mle" else s / (n * n * d)  # dDelta/dsigma_i
    return (n / (n - 1)) ** 2 * (total - (1.0 - alpha)) * slope * dd / (2.0 * s)


def printed_penalty_coefficients(alpha: ArrayLike, kappa: float, L_F: float, c: float,
                                 S: float) -> NDArray:
    """Eq (12) as printed: ``N^2 sum_{j != i} (1 - alpha_j) alpha_j c S / (2 (N-1)^2
    sum_i (1 - alpha_i) sigma_i**^3)`` (MLE), kept to show that it misses the optimum."""
    a = _alpha(alpha)
    s = optimal_noise(a, kappa, L_F, c, S, "mle")
    n = a.size
    num = np.sum((1 - a) * a) - (1 - a) * a
    return n * n * num * c * S / (2 * (n - 1) ** 2 * np.sum((1 - a) * s**3))


def compensation(beta: ArrayLike, sigma: ArrayLike) -> float:
    """Ex-ante budget balance: ``q = (1/N) sum_i beta_i E[(w~_i - mean)^2]`` at ``sigma``, so
    the expected prices sum to zero. The printed ``q = 2 (N-1)^2 / N sum_i beta_i sigma_i**``
    is not even in the units of a penalty (``sigma``, not ``sigma^2``)."""
    b = np.asarray(beta, dtype=float)
    return float(np.sum(b * expected_penalty(sigma)) / b.size)


def own_cost(sigma_i: ArrayLike, others: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float,
             c: float, S: float, aggregation: str, beta: ArrayLike, n: int) -> NDArray:
    """``J_i`` (plus the expected penalty's own part) for candidate ``sigma_i`` in ``[0, inf]``
    (any shapes broadcasting together). ``others`` is the rest of the aggregate: ``sum_{j != i}
    sigma_j^-2`` (MLE) or ``sum_{j != i} sigma_j^2`` (mean). A term that vanishes at an end
    (privacy with ``alpha = 0`` at ``sigma = 0``, the penalty with ``beta = 0`` at ``sigma =
    inf``) is 0, not ``0 * inf`` (:mod:`~privgames.mechanisms.pricing_kernels`, whose compiled
    formula this is; callers silence the floating-point warnings of the ends)."""
    from privgames.mechanisms.pricing_kernels import costs

    return costs(sigma_i, others, alpha, beta, kappa, L_F, c, S, aggregation == "mle", n)


def best_responses(sigma: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float, c: float,
                   S: float, beta: ArrayLike | None = None,
                   aggregation: str = "mle") -> NDArray:
    """Every client's global best response to the others' current noise, at once.

    ``J_i`` is minimised over the whole range ``[0, inf]`` (:func:`global_best_response`);
    O(N x grid) in numpy: N = 10^4 takes a fraction of a second.
    """
    _check_aggregation(aggregation)
    a = _alpha(alpha)
    s = np.asarray(sigma, dtype=float)
    b = np.zeros(a.size) if beta is None else np.broadcast_to(np.asarray(beta, float), a.shape)
    return global_best_response(rest_of_aggregate(s, aggregation), a, b, a.size, kappa, L_F, c, S,
                                aggregation, reference_scale(s, kappa, L_F, c, S))


def global_best_response(others: NDArray, alpha: NDArray, beta: NDArray, n: int, kappa: float,
                         L_F: float, c: float, S: float, aggregation: str,
                         ref: float) -> NDArray:
    """The minimiser over ``sigma_i in [0, inf]`` of each listed client's cost, given the rest
    of the aggregate (``others``, see :func:`best_responses`) and its penalty coefficient.

    A log grid of ``GRID_POINTS`` points over ``ref * 10^(+-GRID_DECADES)``; between the best
    point's neighbours, the sign change of the cost's derivative (which, unlike the cost
    itself, keeps its precision near the minimum) by bisection in ``log sigma`` to
    ``LOG_TOLERANCE``; then the ends: ``sigma = inf`` (opting out; infinitely penalised when
    ``beta > 0``) and, for ``alpha_i = 0``, ``sigma = 0``. Compiled, one client at a time
    (:func:`privgames.mechanisms.pricing_kernels.best_responses`): a client moving in turn pays
    a few microseconds, not numpy's per-call overhead.
    """
    from privgames.mechanisms.pricing_kernels import best_responses as search

    def column(x: ArrayLike) -> NDArray:
        return np.ascontiguousarray(x, dtype=np.float64).reshape(-1)

    return search(column(others), column(alpha), column(beta), int(n), float(kappa),
                  float(L_F), float(c), float(S), aggregation == "mle", float(ref),
                  _LOG_OFFSETS, _MULTIPLES, LOG_TOLERANCE)


#: The log grid's offsets from ``log(ref)`` and the same as multiples of ``ref``.
_LOG_OFFSETS = np.linspace(-GRID_DECADES, GRID_DECADES, GRID_POINTS) * np.log(10)
_MULTIPLES = np.exp(_LOG_OFFSETS)


def rest_of_aggregate(sigma: NDArray, aggregation: str) -> NDArray:
    """Each client's view of the rest of the aggregate: ``sum_{j != i} sigma_j^-2`` (MLE) or
    ``sum_{j != i} sigma_j^2`` (mean), infinite when another client's part is."""
    parts = aggregate_parts(sigma, aggregation)
    total = np.sum(parts)
    if math.isfinite(total):  # no infinite part: the common case, in two numpy calls
        return total - parts
    finite = np.isfinite(parts)
    return rest_from_total(parts, float(np.sum(parts[finite])), int(np.sum(~finite)))


def aggregate_parts(sigma: NDArray, aggregation: str) -> NDArray:
    """Each client's part of the aggregate: ``sigma^-2`` (MLE) or ``sigma^2`` (mean)."""
    with np.errstate(divide="ignore", over="ignore"):
        return sigma**-2.0 if aggregation == "mle" else sigma**2


def rest_from_total(parts: NDArray, total: float, infinite: int) -> NDArray:
    """:func:`rest_of_aggregate` for clients with ``parts``, from the population's sum of finite
    parts ``total`` and count of infinite ones (a population split over shards)."""
    if infinite == 0:
        return total - parts
    return np.where(np.isfinite(parts), np.inf, np.inf if infinite > 1 else total)


def best_response(i: int, sigma: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float,
                  c: float, S: float, beta: ArrayLike | None = None,
                  aggregation: str = "mle") -> float:
    """Client ``i``'s global best response (may be ``inf``: opting out)."""
    return float(best_responses(sigma, alpha, kappa, L_F, c, S, beta, aggregation)[i])


def reference_scale(sigma: NDArray, kappa: float, L_F: float, c: float, S: float) -> float:
    """Where the best-response grid is centred: the geometric mean of the positive finite noise
    levels (without any, a scale of the game's constants)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a 0 and an inf: nan
        total = float(np.add.reduce(np.log(sigma)))
    if math.isfinite(total):  # every level positive and finite: the common case
        return float(np.exp(total / sigma.size))
    finite = sigma[np.isfinite(sigma) & (sigma > 0)]
    return scale_from_logs(float(np.sum(np.log(finite))), finite.size, kappa, L_F, c, S)


def scale_from_logs(logs: float, count: int, kappa: float, L_F: float, c: float,
                    S: float) -> float:
    """:func:`reference_scale` from the sum of the logs of the ``count`` positive finite noise
    levels (kept up to date while clients move in turn)."""
    if count:
        return float(np.exp(logs / count))
    return (c * S / kappa) ** 0.5 + L_F


def is_equilibrium(sigma: ArrayLike, alpha: ArrayLike, kappa: float, L_F: float, c: float,
                   S: float, beta: ArrayLike | None = None, aggregation: str = "mle",
                   rtol: float = 1e-9) -> NDArray:
    """Per client: is ``sigma_i`` a global best response (its cost within ``rtol`` of the
    best response's, the others' noise fixed)?"""
    a = _alpha(alpha)
    s = np.asarray(sigma, dtype=float)
    n = a.size
    b = np.zeros(n) if beta is None else np.broadcast_to(np.asarray(beta, float), (n,))
    br = best_responses(s, a, kappa, L_F, c, S, b, aggregation)
    args = (rest_of_aggregate(s, aggregation), a, kappa, L_F, c, S, aggregation, b, n)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        now, best = own_cost(s, *args), own_cost(br, *args)
    return now <= best + rtol * np.abs(best) + 1e-300


def social_optimum(alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                   aggregation: str = "mle") -> NDArray:
    """The minimiser of the social cost (eq 6) over ``[0, inf]^N``, derived here.

    Mean rule: the social cost is convex in ``sigma`` (``Delta`` is a norm, eq 9 increases
    convexly in it, ``c S / sigma`` is convex), so the first-order point of eq (11) is the
    optimum. MLE rule: with ``x_i = 1 / sigma_i`` the privacy cost ``c S sum alpha_i x_i`` is
    linear and the precision ``sum x_i^2`` convex, so for any privacy spend the precision is
    largest at a vertex: only the least sensitive client adds (finite) noise, the others opt
    out, and its ``Delta`` solves ``kappa W (1 + Delta / L_F) Delta^2 = alpha_min c S``. The
    interior point of eq (11) is then a saddle, not the optimum (``docs/errata.md``).
    """
    a = _alpha(alpha)
    if aggregation == "mean":
        return optimal_noise(a, kappa, L_F, c, S, "mean")
    _check_aggregation(aggregation)
    k = int(np.argmin(a))
    total = float(np.sum(1.0 - a))
    out = np.full(a.size, np.inf)
    if a[k] == 0.0 or total == 0.0:
        out[k] = 0.0 if a[k] == 0.0 else np.inf
        return out
    t = a[k] * c * S / (kappa * total)
    hi = min(math.sqrt(t), (t * L_F) ** (1 / 3))
    out[k] = brentq(lambda d: d * d * (1 + d / L_F) - t, 0.0, hi * (1 + 1e-12),
                    xtol=1e-300, rtol=4 * np.finfo(float).eps)
    return out


def poa_family(N: int, alpha: float = 0.5, kappa: float = 1.0, L_F: float = 1.0,
               c: float = 1.0, S: float = 1.0) -> float:
    """Proposition 3 made concrete: ``N`` clients of one type ``alpha`` under the mean rule
    (where eq 10 is the equilibrium and eq 11 the optimum, both checked). Each client weighs
    only its own ``1 - alpha`` of the accuracy the ``N`` share, so the PoA grows without
    bound in ``N`` (about like ``sqrt(N)``)."""
    return price_of_anarchy(np.full(N, alpha), kappa, L_F, c, S, "mean")


def price_of_anarchy(alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                     aggregation: str = "mle") -> float:
    """``SC(eq 10 profile) / SC(eq 11 profile)`` (Definition 3)."""
    args = (kappa, L_F, c, S)
    ne = equilibrium_noise(alpha, *args, aggregation)
    so = optimal_noise(alpha, *args, aggregation)
    return (social_cost(ne, alpha, *args, aggregation)
            / social_cost(so, alpha, *args, aggregation))
