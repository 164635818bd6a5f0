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
    ``rows x actions``, the two interleaved; one population alive at a time (at 10^6 agents
    several would compete for memory)."""
    report: dict[str, dict] = {}
    for learner in ("hedge", "exp3"):
        report[learner] = {}
        for game in games:
            model = LearningModel(LearningConfig(game=game, learner=learner, agents=agents,
                                                 rounds=10 * reps), seed=0)
            model.step()  # compiled kernels and the first measurements out of the timing
            cells = np.random.default_rng(0).random((model.slice_.row_count(model.config),
                                                     model.grid.size))
            out = np.empty_like(cells)
            floor, rounds = [], []
            for _ in range(reps):  # interleaved repetitions
                floor.append(timed(lambda c=cells, o=out: floor_pass(c, o)))
                rounds.append(timed(model.step))
            model.close()
            del model, cells, out
            median, base = statistics.median(rounds), statistics.median(floor)
            report[learner][game] = {"round_s": median, "floor_s": base,
                                     "ratio_to_floor": base / median}
    return report


def main() -> None:
    args = arguments(__doc__)
    if args.quick:
        report = {"agents": 1000, **measure(1000, GAMES, 3)}
    else:
        report = {"agents": 10_000, **measure(10_000, GAMES, 7),
                  "million": measure(1_000_000, LARGE, 5)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
