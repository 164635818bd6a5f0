"""Learning from experience: one round of ``learning-dynamics`` (every agent acts, gets its
feedback, updates; the analyst records regret, CCE gap and distance) on the one engine (one
shard in this process), per game and learner (Hedge: full feedback; EXP3: bandit), at 10^4
agents (every game) and 10^6 (bas, sar, ppsp, pricing), against the floor of a round's work
(issue 41): one ``exp`` pass plus ten ``multiply`` passes over the game's ``rows x actions``
array, timed in the same process. numpy's float64 ``exp`` is vectorized only with AVX-512,
so the floor, not ``exp`` alone, means the same on any CPU. ``pricing-bayes`` has twice the
rows (a client per type) and twice the actions (a report per level), and its analyst takes
interim expectations over 128 type profiles whenever the last iterate moves;
``bas-sequential`` has a row per user and observed state.

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run at 1,000 agents).
Times are medians of interleaved repetitions in one process; the ratio is what to compare
across machines.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
from _common import arguments, timed

from privgames.environments.learning_dynamics import LearningConfig, LearningModel

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")
#: The games measured at 10^6 agents too (the sequential chain would hold 21 rows a user, and
#: pricing-bayes' theory costs minutes at that size).
LARGE = ("bas", "sar", "ppsp", "pricing")


def floor_pass(cells: np.ndarray, out: np.ndarray) -> None:
    """One ``exp`` and ten ``multiply`` passes over ``cells``, into a preallocated array."""
    np.exp(cells, out=out)
    for _ in range(10):
        np.multiply(out, cells, out=out)


def measure(agents: int, games: tuple[str, ...], reps: int) -> dict[str, dict]:
    """Per learner and game: the median round and its ratio to the floor of the game's own
    ``rows x actions``."""
    report: dict[str, dict] = {}
    for learner in ("hedge", "exp3"):
        models = {g: LearningModel(LearningConfig(game=g, learner=learner, agents=agents,
                                                  rounds=10 * reps), seed=0) for g in games}
        for model in models.values():
            model.step()  # compiled kernels and first measurements out of the timing
        cells = {g: np.random.default_rng(0).random((m.slice_.row_count(m.config),
                                                     m.grid.size))
                 for g, m in models.items()}
        floor: dict[str, list[float]] = {g: [] for g in games}
        rounds: dict[str, list[float]] = {g: [] for g in games}
        for _ in range(reps):  # interleaved repetitions
            for g, model in models.items():
                out = np.empty_like(cells[g])
                floor[g].append(timed(lambda c=cells[g], o=out: floor_pass(c, o)))
                rounds[g].append(timed(model.step))
        report[learner] = {g: {"round_s": statistics.median(rounds[g]),
                               "floor_s": statistics.median(floor[g]),
                               "ratio_to_floor": statistics.median(floor[g])
                               / statistics.median(rounds[g]),
                               "ns_per_cell": 1e9 * statistics.median(rounds[g])
                               / cells[g].size}
                           for g in games}
        for model in models.values():
            model.close()
        del models
    return report


def main() -> None:
    args = arguments(__doc__)
    if args.quick:
        report = {"agents": 1000, **measure(1000, GAMES, 3)}
    else:
        report = {"agents": 10_000, **measure(10_000, GAMES, 7),
                  "million": measure(1_000_000, LARGE, 3)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
