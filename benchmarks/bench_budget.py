"""DP k-means at 100,000 points (Birch3-like, k = 20): points x iterations per second of the
vectorised kernel (Algorithm 1, vectorised over repetitions, the partition filtered through a
k-d tree of the points) against scikit-learn's non-private ``KMeans`` Lloyd iterations on the
same data (one thread each), and of a per-repetition loop of the same kernel; the paper-scale
``dp-kmeans`` (4 methods, N = 5..45, 1,000 repetitions) wall time, extrapolated from the
measured rate, or measured with ``--paper``.

Run ``python benchmarks/bench_budget.py`` (``--quick`` for a smoke run). Rates are medians of
interleaved repetitions in one process; the ratios are what to compare across machines.
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
from _common import arguments, timed
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from privgames.environments.kmeans_data import birch3
from privgames.mechanisms.dp_kmeans import dp_iteration, prepare

PAPER_POINT_ITERATIONS = 4 * sum(range(5, 50, 5)) * 1000 * 100_000


def main() -> None:
    args = arguments(__doc__, ("--paper", "also run dp-kmeans --scale paper"))
    points = birch3()[0]
    if args.quick:
        points = points[:20_000]
    prepared = prepare(points)
    n, k, d = points.shape[0], 20, points.shape[1]
    reps, iters = (4, 3) if args.quick else (16, 5)
    rng = np.random.default_rng(0)
    start = rng.uniform(-1, 1, (reps, k, d))
    noise = [(rng.laplace(size=(reps, k)), rng.laplace(size=(reps, k, d))) for _ in range(iters)]
    budgets = np.full(reps, 0.05)

    def vectorised() -> None:
        c = start
        for cn, sn in noise:
            c = dp_iteration(prepared, c, budgets, cn, sn)

    def per_repetition() -> None:
        for r in range(reps):
            c = start[r: r + 1]
            for cn, sn in noise:
                c = dp_iteration(prepared, c, budgets[r: r + 1], cn[r: r + 1],
                                   sn[r: r + 1])

    def lloyd() -> None:  # one thread, as the numpy kernel: a per-core comparison (two OpenMP
        # threads on a 2-core machine measured 4.7e6-1.9e7 depending on what else ran)
        with threadpool_limits(1):
            KMeans(k, init=start[0], n_init=1, max_iter=iters, tol=0.0,
                   algorithm="lloyd").fit(points)

    vectorised()  # compiles the tree walk (numba; cached on disk after the first run)
    vec, loop, sk = [], [], []
    for _ in range(3 if args.quick else 5):  # interleaved repetitions
        vec.append(reps * iters * n / timed(vectorised))
        loop.append(reps * iters * n / timed(per_repetition))
        sk.append(iters * n / timed(lloyd))
    rate = statistics.median(vec)
    report = {"points": n, "k": k, "repetitions": reps, "iterations": iters,
              "dp_kmeans_point_iterations_per_s": rate,
              "per_repetition_loop_point_iterations_per_s": statistics.median(loop),
              "sklearn_lloyd_point_iterations_per_s": statistics.median(sk),
              "ratio_to_sklearn_lloyd": rate / statistics.median(sk),
              "paper_scale_point_iterations": PAPER_POINT_ITERATIONS,
              "paper_scale_estimated_s_one_core": PAPER_POINT_ITERATIONS / rate}
    if args.paper:
        import privgames

        t = time.perf_counter()
        privgames.run("dp-kmeans", scale="paper", workers=None)
        report["paper_scale_measured_s"] = time.perf_counter() - t
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
