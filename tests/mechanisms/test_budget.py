"""Budget strategies and protections (``papers/budget-allocation-series.txt``, sections 4-6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import poisson

from privgames.environments.config import ConfigError
from privgames.mechanisms import budget as B

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)


@SETTINGS
@given(strategy=st.sampled_from(B.STRATEGIES), n=st.integers(1, 400),
       epsilon=st.floats(1e-3, 1e3), r=st.none() | st.floats(0.01, 0.99),
       t=st.none() | st.floats(1e-12, 0.99), where=st.floats(0.0, 1.0))
def test_every_strategy_is_positive_and_within_the_budget(strategy, n, epsilon, r, t, where):
    """Theorem 4: positive terms summing to at most epsilon, for any valid n, r, t and U_s
    (U_s anywhere in Lemma 3's interval, ends included)."""
    U_s = None
    try:
        if strategy.startswith("ac-"):
            low, high = B.us_bounds(strategy, n, epsilon, r, t)
            U_s = low + where * (high - low)
        b = B.allocate(strategy, n, epsilon, r, t, U_s)
    except ConfigError as err:  # a series too steep for floating point is refused, not zeroed
        assert "underflows" in str(err)
        assume(False)
    assert b.shape == (n,) and np.all(b > 0)
    assert b.sum() <= epsilon
    assert b.sum() == pytest.approx(epsilon, rel=1e-9)  # calibrated: the whole budget is used


@SETTINGS
@given(method=st.sampled_from(B.PROTECTIONS), strategy=st.sampled_from(B.STRATEGIES),
       n=st.integers(1, 60), seed=st.integers(0, 2**32 - 1),
       positive=st.booleans())
def test_protections_keep_the_total_and_the_multiset(method, strategy, n, seed, positive):
    base = B.allocate(strategy, n, 1.0)
    rows = np.broadcast_to(base, (5, n))
    out = B.protect(rows, method, np.random.default_rng(seed), strategy=strategy,
                    positive=positive)
    assert out.shape == (5, n) and np.all(out > 0)
    np.testing.assert_allclose(out.sum(axis=1), base.sum(), rtol=1e-12)
    if method in ("none", "random", "perturb"):  # a rearrangement: the same multiset
        np.testing.assert_array_equal(np.sort(out, axis=1), np.sort(rows, axis=1))


def test_perturbation_is_the_sequential_draw_of_eq_34_35():
    """The Gumbel top-k draw equals the literal procedure: at draw x, a remaining term of rank
    i is chosen with probability proportional to (n - i + 1) e^(x - i). Compared over the full
    distribution of orders at n = 4 (24 orders, 40,000 draws each way); the tolerance is
    4 binomial SEs of the difference, per order."""
    n, draws = 4, 40_000
    rng = np.random.default_rng(11)
    rank = np.arange(1, n + 1)

    def sequential() -> tuple:
        left, order = list(rank), []
        for x in range(1, n + 1):
            w = np.array([(n - i + 1) * math.exp(x - i) for i in left])
            order.append(left.pop(rng.choice(len(left), p=w / w.sum())))
        return tuple(order)

    literal = [sequential() for _ in range(draws)]
    fast = B.protect(np.broadcast_to(rank.astype(float), (draws, n)), "perturb",
                     np.random.default_rng(12))
    fast = [tuple(int(v) for v in row) for row in fast]
    for order in set(literal) | set(fast):
        p1, p2 = literal.count(order) / draws, fast.count(order) / draws
        se = math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / draws) + 1e-12
        assert abs(p1 - p2) <= 4 * se + 1.0 / draws, order


def test_every_term_can_be_drawn_first_with_eq34s_corrected_score():
    """Erratum (eq 34): with the printed ``(N - i)`` the last term scores 0, so it could never
    be drawn first (and at the last draw its probability is 0/0). With ``(n - i + 1)`` the
    first draw picks rank ``i`` with probability ``w_i / sum w``, ``w_i = (n - i + 1) e^-i``:
    checked for every rank over 200,000 draws within 4 binomial SEs; the last rank's
    probability (0.0092 at n = 4, 41 SEs from 0) would read 0 under the printed score."""
    n, draws = 4, 200_000
    rank = np.arange(1, n + 1)
    w = (n - rank + 1) * np.exp(-rank)
    first = B.protect(np.broadcast_to(rank.astype(float), (draws, n)), "perturb",
                      np.random.default_rng(5))[:, 0]
    p = w / w.sum()
    freq = np.array([np.mean(first == r) for r in rank])
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / draws))
    assert freq[-1] > 0


def test_taylor_is_the_poisson_pmf_and_eq16_maximises_the_middle_term():
    n, t = 30, math.exp(-7.5)
    np.testing.assert_allclose(B.taylor(n, t), poisson.pmf(np.arange(n), 7.5), rtol=1e-12)
    for m in (3, 8, 15):  # eq (15)-(16): t = e^(1 - m) maximises k_m(t), by brute force
        grid = np.exp(-np.linspace(0.01, 30, 30_001))
        k_m = [B.taylor(m, tt)[m - 1] for tt in grid]
        assert math.log(grid[int(np.argmax(k_m))]) == pytest.approx(1 - m, abs=2e-3)
    assert B.taylor_t(9) == pytest.approx(math.exp(-4))  # middle of 1..9 is 5
    assert B.taylor_t(3, "floor") == 1.0  # the literal floor reading leaves (0, 1)


def test_eq14_maximises_the_last_geometric_term():
    for n in (2, 7, 50):
        grid = np.linspace(1e-4, 1 - 1e-4, 200_001)
        last = (1 - grid) * grid ** (n - 1)
        assert grid[int(np.argmax(last))] == pytest.approx(B.geometric_ratio(n), abs=1e-4)


def test_acceptable_budget_makes_the_smallest_term_exactly_acceptable():
    """Eq (29) with equality: after compounding (eq 30) the smallest budget is sqrt(2)/U_s
    (Lemma 1), and a larger alpha would waste budget on the larger terms."""
    for strategy in ("ac-geo", "ac-taylor", "ac-bl-taylor", "ac-flip-geo"):
        low, high = B.us_bounds(strategy, 20, 1.0)
        for U_s in (low + 0.25 * (high - low), low + 0.9 * (high - low)):
            b = B.allocate(strategy, 20, 1.0, U_s=U_s)
            assert b.min() == pytest.approx(math.sqrt(2) / U_s, rel=1e-9)
        assert np.allclose(B.allocate(strategy, 20, 1.0, U_s=low), 1.0 / 20)
        base = B.allocate(strategy[3:], 20, 1.0)
        np.testing.assert_allclose(B.allocate(strategy, 20, 1.0, U_s=high), base, rtol=1e-12)


def test_flips_and_the_fixed_series():
    k = B.allocate("geo", 10, 1.0)
    np.testing.assert_allclose(B.allocate("flip-geo", 10, 1.0), k[::-1])
    ty = B.allocate("taylor", 10, 1.0)
    np.testing.assert_allclose(B.allocate("flip-taylor", 10, 1.0), (1 - ty) / 9)  # eq (21)
    n = 12  # Cormode et al. as adapted in 7.2.2, calibrated, is the ratio-2^(-1/3) series
    i = np.arange(1, n + 1)
    printed = 2 ** ((n - i) / 3) * (2 ** (1 / 3) - 1) / (2 ** ((n + 1) / 3) - 1)
    np.testing.assert_allclose(B.allocate("cormode", n, 1.0), printed / printed.sum())
    np.testing.assert_allclose(B.allocate("bisection", 5, 1.0), 0.5 ** i[:5] / (1 - 0.5**5))


def test_lemma3_interval_reproduces_table_5_and_not_the_literal_upper_end():
    low, high = B.us_bounds("geo", 5, 0.5)
    assert (low, high) == pytest.approx((14.142, 23.213), abs=1e-3)  # printed (14.15, 23.21)
    assert high * 5 == pytest.approx(116.06, abs=1e-2)  # Lemma 3 as printed: far off


@pytest.mark.parametrize("call,needle", [
    (lambda: B.allocate("geo", 5, 0.0), "epsilon=0.0"),
    (lambda: B.allocate("geo", 0, 1.0), "n=0"),
    (lambda: B.allocate("geo", 5, 1.0, r=1.0), "r=1.0"),
    (lambda: B.allocate("taylor", 5, 1.0, t=0.0), "t=0.0"),
    (lambda: B.allocate("ac-geo", 20, 1.0, U_s=10.0), "U_s=10.0 is out of range"),
    (lambda: B.allocate("nope", 5, 1.0), "strategy='nope'"),
    (lambda: B.protect(np.ones(3), "shuffle", np.random.default_rng(0)), "protection='shuffle'"),
    (lambda: B.protect(np.ones(3), "noisy-n", np.random.default_rng(0)), "strategy"),
    (lambda: B.parse_method("geo/nothing"), "protection 'nothing'"),
])
def test_bad_input_names_the_parameter_and_the_range(call, needle):
    with pytest.raises(ConfigError, match=None) as err:
        call()
    assert needle in str(err.value)


@pytest.mark.parametrize("strategy,n,r", [("bisection", 1100, None), ("geo", 400, 0.01),
                                          ("cormode", 4000, None)])
def test_underflowing_series_are_refused(strategy, n, r):
    with pytest.raises(ConfigError, match="underflows"):
        B.allocate(strategy, n, 1.0, r=r)


def test_us_error_names_the_lemma3_bounds():
    with pytest.raises(ConfigError) as err:
        B.allocate("ac-geo", 20, 1.0, U_s=1000.0)
    low, high = B.us_bounds("ac-geo", 20, 1.0)
    assert f"[{low}, {high}]" in str(err.value)


def test_taylor_past_the_default_t_s_underflow_is_refused_by_name():
    """Eq (16)'s default t = e^(1 - (n+1)/2) is 0.0 in floating point past n = 1491: the
    series would be log(0); a given t still works there."""
    assert B.taylor_t(1491) > 0.0 and B.taylor_t(1493) == 0.0
    with pytest.raises(ConfigError) as err:
        B.allocate("bl-taylor", 2000, 1.0)
    assert err.value.parameter == "t"
    assert B.allocate("bl-taylor", 2000, 1.0, t=1e-90).sum() == pytest.approx(1.0)
