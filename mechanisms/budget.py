"""Series privacy-budget allocation, its optimisation and its protections.

Bai, Yang, Xiang & Wang, ``papers/budget-allocation-series.txt``, sections 4-6. A strategy
turns a total budget ``epsilon`` for ``n`` queries into a positive budget vector whose sum is at
most ``epsilon`` (Theorem 4, sequential composition). Every strategy here is calibrated (eq 17)
so that the whole budget is used, as in the paper's experiments (section 7.2.2).

Departures from the printed equations (``docs/errata.md``):

* the Taylor default ``t = e^(1 - [n/2])`` (eq 16) is read as ``[n/2] = (n + 1)/2``, the middle
  of the sequence (Table 4 is reproduced by that reading only; the literal ``floor(n/2)`` gives
  ``t = 1`` at ``n = 3``, outside ``(0, 1)``);
* Lemma 3's interval for ``U_s`` is ``[sqrt(2) n / epsilon, sqrt(2) / epsilon_min]``, the noise
  of the average allocation up to the noise of the smallest term (printed: ``sqrt(2) n /
  epsilon_k`` above, which Tables 3-5 do not use);
* the perturbation score (eq 34) is ``(n - i + 1) e^(x - i)`` (printed ``(N - i)``, which gives
  the last term the score 0 and the last draw the probabilities 0/0);
* Cormode's allocation is the geometric series with ratio ``2^(-1/3)`` (printed ``r = 2^(1/3)``,
  not a convergent ratio).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

from privgames.mechanisms.validation import Allowed, ConfigError, check_int, check_real

STRATEGIES = ("avg", "geo", "taylor", "flip-geo", "flip-taylor", "ac-geo", "ac-taylor",
              "bl-taylor", "ac-bl-taylor", "ac-flip-geo", "bisection", "cormode")
PROTECTIONS = ("none", "random", "perturb", "noisy-n")
TAYLOR_READINGS = ("middle", "floor")
SQRT2 = math.sqrt(2.0)


# --- the series (proportions k_i, eq 5) --------------------------------------------------------
def geometric_ratio(n: int) -> float:
    """Eq (14): ``r = (n - 1)/n``, the ratio that maximises the last term ``k_n(r)`` (eq 13);
    0.5 for a single query (any ratio gives the same calibrated ``[1]``)."""
    return (n - 1) / n if n > 1 else 0.5


def taylor_t(n: int, reading: str = "middle") -> float:
    """Eq (16): ``t = e^(1 - [n/2])``, maximising the middle term (eq 15). ``middle`` reads
    ``[n/2]`` as ``(n + 1)/2`` (reproduces Table 4); ``floor`` as ``floor(n/2)`` (literal,
    ``t = 1`` and so invalid for ``n < 4``)."""
    if reading not in TAYLOR_READINGS:
        raise ConfigError(f"reading={reading!r} is not allowed: reading must be one of "
                          + ", ".join(TAYLOR_READINGS))
    middle = (n + 1) / 2 if reading == "middle" else n // 2
    return math.exp(1.0 - middle)


def geometric(n: int, r: float) -> NDArray:
    """Eq (7): ``k_i = (1 - r) r^(i-1)``, ``i = 1..n`` (uncalibrated)."""
    return (1.0 - r) * r ** np.arange(n, dtype=float)


def taylor(n: int, t: float) -> NDArray:
    """Eq (12): ``k_i = t (ln 1/t)^(i-1) / (i-1)!``: the Poisson pmf with mean ``ln(1/t)`` at
    ``i - 1`` (computed in log space, so any ``t`` > 0 and ``n`` are safe; uncalibrated).
    Eq (16)'s default ``t`` underflows to 0 past ``n = 1491``: that is refused by name."""
    if t <= 0.0:
        raise ConfigError(f"t={t!r} is out of range: t must be in (0, 1); the default "
                          f"t = e^(1 - (n+1)/2) underflows for n = {n} > 1491 terms: give t",
                          "t", Allowed("real", 0.0, 1.0, True, True))
    lam = -math.log(t)
    i = np.arange(n, dtype=float)
    if lam == 0.0:
        return (i == 0).astype(float)
    return np.exp(-lam + i * math.log(lam) - gammaln(i + 1.0))


def calibrate(k: NDArray) -> NDArray:
    """Eq (17): ``k_i* = k_i / S_n``, so that the whole budget is used."""
    return k / k.sum()


def flip_horizontal(k: NDArray) -> NDArray:
    """Eq (19)-(20): the sequence reversed."""
    return k[::-1].copy()


def flip_vertical(k: NDArray) -> NDArray:
    """Eq (21): ``k_i^F = (1 - k_i*) / (n - 1)`` of a calibrated sequence (sums to 1)."""
    n = k.size
    return k.copy() if n == 1 else (1.0 - k) / (n - 1)


def compound(k: NDArray, alpha: float) -> NDArray:
    """Eq (30): ``k_i^A = (alpha / n + k_i*) / (alpha + 1)``: a mix with the average."""
    return (alpha / k.size + k) / (alpha + 1.0)


def acceptable_alpha(k: NDArray, epsilon: float, U_s: float) -> float:
    """Eq (29) with equality: the smallest ``alpha`` that makes every term of the compounded
    sequence acceptable (Lemma 1: ``epsilon_i >= sqrt(2) / U_s``); ``inf`` at the lower end of
    Lemma 3's interval (only the average is acceptable), 0 at the upper end."""
    need = SQRT2 / (epsilon * U_s)
    if need >= 1.0 / k.size:
        return math.inf
    return max((need - float(k.min())) / (1.0 / k.size - need), 0.0)


def us_interval(k: NDArray, epsilon: float) -> tuple[float, float]:
    """Lemma 3 (as Tables 3-5 compute it): ``[sqrt(2) n / epsilon, sqrt(2) / (epsilon k_min)]``
    for the calibrated sequence ``k``."""
    return SQRT2 * k.size / epsilon, SQRT2 / (epsilon * float(k.min()))


# --- strategies ----------------------------------------------------------------------------------
def _params(n: int, r: float | None, t: float | None) -> tuple[float, float]:
    r = geometric_ratio(n) if r is None else check_real("r", r, 0.0, 1.0, True, True)
    t = taylor_t(n) if t is None else check_real("t", t, 0.0, 1.0, True, True)
    return r, t


_BASE: dict[str, Callable[[int, float, float], NDArray]] = {
    "avg": lambda n, r, t: np.full(n, 1.0 / n),
    "geo": lambda n, r, t: calibrate(geometric(n, r)),
    "taylor": lambda n, r, t: calibrate(taylor(n, t)),
    "flip-geo": lambda n, r, t: flip_horizontal(calibrate(geometric(n, r))),
    "flip-taylor": lambda n, r, t: flip_vertical(calibrate(taylor(n, t))),
    "bl-taylor": lambda n, r, t: compound(calibrate(taylor(n, t)), 1.0),
    # Dwork's bisection: eps/2, eps/4, ... (the geometric series with r = 1/2), calibrated
    "bisection": lambda n, r, t: calibrate(geometric(n, 0.5)),
    # Cormode et al.'s 2^((N - i)/3) eps (2^(1/3) - 1) / (2^((N+1)/3) - 1), i = 1..N, calibrated
    "cormode": lambda n, r, t: calibrate(geometric(n, 2.0 ** (-1.0 / 3.0))),
}


def proportions(strategy: str, n: int, epsilon: float = 1.0, r: float | None = None,
                t: float | None = None, U_s: float | None = None,
                n_name: str = "n") -> NDArray:
    """The calibrated proportions ``k_i*`` (summing to 1) of ``strategy`` for ``n`` queries.

    ``ac-X`` compounds ``X`` with the average (eq 29-30) so that every term is acceptable for
    the noise bound ``U_s`` (default: the middle of Lemma 3's interval, as the paper sets it);
    a ``U_s`` outside the interval is refused with the bounds in the message. ``n_name``: what
    the caller calls ``n`` (``queries``, ``iterations``), for the messages.
    """
    check_int("n", n, 1)
    check_real("epsilon", epsilon, 0.0, low_open=True)
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy={strategy!r} is not allowed: strategy must be one of "
                          + ", ".join(STRATEGIES))
    r, t = _params(n, r, t)
    if not strategy.startswith("ac-"):
        return _representable(_BASE[strategy](n, r, t), strategy, n, r, t, n_name)
    k = _representable(_BASE[strategy[3:]](n, r, t), strategy, n, r, t, n_name)
    low, high = us_interval(k, epsilon)
    U_s = (low + high) / 2 if U_s is None else U_s
    if not low <= U_s <= high:  # the interval scales as 1 / epsilon: name both
        raise ConfigError(f"U_s={U_s!r} is out of range for epsilon={epsilon:g} and "
                          f"{n_name}={n}: Lemma 3's interval is [{low!r}, {high!r}] (it "
                          "scales as 1/epsilon); change epsilon or give U_s inside", "U_s")
    alpha = acceptable_alpha(k, epsilon, U_s)
    return np.full(n, 1.0 / n) if math.isinf(alpha) else compound(k, alpha)


def _representable(k: NDArray, strategy: str, n: int, r: float, t: float,
                   n_name: str) -> NDArray:
    """``k`` if its smallest term is a normal positive float, else a :class:`ConfigError`: a
    series that steep (small ``r``, tiny ``t``, bisection over ~1,000 queries) gives budgets
    below 1e-308, i.e. noise no query could use."""
    if float(k.min()) < np.finfo(float).tiny:
        raise ConfigError(f"{n_name}={n} with strategy={strategy!r}, r={r:.6g}, t={t:.6g}: "
                          "the smallest budget underflows (below 1e-308 of epsilon); lower "
                          f"{n_name} or use a flatter series (r closer to 1, larger t)", n_name)
    return k


def allocate(strategy: str, n: int, epsilon: float, r: float | None = None,
             t: float | None = None, U_s: float | None = None, n_name: str = "n") -> NDArray:
    """The budget vector ``epsilon_i = k_i* epsilon`` (eq 5): positive, summing to at most
    ``epsilon`` (Theorem 4; rounded down by an ulp where floating point would exceed it)."""
    return _at_most(epsilon * proportions(strategy, n, epsilon, r, t, U_s, n_name), epsilon)


def _at_most(budgets: NDArray, epsilon: float) -> NDArray:
    while budgets.sum() > epsilon:
        budgets = np.nextafter(budgets, 0.0)
    return budgets


def us_bounds(strategy: str, n: int, epsilon: float, r: float | None = None,
              t: float | None = None) -> tuple[float, float]:
    """Lemma 3's ``U_s`` interval for ``strategy`` as Tables 3-5 compute it: from the noise
    of the average budget to that of the smallest term of the sequence the optimisation starts
    from (for ``ac-X``, ``X``'s)."""
    base = strategy[3:] if strategy.startswith("ac-") else strategy
    return us_interval(proportions(base, n, epsilon, r, t), epsilon)


def expected_mse(budgets: ArrayLike, sensitivity: float = 1.0) -> NDArray:
    """Expected total squared Laplace noise ``sum_i 2 (Delta / epsilon_i)^2`` (eq 37's
    expectation), over the last axis."""
    b = np.asarray(budgets, dtype=float)
    return np.sum(2.0 * (sensitivity / b) ** 2, axis=-1)


# --- protections (section 6) ---------------------------------------------------------------------
def protect(budgets: ArrayLike, method: str, rng: np.random.Generator,
            strategy: str | None = None, epsilon_n: float | None = None,
            positive: bool = True, r: float | None = None, t: float | None = None,
            U_s: float | None = None) -> NDArray:
    """Protect a budget sequence (each row of a 2-D array independently); the total is kept.

    * ``random``: a uniform random arrangement (section 6.2; keeps the multiset);
    * ``perturb``: the probabilistic arrangement of eq (34)-(35) (keeps the multiset). At the
      ``x``-th draw a remaining term of original rank ``i`` has score ``(n - i + 1) e^(x - i)``;
      the factor ``e^x`` is common to all remaining terms, so the draws are successive sampling
      without replacement with fixed weights ``(n - i + 1) e^(-i)``, drawn exactly at once by
      the Gumbel top-k trick;
    * ``noisy-n``: the sequence of ``strategy`` rebuilt for ``n_s = n + eta`` queries, ``eta ~
      Lap(1 / epsilon_n)`` (eq 36; ``|eta|`` when ``positive``, default ``epsilon_n`` = the
      total), its first ``n`` terms of the infinite series recalibrated to the same total
      (keeps the total, not the multiset).
    """
    b = np.atleast_2d(np.asarray(budgets, dtype=float))
    if method not in PROTECTIONS:
        raise ConfigError(f"protection={method!r} is not allowed: protection must be one of "
                          + ", ".join(PROTECTIONS))
    reps, n = b.shape
    if method == "none":
        out = b.copy()
    elif method == "random":
        out = rng.permuted(b, axis=1)
    elif method == "perturb":
        rank = np.arange(1, n + 1, dtype=float)
        keys = np.log(n - rank + 1.0) - rank + rng.gumbel(size=(reps, n))
        out = np.take_along_axis(b, np.argsort(-keys, axis=1), axis=1)
    else:
        if strategy is None:
            raise ConfigError("protection='noisy-n' needs the strategy: give strategy=<name>")
        total = b.sum(axis=1)
        eps_n = float(total[0]) if epsilon_n is None else check_real(
            "epsilon_n", epsilon_n, 0.0, low_open=True)
        eta = rng.laplace(0.0, 1.0 / eps_n, reps)
        n_s = np.maximum(np.rint(n + (np.abs(eta) if positive else eta)), 1).astype(int)
        out = np.empty_like(b)
        for m in np.unique(n_s):  # few distinct n_s: one sequence each
            rows = n_s == m
            out[rows] = total[rows, None] * series_prefix(strategy, n, int(m),
                                                          float(total[rows][0]), r, t, U_s)
    return out.reshape(np.shape(budgets)) if np.ndim(budgets) == 1 else out


def series_prefix(strategy: str, n: int, n_s: int, epsilon: float, r: float | None = None,
                  t: float | None = None, U_s: float | None = None) -> NDArray:
    """Proportions of the first ``n`` terms of ``strategy`` built for ``n_s`` queries (its
    parameters ``r``, ``t`` default to ``n_s``'s), recalibrated: the series are infinite, so
    any ``n_s >= 1`` gives ``n`` positive terms (``n_s = 1`` shapes the series as ``n_s = 2``:
    Taylor's ``t`` would be 1, all budget on one term). A ``U_s`` outside the rebuilt sequence's
    Lemma 3 interval is moved to its nearest end."""
    m = max(n, n_s)
    r = geometric_ratio(max(n_s, 2)) if r is None else r
    t = taylor_t(max(n_s, 2)) if t is None else t
    if U_s is not None and strategy.startswith("ac-"):
        low, high = us_bounds(strategy, m, epsilon, r, t)
        U_s = min(max(U_s, low), high)
    return calibrate(proportions(strategy, m, epsilon, r, t, U_s)[:n])


def parse_method(method: str) -> tuple[str, str]:
    """``"strategy"`` or ``"strategy/protection"`` as ``(strategy, protection)``, validated."""
    if not isinstance(method, str):
        raise ConfigError(f"method={method!r} is not allowed: method must be a strategy "
                          f"({', '.join(STRATEGIES)}), optionally followed by /protection "
                          f"({', '.join(PROTECTIONS)})")
    strategy, _, protection = method.partition("/")
    if strategy not in STRATEGIES:
        raise ConfigError(f"method={method!r}: strategy {strategy!r} is not allowed: the "
                          f"strategy must be one of {', '.join(STRATEGIES)}")
    protection = protection or "none"
    if protection not in PROTECTIONS:
        raise ConfigError(f"method={method!r}: protection {protection!r} is not allowed: the "
                          f"protection must be one of {', '.join(PROTECTIONS)}")
    return strategy, protection
