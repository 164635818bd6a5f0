"""Chained-DP mechanism math checked against brute-force minimisation and simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from privgames.analysis.claims import z_threshold
from privgames.mechanisms import chain
from privgames.mechanisms.gaussian import gaussian_delta, gaussian_mechanism

betas = st.lists(st.floats(0.01, 5.0), min_size=2, max_size=12)


def argmin_1d(cost, hi: float) -> float:
    """Brute force: a dense log grid, then a bounded refinement around the best point."""
    grid = np.concatenate(([0.0], np.geomspace(1e-9, hi, 20001)))
    values = np.array([cost(s) for s in grid])
    i = int(np.argmin(values))
    lo, up = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(cost, bounds=(lo, up), method="bounded",
                          options={"xatol": 1e-13 * max(up, 1e-12)})
    return res.x if res.fun <= values[i] else grid[i]


@settings(max_examples=40, deadline=None)
@given(u=st.floats(0.0, 3.0), beta=st.floats(0.01, 5.0), downstream=st.floats(0.0, 2.0))
def test_best_response_minimises_follower_cost(u, beta, downstream):
    alpha = beta**1.5

    def cost(s):  # eq (14) for a follower with upstream u and fixed downstream noise
        return u + s + downstream + (alpha / math.sqrt(u + s) if u + s > 0 else math.inf)

    brute = argmin_1d(cost, 10.0)
    exact = float(chain.best_response(u, beta))
    assert cost(exact) <= cost(brute) + 1e-12
    assert exact == pytest.approx(brute, abs=1e-6 * max(1.0, chain.M * beta))


def follow_by_loop(first: float, beta: np.ndarray) -> np.ndarray:
    """Followers applying Lemma 1 one after another (independent of followers_respond)."""
    out, upstream = [first], first
    for b in beta[1:]:
        s = max(0.0, chain.M * b - upstream)
        out.append(s)
        upstream += s
    return np.array(out)


@settings(max_examples=25, deadline=None)
@given(beta=betas)
def test_nash_equilibrium_is_subgame_perfect(beta):
    beta = np.array(beta)
    ne = chain.nash_equilibrium(beta)
    # every follower plays its Lemma 1 best response to the upstream variance
    upstream = np.cumsum(ne)[:-1]
    np.testing.assert_allclose(ne[1:], chain.best_response(upstream, beta[1:]), atol=1e-15)
    # the first user's variance minimises its own cost given the followers' threshold strategies
    alpha1 = beta[0] ** 1.5

    def first_cost(s):
        profile = follow_by_loop(s, beta)
        return profile.sum() + (alpha1 / math.sqrt(s) if s > 0 else math.inf)

    s_star = argmin_1d(first_cost, 4 * chain.M * beta.max())
    assert ne[0] == pytest.approx(s_star, rel=1e-6)
    np.testing.assert_allclose(chain.followers_respond(s_star, beta), follow_by_loop(s_star, beta))


@settings(max_examples=25, deadline=None)
@given(beta=betas, s=st.floats(0.0, 5.0))
def test_followers_respond_matches_sequential_play(beta, s):
    beta = np.array(beta)
    np.testing.assert_allclose(chain.followers_respond(s, beta), follow_by_loop(s, beta),
                               atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_central_optimum_minimises_social_cost(seed):
    rng = np.random.default_rng(seed)
    beta = rng.uniform(0.05, 2.0, size=4)
    closed = chain.central_optimum(beta)
    # numerical minimisation over the whole profile (log-parametrised to keep it positive)
    res = minimize(lambda z: chain.social_cost(np.exp(z), beta), x0=np.log(np.full(4, 0.3)),
                   method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12,
                                                  "maxiter": 20000})
    assert chain.social_cost(closed, beta) <= res.fun + 1e-9
    assert closed.sum() == pytest.approx(np.exp(res.x).sum(), rel=1e-3)
    # errata: the printed profile m (mean beta)^(2/3) is not the optimum
    printed = np.zeros(4)
    printed[0] = chain.M * beta.mean() ** (2 / 3)
    assert chain.social_cost(printed, beta) > chain.social_cost(closed, beta) + 1e-6


@settings(max_examples=40, deadline=None)
@given(beta=betas)
def test_price_of_anarchy_closed_form_and_bound(beta):
    beta = np.array(beta)
    direct = chain.social_cost(chain.nash_equilibrium(beta), beta) / chain.social_cost(
        chain.central_optimum(beta), beta)
    poa = chain.price_of_anarchy(beta)
    assert poa == pytest.approx(direct, rel=1e-9)
    assert 1.0 - 1e-12 <= poa <= chain.price_of_anarchy_bound(beta) + 1e-12


def test_printed_poa_bound_is_wrong():
    """Theorem 5 as printed, PoA < max/(K min), fails for nearly equal preferences."""
    beta = np.array([1.0, 1.1, 1.2])
    assert chain.price_of_anarchy(beta) > beta.max() / (beta.size * beta.min())


def test_fairness_claim_fails_for_unequal_preferences():
    """Theorem 3 claims equal equilibrium costs; eq (14) at the NE differs with alpha_k."""
    beta = np.array([0.2, 1.0, 0.6])
    costs = chain.user_costs(chain.nash_equilibrium(beta), beta)
    assert np.ptp(costs) > 0.1
    printed = 2 ** (1 / 3) * np.sqrt(beta) + 2 ** (-2 / 3) * beta  # eq (25)
    assert not np.allclose(costs, printed)


@settings(max_examples=40, deadline=None)
@given(beta=betas)
def test_voluntary_participation(beta):
    """Theorem 4: staying in costs less than leaving to LDP (others re-equilibrate)."""
    beta = np.array(beta)
    inside = chain.user_costs(chain.nash_equilibrium(beta), beta)
    for k in range(beta.size):
        others = np.delete(beta, k)
        s = chain.M * beta[k]
        leave = s + chain.nash_equilibrium(others).sum() + beta[k] ** 1.5 / math.sqrt(s)
        assert leave > inside[k]


def test_chained_error_below_ldp_for_every_split():
    """Corollary 3: any split's total NE noise is below LDP's; Corollary 4: sorted is optimal."""
    rng = np.random.default_rng(1)
    beta = rng.uniform(0.0, 1.3, 6)
    ldp = chain.ldp_variances(beta).sum()
    best = math.inf
    for q in (2, 3):
        totals = []
        for perm in itertools.permutations(range(6)):
            groups = np.array_split(np.array(perm), q)
            totals.append(sum(chain.nash_equilibrium(beta[g]).sum() for g in groups))
        assert max(totals) < ldp
        best = min(totals)
        sorted_groups = chain.split_sequence(beta, q, "sorted", rng)
        assert sum(chain.nash_equilibrium(beta[g]).sum() for g in sorted_groups) == \
            pytest.approx(best)


def test_bas_order_never_puts_the_top_bidder_first():
    rng = np.random.default_rng(0)
    bids = np.array([0.3, 1.2, 0.5, 0.9])
    firsts = np.array([chain.bas_order(bids, rng)[0] for _ in range(3000)])
    assert not np.any(firsts == 1)
    # the others are first with probability 1/3 each: three binomial proportions, held to the
    # family-wise 3-sigma threshold for three comparisons
    se = math.sqrt(1 / 3 * 2 / 3 / firsts.size)
    for k in (0, 2, 3):
        assert abs(np.mean(firsts == k) - 1 / 3) < z_threshold(3) * se


def test_chain_epsilon_paper_is_eq3_inverted_with_sensitivity_sqrt_d_delta():
    """The paper's number: eq (3) solved for epsilon at the chain's total variance, with the
    l2 sensitivity sqrt(d) Delta (the corrected eq 30), written out independently here."""
    d, Delta, delta, variance = 50, 1.0, 1e-5, 0.3
    expected = math.sqrt(d) * Delta * math.sqrt(2 * math.log(1.25 / delta)) / math.sqrt(variance)
    assert chain.chain_epsilon(variance, d, Delta, delta, paper=True) == pytest.approx(expected)


def test_chain_epsilon_is_exact_for_the_release():
    """At the exact epsilon the Gaussian release's delta(epsilon) equals the target delta."""
    d, Delta, delta, variance = 50, 1.0, 1e-5, 0.3
    eps = chain.chain_epsilon(variance, d, Delta, delta)
    assert gaussian_delta(eps, math.sqrt(variance), math.sqrt(d) * Delta) == pytest.approx(
        delta, rel=1e-9)


def test_gaussian_mechanism_variance():
    """Sample variance of 10^5 draws within 3 standard errors (SE = var * sqrt(2/n))."""
    rng = np.random.default_rng(3)
    out = gaussian_mechanism(np.zeros(100_000), 2.5, rng)
    assert abs(out.var() - 2.5) < 3 * 2.5 * math.sqrt(2 / out.size)


@pytest.mark.parametrize("K,d", [(5, 20), (40, 3)])
def test_simulated_mse_matches_eq9(K, d):
    """Monte-Carlo mean of ||mu_hat - mu||^2 within 3 standard errors of d sum sigma^2 / K^2."""
    rng = np.random.default_rng(K)
    x = rng.uniform(-1, 1, (K, d))
    sigma2 = rng.uniform(0, 1, K)
    err = chain.chain_squared_errors(x, sigma2, 20_000, rng)
    se = err.std(ddof=1) / math.sqrt(err.size)
    assert abs(err.mean() - chain.chain_mse(sigma2.sum(), K, d)) < 3 * se


def test_chunking_does_not_change_the_stream():
    x = np.random.default_rng(0).uniform(-1, 1, (7, 11))
    sigma2 = np.linspace(0.1, 1.0, 7)
    a = chain.chain_squared_errors(x, sigma2, 50, np.random.default_rng(9))
    b = chain.chain_squared_errors(x, sigma2, 50, np.random.default_rng(9),
                                   max_chunk_bytes=8 * 7 * 11 * 3)
    np.testing.assert_array_equal(a, b)
    # blocks smaller than one replication still give the right statistics
    c = chain.chain_squared_errors(x, sigma2, 4000, np.random.default_rng(9),
                                   max_chunk_bytes=8 * 11 * 2)
    assert abs(c.mean() - chain.chain_mse(sigma2.sum(), 7, 11)) < 3 * c.std() / math.sqrt(4000)


def test_invalid_preferences_are_rejected():
    with pytest.raises(ValueError, match="beta"):
        chain.nash_equilibrium([0.5, -1.0])
    with pytest.raises(ValueError, match="split"):
        chain.split_sequence([0.5, 1.0], 2, "zigzag", np.random.default_rng())


def test_chi_square_shortcut_has_the_per_user_distribution():
    """The exact shortcut (one scaled chi-square per replication) and the per-user reference
    give the same distribution of ||mu_hat - mu||^2: both means within 3 SE of eq (9), both
    variances within 3 SE of 2 d (s/K^2)^2, and a two-sample Kolmogorov-Smirnov test at fixed
    seeds (20,000 replications each)."""
    from scipy.stats import ks_2samp

    from privgames.mechanisms.chain import chain_mse, chain_squared_errors

    rng = np.random.default_rng(0)
    K, d, reps = 20, 8, 20_000
    x = rng.uniform(-1, 1, (K, d))
    sigma2 = rng.uniform(0.1, 2.0, K)
    per_user = chain_squared_errors(x, sigma2, reps, np.random.default_rng(1))
    shortcut = chain_squared_errors(x, sigma2, reps, np.random.default_rng(2),
                                    sampling="chi-square")
    s = sigma2.sum()
    mean, var = float(chain_mse(s, K, d)), 2 * d * (s / K**2) ** 2
    for sample in (per_user, shortcut):
        assert abs(sample.mean() - mean) < 3 * np.sqrt(var / reps)
        m4 = 12 * d * (d + 4) * (s / K**2) ** 4  # fourth central moment of a scaled chi^2_d
        assert abs(sample.var() - var) < 3 * np.sqrt((m4 - var**2) / reps)
    assert ks_2samp(per_user, shortcut).pvalue > 1e-3
