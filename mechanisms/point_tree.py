"""Exact nearest-centroid cluster counts and sums by filtering through a k-d tree of the points
(Kanungo et al., "An efficient k-means clustering algorithm", TPAMI 2002), vectorised over
repetitions and tree nodes.

The points are fixed across iterations and repetitions, so they are sorted once into a balanced
k-d tree (median splits on each node's widest coordinate). For each repetition's centroids the
tree is walked level by level, all (repetition, node) pairs at once: a node whose bounding box
lies wholly inside one centroid's Voronoi cell adds its precomputed count and coordinate sums to
that centroid; otherwise only the centroids that may still win somewhere in the box go down to
its children (they shrink fast: about two per leaf on the paper's 2-D sets), and the points of
the leaves left undecided are assigned by their exact scores against those candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: Points per leaf at most (smaller leaves: fewer undecided points, more nodes to test).
LEAF_SIZE = 64
#: Margin a whole box must keep over a rival centroid to be decided at once. DP k-means keeps
#: points and centroids in [-1, 1]^d, d <= 8, so the scores are float64 sums of a few products
#: of such numbers (rounding about 1e-15): a box with a smaller margin is resolved point by
#: point, exactly as a brute-force ``argmin`` would.
MARGIN = 1e-9


@dataclass(frozen=True)
class PointTree:
    """The points sorted into a balanced k-d tree.

    Attributes:
        centre, half: per level (root first, ``2**level`` nodes) and coordinate, each node's
            bounding box (centre and half widths).
        size, total: per level, each node's point count, and per coordinate its sum.
        leaves: per coordinate, the leaves' points ``(leaves, leaf size)``, a short leaf
            padded with 0 (the leaves hold equally many points, give or take one).
    """

    centre: tuple[tuple[NDArray, ...], ...]
    half: tuple[tuple[NDArray, ...], ...]
    size: tuple[NDArray, ...]
    total: tuple[tuple[NDArray, ...], ...]
    leaves: tuple[NDArray, ...]

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
            centre.append(tuple(np.ascontiguousarray((lo + hi).T / 2)))
            half.append(tuple(np.ascontiguousarray((hi - lo).T / 2)))
            if level == depth:
                break
            node = np.repeat(np.arange(starts.size - 1), np.diff(starts))
            widest = np.argmax(hi - lo, axis=1)
            order = order[np.lexsort((sorted_points[np.arange(n), widest[node]], node))]
            mid = starts[:-1] + np.diff(starts) // 2
            bounds.append(np.append(np.column_stack([starts[:-1], mid]).ravel(), n))
        points = sorted_points
        size = [np.diff(starts).astype(float) for starts in bounds]
        total = [tuple(np.ascontiguousarray(np.add.reduceat(points, starts[:-1]).T))
                 for starts in bounds]
        starts = bounds[-1]
        width = int(np.diff(starts).max())
        slot = np.arange(n) - np.repeat(starts[:-1], np.diff(starts))
        leaf = np.repeat(np.arange(starts.size - 1), np.diff(starts))
        leaves = []
        for t in range(points.shape[1]):
            column = np.zeros((starts.size - 1, width))
            column[leaf, slot] = points[:, t]
            leaves.append(column)
        return cls(tuple(centre), tuple(half), tuple(size), tuple(total), tuple(leaves))


def cluster_sums(tree: PointTree, centroids: NDArray) -> tuple[NDArray, NDArray]:
    """Counts ``(R, k)`` and coordinate sums ``(R, k, d)`` of every repetition's clusters, each
    point in the cluster of its nearest centroid (ties to the lowest index, as ``argmin``).

    A box with centre ``m`` and half widths ``h`` lies in centroid ``b``'s cell when, for every
    rival ``j``, ``s_b(m) - s_j(m) > sum_t h_t |c_bt - c_jt|`` with ``s_j(x) = c_j . x -
    |c_j|^2 / 2`` (the linear score difference is smallest at a corner of the box); the rivals
    failing that test stay candidates below the node. Candidates are kept in increasing order,
    a short list padded with a sentinel centroid whose score is ``-inf``.
    """
    R, k, d = centroids.shape
    flat = np.asarray(centroids, dtype=float).reshape(R * k, d)
    sentinel = R * k
    coords = [np.append(flat[:, t], 0.0) for t in range(d)]
    norm = np.append(-0.5 * np.einsum("ij,ij->i", flat, flat), -np.inf)
    counts, sums = np.zeros(R * k), np.zeros((R * k, d))
    node = np.zeros(R, dtype=np.intp)  # the live (repetition, node) pairs and their candidates
    cand = np.arange(R * k).reshape(R, k)
    last = len(tree.centre) - 1
    for level in range(last + 1):
        rows = np.arange(node.size)
        at = [c[cand] for c in coords]
        scores = norm[cand]
        for t in range(d):
            scores += at[t] * tree.centre[level][t][node, None]
        best = np.argmax(scores, axis=1)
        winner = cand[rows, best]
        scores -= scores[rows, best][:, None]  # the winner's margin over each rival, negated,
        for t in range(d):  # plus the most the box can take off it
            scores += np.abs(at[t] - coords[t][winner][:, None]) * tree.half[level][t][node, None]
        rival = scores >= -MARGIN
        alive = np.count_nonzero(rival, axis=1)
        decided = alive == 1
        _add(counts, sums, winner[decided], tree.size[level][node[decided]],
             [total[node[decided]] for total in tree.total[level]])
        open_ = ~decided
        if not open_.any():
            break
        node, alive = node[open_], alive[open_]
        cand = np.sort(np.where(rival, cand, sentinel)[open_], axis=1)[:, : int(alive.max())]
        if level < last:  # both children inherit the candidates
            node = (2 * node[:, None] + np.arange(2)).ravel()
            cand = np.repeat(cand, 2, axis=0)
        else:
            _assign_points(tree, node, cand, alive, coords, norm, counts, sums)
    return counts.reshape(R, k), sums.reshape(R, k, d)


def _add(counts: NDArray, sums: NDArray, label: NDArray, size: NDArray,
         total: list[NDArray]) -> None:
    """Adds ``size`` points and their coordinate sums (one array per coordinate) to ``label``."""
    counts += np.bincount(label, weights=size, minlength=counts.size)
    for t, column in enumerate(total):
        sums[:, t] += np.bincount(label, weights=column, minlength=counts.size)


def _assign_points(tree: PointTree, leaf: NDArray, cand: NDArray, alive: NDArray,
                   coords: list[NDArray], norm: NDArray, counts: NDArray, sums: NDArray) -> None:
    """The points of the undecided leaves, each to its best candidate (the first on a tie:
    candidates stay in increasing index order). The leaves are taken in decreasing number of
    candidates, so that candidate ``m`` is scored for the leading rows only; what candidates
    ``1, 2, ...`` do not win goes to the first (the leaf's count and sums minus theirs)."""
    order = np.argsort(-alive, kind="stable")
    leaf, cand, alive = leaf[order], cand[order], alive[order]
    x = [column[leaf] for column in tree.leaves]  # (pairs, leaf size) per coordinate

    def score(label: NDArray) -> NDArray:
        rows = label.shape[0]
        out = x[0][:rows] * coords[0][label][:, None]
        for column, c in zip(x[1:], coords[1:], strict=True):
            out += column[:rows] * c[label][:, None]
        return out + norm[label][:, None]

    best = score(cand[:, 0])
    size, total = tree.size[-1][leaf], [t[leaf] for t in tree.total[-1]]
    short = size < best.shape[1]  # a short leaf's padding (its last slot) stays with the first
    best[short, -1] = np.inf
    won = np.zeros(best.shape, dtype=np.min_scalar_type(cand.shape[1]))  # winner's position
    rows = [np.count_nonzero(alive > m) for m in range(cand.shape[1])]
    for m in range(1, cand.shape[1]):
        rival_score = score(cand[: rows[m], m])
        better = rival_score > best[: rows[m]]
        np.copyto(won[: rows[m]], m, where=better)
        np.maximum(best[: rows[m]], rival_score, out=best[: rows[m]])
    for m in range(1, cand.shape[1]):
        hit = won[: rows[m]] == m
        part = [np.einsum("ij,ij->i", column[: rows[m]], hit.astype(float)) for column in x]
        _add(counts, sums, cand[: rows[m], m], np.count_nonzero(hit, axis=1), part)
        size[: rows[m]] -= np.count_nonzero(hit, axis=1)
        for t, column in zip(total, part, strict=True):
            t[: rows[m]] -= column
    _add(counts, sums, cand[:, 0], size, total)
