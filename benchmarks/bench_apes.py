"""APES at the paper's scale: the numerical amplification bounds (EoN and the baseline) for
n = 10^6 users (target: under a second each); the Clip-Laplace sampler against the true floor
for its work, numpy's fastest primitive on the same count in the same process
(``standard_exponential``, the ziggurat: a Clip-Laplace draw is a truncated, shifted
exponential; and ``random``, one uniform: the inverse CDF's input; target >= 0.6 of the
exponential rate); and one training round with n = 10,000 users and d = 7,850 (perturb,
shuffle, aggregate, calibrate) against ``standard_exponential`` for the same number of draws
(the Clip-Laplace draws and the shuffler's) into a resident buffer, as the round writes the
model's resident reports, with its traced peak memory against the reports matrix.

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
from privgames.mechanisms.noise import clip_laplace_sample
from privgames.mechanisms.shuffle import baseline_bound, eon_bound, personalized_budgets


def kernel(rows: int, d: int, reps: int) -> dict[str, float]:
    """Clip-Laplace draws of a ``(rows, d)`` gradient matrix, one budget per row, against
    ``standard_exponential`` and ``random`` of the same count (interleaved, medians)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1.0, 1.0, (rows, d))
    eps = personalized_budgets("uniform2", rows, rng)[:, None]
    count = rows * d
    times: dict[str, list[float]] = {"clip_laplace": [], "exponential": [], "uniform": []}
    for _ in range(reps):
        times["clip_laplace"].append(timed(lambda: clip_laplace_sample(x, eps, 1.0, rng)))
        times["exponential"].append(timed(lambda: rng.standard_exponential(count)))
        times["uniform"].append(timed(lambda: rng.random(count)))
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"draws": count, **{f"{k}_seconds": v for k, v in t.items()},
            "clip_laplace_per_s": count / t["clip_laplace"],
            "ratio_to_exponential": t["exponential"] / t["clip_laplace"],
            "ratio_to_uniform": t["uniform"] / t["clip_laplace"]}


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
        raw = np.empty(int(draws))
        raw.fill(0.0)  # touched: like the round's resident reports, no page faults
        round_t, raw_t = [], []
        for k in range(reps):  # interleaved
            round_t.append(timed(lambda k=k: (model.collect_reports(k), model.shuffler.shuffle(),
                                              model.analyzer.aggregate())))
            raw_t.append(timed(lambda k=k: np.random.default_rng(k).standard_exponential(
                out=raw)))
        tracemalloc.start()
        model.collect_reports(reps)
        model.shuffler.shuffle()
        model.analyzer.aggregate()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report = {
            "kernel": kernel(200 if args.quick else 2000, 7850, 5),
            "bound_users": users,
            "eon_numerical_s": statistics.median(eon_t),
            "baseline_numerical_s": statistics.median(base_t),
            "round": {"n": n, "d": model.config.d, "draws": draws,
                      "seconds": statistics.median(round_t),
                      "raw_exponential_seconds": statistics.median(raw_t),
                      "ratio_to_exponential": statistics.median(raw_t)
                      / statistics.median(round_t),
                      "peak_traced_MiB": peak / 2**20,
                      "reports_MiB": model.reports.nbytes / 2**20},
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
