"""The budget-allocation environments: collusion, DP k-means, analysts; data sets and CSVs."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import pandas as pd
import pytest

from privgames.environments import dp_kmeans as env_kmeans
from privgames.environments.budget_analysts import AnalystConfig, AnalystModel
from privgames.environments.budget_queries import CollusionConfig, CollusionModel
from privgames.environments.config import ConfigError
from privgames.environments.dp_kmeans import DPKMeansModel, KMeansConfig
from privgames.environments.kmeans_data import birch3, load_points, scale, unbalance
from privgames.mechanisms.budget import allocate


def test_data_sets_have_the_papers_structure():
    """The real Unbalance ships with the package: 6,500 points, 8 labelled clusters (three of
    2,000, five of 100), the published integer coordinates scaled to [-1, 1]."""
    points, labels = unbalance()
    assert points.shape == (6500, 2) and np.bincount(labels).tolist() == [2000] * 3 + [100] * 5
    raw = pd.read_csv(files("privgames.environments").joinpath("data", "unbalance.csv"))
    assert raw[["x", "y"]].to_numpy().dtype.kind == "i"  # the published coordinates
    np.testing.assert_allclose(points, scale(raw[["x", "y"]].to_numpy(float)))
    big, none = birch3()
    assert big.shape == (100_000, 2) and none is None
    for p in (points, big):  # sensitivity normalisation: every coordinate spans [-1, 1]
        assert np.allclose(p.min(axis=0), -1) and np.allclose(p.max(axis=0), 1)


def test_user_csv_is_loaded_and_malformed_ones_are_refused(tmp_path):
    good = tmp_path / "pts.csv"
    good.write_text("x,y,label\n0,10,1\n2,30,1\n4,20,5\n")
    points, labels = load_points(str(good))
    assert points.tolist() == [[-1, -1], [0, 1], [1, 0]] and labels.tolist() == [0, 0, 1]
    cases = {"bad.csv": "x,y\n1,2\n3,zz\n", "one.csv": "x,y\n1,2\n", "lab.csv":
             "x,label\n1,0.5\n2,1\n", "empty.csv": ""}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match="data="):
            load_points(str(tmp_path / name))
    with pytest.raises(ConfigError, match="not a readable CSV"):
        load_points(str(tmp_path / "missing.csv"))


def test_collusion_error_is_what_the_budgets_predict():
    """Unprotected geometric budgets: the coalition's pooled error on the most-budgeted query is
    2 / (m eps_1^2) (m answers, each of variance 2/eps_1^2); within 3 SE over 20,000 trials."""
    c = CollusionConfig(method="geo", users=8, queries=10, trials=20_000)
    model = CollusionModel(c, 1).run()
    err = model.squared_error()
    eps1 = allocate("geo", 10, 1.0)[0]
    assert abs(err.mean() - 2 / (8 * eps1**2)) < 3 * err.std(ddof=1) / np.sqrt(err.size)
    assert len(model.users) == 8 and model.users[0].answers.shape == (20_000, 10)


def test_random_arrangement_defeats_the_targeted_query():
    base = CollusionModel(CollusionConfig(method="geo", trials=5000), 2).run()
    shuffled = CollusionModel(CollusionConfig(method="geo/random", trials=5000), 2).run()
    assert shuffled.squared_error().mean() > 2 * base.squared_error().mean()


def test_pooling_all_answers_is_the_inverse_variance_mean():
    c = CollusionConfig(method="avg", users=5, queries=4, pool="all", trials=20_000)
    err = CollusionModel(c, 3).run().squared_error()
    predicted = 2 * (4 / 1.0) ** 2 / 20  # one answer's variance over w m = 20 answers
    assert abs(err.mean() - predicted) < 3 * err.std(ddof=1) / np.sqrt(err.size)


def test_kmeans_is_reproducible_and_independent_of_the_block_size(monkeypatch):
    cfg = KMeansConfig(iterations=4, repetitions=6, method="flip-geo/perturb")
    a = DPKMeansModel(cfg, 9).run()
    monkeypatch.setattr(env_kmeans, "LABEL_BLOCK", 6500)  # one repetition per block
    b = DPKMeansModel(cfg, 9).run()
    assert b.block == 1
    np.testing.assert_array_equal(a.centroids, b.centroids)
    np.testing.assert_array_equal(a.scores(), b.scores())
    assert a.steps == 4 and a.results()["epsilon_spent"].iloc[-1] == pytest.approx(0.3)


def test_private_kmeans_approaches_lloyd_with_a_large_budget():
    """With a huge budget the noise vanishes: the runs end where noise-free Lloyd iterations
    from the same starts end (same F1 to 1e-6), and far above the runs at eps = 0.01. The one
    exception is Algorithm 1's own rule at a cluster of exactly one point: a noisy count below
    1 keeps the centroid, so a vanishing negative noise keeps what Lloyd moves (the real
    Unbalance has such clusters from some starts); those repetitions are the only ones that
    may differ."""
    from privgames.mechanisms.dp_kmeans import dp_iteration, nearest, weighted_f1

    rich = DPKMeansModel(KMeansConfig(epsilon=1e6, iterations=20, repetitions=20), 4)
    start = rich.centroids.copy()
    rich.run()
    points, labels = unbalance()
    c, singleton = start, np.zeros(20, dtype=bool)
    for _ in range(20):
        cells = nearest(points, c)
        singleton |= np.any([np.bincount(row, minlength=8) == 1 for row in cells], axis=1)
        c = dp_iteration(points, c, np.ones(20), np.zeros((20, 8)), np.zeros((20, 8, 2)))
    lloyd = weighted_f1(labels, nearest(points, c), 8)
    np.testing.assert_allclose(rich.scores()[~singleton], lloyd[~singleton], atol=1e-6)
    assert (~singleton).sum() >= 10  # 13 of 20 here
    poor = DPKMeansModel(KMeansConfig(epsilon=0.01, iterations=20, repetitions=20), 4).run()
    assert rich.scores().mean() > poor.scores().mean() + 0.1


def test_birch3_scores_by_nivc():
    """Eq (40) on unlabelled data: each repetition's NIVC is the mean squared distance of every
    point to the nearest of its final centroids (computed here point by point)."""
    model = DPKMeansModel(KMeansConfig(data="birch3", iterations=2, repetitions=2), 1).run()
    points = birch3()[0]
    nearest = [np.min(((points[:, None, :] - c[None]) ** 2).sum(axis=2), axis=1).mean()
               for c in model.centroids]
    assert model.score_name == "nivc"
    np.testing.assert_allclose(model.scores(), nearest, rtol=1e-9)


def test_analysts_learn_the_offline_best_for_sums():
    model = AnalystModel(AnalystConfig(strategies=("avg", "bl-taylor", "bisection"), rounds=150,
                                       analysts=10, offline_repetitions=200), 5).run()
    best = model.predicted()["best_arm"]
    assert model.config.strategies[best] == "avg"
    assert np.mean(model.favourites() == best) >= 0.9


@pytest.mark.parametrize("kwargs,needle", [
    ({"epsilon": 0.0}, "epsilon=0.0"), ({"iterations": 0}, "iterations=0"),
    ({"method": "geo/xx"}, "protection 'xx'"), ({"U_s": 1.0, "method": "ac-geo"}, "U_s=1.0"),
    ({"data": "nowhere.csv"}, "data="), ({"k": 0}, "k=0"),
])
def test_kmeans_bad_input(kwargs, needle):
    with pytest.raises(ConfigError) as err:
        KMeansConfig(**kwargs)
    assert needle in str(err.value)
