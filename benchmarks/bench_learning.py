"""Learning from experience: one round of ``learning-dynamics`` (every agent acts, gets its
feedback, updates; the analyst records regret, CCE gap and distance) with 10,000 agents on a
21-point grid, per game, on the one engine (one shard in this process), against the floor of
a round's work (issue 41): one ``exp`` pass plus ten ``multiply`` passes over the ``agents x
grid`` array, timed in the same process (numpy's ``exp`` is vectorized only with AVX-512, so
the floor, not ``exp`` alone, means the same on any CPU). ``pricing-bayes`` has twice the rows
(a client per type) and twice the actions (a report per level), and its analyst takes interim
expectations over 128 type profiles whenever the last iterate moves; ``bas-sequential`` has a
row per user and observed state.

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process; the ratio is what to compare across machines.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
from _common import arguments, timed

from privgames.environments.learning_dynamics import LearningConfig, LearningModel

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")


def floor_pass(cells: np.ndarray, out: np.ndarray) -> None:
    """One ``exp`` and ten ``multiply`` passes over ``cells``, into a preallocated array."""
    np.exp(cells, out=out)
    for _ in range(10):
        np.multiply(out, cells, out=out)


def main() -> None:
    args = arguments(__doc__)
    n, reps = (1000, 3) if args.quick else (10_000, 7)
    report: dict[str, object] = {"agents": n}
    for learner in ("hedge", "exp3"):
        models = {g: LearningModel(LearningConfig(game=g, learner=learner, agents=n,
                                                  rounds=10 * reps), seed=0) for g in GAMES}
        cells = np.random.default_rng(0).random((n, models["bas"].grid.size))
        out = np.empty_like(cells)
        floor, rounds = [], {g: [] for g in GAMES}
        for _ in range(reps):  # interleaved repetitions
            floor.append(timed(lambda cells=cells, out=out: floor_pass(cells, out)))
            for g, model in models.items():
                rounds[g].append(timed(model.step))
        primitive = statistics.median(floor)
        report[learner] = {g: {"round_s": statistics.median(t),
                               "ratio_to_floor": primitive / statistics.median(t)}
                           for g, t in rounds.items()}
    report["floor_of_agents_x_grid_s"] = primitive
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
