"""Amplification bounds of APES (``papers/apes-shuffle-clip-laplace.txt``): the numerical clone
reduction against brute force, the echo probabilities, Lemma 4, the closed forms, Table 3."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privgames.environments.config import ConfigError
from privgames.mechanisms import shuffle as S


def brute_divergence(eps_star: float, q: list[float], eps: float) -> float:
    """The hockey-stick divergence of the reduced mixtures by enumerating every clone pattern
    and every clone's side: the observation is (#rho, #rho')."""
    p = 1 / (1 + math.exp(-eps_star))
    P: dict = {}
    Q: dict = {}
    for pattern in itertools.product([0, 1], repeat=len(q)):
        w = math.prod(qi if c else 1 - qi for qi, c in zip(q, pattern, strict=True))
        c = sum(pattern)
        for a in range(c + 1):
            wa = w * math.comb(c, a) / 2**c
            for side, (pp, qq) in ((1, (p, 1 - p)), (0, (1 - p, p))):
                key = (a + side, c - a + 1 - side)
                P[key] = P.get(key, 0.0) + wa * pp
                Q[key] = Q.get(key, 0.0) + wa * qq
    return sum(max(0.0, P[k] - math.exp(eps) * Q[k]) for k in P)


@pytest.mark.parametrize("q", [[0.4], [0.3, 0.8], [0.9, 0.2, 0.55]])
def test_numerical_bound_is_the_brute_force_divergence(q):
    """n = 2, 3, 4 users: the closed-sum divergence equals the enumeration at several eps, and
    the returned epsilon is where the enumerated divergence meets delta."""
    offset, pmf = S.poisson_binomial_pmf(q)
    counts = offset + np.arange(pmf.size, dtype=float)
    for eps in (0.0, 0.1, 0.4, 0.8):
        assert S._divergence(eps, 1.0, counts, pmf) == pytest.approx(
            brute_divergence(1.0, q, eps), abs=1e-13)
    delta = 0.05
    eps = S.clone_epsilon(1.0, np.array(q), delta)
    assert brute_divergence(1.0, q, eps) <= delta + 1e-9
    assert brute_divergence(1.0, q, eps - 1e-6) > delta


def test_poisson_binomial_matches_dynamic_programming():
    q = np.random.default_rng(0).uniform(0, 1, 700)
    exact = np.zeros(q.size + 1)
    exact[0] = 1.0
    for p in q:
        exact[1:] = exact[1:] * (1 - p) + exact[:-1] * p
        exact[0] *= 1 - p
    offset, pmf = S.poisson_binomial_pmf(q)
    full = np.zeros(q.size + 1)
    full[offset: offset + pmf.size] = pmf[: q.size + 1 - offset]
    np.testing.assert_allclose(full, exact, atol=1e-16 + 1e-12 * exact.max())


def test_echo_probabilities_are_the_mean_of_p_ij():
    eps = np.random.default_rng(1).uniform(0.05, 1.0, 300)
    eps[:5] = 0.5  # ties
    i, j = eps[:, None], eps[None, :]
    p = (i / j) * (1 - np.exp(-j)) / (1 - np.exp(-i)) * np.exp(-np.maximum(i, j))
    np.testing.assert_allclose(S.echo_probabilities(eps), p.mean(axis=1), rtol=1e-12)


def test_equal_budgets_make_eon_the_baseline():
    eps = np.full(2000, 0.7)
    assert S.eon_bound(eps, 1e-6) == pytest.approx(S.baseline_bound(eps, 1e-6), rel=1e-8)


@pytest.mark.slow  # 7 s
def test_lemma4_bounds_the_exact_neighbour_divergence():
    """Lemma 4 holds for every pair (and is exact when eps_i <= eps_j); the exact divergence is
    the largest log density ratio over inputs and outputs."""
    for a, b in itertools.product((0.05, 0.3, 1.0, 2.0), repeat=2):
        exact = S.neighbour_divergence_exact(a, b)
        bound = float(S.neighbour_divergence_bound(a, b))
        assert exact <= bound + 1e-12
        if a <= b:
            assert exact == pytest.approx(bound, abs=1e-9)


def test_numerical_forms_are_below_the_closed_forms_in_their_range():
    rng = np.random.default_rng(2)
    for dist in ("uniform1", "uniform2", "gauss2"):
        eps = S.personalized_budgets(dist, 20_000, rng)
        assert S.baseline_bound(eps, 1e-8) <= S.baseline_bound(eps, 1e-8, "closed")
        assert S.eon_bound(eps, 1e-8) <= S.eon_bound(eps, 1e-8, "closed")
        assert S.eon_bound(eps, 1e-8) <= S.baseline_bound(eps, 1e-8)


def test_table3_is_the_numerical_forms():
    """Uniform2, n = 10,000, delta_s = 1e-8: 0.069 (baseline) and 0.057 (APES) to two
    significant digits; the printed closed forms give about 0.24 and 0.21."""
    eps = S.personalized_budgets("uniform2", 10_000, np.random.default_rng(0))
    assert round(S.baseline_bound(eps, 1e-8), 3) == 0.069
    assert round(S.eon_bound(eps, 1e-8), 3) == 0.057
    assert S.baseline_bound(eps, 1e-8, "closed") > 0.2 and S.eon_bound(eps, 1e-8, "closed") > 0.2


def test_bounds_fall_with_n_and_delta():
    rng = np.random.default_rng(4)
    values = [S.eon_bound(S.personalized_budgets("uniform2", n, rng), 1e-8)
              for n in (1000, 10_000, 100_000)]
    assert values[0] > values[1] > values[2]
    eps = S.personalized_budgets("uniform2", 5000, rng)
    assert S.eon_bound(eps, 1e-4) < S.eon_bound(eps, 1e-10)


def test_out_of_range_closed_forms_fall_back_to_the_trivial_bound():
    eps = np.full(50, 1.0)  # n too small for either closed form
    assert S.baseline_bound(eps, 1e-8, "closed") == 1.0
    assert S.eon_bound(eps, 1e-8, "closed") == 1.0
    assert S.erlingsson_closed(eps, 1e-8) == 1.0


@pytest.mark.parametrize("call,needle", [
    (lambda: S.eon_bound([0.5, 0.5], 0.0), "delta_s=0.0"),
    (lambda: S.eon_bound([0.5, -1.0], 1e-6), "eps_local"),
    (lambda: S.eon_bound([0.5, 0.5], 1e-6, "exact"), "method='exact'"),
    (lambda: S.personalized_budgets("cauchy", 3, np.random.default_rng(0)), "distribution="),
])
def test_bad_input(call, needle):
    with pytest.raises(ConfigError) as err:
        call()
    assert needle in str(err.value)


def _p(eps_i: float, eps_j: float) -> float:
    """Lemma 6's ``p_ij``, as printed."""
    return (eps_i / eps_j * (1 - math.exp(-eps_j)) / (1 - math.exp(-eps_i))
            * math.exp(-max(eps_i, eps_j)))


def test_eon_closed_is_theorem_4_with_eight_over_q():
    """Erratum (Lemma 6's statement has ``+ Q``): Theorem 4's closed form, with ``Q`` the echo
    mass from the double sum of ``p_ij`` (the worst target left out), ``8/Q`` as its proof
    gives. With ``+ Q`` the bound would grow with the number of users; it falls."""
    eps = np.random.default_rng(3).uniform(0.05, 1.0, 3000)
    ei, ej = eps[:, None], eps[None, :]  # Lemma 6's p_ij as printed, every pair
    p_ij = ei / ej * -np.expm1(-ej) / -np.expm1(-ei) * np.exp(-np.maximum(ei, ej))
    q = p_ij.mean(axis=1)
    np.testing.assert_allclose(S.echo_probabilities(eps), q, rtol=1e-10)
    assert _p(eps[0], eps[1]) == pytest.approx(p_ij[0, 1], rel=1e-12)
    Q = q.sum() - q.max()
    delta = 1e-8
    assert Q >= 16 * math.log(4 / delta)  # inside the closed form's range
    t = math.tanh(eps.max() / 2)
    expected = math.log(1 + t * (8 * math.sqrt(math.log(4 / delta)) / math.sqrt(Q) + 8 / Q))
    assert S.eon_closed(eps, delta) == pytest.approx(expected, rel=1e-12)
    assert S.eon_closed(np.tile(eps, 4), delta) < S.eon_closed(eps, delta)


def test_eon_numerical_takes_the_worst_target():
    """Erratum (Theorem 4's "user 1"): the bound holds for every user, so the target is the
    one whose removal leaves the fewest echoes; checked against every choice of target."""
    eps = np.array([0.05, 0.2, 0.9, 0.4, 1.0, 0.6, 0.3])
    q = S.echo_probabilities(eps)
    every = [S.clone_epsilon(float(eps.max()), np.delete(q, t), 0.01) for t in range(eps.size)]
    assert S.eon_numerical(eps, 0.01) == pytest.approx(max(every), rel=1e-12)
    assert max(every) > min(every) + 1e-6  # the choice matters


@pytest.mark.parametrize("name", ["gauss1", "gauss2", "mixgauss1", "mixgauss2"])
def test_gaussian_budgets_are_table_2_read_literally(name):
    """Erratum (Table 2): ``N(0.1, 1)`` is mean 0.1 and standard deviation 1, clipped to the
    range: the mass at each clip end is the normal (mixture) probability beyond it, within
    4 binomial SEs of 200,000 draws, and the interior is the density's."""
    from scipy.stats import norm

    kind, p, (lo, hi) = S.DISTRIBUTIONS[name]
    draws = 200_000
    eps = S.personalized_budgets(name, draws, np.random.default_rng(8))
    parts = [(1.0, p[0], p[1])] if kind == "normal" else [(p[4], p[0], p[1]),
                                                          (1 - p[4], p[2], p[3])]

    def cdf(x: float) -> float:
        return sum(w * norm.cdf(x, m, s) for w, m, s in parts)

    for observed, expected in ((np.mean(eps == lo), cdf(lo)), (np.mean(eps == hi), 1 - cdf(hi)),
                               (np.mean(eps <= (lo + hi) / 2), cdf((lo + hi) / 2))):
        assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / draws)
