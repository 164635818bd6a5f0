"""SAR theory: failure probabilities, thresholds, slicing."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from privgames.mechanisms import sar


def sum_form(K: int, p: float) -> float:
    """The proof of Theorem 8: (1/K) sum_i (1 - q^i)(1 - q^(K-1-i))."""
    q = 1 - p
    return sum((1 - q**i) * (1 - q ** (K - 1 - i)) for i in range(K)) / K


@pytest.mark.parametrize("K", [3, 4, 7, 20, 100])
@pytest.mark.parametrize("p", [0.0, 0.01, 0.2, 0.5, 0.9])
def test_strong_closed_form_equals_the_proofs_sum(K, p):
    assert sar.strong_failure_probability(K, p) == pytest.approx(sum_form(K, p), abs=1e-12)


@pytest.mark.parametrize("K", [3, 5, 8])
def test_strong_failure_is_the_brute_force_over_orders_and_colluder_sets(K):
    """Erratum (eq 32): the strong attack exposes the victim when a colluder stands before it
    and one after it in a uniform order. Enumerating the victim's place and every set of
    colluders among the others gives the library's value; the printed eq (32) is far off."""
    for p in (0.1, 0.3, 0.6):
        q = 1 - p
        exact = 0.0
        for place in range(K):
            for colluders in itertools.product((0, 1), repeat=K - 1):
                before, after = colluders[:place], colluders[place:]
                weight = p ** sum(colluders) * q ** (K - 1 - sum(colluders)) / K
                exact += weight * (any(before) and any(after))
        assert sar.strong_failure_probability(K, p) == pytest.approx(exact, abs=1e-12)
        printed = 1 + q ** (K - 1) - 2 * (1 - q ** (K - 1)) / (K * (1 - p))
        assert abs(printed - exact) > 0.03


@pytest.mark.parametrize("attacker", ["weak", "strong"])
@pytest.mark.parametrize("K", [3, 5, 12, 40])
def test_failure_probability_is_the_binomial_mixture(attacker, K):
    """A second derivation: condition on the number of colluders c ~ Bin(K-1, p)."""
    for p in (0.05, 0.3, 0.7):
        c = np.arange(K)
        mixture = np.sum(binom.pmf(c, K - 1, p) * sar.slice_exposure_given_colluders(K, c,
                                                                                      attacker))
        assert sar.failure_probability(K, p, attacker) == pytest.approx(mixture, abs=1e-12)
        # one slice: the whole vector is exposed exactly when that slice is (eq 31 / 32)
        assert sar.whole_vector_exposure(K, p, 1, attacker) == pytest.approx(
            sar.failure_probability(K, p, attacker), abs=1e-12)


@pytest.mark.parametrize("K", [3, 4, 10, 30, 100])
def test_thresholds_meet_one_over_K_squared(K):
    weak = sar.colluder_threshold(K, "weak")
    strong = sar.colluder_threshold(K, "strong")
    assert sar.weak_failure_probability(K, weak) == pytest.approx(1 / K**2, rel=1e-12)
    assert sar.strong_failure_probability(K, strong) == pytest.approx(1 / K**2, rel=1e-9)
    assert strong <= weak + 1e-12  # the strong attacker needs fewer colluders


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_slice_and_recombine_round_trip(data):
    d = data.draw(st.integers(1, 64))
    N = data.draw(st.integers(1, d))
    x = np.asarray(data.draw(st.lists(st.floats(-1e6, 1e6), min_size=d, max_size=d)))
    slices = sar.slice_vector(x, N)
    assert len(slices) == N
    sizes = [s.size for s in slices]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    np.testing.assert_array_equal(sar.recombine(slices), x)


def test_reclipped_slices_keep_the_vector_norm_budget():
    d, N, C = 10, 3, 2.0
    norms = [sar.reclipped_sensitivity(C, d, n) for n in sar.slice_sizes(d, N)]
    assert sum(n * n for n in norms) == pytest.approx(C * C)


def test_slice_epsilon_paper_is_eq3_per_slice():
    eps = sar.slice_epsilon(4, 1.0, 1e-5, 0.5, paper=True)
    assert eps == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25e5) / 0.5))


def test_slices_compose_into_one_gaussian_of_the_whole_vector():
    """User-level adjacency: a neighbour changes all N slices. Composing the N slices' exact
    privacy-loss distributions with Google's dp-accounting (an independent accountant) gives
    the epsilon of one Gaussian with sensitivity sqrt(d) Delta, not the largest slice's
    (Theorem 6's parallel composition does not apply to slices of one record)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    d, N, Delta, delta, variance = 10, 3, 1.0, 1e-5, 40.0
    sigma = math.sqrt(variance)
    parts = [pld.from_gaussian_mechanism(sigma, sensitivity=math.sqrt(n) * Delta,
                                         value_discretization_interval=1e-4)
             for n in sar.slice_sizes(d, N)]
    composed = parts[0].compose(parts[1]).compose(parts[2])
    eps = sar.vector_epsilon(d, Delta, delta, variance)
    # the PLD discretisation is pessimistic by at most a few intervals
    assert composed.get_epsilon_for_delta(delta) == pytest.approx(eps, abs=5e-4)
    assert eps > max(sar.slice_epsilon(n, Delta, delta, variance)
                     for n in sar.slice_sizes(d, N)) * 1.5


@pytest.mark.parametrize("call,message", [
    (lambda: sar.weak_failure_probability(2, 0.1), r"K=2 is out of range: K must be .*>= 3"),
    (lambda: sar.strong_failure_probability(5, 1.0),
     r"p=1.0 is out of range: p must lie in \[0, 1\)"),
    (lambda: sar.slice_vector(np.zeros(4), 5),
     r"N=5 is out of range: N must be an integer in \[1, d=4\]"),
    (lambda: sar.slice_vector(np.zeros(4), 0), r"N=0 is out of range"),
    (lambda: sar.colluder_threshold(5, "medium"), r"attacker='medium' is not allowed"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
