"""The BAS chain model: learning reaches Theorem 1, Monte Carlo matches eq 9, properties hold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privgames.environments.bas_chain import BASChainConfig, BASChainModel
from privgames.environments.config import ConfigError
from privgames.mechanisms import chain


@pytest.mark.parametrize("K", [2, 3, 17, 100, 1000])
@pytest.mark.parametrize("learner,prior,rounds", [("best_response", "none", 5),
                                                  ("best_response", "bids", 2),
                                                  ("damped", "none", 120),
                                                  ("damped", "bids", 60)])
def test_learned_variances_reach_theorem1(K, learner, prior, rounds):
    beta = tuple(np.random.default_rng(K).uniform(0.0, 2.0, K))
    cfg = BASChainConfig(K=K, d=3, beta=beta, learner=learner, prior=prior, rounds=rounds)
    model = BASChainModel(cfg, seed=K).run()
    nash = chain.nash_equilibrium(np.asarray(beta)[model.order])
    np.testing.assert_allclose(model.learned(), nash, rtol=0, atol=1e-6 * nash.max())
    assert model.rounds_to_converge() is not None


def test_agents_are_not_told_the_answer():
    """Without bids the leader starts at its own LDP choice, far from the NE."""
    cfg = BASChainConfig(K=20, beta=tuple(np.linspace(0.1, 2.0, 20)), prior="none", rounds=1)
    model = BASChainModel(cfg, seed=0).run()
    assert model.results()["distance"].iloc[0] > 0.05
    assert model.run(3).distance() == 0.0


def test_estimated_observation_end_point_is_reported():
    cfg = BASChainConfig(K=10, d=200, observation="estimated", learner="damped", rounds=40)
    model = BASChainModel(cfg, seed=2).run()
    nash = model.predicted()["nash"]
    learned = model.learned()
    assert np.all(learned >= 0)
    # biased estimates make some followers top up: the end point carries at least the NE noise
    assert learned.sum() >= nash.sum() * (1 - 1e-9)
    assert math.isfinite(model.distance())


def test_simulated_mse_matches_closed_form_for_every_profile():
    """Each profile's Monte-Carlo MSE is within 3 standard errors of eq (9)."""
    cfg = BASChainConfig(K=8, d=20, beta=tuple(np.linspace(0.2, 1.3, 8)), replications=20_000,
                         rounds=3)
    model = BASChainModel(cfg, seed=5).run()
    errors = model.monte_carlo()
    for name, sigma2 in model.profiles().items():
        e = errors[name]
        se = e.std(ddof=1) / math.sqrt(e.size)
        assert abs(e.mean() - chain.chain_mse(sigma2.sum(), 8, 20)) < 3 * se, name


@pytest.mark.parametrize("K", [3, 5, 10, 30, 100])
def test_chained_mse_below_ldp(K):
    """Corollary 3, measured: the learned chain's simulated MSE is below LDP's."""
    model = BASChainModel(BASChainConfig(K=K, d=10, replications=2000, rounds=3), seed=K).run()
    errors = model.monte_carlo()
    assert errors["chained"].mean() < errors["ldp"].mean()


def test_subsequences_sorted_beats_random():
    """Corollary 4, measured on learned profiles: sorted split needs less total noise."""
    beta = tuple(np.random.default_rng(4).uniform(0, 1.3, 40))
    totals = {}
    for split in ("random", "sorted"):
        cfg = BASChainConfig(K=40, beta=beta, subsequences=5, split=split, rounds=3)
        totals[split] = BASChainModel(cfg, seed=1).run().learned().sum()
    assert totals["sorted"] < totals["random"]


@pytest.mark.parametrize("factor", [0.0, 0.5, 0.9, 1.1, 2.0, 10.0])
def test_truthfulness_grid(factor):
    """No user lowers its own learned-equilibrium cost by misreporting its bid (Theorem 2)."""
    beta = np.array([0.3, 1.1, 0.7, 0.9, 0.2])
    truthful = BASChainModel(BASChainConfig(K=5, beta=tuple(beta), rounds=6, prior="bids"),
                             seed=3).run()
    honest_cost = dict(zip(truthful.order, truthful.costs(truthful.learned()), strict=True))
    for k in range(5):
        bids = beta.copy()
        bids[k] = factor * beta[k]
        lie = BASChainModel(BASChainConfig(K=5, beta=tuple(beta), bids=tuple(bids), rounds=6,
                                           prior="bids"), seed=3).run()
        lie_cost = dict(zip(lie.order, lie.costs(lie.learned()), strict=True))
        assert lie_cost[k] >= honest_cost[k] - 1e-12


def test_same_seed_same_everything():
    cfg = BASChainConfig(K=12, observation="estimated", rounds=5, replications=100)
    a, b = (BASChainModel(cfg, seed=7).run() for _ in range(2))
    np.testing.assert_array_equal(a.learned(), b.learned())
    mc_a, mc_b = a.monte_carlo(), b.monte_carlo()
    for name in mc_a:
        np.testing.assert_array_equal(mc_a[name], mc_b[name])


def test_model_is_a_mesa_model():
    model = BASChainModel(BASChainConfig(K=6, rounds=4), seed=0).run()
    assert len(model.agents) == 6
    strategies = model.datacollector.get_agent_vars_dataframe()
    assert len(strategies) == 6 * 4
    assert list(model.results()["round"]) == [1, 2, 3, 4]


@pytest.mark.parametrize("field,value,message", [
    ("K", 1, r"K=1 is out of range: K must be an integer >= 2"),
    ("d", 0, r"d=0 is out of range"),
    ("delta", 1.0, r"delta=1.0 is out of range: delta must be in \(0.0, 1.0\)"),
    ("delta", 0, r"delta=0 is out of range"),
    ("Delta", -1.0, r"Delta=-1.0 is out of range: Delta must be > 0.0"),
    ("beta", (0.5, -0.1), r"beta\[1\]=-0.1 is out of range: beta\[1\] must be >= 0.0"),
    ("K", "ten", r"K='ten' is not an integer"),
    ("beta_max", "big", r"beta_max='big' is not a finite number"),
    ("learner", "sgd", r"learner='sgd' is not allowed"),
])
def test_bad_input_names_parameter_and_range(field, value, message):
    kwargs = {"K": 2, field: value}
    with pytest.raises(ConfigError, match=message):
        BASChainConfig(**kwargs)


def test_supplied_data_is_validated():
    cfg = BASChainConfig(K=2, d=3, Delta=1.0)
    with pytest.raises(ConfigError, match=r"shape"):
        BASChainModel(cfg, seed=0, data=np.zeros((3, 3)))
    with pytest.raises(ConfigError, match=r"outside \[-Delta, Delta\]"):
        BASChainModel(cfg, seed=0, data=np.full((2, 3), 2.0))
    x = np.full((2, 3), 0.5)
    assert np.array_equal(BASChainModel(cfg, seed=0, data=x).data, x)


# --- learners from experience in the chain (issue 21) ------------------------------------------
@pytest.mark.parametrize("learner", ["fictitious", "regret_matching"])
@pytest.mark.parametrize("subsequences", [1, 2])
def test_full_information_learners_reach_a_grid_nash_equilibrium_of_the_chain(learner,
                                                                            subsequences):
    """Checked by brute force with eq (14)'s own costs (``chain.user_costs``): after learning,
    no user of any sub-sequence lowers its cost by moving to another grid variance while the
    others keep theirs."""
    cfg = BASChainConfig(K=8, learner=learner, rounds=400, subsequences=subsequences,
                         grid_points=11)
    model = BASChainModel(cfg, seed=4).run()
    grid = model.experience.grid
    last = model.experience.current()
    ends = np.cumsum([s.size for s in model.sequences])
    for seq, end in zip(model.sequences, ends, strict=True):
        part = last[end - seq.size: end].copy()
        beta = model.beta[seq]
        for k in range(seq.size):
            own = chain.user_costs(part, beta)[k]
            for g in grid:
                trial = part.copy()
                trial[k] = g
                assert chain.user_costs(trial, beta)[k] >= own - 1e-12, (k, g)
    assert model.grid_distance() == 0.0


def test_grid_learners_in_the_chain_are_reproducible_and_play_the_grid():
    cfg = BASChainConfig(K=6, learner="exp3", rounds=50)
    a, b = (BASChainModel(cfg, seed=9).run() for _ in range(2))
    assert np.array_equal(a.learned(), b.learned())
    assert np.isin(a.learned(), a.experience.grid).all()
    assert a.experience.feedback == "bandit" and cfg.resolved_feedback == "bandit"


def test_the_continuous_learners_do_not_touch_the_grid_streams():
    """A run with the continuous best response is the same whatever the grid settings."""
    base = BASChainModel(BASChainConfig(K=6, rounds=5), seed=2).run()
    other = BASChainModel(BASChainConfig(K=6, rounds=5, grid_points=5), seed=2).run()
    assert np.array_equal(base.learned(), other.learned()) and base.experience is None


@pytest.mark.parametrize("changes, parameter", [
    ({"learner": "hedge", "feedback": "bandit"}, "feedback"),
    ({"learner": "best_response", "feedback": "full"}, "feedback"),
    ({"learner": "hedge", "observation": "estimated"}, "observation"),
    ({"learner": "hedge", "grid_points": 1}, "grid_points"),
    ({"learner": "nope"}, "learner"),
])
def test_bad_learner_settings_name_the_parameter(changes, parameter):
    with pytest.raises(ConfigError, match=f"^{parameter}="):
        BASChainConfig(**changes)
