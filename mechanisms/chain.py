"""Chained-DP: the sequential noise-adding game and the BAS mechanism.

Paper: Li et al., "Chained-DP: Can We Recycle Privacy Budget?" (``papers/chained-dp-bas-sar.txt``).
User ``k`` in a sequence adds ``N(0, sigma_k^2 I)`` to the running sum (eq 6-8); its cost is
``C_k = sum_i sigma_i^2 + alpha_k (sum_{i<=k} sigma_i^2)^(-1/2)`` (eq 11, 13, 14) with preference
``beta_k = alpha_k^(2/3)``. Where the printed paper is wrong, the docstring says so and
``docs/errata.md`` lists the derivation and the test that checks it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms.gaussian import analytic_epsilon, classical_epsilon
from privgames.mechanisms.validation import ConfigError

#: The threshold constant ``m = (1/2)^(2/3)`` of Lemma 1.
M = 0.5 ** (2.0 / 3.0)


def _beta(beta: ArrayLike) -> NDArray:
    b = np.asarray(beta, dtype=float)
    if b.ndim != 1 or b.size == 0:
        raise ConfigError(f"beta must be a non-empty 1-d array of preferences, got shape {b.shape}")
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ConfigError(f"beta={b.tolist()!r} is out of range: every beta_k must be >= 0")
    return b


def alpha_from_beta(beta: ArrayLike) -> NDArray:
    """Privacy weight ``alpha_k = beta_k^(3/2)`` (Remark 2 inverted)."""
    return np.asarray(beta, dtype=float) ** 1.5


def accuracy_cost(sigma2: ArrayLike) -> float:
    """Accuracy cost of every user, eq (11): the total noise variance ``sum_i sigma_i^2``."""
    return float(np.sum(sigma2))


def privacy_cost(sigma2: ArrayLike) -> NDArray:
    """Privacy cost of each user in sequence order, eq (13): ``(sum_{i<=k} sigma_i^2)^(-1/2)``."""
    prefix = np.cumsum(np.asarray(sigma2, dtype=float))
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(prefix)


def user_costs(sigma2: ArrayLike, beta: ArrayLike) -> NDArray:
    """Each user's cost ``C_k = C^acc + alpha_k C_k^pri`` (eq 14), sequence order.

    Eq (15) restates the cost as ``beta_k C^acc + C^pri``; that form contradicts Lemma 1
    (its threshold would be ``(2 beta_k)^(-2/3)``), so eq (14) is the one used.
    """
    alpha = alpha_from_beta(_beta(beta))
    privacy = np.where(alpha > 0, alpha * privacy_cost(sigma2), 0.0)  # alpha = 0: no concern
    return accuracy_cost(sigma2) + privacy


def social_cost(sigma2: ArrayLike, beta: ArrayLike) -> float:
    """Total cost ``sum_k C_k``, the numerator/denominator of the PoA (eq 28)."""
    return float(np.sum(user_costs(sigma2, beta)))


def best_response(upstream_variance: ArrayLike, beta: ArrayLike) -> NDArray:
    """Lemma 1: a follower tops the received noise up to its threshold ``m beta_k``.

    ``sigma_k^2 = max(0, m beta_k - upstream_variance)``; vectorized over both arguments.
    """
    u = np.asarray(upstream_variance, dtype=float)
    return np.maximum(0.0, M * np.asarray(beta, dtype=float) - u)


def followers_respond(first_variance: float, beta: ArrayLike) -> NDArray:
    """The profile when user 1 plays ``first_variance`` and every follower plays Lemma 1.

    The running prefix is ``max(first_variance, m max_{2<=i<=k} beta_i)``, so the whole chain is
    one cumulative maximum. ``beta`` is in sequence order.
    """
    b = _beta(beta)
    prefix = np.maximum.accumulate(np.concatenate(([first_variance], M * b[1:])))
    return np.diff(prefix, prepend=0.0)


def nash_equilibrium(beta: ArrayLike) -> NDArray:
    """Theorem 1: ``(m max beta, 0, ..., 0)`` in sequence order (subgame perfect)."""
    b = _beta(beta)
    out = np.zeros_like(b)
    out[0] = M * b.max()
    return out


def ldp_variances(beta: ArrayLike) -> NDArray:
    """LDP baseline, eq (26): alone, each user's cost is minimised at ``sigma_k^2 = m beta_k``."""
    return M * _beta(beta)


def central_optimum(beta: ArrayLike) -> NDArray:
    """Minimiser of the social cost ``sum_k C_k`` (denominator of eq 28).

    Derived here (the printed proof of Theorem 5 is garbled): the accuracy term depends only on
    the total ``S`` and each privacy term falls as the prefix grows, so all noise goes first and
    every prefix equals ``S``. ``K S + (sum_k alpha_k) S^(-1/2)`` is minimised at
    ``S = (sum_k alpha_k / (2K))^(2/3) = m (mean_k beta_k^(3/2))^(2/3)``. The paper prints
    ``m (mean_k beta_k)^(2/3)``, which is not even homogeneous of degree one in beta.
    """
    b = _beta(beta)
    out = np.zeros_like(b)
    out[0] = M * np.mean(b**1.5) ** (2.0 / 3.0)
    return out


def price_of_anarchy(beta: ArrayLike) -> float:
    """PoA of eq (28) in closed form: ``(r + 2 r^(-1/2)) / 3`` with ``r = S_NE / S_opt``.

    Substituting both profiles into the social cost gives ``K S_opt (r + 2/sqrt(r))``
    and ``3 K S_opt``.
    """
    b = _beta(beta)
    if b.max() == 0:
        return 1.0
    r = nash_equilibrium(b)[0] / central_optimum(b)[0]
    return (r + 2.0 / math.sqrt(r)) / 3.0


def price_of_anarchy_bound(beta: ArrayLike) -> float:
    """Upper bound on the PoA: ``max beta / min beta`` (Theorem 5 as its proof derives it).

    The statement of Theorem 5 prints ``max beta / (K min beta)``, which is below 1 for nearly
    equal preferences and so contradicts its own lower bound ``PoA > 1``.
    """
    b = _beta(beta)
    return float(b.max() / b.min()) if b.min() > 0 else math.inf


def chain_epsilon(total_variance: ArrayLike, d: int, Delta: float, delta: float,
                  paper: bool = False) -> NDArray:
    """Privacy budget of a chain release carrying noise of ``total_variance`` per coordinate.

    Independent Gaussian noises add their variances (Corollary 1), so the release is one
    Gaussian mechanism with ``sigma^2 = total_variance`` and sensitivity ``sqrt(d) Delta``; its
    exact epsilon is :func:`~privgames.mechanisms.gaussian.analytic_epsilon`. ``paper=True``
    gives eq (30) as corrected, eq (3) inverted: ``sqrt(d) Delta sqrt(2 log(1.25/delta) /
    total_variance)`` (the printed eq (30) drops the square roots and ``sqrt(d)`` and writes
    1.30 for 1.25); it is a guarantee only where it is below 1.
    """
    sigma = np.sqrt(np.asarray(total_variance, dtype=float))
    account = classical_epsilon if paper else analytic_epsilon
    return np.asarray(account(sigma, delta, math.sqrt(d) * Delta), dtype=float)


def chain_mse(total_variance: ArrayLike, K: int, d: int) -> NDArray:
    """Expected squared l2 error ``E||mu_hat - mu||^2 = d sum_k sigma_k^2 / K^2`` (eq 9)."""
    return d * np.asarray(total_variance, dtype=float) / K**2


def bas_order(bids: ArrayLike, rng: np.random.Generator) -> NDArray:
    """Stage 2 of BAS (Mechanism 1): shuffle until the highest bidder is not first."""
    b = np.asarray(bids, dtype=float)
    top = int(np.argmax(b))
    order = rng.permutation(b.size)
    while b.size > 1 and order[0] == top:
        order = rng.permutation(b.size)
    return order


def split_sequence(
    beta: ArrayLike, subsequences: int, policy: str, rng: np.random.Generator
) -> list[NDArray]:
    """Split users into ``subsequences`` groups of (nearly) equal length.

    ``policy="random"`` splits a uniform permutation; ``"sorted"`` splits the users sorted by
    preference, the policy Corollary 4 proves optimal. Returns arrays of user indices.
    """
    b = _beta(beta)
    if policy == "random":
        idx = rng.permutation(b.size)
    elif policy == "sorted":
        idx = np.argsort(b, kind="stable")
    else:
        raise ConfigError(f"split={policy!r} is not allowed: split must be 'random' or 'sorted'")
    return np.array_split(idx, subsequences)


def estimate_noise_variance(message: ArrayLike, contributors: int, Delta: float) -> float:
    """Moment estimate of the noise variance in a received running sum (section VIII).

    A receiver sees ``S = sum of contributors' data + noise`` in ``d`` coordinates. Under the
    users' prior that data entries are i.i.d. uniform on ``[-Delta, Delta]`` (variance
    ``Delta^2/3``), ``E[mean_j S_j^2] = contributors Delta^2 / 3 + noise variance``; the
    estimate subtracts the data term. It is unbiased under the prior and biased otherwise, which
    is why the estimated-observation game has a Bayesian rather than a Nash equilibrium.
    """
    s = np.asarray(message, dtype=float)
    return float(np.mean(s * s) - contributors * Delta * Delta / 3.0)


SAMPLINGS = ("per-user", "chi-square")


def chain_squared_errors(
    x: ArrayLike,
    sigma2: ArrayLike,
    replications: int,
    rng: np.random.Generator,
    max_chunk_bytes: int = 64 * 2**20,
    sampling: str = "per-user",
) -> NDArray:
    """Run the chain ``replications`` times and return ``||mu_hat - mu||^2`` per replication.

    ``x`` is ``(K, d)`` in sequence order (sub-sequences concatenated: the server sums every
    sub-sequence's release and divides by ``K``, which is the average of equal-length sub-means).

    ``sampling="per-user"`` (the reference) draws every user's noise ``(replications, K, d)``,
    in chunks of at most ``max_chunk_bytes`` so memory stays bounded; chunks split replications
    first (then the stream is the same for any chunk size), and users too only when one
    replication alone exceeds the bound. ``"chi-square"`` is exact in distribution and draws
    one number per replication: the users' independent Gaussians sum to one Gaussian of
    variance ``s = sum_k sigma_k^2`` per coordinate, the data's sum over ``K`` is the mean
    itself, so ``||mu_hat - mu||^2 = (s / K^2) chi^2_d``.
    """
    data = np.asarray(x, dtype=float)
    K, d = data.shape
    if sampling == "chi-square":
        return float(np.sum(sigma2)) / K**2 * rng.chisquare(d, replications)
    scale = np.sqrt(np.asarray(sigma2, dtype=float))
    mu = data.mean(axis=0)
    data_sum = data.sum(axis=0)
    per_user = 8 * d
    users_per_block = max(1, min(K, max_chunk_bytes // per_user))
    reps_per_chunk = max(1, max_chunk_bytes // (per_user * users_per_block))
    out = np.empty(replications)
    buf = np.empty(min(reps_per_chunk, replications) * users_per_block * d)
    for start in range(0, replications, reps_per_chunk):
        c = min(reps_per_chunk, replications - start)
        noise = np.zeros((c, d))
        for u0 in range(0, K, users_per_block):
            u1 = min(K, u0 + users_per_block)
            z = buf[: c * (u1 - u0) * d].reshape(c, u1 - u0, d)
            rng.standard_normal(out=z)
            noise += np.matmul(scale[u0:u1], z)
        err = (data_sum + noise) / K - mu
        out[start : start + c] = np.einsum("ij,ij->i", err, err)
    return out
