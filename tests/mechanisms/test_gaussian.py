"""Exact Gaussian accounting (Balle & Wang 2018) against two independent methods."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from privgames.mechanisms.gaussian import (
    analytic_epsilon,
    analytic_sigma,
    classical_epsilon,
    classical_sigma,
    gaussian_delta,
)

SIGMAS = [0.05, 0.3, 1.0, 4.0, 30.0]


def _delta_by_integration(eps: float, sigma: float, sensitivity: float) -> float:
    """delta(eps) = E[(1 - e^(eps - L))_+] for the privacy loss L ~ N(mu, 2 mu),
    mu = Delta^2 / (2 sigma^2), integrated numerically (no closed form used)."""
    mu = sensitivity**2 / (2 * sigma**2)
    sd = math.sqrt(2 * mu)
    pdf = stats.norm(mu, sd).pdf
    if eps >= mu + 40 * sd:
        return 0.0
    value, _ = integrate.quad(lambda x: (1 - math.exp(eps - x)) * pdf(x), eps, mu + 40 * sd,
                              epsabs=0, epsrel=1e-11, limit=500)
    return value


@pytest.mark.parametrize("sigma", SIGMAS)
def test_analytic_epsilon_agrees_with_numerical_integration_of_the_loss(sigma):
    delta, sensitivity = 1e-5, 1.0
    eps = float(analytic_epsilon(sigma, delta, sensitivity))
    by_quad = optimize.brentq(lambda e: _delta_by_integration(e, sigma, sensitivity) - delta,
                              0.0, 10 * eps + 10, xtol=1e-12)
    assert eps == pytest.approx(by_quad, rel=1e-6)


@pytest.mark.parametrize("sigma", SIGMAS[1:])
def test_analytic_epsilon_agrees_with_dp_accounting(sigma):
    """Google's dp-accounting privacy-loss distribution (pessimistic discretisation of width
    1e-4): its epsilon lies at most a few discretisation steps above the exact one. (At
    epsilon ~ 1000 its grid would need 10^7 points; the quadrature test covers that end.)"""
    from dp_accounting.pld import privacy_loss_distribution as pld

    delta, sensitivity = 1e-6, 2.0
    eps = float(analytic_epsilon(sigma, delta, sensitivity))
    dist = pld.from_gaussian_mechanism(sigma, sensitivity=sensitivity,
                                       value_discretization_interval=1e-4)
    assert dist.get_epsilon_for_delta(delta) == pytest.approx(eps, abs=5e-4 + 1e-4 * eps)


def test_analytic_sigma_inverts_analytic_epsilon_over_a_wide_range():
    eps = np.array([0.01, 0.1, 1.0, 5.0, 50.0, 500.0])
    sigma = analytic_sigma(eps, 1e-5, 3.0)
    np.testing.assert_allclose(analytic_epsilon(sigma, 1e-5, 3.0), eps, rtol=1e-9)
    np.testing.assert_allclose(gaussian_delta(eps, sigma, 3.0), 1e-5, rtol=1e-8)


def test_classical_formula_holds_below_one_and_fails_above():
    """Dwork & Roth Theorem A.1: for epsilon < 1 the classical sigma is enough (its exact
    epsilon is smaller). With little noise the classical epsilon understates the exact one:
    the paper's number is then no guarantee (docs/errata.md)."""
    for eps in (0.1, 0.5, 0.9):
        assert analytic_epsilon(classical_sigma(eps, 1e-5, 1.0), 1e-5, 1.0) < eps
    small_noise = 0.1
    assert analytic_epsilon(small_noise, 1e-5, 1.0) > 1.5 * classical_epsilon(small_noise,
                                                                               1e-5, 1.0)


def test_edges_and_bad_input():
    assert analytic_epsilon(0.0, 1e-5, 1.0) == math.inf
    assert analytic_epsilon(math.inf, 1e-5, 1.0) == 0.0
    assert analytic_epsilon(1e6, 0.5, 1.0) == 0.0  # delta(0) is already below 0.5
    with pytest.raises(ValueError, match=r"delta=1.5 is out of range"):
        analytic_epsilon(1.0, 1.5, 1.0)
    with pytest.raises(ValueError, match=r"sigma=-1.0 is out of range"):
        analytic_epsilon(-1.0, 1e-5, 1.0)
    with pytest.raises(ValueError, match=r"epsilon=0.0 is out of range"):
        analytic_sigma(0.0, 1e-5, 1.0)
