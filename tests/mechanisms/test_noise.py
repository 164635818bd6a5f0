"""Clip-Laplace (APES, Definition 4, Theorem 1, eq 1): sampler, density, moments, calibration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad

from privgames.mechanisms import noise as N

C = 0.1
POINTS = [(x, e) for x in (-C, -0.03, 0.0, 0.07, C) for e in (0.05, 1.0, 5.0)]


@pytest.mark.parametrize("x,eps", POINTS)
def test_density_normalised_and_eq1_and_variance_against_quadrature(x, eps):
    def pdf(y):
        return float(N.clip_laplace_pdf(y, x, eps, C))

    mass = quad(pdf, -C, C, points=[x], epsabs=1e-14)[0]
    mean = quad(lambda y: y * pdf(y), -C, C, points=[x], epsabs=1e-15)[0]
    second = quad(lambda y: y * y * pdf(y), -C, C, points=[x], epsabs=1e-15)[0]
    assert mass == pytest.approx(1.0, abs=1e-12)
    assert float(N.clip_laplace_mean(x, eps, C)) == pytest.approx(mean, abs=1e-13)
    assert float(N.clip_laplace_var(x, eps, C)) == pytest.approx(second - mean**2, abs=1e-13)


def test_printed_normaliser_is_wrong_off_centre():
    """Definition 4 prints S with the same exponent twice; at x != 0 that is not the mass."""
    x, lam = 0.07, 2 * C / 1.0
    printed = 1 - 0.5 * np.exp((-C + x) / lam) - 0.5 * np.exp((-C + x) / lam)
    assert abs(printed - N.normaliser(x, lam, C)) > 1e-3


@pytest.mark.parametrize("x,eps", [(0.05, 0.5), (-C, 0.05), (C, 3.0), (0.0, 50.0)])
def test_sampler_moments_within_3_se(x, eps):
    """Sample mean and variance of 400,000 draws against eq (1) and the closed-form variance;
    tolerances: 3 SE (the variance's SE from the fourth central moment of the sample)."""
    draws = N.clip_laplace_sample(np.full(400_000, x), eps, C, np.random.default_rng(3))
    assert np.all(np.abs(draws) <= C)
    mean, var = float(N.clip_laplace_mean(x, eps, C)), float(N.clip_laplace_var(x, eps, C))
    n = draws.size
    assert abs(draws.mean() - mean) < 3 * np.sqrt(var / n)
    m4 = np.mean((draws - draws.mean()) ** 4)
    assert abs(draws.var() - var) < 3 * np.sqrt((m4 - var**2) / n)


@pytest.mark.parametrize("eps", [0.05, 1.0, 50.0, 20_000.0])
def test_sampler_is_the_inverse_cdf_of_its_uniforms(eps):
    """Each draw is the truncated Laplace's inverse CDF at the generator's uniform ``V``,
    written out here in extended precision (``longdouble``): ``u = F(-A) + V S``, ``z = x +
    lam log 2u`` below ``x``, ``x - lam log 2(1 - u)`` above. Agreement to 1e-9 of ``lam`` down
    to tails of ``1 - u`` near 1e-7 (the float64 kernel computes each tail from its own side);
    ``eps = 20,000`` takes the overflow-safe branch (``A/lam > 700``). Per-row budgets."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-C, C, (60, 700))
    x[:, :2] = [-C, C]
    budgets = np.full((60, 1), eps) * rng.uniform(0.5, 1.0, (60, 1))
    draws = N.clip_laplace_sample(x, budgets, C, np.random.default_rng(12))
    v = np.random.default_rng(12).random(x.shape).astype(np.longdouble)
    xl, lam = x.astype(np.longdouble), (2 * C / budgets).astype(np.longdouble)
    low, high = np.exp(-(C + xl) / lam) / 2, np.exp(-(C - xl) / lam) / 2
    u = low + v * (1 - low - high)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(u <= 0.5, xl + lam * np.log(2 * u), xl - lam * np.log(2 * (1 - u)))
    expected = np.clip(z, -C, C).astype(float)
    assert np.all(np.abs(draws) <= C)
    np.testing.assert_allclose(draws, expected, rtol=0, atol=1e-9 * float(lam.max()))


def test_sampler_matches_the_cdf():
    """Kolmogorov-Smirnov against the exact truncated-Laplace CDF (by quadrature), n = 20,000."""
    from scipy.stats import kstest

    x, eps = 0.04, 0.8
    draws = N.clip_laplace_sample(np.full(20_000, x), eps, C, np.random.default_rng(9))
    grid = np.linspace(-C, C, 4001)
    cdf_grid = np.concatenate([[0.0], np.cumsum(
        0.5 * (N.clip_laplace_pdf(grid[1:], x, eps, C) + N.clip_laplace_pdf(grid[:-1], x, eps,
                                                                            C))
        * np.diff(grid))])
    assert kstest(draws, lambda y: np.interp(y, grid, cdf_grid)).pvalue > 1e-3


@pytest.mark.parametrize("eps", [0.05, 0.8, 50.0])
def test_zero_centred_sampler_matches_the_cdf_and_the_moments(eps):
    """S-APES's padding sampler against CLap(0, 2C/eps, C): Kolmogorov-Smirnov against the
    exact CDF (a truncated Laplace: closed form), variance within 3 SE of the closed form
    (SE from the sample's fourth central moment), n = 200,000; per-row budgets broadcast."""
    from scipy.stats import kstest

    lam = 2 * C / eps
    draws = N.clip_laplace_zero(np.full((100_000, 1), eps), C, (100_000, 2),
                                np.random.default_rng(4)).ravel()
    assert np.all(np.abs(draws) <= C)

    def cdf(z):
        tail = 0.5 * np.exp(-np.abs(z) / lam)
        low = 0.5 * np.exp(-C / lam)
        return (np.where(z < 0, tail, 1 - tail) - low) / (1 - 2 * low)

    assert kstest(draws, cdf).pvalue > 1e-3
    var = float(N.clip_laplace_var(0.0, eps, C))
    m4 = np.mean((draws - draws.mean()) ** 4)
    assert abs(draws.var() - var) < 3 * np.sqrt((m4 - var**2) / draws.size)
    assert abs(draws.mean()) < 3 * np.sqrt(var / draws.size)


def test_density_ratio_never_exceeds_e_eps():
    """Theorem 1: over inputs in [-C, C] and outputs in [-C, C] the density ratio is at most
    e^eps, and the worst case (x = C, x' = -C, y at an end) attains it."""
    g = np.linspace(-C, C, 161)
    for eps in (0.05, 0.5, 1.0, 4.0):
        dens = N.clip_laplace_pdf(g[None, :], g[:, None], eps, C)  # [input, output]
        worst = np.log(dens[:, None, :] / dens[None, :, :]).max()
        assert worst <= eps + 1e-12
        assert worst == pytest.approx(eps, abs=1e-9)


def test_calibration_recovers_the_mean_gradient():
    rng = np.random.default_rng(1)
    eps = rng.uniform(0.05, 1.0, 2000)
    g = np.concatenate([rng.uniform(-C, C, 300), [-C, C, 0.0]])
    observed = np.mean(N.clip_laplace_mean(g[None, :], eps[:, None], C), axis=0)
    calibration = N.Calibration(eps, C)
    np.testing.assert_allclose(calibration(observed), g, atol=1e-9)
    # noise can push the mean past the curve: the estimate saturates at the clip bound
    assert calibration(np.array([1.0, -1.0])).tolist() == [C, -C]


def test_calibration_curve_in_chunks_is_the_mean_over_all_budgets():
    """More budgets than one chunk (and not a multiple of it): the curve is eq (1)'s mean."""
    eps = np.random.default_rng(5).uniform(0.05, 3.0, 2 * N._CHUNK + 17)
    grid = np.linspace(-C, C, N.CALIBRATION_GRID)
    direct = np.mean(N.clip_laplace_mean(grid[:, None], eps[None, :], C), axis=1)
    np.testing.assert_allclose(N.Calibration(eps, C).curve, direct, rtol=1e-12, atol=1e-16)


def test_laplace_sampler_is_numpys_laplace_on_the_same_uniforms():
    """The baseline's blocked sampler draws what ``Generator.laplace`` draws from the same
    seed (both invert the CDF at one uniform per draw), up to rounding; per-row budgets, more
    rows than one block, and the extreme uniform ``V = 0`` held finite."""
    rng = np.random.default_rng(21)
    x = rng.uniform(-C, C, (90, 500))
    budgets = rng.uniform(0.05, 2.0, (90, 1))
    draws = N.laplace_sample(x, budgets, C, np.random.default_rng(22))
    expected = x + np.random.default_rng(22).laplace(0.0, 1.0, x.shape) * (2 * C / budgets)
    np.testing.assert_allclose(draws, expected, rtol=0, atol=1e-12 * float((2 * C / budgets).max()))

    class ZeroFirst(np.random.Generator):
        def random(self, *args, out=None, **kwargs):
            super().random(*args, out=out, **kwargs)
            out.flat[0] = 0.0
            return out

    zero = N.laplace_sample(np.zeros((1, 4)), 1.0, C, ZeroFirst(np.random.PCG64(0)))
    assert np.all(np.isfinite(zero)) and zero[0, 0] == pytest.approx(2 * C * np.log(2**-52))


@pytest.mark.parametrize("sampler", ["clip_laplace_sample", "laplace_sample"])
def test_samplers_write_into_a_given_array(sampler):
    """``out`` (a block of a larger array's rows) gets exactly the draws a new array would;
    a strided ``out`` is refused, naming the shape it must have."""
    x = np.random.default_rng(1).uniform(-C, C, (30, 40))
    eps = np.linspace(0.1, 2.0, 30)[:, None]
    draw = getattr(N, sampler)
    fresh = draw(x, eps, C, np.random.default_rng(2))
    big = np.zeros((50, 40))
    into = draw(x, eps, C, np.random.default_rng(2), out=big[10:40])
    assert into.base is big and np.array_equal(big[10:40], fresh) and not big[:10].any()
    with pytest.raises(ValueError, match=r"C-contiguous array of shape \(30, 40\)"):
        draw(x, eps, C, np.random.default_rng(2), out=np.zeros((40, 30)).T)


def test_laplace_baseline_is_unbiased():
    draws = N.laplace_sample(np.full(200_000, 0.05), 0.5, C, np.random.default_rng(2))
    assert abs(draws.mean() - 0.05) < 3 * np.sqrt(2 * (2 * C / 0.5) ** 2 / draws.size)


def test_bad_input():
    from privgames.environments.config import ConfigError

    with pytest.raises(ConfigError, match="eps must be > 0"):
        N.clip_laplace_mean(0.0, 0.0, C)
    with pytest.raises(ConfigError, match="C > 0"):
        N.clip_laplace_sample(0.0, 1.0, -1.0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"x must lie in \[-A, A\] = \[-0.1, 0.1\]"):
        N.clip_laplace_sample(np.array([0.0, 0.1 + 1e-9]), 1.0, C, np.random.default_rng(0))
