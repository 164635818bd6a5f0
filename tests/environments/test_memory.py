"""Finished models are freed: memory stays flat over populations run in one process."""

from __future__ import annotations

import gc
import tracemalloc

from privgames.analysis import experiments
from privgames.environments.base import Environment


def test_ring_populations_leave_nothing_behind():
    """Twenty populations of the ring in one process: after each, no model is alive and the
    traced memory is back where it was (Mesa 3.3 kept every model through Agent._ids)."""
    e = experiments.get("ppsp-ring")
    params = e.resolve({"n": 200, "K": 200, "replications": 10, "populations": 20})
    units = e.units(params, 0)
    gc.collect()
    tracemalloc.start()
    after = []
    for label, seed in units:
        e.run_one(params, label, seed)
        gc.collect()
        after.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    assert [o for o in gc.get_objects() if isinstance(o, Environment)] == []
    assert max(after) - min(after) < 2**20  # flat: under 1 MiB of drift over 20 populations
