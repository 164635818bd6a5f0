"""Finished models are freed: memory stays flat over populations run in one process."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from privgames.analysis import experiments
from privgames.environments.base import Environment


@pytest.mark.parametrize("setting", [
    pytest.param({"n": 200, "K": 200, "replications": 10}, marks=pytest.mark.slow),  # 13 s
    # issue 12's case (peak 392 -> 1136 MiB over 4 populations at n = 800 before): the
    # quick-scale ring, whose window of 800 x 800 x 50 states (244 MiB) is freed with its model
    pytest.param({"n": 800}, marks=pytest.mark.slow),
])
def test_ring_populations_leave_nothing_behind(setting):
    """Twenty populations of the ring in one process: after each, no model is alive and the
    traced memory is back where it was (Mesa 3.3 kept every model through Agent._ids); the
    peak is one population's, not twenty."""
    e = experiments.get("ppsp-ring")
    params = e.resolve({**setting, "populations": 20})
    units = e.units(params, 0)
    gc.collect()
    tracemalloc.start()
    after, peaks = [], []
    for label, seed in units:
        tracemalloc.reset_peak()
        e.run_one(params, label, seed)
        peaks.append(tracemalloc.get_traced_memory()[1])
        gc.collect()
        after.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    # type(), not isinstance(): isinstance asks a weakref.proxy's referent for its class, and
    # numba's compiler leaves proxies to dead objects in the process (a dead one raises)
    assert [o for o in gc.get_objects() if issubclass(type(o), Environment)] == []
    assert max(after) - min(after) < 2**20  # flat: under 1 MiB of drift over 20 populations
    assert max(peaks) < 2 * peaks[0]  # each population peaks where the first did


_PEAK = """
import json, sys
from privgames.environments.learning_dynamics import LearningConfig, LearningModel

def memory(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

config = LearningConfig(**json.loads(sys.argv[1]))
small = LearningModel(LearningConfig(**{**json.loads(sys.argv[1]), "agents": 2100}), 0)
small.step(); small.step(); small.close()  # the kernels are loaded: not the population's
del small
before = memory("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak from here
model = LearningModel(config, 0)
model.step(); model.step()
print(json.dumps({"peak": memory("VmHWM:") - before,
                  "estimate": config.footprint().peak_bytes}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("config", [
    {"game": "pricing", "learner": "hedge", "agents": 200_000, "grid_points": 5},
    {"game": "pricing", "learner": "exp3", "agents": 200_000},
    {"game": "sar", "learner": "exp3", "agents": 200_000},
    {"game": "bas", "learner": "hedge", "agents": 200_000},
    {"game": "ppsp", "learner": "exp3", "agents": 200_000},
    {"game": "pricing-bayes", "learner": "exp3", "agents": 20_000},
    {"game": "bas-sequential", "learner": "hedge", "agents": 10_000},
], ids=lambda c: f"{c['game']}-{c.get('grid_points', 21)}")
def test_the_memory_guard_estimates_the_engines_peak(config):
    """A learning population's estimated memory (``LearningConfig.footprint``, what the
    guard and the pages refuse by) is at least the process's peak over its memory before
    (setup, with its scale rounds, and two rounds, in a fresh process; Linux's high-water
    mark, reset first) and not more than three times it."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PEAK, json.dumps(config)],
                          capture_output=True, text=True, check=True)
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["peak"] <= measured["estimate"] <= 3 * measured["peak"], measured
