"""PPSP mechanism math against simulation and numerical optimisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from privgames.analysis.claims import z_threshold
from privgames.mechanisms import ppsp


@pytest.mark.parametrize("weights", [(1, 1, 1), (0.2, 3.0, 1.0), (5.0, 0.1, 2.0)])
@pytest.mark.parametrize("n,K", [(10, 50), (100, 1000)])
def test_optimal_c_minimises_the_tradeoff(weights, n, K):
    c_star = ppsp.optimal_c(*weights, n, K, 1.0)
    res = minimize_scalar(lambda c: ppsp.tradeoff_objective(c, *weights, n, K, 1.0),
                          bounds=(c_star / 100, c_star * 100), method="bounded",
                          options={"xatol": 1e-12 * c_star})
    assert c_star == pytest.approx(res.x, rel=1e-5)


def test_printed_cubic_matches_with_the_papers_laplace_scale():
    """With epsilon divided by sqrt(2) (Laplace scale v), the root solves the printed cubic."""
    g_u, g_a, g_p, n, K, delta = 1.0, 2.0, 3.0, 10, 40, 0.5
    c = ppsp.optimal_c(g_u, g_a, g_p / math.sqrt(2), n, K, delta)
    printed = (4 * g_a * math.pi**2 * n**2 * c**3 + math.sqrt(6) * g_u * math.pi * n**1.5 * c**2
               - 3 * g_p * delta * K * (K - 1))
    assert abs(printed) < 1e-8 * 3 * g_p * delta * K * (K - 1)


def test_epsilon_is_the_supremum_of_the_privacy_loss():
    """Harmonic and geometric budgets equal delta * sum_k sqrt(2)/v_m(k), the largest value the
    transcript's log-likelihood ratio can take (attained when every S_k lies beyond s')."""
    K, delta = 7, 0.3
    c, d, phi = np.array([2.0, 3.0, 5.0]), np.array([0.5, 1.0, 2.0]), np.array([0.9, 0.8, 0.95])
    k = np.arange(K)
    assert ppsp.epsilon(K, delta, c, d) == pytest.approx(
        delta * np.sum(math.sqrt(2) * (k + d.max()) / c.min()))
    assert ppsp.epsilon(K, delta, c, phi=phi) == pytest.approx(
        delta * np.sum(math.sqrt(2) / (c.min() * phi.min() ** k)))
    std = ppsp.noise_std(k, 2.0, 2.0)[:, None]
    s, s_alt = 0.0, delta
    worst = np.full((K, 1), s - 10.0)  # every S_k below s: each term reaches its bound
    loss = ppsp.privacy_loss(worst, std, s, s_alt)
    assert loss[0] == pytest.approx(ppsp.epsilon(K, delta, 2.0, 2.0))


def test_estimator_variance_matches_simulation():
    """Exact var(y_i) of the last-n-states estimator vs 20,000 simulated rings (3 SE, from
    the chi-square spread of a sample variance: SE = var sqrt(2/(R-1)))."""
    n, k, R = 6, 40, 20_000
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 10, n)
    x = np.tile(s, (R, 1))
    states = []
    for step in range(k + n - 1):
        beta = ppsp.noise_std(step, 3.0, 1.0) * rng.standard_normal((R, n))
        x = ppsp.shift_step(x, beta)
        states.append(x)
    y = np.sum(states[k - 1:k - 1 + n], axis=0)  # the n states x(k)..x(k+n-1)
    std = np.stack([np.full(n, ppsp.noise_std(j, 3.0, 1.0)) for j in range(k, k + n - 1)])
    exact = ppsp.estimator_error_variance(std)
    sample = y.var(axis=0, ddof=1)
    assert np.all(np.abs(sample - exact) < 3 * exact * math.sqrt(2 / (R - 1)))
    # n node means, each with SE sqrt(var / R): the family-wise 3-sigma threshold for n
    z = np.abs(y.mean(axis=0) - s.sum()) / np.sqrt(exact / R)
    assert z.max() < z_threshold(n)


def test_bounds_of_theorems_1_and_2_hold_but_are_loose():
    n, c = 10, 5.0
    std = np.stack([np.full(n, ppsp.noise_std(j, c, 1.0)) for j in range(100, 100 + n - 1)])
    var = ppsp.estimator_error_variance(std)
    assert var.sum() < ppsp.variance_bound(c, n)
    assert np.sum(np.sqrt(2 / math.pi * var)) < ppsp.utility_bound(c, n) / 100


def test_neighbours_see_what_the_eavesdropper_sees():
    """S_i(k) needs only d_{i-1} and d_i: the two colluding neighbours' view."""
    rng = np.random.default_rng(1)
    n, K = 5, 12
    s = rng.uniform(0, 5, n)
    x, messages, betas = s.copy(), [], []
    for k in range(K):
        beta = ppsp.noise_std(k, 1.0, 1.0) * rng.standard_normal(n)
        messages.append(x - beta)
        betas.append(beta)
        x = ppsp.shift_step(x, beta)
    stats = ppsp.eavesdropper_statistics(np.array(messages))
    np.testing.assert_allclose(stats, s - np.array(betas), atol=1e-10)
    view = np.array(messages)[:, [1, 2]]  # node 2's neighbours know d_1 and d_2 only
    neighbours = ppsp.neighbour_statistics(view[:, :1], view[:, 1:])[:, 0]
    np.testing.assert_allclose(neighbours, s[2] - np.array(betas)[:, 2], atol=1e-10)
    np.testing.assert_allclose(neighbours, stats[:, 2])


def test_bad_weights():
    with pytest.raises(ValueError, match="gamma_p=0 is out of range"):
        ppsp.optimal_c(1, 1, 0, 10, 10, 1.0)


@pytest.mark.parametrize("schedule", ["harmonic", "geometric"])
def test_gaussian_ring_epsilon_composes_the_steps(schedule):
    """K Gaussian views S_i(k) = s_i - beta_i(k) of a secret: composing their privacy-loss
    distributions in Google's dp-accounting gives the exact epsilon of the worst node."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    K, adjacency, dp_delta = 4, 2.0, 1e-5
    c, d, phi = np.array([5.0, 3.0, 4.0]), np.array([1.0, 2.0, 1.0]), np.array([0.9, 0.8, 0.7])
    kw = {"d": d} if schedule == "harmonic" else {"phi": phi}
    eps = ppsp.gaussian_epsilon(K, adjacency, c, dp_delta=dp_delta, **kw)
    per_node = []
    for i in range(3):
        v = ppsp.noise_std(np.arange(K), c[i], d[i], None if schedule == "harmonic" else phi[i])
        dists = [pld.from_gaussian_mechanism(float(s), sensitivity=adjacency,
                                             value_discretization_interval=1e-4) for s in v]
        total = dists[0]
        for dist in dists[1:]:
            total = total.compose(dist)
        per_node.append(total.get_epsilon_for_delta(dp_delta))
    assert max(per_node) == pytest.approx(eps, abs=2e-3)


def test_a_step_sends_each_node_s_masked_state_to_its_successor():
    """SI-PPSP, step 3: node ``i`` keeps its new noise ``beta_i(k)`` and receives its
    predecessor's ``x_{i-1}(k) - beta_{i-1}(k)``: ``x_i(k+1) = beta_i(k) + x_{i-1}(k) -
    beta_{i-1}(k)`` (ring order, node 0's predecessor is the last)."""
    x = np.array([5.0, 7.0, 11.0, 13.0])
    beta = np.array([0.5, -1.0, 2.0, 0.25])
    expected = beta + np.array([x[3] - beta[3], x[0] - beta[0], x[1] - beta[1], x[2] - beta[2]])
    np.testing.assert_array_equal(ppsp.shift_step(x, beta), expected)


def test_theorem4s_c_for_many_nodes_at_once_is_each_nodes_root():
    """``optimal_c_each`` (Newton, vectorized) solves Theorem 4's cubic, written out here and
    evaluated in exact rational arithmetic, to a relative residual of a few ulps (numpy's
    companion-matrix roots, ``optimal_c``, leave up to 1e-11), over weights spread 1e6 apart
    and rings of 3 to 10^6 nodes; and agrees with ``optimal_c``."""
    from fractions import Fraction

    rng = np.random.default_rng(4)
    K, delta = 10, 1e-5
    E = ppsp._privacy_coefficient(K, delta, 0.0)
    for n in (3, 1000, 10**6):
        w = 10.0 ** rng.uniform(-3, 3, (200, 3))
        each = ppsp.optimal_c_each(w, n, K, delta, 0.0)
        for (gu, ga, gp), c in zip(w, each, strict=True):
            a = Fraction(4 * ga * math.pi**2 * n**2)
            b = Fraction(math.sqrt(6) * gu * math.pi * n**1.5)
            e = Fraction(6 * gp * E)
            x = Fraction(float(c))
            assert abs(float((a * x**3 + b * x**2 - e) / e)) < 1e-14
        one = np.array([ppsp.optimal_c(*x, n, K, delta, 0.0) for x in w])
        np.testing.assert_allclose(each, one, rtol=1e-10)
