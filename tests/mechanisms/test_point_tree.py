"""The k-d tree's filtering gives exactly the brute-force nearest-centroid partition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privgames.environments.kmeans_data import birch3
from privgames.mechanisms import dp_kmeans as K
from privgames.mechanisms.point_tree import PointTree, cluster_sums


def brute_force(points: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts and sums from float64 squared distances and ``argmin`` (first index on a tie)."""
    R, k, d = centroids.shape
    d2 = ((points[None, :, None, :] - centroids[:, None, :, :]) ** 2).sum(-1)
    labels = d2.argmin(axis=2)
    counts = np.stack([np.bincount(labels[r], minlength=k) for r in range(R)]).astype(float)
    sums = np.stack([[points[labels[r] == j].sum(axis=0) for j in range(k)] for r in range(R)])
    return counts, sums


def clustered(rng: np.random.Generator, n: int, d: int, blobs: int = 12) -> np.ndarray:
    centres = rng.uniform(-0.8, 0.8, (blobs, d))
    which = rng.integers(0, blobs, n)
    return np.clip(centres[which] + 0.05 * rng.standard_normal((n, d)), -1, 1)


@pytest.mark.parametrize(("n", "d", "k", "leaf"), [(3000, 2, 9, 16), (2001, 3, 5, 64),
                                                  (777, 1, 4, 8), (500, 5, 7, 32),
                                                  (40, 2, 3, 64), (1, 2, 2, 64)])
def test_counts_and_sums_equal_the_brute_force(n, d, k, leaf):
    """Centroids at random and at the data (as after a few iterations), on clustered points."""
    rng = np.random.default_rng(n + d)
    points = clustered(rng, n, d)
    tree = PointTree.build(points, leaf)
    centroids = np.concatenate([rng.uniform(-1, 1, (10, k, d)),
                                points[rng.integers(0, n, (10, k))]])
    counts, sums = cluster_sums(tree, centroids)
    want_counts, want_sums = brute_force(points, centroids)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(sums, want_sums, rtol=0, atol=1e-9)


def test_ties_go_to_the_lowest_index():
    """Duplicate centroids and points on the bisectors: every tie goes to the first, as argmin
    (a grid of multiples of 1/16, so that the ties are exact in floating point)."""
    rng = np.random.default_rng(1)
    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 33), np.linspace(-1, 1, 33)), -1)
    points = np.concatenate([grid.reshape(-1, 2), rng.uniform(-1, 1, (500, 2))])
    centroids = np.array([[[0.5, 0.0], [-0.5, 0.0], [0.5, 0.0], [0.0, 0.5], [-0.5, 0.0]]])
    counts, sums = cluster_sums(PointTree.build(points, 16), centroids)
    want_counts, want_sums = brute_force(points, centroids)
    np.testing.assert_array_equal(counts, want_counts)
    assert counts[0, 2] == counts[0, 4] == 0  # the duplicates never win
    np.testing.assert_allclose(sums, want_sums, atol=1e-9)


def test_no_leaf_is_empty_when_the_leaves_are_smaller_than_the_points_allow():
    """Three points and leaves of one: four leaves would leave one empty (found by Hypothesis:
    an empty leaf's sums read a neighbour's point); the tree stops at two levels."""
    points = np.array([[0.0], [1.0], [-0.5]])
    centroids = np.array([[[0.0], [0.0]], [[-1.0], [1.0]]])
    tree = PointTree.build(points, 1)
    assert tree.size[-1].min() >= 1 and len(tree.centre) == 2
    counts, sums = cluster_sums(tree, centroids)
    want_counts, want_sums = brute_force(points, centroids)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(sums, want_sums, atol=1e-12)


@settings(max_examples=200, deadline=None, derandomize=True)  # 1,500 random examples passed
@given(n=st.integers(1, 300), d=st.integers(1, 4), k=st.integers(1, 6),
       leaf=st.sampled_from([1, 2, 5, 16, 64]), seed=st.integers(0, 2**32 - 1),
       snap=st.booleans())
def test_any_points_any_centroids(n, d, k, leaf, seed, snap):
    """Random sizes, dimensions and leaves; ``snap`` puts everything on a coarse grid so that
    repeated points, repeated centroids and exact ties are common."""
    rng = np.random.default_rng(seed)
    points = rng.uniform(-1, 1, (n, d))
    centroids = rng.uniform(-1, 1, (3, k, d))
    if snap:
        points, centroids = np.round(points * 2) / 2, np.round(centroids * 2) / 2
    counts, sums = cluster_sums(PointTree.build(points, leaf), centroids)
    want_counts, want_sums = brute_force(points, centroids)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(sums, want_sums, atol=1e-9)


def test_tree_boxes_hold_their_points_and_leaves_are_balanced():
    rng = np.random.default_rng(2)
    points = clustered(rng, 1000, 2)
    tree = PointTree.build(points, 40)
    assert len(tree.centre) == 6  # 1000 / 2**5 = 31.25 <= 40 < 62.5
    for level in range(len(tree.centre)):
        assert tree.size[level].sum() == 1000
        np.testing.assert_allclose(np.sum(tree.total[level], axis=1), points.sum(axis=0))
    sizes = tree.size[-1]
    assert sizes.max() - sizes.min() <= 1  # what the leaves' padding relies on
    assert sizes.min() >= 1
    held = np.stack([c.ravel() for c in tree.leaves], 1)
    real = (np.arange(tree.leaves[0].shape[1]) < sizes[:, None]).ravel()
    np.testing.assert_array_equal(np.sort(held[real], axis=0), np.sort(points, axis=0))
    low = np.stack(tree.centre[-1], 1) - np.stack(tree.half[-1], 1)
    high = np.stack(tree.centre[-1], 1) + np.stack(tree.half[-1], 1)
    inside = ((held >= np.repeat(low, tree.leaves[0].shape[1], 0) - 1e-12)
              & (held <= np.repeat(high, tree.leaves[0].shape[1], 0) + 1e-12)).all(1)
    assert inside[real].all()


def test_prepare_uses_the_tree_in_low_dimension_only():
    rng = np.random.default_rng(4)
    assert isinstance(K.prepare(rng.uniform(-1, 1, (50, K.TREE_DIMENSIONS))), PointTree)
    wide = rng.uniform(-1, 1, (50, K.TREE_DIMENSIONS + 1))
    assert isinstance(K.prepare(wide), np.ndarray)
    centroids = rng.uniform(-1, 1, (2, 3, K.TREE_DIMENSIONS + 1))
    for got, want in zip(K.partition_sums(K.prepare(wide), centroids),
                         brute_force(wide, centroids), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_an_iteration_on_birch3_is_the_same_through_either_path():
    """On Birch3 (100,000 points, k = 20) the tree is the float64 brute force exactly, and the
    float32 matrix product differs from it by at most a few points (near-ties)."""
    points = birch3()[0]
    rng = np.random.default_rng(6)
    centroids = points[rng.integers(0, points.shape[0], (3, 20))]
    by_tree = K.partition_sums(K.prepare(points), centroids)[0]
    by_product = K.partition_sums(points, centroids)[0]
    np.testing.assert_array_equal(by_tree[:1], brute_force(points, centroids[:1])[0])
    assert np.abs(by_tree - by_product).sum() <= 2 * 3


def test_hundreds_of_candidates_in_one_leaf():
    """200 centroids on a circle around a small disc of points: every centroid stays a
    candidate down to the leaf, and each point still goes to the one in its direction."""
    rng = np.random.default_rng(8)
    angle = np.sort(rng.uniform(0, 2 * np.pi, 200))
    centroids = np.stack([np.cos(angle), np.sin(angle)], -1)[None] * 0.9
    points = 0.01 * rng.uniform(-1, 1, (400, 2))
    counts, sums = cluster_sums(PointTree.build(points, 512), centroids)
    want_counts, want_sums = brute_force(points, centroids)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(sums, want_sums, atol=1e-12)
    assert np.count_nonzero(counts) > 100
