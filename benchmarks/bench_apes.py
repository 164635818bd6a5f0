"""APES at the paper's scale: the numerical amplification bounds (EoN and the baseline) for
n = 10^6 users (target: under a second each), and one training round with n = 10,000 users and
d = 7,850 (perturb, shuffle, aggregate, calibrate) as a ratio of numpy's raw rate for the same
number of random draws (the Clip-Laplace draws and the shuffler's permutations; target >= 0.5),
with its traced peak memory against the reports matrix.

The round uses MNIST-shaped data (784 pixels, 10 classes) drawn at random, written to a
temporary ``.npz`` the environment loads like the user's MNIST file. Run ``python
benchmarks/bench_apes.py`` (``--quick`` for a smoke run); medians of interleaved repetitions.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
from _common import arguments, timed

from privgames.environments.apes import APESConfig, APESModel
from privgames.mechanisms.shuffle import baseline_bound, eon_bound, personalized_budgets


def main() -> None:
    args = arguments(__doc__)
    reps = 3
    users = 10**5 if args.quick else 10**6
    eps = personalized_budgets("uniform2", users, np.random.default_rng(0))
    eon_t, base_t = [], []
    for _ in range(reps):
        eon_t.append(timed(lambda: eon_bound(eps, 1e-8)))
        base_t.append(timed(lambda: baseline_bound(eps, 1e-8)))
    n = 500 if args.quick else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(1)
        path = Path(tmp) / "mnist_shaped.npz"
        np.savez(path, x_train=rng.integers(0, 256, (n * 2, 28, 28), dtype=np.uint8),
                 y_train=rng.integers(0, 10, n * 2))
        model = APESModel(APESConfig(n=n, rounds=1, data=str(path), samples=2), 2)
        draws = 2.0 * model.reports.size  # one Clip-Laplace draw + one shuffle draw each
        round_t, raw_t = [], []
        for k in range(reps):  # interleaved
            round_t.append(timed(lambda k=k: (model.collect_reports(k), model.shuffler.shuffle(),
                                              model.analyzer.aggregate())))
            raw_t.append(timed(lambda k=k: np.random.default_rng(k).laplace(size=int(draws))))
        tracemalloc.start()
        model.collect_reports(reps)
        model.shuffler.shuffle()
        model.analyzer.aggregate()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report = {
            "bound_users": users,
            "eon_numerical_s": statistics.median(eon_t),
            "baseline_numerical_s": statistics.median(base_t),
            "round": {"n": n, "d": model.config.d, "draws": draws,
                      "seconds": statistics.median(round_t),
                      "raw_laplace_seconds": statistics.median(raw_t),
                      "ratio_to_raw": statistics.median(raw_t) / statistics.median(round_t),
                      "peak_traced_MiB": peak / 2**20,
                      "reports_MiB": model.reports.nbytes / 2**20},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
