"""Every consumer of randomness has its own stream: no unit of any experiment opens the same
stream twice (except declared common random numbers), and nothing bypasses the stream helper."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from privgames.analysis import experiments
from privgames.environments import streams

#: Shrink the slowest quick-scale units; every other parameter keeps its quick default.
SMALL = {"ppsp-example2": {"K": 300, "leave_at": 100, "join_at": 200, "replications": 2},
         "ppsp-ring": {"K": 60, "replications": 4}, "bas-properties": {"K": 4, "rounds": 3},
         "bas-split": {"K": 10, "subsequences": [2]}, "sar-participation": {"rounds": 3},
         "pricing-fig2": {"eta": [0.5]}, "pricing-poa": {"N": [10]},
         "dp-kmeans": {"repetitions": 4, "method": ["flip-geo/noisy-n"], "iterations": [3]},
         "budget-analysts": {"rounds": 5, "analysts": 3, "offline_repetitions": 3},
         "apes": {"rounds": 2, "n": 50}, "apes-clip": {"rounds": 2, "n": 50},
         "apes-sparsify": {"rounds": 2, "n": 50}, "apes-audit": {"trials": 200}}

DETERMINISTIC = {"ppsp-tradeoff", "budget-us-bounds"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", [e.name for e in experiments.all_experiments()])
def test_no_unit_reuses_a_stream(name):
    e = experiments.get(name)
    params = e.resolve(SMALL.get(name, {}))
    label, seed = e.units(params, 7)[-1]
    with streams.stream_log() as log:
        e.run_one(params, label, seed)
    if name in DETERMINISTIC:
        assert log == []
        return
    assert log, f"{name} opened no stream through privgames.environments.streams"
    assert streams.reused_streams(log) == [], f"{name} reuses a stream"


def test_reuse_is_detected():
    with streams.stream_log() as log:
        streams.generator(streams.child(1, 0))
        streams.generator(streams.child(1, 0))
        with streams.replaying():
            streams.generator(streams.child(1, 1))
            streams.generator(streams.child(1, 1))
    assert streams.reused_streams(log) == [(streams.child(1, 0).entropy, (0,))]


def test_children_are_addressed_like_spawn():
    """child(s, i) is the i-th child SeedSequence.spawn would give: the same numbers."""
    spawned = np.random.SeedSequence(5).spawn(3)[2]
    assert streams.generator(streams.child(5, 2)).random() == np.random.default_rng(
        spawned).random()


def test_every_generator_goes_through_the_stream_helper():
    """A direct numpy.random.default_rng in the package would escape the reuse check."""
    offenders = [str(p.relative_to(ROOT)) for folder in ("agents", "environments",
                                                          "mechanisms", "analysis")
                 for p in (ROOT / folder).rglob("*.py")
                 if p.name != "streams.py" and re.search(r"default_rng\(|\.spawn\(",
                                                         p.read_text())]
    assert offenders == []


def test_learning_nodes_start_independently_of_their_weights():
    """The bug this guards against: the nodes' starting offsets came from the stream that drew
    their weights, so every offset equalled a weight multiplier. Recover both log-uniform draws
    from a unit's rows and require that no offset equals any multiplier."""
    from privgames.mechanisms.ppsp import optimal_c

    e = experiments.get("ppsp-learning")
    params = e.resolve({"weighting": ["unequal"]})
    label, seed = e.units(params, 0)[0]
    rows = e.run_one(params, label, seed)
    config = e.config(params, {"weighting": "unequal"})
    weights = config.weights(streams.generator(streams.spawn(seed, 2)[0]))
    multipliers = np.log(weights / [config.gamma_u, config.gamma_a, config.gamma_p]).ravel()
    start = rows[(rows["metric"] == "c") & (rows["round"] == 0)].sort_values("node")
    preferred = np.array([optimal_c(*w, config.n, config.K, config.delta, config.d)
                          for w in weights])
    offsets = np.log(start["value"].to_numpy() / preferred)
    scale = np.log(config.spread)
    assert np.all(np.abs(offsets) <= scale * (1 + 1e-12))  # the recovery is right
    assert not np.any(np.isclose(np.subtract.outer(offsets, multipliers), 0.0, atol=1e-12))
