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
