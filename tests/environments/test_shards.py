"""One population over shards: the block layout, streams and sums that make the numbers the same
at any shard count; the games' costs from aggregates against written-out forms and the theory's
grid games; one engine (in process and on Ray, any shard count: equal numbers); a killed
shard."""

from __future__ import annotations

import copy
import os

import numpy as np
import pandas as pd
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.shards import BLOCK, BlockStreams, Partials, block_sums, combine, layout
from privgames.environments.streams import as_seed_sequence
from privgames.mechanisms import ppsp, pricing
from privgames.mechanisms.learning_games import BASGame, SARGame, snap_to

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


def _model(shards: int, in_process: bool, **kw) -> LearningModel:
    config = LearningConfig(**{"game": "pricing", "agents": AGENTS, "rounds": 40,
                               "backend": "vectorized" if in_process else "ray",
                               "shards": shards, **kw})
    return LearningModel(config, 5)


@pytest.mark.parametrize("aggregation", ["mle", "mean"])
def test_the_shards_play_the_pricing_game(aggregation):
    """Over three shards, from aggregates alone: a client's cost of every grid action is eq (5)
    on the explicitly deviated profile (``pricing.client_costs``, written out), the social
    cost of the reference is eq (6)'s, and the reference is eq (10) snapped to the grid."""
    model = _model(3, True, aggregation=aggregation, rounds=3).run()
    alpha = model.types()["alpha"]
    played = np.array([model.view(i).action for i in range(AGENTS)])
    i = BLOCK + 7
    client = model.agents[i]
    assert client.private == {"alpha": alpha[i]}
    want = []
    for a in model.grid:
        deviated = played.copy()
        deviated[i] = a
        with np.errstate(divide="ignore", invalid="ignore"):
            want.append(pricing.client_costs(deviated, alpha, 1.0, 1.0, 1.0, 1.0,
                                             aggregation)[i])
    np.testing.assert_allclose(client.costs, want, rtol=1e-9)
    reference = model.reference()
    eq10 = pricing.equilibrium_noise(alpha, 1.0, 1.0, 1.0, 1.0, aggregation)
    assert np.array_equal(reference, snap_to(model.grid, eq10, True))
    assert model.predicted()["social_costs"]["eq10"] == pytest.approx(
        pricing.social_cost(reference, alpha, 1, 1, 1, 1, aggregation), rel=1e-9)



@pytest.mark.parametrize("aggregation,prices", [("mle", False), ("mle", True), ("mean", True)])
def test_pricing_costs_from_the_table_are_eq5_per_cell_to_the_bit(aggregation, prices,
                                                                   monkeypatch):
    """A round's costs come from a table over (current level, candidate)
    (``pricing_kernels.grid_costs``): equal, bit for bit, to eq (5) and the expected penalty
    evaluated cell by cell from each client's own rest of the aggregate (``pricing.own_cost``,
    the best responses' formula), for every candidate, the own level and a part of the grid;
    with prices under MLE opting out is infinitely penalised, in both."""
    model = _model(1, True, aggregation=aggregation, pricing=prices, rounds=3).run()
    game = model.run_.shards[0].slice
    v, totals = game.values, game._totals
    sub = np.broadcast_to(game.grid[2:7], (v.size, 5))
    table = [game._costs(v, totals), game._costs(v, totals, v[:, None]),
             game._costs(v, totals, sub)]
    monkeypatch.setattr(game, "_levels", lambda values: None)
    per_cell = [game._costs(v, totals), game._costs(v, totals, v[:, None]),
                game._costs(v, totals, sub)]
    for a, b in zip(table, per_cell, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    assert np.isinf(table[0]).any() == (prices and aggregation == "mle")
    # each client's best, taken a block of the table at a time (never whole), is its row's min
    assert np.array_equal(game._costs(v, totals, lowest=True), table[0].min(axis=1))
    # the analyst's own costs and best replies, from each row in one pass (the row not kept)
    monkeypatch.undo()
    own, least = game._deviation(v, totals)
    assert np.array_equal(own, per_cell[1][:, 0]) and np.array_equal(least, table[0].min(axis=1))
    # and numpy's min with a NaN or an infinite cost in a row, or a row of them
    from privgames.environments.learning_slices import GAME
    from privgames.mechanisms.pricing_kernels import grid_costs, grid_own_least

    action, (d, e) = game._levels(v), game._accuracy(totals)
    others, d = game._others(v, totals), d.copy()
    others[::7], others[::11], d[::3, 6], d[1::3, 5] = np.nan, np.inf, np.nan, np.inf
    kappa, _, c, S = GAME
    args = (game.grid, d, e, game.alpha, game.beta, others, kappa, c, S, game.n)
    whole = grid_costs(action, np.arange(game.grid.size)[None, :], *args,
                       np.empty((v.size, game.grid.size)))
    grid_own_least(action, *args, own, least)
    assert np.array_equal(own, whole[np.arange(v.size), action], equal_nan=True)
    assert np.array_equal(least, whole.min(axis=1), equal_nan=True)

def test_a_pricing_clients_realized_cost_is_eq5_with_the_release_written_out():
    """A client's realized cost (bandit feedback) in one compiled pass equals, bit for bit,
    its numpy form: ``(1 - alpha) loss + max(alpha c S / sigma, 0) + beta (noise - mean)^2``,
    an opting-out client's penalty in place of the last (here infinite), at any noise level
    on or off the grid, 0 and NaN included."""
    from privgames.mechanisms.pricing_kernels import realized_costs

    rng = np.random.default_rng(4)
    n = 5000
    v = np.exp(rng.uniform(-3, 3, n))
    v[::9], v[::13], v[::17] = np.inf, 0.0, np.nan
    alpha, beta = rng.uniform(0.01, 0.99, n), rng.uniform(0, 2, n) * (rng.random(n) < 0.7)
    noise, loss, mean = rng.normal(size=n) * 3, 0.37, -0.2
    numerator, outside, weight = alpha * 1.0 * 1.0, np.where(beta > 0, np.inf, 0.0), 1 - alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        want = (weight * loss + np.fmax(numerator / v, 0.0)
                + np.where(np.isfinite(v), beta * (noise - mean) ** 2, outside))
    got = realized_costs(v, noise, numerator, outside, weight, beta, loss, mean, np.empty(n))
    assert np.array_equal(got, want, equal_nan=True)


def test_the_shards_play_the_ppsp_game():
    """A node's cost of every grid action is Theorem 4's weighted cost with the others'
    largest and smallest ``c`` of the deviated profile (``ppsp.tradeoff_cost``); the
    reference is Theorem 4's ``c`` for the summed weights, snapped."""
    from privgames.environments.ppsp_ring import NoiseGameConfig

    model = _model(3, True, game="ppsp", rounds=3).run()
    w = model.types()["weights"]
    ring = NoiseGameConfig(n=AGENTS)
    args = (AGENTS, ring.K, ring.delta, ring.d)
    played = np.array([model.view(i).action for i in range(AGENTS)])
    i = 2 * BLOCK + 3
    want = []
    for a in model.grid:
        deviated = played.copy()
        deviated[i] = a
        want.append(ppsp.tradeoff_cost(deviated.max(), deviated.min(), *w[i], *args))
    np.testing.assert_allclose(model.agents[i].costs, want, rtol=1e-12)
    common = ppsp.optimal_c(*w.sum(axis=0), *args)
    assert np.array_equal(model.reference(), snap_to(model.grid, np.full(AGENTS, common), True))


def _game_of(model: LearningModel):
    """The theory's grid game with the shards' own agents (their private types)."""
    c = model.config
    if c.game == "bas":
        return BASGame(model.types()["beta"], c.d, c.grid_points)
    return SARGame(c.agents, c.p, c.attacker)


@pytest.mark.parametrize("game, kw", [("bas", {}), ("sar", {"p": 0.4}),
                                      ("sar", {"attacker": "strong", "p": 0.3})])
def test_the_shards_play_the_bas_and_sar_games(game, kw):
    """From the aggregates alone (the chain's prefix as a scan across shards, SAR's count),
    the shards compute the grid, the references, every agent's cost of every action, the
    deviation gains and social costs, the optimum and the realized costs of the theory's grid
    game with the same agents."""
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
    view = model.view(BLOCK + 7)
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


def test_a_bayes_clients_rows_are_read_from_the_shard_that_owns_them():
    """Under incomplete information a client has a row per type (``t N + i``): its view says
    which, with that type's sensitivity; the analyst's profile counts and the optimum are the
    same over three shards as over one."""
    model = _model(3, True, game="pricing-bayes", rounds=4, aggregation="mle", pricing=True)
    model.run()
    view = model.view(AGENTS + BLOCK + 7)  # client BLOCK + 7's row of type H
    assert view.private == {"type": 1.0, "alpha": model.config.alpha_H}
    assert view.iterate == model.last_iterate()[AGENTS + BLOCK + 7]
    with pytest.raises(ConfigError, match=f"agent={2 * AGENTS} is out of range"):
        model.view(2 * AGENTS)


ENGINE_GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")
ENGINE_LEARNERS = ("hedge", "exp3", "regret_matching", "best_response")


def _engine_run(shards: int, in_process: bool, game: str, learner: str) -> tuple:
    """One population's rows, summary numbers (outcome, predictions) and last iterate."""
    model = _model(shards, in_process, game=game, learner=learner, rounds=4,
                   agents=2 * BLOCK + 1,  # three blocks, the last of one agent
                   **({"grid_points": 7} if game == "bas-sequential" else {}))
    model.run()
    out = (model.results(), model.outcome(), model.predicted(), model.last_iterate())
    model.close()
    return out


def _assert_equal_runs(runs: list[tuple]) -> None:
    for rows, outcome, predicted, last in runs[1:]:
        pd.testing.assert_frame_equal(rows, runs[0][0], check_exact=True)
        assert outcome == runs[0][1] and predicted == runs[0][2]
        assert np.array_equal(last, runs[0][3])


@pytest.mark.parametrize("game", ENGINE_GAMES)
def test_in_process_any_shard_count_gives_equal_numbers(game):
    """One engine: in process, one, two or three shards give equal rows, summary numbers
    and last iterates (``==``, not close)."""
    _assert_equal_runs([_engine_run(k, True, game, "hedge") for k in (1, 2, 3)])


@pytest.mark.ray
@pytest.mark.parametrize("game", ENGINE_GAMES)
@pytest.mark.parametrize("learner", ENGINE_LEARNERS)
def test_in_process_equals_ray_at_any_shard_count(ray_session, game, learner):
    """One engine: ``backend=vectorized`` (one shard in this process) equals ``backend=ray``
    with 1, 2 and 3 shard actors: rows, summary numbers and last iterates, with ``==``."""
    runs = [_engine_run(1, True, game, learner)]  # the actors are leased between populations
    runs += [_engine_run(k, False, game, learner) for k in (1, 2, 3)]
    _assert_equal_runs(runs)
    assert runs[0][0]["max_average_regret"].notna().all()


@pytest.mark.ray
def test_a_finished_populations_actors_serve_the_next(ray_session):
    """A closed population's actors wait idle and build the next population's slices (no new
    worker process a shard); the next population's numbers are a fresh one's, whatever game
    the actors played before."""
    first = _model(2, False, game="bas", rounds=3)
    used = {a._actor_id for a in first.run_.shards}
    first.run()
    first.close()
    second = _model(2, False, game="pricing-bayes", rounds=4)
    assert {a._actor_id for a in second.run_.shards} == used
    second.run()
    leased = (second.results(), second.outcome(), second.predicted(), second.last_iterate())
    second.close()
    fresh = _model(2, True, game="pricing-bayes", rounds=4).run()
    _assert_equal_runs([(fresh.results(), fresh.outcome(), fresh.predicted(),
                         fresh.last_iterate()), leased])


def test_the_shards_play_the_sequential_bas_game():
    """From the shards' level maps alone (``m`` integers a shard), each shard computes the
    rows' costs at every state (the later followers' replies through the other shards), the
    round's path, Theorem 1's subgame-perfect profile by backward induction across shards, the
    deviation gains on the path and at every state, the social costs, the optimum and the
    realized costs of the in-process :class:`BASSequentialGame` with the same users."""
    from privgames.mechanisms.bas_sequential import BASSequentialGame

    model = _model(3, True, game="bas-sequential", grid_points=9, rounds=10)
    c, slices = model.config, [s.slice for s in model.run_.shards]
    g = BASSequentialGame(model.types()["beta"], c.d, c.grid_points)
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
    view = model.view(1 + (BLOCK + 6) * m + 3)  # user BLOCK + 7 at state 3
    assert view.private == {"beta": g.beta[BLOCK + 7]}
    assert view.iterate == last[1 + (BLOCK + 6) * m + 3]


def test_a_first_user_with_the_top_preference_changes_places():
    """Stage 2 (the top bidder is not first): over seeds where user 0 draws the largest
    preference, it changes places with another user; the preferences are the ones drawn."""
    from privgames.environments.learning_slices import TYPES

    swapped = 0
    for seed in range(12):
        config = LearningConfig(game="bas-sequential", agents=3, rounds=2)
        model = LearningModel(config, seed)
        piece = model.run_.shards[0].slice
        drawn = BlockStreams(model.run_._args[0][2], TYPES, 0, 3, 3).uniform() * 1.3
        assert np.array_equal(np.sort(piece.beta), np.sort(drawn))
        assert piece.beta[0] < piece.beta.max()
        swapped += drawn[0] == drawn.max()
    assert swapped >= 2  # the case under test came up


@pytest.mark.ray
def test_the_same_command_line_gives_the_same_summary_in_process_and_on_ray(ray_session,
                                                                           tmp_path, capsys):
    """Issue 41's command: one shard in process, three in process and three Ray actors give
    the same summary (but for where the shards ran)."""
    import json

    from privgames.analysis.cli import main

    base = ["run", "learning-dynamics", "--set", "game=bas", "--set", "learner=hedge",
            "--set", "agents=3001", "--set", "rounds=40", "--seed", "7", "--json"]
    summaries = []
    for k, extra in enumerate((["--workers", "0"], ["--set", "shards=3", "--workers", "0"],
                               ["--set", "backend=ray", "--set", "shards=3", "--workers",
                                "1"])):
        assert main([*base, *extra, "--out", str(tmp_path / str(k))]) == 0
        out = capsys.readouterr().out  # in this process, the session's Ray may print first
        summary = json.loads(out[0 if out.startswith("{") else out.index("\n{") + 1:])
        placement = summary.pop("placement")
        assert sum(placement.values()) == 2 * (1 if k == 0 else 3)  # two populations
        for run in (*summary["runs"], *summary["table"]):
            assert run.pop("placement") == placement
        summary["parameters"] = {key: v for key, v in summary["parameters"].items()
                                 if key not in ("backend", "shards")}
        summaries.append(summary)
    assert summaries[0] == summaries[1] == summaries[2]


@pytest.mark.ray
def test_auto_shards_are_clamped_to_the_blocks(ray_session):
    """``shards=auto`` at 10 agents is one shard (one block), not one per CPU that would fail
    at run time; in process it is one."""
    for backend in ("ray", "vectorized"):
        model = LearningModel(LearningConfig(agents=10, rounds=2, backend=backend,
                                             shards="auto"), 0).run()
        assert len(model.run_.shards) == 1 and len(model.results()) == 2
        model.close()


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
                        ({"backend": "vectorized", "shards": 4}, "shards must be <= 3")):
        with pytest.raises(ConfigError, match=message):
            LearningConfig(**{"game": "pricing", "agents": AGENTS, "backend": "ray", **kw})


@pytest.mark.parametrize("sets, message", [
    (["shards=0"], "shards=0 is out of range: shards must be an integer >= 1"),
    (["shards=3", "agents=2000"], "shards=3 is out of range for agents=2000"),
    (["backend=vectorized", "shards=4", "agents=3000"], "shards=4 is out of range for "
                                                          "agents=3000"),
])
def test_the_cli_refuses_bad_shards_in_one_line(sets, message, capsys, tmp_path):
    from privgames.analysis.cli import main

    given = {"game": "pricing", "backend": "ray", **dict(s.split("=", 1) for s in sets)}
    args = ["run", "learning-dynamics", "--out", str(tmp_path)]
    assert main([*args, *[x for k, v in given.items() for x in ("--set", f"{k}={v}")]]) == 2
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


@pytest.mark.parametrize("cluster_file", [None, "stale"])
def test_address_auto_without_a_live_cluster_is_one_line_at_once(tmp_path, cluster_file):
    """``--address auto`` (and ``RAY_ADDRESS=auto``) with no cluster on this machine, or with
    a ``ray_current_cluster`` left by one that has stopped: one line, status 2, in seconds
    (Ray itself raises a traceback, or retries for minutes)."""
    import socket
    import subprocess
    import sys
    import time

    ray_tmp = tmp_path / "ray"  # Ray's own folder for this test (RAY_TMPDIR/ray), not /tmp/ray
    ray_tmp.mkdir()
    if cluster_file:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        (ray_tmp / "ray_current_cluster").write_text(f"127.0.0.1:{port}")
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path), "RAY_ADDRESS": "auto"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "privgames.analysis", "run", "bas-chain",
                           "--workers", "2", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, env=env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and time.monotonic() - started < 30, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("privgames: error: --address auto: ")
    assert ("does not answer" if cluster_file else "no Ray cluster was started") in lines[0]


def test_a_blocks_hash_is_fnv1a_of_its_words_then_splitmix64s_finish():
    """The driver tells a profile it saw before by per-block hashes: written out in Python
    integers (FNV-1a over the block's 64-bit words, row after row, then splitmix64's finish,
    the top 32 bits); one agent's change changes its own block's hash only."""
    from privgames.environments.learning_slices import block_hashes

    def written_out(words: list[int]) -> float:
        h, mask = 14695981039346656037, 2**64 - 1
        for w in words:
            h = ((h ^ w) * 1099511628211) & mask
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & mask
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & mask
        return float((h ^ (h >> 31)) >> 32)

    rng = np.random.default_rng(3)
    values = rng.choice([0.5, 1.0, np.inf], (2, 2 * BLOCK + 9))
    got = block_hashes(values)
    words = values.view(np.uint64)
    want = [written_out([int(x) for x in words[:, k:k + BLOCK].ravel()])
            for k in range(0, values.shape[1], BLOCK)]
    assert got.tolist() == want
    changed = values.copy()
    changed[1, BLOCK + 5] = 2.0
    assert (block_hashes(changed) != got).tolist() == [False, True, False]
