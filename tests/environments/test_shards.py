"""One population over shards: the block layout, streams and sums that make the numbers the same
at any shard count; the pricing game's shards against the in-process game; a killed shard."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import LearningConfig
from privgames.environments.learning_shards import ShardedLearningModel
from privgames.environments.shards import BLOCK, BlockStreams, Partials, block_sums, combine, layout
from privgames.environments.streams import as_seed_sequence
from privgames.mechanisms import pricing
from privgames.mechanisms.learning_games import (
    BASGame,
    BayesPricingGame,
    PPSPGame,
    PricingGame,
    SARGame,
)
from privgames.mechanisms.pricing_bayes import BinaryGame

AGENTS = 2 * BLOCK + 452  # three blocks, the last one partial


def test_the_layout_is_whole_blocks_in_order_and_uneven_splits_work():
    assert layout(AGENTS, 1) == [(0, AGENTS)]
    assert layout(AGENTS, 2) == [(0, 2 * BLOCK), (2 * BLOCK, AGENTS)]
    assert layout(AGENTS, 3) == [(0, BLOCK), (BLOCK, 2 * BLOCK), (2 * BLOCK, AGENTS)]
    ranges = layout(10 * BLOCK + 1, 4)  # 11 blocks over 4 shards: 3, 3, 3, 2 or so
    assert ranges[0][0] == 0 and ranges[-1][1] == 10 * BLOCK + 1
    assert all(a % BLOCK == 0 and b > a for a, b in ranges)
    assert all(b == c for (_, b), (c, _) in zip(ranges, ranges[1:], strict=False))
    for bad, message in ((0, "shards must be an integer >= 1"), (4, "shards must be <= 3")):
        with pytest.raises(ConfigError, match=message):
            layout(AGENTS, bad)


def test_an_agents_draws_and_a_blocks_sum_do_not_depend_on_its_shard():
    seed = as_seed_sequence(11)
    whole = BlockStreams(seed, 2, 0, AGENTS, AGENTS).normal(3)
    parts = np.concatenate([BlockStreams(seed, 2, a, b, AGENTS).normal(3)
                            for a, b in layout(AGENTS, 3)], axis=-1)
    assert whole.shape == (3, AGENTS) and np.array_equal(whole, parts)
    other_stream = BlockStreams(seed, 3, 0, AGENTS, AGENTS).normal(3)
    assert not np.array_equal(whole, other_stream)
    x = whole[0] * 1e8  # large, mixed signs: the order of a sum matters
    totals = [combine([Partials({"x": block_sums(x[a:b], a)}) for a, b in layout(AGENTS, k)])
              for k in (1, 2, 3)]
    assert totals[0]["x"] == totals[1]["x"] == totals[2]["x"]
    assert totals[0]["x"] == pytest.approx(np.sum(x), rel=1e-12, abs=1e-3)


def _model(shards: int, in_process: bool, **kw) -> ShardedLearningModel:
    config = LearningConfig(**{"game": "pricing", "agents": AGENTS, "rounds": 40,
                               "backend": "ray", "shards": shards, **kw})
    return ShardedLearningModel(config, 5, in_process=in_process)


def test_the_shards_play_the_pricing_game():
    """The grid, references, costs, deviation gains and social costs the shards compute from
    aggregates are those of the in-process :class:`PricingGame` with the same clients."""
    for kw in ({"aggregation": "mle"}, {"aggregation": "mean", "pricing": True}):
        model = _model(3, True, **kw)
        slices = [s.slice for s in model.run_.shards]
        alpha = np.concatenate([s.alpha for s in slices])
        game = PricingGame(alpha, 1.0, 1.0, 1.0, 1.0, kw["aggregation"], kw.get("pricing", False),
                           21)
        np.testing.assert_allclose(model.grid, game.grid, rtol=1e-12)
        np.testing.assert_allclose(np.concatenate([s.beta for s in slices]), game.beta,
                                   rtol=1e-9)
        reference = np.concatenate([s.references[model.predicted_name] for s in slices])
        assert np.array_equal(reference, next(iter(game.references().values())))
        predicted = model.predicted()
        name = model.predicted_name
        assert predicted["nash_gaps"][name] == pytest.approx(
            game.nash_gap(reference, np.concatenate([s.span for s in slices])), rel=1e-9)
        assert predicted["social_costs"][name] == pytest.approx(game.social_cost(reference),
                                                                rel=1e-9)
        assert predicted["optimum"] == pytest.approx(game.optimum(), rel=1e-9)
        model.run(3)  # then a played profile: every client's cost of every grid action
        client = model.agent(BLOCK + 7)  # a view, read from the shard that owns it
        assert client.private == {"alpha": alpha[BLOCK + 7]}
        assert client.reference == reference[BLOCK + 7]
        assert client.action == slices[1].values[7] and client.strategy.sum() == \
            pytest.approx(1.0)
        played = np.concatenate([s.values for s in slices])
        totals = combine([s._profile_partials(s.values) for s in slices])
        costs = np.concatenate([s._costs(s.values, totals) for s in slices])
        np.testing.assert_allclose(costs, game.costs(played), rtol=1e-9)
        assert pricing.social_cost(played, alpha, 1, 1, 1, 1, kw["aggregation"]) == \
            pytest.approx(sum(s._social(s.values, totals, None).sum() for s in slices),
                          rel=1e-9)


def _game_of(model: ShardedLearningModel):
    """The in-process game with the shards' own agents (their private types)."""
    c, slices = model.config, [s.slice for s in model.run_.shards]
    if c.game == "bas":
        return BASGame(np.concatenate([s.beta for s in slices]), c.d, c.grid_points)
    if c.game == "sar":
        return SARGame(c.agents, c.p, c.attacker)
    from privgames.environments.ppsp_ring import NoiseGameConfig

    ring = NoiseGameConfig(n=c.agents, weighting=c.weighting, spread=c.spread)
    return PPSPGame(np.concatenate([s.weights for s in slices]), ring.K, ring.delta, ring.d,
                    c.grid_points)


@pytest.mark.parametrize("game, kw", [("bas", {}), ("sar", {"p": 0.4}),
                                      ("sar", {"attacker": "strong", "p": 0.3}),
                                      ("ppsp", {}), ("ppsp", {"weighting": "equal"})])
def test_the_shards_play_the_bas_sar_and_ppsp_games(game, kw):
    """From the aggregates alone (the chain's prefix as a scan across shards, SAR's count,
    the ring's extremes), the shards compute the grid, the references, every agent's cost of
    every action, the deviation gains and social costs, the optimum and the realized costs of
    the in-process game with the same agents."""
    model = _model(3, True, game=game, **kw)
    slices = [s.slice for s in model.run_.shards]
    g = _game_of(model)
    np.testing.assert_allclose(model.grid, g.grid, rtol=1e-12)
    references = g.references()
    assert model.reference_names == list(references)
    for name, ref in references.items():
        assert np.array_equal(np.concatenate([s.references[name] for s in slices]), ref), name
    span = np.concatenate([s.span for s in slices])
    predicted = model.predicted()
    for name, ref in references.items():
        assert predicted["nash_gaps"][name] == pytest.approx(g.nash_gap(ref, span), rel=1e-9)
        assert predicted["nash_gaps_relative"][name] == pytest.approx(
            g.nash_gap_relative(ref), rel=1e-9, abs=1e-12)
        assert predicted["social_costs"][name] == pytest.approx(g.social_cost(ref), rel=1e-9,
                                                                abs=1e-12)
    assert predicted["optimum"] == pytest.approx(g.optimum(), rel=1e-9, abs=1e-12)
    model.run(4)
    played = np.concatenate([s.values for s in slices])
    assert len(set(played.tolist())) > 1  # a profile where the aggregates matter
    totals = combine([s._profile_partials(s.values) for s in slices])
    costs = np.concatenate([s._costs(s.values, totals) for s in slices])
    np.testing.assert_allclose(costs, g.costs(played), rtol=1e-9, atol=1e-12)
    assert model.results()["social_cost"].iloc[-1] == pytest.approx(
        g.social_cost(model.last_iterate()), rel=1e-9, abs=1e-12)
    view = model.agent(BLOCK + 7)
    assert view.iterate == model.last_iterate()[BLOCK + 7]
    assert view.reference == next(iter(references.values()))[BLOCK + 7]
    own = g.own_costs(played)
    if game == "sar":  # per-user draws: the realized costs' mean is the expected cost
        draws = 4000
        realized = np.concatenate([s._realized(s.values, None, totals, s.scale_stream,
                                               s.common_scales, draws) for s in slices],
                                  axis=-1)
        se = realized.std(axis=0, ddof=1) / np.sqrt(draws)
        assert np.all(np.abs(realized.mean(axis=0) - own) <= 5 * se + 1e-12)
        assert np.any(se > 0)
    else:  # one shared draw a round: the in-process game's from the same generator
        import copy

        rng = copy.deepcopy(slices[0].common)
        realized = np.concatenate([s._realized(s.values, None, totals, s.release_stream,
                                               copy.deepcopy(rng), None) for s in slices])
        np.testing.assert_allclose(realized, g.realized(played, rng), rtol=1e-9)


def _population(parts: list[NDArray]) -> NDArray:
    """The shards' rows ``t size + i`` as the population's ``t N + i``."""
    return np.concatenate([x.reshape(2, -1) for x in parts], axis=1).ravel()


@pytest.mark.parametrize("kw", [{"aggregation": "mle", "pricing": True},
                                {"aggregation": "mean", "pricing": False}])
def test_the_shards_play_the_pricing_bayes_game(kw):
    """From the counts of clients per (profile, type, action) alone, the shards compute the
    references, every playing row's cost of every action this round, the interim deviation
    gains and expected social costs over the analyst's profiles, the optimum and the realized
    costs of the in-process :class:`BayesPricingGame` with the same types and profiles."""
    model = _model(3, True, game="pricing-bayes", rounds=10, **kw)
    c, slices = model.config, [s.slice for s in model.run_.shards]
    g = BayesPricingGame(BinaryGame(c.agents, c.alpha_L, c.alpha_H, c.p_low,
                                    aggregation=c.aggregation), c.pricing,
                         np.random.default_rng(0), c.grid_points)
    g.profiles = np.concatenate([s.profiles for s in slices], axis=1)
    g.profile_weights = slices[0].weights
    references = g.references()
    assert model.reference_names == list(references)
    for name, ref in references.items():
        assert np.array_equal(_population([s.references[name] for s in slices]), ref), name
    span = _population([s.span for s in slices])
    predicted = model.predicted()
    for name, ref in references.items():
        assert predicted["nash_gaps"][name] == pytest.approx(g.nash_gap(ref, span), rel=1e-9,
                                                             abs=1e-12)
        assert predicted["nash_gaps_relative"][name] == pytest.approx(
            g.nash_gap_relative(ref), rel=1e-9, abs=1e-12)
        assert predicted["social_costs"][name] == pytest.approx(g.social_cost(ref), rel=1e-9)
    assert predicted["optimum"] == pytest.approx(g.optimum(), rel=1e-12)
    model.run(4)
    g.types = np.concatenate([s.types for s in slices]).astype(int)
    g.active = g.row_type == g.types[g.client]
    assert np.array_equal(_population([s.active for s in slices]), g.active)
    played = _population([s.values for s in slices])
    assert len(set(played[g.active].tolist())) > 1  # a profile where the counts matter
    totals = combine([s._profile_partials(s.values) for s in slices])
    costs = np.concatenate([s._costs(s.values, totals).reshape(2, s.size, -1)
                            for s in slices], axis=1).reshape(g.n, -1)
    np.testing.assert_allclose(costs, g.costs(played), rtol=1e-9)
    assert model.results()["social_cost"].iloc[-1] == pytest.approx(
        g.social_cost(model.last_iterate()), rel=1e-9)
    noise = [s._draw(s.values, s.release_stream, None) for s in slices]
    totals = combine([s._release_partials(s.values, e, s._profile_partials(s.values))
                      for s, e in zip(slices, noise, strict=True)])
    realized = _population([s._realized(s.values, e, totals, None, None, None)
                            for s, e in zip(slices, noise, strict=True)])
    sigma = g.decode(played[g.types * g.N + np.arange(g.N)])[1]

    class Drawn:  # the shards' standard normals, as the in-process game draws them
        def standard_normal(self, n):
            return np.concatenate(noise) / sigma

    np.testing.assert_allclose(realized, g.realized(played, Drawn()), rtol=1e-9)
    view = model.agent(g.N + BLOCK + 7)  # client BLOCK + 7's row of type H
    assert view.private == {"type": 1.0, "alpha": c.alpha_H}
    assert view.iterate == model.last_iterate()[g.N + BLOCK + 7]
    with pytest.raises(ConfigError, match="agent=5000 is out of range: agents are 0 to 4999"):
        model.agent(2 * g.N)


def test_the_shards_play_the_sequential_bas_game():
    """From the shards' level maps alone (``m`` integers a shard), each shard computes the
    rows' costs at every state (the later followers' replies through the other shards), the
    round's path, Theorem 1's subgame-perfect profile by backward induction across shards, the
    deviation gains on the path and at every state, the social costs, the optimum and the
    realized costs of the in-process :class:`BASSequentialGame` with the same users."""
    from privgames.mechanisms.bas_sequential import BASSequentialGame

    model = _model(3, True, game="bas-sequential", grid_points=9, rounds=10)
    c, slices = model.config, [s.slice for s in model.run_.shards]
    g = BASSequentialGame(np.concatenate([s.beta for s in slices]), c.d, c.grid_points)
    m = g.grid.size

    def population(parts):  # the shards' rows (user-major, the leader's m) as the game's
        x = np.concatenate(parts)
        return np.concatenate([x[:1], x[m:]])

    np.testing.assert_allclose(model.grid, g.grid, rtol=1e-15)
    ref = g.references()["theorem1"]
    assert np.array_equal(population([s.references["theorem1"] for s in slices]), ref)
    predicted = model.predicted()
    assert predicted["nash_gaps"]["theorem1"] == pytest.approx(g.nash_gap(
        ref, population([s.span for s in slices])), abs=1e-12)
    assert predicted["social_costs"]["theorem1"] == pytest.approx(g.social_cost(ref),
                                                                  rel=1e-12)
    assert predicted["optimum"] == pytest.approx(g.optimum(), rel=1e-12)
    model.run(4)
    played = population([s.values for s in slices])
    totals = combine([s._profile_partials(s.values) for s in slices])
    costs = population([s._costs(s.values, totals) for s in slices])
    np.testing.assert_allclose(costs, g.costs(played), rtol=1e-12)
    g.played(played)
    assert np.array_equal(population([s.active for s in slices]), g.active)
    last = model.last_iterate()
    assert np.array_equal(last, population([s.mode for s in slices]))
    row = model.results().iloc[-1]
    assert row["social_cost"] == pytest.approx(g.social_cost(last), rel=1e-12)
    assert row["nash_gap_relative"] == pytest.approx(g.nash_gap_relative(last), abs=1e-12)
    assert row["distance"] == pytest.approx(g.distance(last, ref), abs=1e-15)
    assert model.subgame_gap_relative() == pytest.approx(g.subgame_gap_relative(last),
                                                         rel=1e-12)
    assert model.path_summary() == pytest.approx(g.path_summary(last), rel=1e-12)
    rng = copy.deepcopy(slices[0].common)
    realized = population([s._realized(s.values, None, totals, None, copy.deepcopy(rng), None)
                           for s in slices])
    np.testing.assert_allclose(realized, g.realized(played, rng), rtol=1e-12)
    view = model.agent(1 + (BLOCK + 6) * m + 3)  # user BLOCK + 7 at state 3
    assert view.private == {"beta": g.beta[BLOCK + 7]}
    assert view.iterate == last[1 + (BLOCK + 6) * m + 3]


def test_a_first_user_with_the_top_preference_changes_places():
    """Stage 2 (the top bidder is not first): over seeds where user 0 draws the largest
    preference, it changes places with another user; the preferences are the ones drawn."""
    from privgames.environments.learning_slices import TYPES

    swapped = 0
    for seed in range(12):
        config = LearningConfig(game="bas-sequential", agents=3, rounds=2, backend="ray",
                                shards=1)
        model = ShardedLearningModel(config, seed, in_process=True)
        piece = model.run_.shards[0].slice
        drawn = BlockStreams(model.run_._args[0][2], TYPES, 0, 3, 3).uniform() * 1.3
        assert np.array_equal(np.sort(piece.beta), np.sort(drawn))
        assert piece.beta[0] < piece.beta.max()
        swapped += drawn[0] == drawn.max()
    assert swapped >= 2  # the case under test came up


@pytest.mark.ray
@pytest.mark.parametrize("game, learner, kw", [
    ("pricing", "hedge", {"aggregation": "mle"}), ("pricing", "exp3", {"aggregation": "mean"}),
    ("bas", "hedge", {}), ("bas", "exp3", {}), ("sar", "regret_matching", {}),
    ("sar", "exp3", {"attacker": "strong", "p": 0.3}), ("ppsp", "fictitious", {}),
    ("ppsp", "exp3", {}), ("pricing-bayes", "hedge", {"aggregation": "mle", "pricing": True}),
    ("pricing-bayes", "exp3", {"aggregation": "mean"}),
    ("bas-sequential", "hedge", {"grid_points": 9}),
    ("bas-sequential", "exp3", {"grid_points": 9})])
def test_any_shard_count_gives_the_same_rows(ray_session, game, learner, kw):
    """Every game over shards, in process with one shard, and two (uneven) or three Ray
    actors: equal rows, outcomes, predictions and last iterates, not close ones (full and
    bandit feedback)."""
    runs = []
    rounds = 8 if game == "pricing-bayes" else 25  # its interim measurements cost more
    for shards, in_process in ((1, True), (2, False), (3, False)):
        model = _model(shards, in_process, game=game, learner=learner, rounds=rounds, **kw)
        model.run()
        runs.append((model.results(), model.outcome(), model.predicted(),
                     model.last_iterate()))
        model.close()
    for rows, outcome, predicted, last in runs[1:]:
        pd.testing.assert_frame_equal(rows, runs[0][0], check_exact=True)
        assert outcome == runs[0][1] and predicted == runs[0][2]
        assert np.array_equal(last, runs[0][3])
    assert len(runs[0][0]) == rounds and runs[0][0]["max_average_regret"].notna().all()


@pytest.mark.ray
def test_a_killed_shard_is_restored_and_the_run_is_unchanged(ray_session):
    reference = _model(2, False, checkpoint_every=10)
    reference.run()
    rows, outcome = reference.results(), reference.outcome()
    reference.close()
    model = _model(2, False, checkpoint_every=10)
    model.run(25)
    ray_session.kill(model.run_.shards[1])  # mid-run, after the checkpoint of round 20
    model.run(15)
    assert model.run_.restores == 1
    pd.testing.assert_frame_equal(model.results(), rows, check_exact=True)
    assert model.outcome() == outcome
    model.close()


def test_bad_shard_settings_are_refused_by_name():
    for kw, message in (({"shards": 0}, "shards=0 is out of range"),
                        ({"shards": 4}, "shards must be <= 3"),
                        ({"backend": "vectorized", "shards": 2},
                         "shards=2 is not allowed with backend='vectorized'")):
        with pytest.raises(ConfigError, match=message):
            LearningConfig(**{"game": "pricing", "agents": AGENTS, "backend": "ray", **kw})


@pytest.mark.parametrize("sets, message", [
    (["shards=0"], "shards=0 is out of range: shards must be an integer >= 1"),
    (["shards=3", "agents=2000"], "shards=3 is out of range for agents=2000"),
    (["backend=vectorized", "shards=2"], "shards=2 is not allowed with backend='vectorized'"),
])
def test_the_cli_refuses_bad_shards_in_one_line(sets, message, capsys, tmp_path):
    from privgames.analysis.cli import main

    args = ["run", "learning-dynamics", "--set", "game=pricing", "--set", "backend=ray",
            "--out", str(tmp_path)]
    assert main([*args, *[x for s in sets for x in ("--set", s)]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"privgames: error: {message}")


def test_an_unreachable_address_is_one_line_at_once(tmp_path):
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "privgames.analysis", "run", "learning-dynamics",
                           "--set", "game=pricing", "--set", "backend=ray", "--set", "shards=2",
                           "--set", "agents=3000", "--address", f"127.0.0.1:{port}", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and time.monotonic() - started < 30
    assert done.stderr.strip().splitlines() == [
        f"privgames: error: --address 127.0.0.1:{port}: no Ray cluster answers there "
        "(Connection refused)"]
