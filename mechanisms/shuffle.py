"""Privacy amplification by shuffling under personalized LDP (APES, Liu et al.,
``papers/apes-shuffle-clip-laplace.txt``): the baseline of eq (2), the neighbour divergence
(Lemma 4), the echo probabilities ``p_ij`` and the EoN central bound (Lemma 6, Theorem 4),
``delta^c``, and S-APES's user-level bound (Proposition 1).

Every central bound comes in two forms:

* ``closed``: the printed formula (valid only in its stated range; outside it the trivial bound
  ``max eps_i`` is returned, since shuffling never hurts);
* ``numerical``: the same clone reduction evaluated exactly, as in Feldman, McMillan & Talwar's
  "hiding among the clones": the other users are clones of the target with probabilities
  ``q_i`` (``C`` clones in all: binomial for the baseline, Poisson-binomial for EoN), each
  clone half ``rho``, half ``rho'``; the target shows ``rho`` with probability ``e^eps* /
  (1 + e^eps*)`` on ``D`` and ``1 / (1 + e^eps*)`` on ``D'``. The hockey-stick divergence
  between the two count distributions is a closed sum over binomial tails for each ``C``;
  ``eps^c`` is the smallest ``eps`` whose divergence is at most ``delta``, found by Brent's
  method to ``1e-10``. The clone-count distribution is kept where it exceeds ``1e-15`` of its mode;
  the mass left out is added to the divergence, so the bound stays an upper bound.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import bdtrc, gammaln

from privgames.mechanisms.validation import ConfigError

METHODS = ("numerical", "closed")
#: Table 2's personalised budget distributions, each (kind, parameters, clip range).
DISTRIBUTIONS = {
    "uniform1": ("uniform", (0.05, 0.5), (0.05, 0.5)),
    "uniform2": ("uniform", (0.05, 1.0), (0.05, 1.0)),
    "gauss1": ("normal", (0.1, 1.0), (0.05, 0.5)),
    "gauss2": ("normal", (0.2, 1.0), (0.05, 1.0)),
    "mixgauss1": ("mixture", (0.1, 1.0, 0.5, 1.0, 0.9), (0.05, 0.5)),
    "mixgauss2": ("mixture", (0.2, 1.0, 1.0, 1.0, 0.9), (0.05, 1.0)),
}


def personalized_budgets(distribution: str, n: int, rng: np.random.Generator) -> NDArray:
    """``n`` local budgets from one of Table 2's distributions, clipped to its range
    (``N(m, s)``: mean ``m``, standard deviation ``s``; the mixtures take the first component
    with probability 0.9)."""
    if distribution not in DISTRIBUTIONS:
        raise ConfigError(f"distribution={distribution!r} is not allowed: distribution must be "
                          "one of " + ", ".join(DISTRIBUTIONS))
    kind, p, (lo, hi) = DISTRIBUTIONS[distribution]
    if kind == "uniform":
        eps = rng.uniform(p[0], p[1], n)
    elif kind == "normal":
        eps = rng.normal(p[0], p[1], n)
    else:
        first = rng.random(n) < p[4]
        eps = np.where(first, rng.normal(p[0], p[1], n), rng.normal(p[2], p[3], n))
    return np.clip(eps, lo, hi)


def _check(eps_local: ArrayLike, delta: float) -> NDArray:
    eps = np.asarray(eps_local, dtype=float).ravel()
    if eps.size < 2 or np.any(~np.isfinite(eps)) or np.any(eps <= 0):
        raise ConfigError("eps_local must hold at least two finite budgets > 0")
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta_s={delta!r} is out of range: delta_s must be in (0, 1)")
    return eps


# --- neighbour divergence and echoes -------------------------------------------------------
def neighbour_divergence_bound(eps_i: ArrayLike, eps_j: ArrayLike) -> NDArray:
    """Lemma 4 (``A = C``): ``D_N(mu_i || mu_j) <= ln(eps_i/eps_j (1 - e^-eps_j) /
    (1 - e^-eps_i) e^max(eps_i, eps_j))``."""
    a, b = np.asarray(eps_i, dtype=float), np.asarray(eps_j, dtype=float)
    return (np.log(a / b) + np.log(-np.expm1(-b)) - np.log(-np.expm1(-a)) + np.maximum(a, b))


def neighbour_divergence_exact(eps_i: float, eps_j: float, C: float = 1.0,
                               grid: int = 401) -> float:
    """Definition 5 for Clip-Laplace outputs, worst case over the inputs: ``max_{s, t, z}
    ln p_i(z | s) - ln p_j(z | t)`` on ``[-C, C]^3`` (the log-ratio is piecewise linear in
    ``z``, so its maximum over ``z`` is at ``-C``, ``C``, ``s`` or ``t``: the grid contains all
    of them)."""
    from privgames.mechanisms.noise import normaliser

    x = np.linspace(-C, C, grid)
    li, lj = 2 * C / eps_i, 2 * C / eps_j
    s, t, z = x[:, None, None], x[None, :, None], x[None, None, :]
    log_ratio = (-np.abs(z - s) / li - np.log(2 * li * normaliser(s, li, C))
                 + np.abs(z - t) / lj + np.log(2 * lj * normaliser(t, lj, C)))
    return float(log_ratio.max())


def echo_probabilities(eps_local: ArrayLike) -> NDArray:
    """``q_i = (1/n) sum_j p_ij``: the probability that user ``i``'s report is an echo (a
    clone) of the target's (Lemma 5), with ``p_ij = (eps_i/eps_j) (1 - e^-eps_j) /
    (1 - e^-eps_i) e^-max(eps_i, eps_j)`` (Lemma 6). With ``f(e) = (1 - e^-e)/e``,
    ``p_ij = f_j / f_i e^-max``, so the sums take one sort and two cumulative sums: O(n log n)."""
    eps = np.asarray(eps_local, dtype=float).ravel()
    n = eps.size
    order = np.argsort(eps, kind="stable")
    e = eps[order]
    f = -np.expm1(-e) / e
    below = np.cumsum(f)  # sum of f_j over eps_j <= eps_i (ties: all of them)
    hi_index = np.searchsorted(e, e, side="right")
    below = below[hi_index - 1]
    tail = np.concatenate([np.cumsum((f * np.exp(-e))[::-1])[::-1], [0.0]])[hi_index]
    q = (np.exp(-e) * below + tail) / (n * f)
    out = np.empty(n)
    out[order] = q
    return np.minimum(out, 1.0)


def clone_mass(eps_local: ArrayLike) -> float:
    """``sum_{i=2}^n sum_j p_ij / n``: the expected number of echoes of the target, with the
    target taken as the user whose own echo probability is largest (the worst case)."""
    q = echo_probabilities(eps_local)
    return float(q.sum() - q.max())


def delta_central(eps_local: ArrayLike, delta_s: float) -> float:
    """Theorem 4: ``delta^c <= (e^eps* - 1)/(e^eps* + 1) delta_s``, ``eps* = max eps_i``."""
    eps = _check(eps_local, delta_s)
    return float(math.tanh(eps.max() / 2) * delta_s)


# --- closed forms --------------------------------------------------------------------------
def _fmt_closed(eps0: float, clones: float, delta: float, sqrt_factor: float) -> float:
    """``ln(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(s ln(4/delta)) / sqrt(m) + 8 s' / m))``."""
    t = math.tanh(eps0 / 2)
    return math.log1p(t * (8 * math.sqrt(sqrt_factor * math.log(4 / delta)) / math.sqrt(clones)
                           + 8 * sqrt_factor / clones))


def baseline_closed(eps_local: ArrayLike, delta_s: float) -> float:
    """Eq (2): FMT'22's closed form with every user at ``eps0 = max eps_i``; valid for ``eps0
    <= ln(n / (16 ln(2/delta)))`` (FMT'22 Theorem 3.1), else the trivial ``eps0``."""
    eps = _check(eps_local, delta_s)
    eps0, n = float(eps.max()), eps.size
    if eps0 > math.log(n / (16 * math.log(2 / delta_s))):
        return eps0
    return min(_fmt_closed(eps0, n, delta_s, math.exp(eps0)), eps0)


def eon_closed(eps_local: ArrayLike, delta_s: float) -> float:
    """Theorem 4: ``ln(1 + (e^eps* - 1)/(e^eps* + 1) (8 sqrt(ln(4/delta_s)) / sqrt(Q) +
    8/Q))``, ``Q = sum_{i>=2} sum_j p_ij / n``; valid for ``Q >= 16 ln(4/delta_s)``, else the
    trivial ``max eps_i``."""
    eps = _check(eps_local, delta_s)
    eps0, mass = float(eps.max()), clone_mass(eps)
    if mass < 16 * math.log(4 / delta_s):
        return eps0
    return min(_fmt_closed(eps0, mass, delta_s, 1.0), eps0)


def erlingsson_closed(eps_local: ArrayLike, delta_s: float) -> float:
    """Erlingsson et al. '19 (a Fig 2(a) baseline): ``12 eps0 sqrt(ln(1/delta) / n)`` with
    ``eps0 = max eps_i``, valid for ``eps0 < 1/2`` (else the trivial ``eps0``)."""
    eps = _check(eps_local, delta_s)
    eps0 = float(eps.max())
    if eps0 >= 0.5:
        return eps0
    return min(12 * eps0 * math.sqrt(math.log(1 / delta_s) / eps.size), eps0)


# --- the numerical clone reduction --------------------------------------------------------
#: Entries of the clone-count distribution below this fraction of its mode are dropped (their
#: mass, under 1e-12 in all, is added to the divergence): the FFT's round-off is ~1e-17 of the
#: mode, so a finer cut would keep noise.
TRIM = 1e-15


def poisson_binomial_pmf(q: ArrayLike) -> tuple[int, NDArray]:
    """``(offset, pmf)`` of ``sum_i Bernoulli(q_i)`` on ``offset, offset + 1, ...``, where it
    exceeds ``TRIM`` of its largest value: exact dynamic programming inside blocks of 64, then
    pairwise FFT convolutions, each trimmed (O(n log^2 n) at worst, far less once trimmed)."""
    q = np.asarray(q, dtype=float).ravel()
    leaf = 64
    blocks = -(-q.size // leaf)
    qs = np.zeros(blocks * leaf)
    qs[: q.size] = q
    qs = qs.reshape(blocks, leaf)
    pmf = np.zeros((blocks, leaf + 1))
    pmf[:, 0] = 1.0
    for j in range(leaf):
        p = qs[:, j: j + 1]
        pmf[:, 1:] = pmf[:, 1:] * (1 - p) + pmf[:, :-1] * p
        pmf[:, 0] *= 1 - p[:, 0]
    offsets = np.zeros(blocks, dtype=np.int64)
    pmf, offsets = _trim(pmf, offsets)
    while pmf.shape[0] > 1:
        if pmf.shape[0] % 2:
            pad = np.zeros((1, pmf.shape[1]))
            pad[0, 0] = 1.0
            pmf, offsets = np.vstack([pmf, pad]), np.append(offsets, 0)
        length = 2 * pmf.shape[1] - 1
        size = 1 << (length - 1).bit_length()
        spec = np.fft.rfft(pmf, size, axis=1)
        merged = np.fft.irfft(spec[0::2] * spec[1::2], size, axis=1)[:, :length]
        pmf, offsets = _trim(np.maximum(merged, 0.0), offsets[0::2] + offsets[1::2])
    return int(offsets[0]), pmf[0]


def _trim(pmf: NDArray, offsets: NDArray) -> tuple[NDArray, NDArray]:
    """Cut each row to the columns above ``TRIM`` of its maximum; rows share one width."""
    keep = pmf > TRIM * pmf.max(axis=1, keepdims=True)
    first = keep.argmax(axis=1)
    last = pmf.shape[1] - 1 - keep[:, ::-1].argmax(axis=1)
    width = int((last - first).max()) + 1
    cols = first[:, None] + np.arange(width)[None, :]
    padded = np.hstack([pmf, np.zeros((pmf.shape[0], width))])
    return np.take_along_axis(padded, cols, axis=1), offsets + first


def _divergence(eps: float, eps_star: float, counts: NDArray, weights: NDArray) -> float:
    """``sum_c P(C = c) D_{e^eps}(P_c || Q_c)``: for ``m = c + 1`` the target's side count
    ``a`` has ``P(a) = B_m(a) (2/m) (p a + (1 - p)(m - a))`` (``B_m`` the Binomial(m, 1/2)
    pmf, ``p = e^eps*/(1 + e^eps*)``) and ``Q`` the same with ``1 - p``; the positive part is
    ``a > t_m``, summed with binomial tails: ``(alpha - beta) P(Bin(m-1) >= k-1) + 2 beta
    P(Bin(m) >= k)``."""
    p = 1.0 / (1.0 + math.exp(-eps_star))
    x = math.exp(eps)
    alpha, beta = p - x * (1 - p), (1 - p) - x * p
    if alpha <= 0:
        return 0.0
    m = counts + 1.0
    k = np.floor(-beta * m / (alpha - beta)) + 1.0  # smallest a with a positive part
    s1 = _half_tails(m - 1, k - 1)  # P(Bin(m-1, 1/2) >= k-1)
    s0 = s1 - 0.5 * _half_pmf(m - 1, k - 1)  # P(Bin(m, 1/2) >= k)
    return float(np.dot(weights, (alpha - beta) * s1 + 2 * beta * s0))


def _half_pmf(M: NDArray, K: NDArray) -> NDArray:
    """``P(Bin(M, 1/2) = K)`` (0 outside ``0..M``)."""
    inside = (K >= 0) & (K <= M)
    Kc = np.clip(K, 0, M)
    log = gammaln(M + 1) - gammaln(Kc + 1) - gammaln(M - Kc + 1) - M * math.log(2.0)
    return np.where(inside, np.exp(log), 0.0)


def _tail(K: NDArray, M: NDArray) -> NDArray:
    """``P(Bin(M, 1/2) >= K)`` by scipy (integer arguments)."""
    return bdtrc(K.astype(np.int64) - 1, M.astype(np.int64), 0.5)


def _half_tails(M: NDArray, K: NDArray) -> NDArray:
    """``P(Bin(M, 1/2) >= K)`` along consecutive ``M`` whose ``K`` steps by 0 or 1: one exact
    tail at the start, then ``T(M+1, K) = T(M, K) + B_M(K-1) / 2`` and ``T(M+1, K+1) =
    T(M+1, K) - B_{M+1}(K)`` accumulated (absolute error ~1e-16 per step)."""
    if M.size < 64 or np.any(np.diff(M) != 1) or np.any((np.diff(K) < 0) | (np.diff(K) > 1)):
        return _tail(K, M)
    step = 0.5 * _half_pmf(M[:-1], K[:-1] - 1) - (np.diff(K) == 1) * _half_pmf(M[1:], K[:-1])
    start = _tail(K[:1], M[:1])[0]
    return np.clip(start + np.concatenate([[0.0], np.cumsum(step)]), 0.0, 1.0)


def _smallest_epsilon(eps_star: float, counts: NDArray, weights: NDArray, delta: float) -> float:
    missing = max(0.0, 1.0 - float(weights.sum()))  # trimmed clone-count mass: count as 1

    def excess(e: float) -> float:
        return _divergence(e, eps_star, counts, weights) + missing - delta

    if excess(0.0) <= 0:
        return 0.0
    if excess(eps_star) > 0:  # cannot happen (the divergence is 0 at eps*) unless mass is lost
        return eps_star
    return float(brentq(excess, 0.0, eps_star, xtol=1e-12, rtol=1e-10))


def clone_epsilon(eps_star: float, clone_probabilities: ArrayLike, delta: float) -> float:
    """The numerical bound for a target at ``eps_star`` among others who are clones with the
    given probabilities (Poisson-binomial; a common probability gives the binomial)."""
    q = np.asarray(clone_probabilities, dtype=float)
    if np.all(q == q[0]):
        n, p = q.size, float(q[0])
        from scipy.stats import binom  # here, not at import: scipy.stats costs ~0.8 s
        mode = binom.pmf(math.floor((n + 1) * p), n, p)
        sd = math.sqrt(n * p * (1 - p))
        counts = np.arange(max(0, int(n * p - 12 * sd - 12)),
                           min(n, int(n * p + 12 * sd + 12)) + 1)
        weights = binom.pmf(counts, n, p)
        keep = weights > TRIM * mode
        counts, weights = counts[keep], weights[keep]
    else:
        offset, weights = poisson_binomial_pmf(q)
        counts = offset + np.arange(weights.size)
    return _smallest_epsilon(eps_star, counts.astype(float), weights, delta)


def baseline_numerical(eps_local: ArrayLike, delta_s: float) -> float:
    """Eq (2)'s reduction evaluated exactly: ``n - 1`` others, each a clone with probability
    ``e^-eps0``, ``eps0 = max eps_i`` (FMT'22's numerical bound)."""
    eps = _check(eps_local, delta_s)
    eps0 = float(eps.max())
    return clone_epsilon(eps0, np.full(eps.size - 1, math.exp(-eps0)), delta_s)


def eon_numerical(eps_local: ArrayLike, delta_s: float) -> float:
    """The EoN reduction (Lemmas 5-6) evaluated exactly: user ``i`` is an echo with
    probability ``q_i`` (the target: the user with the largest ``q_i``), the target at
    ``eps* = max eps_i``."""
    eps = _check(eps_local, delta_s)
    q = echo_probabilities(eps)
    target = int(np.argmax(q))
    return clone_epsilon(float(eps.max()), np.delete(q, target), delta_s)


def baseline_bound(eps_local: ArrayLike, delta_s: float, method: str = "numerical") -> float:
    """``eps^c`` of the baseline (eq 2: FMT'22 with every user at ``max eps_i``)."""
    if method not in METHODS:
        raise ConfigError(f"method={method!r} is not allowed: method must be one of "
                          + ", ".join(METHODS))
    return (baseline_numerical if method == "numerical" else baseline_closed)(eps_local, delta_s)


def eon_bound(eps_local: ArrayLike, delta_s: float, method: str = "numerical") -> float:
    """``eps^c`` of APES's EoN analysis (Theorem 4)."""
    if method not in METHODS:
        raise ConfigError(f"method={method!r} is not allowed: method must be one of "
                          + ", ".join(METHODS))
    return (eon_numerical if method == "numerical" else eon_closed)(eps_local, delta_s)


def user_level_central(eps_c: float, delta_c: float, b: int,
                       delta_prime: float) -> tuple[float, float]:
    """Proposition 1: ``b`` released dimensions (each ``(eps^c, delta^c)``, sensitivity ``2b``)
    compose to ``eps^uc = eps^c sqrt(4 b ln(1/delta')) + 2 b eps^c (e^eps^c - 1)``,
    ``delta^uc = delta' + 2 b delta^c``."""
    eps_uc = eps_c * math.sqrt(4 * b * math.log(1 / delta_prime)) + 2 * b * eps_c * math.expm1(
        eps_c)
    return eps_uc, delta_prime + 2 * b * delta_c


def accounting(eps_local: ArrayLike, framework: str, d: int, b: int, delta_s: float,
               delta_prime: float) -> dict:
    """Every privacy number of one APES-family run (Table 3's columns) from its budgets.

    ``eps_central``: dimension-level central epsilon of the framework (``pldp``: no shuffler,
    the largest local budget; ``ldp-min``: the smallest; ``unis``: eq (2)'s reduction;
    ``apes``/``s-apes``: EoN), each shuffling bound in both forms beside it;
    ``eps_user_central``: Proposition 1 over the ``b`` dimensions sent; ``eps_user_local``:
    ``d`` times the local budgets (S-APES's top-b is chosen from all ``d`` perturbed values,
    so post-processing gives ``d eps``; the paper's ``b eps`` is ``eps_user_local_paper``).
    """
    eps = np.asarray(eps_local, dtype=float)
    base = {m: baseline_bound(eps, delta_s, m) for m in METHODS}
    eon = {m: eon_bound(eps, delta_s, m) for m in METHODS}
    central = {"non-private": math.inf, "ldp-min": float(eps.min()), "pldp": float(eps.max()),
               "unis": base["numerical"], "apes": eon["numerical"],
               "s-apes": eon["numerical"]}[framework]
    delta_c = delta_central(eps, delta_s) if framework in ("apes", "s-apes") else (
        delta_s if framework == "unis" else 0.0)
    if math.isfinite(central):
        eps_uc, delta_uc = user_level_central(central, delta_c, b, delta_prime)
    else:
        eps_uc, delta_uc = math.inf, 0.0
    return {"eps_central": central, "delta_central": delta_c,
            "eps_central_baseline": base["numerical"], "eps_central_baseline_closed":
                base["closed"], "eps_central_eon": eon["numerical"],
            "eps_central_eon_closed": eon["closed"],
            "eps_user_local_min": d * float(eps.min()), "eps_user_local_max": d * float(
                eps.max()),
            "eps_user_local_paper_min": b * float(eps.min()),
            "eps_user_local_paper_max": b * float(eps.max()),
            "eps_user_central": eps_uc, "delta_user_central": delta_uc}
