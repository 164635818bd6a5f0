"""The vectorised DP k-means kernel against direct computations and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans

from privgames.mechanisms import dp_kmeans as K


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    points = np.clip(rng.normal(0, 0.4, (3000, 2)), -1, 1)
    centroids = rng.uniform(-1, 1, (7, 5, 2))
    return points, centroids


def test_nearest_is_the_brute_force_argmin(data, monkeypatch):
    points, centroids = data
    d2 = ((points[None, :, None, :] - centroids[:, None, :, :]) ** 2).sum(-1)
    expected = d2.argmin(axis=2)
    monkeypatch.setattr(K, "BLOCK", 2 * 3000 * 5)  # several blocks of repetitions
    got = K.nearest(points, centroids)
    # float32 scores may flip a label only where two centroids are equidistant to 1e-5
    gap = np.sort(d2, axis=2)[..., 1] - np.sort(d2, axis=2)[..., 0]
    assert np.all((got == expected) | (gap < 1e-5))
    assert np.mean(got == expected) > 0.9999


def test_cluster_stats_are_exact(data):
    points, centroids = data
    labels = K.nearest(points, centroids)
    counts, sums = K.cluster_stats(points, labels, 5)
    for r in range(labels.shape[0]):
        for j in range(5):
            mask = labels[r] == j
            assert counts[r, j] == mask.sum()
            np.testing.assert_allclose(sums[r, j], points[mask].sum(axis=0), atol=1e-9)


def test_without_noise_an_iteration_is_lloyds_step(data):
    """With zero noise one iteration moves every centroid to its cluster's mean (scikit-learn's
    Lloyd step from the same centroids gives the same centroids)."""
    points, centroids = data
    R, k, d = centroids.shape
    moved = K.dp_iteration(points, centroids, np.ones(R), np.zeros((R, k)), np.zeros((R, k, d)))
    for r in range(R):
        km = KMeans(k, init=centroids[r], n_init=1, max_iter=1, algorithm="lloyd").fit(points)
        kept = np.isin(np.arange(k), K.nearest(points, centroids[r: r + 1])[0])
        np.testing.assert_allclose(moved[r][kept], km.cluster_centers_[kept], atol=1e-9)


def test_noise_scales_are_two_over_epsilon():
    """Noisy counts carry Lap(2/eps) (count: eps/2, sensitivity 1) and sums Lap(2d/eps) per
    coordinate (sum: eps/2, L1 sensitivity d), read back from the centroids of one cluster of
    100 points: at 0 with sum noise only, the centroid is the sum noise / 100; at 0.5 with count
    noise only, it is 50 / noisy count. Sample variances of 20,000 draws within 4 SE (the SE of
    a Laplace sample variance is sqrt(5/n) of it)."""
    eps, draws, d = 0.5, 20_000, 2
    rng = np.random.default_rng(5)
    unit = rng.laplace(size=(draws, 1, d))
    zeros = np.zeros((draws, 1, d))
    at_zero = K.dp_iteration(np.zeros((100, d)), zeros, np.full(draws, eps),
                             np.zeros((draws, 1)), unit)
    sum_noise = 100 * at_zero[:, 0, :].ravel()
    count_noise = unit[:, 0, 0]
    at_half = K.dp_iteration(np.full((100, d), 0.5), zeros, np.full(draws, eps),
                             count_noise[:, None], zeros)
    noisy_count = 50 / at_half[:, 0, 0]
    for measured, scale in ((sum_noise, 2 * d / eps), (noisy_count - 100, 2 / eps)):
        expected = 2 * scale**2
        assert abs(measured.var(ddof=1) - expected) < 4 * expected * np.sqrt(5 / measured.size)


def test_weighted_f1_and_nivc():
    truth = np.repeat([0, 1, 2], [50, 30, 20])
    perm = np.array([2, 0, 1])[truth]  # a perfect clustering under other names
    assert K.weighted_f1(truth, perm[None, :], 3)[0] == pytest.approx(1.0)
    wrong = perm.copy()
    wrong[:10] = perm[60]  # ten points of cluster 0 put in cluster 1's
    tp = 40
    f1_0 = 2 * tp / (50 + 40)
    f1_1 = 2 * 30 / (30 + 40)
    assert K.weighted_f1(truth, wrong[None, :], 3)[0] == pytest.approx(
        0.5 * f1_0 + 0.3 * f1_1 + 0.2)
    rng = np.random.default_rng(2)
    points = rng.uniform(-1, 1, (500, 2))
    centroids = rng.uniform(-1, 1, (3, 4, 2))
    km = KMeans(4, init=centroids[0], n_init=1, max_iter=1).fit(points)
    # sklearn's inertia is at its moved centres: recompute at ours by hand
    d2 = ((points[None, :, None] - centroids[:, None]) ** 2).sum(-1).min(2).mean(1)
    np.testing.assert_allclose(K.nivc(points, centroids), d2, rtol=1e-12)
    np.testing.assert_allclose(K.nivc(K.prepare(points), centroids), d2, rtol=1e-12)
    assert km.inertia_ / 500 <= d2[0]  # a Lloyd step never raises the objective


def test_a_cluster_whose_noisy_count_is_below_one_keeps_its_centroid():
    """Algorithm 1 with the empty-cluster rule: a centroid no point is nearest to (count 0), or
    one whose noisy count falls below 1, stays where it was; the others move to their noisy
    means (noise-free here: the mean)."""
    points = np.array([[0.1, 0.1], [0.3, 0.1], [0.2, 0.4], [0.9, 0.9]])
    centroids = np.array([[[0.2, 0.2], [-0.9, -0.9], [0.8, 0.8]]])
    count_noise = np.array([[0.0, 0.0, -0.5]])  # scaled by 2/eps = 1: the third's count is 0.5
    moved = K.dp_iteration(points, centroids, np.array([2.0]), count_noise,
                           np.zeros((1, 3, 2)))
    np.testing.assert_allclose(moved[0, 0], points[:3].mean(axis=0))
    np.testing.assert_array_equal(moved[0, 1:], centroids[0, 1:])
