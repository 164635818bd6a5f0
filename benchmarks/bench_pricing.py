"""Pricing FL game: time to solve eq (10)/(11) and one round of global best responses at
N = 10,000 (targets: under 1 s each), and that round (one compiled call over every client)
against a loop that asks for one client's global best response at a time, as clients moving
in turn do (the same compiled search; the difference is the cost of a call), and the round
against its cheapest primitive: one numpy ``sqrt`` pass over as many numbers as it evaluates
costs (161 grid points and about 42 bisection steps a client).

Run ``python benchmarks/bench_pricing.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process; the ratio is what to compare across machines.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
from _common import arguments, timed

from privgames.mechanisms import pricing as pr

GAME = (1.0, 1.0, 1.0, 1.0)


def main() -> None:
    args = arguments(__doc__)
    n = 1000 if args.quick else 10_000
    loop_n = 20 if args.quick else 200
    alpha = np.clip(np.random.default_rng(0).normal(0.5, 0.2, n), 0.01, 0.99)
    sigma = pr.optimal_noise(alpha, *GAME)
    beta = pr.penalty_coefficients(alpha, *GAME)
    others = pr.rest_of_aggregate(sigma, "mle")
    ref = float(np.exp(np.mean(np.log(sigma))))

    def per_client() -> None:  # what one client's in-turn move costs, one at a time
        for i in range(loop_n):
            pr.global_best_response(others[i:i + 1], alpha[i:i + 1], beta[i:i + 1], n, *GAME,
                                    "mle", ref)

    # the cheapest primitive for a round's work: one square root per cost evaluated (the grid's
    # points and about 42 bisection steps a client), in one numpy pass
    work = np.random.default_rng(1).random((pr.GRID_POINTS + 42) * n)
    out = np.empty_like(work)

    solve, rounds, loop, primitive = [], [], [], []
    for _ in range(3 if args.quick else 5):  # interleaved repetitions
        solve.append(timed(lambda: (pr.equilibrium_noise(alpha, *GAME),
                                    pr.optimal_noise(alpha, *GAME))))
        rounds.append(timed(lambda: pr.best_responses(sigma, alpha, *GAME, beta)))
        loop.append(timed(per_client) * n / loop_n)
        primitive.append(timed(lambda: np.sqrt(work, out=out)))
    report_training = training(args.quick)
    report = {"N": n, "solve_eq10_eq11_s": statistics.median(solve),
              "best_response_round_s": statistics.median(rounds),
              "per_client_loop_round_s": statistics.median(loop),
              "vectorised_over_loop": statistics.median(loop) / statistics.median(rounds),
              "sqrt_pass_s": statistics.median(primitive),
              "round_over_sqrt_pass": statistics.median(rounds) / statistics.median(primitive),
              "training": report_training}
    print(json.dumps(report, indent=2))


def training(quick: bool) -> dict:
    """Federated training: client-updates per second (local steps, noise, upload) of the
    vectorised round against a plain per-client Python loop of the same computation."""
    from privgames.environments.fl_training import FederatedTrainingModel, TrainingConfig
    from privgames.mechanisms.fl_training import aggregate, local_updates

    n = 20 if quick else 100
    model = FederatedTrainingModel(TrainingConfig(N=n, rounds=1), seed=0)
    c, w = model.config, model.w
    rng = np.random.default_rng(0)

    def vectorised() -> None:
        aggregate(model.updates(0), model.sigma, c.aggregation)

    def per_client() -> None:
        updates = []
        for i in range(n):
            local = local_updates(w, model.X[i:i + 1], model.y[i:i + 1], c.lam, model.lr,
                                  c.steps)[0]
            updates.append(local + model.sigma[i] * rng.standard_normal(w.size))
        aggregate(np.array(updates), model.sigma, c.aggregation)

    vec, loop = [], []
    for _ in range(3 if quick else 5):
        vec.append(timed(vectorised))
        loop.append(timed(per_client))
    return {"clients": n, "client_updates_per_s": n / statistics.median(vec),
            "per_client_loop_updates_per_s": n / statistics.median(loop),
            "vectorised_over_loop": statistics.median(loop) / statistics.median(vec),
            "flower_anchor_updates_per_s": 125}


if __name__ == "__main__":
    main()
