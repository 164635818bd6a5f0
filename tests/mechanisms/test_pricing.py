"""The pricing game's mathematics against brute force: equilibria are checked by global
minimisation of each client's cost, optima by direct minimisation of the social cost."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from privgames.mechanisms import pricing as pr

GAME = (1.3, 0.7, 1.1, 0.9)  # kappa, L_F, c, S
SIGMA_GRID = np.concatenate([np.geomspace(1e-6, 1e6, 40001), [np.inf]])


def brute_best_cost(i, sigma, alpha, beta=None, aggregation="mle"):
    """Client i's lowest cost over a dense grid of sigma (and opting out), others fixed:
    every candidate profile evaluated through the public error scale and loss bound."""
    n = alpha.size
    b = 0.0 if beta is None else beta[i]
    kappa, L_F, c, S = GAME
    profiles = np.tile(sigma, (SIGMA_GRID.size, 1))
    profiles[:, i] = SIGMA_GRID
    with np.errstate(all="ignore"):
        accuracy = (1 - alpha[i]) * pr.loss_bound(pr.error_scale(profiles, aggregation),
                                                  kappa, L_F)
        cost = accuracy + alpha[i] * c * S / SIGMA_GRID
        if b > 0:
            cost = cost + b * ((n - 1) / n) ** 2 * SIGMA_GRID**2
    return float(np.nanmin(cost))


def own_cost(i, sigma, alpha, beta=None, aggregation="mle"):
    n = alpha.size
    pen = 0.0 if beta is None else beta[i] * ((n - 1) / n) ** 2 * sigma[i] ** 2
    return float(pr.client_costs(sigma, alpha, *GAME, aggregation)[i] + pen)


def random_alpha(seed, n):
    return np.random.default_rng(seed).uniform(0.1, 0.9, n)


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_first_order_profiles_solve_eq10_and_eq11(aggregation):
    """The printed eq (10)/(11) hold at the MLE profiles; for the mean rule the derivative of
    each client's (or the social) cost vanishes, by central finite differences."""
    alpha = random_alpha(0, 7)
    for social, f in ((False, pr.equilibrium_noise), (True, pr.optimal_noise)):
        s = f(alpha, *GAME, aggregation)
        kappa, L_F, c, S = GAME
        d = float(pr.error_scale(s, aggregation))
        if aggregation == "mle":
            w = np.sum(1 - alpha) if social else 1 - alpha
            lhs = kappa * w * d**3 * (d + L_F) / L_F
            np.testing.assert_allclose(lhs, alpha * c * S * s, rtol=1e-10)
        else:
            for i in range(alpha.size):
                h = 1e-6 * s[i]
                up, dn = s.copy(), s.copy()
                up[i] += h
                dn[i] -= h

                def cost(p, i=i, social=social):
                    costs = pr.client_costs(p, alpha, *GAME, aggregation)
                    return costs.sum() if social else costs[i]

                assert abs(cost(up) - cost(dn)) / (2 * h) < 1e-6


def test_mean_rule_eq10_is_an_equilibrium_and_eq11_the_optimum():
    """Brute force: no client lowers its cost at eq (10) (dense grid and opting out); no
    multi-start minimisation of the social cost finds less than eq (11)."""
    alpha = random_alpha(1, 5)
    ne = pr.equilibrium_noise(alpha, *GAME, "mean")
    for i in range(alpha.size):
        assert own_cost(i, ne, alpha, aggregation="mean") <= brute_best_cost(
            i, ne, alpha, aggregation="mean") * (1 + 1e-9)
    so = pr.optimal_noise(alpha, *GAME, "mean")
    best = _direct_minimum(alpha, "mean")
    assert pr.social_cost(so, alpha, *GAME, "mean") <= best * (1 + 1e-9)
    np.testing.assert_allclose(pr.social_optimum(alpha, *GAME, "mean"), so)


def _direct_minimum(alpha, aggregation, starts=12):
    rng = np.random.default_rng(5)

    def f(t):
        with np.errstate(all="ignore"):
            return pr.social_cost(np.exp(np.clip(t, -30, 60)), alpha, *GAME, aggregation)

    return min(minimize(f, rng.normal(0, 2, alpha.size), method="Nelder-Mead",
                        options={"maxiter": 40_000, "xatol": 1e-10, "fatol": 1e-14}).fun
               for _ in range(starts))


def test_mle_eq10_is_not_an_equilibrium():
    """Erratum: under the MLE rule opting out is always a local minimum of a client's cost
    (its precision adds nothing to the aggregate's at first order), and at eq (10)'s point
    clients gain by deviating (brute force): it is no equilibrium."""
    alpha = random_alpha(2, 6)
    ne = pr.equilibrium_noise(alpha, *GAME, "mle")
    gains = np.array([own_cost(i, ne, alpha) - brute_best_cost(i, ne, alpha) for i in range(6)])
    assert np.sum(gains > 1e-3) >= 4
    assert not pr.is_equilibrium(ne, alpha, *GAME).all()


def test_mle_social_optimum_is_the_corner():
    """Erratum: under the MLE rule only the least sensitive client adds noise at the optimum;
    eq (11)'s interior point costs more, and direct minimisation finds nothing lower."""
    alpha = random_alpha(3, 5)
    corner = pr.social_optimum(alpha, *GAME, "mle")
    assert np.isfinite(corner).sum() == 1 and np.isfinite(corner[np.argmin(alpha)])
    best = pr.social_cost(corner, alpha, *GAME, "mle")
    assert _direct_minimum(alpha, "mle") >= best * (1 - 1e-9)
    assert pr.social_cost(pr.optimal_noise(alpha, *GAME, "mle"), alpha, *GAME, "mle") > 1.5 * best


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_corrected_penalties_make_eq11_a_global_equilibrium(aggregation):
    """With the derived beta_i* every client's global best response (brute force, opting out
    included: the penalty makes it infinitely costly) is its eq (11) level."""
    alpha = random_alpha(4, 6)
    so = pr.optimal_noise(alpha, *GAME, aggregation)
    beta = pr.penalty_coefficients(alpha, *GAME, aggregation)
    for i in range(alpha.size):
        assert own_cost(i, so, alpha, beta, aggregation) <= brute_best_cost(
            i, so, alpha, beta, aggregation) * (1 + 1e-9)
    br = pr.best_responses(so, alpha, *GAME, beta, aggregation)
    np.testing.assert_allclose(br, so, rtol=1e-9)


def test_printed_eq12_misses_the_optimum():
    """Erratum: with eq (12) as printed, clients' best responses leave eq (11)."""
    alpha = random_alpha(4, 6)
    so = pr.optimal_noise(alpha, *GAME)
    br = pr.best_responses(so, alpha, *GAME, pr.printed_penalty_coefficients(alpha, *GAME))
    assert np.max(np.abs(br / so - 1)) > 0.05


def test_compensation_balances_the_budget_ex_ante():
    """Sum of expected prices is zero with the derived q (exact and by 10^5 simulated rounds,
    3 SE); the printed q (units of sigma, not sigma^2) leaves a deficit or surplus."""
    alpha = random_alpha(6, 8)
    so = pr.optimal_noise(alpha, *GAME, "mean")
    beta = pr.penalty_coefficients(alpha, *GAME, "mean")
    q = pr.compensation(beta, so)
    assert np.sum(beta * pr.expected_penalty(so)) - alpha.size * q == pytest.approx(0, abs=1e-12)
    rng = np.random.default_rng(0)
    noise = so * rng.standard_normal((100_000, alpha.size))
    net = (beta * (noise - noise.mean(axis=1, keepdims=True)) ** 2).mean(axis=1) - q
    assert abs(net.mean()) < 3 * net.std(ddof=1) / math.sqrt(net.size)
    printed = 2 * (alpha.size - 1) ** 2 / alpha.size * np.sum(beta * so)
    assert abs(np.mean(beta * pr.expected_penalty(so)) - printed) > 0.1 * q


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 10_000),
       aggregation=st.sampled_from(["mle", "mean"]), priced=st.booleans())
def test_best_responses_are_global(n, seed, aggregation, priced):
    """The vectorised best response is never beaten by a dense grid plus opting out, for
    random profiles (some clients opted out) with and without penalties."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.05, 0.95, n)
    sigma = np.exp(rng.normal(0, 1.5, n))
    if not priced and aggregation == "mle" and n > 2:
        sigma[rng.integers(n)] = np.inf
    beta = rng.uniform(0.01, 2.0, n) if priced else None
    br = pr.best_responses(sigma, alpha, *GAME, beta, aggregation)
    for i in range(n):
        profile = sigma.copy()
        profile[i] = br[i]
        found = own_cost(i, profile, alpha, beta, aggregation)
        assert found <= brute_best_cost(i, sigma, alpha, beta, aggregation) * (1 + 1e-9) + 1e-12


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 10_000),
       aggregation=st.sampled_from(["mle", "mean"]), priced=st.booleans())
def test_a_client_responding_alone_gets_what_it_gets_among_all(n, seed, aggregation, priced):
    """A client moving in turn searches alone: the same floats as in a round where every
    client searches at once (nothing carries over from one client's search to the next)."""
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.0, 0.95, n)
    alpha[0] = 0.0 if seed % 3 == 0 else alpha[0]  # sigma = 0 among the candidates
    sigma = np.exp(rng.normal(0, 1.5, n))
    if not priced and aggregation == "mle" and n > 2:
        sigma[rng.integers(n)] = np.inf
    beta = rng.uniform(0.01, 2.0, n) if priced else np.zeros(n)
    others = pr.rest_of_aggregate(sigma, aggregation)
    ref = pr.reference_scale(sigma, *GAME)
    every = pr.global_best_response(others, alpha, beta, n, *GAME, aggregation, ref)
    for i in range(n):
        one = pr.global_best_response(others[i:i + 1], alpha[i:i + 1], beta[i:i + 1], n, *GAME,
                                      aggregation, ref)[0]
        assert one == every[i]


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_the_compiled_cost_is_the_written_out_cost(aggregation):
    """``own_cost`` (compiled) against J_i written out from the profile with client i's
    candidate in it: eq (8)/(7)'s error scale, eq (9)'s loss bound, the privacy cost and the
    penalty's own part; at random points and at the ends sigma = 0 and inf, with alpha = 0
    and beta = 0 there (a vanishing term is 0, not 0 * inf = nan)."""
    kappa, L_F, c, S = GAME
    rng = np.random.default_rng(5)
    n = 5
    for trial in range(200):
        sigma = np.exp(rng.normal(0, 2, n))
        alpha, beta = rng.uniform(0, 1, n), rng.uniform(0, 2, n)
        i = int(rng.integers(n))
        candidate = np.float64((0.0, np.inf, np.exp(rng.normal(0, 3)))[trial % 3])
        if trial % 3 == 0:
            alpha[i] = 0.0
        if trial % 3 == 1 and trial % 2:
            beta[i] = 0.0
        profile = sigma.copy()
        profile[i] = candidate
        rest = np.delete(sigma, i)
        with np.errstate(divide="ignore"):
            if aggregation == "mle":
                d = (np.sum(rest**-2.0) + candidate**-2.0) ** -0.5
            else:
                d = math.sqrt(np.sum(rest**2) + candidate**2) / n
            privacy = 0.0 if alpha[i] == 0 else alpha[i] * c * S / candidate
        penalty = 0.0 if beta[i] == 0 else beta[i] * ((n - 1) / n) ** 2 * candidate**2
        expected = (1 - alpha[i]) * kappa * d * (1 + d / (2 * L_F)) + privacy + penalty
        others = float(np.sum(rest**-2.0) if aggregation == "mle" else np.sum(rest**2))
        with np.errstate(divide="ignore", invalid="ignore"):
            got = float(pr.own_cost(candidate, others, alpha[i], *GAME, aggregation, beta[i],
                                    n))
        assert got == pytest.approx(expected, rel=1e-12), (trial, candidate)


def test_poa_grows_without_bound_on_the_family():
    """Proposition 3: equal types, the mean rule; the PoA increases with N and passes 60 at
    N = 10^4 (checked against brute-force equilibrium and optimum at small N above)."""
    values = [pr.poa_family(n) for n in (2, 10, 100, 1000, 10_000)]
    assert all(b > a for a, b in zip(values, values[1:], strict=False))
    assert values[-1] > 60
    alpha = np.full(4, 0.5)
    ne = pr.equilibrium_noise(alpha, *(1, 1, 1, 1), "mean")
    assert pr.is_equilibrium(ne, alpha, 1, 1, 1, 1, aggregation="mean").all()


def test_solvers_scale_to_large_n():
    """N = 10^5: the profiles are finite and satisfy the printed first-order condition."""
    alpha = np.random.default_rng(7).uniform(0.01, 0.99, 100_000)
    kappa, L_F, c, S = GAME
    s = pr.equilibrium_noise(alpha, *GAME)
    d = float(pr.error_scale(s))
    np.testing.assert_allclose(kappa * (1 - alpha) * d**3 * (d + L_F) / L_F, alpha * c * S * s,
                               rtol=1e-9)
    assert np.all(np.isfinite(pr.optimal_noise(alpha, *GAME, "mean")))


@pytest.mark.parametrize("call,message", [
    (lambda: pr.equilibrium_noise([0.5, 1.2], *GAME), r"alpha=.* out of range"),
    (lambda: pr.equilibrium_noise([0.5], *GAME), r"N >= 2"),
    (lambda: pr.optimal_noise([0.0, 0.5], *GAME), r"interior solution only for every alpha_i"),
    (lambda: pr.social_cost([1.0, 1.0], [0.5, 0.5], *GAME, "median"),
     r"aggregation='median' is not allowed"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
