"""Pricing FL game: time to solve eq (10)/(11) and one round of global best responses at
N = 10,000 (targets: under 1 s each), and the vectorised round against a loop that computes
one client's global best response at a time (the same algorithm, no vectorisation).

Run ``python benchmarks/bench_pricing.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process; the ratio is what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from privgames.mechanisms import pricing as pr

GAME = (1.0, 1.0, 1.0, 1.0)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 1000 if args.quick else 10_000
    loop_n = 20 if args.quick else 200
    alpha = np.clip(np.random.default_rng(0).normal(0.5, 0.2, n), 0.01, 0.99)
    sigma = pr.optimal_noise(alpha, *GAME)
    beta = pr.penalty_coefficients(alpha, *GAME)
    others = pr._others(sigma, "mle")
    ref = float(np.exp(np.mean(np.log(sigma))))

    def per_client() -> None:  # what one client's in-turn move costs, one at a time
        for i in range(loop_n):
            pr.global_best_response(others[i:i + 1], alpha[i:i + 1], beta[i:i + 1], n, *GAME,
                                    "mle", ref)

    solve, rounds, loop = [], [], []
    for _ in range(3 if args.quick else 5):  # interleaved repetitions
        solve.append(timed(lambda: (pr.equilibrium_noise(alpha, *GAME),
                                    pr.optimal_noise(alpha, *GAME))))
        rounds.append(timed(lambda: pr.best_responses(sigma, alpha, *GAME, beta)))
        loop.append(timed(per_client) * n / loop_n)
    report = {"N": n, "solve_eq10_eq11_s": statistics.median(solve),
              "best_response_round_s": statistics.median(rounds),
              "per_client_loop_round_s": statistics.median(loop),
              "vectorised_over_loop": statistics.median(loop) / statistics.median(rounds)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
