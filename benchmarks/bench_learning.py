"""Learning from experience: one round of ``learning-dynamics`` (every agent acts, gets its
feedback, updates; the analyst records regret, CCE gap and distance) with 10,000 agents on a
21-point grid, per game, against the cheapest numpy primitive for a round's work: one ``exp``
over the ``agents x grid`` array (what Hedge's weights alone need). ``pricing-bayes`` has
twice the rows (a client per type) and twice the actions (a report per level), and its analyst
takes interim expectations over 128 type profiles whenever the last iterate moves.

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process; the ratio is what to compare across machines.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
from _common import arguments, timed

from privgames.environments.learning_dynamics import LearningConfig, LearningModel

GAMES = ("bas", "sar", "ppsp", "pricing", "pricing-bayes")


def main() -> None:
    args = arguments(__doc__)
    n, reps = (1000, 3) if args.quick else (10_000, 7)
    report: dict[str, object] = {"agents": n}
    for learner in ("hedge", "exp3"):
        models = {g: LearningModel(LearningConfig(game=g, learner=learner, agents=n,
                                                  rounds=10 * reps), seed=0) for g in GAMES}
        cells = np.random.default_rng(0).random((n, models["bas"].game.grid.size))
        floor, rounds = [], {g: [] for g in GAMES}
        for _ in range(reps):  # interleaved repetitions
            floor.append(timed(lambda cells=cells: np.exp(cells)))
            for g, model in models.items():
                rounds[g].append(timed(model.step))
        primitive = statistics.median(floor)
        report[learner] = {g: {"round_s": statistics.median(t),
                               "ratio_to_exp": primitive / statistics.median(t)}
                           for g, t in rounds.items()}
    report["exp_of_agents_x_grid_s"] = primitive
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
