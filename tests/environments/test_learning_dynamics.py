"""Learners in every game: their guarantees hold in play, the analyst's CCE gap is the best
deviation gain (recomputed here from the mechanisms' own cost functions), bandit feedback is a
noisy realized cost, and the theory's profiles are what the brute force says they are."""

import math

import numpy as np
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.shards import combine
from privgames.mechanisms import chain, ppsp, pricing
from privgames.mechanisms.learning_games import BASGame, SARGame

GAMES = ("bas", "sar", "ppsp", "pricing", "pricing-bayes")


def slice_of(model):
    """The one shard of an in-process population: the game's round as the engine plays it."""
    (shard,) = model.run_.shards
    return shard.slice
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
    assert np.all(np.isin(model.last_iterate(), model.grid)) or learner == "spsa"


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
    from privgames.environments.ppsp_ring import NoiseGameConfig

    model = LearningModel(LearningConfig(game="ppsp", learner="hedge", agents=6, rounds=200,
                                         history=True), seed=3).run()
    w = model.types()["weights"]
    ring = NoiseGameConfig(n=6)
    args = (6, ring.K, ring.delta, ring.d)

    def cost_of(profiles):
        return ppsp.tradeoff_cost(profiles.max(axis=1, keepdims=True),
                                  profiles.min(axis=1, keepdims=True), w[:, 0], w[:, 1], w[:, 2],
                                  *args)

    assert model.cce_gap() == pytest.approx(
        _deviation_gain(model.history, model.scales()[0], model.grid, cost_of), rel=1e-9,
        abs=1e-12)


def test_cce_gap_equals_the_best_deviation_gain_bas():
    model = LearningModel(LearningConfig(game="bas", learner="regret_matching", agents=5,
                                         rounds=150, history=True), seed=4).run()
    beta = model.types()["beta"]

    def cost_of(profiles):
        return np.array([chain.user_costs(p, beta) for p in profiles])

    assert model.cce_gap() == pytest.approx(
        _deviation_gain(model.history, model.scales()[0], model.grid, cost_of),
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
    """Each client's realized cost as the engine draws it (its noise, the aggregate's error,
    its realized penalty) averages to its expected cost, per client within the Bonferroni
    3-sigma threshold, and varies (a noisy sample, not the expected cost); without prices
    the expected cost is eq (5), written out in ``pricing.client_costs``."""
    model = LearningModel(LearningConfig(game="pricing", agents=5, aggregation=aggregation,
                                         pricing=prices, rounds=2), seed=8)
    s = slice_of(model)
    values = model.grid[[3, 6, 9, 12, 15]]
    rounds = 40000
    noise = s._draw(values, s.release_stream, rounds)
    totals = combine([s._release_partials(values, noise, s._profile_partials(values))])
    draws = s._realized(values, noise, totals, s.release_stream, s.common, rounds)
    own = s._costs(values, totals, values[:, None])[:, 0]
    z = (draws.mean(axis=0) - own) / (draws.std(axis=0, ddof=1) / math.sqrt(rounds))
    assert np.max(np.abs(z)) <= 3.5  # five clients: the family-wise 3-sigma threshold is 3.3
    assert np.all(draws.std(axis=0) > 0)
    if not prices:
        alpha = model.types()["alpha"]
        np.testing.assert_allclose(own, pricing.client_costs(values, alpha, 1.0, 1.0, 1.0, 1.0,
                                                             aggregation), rtol=1e-12)


def test_sar_bandit_cost_is_the_simulated_exposure():
    game = SARGame(10, 0.3, "strong")
    values = np.array([1.0] * 7 + [0.0] * 3)
    rng = np.random.default_rng(9)
    draws = np.array([game.realized(values, rng) for _ in range(40000)])
    p = draws[:, :7].mean() + game.tolerated
    se = math.sqrt(p * (1 - p) / draws[:, :7].size)
    assert abs(p - game.exposure(7)) <= 3 * se * math.sqrt(7)  # 7 victims share the draws' rounds
    assert np.all(draws[:, 7:] == 0.0)


def test_sar_bandit_cost_as_the_engine_draws_it():
    """The engine's realized SAR cost (each user's place among the participants and its
    uniforms, drawn from its own block stream): a participant pays 1 when exposed, less the
    tolerated risk ``1/K^2``; its mean is eq (32)'s exposure for the count (strong attacker,
    within 3 SE over 40,000 rounds x 7 participants); a user who stays out pays 0."""
    from privgames.mechanisms import sar

    model = LearningModel(LearningConfig(game="sar", agents=10, p=0.3, attacker="strong",
                                         learner="exp3", rounds=2), seed=9)
    s = slice_of(model)
    values = np.array([1.0] * 7 + [0.0] * 3)
    totals = combine([s._profile_partials(values)])
    draws = s._realized(values, None, totals, s.release_stream, s.common, 40000)
    exposed = draws[:, :7] + 1 / 100
    assert set(np.unique(exposed).round(12)) <= {0.0, 1.0}
    rate, want = exposed.mean(), sar.failure_probability(7, 0.3, "strong")
    assert abs(rate - want) <= 3 * math.sqrt(want * (1 - want) / 40000) * math.sqrt(7)
    assert np.all(draws[:, 7:] == 0.0)


def test_ppsp_bandit_cost_draws_the_estimators_squared_error():
    """PPSP's realized cost as the engine draws it (one standard normal a round, shared): the
    accuracy term ``gamma_a c_max^2 pi^2 n^2 / 3`` (Theorem 2's, written out) becomes that
    times ``z^2``, so a node's realized cost averages to its expected cost and varies by
    ``2 (accuracy)^2``, within 3 SE over 20,000 rounds; the other terms do not vary."""
    model = LearningModel(LearningConfig(game="ppsp", learner="exp3", agents=6, rounds=2),
                          seed=5)
    s = slice_of(model)
    values = model.grid[[3, 6, 9, 12, 15, 9]]
    totals = combine([s._profile_partials(values)])
    draws = s._realized(values, None, totals, s.release_stream, s.common, 20000)
    own = s._costs(values, totals, values[:, None])[:, 0]
    accuracy = model.types()["weights"][:, 1] * values.max() ** 2 * math.pi**2 * 6**2 / 3.0
    se = np.sqrt(2.0) * accuracy / math.sqrt(20000)
    assert np.all(np.abs(draws.mean(axis=0) - own) <= 3 * se)
    np.testing.assert_allclose(draws.std(axis=0), np.sqrt(2.0) * accuracy, rtol=0.05)
    np.testing.assert_allclose(draws - draws[:, :1] * accuracy / accuracy[0],
                               np.broadcast_to(own - own[0] * accuracy / accuracy[0],
                                               draws.shape), rtol=1e-9, atol=1e-9)


def test_outcome_tells_convergence_from_cycling():
    """SAR participation under best response: everyone leaves, everyone returns -- the last
    iterate alternates between two profiles (cycles); BAS under best response settles at its
    NE (converged); SPSA's continuous level never repeats (wanders)."""
    sar = LearningModel(LearningConfig(game="sar", learner="best_response", rounds=200,
                                       history=True), seed=0).run()
    recent = sar.history[-20:].sum(axis=1)
    assert sar.outcome()["play"] == "cycles" and len(set(recent)) == 2
    bas = LearningModel(LearningConfig(game="bas", learner="best_response", rounds=200),
                        seed=0).run()
    assert bas.outcome()["play"] == "converged" and bas.outcome()["reached"] == "nash"
    spsa = LearningModel(LearningConfig(game="ppsp", learner="spsa", rounds=200), seed=0).run()
    assert spsa.outcome()["play"] == "wanders"


def test_same_seed_same_play():
    config = LearningConfig(game="pricing", learner="exp3", rounds=100, history=True)
    a = LearningModel(config, seed=12).run()
    b = LearningModel(config, seed=12).run()
    np.testing.assert_array_equal(a.history, b.history)
    assert a.results().equals(b.results())


def test_players_are_views_on_their_shards_rows():
    """``model.agents`` is a Mesa AgentSet of one view per row, made on access: each reads its
    type, the strategy it drew from, the action it played, its iterate and reference, and its
    cost of every grid action, eq (14) on the explicitly deviated profile of last round's
    play (written out in ``chain.user_costs``)."""
    from mesa.agent import AgentSet

    model = LearningModel(LearningConfig(game="bas", learner="hedge", agents=7, rounds=20),
                          seed=1).run()
    assert isinstance(model.agents, AgentSet) and len(model.agents) == 7
    beta, iterate, nash = model.types()["beta"], model.last_iterate(), model.reference()
    played = np.array([p.action for p in model.agents])
    for p in model.agents:
        view = p.view()
        assert view.private == {"beta": beta[p.index]}
        assert view.iterate == iterate[p.index] and view.reference == nash[p.index]
        assert p.strategy.sum() == pytest.approx(1.0) and p.strategy.shape == model.grid.shape
        want = [chain.user_costs(np.where(np.arange(7) == p.index, a, played), beta)[p.index]
                for a in model.grid]
        np.testing.assert_allclose(p.costs, want, rtol=1e-12)


def test_types_are_drawn_from_their_own_stream():
    """The game's types do not depend on the learner (common random numbers across learners)
    and differ between seeds."""
    a = LearningModel(LearningConfig(game="bas", learner="exp3"), seed=1).types()["beta"]
    b = LearningModel(LearningConfig(game="bas", learner="exp3"), seed=2).types()["beta"]
    c = LearningModel(LearningConfig(game="bas", learner="hedge"), seed=2).types()["beta"]
    np.testing.assert_array_equal(b, c)
    assert not np.array_equal(a, b)


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
    mle = LearningModel(LearningConfig(game="pricing"), 0)
    mean = LearningModel(LearningConfig(game="pricing", aggregation="mean"), 0)
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
    # a population's costs from its grid indices (the exposure once per action, gathered) are
    # the per-user ones, bit for bit, at counts large and small
    big = SARGame(100_000, 0.23, attacker)
    rng = np.random.default_rng(1)
    index = rng.integers(0, 2, 100_000)
    v = big.grid[index]
    for count in (0.0, 2.0, 3.0, float(index.sum()), 99_999.0):
        for candidates in (None, v[:, None]):
            assert np.array_equal(big.costs_given(v, count, candidates, index),
                                  big.costs_given(v, count, candidates))


# --- pricing FL under incomplete information (agent form) ----------------------------------------
def _bayes(N=6, aggregation="mle", prices=True, points=9, **kw):
    """A one-shard population of pricing-bayes (P(L) = 0.4) and its slice."""
    model = LearningModel(LearningConfig(game="pricing-bayes", agents=N, alpha_L=0.25,
                                         alpha_H=0.75, p_low=0.4, aggregation=aggregation,
                                         pricing=prices, grid_points=points, rounds=2, **kw), 0)
    return model, slice_of(model)


def _interim(s, v):
    """Every row's interim cost of each action over the analyst's type profiles."""
    return s._interim(v, s._counts(v, s.profiles), s.profiles, s.weights)


@pytest.mark.parametrize("aggregation,prices", [("mle", True), ("mle", False), ("mean", True),
                                                ("mean", False)])
def test_bayes_interim_costs_are_eq13_expected_costs(aggregation, prices):
    """With every client of a type playing one (report, noise), a row's interim cost of each
    candidate equals ``pricing_bayes.expected_cost`` (eq 13 over the Binomial count of L
    types); N = 6 has 64 type profiles, all enumerated, so the match is exact."""
    from privgames.mechanisms.pricing_bayes import CASES, expected_cost

    _, s = _bayes(aggregation=aggregation, prices=prices)
    rules = s.rules
    assert len(s.profiles) == 64
    sigma = rules.levels[[2, 6]]
    for rho in CASES.values():
        interim = _interim(s, rules.row_actions(rho, sigma, s.row_type))
        for t in (0, 1):
            for a in (0, 1):
                exact = expected_cost(rules.bayes, rules.mechanism, t, a, rules.levels, rho,
                                      sigma)
                half = slice(a * rules.m_levels, (a + 1) * rules.m_levels)
                np.testing.assert_allclose(interim[t * 6 + 2, half], exact, rtol=1e-12)


def test_a_rare_types_rows_take_their_units_from_their_own_costs():
    """With P(L) = 0.02, many clients' L rows never play in the 64 scale rounds. Such a row's
    span is the spread of its own costs at the middle (as if it had played the last round),
    not that of the zero "costs" of a row that did not play (a span of ~1e-312 before)."""
    model = LearningModel(LearningConfig(game="pricing-bayes", agents=20, p_low=0.02,
                                         grid_points=9, pricing=True, rounds=2), 0)
    s = slice_of(model)
    types = s._scale_types  # (64, clients), 1 = H
    played = np.concatenate([(types == 0).any(axis=0), (types == 1).any(axis=0)])
    unseen = ~played
    assert unseen.sum() >= 3  # the case under test occurs
    last = types[-1][None]
    every = s._interim(s.middle, s._counts(s.middle, last), last, np.ones(1))
    span = model.scales()[0]
    np.testing.assert_allclose(span[unseen], np.ptp(every[unseen], axis=1), rtol=1e-12)
    assert np.all(span[unseen] > 1e-6 * np.abs(every[unseen]).max(axis=1))


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_bayes_social_cost_is_the_expected_social_cost(aggregation):
    """Everyone truthful at the design's target noise (on the grid exactly): the analyst's
    social cost over all 64 type profiles equals ``pricing_bayes.expected_social_cost``, the
    expectation over the Binomial count of L types."""
    from privgames.mechanisms.pricing_bayes import (
        TRUTHFUL,
        BinaryGame,
        design,
        expected_social_cost,
    )

    binary = BinaryGame(6, 0.25, 0.75, 0.4, aggregation=aggregation)
    target = design(binary)["target"]
    _, s = _bayes(aggregation=aggregation, grid=(*sorted(target), 10 * max(target)))
    truthful = s.rules.row_actions(TRUTHFUL, target, s.row_type)
    counts = s._counts(truthful, s.profiles).reshape(len(s.weights), 2, -1)
    assert s.rules.social(counts, s.weights) == pytest.approx(
        expected_social_cost(binary, target), rel=1e-12)


def test_bayes_types_are_drawn_every_round_from_the_prior():
    """Each client plays exactly one row a round, its type's; over rounds the share of L
    rows playing is the prior's 0.4, within 3 binomial standard errors."""
    _, s = _bayes()
    active = []
    for _ in range(4000):
        s._begin_round()
        active.append(s.active.copy())
    active = np.array(active)
    assert np.all(active[:, :6] ^ active[:, 6:])  # client i: row i (L) or row 6 + i (H)
    share = active[:, :6].mean()
    assert abs(share - 0.4) <= 3 * math.sqrt(0.4 * 0.6 / active[:, :6].size)


def _realized_round_cost(rules, values, types, noise):
    """Each playing row's realized cost in one round, written out: the release's error from
    everyone's weights (by report) and noise replaces ``Delta`` and ``Delta^2`` in eq (9) by
    ``|e| sqrt(pi/2)`` and ``e^2``; the realized penalty ``beta (n_i - mean n)^2``, the
    reward of the report and the fee."""
    g, mech = rules.bayes, rules.mechanism
    N = g.N
    rows = [int(values[types[k] * N + k]) for k in range(N)]
    reports = [r // rules.m_levels for r in rows]
    w = [1.0 / mech.target[r] ** 2 if g.aggregation == "mle" else 1.0 for r in reports]
    e = sum(wk * nk for wk, nk in zip(w, noise, strict=True)) / sum(w)
    loss = g.kappa * (abs(e) * math.sqrt(math.pi / 2) + e * e / (2 * g.L_F))
    n_l = sum(r == 0 for r in reports)
    out = np.zeros(2 * N)
    for i in range(N):
        t, a = types[i], reports[i]
        s = rules.levels[rows[i] % rules.m_levels]
        out[t * N + i] = ((1 - g.alpha[t]) * loss + g.alpha[t] * g.c * g.S / s
                          + mech.beta[a] * (noise[i] - sum(noise) / N) ** 2
                          - mech.reward[a] * g.all_counts[n_l] - mech.q)
    return out


def test_bayes_bandit_cost_is_the_written_out_realized_cost_and_unbiased():
    """A playing row's realized cost, as the engine computes it, is the one written out from
    the release (exactly, on 50 draws); over 20,000 rounds it averages to the row's expected
    cost given the round's types and actions (Bonferroni 3-sigma over the six clients), and
    varies; the rows that do not play get none."""
    _, s = _bayes()
    s._begin_round()
    values = s.middle + np.array([0, 1, 2, -1, -2, 3] * 2, dtype=float)
    totals = combine([s._profile_partials(values)])
    expected = s._costs(values, totals)[np.arange(s.rows), values.astype(int)]
    on, types = s.active, s.types
    sigma = s._release(values, types)[1]
    rng = np.random.default_rng(3)
    draws = []
    for k in range(20000):
        noise = rng.standard_normal(6) * sigma
        w = s.rules.weight[s._release(values, types)[0]]
        realized = s._realized_rows(types, noise, totals["counts"], float(w @ noise),
                                    float(noise.sum()), s._release(values, types))
        if k < 50:
            np.testing.assert_allclose(realized[on], _realized_round_cost(
                s.rules, values, types, noise)[on], rtol=1e-10)
        draws.append(realized)
    draws = np.array(draws)
    z = (draws.mean(axis=0) - expected)[on] / (draws.std(axis=0, ddof=1)[on] / math.sqrt(20000))
    assert np.max(np.abs(z)) <= 3.5
    assert np.all(draws.std(axis=0)[on] > 0) and np.all(np.isnan(draws[:, ~on]))


def test_bayes_bne_is_a_best_response_of_the_grid_game():
    """Definition 5's truthful BNE snapped to the grid: no row gains more than the grid's
    rounding by any (report, noise) deviation, by brute force over the interim costs; and the
    exact expected social cost at the design's target is the optimum the analyst reports."""
    from privgames.mechanisms.pricing_bayes import expected_social_cost

    model, s = _bayes(points=41)
    bne = s.references["bne"]
    interim = _interim(s, bne)
    own = interim[np.arange(s.rows), bne.astype(int)]
    gain = np.max((own - interim.min(axis=1)) / np.abs(own))
    assert gain <= 2e-3
    assert model.predicted()["nash_gaps_relative"]["bne"] == pytest.approx(gain, abs=1e-12)
    assert model.predicted()["optimum"] == pytest.approx(expected_social_cost(
        s.rules.bayes, s.rules.design["target"]))


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


@pytest.mark.parametrize("game", ["bas", "pricing-bayes", "bas-sequential"])
def test_a_round_sends_the_partials_of_the_iterate_it_ends_with(game):
    """A round sends its last iterate's partials again only while the iterate stays: after
    every round they are the ones the iterate has now, computed afresh."""
    model = LearningModel(LearningConfig(game=game, learner="regret_matching", agents=12,
                                         rounds=40),
                          seed=4)
    sl = slice_of(model)
    moved = 0
    for _ in range(40):
        before = sl.mode.copy()
        model.step()
        moved += not np.array_equal(before, sl.mode)
        fresh, kept = sl.iterate_partials(), sl._iterate
        assert kept.sums.keys() == fresh.sums.keys() and kept.maxima == fresh.maxima
        assert all(np.array_equal(kept.sums[k], fresh.sums[k]) for k in fresh.sums)
    assert 0 < moved < 40  # the iterate both moved and stayed


@pytest.mark.parametrize("clients", [1, 6, 11])
def test_bayes_counts_are_the_clients_per_profile_type_and_action(clients):
    """The analyst's counts of clients per (profile, type, action), written out here one
    client at a time (any number of clients, not only whole lanes of four)."""
    model = LearningModel(LearningConfig(game="pricing-bayes", learner="hedge",
                                         agents=max(clients, 3), rounds=2), seed=1)
    rules = slice_of(model).rules
    rng = np.random.default_rng(clients)
    k = rules.grid.size
    actions = rng.integers(0, k, (2, clients))
    types = rng.integers(0, 2, (9, clients)).astype(np.int8)
    expected = np.zeros((9, 2, k))
    for s in range(9):
        for c in range(clients):
            expected[s, types[s, c], actions[types[s, c], c]] += 1
    assert np.array_equal(rules.counts(actions, types), expected)


def test_bayes_same_seed_same_play():
    config = LearningConfig(game="pricing-bayes", learner="exp3", rounds=60, history=True)
    a = LearningModel(config, seed=12).run()
    b = LearningModel(config, seed=12).run()
    np.testing.assert_array_equal(a.history, b.history)
    assert a.results().equals(b.results())


@pytest.mark.parametrize("game", ["sar", "pricing", "ppsp", "pricing-bayes"])
def test_the_scale_rounds_taken_a_part_at_a_time_are_the_whole(game, monkeypatch):
    """The learners' units come from 64 scale rounds of every agent, taken a part of the
    agents at a time so that they are never whole at 10^6 agents (SAR's draws a run of
    blocks at a time, the middle's cost range a part of the rows, the realized samples'
    deviation a part of the agents): parts of one block and of 100 agents give the whole's
    units and rows, to the bit."""
    from privgames.environments import learning_slices
    from privgames.mechanisms import learning_games

    def run() -> tuple:
        model = LearningModel(LearningConfig(game=game, learner="exp3", agents=3001, rounds=4),
                              3).run()
        return model.scales(), model.results()

    (whole_scales, whole_rows) = run()
    monkeypatch.setattr(learning_slices, "PART", 1)  # 3 parts of one block
    monkeypatch.setattr(learning_games, "SAMPLED", 100)
    (scales, rows) = run()
    for a, b in zip(whole_scales, scales, strict=True):
        assert np.array_equal(a, b)
    assert whole_rows.equals(rows)
