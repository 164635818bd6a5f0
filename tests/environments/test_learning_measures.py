"""What learning's numbers mean (issue 31): starts that are no reference profile, regret
bounds that hold at every round, a convergence test relative to the deviator's own cost, and
regret and the CCE gap in the game's own units beside the learners' capped ones.

Each formula is written out here (the prior, the bound, the gains from eq (5) and eq (14) on
explicitly deviated profiles), never read from the code under test."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privgames.agents.learners import make_grid_learner
from privgames.analysis.learning.experiments import learning_unit
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.mechanisms import chain, pricing
from privgames.mechanisms.learning_games import grid_distance, relative_gain

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")


# --- starts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_the_default_start_is_no_reference_profile(seed):
    """Problem 1: the grid's middle is Theorem 4's profile in PPSP (so best response "reached"
    it by starting there); the default start, one drawn action per node, is none of the
    references, and play leaves from it."""
    middle = LearningModel(LearningConfig(game="ppsp", learner="best_response",
                                          start="middle"), seed)
    assert grid_distance(middle.grid, middle.last_iterate(), middle.reference("theorem4"),
                         True) == 0.0
    model = LearningModel(LearningConfig(game="ppsp", learner="best_response"), seed)
    assert model.config.start == "random"
    first = model.last_iterate()
    assert all(grid_distance(model.grid, first, model.reference(name), True) > 0.0
               for name in model.reference_names)


def test_random_starts_are_uniform_per_agent_and_differ_between_start_runs():
    """2,000 agents' start actions are uniform on the grid (chi-square, fixed seed, p > 1e-3);
    a second start run draws other starts for the same types."""
    config = LearningConfig(game="bas", learner="best_response", agents=2000, rounds=10)
    first = LearningModel(config, 3)
    m = first.grid.size
    index = np.searchsorted(first.grid, first.last_iterate())
    assert stats.chisquare(np.bincount(index, minlength=m)).pvalue > 1e-3
    second = LearningModel(config, 3, start_run=1)
    np.testing.assert_array_equal(second.types()["beta"], first.types()["beta"])
    assert np.mean(second.last_iterate() != first.last_iterate()) > 0.9


def test_hedge_and_exp3_start_from_a_prior_with_half_the_weight_on_the_start():
    """pi = 1/2 on the start action and 1 / (2 (m - 1)) on each other, before any cost."""
    m = 7
    start = np.array([0, 3, 6])
    for name in ("hedge", "exp3"):
        learner = make_grid_learner(name, np.arange(1.0, m + 1), 3, 100,
                                    "full" if name == "hedge" else "bandit", start=start)
        want = np.full((3, m), 1.0 / (2 * (m - 1)))
        want[np.arange(3), start] = 0.5
        np.testing.assert_allclose(learner.probabilities(), want, rtol=1e-12)
        np.testing.assert_array_equal(learner.mode(), start)


@pytest.mark.parametrize("name,factor", [("hedge", 8.0), ("exp3", 2.0)])
def test_the_bound_from_a_start_pays_log_2_m_minus_1(name, factor):
    """Hedge: ln(1/pi_min)/eta + eta T/8 with eta = sqrt(8 ln(1/pi_min) / T_h); EXP3:
    ln(1/pi_min)/eta + eta m T/2 with eta = sqrt(2 ln(1/pi_min) / (T_h m)); pi_min = 1/(2(m-1))
    from a start, 1/m from the uniform one."""
    m, horizon = 11, 400
    for start, log_prior in ((np.zeros(2, dtype=int), math.log(2 * (m - 1))),
                             (None, math.log(m))):
        learner = make_grid_learner(name, np.linspace(1, 2, m), 2, horizon,
                                    "full" if name == "hedge" else "bandit", start=start)
        eta = math.sqrt(factor * log_prior / (horizon * (1 if name == "hedge" else m)))
        assert learner.eta == pytest.approx(eta, rel=1e-12)
        for t in (1, 37, horizon):
            slope = 1 / 8 if name == "hedge" else m / 2
            assert learner.regret_bound(t) == pytest.approx(log_prior / eta + eta * slope * t,
                                                            rel=1e-12)


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("learner", ["hedge", "exp3"])
def test_the_recorded_bound_holds_at_every_round(game, learner):
    """Problem 2: every recorded round's average regret is within that round's bound, in the
    experiment's rows (from a random start, the default)."""
    config = LearningConfig(game=game, learner=learner, agents=6, rounds=300)
    rows = learning_unit(config, np.random.SeedSequence(7))
    trace = rows.pivot_table(index="round", columns="metric", values="value")
    both = trace[["max_average_regret", "regret_bound"]].dropna()
    assert len(both) > 30
    assert np.all(both["max_average_regret"] <= both["regret_bound"])


# --- strict convergence ------------------------------------------------------------------------
def test_relative_gain_written_out():
    own = np.array([2.0, 0.0, np.inf, np.inf, -4.0, 0.0])
    best = np.array([1.0, 0.0, 3.0, np.inf, -5.0, -0.5])
    np.testing.assert_array_equal(relative_gain(own, best), [0.5, 0.0, np.inf, 0.0, 0.25, 0.5])


@pytest.mark.parametrize("seed", [0, 1])
def test_converged_means_no_client_gains_a_tolerance_of_its_own_cost(seed):
    """Problem 3: Hedge in complete-information pricing (MLE, no prices) ends where some
    client saves more than 5 % of its own eq (5) cost by deviating on the grid (brute force on
    explicitly deviated profiles), although the deviation gain is within 5 % of its cost span
    (the old test, which called these runs converged). ``nash_gap_relative`` is that largest
    saving, and ``converged`` now says no."""
    model = LearningModel(LearningConfig(game="pricing", learner="hedge", rounds=300),
                          seed).run()
    v, alpha, grid = model.last_iterate(), model.types()["alpha"], model.grid

    def cost(profile):
        return pricing.client_costs(profile, alpha, 1.0, 1.0, 1.0, 1.0, "mle")

    own = cost(v)
    best = np.array([min(cost(np.where(np.arange(v.size) == i, a, v))[i] for a in grid)
                     for i in range(v.size)])
    saving = (own - best) / own
    assert model.nash_gap_relative() == pytest.approx(saving.max(), rel=1e-9)
    assert saving.max() > 0.05
    assert model.nash_gap() <= 0.05 and model.state.last_change <= 270  # the old "converged"
    assert not model.outcome()["converged"]


@pytest.mark.parametrize("game", GAMES)
def test_every_converged_run_is_an_equilibrium_within_the_tolerance(game):
    """Whatever the game, a run labelled converged leaves no agent a deviation gain above the
    tolerance of its own cost (its gains taken from the game's cost of every grid action
    against the last iterate, as each agent's view reads it; in the sequential chain, the
    rows on the path: Nash, not subgame perfection); regret matching converges in every game
    here."""
    converged = []
    for learner in ("fictitious", "regret_matching", "hedge"):
        model = LearningModel(LearningConfig(game=game, learner=learner, agents=5,
                                             rounds=200), 2).run()
        if not model.outcome()["converged"]:
            continue
        converged.append(learner)
        assert model.nash_gap_relative() <= model.config.tolerance
    assert "regret_matching" in converged


def test_the_deviation_gain_is_the_brute_force_one_at_the_last_iterate():
    """BAS: the last iterate's largest relative deviation gain is the one written out from
    eq (14) (``chain.user_costs``) on every explicitly deviated profile."""
    model = LearningModel(LearningConfig(game="bas", learner="hedge", agents=6, rounds=40),
                          5).run()
    v, beta = model.last_iterate(), model.types()["beta"]
    own = chain.user_costs(v, beta)
    best = np.array([min(chain.user_costs(np.where(np.arange(6) == i, a, v), beta)[i]
                         for a in model.grid) for i in range(6)])
    assert model.nash_gap_relative() == pytest.approx(np.max((own - best) / own), rel=1e-9)


@pytest.mark.parametrize("game", ["bas", "ppsp"])
def test_each_agents_best_reply_cost_is_its_rows_smallest_without_the_table(game):
    """The analyst's best reply costs, taken a block of rows at a time without the whole
    table (``lowest``), are numpy's row minima of the full table, bit for bit, across blocks;
    and the block reduction is numpy's ``min`` with NaN, infinities and ties."""
    from privgames.mechanisms.learning_games import bas_costs, ppsp_costs, row_least

    rng = np.random.default_rng(6)
    n, grid = 9000, np.geomspace(0.1, 10.0, 21)[None, :]  # three blocks of rows
    v = grid[0, rng.integers(0, 21, n)]
    if game == "bas":
        upstream, alpha = np.cumsum(v) - v, rng.uniform(0.0, 2.0, n) * (rng.random(n) > 0.1)
        costs = lambda lowest: bas_costs(v, v.sum(), upstream, alpha, grid, lowest)  # noqa: E731
    else:
        order = np.sort(v)
        weights = rng.dirichlet(np.ones(3), n)
        costs = lambda lowest: ppsp_costs(v, order[-2:], order[:2], weights,  # noqa: E731
                                          (n, 10, 1e-5, 0.0), grid, lowest)
    assert np.array_equal(costs(True), costs(False).min(axis=1))
    table = rng.integers(0, 4, (n, 9)).astype(float)
    for value, share in ((np.nan, 0.01), (np.inf, 0.05), (-np.inf, 0.01)):
        table[rng.random(table.shape) < share] = value
    got = row_least(lambda rows, out: np.copyto(out, table[rows]) or out, n, 9)
    assert np.array_equal(got, table.min(axis=1), equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-4.0, 4.0, allow_nan=False).map(lambda x: round(x, 1)), min_size=1,
                max_size=40))
def test_a_ppsp_shards_two_largest_and_two_smallest_are_the_sorted_ends(values):
    """PPSP's partials (each node's others' largest and smallest ``c`` come from them): one
    pass gives the sorted profile's two last and two first values, in order, ties included
    (values on a coarse lattice repeat)."""
    from privgames.mechanisms.learning_games import two_extremes

    v = np.array(values)
    largest, smallest = two_extremes(v)
    assert np.array_equal(largest, np.sort(v)[-2:]) and np.array_equal(smallest, np.sort(v)[:2])


def test_a_bas_users_best_reply_cost_from_a_few_cells_is_the_whole_rows_smallest():
    """BAS's best reply cost is taken from a few cells around the continuous minimiser
    (eq 14 is convex in the user's variance, and each rounding is monotone): equal, bit for
    bit, to the smallest of eq (14) written out at every grid point, for users with no
    privacy weight, none upstream (an infinite cost at 0), a tiny or a large weight, on
    linear and log grids and small and large totals."""
    from privgames.mechanisms.learning_games import bas_costs

    rng = np.random.default_rng(11)
    for trial in range(12):
        n = 3000
        grid = (np.linspace(0.0, rng.uniform(0.5, 50.0), 21) if trial % 2
                else np.geomspace(0.01, 30.0, 21))
        v = grid[rng.integers(0, 21, n)]
        upstream = np.cumsum(v) - v if trial % 3 else rng.uniform(0, 5, n) * (rng.random(n) > 0.2)
        alpha = rng.uniform(0.0, 10.0 ** rng.uniform(-3, 3), n) * (rng.random(n) > 0.1)
        total = v.sum() if trial % 4 else rng.uniform(0.0, 100.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            every = np.array([(total - v) + x + np.where(alpha > 0, alpha / np.sqrt(upstream + x),
                                                         0.0) for x in grid]).T
        assert np.array_equal(bas_costs(v, total, upstream, alpha, grid[None, :], True),
                              every.min(axis=1))


@pytest.mark.parametrize("log_scale", [False, True])
def test_the_distance_is_the_largest_capped_gap_over_the_grids_width(log_scale):
    """An agent's distance from a reference is ``|a - b|`` over the grid's finite width
    (on a log scale where the game's grid is), capped at 1, 1 where undefined (a NaN, or
    the opt-out against a level) and 0 where both opt out; the population's is the largest,
    written out per agent."""
    rng = np.random.default_rng(9)
    grid = np.append(np.geomspace(0.01, 10.0, 7), np.inf)
    scale = np.log if log_scale else (lambda x: x)
    width = scale(grid[-2]) - scale(grid[0])
    for _ in range(50):
        n = int(rng.integers(1, 20))
        a, b = rng.choice(grid, n), rng.choice(grid, n)
        a[rng.random(n) < 0.05] = np.nan
        want = 0.0
        for x, y in zip(a, b, strict=True):
            if np.isinf(x) and np.isinf(y):
                d = 0.0
            elif np.isnan(x) or np.isinf(x) or np.isinf(y):
                d = 1.0
            else:
                d = min(abs(float(scale(x)) - float(scale(y))) / width, 1.0)
            want = max(want, d)
        assert grid_distance(grid, a, b, log_scale) == pytest.approx(want, rel=1e-12, abs=0)


def test_the_largest_gains_are_numpys_max_of_the_written_out_gains():
    """The analyst's two gaps in one compiled pass: numpy's ``max`` of ``(own - best) /
    span`` and of the gain over ``|own|`` (0 where both costs are infinite; the gain itself
    at a zero or infinite own cost), written out, with infinities, zeros and NaN."""
    from privgames.mechanisms.learning_games import largest_gains

    rng = np.random.default_rng(2)
    for trial in range(100):
        n = int(rng.integers(1, 40))
        own = rng.normal(0.0, 3.0, n)
        best = own - np.abs(rng.normal(0.0, 1.0, n)) * (rng.random(n) > 0.3)
        for x in (own, best):
            for value, share in ((np.inf, 0.1), (-np.inf, 0.05), (0.0, 0.05),
                                 (np.nan, 0.03 * (trial % 5 == 0))):
                x[rng.random(n) < share] = value
        span = rng.uniform(0.1, 3.0, n)
        with np.errstate(all="ignore"):
            gain = np.where(np.isinf(own) & np.isinf(best), 0.0, own - best)
            scaled = np.isfinite(own) & (own != 0)
            relative = np.where(scaled, gain / np.abs(own), gain)
            want = [np.max(gain / span), np.max(relative)]
        assert np.array_equal(largest_gains(own, best, span), want, equal_nan=True)


# --- both units --------------------------------------------------------------------------------
def _game_unit_gap(history, grid, cost_of, mixed=None):
    """max_i [ mean_t c_i(a_t) - min_a mean_t c_i(a, a_-i,t) ] in the game's own costs."""
    T, n = history.shape
    fixed = np.empty((n, grid.size))
    for j, a in enumerate(grid):
        for i in range(n):
            deviated = history.copy()
            deviated[:, i] = a
            fixed[i, j] = cost_of(deviated)[:, i].mean()
    played = cost_of(history).mean(axis=0)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.where(np.isinf(played) & np.isinf(fixed.min(axis=1)), 0.0,
                                     played - fixed.min(axis=1))))


def test_cce_gap_in_the_game_units_by_brute_force():
    """BAS (eq 14's costs, uncapped): the game-unit CCE gap is the best fixed deviation's
    average gain in the users' own costs."""
    model = LearningModel(LearningConfig(game="bas", learner="regret_matching", agents=5,
                                         rounds=120, history=True), seed=4).run()
    beta = model.types()["beta"]

    def cost_of(profiles):
        return np.array([chain.user_costs(p, beta) for p in profiles])

    want = _game_unit_gap(model.history, model.grid, cost_of)
    assert model.cce_gap("game") == pytest.approx(max(want, 0.0), rel=1e-9, abs=1e-12)
    assert model.infinite_cost_rounds == 0


def test_rounds_of_infinite_cost_make_the_game_unit_gap_infinite():
    """Problem 4: an EXP3 user in BAS who draws variance 0 on its own pays an infinite cost;
    the capped units stay bounded while the game's are not, and the summary says how many
    rounds that happened in."""
    model = LearningModel(LearningConfig(game="bas", learner="exp3", rounds=100, history=True),
                          0).run()
    beta = model.types()["beta"]
    costs = np.array([chain.user_costs(p, beta) for p in model.history])
    infinite = int(np.isinf(costs).any(axis=1).sum())
    assert model.infinite_cost_rounds == infinite > 0
    assert math.isinf(model.cce_gap("game")) and math.isinf(model.max_average_regret("game"))
    assert 0.0 <= model.cce_gap() <= 1.0 and model.max_average_regret() <= 1.0
    assert model.capped_rounds >= infinite


def test_drawn_type_profiles_follow_the_prior():
    """Past 7 clients the interim expectations run over 128 type profiles drawn from the prior:
    each client is L (type 0) in a share eta of them (within 4 SE over the 128 x N draws,
    fixed seed), each profile weighs 1/128, and the clients' types are independent (the
    count of L types per profile has the binomial variance N eta (1 - eta), within 3 SE of a
    sample variance of 128, 3 sqrt(2 / 127) = 38 %)."""
    from privgames.mechanisms.learning_games import TYPE_PROFILES

    config = LearningConfig(game="pricing-bayes", agents=10, p_low=0.3, rounds=2)
    (shard,) = LearningModel(config, 5).run_.shards
    profiles, weights = shard.slice.profiles, shard.slice.weights
    assert profiles.shape == (TYPE_PROFILES, 10)
    np.testing.assert_allclose(weights, 1.0 / TYPE_PROFILES)
    share = float(np.mean(profiles == 0))
    assert abs(share - 0.3) < 4 * math.sqrt(0.3 * 0.7 / profiles.size)
    counts = (profiles == 0).sum(axis=1)
    assert counts.var(ddof=1) == pytest.approx(10 * 0.3 * 0.7, rel=3 * math.sqrt(2 / 127))


def test_ties_go_to_the_lowest_action():
    """The documented tie rule: best response, fictitious play and Hedge's mode take the
    lowest of equally cheap actions; the last iterate is that action's level."""
    grid = np.array([1.0, 2.0, 3.0, 4.0])
    costs = np.array([[0.5, 0.2, 0.2, 0.9], [0.3, 0.3, 0.3, 0.3]])
    for name in ("best_response", "fictitious", "hedge"):
        start = None if name == "hedge" else np.array([3, 3])  # Hedge: its uniform prior
        learner = make_grid_learner(name, grid, 2, 10, start=start)
        learner.act(np.random.default_rng(0))
        learner.observe(costs)
        np.testing.assert_array_equal(learner.current(), [2.0, 1.0])


def test_the_last_iterate_is_each_agents_most_likely_action():
    """Not only on the grid: the action the learner's own strategy weighs most (Hedge's
    smallest cumulative cost), agent by agent."""
    model = LearningModel(LearningConfig(game="ppsp", learner="hedge", agents=6, rounds=50),
                          2).run()
    (shard,) = model.run_.shards
    p = shard.slice.learner.probabilities()
    np.testing.assert_array_equal(model.last_iterate(), model.grid[p.argmax(axis=1)])


@pytest.mark.parametrize("learner", ["regret_matching", "hedge"])
def test_regret_is_recomputed_from_the_strategies_played(learner):
    """Not only below its bound: the reported average regret equals the one written out from
    each round's mixed strategy (each agent's view before the round: what it draws from) and
    every grid action's eq (14) cost given the others' draws (capped units: shifted by the
    row's smallest, over the span, capped at 1), so an under-reported regret fails too, and
    so does an analyst that reads a strategy the learner took after the round (Hedge takes
    its next ones in place)."""
    config = LearningConfig(game="bas", learner=learner, agents=4, rounds=60)
    model = LearningModel(config, 8)
    beta, grid, span = model.types()["beta"], model.grid, model.scales()[0]
    expected, fixed = np.zeros(4), np.zeros((4, grid.size))
    for _ in range(config.rounds):
        strategies = np.array([p.strategy for p in model.agents])
        model.step()
        views = [p.view() for p in model.agents]
        played = np.array([v.action for v in views])
        table = np.empty((4, grid.size))
        for i in range(4):
            for j, a in enumerate(grid):
                deviated = played.copy()
                deviated[i] = a
                with np.errstate(divide="ignore"):
                    table[i, j] = chain.user_costs(deviated, beta)[i]
        capped = np.minimum((table - table.min(axis=1, keepdims=True)) / span[:, None], 1.0)
        expected += (strategies * capped).sum(axis=1)
        fixed += capped
    want = (expected - fixed.min(axis=1)) / config.rounds
    assert model.max_average_regret() == pytest.approx(want.max(), rel=1e-12)


# --- the compiled sums against their written-out form -------------------------------------------
def _written_out_round(sums, costs, own, p, on, full, span, low, high):
    """One round of the sums in numpy, as the module docstring states them."""
    if full:
        floor = costs.min(axis=1, keepdims=True)
        raw = [(x - floor) / span[:, None] for x in (costs, own[:, None])]
    else:
        raw = [(x - low[:, None]) / (high - low)[:, None] for x in (costs, own[:, None])]
    with np.errstate(invalid="ignore"):
        capped = bool(np.any(on[:, None] & ~((raw[1] >= 0.0) & (raw[1] <= 1.0))))
    units, own_units = (np.where(on[:, None], np.clip(x, 0.0, 1.0), 0.0) for x in raw)
    game = np.where(on[:, None], costs, 0.0)
    for k, (grid_costs, played) in enumerate(((units, own_units[:, 0]),
                                              (game, np.where(on, own, 0.0)))):
        sums["grid"][k] += grid_costs
        sums["played"][k] += played
        with np.errstate(invalid="ignore"):
            sums["mixed"][k] += np.where(p > 0, p * grid_costs, 0.0).sum(axis=1)
    best = {k: sums["grid"][k].min(axis=1) for k in (0, 1)}

    def gap(total, k):
        with np.errstate(invalid="ignore"):
            return float(np.max(np.where(np.isinf(total) & np.isinf(best[k]), 0.0,
                                         total - best[k])))

    return {"capped": capped, "infinite": bool(np.any(on & np.isinf(own))),
            "regret": gap(sums["mixed"][0], 0), "cce": gap(sums["played"][0], 0),
            "regret_game": gap(sums["mixed"][1], 1), "cce_game": gap(sums["played"][1], 1)}


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("m", [7, 2])  # 2: compiled with the count a constant (rows_of)
def test_the_compiled_sums_are_the_written_out_ones(full, m):
    """Ten rounds of random costs (some infinite), strategies with zeros and agents that sit
    out: the compiled pass gives the written-out sums and maxima (sums to 1e-12)."""
    from privgames.environments.learning_measures import RegretSums

    rng = np.random.default_rng(4)
    n = 40
    span, low = rng.uniform(0.5, 2.0, n), rng.uniform(-1.0, 0.0, n)
    high = low + rng.uniform(0.5, 3.0, n)
    sums = RegretSums(n, m, full, span, low, high)
    want = {"grid": np.zeros((2, n, m)), "played": np.zeros((2, n)), "mixed": np.zeros((2, n))}
    for _ in range(10):
        costs = rng.normal(0.0, 2.0, (n, m))
        costs[rng.random((n, m)) < 0.02] = np.inf
        own = costs[np.arange(n), rng.integers(0, m, n)]
        p = rng.dirichlet(np.ones(m), n) * (rng.random((n, m)) > 0.2)
        p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
        on = rng.random(n) > 0.3
        got = sums.add(costs, own, p, on)
        expected = _written_out_round(want, costs, own, p, on, full, span, low, high)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
        for name in want:
            np.testing.assert_allclose(getattr(sums, name), want[name], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("mixed", [True, False])  # False: a learner that plays a point
def test_the_two_action_pass_is_the_general_one(full, mixed):
    """The analyst's two-action pass (``_add_pairs``, written for LLVM to vectorize across
    rows) gives the general pass's sums and maxima bit for bit over rounds of costs with
    NaN and infinities, zero weights, agents that sit out and NaN gains (the last one kept),
    in blocks and their remainders; and the sums object takes it at two actions."""
    from privgames.environments.learning_measures import RegretSums, _add_round
    from tests.bits import same_bits

    rng = np.random.default_rng(9)
    for n in (0, 1, 2047, 4100):
        span, low = rng.uniform(0.2, 2.0, n), rng.uniform(-1.0, 0.0, n)
        high = low + rng.uniform(0.1, 3.0, n)
        general = [np.zeros((2, n, 2)), np.zeros((2, n)), np.zeros((2, n)), np.zeros((2, n))]
        sums = RegretSums(n, 2, full, span, low, high)
        for _ in range(4):
            costs = rng.normal(0.0, 2.0, (n, 2))
            cells = rng.random((n, 2))
            costs[cells < 0.01], costs[(cells > 0.01) & (cells < 0.02)] = np.inf, np.nan
            costs[(cells > 0.02) & (cells < 0.025)] = -np.inf
            own = costs[np.arange(n), rng.integers(0, 2, n)]
            own[rng.random(n) < 0.01] = np.nan
            p = rng.dirichlet(np.ones(2), n) * (rng.random((n, 2)) > 0.1)
            p = p if mixed else np.zeros((0, 0))
            on = rng.random(n) < 0.7
            want = _add_round(costs, own, p, on, full, span, low, high, *general)
            got = sums.add(costs, own, p if mixed else None, on)
            assert same_bits(want[2:], [got[k] for k in ("regret", "cce", "regret_game",
                                                      "cce_game")])
            assert (want[0], want[1]) == (got["capped"], got["infinite"])
            for mine, theirs in zip((sums.grid, sums.played, sums.mixed, sums.lows), general,
                                   strict=True):
                assert same_bits(mine, theirs)
        if n > 1000:  # NaN gains were among them, and finite ones decided the others
            assert np.isnan(sums.mixed[1]).any()


def test_an_agents_units_are_the_same_alone_or_among_others():
    """The learners' units from the scale rounds (``scales_from``): an agent's are the same
    bits whether its samples come alone (a shard or part of one agent), in a part of the
    agents or with all of them, NaN rounds (rows that did not play) included; the deviation
    is the rounds' population deviation written out."""
    from privgames.mechanisms import learning_games
    from privgames.mechanisms.learning_games import scales_from

    rng = np.random.default_rng(12)
    samples = 100.0 * rng.normal(size=(64, 9))
    samples[rng.random(samples.shape) < 0.2] = np.nan
    lo, hi = -rng.random(9), rng.random(9)
    whole = scales_from(lo, hi, samples)
    for j in range(9):
        alone = scales_from(lo[j:j + 1], hi[j:j + 1], samples[:, j:j + 1])
        assert all(a[0] == w[j] for a, w in zip(alone, whole, strict=True))
    for part in (1, 2, 4):
        learning_games.SAMPLED, saved = part, learning_games.SAMPLED
        try:
            parts = scales_from(lo, hi, samples)
        finally:
            learning_games.SAMPLED = saved
        assert all(np.array_equal(a, w) for a, w in zip(parts, whole, strict=True))
    seen = ~np.isnan(samples)
    mean = np.nansum(samples, axis=0) / seen.sum(axis=0)
    sd = np.sqrt(np.nansum((samples - mean) ** 2, axis=0) / seen.sum(axis=0))
    np.testing.assert_allclose(whole[1], lo - 3.0 * sd, rtol=1e-12)
