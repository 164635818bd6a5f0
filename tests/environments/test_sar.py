"""SAR attacks executed on simulated messages, against the theory; the participation model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from privgames.environments.config import ConfigError
from privgames.environments.sar import (
    SARConfig,
    SARModel,
    adjacent_colluders,
    arrange_colluders,
    nearest_colluders,
    neighbour_colluders,
    neighbour_flags,
    sar_epsilon,
    simulate_attacks,
)
from privgames.mechanisms.chain import M
from privgames.mechanisms.sar import failure_probability, slice_epsilon


def run(cfg: SARConfig, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return simulate_attacks(cfg, rng, rng.uniform(0, 1.3, cfg.K))


def within_3_se(per_round: np.ndarray, predicted: float) -> bool:
    """Rounds are the independent draws; SE = sd / sqrt(rounds) (fixed seed, no flakes)."""
    se = per_round.std(ddof=1) / math.sqrt(per_round.size)
    return abs(per_round.mean() - predicted) <= 3 * max(se, 1e-12)


@pytest.mark.parametrize(("count", "place"), [(2, 1), (1, 0), (3, 4), (2, 2)])
def test_arranged_colluders_have_the_law_of_a_uniform_order(count, place):
    """K = 5, ``count`` colluders among the victim's 4 others, the victim at ``place``: every
    one of the C(4, count) arrangements is equally likely, as under a uniform permutation
    (chi-square over 10^5 draws at a fixed seed; p > 10^-3), the victim's place is never a
    colluder's and every sequence holds exactly ``count`` colluders."""
    T = 100_000
    flags = arrange_colluders(np.full(T, count), np.full(T, place), 5,
                              np.random.default_rng(count * 5 + place))
    assert not flags[place].any()
    assert (flags.sum(axis=0) == count).all()
    frequencies = np.unique(flags.T, axis=0, return_counts=True)[1]
    assert frequencies.size == math.comb(4, count)
    assert chisquare(frequencies).pvalue > 1e-3


@pytest.mark.parametrize("place", [0, 3, 6])
def test_neighbours_drawn_alone_have_the_law_of_a_uniform_order(place):
    """K = 7, 3 colluders among the 6 others: the victim's neighbours collude jointly with the
    probabilities of sampling without replacement (interior place: both with 3*2/(6*5)); each
    of the four (left, right) outcomes within 3 standard errors of its exact probability over
    10^5 draws at a fixed seed. Nothing else is marked a colluder."""
    K, count, T = 7, 3, 100_000
    before, after = neighbour_colluders(np.full(T, count), np.full(T, place), K,
                                        np.random.default_rng(place))
    flags = neighbour_flags(before, after, K)  # what the mitigation reads
    np.testing.assert_array_equal(adjacent_colluders(flags, np.full(T, place)), (before, after))
    left = flags[place - 1] if place > 0 else np.zeros(T, dtype=bool)
    right = flags[place + 1] if place < K - 1 else np.zeros(T, dtype=bool)
    assert flags.sum(axis=0).max() <= 2 and not flags[place].any()
    sides = [s for s, exists in ((left, place > 0), (right, place < K - 1)) if exists]
    for outcome in np.ndindex(*(2,) * len(sides)):
        hits = np.ones(T, dtype=bool)
        ways, places_left, left_count = 1.0, K - 1, count
        for side, value in zip(sides, outcome, strict=True):
            hits &= side == bool(value)
            ways *= (left_count if value else places_left - left_count) / places_left
            places_left, left_count = places_left - 1, left_count - value
        se = math.sqrt(ways * (1 - ways) / T)
        assert abs(hits.mean() - ways) <= 3 * se


@pytest.mark.parametrize("attacker", ["weak", "strong"])
@pytest.mark.parametrize("K", [3, 5, 10, 20])
@pytest.mark.parametrize("p", [0.05, 0.2, 0.5])
def test_success_rate_matches_theory_over_1e5_trials(attacker, K, p):
    cfg = SARConfig(K=K, p=p, d=1, N=1, attacker=attacker, trials=100_000)
    out = run(cfg, seed=K)
    assert out["success"].size == 100_000
    assert within_3_se(out["success"][:, 0], cfg.predicted()["failure_probability"])


@pytest.mark.parametrize("attacker", ["weak", "strong"])
def test_noise_free_victims_are_recovered_to_float_precision(attacker):
    for noise in ("nash", "none"):
        out = run(SARConfig(K=8, p=0.5, d=6, N=2, attacker=attacker, trials=4000, noise=noise))
        assert out["success"].any()
        assert np.nanmax(out["worst"][out["possible"]]) < 1e-12


@pytest.mark.parametrize("mitigation", ["stale", "zero"])
@pytest.mark.parametrize("attacker", ["weak", "strong"])
def test_mitigation_cuts_failure_by_p_p(mitigation, attacker):
    cfg = SARConfig(K=10, p=0.3, d=8, N=2, attacker=attacker, trials=100_000,
                    mitigation_p=0.5, mitigation=mitigation)
    out = run(cfg, seed=3)
    # the closed form of eq (31) / corrected eq (32), not the config's prediction that
    # multiplies the same factor in: a victim who swaps its slice exposes nothing new
    unmitigated = failure_probability(10, 0.3, attacker)
    assert within_3_se(out["success"].mean(axis=1), (1 - 0.5) * unmitigated)


@pytest.mark.parametrize("attacker", ["weak", "strong"])
def test_slicing_cuts_whole_vector_exposure(attacker):
    rates = {}
    for N in (1, 3):
        cfg = SARConfig(K=6, p=0.5, d=6, N=N, attacker=attacker, trials=60_000)
        out = run(cfg, seed=N)
        whole = out["success"].all(axis=1).astype(float)
        assert within_3_se(whole, cfg.predicted()["whole_vector_exposure"])
        assert within_3_se(out["exposed_fraction"], cfg.predicted()["exposed_fraction"])
        rates[N] = whole.mean()
    assert rates[3] < rates[1] / 2


@pytest.mark.parametrize("how", [{"colluders": (1, 2, 3)}, {"fraction": 0.5}])
def test_fixed_colluding_sets(how):
    cfg = SARConfig(K=7, d=1, attacker="strong", trials=40_000, **how)
    out = run(cfg)
    assert within_3_se(out["success"][:, 0], cfg.predicted()["failure_probability"])


@pytest.mark.parametrize("kwargs,message", [
    ({"p": 1.0}, r"p=1.0 is out of range: p must be in \[0.0, 1.0\)"),
    ({"p": -0.1}, r"p=-0.1 is out of range"),
    ({"N": 0}, r"N=0 is out of range: N must be an integer in \[1, 10\]"),
    ({"N": 11}, r"N=11 is out of range"),
    ({"K": 2}, r"K=2 is out of range: K must be an integer >= 3"),
    ({"colluders": (0, 3)}, r"colluders=\[0, 3\] contains the victim 0"),
    ({"colluders": (25,)}, r"colluders\[0\]=25 is out of range"),
    ({"attacker": "mild"}, r"attacker='mild' is not allowed"),
])
def test_bad_input_names_parameter_and_range(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SARConfig(**{"K": 20, "d": 10, **kwargs})


def test_participation_learning():
    """Users who never meet colluders stay; when p far exceeds every threshold, all leave;
    in between, participation settles near the largest K whose threshold admits p."""
    stay = SARModel(SARConfig(K=12, p=0.0, N=4, rounds=10), seed=1).run()
    assert stay.results()["participants"].iloc[-1] == 12
    leave = SARModel(SARConfig(K=12, p=0.6, N=4, rounds=15, attacker="strong"), seed=1).run()
    assert leave.results()["participants"].iloc[-1] < 3
    mid = SARModel(SARConfig(K=20, p=0.1, N=5, rounds=40, attacker="weak"), seed=2).run()
    final = mid.results()["participants"].iloc[-1]
    assert 3 <= final <= mid.predicted()["largest_admitting_K"] + 2
    assert mid.adversary.attempts > 0
    assert len(mid.agents) == 21  # 20 users and the coalition


def test_users_estimate_p_from_what_they_see():
    model = SARModel(SARConfig(K=30, p=0.3, N=10, rounds=20, min_observations=10**9), seed=4)
    model.run()
    estimates = np.array([u.p_estimate for u in model.users])
    seen = np.array([u.seen for u in model.users])
    # Pooled over users the estimate weighs every (round, user) colluder flag by how often it
    # was seen (about 2N times, the same for all): it is a proportion of K * rounds Bernoulli(p)
    # flags, not of the `seen.sum()` correlated observations. 3 SE of that proportion.
    pooled = np.sum(estimates * seen) / seen.sum()
    assert abs(pooled - 0.3) < 3 * math.sqrt(0.3 * 0.7 / (30 * 20))


def test_sar_epsilon_user_level_slice_level_and_paper():
    """User-level epsilon does not depend on N; slice-level (the paper's reading) uses the
    longest slice and falls with N; the paper's number is eq (30) on that slice."""
    cfg = SARConfig(K=5, d=10, N=3)
    beta = np.array([0.2, 1.0, 0.4, 0.3, 0.9])
    eps = sar_epsilon(cfg, beta)
    finer = sar_epsilon(SARConfig(K=5, d=10, N=10), beta)
    assert eps["epsilon"] == pytest.approx(finer["epsilon"])
    assert eps["epsilon_slice"] == pytest.approx(slice_epsilon(4, 1.0, 1e-5, M * 1.0))
    assert finer["epsilon_slice"] < eps["epsilon_slice"] < eps["epsilon"]
    assert eps["epsilon_paper"] == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5) / M))


@pytest.mark.parametrize("K", [3, 20])
def test_compiled_scans_equal_their_written_out_forms(K):
    """The compiled nearest-colluder scan equals a max/min over the flags (no colluder on a
    side: -1 and K; victims at both ends included), and the compiled arrangement equals its
    vectorised form (places filled in order, each a colluder with probability colluders left
    over places left) on the same uniforms: the same flags, bit for bit."""
    rng = np.random.default_rng(K)
    T = 4000
    flags = rng.random((K, T)) < 0.3
    position = rng.integers(0, K, T)
    position[:2] = [0, K - 1]
    ranks = np.arange(K)[:, None]
    before = np.where(flags & (ranks < position), ranks, -1).max(axis=0)
    after = np.where(flags & (ranks > position), ranks, K).min(axis=0)
    near = nearest_colluders(flags, position)
    np.testing.assert_array_equal(near[0], before)
    np.testing.assert_array_equal(near[1], after)
    count = rng.integers(0, K, T)
    arranged = arrange_colluders(count, position, K, np.random.default_rng(1))
    u = np.random.default_rng(1).random((K, T))
    left, places = count.astype(float), np.full(T, K - 1.0)
    for j in range(K):
        other = position != j
        want = other & (u[j] * places < left)
        np.testing.assert_array_equal(arranged[j], want)
        left, places = left - want, places - other


def test_strong_estimates_are_definition_5_on_the_running_sums():
    """The compiled strong attack equals ``S_{after-1} - S_before - known`` written out over
    the chain's running sums (the fakes planted strictly between the colluders, bar the
    victim, replace those uploads), to float rounding; trials without a colluder on each
    side give 0."""
    from privgames.mechanisms.sar import strong_estimates

    rng = np.random.default_rng(5)
    K, T, width = 9, 3000, 3
    uploads, fakes = rng.uniform(-1, 1, (2, K, T, width))
    noise = rng.normal(size=(T, width))
    position = rng.integers(1, K - 1, T)
    before = np.array([rng.integers(-1, v) for v in position])
    after = np.array([rng.integers(v + 1, K + 1) for v in position])
    ranks = np.arange(K)[:, None]
    poisoned = (ranks > before) & (ranks < after) & (ranks != position)
    chain = np.where(poisoned[..., None], fakes, uploads)
    sums = noise + np.cumsum(chain, axis=0)
    trials = np.arange(T)
    possible = (before >= 0) & (after < K)
    want = (sums[np.where(possible, after - 1, 0), trials]
            - sums[np.maximum(before, 0), trials]
            - np.einsum("kt,ktl->tl", poisoned, fakes))
    out = np.empty((T, width))
    strong_estimates(uploads, noise, fakes, before, after, position, out)
    np.testing.assert_allclose(out[possible], want[possible], rtol=0, atol=1e-12)
    assert 0 < possible.sum() < T and not out[~possible].any()


@pytest.mark.parametrize("K", [2, 3, 20])
def test_adjacent_colluders_decide_the_weak_attack_as_the_nearest_do(K):
    """The weak attack is possible exactly where the nearest colluders are the victim's two
    neighbours; the adjacent-only lookup finds the same cases and the same positions there."""
    rng = np.random.default_rng(K)
    flags = rng.random((K, 5000)) < 0.5
    position = rng.integers(0, K, 5000)
    near = nearest_colluders(flags, position)
    adjacent = adjacent_colluders(flags, position)
    weak = (near[0] == position - 1) & (near[1] == position + 1)
    np.testing.assert_array_equal(weak, (adjacent[0] == position - 1)
                                  & (adjacent[1] == position + 1))
    assert 0 < weak.sum() < weak.size
    for a, b in zip(near, adjacent, strict=True):
        np.testing.assert_array_equal(a[weak], b[weak])


def test_released_noise_has_theorem_1_s_variance():
    """Each slice sequence releases its sum plus the first user's equilibrium noise, of
    variance ``m max beta`` (Theorem 1), zero on the padding. The attacks cancel the noise, so
    this checks its level directly: the sample variance over 200,000 coordinates within 3 SE
    (``var sqrt(2/n)`` for Gaussian draws); a standard deviation passed where the variance
    belongs reads z > 100."""
    from privgames.environments.sar import _first_noise, _slice_index
    from privgames.mechanisms.chain import nash_equilibrium

    cfg = SARConfig(K=8, d=10, N=3, noise="nash")
    beta = np.array([0.2, 1.3, 0.7, 0.1, 0.9, 0.4, 1.1, 0.05])
    idx, _ = _slice_index(cfg.d, cfg.N)
    mask = (idx < cfg.d).astype(float)
    noise = _first_noise(cfg, beta, (25_000, cfg.N), idx.shape[1], mask,
                         np.random.default_rng(2))
    real = noise[:, mask.astype(bool)]
    assert np.all(noise[:, ~mask.astype(bool)] == 0.0)
    target = nash_equilibrium(beta)[0]
    assert target == pytest.approx(M * beta.max())
    assert abs(real.var() - target) < 3 * target * math.sqrt(2 / real.size)
