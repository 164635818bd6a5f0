"""Incomplete information: the derived mechanism against enumeration and direct optimisation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import binom

from privgames.mechanisms import pricing_bayes as pb

GAME = pb.BinaryGame(N=12, alpha_L=0.2, alpha_H=0.7, eta=0.4, aggregation="mean")


def test_expected_cost_is_the_average_over_realised_types():
    """Exact expectation over the others' types vs 40,000 sampled populations (3 SE)."""
    mech = pb.Mechanism(beta=(0.05, 0.04), reward=(0.3, 0.1), target=(1.2, 1.7), q=0.02)
    s = np.array([1.3, 1.9])
    exact = pb.expected_cost(GAME, mech, 0, 0, np.array([1.1]), pb.TRUTHFUL, s)[0]
    rng = np.random.default_rng(0)
    n = rng.binomial(GAME.N - 1, GAME.eta, 40_000)
    sigmas = [np.concatenate([[1.1], np.full(k, s[0]), np.full(GAME.N - 1 - k, s[1])])
              for k in n]
    samples = []
    for k, sig in zip(n, sigmas, strict=True):
        delta = np.sqrt(np.sum(sig**2)) / GAME.N
        accuracy = GAME.kappa * delta * (1 + delta / (2 * GAME.L_F))
        penalty = 0.05 * (((GAME.N - 1) / GAME.N) ** 2 * 1.1**2 + np.sum(sig[1:] ** 2) / GAME.N**2)
        reward = 0.3 * binom.pmf(k + 1, GAME.N, GAME.eta)
        samples.append((1 - 0.2) * accuracy + 0.2 / 1.1 + penalty - reward - 0.02)
    samples = np.array(samples)
    assert abs(samples.mean() - exact) < 3 * samples.std(ddof=1) / np.sqrt(samples.size)


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_expected_cost_over_the_likely_counts_is_the_full_sum(aggregation):
    """At N = 3,000 the expectation runs over the counts of L types that carry the mass (a
    tenth of them); written out here over every count 0..N-1, it agrees to 1e-13."""
    game = pb.BinaryGame(N=3000, alpha_L=0.2, alpha_H=0.7, eta=0.4, aggregation=aggregation)
    assert len(game.likely_others[0]) < game.N / 5
    mech = pb.Mechanism(beta=(0.05, 0.04), reward=(0.3, 0.1), target=(1.2, 1.7), q=0.02)
    s, sigma = np.array([1.3, 1.9]), np.array([0.7, 1.1, 2.5])
    w = 1 / np.array(mech.target) ** 2 if aggregation == "mle" else np.ones(2)
    n = np.arange(game.N)
    pmf = binom.pmf(n, game.N - 1, game.eta)
    var = w[0] ** 2 * sigma[:, None] ** 2 + n * w[0] ** 2 * s[0] ** 2 + (
        game.N - 1 - n) * w[1] ** 2 * s[1] ** 2
    delta = np.sqrt(var) / (w[0] + n * w[0] + (game.N - 1 - n) * w[1])
    accuracy = (pmf * game.kappa * delta * (1 + delta / (2 * game.L_F))).sum(axis=1)
    penalty = 0.05 * (((game.N - 1) / game.N) ** 2 * sigma**2 + (game.N - 1) * (
        game.eta * s[0] ** 2 + (1 - game.eta) * s[1] ** 2) / game.N**2)
    reward = 0.3 * np.sum(pmf * binom.pmf(n + 1, game.N, game.eta))
    full = (1 - 0.2) * accuracy + 0.2 / sigma + penalty - reward - 0.02
    np.testing.assert_allclose(pb.expected_cost(game, mech, 0, 0, sigma, pb.TRUTHFUL, s), full,
                               rtol=1e-13)


def test_target_is_the_expected_social_optimum():
    """Direct two-dimensional minimisation from other starts finds nothing lower."""
    target = pb.social_optimum(GAME)
    best = pb.expected_social_cost(GAME, target)
    for start in ([2.0, -1.0], [-1.0, 2.0], [0.5, 0.5]):
        r = minimize(lambda t: pb.expected_social_cost(GAME, np.exp(t)), start,
                     method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-15})
        assert r.fun >= best * (1 - 1e-9)


def test_penalties_make_the_optimum_each_types_best_noise():
    d = pb.design(GAME)
    mech = pb.Mechanism(beta=tuple(d["beta"]), target=tuple(d["target"]))
    for t in (0, 1):
        sigma, _ = pb.best_noise(GAME, mech, t, t, pb.TRUTHFUL, d["target"])
        assert sigma == pytest.approx(d["target"][t], rel=1e-6)


@pytest.mark.parametrize("eta", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("alphas", [(0.1, 0.5), (0.3, 0.9)])
def test_truthful_is_a_bne_with_the_mechanism_and_not_with_penalties_alone(eta, alphas):
    """Enumeration: with the derived rewards no type gains by misreporting (its noise
    re-chosen); with the penalties alone the low type gains by reporting high."""
    game = pb.BinaryGame(N=15, alpha_L=alphas[0], alpha_H=alphas[1], eta=eta,
                         aggregation="mean")
    d = pb.design(game)
    assert d["feasible"]
    mech = d["mechanism"]
    s = pb.case_equilibrium(game, mech, pb.TRUTHFUL)
    np.testing.assert_allclose(s, d["target"], rtol=1e-6)
    assert pb.deviation_gains(game, mech, s).max() < 0
    penalties = pb.Mechanism(beta=mech.beta, target=mech.target)
    s_pen = pb.case_equilibrium(game, penalties, pb.TRUTHFUL)
    assert pb.deviation_gains(game, penalties, s_pen)[0] > 0


def test_compensation_balances_the_expected_budget():
    """q equals the expected per-client penalty minus reward, by sampling populations."""
    d = pb.design(GAME)
    mech, s = d["mechanism"], d["target"]
    rng = np.random.default_rng(1)
    totals = []
    for _ in range(20_000):
        types = (rng.random(GAME.N) >= GAME.eta).astype(int)
        sig = s[types]
        n_l = int(np.sum(types == 0))
        p = binom.pmf(n_l, GAME.N, GAME.eta)
        var = ((GAME.N - 1) / GAME.N) ** 2 * sig**2 + (np.sum(sig**2) - sig**2) / GAME.N**2
        totals.append(np.mean(np.array(mech.beta)[types] * var
                              - np.array(mech.reward)[types] * p))
    totals = np.array(totals)
    assert abs(totals.mean() - mech.q) < 3 * totals.std(ddof=1) / np.sqrt(totals.size)


def test_bad_input():
    with pytest.raises(ValueError, match=r"eta=1.0 is out of range"):
        pb.BinaryGame(N=5, alpha_L=0.2, alpha_H=0.6, eta=1.0)
    with pytest.raises(ValueError, match=r"0 < alpha_L < alpha_H < 1"):
        pb.BinaryGame(N=5, alpha_L=0.6, alpha_H=0.6, eta=0.5)


@pytest.mark.parametrize("N,eta", [(5, 0.3), (12, 0.4), (40, 0.7)])
def test_report_probabilities_written_out(N, eta):
    """Q_L = sum_k Binom(k; N-1, eta) p(k+1) and Q_H = sum_k Binom(k; N-1, eta) p(k), with
    p(n) = Binom(n; N, eta) the probability of the reported count (the reward's factor)."""
    game = pb.BinaryGame(N=N, alpha_L=0.2, alpha_H=0.7, eta=eta, aggregation="mean")
    k = np.arange(N)
    others = binom.pmf(k, N - 1, eta)
    want = [np.sum(others * binom.pmf(k + 1, N, eta)), np.sum(others * binom.pmf(k, N, eta))]
    np.testing.assert_allclose(pb.report_probabilities(game), want, rtol=1e-12)


@pytest.mark.parametrize("rho", [(0, 0), (1, 1), (0, 1)])
def test_case_equilibrium_is_a_fixed_point_of_the_best_responses(rho):
    """Lemmas 1-3's symmetric profile: each type's best noise against it is itself, to 1e-6
    (the iteration stops at a relative step of 1e-8 after its damping halves the step)."""
    mech = pb.design(GAME)["mechanism"]
    s = pb.case_equilibrium(GAME, mech, rho)
    best = np.array([pb.best_noise(GAME, mech, t, rho[t], rho, s)[0] for t in (0, 1)])
    np.testing.assert_allclose(best, s, rtol=1e-6)
