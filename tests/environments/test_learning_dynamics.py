"""Learners in every game: their guarantees hold in play, the analyst's CCE gap is the best
deviation gain (recomputed here from the mechanisms' own cost functions), bandit feedback is a
noisy realized cost, and the theory's profiles are what the brute force says they are."""

import math

import numpy as np
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import (
    LearningConfig,
    LearningModel,
    make_game,
)
from privgames.mechanisms import chain, ppsp, pricing
from privgames.mechanisms.learning_games import BASGame, PricingGame, SARGame

GAMES = ("bas", "sar", "ppsp", "pricing")
LEARNERS = ("best_response", "fictitious", "hedge", "regret_matching", "exp3", "spsa")


@pytest.fixture(scope="module")
def runs():
    """Every learner in every game, 300 rounds, 8 agents, one seed each."""
    return {(g, learner): LearningModel(LearningConfig(game=g, learner=learner, agents=8,
                                                       rounds=300), seed=11).run()
            for g in GAMES for learner in LEARNERS}


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("learner", LEARNERS)
def test_regret_within_the_bound_and_cce_gap_within_regret(runs, game, learner):
    """No-regret learners: the largest average regret is within the learner's bound. Every
    learner: the CCE gap (realized play) is at most the largest average regret (expected
    play) plus the Azuma-Hoeffding allowance at confidence 1 - 1e-3 for all agents."""
    model = runs[game, learner]
    regret = model.max_average_regret()
    bound = model.regret_bound()
    if learner in ("hedge", "regret_matching", "exp3"):
        assert regret <= bound
    else:
        assert bound is None
    assert model.cce_gap() <= regret + model.azuma()
    assert np.all(np.isin(model.last_iterate(), model.game.grid)) or learner == "spsa"


def _bounded(costs, span):
    """The learner's units (full information): capped at the row's minimum plus the span."""
    floor = costs.min(axis=-1, keepdims=True)
    return np.minimum((costs - floor) / span[:, None], 1.0)


def _deviation_gain(history, span, grid, cost_of):
    """max_i [ mean_t c_i(a_t) - min_a mean_t c_i(a, a_-i,t) ], every cost recomputed with
    ``cost_of(profiles (T, n)) -> (T, n)`` on explicitly deviated profiles."""
    T, n = history.shape
    table = np.empty((T, n, grid.size))
    for j, a in enumerate(grid):
        for i in range(n):
            deviated = history.copy()
            deviated[:, i] = a
            table[:, i, j] = cost_of(deviated)[:, i]
    played = cost_of(history)
    both = _bounded(np.concatenate([table, played[..., None]], axis=-1), span)
    return float(np.max(both[..., -1].mean(axis=0) - both[..., :-1].mean(axis=0).min(axis=1)))


def test_cce_gap_equals_the_best_deviation_gain_ppsp():
    model = LearningModel(LearningConfig(game="ppsp", learner="hedge", agents=6, rounds=200),
                          seed=3).run()
    g = model.game
    w = g.weights
    history = model.history

    def cost_of(profiles):
        return ppsp.tradeoff_cost(profiles.max(axis=1, keepdims=True),
                                  profiles.min(axis=1, keepdims=True), w[:, 0], w[:, 1], w[:, 2],
                                  *g.args)

    assert model.cce_gap() == pytest.approx(
        _deviation_gain(history, model.span, g.grid, cost_of), rel=1e-9, abs=1e-12)


def test_cce_gap_equals_the_best_deviation_gain_bas():
    model = LearningModel(LearningConfig(game="bas", learner="regret_matching", agents=5,
                                         rounds=150), seed=4).run()
    beta = model.game.beta

    def cost_of(profiles):
        return np.array([chain.user_costs(p, beta) for p in profiles])

    assert model.cce_gap() == pytest.approx(
        _deviation_gain(model.history, model.span, model.game.grid, cost_of),
        rel=1e-9, abs=1e-12)


def test_bas_grid_equilibrium_is_a_best_response_by_brute_force():
    """The BAS reference ``nash`` is a NE of the grid game: no user gains by any grid
    deviation (chain.user_costs on every deviated profile); Theorem 1's subgame-perfect
    profile is not one of the simultaneous game: its first user gains by lowering its noise
    to m beta_1 (it no longer anticipates the followers)."""
    rng = np.random.default_rng(5)
    beta = rng.uniform(0.0, 1.3, 7)
    beta[0] = 0.3  # the first user is not the most private one
    game = BASGame(beta, d=50, grid_points=41)
    refs = game.references()

    def gains(profile):
        out = []
        for i in range(beta.size):
            now = chain.user_costs(profile, beta)[i]
            best = min(chain.user_costs(np.where(np.arange(beta.size) == i, a, profile),
                                        beta)[i] for a in game.grid)
            out.append(now - best)
        return np.array(out)

    assert np.all(gains(refs["nash"]) <= 1e-12)
    assert gains(refs["theorem1"])[0] > 0.01
    assert refs["nash"][0] == pytest.approx(game.snap([chain.M * beta[0]])[0])


def test_best_response_reaches_the_bas_equilibrium():
    model = LearningModel(LearningConfig(game="bas", learner="best_response", rounds=40),
                          seed=6).run()
    assert model.distance() == 0.0 and model.outcome()["reached"] == "nash"


def test_sar_equilibrium_count_by_brute_force():
    """k* users take part: with k participants the k-th does not regret it, and an outsider
    would regret joining; checked on every k by the exposure probability's definition."""
    game = SARGame(12, 0.2, "weak")
    k = int(game.references()["nash"].sum())
    delta = lambda j: max(j - 2, 0) / j * 0.2**2  # noqa: E731  eq (31)
    assert delta(k) <= 1 / 144 < delta(k + 1)
    assert game.nash_gap(game.references()["nash"], np.full(12, 1.0)) == 0.0


def test_bas_bandit_cost_is_the_release_error_with_its_variance():
    """A realized BAS cost is the accuracy of one d-dimensional release: mean the expected
    cost, variance 2 S^2 / d (chi-square); both within 3 SE over 20000 releases."""
    game = BASGame(np.linspace(0.2, 1.2, 6), d=20)
    values = game.grid[[4, 2, 0, 3, 1, 0]]
    rng = np.random.default_rng(7)
    draws = np.array([game.realized(values, rng) for _ in range(20000)])[:, 0]
    expected = game.own_costs(values)[0]
    S = values.sum()
    se_mean = draws.std(ddof=1) / math.sqrt(draws.size)
    assert abs(draws.mean() - expected) <= 3 * se_mean
    var, theory = draws.var(ddof=1), 2 * S**2 / 20
    se_var = theory * math.sqrt(2 / (draws.size - 1) + 12 / 20 / draws.size)  # chi2_20 kurtosis
    assert abs(var - theory) <= 3 * se_var and var > 0


@pytest.mark.parametrize("aggregation,prices", [("mle", False), ("mean", True)])
def test_pricing_bandit_cost_is_unbiased_and_noisy(aggregation, prices):
    """Each client's realized cost (its noise, the aggregate's error, its realized penalty)
    averages to eq (5) plus the expected penalty, per client within the Bonferroni 3-sigma
    threshold; and it varies (a noisy sample, not the expected cost)."""
    alpha = np.linspace(0.2, 0.8, 5)
    game = PricingGame(alpha, 1.0, 1.0, 1.0, 1.0, aggregation, prices)
    values = game.grid[[3, 6, 9, 12, 15]]
    rng = np.random.default_rng(8)
    draws = np.array([game.realized(values, rng) for _ in range(40000)])
    z = (draws.mean(axis=0) - game.own_costs(values)) / (draws.std(axis=0, ddof=1) / 200.0)
    assert np.max(np.abs(z)) <= 3.5  # five clients: the family-wise 3-sigma threshold is 3.3
    assert np.all(draws.std(axis=0) > 0)
    if not prices:  # without prices the expected cost is eq (5) itself
        np.testing.assert_allclose(game.own_costs(values),
                                   pricing.client_costs(values, alpha, 1.0, 1.0, 1.0, 1.0,
                                                        aggregation))


def test_sar_bandit_cost_is_the_simulated_exposure():
    game = SARGame(10, 0.3, "strong")
    values = np.array([1.0] * 7 + [0.0] * 3)
    rng = np.random.default_rng(9)
    draws = np.array([game.realized(values, rng) for _ in range(40000)])
    p = draws[:, :7].mean() + game.tolerated
    se = math.sqrt(p * (1 - p) / draws[:, :7].size)
    assert abs(p - game.exposure(7)) <= 3 * se * math.sqrt(7)  # 7 victims share the draws' rounds
    assert np.all(draws[:, 7:] == 0.0)


def test_same_seed_same_play():
    config = LearningConfig(game="pricing", learner="exp3", rounds=100)
    a = LearningModel(config, seed=12).run()
    b = LearningModel(config, seed=12).run()
    np.testing.assert_array_equal(a.history, b.history)
    assert a.results().equals(b.results())


def test_players_read_their_learner_rows():
    model = LearningModel(LearningConfig(game="sar", learner="hedge", rounds=20), seed=1).run()
    p = model.learner.probabilities()
    for player in model.players:
        np.testing.assert_array_equal(player.strategy, p[player.index])
        assert player.action == model.played[player.index]


def test_types_are_drawn_from_their_own_stream():
    """The game's types do not depend on the learner (common random numbers across learners)."""
    a = make_game(LearningConfig(game="bas"), np.random.default_rng(1))
    b = LearningModel(LearningConfig(game="bas", learner="exp3"), seed=2).game
    c = LearningModel(LearningConfig(game="bas", learner="hedge"), seed=2).game
    np.testing.assert_array_equal(b.beta, c.beta)
    assert not np.array_equal(a.beta, b.beta)


@pytest.mark.parametrize("kwargs,message", [
    ({"learner": "hedge", "feedback": "bandit"}, "feedback='bandit' is not allowed"),
    ({"learner": "gradient"}, "learner='gradient' is not allowed"),
    ({"game": "bas", "grid": (0.0, float("nan"))}, "grid"),
    ({"game": "bas", "grid": ()}, "grid"),
    ({"game": "bas", "grid": (0.0, float("inf"))}, "no opt-out"),
    ({"game": "sar", "grid": (0.0, 1.0)}, "grid is not allowed with game='sar'"),
    ({"learner": "exp3", "eta": 0.0}, "eta"),
    ({"learner": "fictitious", "eta": 0.1}, "only hedge, exp3 and spsa"),
])
def test_bad_configuration_is_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LearningModel(LearningConfig(**kwargs), seed=0)


def test_pricing_grid_has_the_opt_out_only_under_mle():
    rng = np.random.default_rng(0)
    mle = make_game(LearningConfig(game="pricing"), rng)
    mean = make_game(LearningConfig(game="pricing", aggregation="mean"), rng)
    assert np.isinf(mle.grid[-1]) and np.all(np.isfinite(mean.grid))


@pytest.mark.parametrize("attacker", ["weak", "strong"])
def test_sar_game_exposure_is_the_mechanisms_failure_probability(attacker):
    """The game's vectorized exposure equals eq (31) / the corrected eq (32) of
    ``mechanisms.sar`` at every participant count it can meet (0 below 3)."""
    from privgames.mechanisms import sar

    game = SARGame(15, 0.23, attacker)
    expected = [sar.failure_probability(k, 0.23, attacker) if k >= 3 else 0.0
                for k in range(1, 16)]
    np.testing.assert_allclose(game.exposure(np.arange(1, 16)), expected, rtol=1e-12,
                               atol=1e-15)
