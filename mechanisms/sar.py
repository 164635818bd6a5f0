"""SAR slicing against colluding users (Chained-DP paper, section VI, Protocol 2).

Each slice of a user's vector runs the BAS chain in its own uniformly random order, so colluders
who surround a user in one slice's sequence expose only that slice. ``p`` is the probability that
another user is a colluder (the paper's ``p_k``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.gaussian import analytic_epsilon, classical_epsilon
from privgames.mechanisms.validation import ConfigError

ATTACKERS = ("weak", "strong")


def _check(K: int, p: float) -> None:
    if K < 3:
        raise ConfigError(f"K={K!r} is out of range: K must be an integer >= 3")
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"p={p!r} is out of range: p must lie in [0, 1)")


def weak_failure_probability(K: int, p: float) -> float:
    """Eq (31): ``delta_1 = (K - 2) p^2 / K``: the victim is interior, both neighbours collude."""
    _check(K, p)
    return (K - 2) * p * p / K


def strong_failure_probability(K: int, p: float) -> float:
    """Probability that colluders stand both before and after the victim (Definition 5).

    The proof of Theorem 8 gives ``(1/K) sum_{i=0}^{K-1} (1 - q^i)(1 - q^(K-1-i))`` with
    ``q = 1 - p``; summing the geometric series gives
    ``1 + q^(K-1) - 2 (1 - q^K) / (K p)``. The printed eq (32) has
    ``2 (1 - q^(K-1)) / (K (1 - p))`` instead, which is wrong (``docs/errata.md``).
    """
    _check(K, p)
    if p == 0.0:
        return 0.0
    q = 1.0 - p
    return 1.0 + q ** (K - 1) - 2.0 * (1.0 - q**K) / (K * p)


def failure_probability(K: int, p: float, attacker: str) -> float:
    """``delta_1`` or ``delta_2`` by attacker model."""
    if attacker == "weak":
        return weak_failure_probability(K, p)
    if attacker == "strong":
        return strong_failure_probability(K, p)
    raise ConfigError(f"attacker={attacker!r} is not allowed: attacker must be weak or strong")


def slice_exposure_given_colluders(K: int, colluders: ArrayLike, attacker: str) -> NDArray:
    """P(one slice exposed | c colluders among the K - 1 others), uniform random order.

    Weak: the victim is interior and its two neighbours are colluders, ``c(c-1) / (K(K-1))``.
    Strong: among the victim and the ``c`` colluders the victim's rank is uniform, and it must
    be neither first nor last, ``(c-1)/(c+1)`` (0 for ``c < 2``).
    """
    c = np.asarray(colluders, dtype=float)
    if attacker == "weak":
        return c * (c - 1.0) / (K * (K - 1.0))
    if attacker == "strong":
        return np.maximum(c - 1.0, 0.0) / (c + 1.0)
    raise ConfigError(f"attacker={attacker!r} is not allowed: attacker must be weak or strong")


def whole_vector_exposure(K: int, p: float, N: int, attacker: str) -> float:
    """Probability that all ``N`` slices of a victim are exposed in one round.

    The colluding set is shared by the slices and the orders are independent, so this is
    ``E_c[P(slice exposed | c)^N]`` with ``c ~ Binomial(K - 1, p)``. With ``N = 1`` it is the
    failure probability itself.
    """
    _check(K, p)
    c = np.arange(K)
    from scipy.stats import binom  # here, not at import: scipy.stats costs ~0.8 s
    return float(np.sum(binom.pmf(c, K - 1, p) * slice_exposure_given_colluders(K, c, attacker)
                        ** N))


def colluder_threshold(K: int, attacker: str = "weak") -> float:
    """Largest ``p`` with failure probability at most ``1/K^2`` (eq 33 and Fig 8).

    Weak: ``sqrt(1 / (K (K - 2)))`` in closed form. Strong: the root of
    ``delta_2(K, p) = 1/K^2``, found numerically (``delta_2`` increases in ``p``).
    """
    if K < 3:
        raise ConfigError(f"K={K!r} is out of range: K must be an integer >= 3")
    if attacker == "weak":
        return math.sqrt(1.0 / (K * (K - 2)))
    if attacker == "strong":
        return brentq(lambda p: strong_failure_probability(K, p) - 1.0 / K**2, 0.0, 1.0 - 1e-12,
                      xtol=1e-14)
    raise ConfigError(f"attacker={attacker!r} is not allowed: attacker must be weak or strong")


def slice_sizes(d: int, N: int) -> NDArray:
    """Lengths of the ``N`` slices of a ``d``-vector: ``ceil(d/N)`` first, shorter at the end.

    Protocol 2's ``l = ceil(d/N)`` alone gives fewer than ``N`` slices for some ``(d, N)``
    (``d=10, N=6`` gives 5); cutting exactly ``N`` slices whose lengths differ by at most one
    keeps the agreed count.
    """
    if not 1 <= N <= d:
        raise ConfigError(f"N={N!r} is out of range: N must be an integer in [1, d={d}]")
    return np.array([s.size for s in np.array_split(np.arange(d), N)])


def slice_vector(x: ArrayLike, N: int) -> list[NDArray]:
    """Cut a vector (or the last axis of an array) into ``N`` consecutive slices (Protocol 2)."""
    arr = np.asarray(x)
    bounds = np.cumsum(slice_sizes(arr.shape[-1], N))[:-1]
    return np.split(arr, bounds, axis=-1)


def recombine(slices: list[ArrayLike]) -> NDArray:
    """Concatenate slice means back into one vector (Protocol 2, line 16)."""
    return np.concatenate([np.asarray(s) for s in slices], axis=-1)


def slice_epsilon(length: int, Delta: float, delta: float, total_variance: float,
                  paper: bool = False) -> float:
    """Epsilon of one slice's release: sensitivity ``sqrt(length) Delta`` (entries bounded by
    Delta), noise variance ``total_variance``; exact (analytic Gaussian) or, with
    ``paper=True``, eq (30)'s classical formula. This is the guarantee against a neighbour who
    differs in this slice only (the paper's reading of Theorem 6)."""
    account = classical_epsilon if paper else analytic_epsilon
    return float(account(math.sqrt(total_variance), delta, math.sqrt(length) * Delta))


def vector_epsilon(d: int, Delta: float, delta: float, total_variance: float) -> float:
    """Exact epsilon of the whole SAR release of one user's vector (user-level adjacency).

    A neighbour changes the user's whole vector, so every slice changes: the slices are not
    "disjoint subsets of the database" and Theorem 6's parallel composition does not apply.
    The ``N`` slice releases with equal noise are jointly one Gaussian mechanism of sensitivity
    ``sqrt(sum_i l_i) Delta = sqrt(d) Delta`` (the privacy-loss distributions of Gaussians
    compose by adding their ``mu = Delta_i^2 / (2 sigma^2)``), whatever ``N`` is.
    """
    return float(analytic_epsilon(math.sqrt(total_variance), delta, math.sqrt(d) * Delta))


def reclipped_sensitivity(clip_norm: float, d: int, length: int) -> float:
    """Sensitivity of a slice re-clipped to its share of an l2-clipped vector (section VI-B).

    A vector clipped to ``||x||_2 <= C`` can put all its norm in one slice, so each slice is
    re-clipped to ``C sqrt(length / d)``: about ``C / sqrt(N)`` for ``N`` equal slices. The paper
    prints ``O(Delta_f sqrt(K/N))``; ``K`` plays no role in a single user's slice norm.
    """
    return clip_norm * math.sqrt(length / d)


def weak_reconstruction(messages: NDArray, position: NDArray) -> NDArray:
    """Definition 4: the neighbours pool ``S_k`` (sent to the successor) and ``S_{k-1}``.

    ``messages`` are the running sums ``(K, T, l)`` of ``T`` sequences, one row per sequence
    position; the victim's slice is estimated as ``S_k - S_{k-1}`` (``S_{-1} = 0``), exact
    when the victim added no noise.
    """
    trials = np.arange(position.size)
    sent = messages[position, trials]
    before = messages[np.maximum(position - 1, 0), trials]
    return sent - np.where((position > 0)[:, None], before, 0.0)


@compiled
def strong_estimates(uploads: NDArray, noise: NDArray, fakes: NDArray, before: NDArray,
                     after: NDArray, position: NDArray, out: NDArray) -> None:
    """Definition 5 on ``T`` chains, into ``out`` ``(T, l)``: colluders at positions ``before <
    k < after`` pool ``S_{after-1}`` (which ``after`` received) and ``S_before`` (which
    ``before`` sent), and subtract the data they planted on the users between them other than
    the victim (``fakes``, which replace those users' uploads in the chain).

    ``uploads`` and ``fakes`` are ``(K, T, l)`` by sequence position, ``noise`` ``(T, l)`` the
    first user's; ``S_j = noise + upload_0 + ... + upload_j``, summed in that order per trial
    (no ``K x T x l`` array of messages). A trial without a colluder on each side gets 0 (the
    caller masks it)."""
    K, T, width = uploads.shape
    for t in range(T):
        low, high, victim = before[t], after[t], position[t]
        if low < 0 or high >= K:
            out[t] = 0.0
            continue
        for c in range(width):
            running, known, sent = noise[t, c], 0.0, 0.0
            for j in range(high):
                if low < j and j != victim:
                    value = fakes[j, t, c]
                    known += value
                else:
                    value = uploads[j, t, c]
                running += value
                if j == low:
                    sent = running
            out[t, c] = running - sent - known
