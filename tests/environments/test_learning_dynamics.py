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

GAMES = ("bas", "sar", "ppsp", "pricing", "pricing-bayes")
LEARNERS = ("best_response", "fictitious", "hedge", "regret_matching", "exp3", "spsa")
#: What the agent-form game refuses: SPSA's two-round perturbation needs every round.
REFUSED = {("pricing-bayes", "spsa")}


@pytest.fixture(scope="module")
def runs():
    """Every learner in every game, 300 rounds, 8 agents, one seed each."""
    return {(g, learner): LearningModel(LearningConfig(game=g, learner=learner, agents=8,
                                                       rounds=300), seed=11).run()
            for g in GAMES for learner in LEARNERS if (g, learner) not in REFUSED}


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("learner", LEARNERS)
def test_regret_within_the_bound_and_cce_gap_within_regret(runs, game, learner):
    """No-regret learners: the largest average regret is within the learner's bound. Every
    learner: the CCE gap (realized play) is at most the largest average regret (expected
    play) plus the Azuma-Hoeffding allowance at confidence 1 - 1e-3 for all agents. Under
    incomplete information the regret is the agent form's (a row's rounds are its type's)."""
    if (game, learner) in REFUSED:
        with pytest.raises(ConfigError, match="not allowed with game='pricing-bayes'"):
            LearningConfig(game=game, learner=learner)
        return
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


def test_outcome_tells_convergence_from_cycling():
    """SAR participation under best response: everyone leaves, everyone returns -- the last
    iterate alternates between two profiles (cycles); BAS under best response settles at its
    NE (converged); SPSA's continuous level never repeats (wanders)."""
    sar = LearningModel(LearningConfig(game="sar", learner="best_response", rounds=200),
                        seed=0).run()
    recent = sar.history[-20:].sum(axis=1)
    assert sar.outcome()["play"] == "cycles" and len(set(recent)) == 2
    bas = LearningModel(LearningConfig(game="bas", learner="best_response", rounds=200),
                        seed=0).run()
    assert bas.outcome()["play"] == "converged" and bas.outcome()["reached"] == "nash"
    spsa = LearningModel(LearningConfig(game="ppsp", learner="spsa", rounds=200), seed=0).run()
    assert spsa.outcome()["play"] == "wanders"


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
    ({"learner": "exp3", "step_size": 0.0}, "step_size"),
    ({"learner": "fictitious", "step_size": 0.1}, "only hedge, exp3 and spsa"),
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


# --- pricing FL under incomplete information (agent form) ----------------------------------------
def _bayes(N=6, aggregation="mle", prices=True, points=9):
    from privgames.mechanisms.learning_games import BayesPricingGame
    from privgames.mechanisms.pricing_bayes import BinaryGame

    return BayesPricingGame(BinaryGame(N, 0.25, 0.75, 0.4, aggregation=aggregation), prices,
                            np.random.default_rng(0), points)


@pytest.mark.parametrize("aggregation,prices", [("mle", True), ("mle", False), ("mean", True),
                                                ("mean", False)])
def test_bayes_interim_costs_are_eq13_expected_costs(aggregation, prices):
    """With every client of a type playing one (report, noise), a row's interim cost of each
    candidate equals ``pricing_bayes.expected_cost`` (eq 13 over the Binomial count of L
    types); N = 6 has 64 type profiles, all enumerated, so the match is exact."""
    from privgames.mechanisms.pricing_bayes import CASES, expected_cost

    game = _bayes(aggregation=aggregation, prices=prices)
    assert len(game.profiles) == 64
    s = game.levels[[2, 6]]
    for rho in CASES.values():
        interim = game.interim_costs(game.row_actions(rho, s))
        for t in (0, 1):
            for a in (0, 1):
                exact = expected_cost(game.bayes, game.mechanism, t, a, game.levels, rho, s)
                half = slice(a * game.m_levels, (a + 1) * game.m_levels)
                np.testing.assert_allclose(interim[t * 6 + 2, half], exact, rtol=1e-12)


def test_a_rare_types_rows_take_their_units_from_their_own_costs():
    """With P(L) = 0.02, many clients' L rows never play in the 64 scale rounds. Such a row's
    span is the spread of its own costs at the middle (as if it had played the last round),
    not that of the zero "costs" of a row that did not play (a span of ~1e-312 before)."""
    from privgames.mechanisms.learning_games import BayesPricingGame
    from privgames.mechanisms.pricing_bayes import BinaryGame

    game = BayesPricingGame(BinaryGame(20, 0.25, 0.75, 0.02, aggregation="mle"), True,
                            np.random.default_rng(0), 9)
    rng = np.random.default_rng(1)
    played = np.zeros(game.n, dtype=bool)
    for _ in range(64):  # the scale rounds' types, drawn again from a copy of the stream
        game.begin_round(rng)
        played |= game.active
        rng.standard_normal(game.N)  # each round's release noise
    span = game.scales(np.random.default_rng(1))[0]
    unseen = ~played
    assert unseen.sum() >= 3  # the case under test occurs
    every = game.row_costs(game.middle())  # the last round's others, every row as if it played
    np.testing.assert_allclose(span[unseen], np.ptp(every[unseen], axis=1), rtol=1e-12)
    assert np.all(span[unseen] > 1e-6 * np.abs(every[unseen]).max(axis=1))


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_bayes_social_cost_is_the_expected_social_cost(aggregation):
    """Everyone truthful at the design's target noise (on the grid exactly): the analyst's
    social cost over all 64 type profiles equals ``pricing_bayes.expected_social_cost``, the
    expectation over the Binomial count of L types."""
    from privgames.mechanisms.learning_games import BayesPricingGame
    from privgames.mechanisms.pricing_bayes import (
        TRUTHFUL,
        BinaryGame,
        design,
        expected_social_cost,
    )

    binary = BinaryGame(6, 0.25, 0.75, 0.4, aggregation=aggregation)
    target = design(binary)["target"]
    game = BayesPricingGame(binary, True, np.random.default_rng(0),
                            grid=(*sorted(target), 10 * max(target)))
    truthful = game.row_actions(TRUTHFUL, target)
    assert game.social_cost(truthful) == pytest.approx(expected_social_cost(binary, target),
                                                       rel=1e-12)


def test_bayes_types_are_drawn_every_round_from_the_prior():
    """Each client plays exactly one row a round, its type's; over rounds the share of L
    rows playing is the prior's 0.4, within 3 binomial standard errors."""
    game = _bayes()
    rng = np.random.default_rng(5)
    active = []
    for _ in range(4000):
        game.begin_round(rng)
        active.append(game.active.copy())
    active = np.array(active)
    assert np.all(active[:, :6] ^ active[:, 6:])  # client i: row i (L) or row 6 + i (H)
    share = active[:, :6].mean()
    assert abs(share - 0.4) <= 3 * math.sqrt(0.4 * 0.6 / active[:, :6].size)


def test_bayes_bandit_cost_is_unbiased_and_noisy():
    """A realized cost of a playing row (the release's noise, the realized penalty) averages to
    its expected cost given this round's types and actions (Bonferroni 3-sigma over the six
    clients), and varies; the rows that do not play get none."""
    game = _bayes()
    game.begin_round(np.random.default_rng(2))
    values = game.middle() + np.array([0, 1, 2, -1, -2, 3] * 2, dtype=float)
    rng = np.random.default_rng(3)
    draws = np.array([game.realized(values, rng) for _ in range(40000)])
    on = game.active
    expected = game.costs(values, values[:, None])[:, 0]
    z = (draws.mean(axis=0) - expected)[on] / (draws.std(axis=0, ddof=1)[on] / 200.0)
    assert np.max(np.abs(z)) <= 3.5
    assert np.all(draws.std(axis=0)[on] > 0) and np.all(draws[:, ~on] == 0.0)


def _realized_round_cost(game, values, types):
    """A row's cost in one round, written out from eq (13)'s integrand: the aggregate's error
    scale from everyone's weights (by report) and noise, the prices of the report."""
    g, mech = game.bayes, game.mechanism
    N = g.N
    out = np.zeros(2 * N)
    for i in range(N):
        t = types[i]
        j = int(values[t * N + i])
        reports = [int(values[types[k] * N + k]) // game.m_levels for k in range(N)]
        sigmas = [game.levels[int(values[types[k] * N + k]) % game.m_levels] for k in range(N)]
        w = [1.0 / mech.target[r] ** 2 if g.aggregation == "mle" else 1.0 for r in reports]
        delta = math.sqrt(sum((wk * sk) ** 2 for wk, sk in zip(w, sigmas, strict=True))) / sum(w)
        a, s = j // game.m_levels, game.levels[j % game.m_levels]
        penalty = mech.beta[a] * (((N - 1) / N) ** 2 * s**2
                                  + sum(sk**2 for k, sk in enumerate(sigmas) if k != i) / N**2)
        n_l = sum(r == 0 for r in reports)
        reward = mech.reward[a] * g.all_counts[n_l]
        out[t * N + i] = ((1 - g.alpha[t]) * g.kappa * delta * (1 + delta / (2 * g.L_F))
                          + g.alpha[t] * g.c * g.S / s + penalty - reward - mech.q)
    return out


def test_bayes_cce_gap_equals_the_best_deviation_gain():
    """The analyst's CCE gap of the agent form: each row's average over all rounds of its
    played cost minus its best fixed action's (0 in the rounds it does not play), every cost
    recomputed here round by round from the written-out formula on deviated profiles."""
    model = LearningModel(LearningConfig(game="pricing-bayes", learner="hedge", agents=4,
                                         rounds=60, grid_points=5), seed=6).run()
    g = model.game
    N, T = 4, model.steps
    table = np.zeros((T, 2 * N, g.grid.size + 1))
    for r in range(T):
        played, on = model.history[r], model.active_history[r]
        types = on[N:].astype(int)  # client i's row N + i plays iff its type is H
        for row in np.flatnonzero(on):
            for j, a in enumerate(g.grid):
                deviated = played.copy()
                deviated[row] = a
                table[r, row, j] = _realized_round_cost(g, deviated, types)[row]
            table[r, row, -1] = _realized_round_cost(g, played, types)[row]
    bounded = np.where(model.active_history[..., None], _bounded(table, model.span), 0.0)
    gain = bounded[..., -1].mean(axis=0) - bounded[..., :-1].mean(axis=0).min(axis=1)
    assert model.cce_gap() == pytest.approx(max(gain.max(), 0.0), rel=1e-9, abs=1e-12)


def test_bayes_bne_is_a_best_response_of_the_grid_game():
    """Definition 5's truthful BNE snapped to the grid: no row gains more than the grid's
    rounding by any (report, noise) deviation, by brute force over the interim costs; and the
    exact expected social cost at the design's target is the optimum the analyst reports."""
    from privgames.mechanisms.pricing_bayes import expected_social_cost

    game = _bayes(points=41)
    bne = game.references()["bne"]
    interim = game.interim_costs(bne)
    own = interim[np.arange(game.n), bne.astype(int)]
    assert np.max((own - interim.min(axis=1)) / np.abs(own)) <= 2e-3
    assert game.optimum() == pytest.approx(expected_social_cost(game.bayes,
                                                                game.rules.design["target"]))


def test_learners_keep_the_state_of_rows_that_do_not_play():
    """A row whose type is not drawn observes nothing: every learner's strategy for it is
    unchanged by the round, and SPSA, which needs every round, refuses."""
    from privgames.agents.learners import make_grid_learner

    active = np.array([True, False, True])
    costs = np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    for name in ("best_response", "fictitious", "hedge", "regret_matching"):
        learner = make_grid_learner(name, [1.0, 2.0, 3.0], 3, 10, span=2.0)
        learner.act(np.random.default_rng(0))
        before = learner.probabilities().copy()
        learner.observe(costs, active)
        after = learner.probabilities()
        np.testing.assert_array_equal(after[1], before[1])
        assert not np.array_equal(after[0], before[0]) or name == "regret_matching"
    exp3 = make_grid_learner("exp3", [1.0, 2.0, 3.0], 3, 10, "bandit")
    exp3.act(np.random.default_rng(0))
    before = exp3.probabilities().copy()
    exp3.observe(np.array([0.5, 0.9, 0.1]), active)
    np.testing.assert_array_equal(exp3.probabilities()[1], before[1])
    spsa = make_grid_learner("spsa", [1.0, 2.0, 3.0], 3, 10, "bandit")
    spsa.act(np.random.default_rng(0))
    with pytest.raises(ConfigError, match="incomplete information"):
        spsa.observe(np.array([0.5, 0.9, 0.1]), active)


@pytest.mark.parametrize("kwargs,message", [
    ({"game": "pricing-bayes", "learner": "spsa"}, "not allowed with game='pricing-bayes'"),
    ({"game": "pricing-bayes", "alpha_L": 0.8, "alpha_H": 0.5}, "alpha_H"),
    ({"game": "pricing-bayes", "p_low": 1.0}, "p_low"),
    ({"game": "pricing-bayes", "grid": (0.0, 1.0)}, "must be > 0"),
    ({"game": "pricing-bayes", "grid": (1.0, float("inf"))}, "no opt-out"),
])
def test_bad_bayes_configuration_is_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LearningModel(LearningConfig(**kwargs), seed=0)


def test_bayes_same_seed_same_play():
    config = LearningConfig(game="pricing-bayes", learner="exp3", rounds=60)
    a = LearningModel(config, seed=12).run()
    b = LearningModel(config, seed=12).run()
    np.testing.assert_array_equal(a.history, b.history)
    np.testing.assert_array_equal(a.active_history, b.active_history)
    assert a.results().equals(b.results())
