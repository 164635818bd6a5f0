"""Differentially private k-means (``papers/budget-allocation-series.txt``, Algorithm 1), vectorised
over points and repetitions, and its two scores (weighted F1 with Kuhn-Munkres matching, eq
38-39; NIVC, eq 40).

Points lie in ``[-1, 1]^d`` (sensitivity normalisation, section 7.2.1). Iteration ``i`` spends
``epsilon_i`` on the partition's noisy counts and sums: the clusters are disjoint, so the
queries of one iteration compose in parallel; the count (sensitivity 1) and the sum (L1
sensitivity ``d`` under Definition 1's add/remove neighbours) get ``epsilon_i / 2`` each, i.e.
``Lap(2 / epsilon_i)`` and ``Lap(2 d / epsilon_i)`` per coordinate. A cluster whose noisy count
is below 1 keeps its centroid; centroids are clipped to the domain.

The partition's counts and sums come from a k-d tree of the points
(``privgames.mechanisms.point_tree``) in low dimension, from one matrix product per block of
repetitions above it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment

from privgames.mechanisms.point_tree import PointTree, cluster_sums

#: Largest score block (float32 entries) the assignment step holds at once: 8 MiB.
BLOCK = 2 * 2**20
#: Most coordinates for which the k-d tree's filtering is used. Its compiled walk takes 0.05 of
#: the matrix product's time at 2 coordinates, 0.33 at 8, 0.6 at 16, 0.96 at 32 and 1.7 at 64
#: (20,000 clustered points, k = 10, 16 repetitions): a box's corners stop separating the
#: Voronoi cells as the dimension grows.
TREE_DIMENSIONS = 16

Points = NDArray | PointTree


def prepare(points: NDArray) -> Points:
    """The points as the assignment step takes them: a k-d tree in low dimension, else as is."""
    points = np.asarray(points, dtype=float)
    return PointTree.build(points) if points.shape[1] <= TREE_DIMENSIONS else points


def partition_sums(points: Points, centroids: NDArray) -> tuple[NDArray, NDArray]:
    """Counts ``(R, k)`` and coordinate sums ``(R, k, d)`` of the nearest-centroid partition in
    every repetition (``points`` from :func:`prepare`)."""
    if isinstance(points, PointTree):
        return cluster_sums(points, centroids)
    return cluster_stats(points, nearest(points, centroids), centroids.shape[1])


def rep_chunk(n: int, k: int) -> int:
    """Repetitions assigned at once so that the ``(reps * k, n)`` score block fits ``BLOCK``."""
    return max(1, BLOCK // max(n * k, 1))


def nearest(points: NDArray, centroids: NDArray) -> NDArray:
    """Index of the nearest centroid of every point in every repetition, ``(R, n)``:
    ``argmax_j (c_j . x - |c_j|^2 / 2)``, one float32 matrix product per block of repetitions,
    then a running maximum over the ``k`` rows (long contiguous rows: 2-3x faster than
    ``argmax`` over many rows of length ``k``). ``centroids``: ``(R, k, d)``."""
    R, k, d = centroids.shape
    n = points.shape[0]
    xt = np.vstack([points.T, np.ones((1, n))]).astype(np.float32)
    out = np.empty((R, n), dtype=np.intp)
    step = rep_chunk(n, k)
    for lo in range(0, R, step):
        c = centroids[lo: lo + step]
        w = np.concatenate([c, -0.5 * np.sum(c * c, axis=2, keepdims=True)], axis=2)
        scores = (w.reshape(-1, d + 1).astype(np.float32) @ xt).reshape(len(c), k, n)
        best, labels = scores[:, 0].copy(), out[lo: lo + step]
        labels[...] = 0
        better = np.empty(best.shape, dtype=bool)
        for j in range(1, k):
            np.greater(scores[:, j], best, out=better)
            np.copyto(labels, j, where=better)
            np.maximum(best, scores[:, j], out=best)
    return out


def cluster_stats(points: NDArray, labels: NDArray, k: int) -> tuple[NDArray, NDArray]:
    """Exact counts ``(R, k)`` and coordinate sums ``(R, k, d)`` of each repetition's clusters
    (one ``bincount`` per repetition and coordinate: no copies of the points)."""
    R, d = labels.shape[0], points.shape[1]
    counts = np.empty((R, k))
    sums = np.empty((R, k, d))
    columns = [np.ascontiguousarray(points[:, j]) for j in range(d)]
    for r in range(R):
        counts[r] = np.bincount(labels[r], minlength=k)
        for j in range(d):
            sums[r, :, j] = np.bincount(labels[r], weights=columns[j], minlength=k)
    return counts, sums


def dp_iteration(points: Points, centroids: NDArray, budgets: NDArray,
                 count_noise: NDArray, sum_noise: NDArray) -> NDArray:
    """One iteration of Algorithm 1 in every repetition: partition, noisy counts and sums,
    new centroids. ``points`` from :func:`prepare`; ``budgets`` ``(R,)``; ``count_noise``
    ``(R, k)`` and ``sum_noise`` ``(R, k, d)`` are standard Laplace draws, scaled here by
    ``2 / epsilon_i`` and ``2 d / epsilon_i``."""
    d = centroids.shape[2]
    counts, sums = partition_sums(points, centroids)
    scale = 2.0 / budgets
    noisy_counts = counts + scale[:, None] * count_noise
    noisy_sums = sums + (d * scale)[:, None, None] * sum_noise
    with np.errstate(divide="ignore", invalid="ignore"):
        moved = noisy_sums / noisy_counts[:, :, None]
    keep = (noisy_counts < 1.0)[:, :, None]
    return np.clip(np.where(keep, centroids, moved), -1.0, 1.0)


def weighted_f1(truth: NDArray, labels: NDArray, k: int) -> NDArray:
    """Eq (38)-(39): per repetition, the size-weighted F1 over the true clusters, each matched
    to one found cluster by the Kuhn-Munkres algorithm (maximising the weighted F1)."""
    R, n = labels.shape
    k_true = int(truth.max()) + 1
    idx = (truth * k + labels + (k_true * k) * np.arange(R)[:, None]).ravel()
    confusion = np.bincount(idx, minlength=R * k_true * k).reshape(R, k_true, k).astype(float)
    size_true = confusion.sum(axis=2, keepdims=True)
    size_found = confusion.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        f1 = np.nan_to_num(2.0 * confusion / (size_true + size_found))
    gain = f1 * size_true / n
    out = np.empty(R)
    for r in range(R):
        rows, cols = linear_sum_assignment(gain[r], maximize=True)
        out[r] = gain[r][rows, cols].sum()
    return out


def nivc(points: Points, centroids: NDArray) -> NDArray:
    """Eq (40): per repetition, the mean squared distance of each point to the centroid of the
    cluster it falls in (the final centroids partition the data), from the partition's counts
    ``n_j`` and sums ``S_j``: ``(sum_i |x_i|^2 + sum_j (n_j |c_j|^2 - 2 c_j . S_j)) / n``."""
    counts, sums = partition_sums(points, centroids)
    if isinstance(points, PointTree):
        square = sum(float(np.sum(column * column)) for column in points.leaves)  # 0-padded
    else:
        square = float(np.sum(np.square(points)))
    spread = (counts * np.sum(centroids * centroids, axis=2)
              - 2.0 * np.einsum("rkd,rkd->rk", centroids, sums))
    return (square + spread.sum(axis=1)) / counts.sum(axis=1)
