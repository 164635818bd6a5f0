"""The sequential BAS game (``game=bas-sequential``): its costs against an independent chain
simulation written out here with eq (14), Theorem 1's subgame-perfect profile by brute force at
every state, and learners who play it."""

import numpy as np
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.mechanisms.bas_sequential import BASSequentialGame

M = 0.5 ** (2.0 / 3.0)


def _simulate(game, values, k, entering, own):
    """User ``k`` receives the running variance ``entering`` and adds ``own``; each later
    follower j adds the action of its row at the state it receives (the variance rounded to
    the grid's step, at most the top). Returns user k's eq (14) cost: the total variance plus
    alpha_k (its prefix)^(-1/2), alpha = beta^(3/2)."""
    grid = game.grid
    step = grid[1] - grid[0]
    u = entering + own
    prefix = u
    for j in range(k + 1, game.K):
        s = min(int(round(u / step)), grid.size - 1)
        u += values[1 + (j - 1) * grid.size + s]
    alpha = game.beta[k] ** 1.5
    with np.errstate(divide="ignore"):
        return u + (alpha / np.sqrt(prefix) if alpha > 0 else 0.0)


def _row_user_state(game, r):
    return (0, 0) if r == 0 else (1 + (r - 1) // game.grid.size, (r - 1) % game.grid.size)


def test_costs_are_the_chain_simulated_from_each_rows_state():
    rng = np.random.default_rng(1)
    game = BASSequentialGame(rng.uniform(0.1, 1.3, 4), d=10, grid_points=6)
    values = rng.choice(game.grid, game.n)
    costs = game.costs(values)
    for r in range(game.n):
        k, s = _row_user_state(game, r)
        for j, a in enumerate(game.grid):
            entering = 0.0 if r == 0 else game.grid[s]
            want = _simulate(game, values, k, entering, a)
            assert costs[r, j] == pytest.approx(want, rel=1e-12) or (np.isinf(want)
                                                                      and np.isinf(costs[r, j]))


def test_theorem1_is_subgame_perfect_by_brute_force():
    """At every state, each follower's reply is its best over the grid given the later
    followers' replies; the leader's level is its best and is Theorem 1's m max beta (the
    grid's top)."""
    rng = np.random.default_rng(2)
    beta = rng.uniform(0.0, 1.3, 5)
    beta = np.concatenate([[0.2], beta])  # the leader is not the most private
    game = BASSequentialGame(beta, d=10, grid_points=9)
    policy = game.references()["theorem1"]
    for r in range(game.n):
        k, s = _row_user_state(game, r)
        entering = 0.0 if r == 0 else game.grid[s]
        costs = [_simulate(game, policy, k, entering, a) for a in game.grid]
        assert _simulate(game, policy, k, entering, policy[r]) <= min(costs) + 1e-12
    assert policy[0] == pytest.approx(M * beta.max())
    rows, sigma2 = game.path(policy)
    np.testing.assert_allclose(sigma2, [M * beta.max()] + [0.0] * (beta.size - 1))


def test_path_and_the_rows_that_play():
    game = BASSequentialGame([0.2, 1.0, 0.5], d=10, grid_points=5)  # grid step M / 4
    values = np.zeros(game.n)
    values[0] = game.grid[1]  # leader: one step
    values[1 + 0 * 5 + 1] = game.grid[2]  # follower 1 at state 1 adds two steps
    values[1 + 1 * 5 + 3] = game.grid[4]  # follower 2 at state 3 adds the top
    game.played(values)
    assert np.flatnonzero(game.active).tolist() == [0, 1 + 1, 1 + 5 + 3]
    np.testing.assert_allclose(game.path(values)[1], [game.grid[1], game.grid[2], game.grid[4]])
    # the leader three steps below the top (m max beta = M), the total (1 + 2 + 4) / 4 of it
    assert game.path_summary(values) == pytest.approx(
        {"leader_steps_below": 3.0, "total_over_theorem1": 7 / 4})


def test_realized_costs_replace_the_total_by_one_releases_squared_error():
    game = BASSequentialGame([0.3, 0.9, 0.6], d=7, grid_points=5)
    values = np.full(game.n, game.grid[2])
    own = game.own_costs(values)
    chi = np.random.default_rng(4).chisquare(7) / 7
    got = game.realized(values, np.random.default_rng(4))
    for r in range(game.n):
        k, s = _row_user_state(game, r)
        entering = 0.0 if r == 0 else game.grid[s]
        total = _simulate(game, values, k, entering, values[r]) - (
            game.beta[k] ** 1.5 / np.sqrt(entering + values[r]))
        assert got[r] == pytest.approx(own[r] - total + total * chi, rel=1e-12)


@pytest.mark.parametrize("learner", ["best_response", "regret_matching", "hedge", "exp3"])
def test_learners_play_the_sequential_game_and_the_report_is_consistent(learner):
    """A run's on-path gains (recomputed by simulation) are within the tolerance when it is
    called converged; the leader's distance to Theorem 1 is part of the distance."""
    model = LearningModel(LearningConfig(game="bas-sequential", learner=learner, agents=4,
                                         rounds=300, grid_points=9), 3).run()
    c = model.config
    g, v = BASSequentialGame(model.types()["beta"], c.d, c.grid_points), model.last_iterate()
    rows, _ = g.path(v)
    assert np.array_equal(rows, model.path_rows())
    gains = []
    for r in rows:
        k, s = _row_user_state(g, r)
        entering = 0.0 if r == 0 else g.grid[s]
        own = _simulate(g, v, k, entering, v[r])
        best = min(_simulate(g, v, k, entering, a) for a in g.grid)
        gains.append((own - best) / abs(own))
    assert model.nash_gap_relative() == pytest.approx(max(gains), abs=1e-12)
    if model.outcome()["converged"]:
        assert max(gains) <= model.config.tolerance
    top = g.grid[-1]
    assert model.distance() >= abs(v[0] - top) / top - 1e-12


@pytest.mark.parametrize("sets,needle", [
    ({"learner": "spsa"}, "learner='spsa' is not allowed with game='bas-sequential'"),
    ({"grid": [0.0, 1.0]}, "grid is not allowed with game='bas-sequential'"),
])
def test_bad_input(sets, needle):
    with pytest.raises(ConfigError, match=needle):
        LearningConfig(game="bas-sequential", **sets)
