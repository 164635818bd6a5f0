"""Exact nearest-centroid cluster counts and sums by filtering through a k-d tree of the points
(Kanungo et al., "An efficient k-means clustering algorithm", TPAMI 2002), compiled with numba.

The points are fixed across iterations and repetitions, so they are sorted once into a balanced
k-d tree (median splits on each node's widest coordinate). For each repetition's centroids the
tree is walked depth first: a node whose bounding box lies wholly inside one centroid's Voronoi
cell adds its precomputed count and coordinate sums to that centroid; otherwise only the
centroids that may still win somewhere in the box go down to its children (they shrink fast:
about two per leaf on the paper's 2-D sets), and the points of a leaf left undecided are
assigned by their exact scores against those candidates.

The walk is a loop over nodes with short candidate lists: numpy ran it level by level over all
(repetition, node) pairs at once, padded to the longest list, at 0.47-0.6 ms a repetition on
Birch3 (k = 20, 1.5e8 point-iterations/s); compiled with numba it takes 0.12-0.14 ms (7.4e8/s,
``benchmarks/bench_budget.py``), which brings paper-scale ``dp-kmeans`` within its target
(README, Benchmarks: why numba).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privgames.mechanisms.compiled import compiled

#: Points per leaf at most (smaller leaves: fewer undecided points, more nodes to visit; the
#: compiled walk on Birch3: 0.16 ms a repetition at 4, 0.13 at 8-12, 0.12 at 16, 0.15 at 64).
LEAF_SIZE = 16
#: Margin a whole box must keep over a rival centroid to be decided at once. DP k-means keeps
#: points and centroids in [-1, 1]^d, d <= 16, so the scores are float64 sums of a few products
#: of such numbers (rounding about 1e-15): a box with a smaller margin is resolved point by
#: point, exactly as a brute-force ``argmin`` would.
MARGIN = 1e-9


@dataclass(frozen=True)
class PointTree:
    """The points sorted into a balanced k-d tree, level by level (root first, ``2**level``
    nodes; arrays padded with 0 to the last level's ``2**depth`` nodes).

    Attributes:
        centre, half: ``(levels, d, nodes)``: each node's bounding box (centre, half widths).
        size, total: ``(levels, nodes)`` point counts and ``(levels, d, nodes)`` sums.
        leaves: ``(d, leaves, leaf size)``: the leaves' points, a short leaf padded with 0
            (the leaves hold equally many points, give or take one).
    """

    centre: NDArray
    half: NDArray
    size: NDArray
    total: NDArray
    leaves: NDArray

    @classmethod
    def build(cls, points: NDArray, leaf_size: int = LEAF_SIZE) -> PointTree:
        """Median splits on each node's widest coordinate until the leaves hold at most
        ``leaf_size`` points, and at least one (``2**depth <= n``: an empty node's bounds and
        sums would be undefined); one sort per level over all of its nodes."""
        points = np.asarray(points, dtype=float)
        n = points.shape[0]
        depth = min(int(np.ceil(np.log2(max(n / leaf_size, 1.0)))), int(np.log2(n)))
        order = np.arange(n)
        bounds = [np.array([0, n])]
        centre, half = [], []
        for level in range(depth + 1):
            starts = bounds[-1]
            sorted_points = points[order]
            lo = np.minimum.reduceat(sorted_points, starts[:-1])  # the level's boxes: min and
            hi = np.maximum.reduceat(sorted_points, starts[:-1])  # max ignore the order below
            centre.append((lo + hi).T / 2)
            half.append((hi - lo).T / 2)
            if level == depth:
                break
            node = np.repeat(np.arange(starts.size - 1), np.diff(starts))
            widest = np.argmax(hi - lo, axis=1)
            order = order[np.lexsort((sorted_points[np.arange(n), widest[node]], node))]
            mid = starts[:-1] + np.diff(starts) // 2
            bounds.append(np.append(np.column_stack([starts[:-1], mid]).ravel(), n))
        points = sorted_points
        nodes = 2**depth
        dense = np.zeros((3, depth + 1, points.shape[1], nodes))  # centre, half, total
        size = np.zeros((depth + 1, nodes))
        for level, starts in enumerate(bounds):
            count = starts.size - 1
            dense[0, level, :, :count] = centre[level]
            dense[1, level, :, :count] = half[level]
            dense[2, level, :, :count] = np.add.reduceat(points, starts[:-1]).T
            size[level, :count] = np.diff(starts)
        starts = bounds[-1]
        width = int(np.diff(starts).max())
        slot = np.arange(n) - np.repeat(starts[:-1], np.diff(starts))
        leaf = np.repeat(np.arange(starts.size - 1), np.diff(starts))
        leaves = np.zeros((points.shape[1], starts.size - 1, width))
        leaves[:, leaf, slot] = points.T
        return cls(dense[0], dense[1], size, dense[2], leaves)


def cluster_sums(tree: PointTree, centroids: NDArray) -> tuple[NDArray, NDArray]:
    """Counts ``(R, k)`` and coordinate sums ``(R, k, d)`` of every repetition's clusters, each
    point in the cluster of its nearest centroid (ties to the lowest index, as ``argmin``).

    A box with centre ``m`` and half widths ``h`` lies in centroid ``b``'s cell when, for every
    rival ``j``, ``s_b(m) - s_j(m) > sum_t h_t |c_bt - c_jt|`` with ``s_j(x) = c_j . x -
    |c_j|^2 / 2`` (the linear score difference is smallest at a corner of the box); the rivals
    failing that test stay candidates below the node, in increasing index order.
    """
    centroids = np.ascontiguousarray(centroids, dtype=float)
    R, k, d = centroids.shape
    counts, sums = np.zeros((R, k)), np.zeros((R, k, d))
    _walk(tree.centre, tree.half, tree.size, tree.total, tree.leaves, centroids, MARGIN,
          counts, sums)
    return counts, sums


@compiled
def _walk(centre: NDArray, half: NDArray, size: NDArray, total: NDArray, leaves: NDArray,
          centroids: NDArray, margin: float, counts: NDArray, sums: NDArray) -> None:
    """:func:`cluster_sums` into ``counts`` and ``sums``: per repetition, a depth-first walk
    with an explicit stack; the candidates of a node at ``level`` are ``cand[level, :n]``,
    written by its parent (a later sibling's list is intact: a subtree writes deeper rows)."""
    R, k, d = centroids.shape
    last = centre.shape[0] - 1
    cand = np.empty((last + 2, k), dtype=np.int64)
    count = np.zeros(last + 2, dtype=np.int64)
    score, norm = np.empty(k), np.empty(k)
    stack = np.empty((2 * last + 2, 2), dtype=np.int64)  # (level, node)
    for r in range(R):
        c = centroids[r]
        for j in range(k):
            square = 0.0
            for t in range(d):
                square += c[j, t] * c[j, t]
            norm[j] = -0.5 * square
            cand[0, j] = j
        count[0] = k
        top = 0
        stack[0, 0], stack[0, 1] = 0, 0
        while top >= 0:
            level, node = stack[top, 0], stack[top, 1]
            top -= 1
            best, b = -np.inf, -1
            for i in range(count[level]):  # the best score at the box's centre
                j = cand[level, i]
                s = norm[j]
                for t in range(d):
                    s += c[j, t] * centre[level, t, node]
                score[i] = s
                if s > best:
                    best, b = s, j
            alive = 0
            for i in range(count[level]):  # the rivals that may still win inside the box
                j = cand[level, i]
                gap = score[i] - best
                for t in range(d):
                    gap += abs(c[j, t] - c[b, t]) * half[level, t, node]
                if gap >= -margin:
                    cand[level + 1, alive] = j
                    alive += 1
            count[level + 1] = alive
            if alive == 1:
                counts[r, b] += size[level, node]
                for t in range(d):
                    sums[r, b, t] += total[level, t, node]
            elif level == last:  # the leaf's points, each by its exact score
                for p in range(int(size[level, node])):
                    best, b = -np.inf, -1
                    for i in range(alive):
                        j = cand[level + 1, i]
                        s = leaves[0, node, p] * c[j, 0]
                        for t in range(1, d):
                            s += leaves[t, node, p] * c[j, t]
                        s += norm[j]
                        if s > best:
                            best, b = s, j
                    counts[r, b] += 1.0
                    for t in range(d):
                        sums[r, b, t] += leaves[t, node, p]
            else:  # both children, the first on top
                stack[top + 1, 0], stack[top + 1, 1] = level + 1, 2 * node + 1
                stack[top + 2, 0], stack[top + 2, 1] = level + 1, 2 * node
                top += 2
