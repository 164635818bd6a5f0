"""The learners' guarantees, on cost sequences chosen against them (no game involved)."""

import math

import numpy as np
import pytest

from privgames.agents.learners import (
    EXP3,
    SPSA,
    FictitiousPlay,
    Hedge,
    RegretMatching,
    make_grid_learner,
)
from privgames.mechanisms.validation import ConfigError


def _expected_regret(learner, costs):
    """Play ``costs`` (T, n, m) in [0, 1]; each agent's expected regret (the cost of the
    strategy it drew from minus its best fixed action's)."""
    mixed = np.zeros(costs.shape[1])
    for c in costs:
        mixed += np.einsum("nm,nm->n", learner.probabilities(), c)
        learner.observe(c)
    return mixed - costs.sum(axis=0).min(axis=1)


def _adversarial(T, n, m, rng):
    """Random costs, plus a switching adversary: in each block a different action is best,
    and the early leader is worst late (the sequence that punishes follow-the-leader)."""
    base = rng.random((T, n, m))
    block = (np.arange(T) * 4 // T)[:, None, None]
    base += 0.5 * (np.arange(m)[None, None, :] % 4 == block)
    return np.clip(base / 1.5, 0.0, 1.0)


@pytest.mark.parametrize("kind", [Hedge, RegretMatching])
def test_full_information_regret_stays_within_the_bound_on_adversarial_costs(kind):
    T, n, m = 400, 50, 7
    costs = _adversarial(T, n, m, np.random.default_rng(0))
    learner = kind(np.arange(m, dtype=float), n, T)
    regret = _expected_regret(learner, costs)
    bound = learner.regret_bound(T)
    assert regret.max() <= bound
    if kind is Hedge:  # at the horizon the tuned step gives the textbook sqrt(T ln m / 2)
        assert bound == pytest.approx(math.sqrt(T * math.log(m) / 2))
    else:  # Blackwell: ||R_T^+||^2 <= sum_t sum_j (p.c_t - c_tj)^2 <= T (m - 1) for c in [0, 1]
        for t in (1, 17, T):
            assert learner.regret_bound(t) == pytest.approx(math.sqrt(t * (m - 1)), rel=1e-12)


@pytest.mark.parametrize("kind", [Hedge, EXP3])
def test_the_bound_is_the_fixed_step_formula_at_every_round(kind):
    """Written out: ``ln m / eta + eta t / 8`` (Hedge), ``ln m / eta + eta m t / 2`` (EXP3),
    for the default step and a given one."""
    T, m = 300, 6
    for eta in (None, 0.05):
        learner = kind(np.arange(m, dtype=float), 1, T, "full" if kind is Hedge else "bandit",
                       eta=eta)
        e = learner.eta if eta is None else eta
        for t in (1, 17, T, 3 * T):
            written = math.log(m) / e + e * t * (1 / 8 if kind is Hedge else m / 2)
            assert learner.regret_bound(t) == pytest.approx(written, rel=1e-12)


def test_hedges_regret_stays_within_its_bound_at_every_round():
    """The bound holds at every round, not only at the horizon the step is tuned to; the old
    per-round curve ``sqrt(t ln m / 2)`` is crossed early on the same costs."""
    T, n, m = 400, 50, 7
    costs = _adversarial(T, n, m, np.random.default_rng(3))
    costs[:, 0] = np.where(np.arange(m) == 0, 0.0, 1.0)  # one agent: one action always best
    learner = Hedge(np.arange(m, dtype=float), n, T)
    mixed, totals, regrets = np.zeros(n), np.zeros((n, m)), []
    for c in costs:
        mixed += np.einsum("nm,nm->n", learner.probabilities(), c)
        learner.observe(c)
        totals += c
        regrets.append((mixed - totals.min(axis=1)).max())
    rounds = np.arange(1, T + 1)
    assert all(r <= learner.regret_bound(t) for r, t in zip(regrets, rounds, strict=True))
    assert any(r > math.sqrt(t * math.log(m) / 2) for r, t in zip(regrets, rounds, strict=True))


def test_hedge_shift_and_scale_of_full_costs_is_the_learners_business():
    """Full-information costs are shifted by each row's smallest and divided by the span, so a
    learner fed ``a + b c`` with ``span = b`` plays exactly as one fed ``c``."""
    costs = np.random.default_rng(1).random((50, 3, 4))
    a, b = Hedge(np.arange(4.0), 3, 50), Hedge(np.arange(4.0), 3, 50, span=7.0)
    for c in costs:
        a.observe(c)
        b.observe(5.0 + 7.0 * c)
    np.testing.assert_allclose(a.probabilities(), b.probabilities())


def test_hedge_with_a_larger_step_than_the_bound_assumes_can_exceed_it():
    """The bound is tied to the step size: on the sequence that punishes follow-the-leader
    ((1/2, 0), then (0, 1) and (1, 0) in turn) a greedy step pays about T/2, beyond the
    standard step's bound, which the standard step keeps."""
    T = 400
    costs = np.array([[[0.5, 0.0]]] + [[[0.0, 1.0]] if t % 2 else [[1.0, 0.0]]
                                       for t in range(1, T)])
    greedy = Hedge([0.0, 1.0], 1, T, eta=50.0)
    standard = Hedge([0.0, 1.0], 1, T)
    assert _expected_regret(greedy, costs)[0] > standard.regret_bound(T)
    assert _expected_regret(standard, costs)[0] <= standard.regret_bound(T)
    assert greedy.regret_bound(T) > T / 2  # its own bound says so: eta T / 8 with eta = 50


def test_exp3_expected_regret_within_its_bound_over_seeds():
    """EXP3's bound is on the expected regret: the mean over 40 independent runs (each with 20
    agents) plus 3 standard errors stays below it."""
    T, n, m = 300, 20, 5
    costs = _adversarial(T, n, m, np.random.default_rng(2))
    runs = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        learner = EXP3(np.arange(m, dtype=float), n, T)
        mixed = np.zeros(n)
        for c in costs:
            mixed += np.einsum("nm,nm->n", learner.probabilities(), c)
            learner.act(rng)
            learner.observe(c[np.arange(n), learner.last])
        runs.append((mixed - costs.sum(axis=0).min(axis=1)).mean())
    mean, se = np.mean(runs), np.std(runs, ddof=1) / math.sqrt(len(runs))
    assert mean + 3 * se <= learner.regret_bound(T)
    assert mean > 0.0  # it does pay for exploring


def test_exp3_importance_weights_are_unbiased():
    """The estimate of every action's cost, averaged over draws, equals the cost (3 SE)."""
    rng = np.random.default_rng(3)
    n, m = 20000, 4
    learner = EXP3(np.arange(m, dtype=float), n, 10, eta=0.7)
    learner.estimates[:] = rng.random((1, m))  # a non-uniform strategy, the same for all
    before = learner.estimates.copy()
    c = np.array([0.2, 0.9, 0.5, 0.1])
    learner.act(rng)
    learner.observe(c[learner.last])
    increment = learner.estimates - before
    se = increment.std(axis=0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(increment.mean(axis=0) - c) <= 3 * se)


def test_fictitious_play_frequencies_converge_in_matching_pennies():
    """Robinson (1951): in a two-player zero-sum game, fictitious play's empirical
    frequencies converge to the equilibrium, (1/2, 1/2) in matching pennies."""
    grid = np.array([0.0, 1.0])
    a, b = FictitiousPlay(grid, 1, 4000), FictitiousPlay(grid, 1, 4000)
    rng = np.random.default_rng(0)
    counts = np.zeros(2)
    for _ in range(4000):
        i, j = a.act(rng)[0], b.act(rng)[0]
        counts[int(i)] += 1
        a.observe(np.array([[1.0 - (k == j) for k in grid]]))  # a loses on a mismatch
        b.observe(np.array([[float(k == i) for k in grid]]))  # b loses on a match
    assert abs(counts[0] / counts.sum() - 0.5) < 0.02


def test_spsa_finds_the_minimum_of_a_noisy_convex_cost():
    """Spall's gains on a quadratic with Gaussian noise: every agent ends near its own
    minimiser (a zeroth-order learner sees only its realized costs)."""
    n, T = 200, 2000
    rng = np.random.default_rng(4)
    target = rng.uniform(2.0, 8.0, n)
    learner = SPSA(np.linspace(0.0, 10.0, 11), n, T, low=0.0, high=40.0)
    for _ in range(T):
        x = learner.act(rng)
        learner.observe((x - target) ** 2 + rng.normal(0.0, 1.0, n))
    assert np.max(np.abs(learner.values() - target)) < 0.5


@pytest.mark.parametrize("name,feedback,message", [
    ("hedge", "bandit", "feedback='bandit' is not allowed with learner='hedge'"),
    ("exp3", "full", "feedback='full' is not allowed with learner='exp3'"),
    ("nope", "full", "learner='nope' is not allowed"),
])
def test_bad_learner_or_feedback_is_named(name, feedback, message):
    with pytest.raises(ConfigError, match=message):
        make_grid_learner(name, [0.0, 1.0], 3, 10, feedback)


@pytest.mark.parametrize("grid", [[], [1.0, np.nan], [0.0, -np.inf], [1.0, 1.0]])
def test_bad_grids_are_refused(grid):
    with pytest.raises(ConfigError, match="grid"):
        make_grid_learner("hedge", grid, 3, 10)


@pytest.mark.parametrize("eta", [0.0, -1.0])
def test_non_positive_step_is_refused(eta):
    with pytest.raises(ConfigError, match="eta"):
        make_grid_learner("hedge", [0.0, 1.0], 3, 10, eta=eta)
    with pytest.raises(ConfigError, match="spsa_a"):
        make_grid_learner("spsa", [0.0, 1.0], 3, 10, "bandit", eta=eta)


@pytest.mark.parametrize("kind", [Hedge, RegretMatching, FictitiousPlay])
def test_full_information_learners_find_a_clearly_best_action(kind):
    """Noisy costs where action 2 is better by 0.4 in expectation: the average regret after
    400 rounds is a small fraction of that gap, and the strategy sits on action 2 (a learner
    that chased the worst action would pay about 0.4 a round)."""
    T, n, m = 400, 30, 5
    rng = np.random.default_rng(6)
    means = np.full(m, 0.6)
    means[2] = 0.2
    costs = np.clip(means + rng.uniform(-0.2, 0.2, (T, n, m)), 0.0, 1.0)
    learner = kind(np.arange(m, dtype=float), n, T)
    regret = _expected_regret(learner, costs)
    assert regret.max() / T < 0.04
    assert np.all(learner.probabilities()[:, 2] > 0.9)


@pytest.mark.parametrize("m", [9, 2])  # 2: compiled with the count a constant (rows_of)
def test_the_compiled_kernels_are_their_written_out_forms(m):
    """Exponential weights, the draw from a mixed strategy, the full-information units and
    the rows' argmin, each against numpy on random rows (NaN and infinite costs among
    them)."""
    from privgames.agents.learners import _draw, _learn_rows, _map_full, _row_argmin, _softmin

    rng = np.random.default_rng(2)
    cumulative = rng.normal(0.0, 5.0, (50, m))
    w = np.exp(-0.3 * (cumulative - cumulative.min(axis=1, keepdims=True)))
    p = _softmin(cumulative, 0.3)
    np.testing.assert_allclose(p, w / w.sum(axis=1, keepdims=True), rtol=1e-13)
    u = rng.random(50)
    p[7], p[11, -1], p[13] = np.nan, np.nan, 0.0  # the draw takes the actions before a NaN
    p[17] *= 0.5  # and the last action where the cumulative sum never reaches u
    u[[19, 48]] = np.cumsum(p[[19, 48]], axis=1)[:, 0]  # past an action only below u
    want = np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), m - 1)
    grid, values = np.linspace(0.5, 3.0, m), np.empty(50)
    for rows in (50, 49, 3):  # rows in fours, and the rest
        drawn = _draw(p[:rows], u[:rows], np.empty(rows, dtype=np.int64), grid, values[:rows])
        np.testing.assert_array_equal(drawn, want[:rows])
        np.testing.assert_array_equal(values[:rows], grid[want[:rows]])  # in the same pass
    costs = rng.normal(0.0, 1.0, (50, m))
    costs[3, 1], costs[5, 0] = np.nan, np.inf
    span, active = rng.uniform(0.2, 1.0, 50), rng.random(50) > 0.3
    finite = np.where(np.isnan(costs), np.inf, costs)
    want = np.minimum((finite - finite.min(axis=1, keepdims=True)) / span[:, None], 1.0)
    np.testing.assert_array_equal(_map_full(costs, span, active, np.full((50, m), np.nan)),
                                  np.where(active[:, None], want, 0.0))
    # each row's argmin, as numpy's: the first of equal smallest, a NaN first of all
    ties = rng.integers(0, 3, (400, 9)).astype(float)
    ties[rng.random(ties.shape) < 0.05] = np.nan
    ties[rng.random(ties.shape) < 0.05] = np.inf
    ties[rng.random(ties.shape) < 0.02] = -np.inf
    for columns in (9, 7, m):  # whole lanes of four after the first, a remainder, none
        np.testing.assert_array_equal(_row_argmin(np.ascontiguousarray(ties[:, :columns])),
                                      np.argmin(ties[:, :columns], axis=1))
    # ... and where the learners take it, in the pass that also weighs (rows with a NaN, an
    # infinity or neither); a row not taken keeps its rank and weights
    lowest, weights = np.full(400, -1), np.full(ties.shape, -1.0)
    rows = rng.random(400) < 0.8
    _learn_rows(ties, 0.3, weights, lowest, rows, np.zeros((0, 0)), np.zeros(0), False, True,
                True)
    np.testing.assert_array_equal(lowest, np.where(rows, np.argmin(ties, axis=1), -1))
    np.testing.assert_array_equal(weights, np.where(rows[:, None], _softmin(ties, 0.3), -1.0))


@pytest.mark.parametrize("costs_given", [True, False])
@pytest.mark.parametrize("add", [True, False])
def test_the_two_action_pass_is_the_general_one(costs_given, add):
    """The learners' pass at two actions (written for LLVM to vectorize across rows) gives
    the loops for any count bit for bit (a NaN's sign aside, which IEEE leaves open): losses,
    ranks, weights and whether a rank moved, for ranking and weighing alone or together, on
    losses with NaN, infinities and ties, costs with NaN and infinities, steps small and
    large, rows not taken, in blocks and their remainders."""
    from privgames.agents.learners import _learn_rows
    from tests.bits import same_bits

    rng = np.random.default_rng(6)
    for n in (1, 2047, 5000):
        losses = rng.normal(0.0, 1.0, (n, 2)) * rng.choice([0.01, 1.0, 1e3], (n, 1))
        losses[rng.random((n, 2)) < 0.02] = np.inf
        losses[rng.random((n, 2)) < 0.02] = np.nan
        tied = rng.random(n) < 0.1
        losses[tied, 1] = losses[tied, 0]
        costs = rng.normal(0.0, 1.0, (n, 2))
        cells = rng.random((n, 2))
        costs[cells < 0.03], costs[(cells > 0.03) & (cells < 0.06)] = np.nan, np.inf
        costs[(cells > 0.06) & (cells < 0.07)] = -np.inf
        span, rows = rng.uniform(0.05, 1.0, n), rng.random(n) < 0.7
        if not costs_given:
            costs, span = np.zeros((0, 0)), np.zeros(0)
        for eta in (1e-3, 0.3, 40.0):
            for rank, weigh in ((True, True), (True, False), (False, True), (False, False)):
                runs = []
                for kernel in (_learn_rows, _learn_rows.generic):
                    state = (losses.copy(), np.full((n, 2), -1.0) if weigh else np.zeros((0, 0)),
                             np.arange(n) % 2)
                    moved = kernel(state[0], eta, state[1], state[2], rows, costs, span, add,
                                   rank, weigh)
                    runs.append((*state, moved))
                (*pair, moved), (*general, moved_general) = runs
                assert moved == moved_general
                assert all(same_bits(a, b) for a, b in zip(pair, general, strict=True))


@pytest.mark.parametrize("kind", [Hedge, EXP3])
def test_the_last_iterate_is_the_first_smallest_loss_among_ties(kind):
    """Costs on a coarse lattice make equal losses: the last iterate the learner ranks while
    it observes is numpy's argmin of its losses (the first of equal smallest), and the
    strategy it draws from is its losses' exponential weights."""
    rng = np.random.default_rng(8)
    n, m = 300, 7
    learner = kind(np.arange(m, dtype=float), n, 20)
    for _ in range(6):
        learner.act(rng)
        costs = rng.integers(0, 2, (n, m)) / 2.0
        learner.observe(costs if kind is Hedge else costs[:, 0])
        losses = learner.cumulative if kind is Hedge else learner.estimates
        assert (np.sum(losses == losses.min(axis=1, keepdims=True), axis=1) > 1).any()
        np.testing.assert_array_equal(learner.mode(), np.argmin(losses, axis=1))
    learner.act(rng)
    np.testing.assert_array_equal(learner.drawn_from, learner.probabilities())


@pytest.mark.parametrize("kind", [Hedge, EXP3])
def test_the_last_iterate_is_handed_out_again_until_a_rank_moves(kind):
    """``mode()`` is a read-only copy of the ranks, the same object after rounds that keep
    every agent's smallest loss (the reader tells an unmoved iterate at no pass), and a new
    one with the new ranks after a round that moves a single agent's."""
    n, m = 50, 4
    learner = kind(np.arange(m, dtype=float), n, 20)
    first = learner.mode()
    assert not first.flags.writeable
    for _ in range(3):  # costs 1 everywhere but on each agent's smallest loss: ranks stay
        learner.act(np.random.default_rng(0))
        costs = np.ones((n, m))
        costs[np.arange(n), first] = 0.0
        learner.observe(costs if kind is Hedge else costs[np.arange(n), learner.last])
        assert learner.mode() is first
    costs = np.zeros((n, m))
    costs[7] = 1.0
    costs[7, (first[7] + 1) % m] = 0.0  # one agent's costs move its smallest loss (EXP3:
    rng = np.random.default_rng(1)  # once it has played its old one)
    for _ in range(20):
        learner.act(rng)
        learner.observe(costs if kind is Hedge else costs[np.arange(n), learner.last])
    moved = learner.mode()
    losses = learner.cumulative if kind is Hedge else learner.estimates
    assert moved is not first and moved[7] != first[7]
    np.testing.assert_array_equal(moved, np.argmin(losses, axis=1))


@pytest.mark.parametrize("kind", [Hedge, EXP3])
def test_kept_strategies_of_rows_that_sat_out_are_the_fresh_ones(kind):
    """Only the rows that observed are weighed and ranked again, in place; after rounds where
    random rows sit out (and rounds observed twice before the next draw: partly both times,
    or wholly then partly), every row's strategy, the one it draws from and the one an agent
    shows, and its last iterate equal those taken afresh from its losses, to the bit (from
    a start: a row's first losses lean to it)."""
    rng = np.random.default_rng(5)
    n, m = 60, 5
    learner = kind(np.arange(m, dtype=float), n, 30, start=rng.integers(0, m, n))
    for t in range(12):
        learner.act(rng)
        losses = learner.cumulative if kind is Hedge else learner.estimates
        np.testing.assert_array_equal(learner.drawn_from, learner.probabilities())
        for k in range(1 + (t == 5) + (t == 8)):  # twice: partly, or first wholly
            on = np.ones(n, np.bool_) if t == 8 and k == 0 else rng.random(n) < 0.3
            costs = rng.random((n, m)) if kind is Hedge else rng.random(n)
            learner.observe(costs, on)
        np.testing.assert_array_equal(learner.mode(), np.argmin(losses, axis=1))
        fresh = learner.probabilities()
        np.testing.assert_array_equal(learner.drawn_from, fresh)
        for i in (0, n // 2, n - 1):
            np.testing.assert_array_equal(learner.strategy(i), fresh[i])


def test_exponential_weights_are_exact_to_a_few_ulp_down_to_underflow():
    """The weights' ``exp`` is written out (fdlibm's, vectorized): every row against
    ``math.exp`` and an exactly rounded sum, with exponents from 0 to past float64's
    underflow (-745): relative error within 4 ulp where the reference is normal, within one
    subnormal step below, and exactly 0 past the underflow."""
    from privgames.agents.learners import _softmin

    rng = np.random.default_rng(6)
    rows = np.concatenate([rng.uniform(0.0, 3.0, (300, 9)), rng.uniform(0.0, 800.0, (300, 9)),
                           np.tile([0.0, 700.0, 708.4, 744.0, 745.1, 745.2, 746.0, 1e6, 5.0],
                                   (1, 1))])
    got = _softmin(rows, 1.0)
    for row, p in zip(rows, got, strict=True):
        w = [math.exp(-(c - row.min())) for c in row]
        total = math.fsum(w)
        for wi, pi in zip(w, p, strict=True):
            want = wi / total
            if want >= np.finfo(float).tiny:
                assert abs(pi - want) <= 4 * np.spacing(want), (row, pi, want)
            else:
                assert abs(pi - want) <= np.finfo(float).smallest_subnormal, (row, pi, want)
    assert _softmin(np.array([[0.0, 746.0, 1e300, np.inf]]), 1.0).tolist() == [[1, 0, 0, 0]]


@pytest.mark.parametrize("kind", [Hedge, EXP3])
def test_a_checkpointed_learner_goes_on_as_the_original(kind):
    """A learner pickled between observing and the next draw (a shard's checkpoint) leaves
    out its scratch, and goes on exactly as the original: the same draws, strategies and
    last iterates."""
    import pickle

    n, m = 200, 9
    rngs = [np.random.default_rng(4), np.random.default_rng(4)]
    learner = kind(np.arange(m, dtype=float), n, 30)
    learner.act(rngs[0])
    learner.observe(rngs[0].random((n, m)) if kind is Hedge else rngs[0].random(n))
    rngs[1] = pickle.loads(pickle.dumps(rngs[0]))
    blob = pickle.dumps(learner)
    assert len(blob) < 3 * n * m * 8  # the losses and this round's strategies, no more
    twins = [learner, pickle.loads(blob)]
    for _ in range(4):
        actions = [t.act(r) for t, r in zip(twins, rngs, strict=True)]
        np.testing.assert_array_equal(actions[0], actions[1])
        np.testing.assert_array_equal(twins[0].drawn_from, twins[1].drawn_from)
        for t, r in zip(twins, rngs, strict=True):
            t.observe(r.random((n, m)) if kind is Hedge else r.random(n), r.random(n) > 0.2)
        np.testing.assert_array_equal(twins[0].mode(), twins[1].mode())
