"""Learners and chain users: what an agent does with its own type and observation."""

from __future__ import annotations

import pytest

from privgames.agents.learners import DampedBestResponse, ExactBestResponse, make_learner
from privgames.environments.bas_chain import BASChainConfig, BASChainModel
from privgames.mechanisms.chain import M


def test_damped_learner_contracts_geometrically():
    learner, s = DampedBestResponse(0.25), 0.0
    for _ in range(10):
        s = learner.update(s, 1.0)
    assert s == pytest.approx(1 - 0.75**10)
    assert ExactBestResponse().update(3.0, 1.0) == 1.0


def test_make_learner_rejects_bad_values():
    with pytest.raises(ValueError, match="learner"):
        make_learner("gradient")
    with pytest.raises(ValueError, match=r"damping=1.5 .*\(0, 1\]"):
        make_learner("damped", 1.5)


def test_first_user_learns_the_followers_level_from_outcomes():
    """With no prior, the leader first plays alone, then reads the followers' top-up level."""
    beta = (0.2, 1.0, 0.5)
    model = BASChainModel(BASChainConfig(K=3, beta=beta, prior="none", rounds=1), seed=0)
    first = model.users[model.sequences[0][0]]
    model.step()
    assert first.sigma2 == pytest.approx(M * first.beta)   # its LDP choice: it knows nothing
    model.run(3)
    assert first.belief == pytest.approx(M * max(beta))
    assert first.sigma2 == pytest.approx(M * max(beta))


def test_follower_best_responds_to_what_it_observes():
    model = BASChainModel(BASChainConfig(K=2, beta=(0.5, 0.5), rounds=1), seed=0)
    follower = model.users[model.sequences[0][1]]
    follower.follow(0.1)
    assert follower.sigma2 == pytest.approx(M * 0.5 - 0.1)
    follower.follow(5.0)
    assert follower.sigma2 == 0.0
