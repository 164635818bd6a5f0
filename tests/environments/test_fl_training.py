"""Federated training of the squared-SVM with noisy clients, on scikit-learn's digits."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.fl_training import (
    FederatedTrainingModel,
    TrainingConfig,
    load_dataset,
)
from privgames.mechanisms.fl_training import (
    accuracy,
    aggregate,
    svm_gradient,
    svm_loss,
    svm_loss_and_gradient,
)


def test_gradient_is_the_derivative_of_the_loss():
    rng = np.random.default_rng(0)
    X, y, w = rng.normal(size=(50, 4)), rng.choice([-1.0, 1.0], 50), rng.normal(size=4)
    h = 1e-6
    numeric = [(svm_loss(w + h * e, X, y, 0.1) - svm_loss(w - h * e, X, y, 0.1)) / (2 * h)
               for e in np.eye(4)]
    np.testing.assert_allclose(svm_gradient(w, X, y, 0.1), numeric, rtol=1e-6, atol=1e-9)


def test_loss_on_distinct_rows_with_counts_is_the_loss_on_the_repeated_samples():
    """The optimum's fused pass over distinct rows weighted by their multiplicities gives the
    loss and gradient of the data set with every row repeated that many times."""
    rng = np.random.default_rng(2)
    X, y, w = rng.normal(size=(30, 4)), rng.choice([-1.0, 1.0], 30), rng.normal(size=4)
    counts = rng.integers(1, 6, 30)
    Xr, yr = np.repeat(X, counts, axis=0), np.repeat(y, counts)
    loss, gradient = svm_loss_and_gradient(w, X, y, 0.1, counts)
    assert loss == pytest.approx(float(svm_loss(w, Xr, yr, 0.1)), rel=1e-13)
    np.testing.assert_allclose(gradient, svm_gradient(w, Xr, yr, 0.1), rtol=1e-12, atol=1e-15)
    assert accuracy(w, X, y, counts) == np.mean(np.sign(Xr @ w) == yr)


def test_mle_aggregate_is_the_minimum_variance_combination():
    """Simulated noisy uploads of one true value: the MLE rule's error variance is
    (sum sigma^-2)^-1, below the mean's sum sigma^2 / N^2 (3 SE of 20,000 draws)."""
    rng = np.random.default_rng(1)
    sigma = np.array([0.1, 0.5, 2.0])
    draws = rng.standard_normal((20_000, 3, 1)) * sigma[:, None]
    mle = np.array([aggregate(u, sigma, "mle")[0] for u in draws])
    mean = np.array([aggregate(u, sigma, "mean")[0] for u in draws])
    for est, var in ((mle, 1 / np.sum(sigma**-2)), (mean, np.sum(sigma**2) / 9)):
        assert abs(est.var(ddof=1) - var) < 3 * var * np.sqrt(2 / (est.size - 1))


def test_noise_free_training_approaches_the_optimum_within_the_bound():
    m = FederatedTrainingModel(TrainingConfig(sigma=0.0, rounds=30), seed=0).run()
    r = m.results()
    assert r["loss_gap"].iloc[-1] < r["loss_gap"].iloc[0] / 5
    assert r["accuracy"].iloc[-1] > 0.85
    assert m.predicted()["bound"] == 0.0 or r["loss_gap"].iloc[-1] >= 0


def test_mle_is_no_worse_than_the_mean_with_heterogeneous_noise():
    """Same data and noise draws (one seed) for both rules: with half the clients 100 times
    noisier, MLE's test accuracy is at least the mean's."""
    acc = {}
    for rule in ("mle", "mean"):
        m = FederatedTrainingModel(TrainingConfig(aggregation=rule, sigma_high=1.0), seed=2)
        acc[rule] = m.run().test_accuracy()
    assert acc["mle"] >= acc["mean"]


@pytest.mark.ray
def test_ray_groups_give_the_vectorised_numbers(ray_session):
    a = FederatedTrainingModel(TrainingConfig(rounds=4), seed=3).run()
    b = FederatedTrainingModel(TrainingConfig(rounds=4, backend="ray", groups=3), seed=3)
    try:
        b.run()
    finally:
        b.close()
    np.testing.assert_array_equal(a.w, b.w)
    pd.testing.assert_frame_equal(a.results(), b.results(), check_exact=True)


def test_a_user_supplied_mnist_idx_folder_is_read(tmp_path):
    """The IDX format (MNIST's distribution format), written here for 20 tiny images."""
    rng = np.random.default_rng(4)
    images = rng.integers(0, 256, (20, 3, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 20, dtype=np.uint8)
    header = bytes([0, 0, 8, 3]) + b"".join(int(n).to_bytes(4, "big") for n in (20, 3, 3))
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as f:
        f.write(header + images.tobytes())
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(
        bytes([0, 0, 8, 1]) + (20).to_bytes(4, "big") + labels.tobytes())
    x, y = load_dataset(str(tmp_path))
    assert x.shape == (20, 10) and np.all(x[:, -1] == 1)
    np.testing.assert_allclose(x[:, :9], images.reshape(20, 9) / 255)
    np.testing.assert_array_equal(y, labels)


@pytest.mark.parametrize("kwargs,message", [
    ({"N": 1}, r"N=1 is out of range"),
    ({"sigma": [0.1, -1.0], "N": 2}, r"sigma\[1\]=-1.0 is out of range"),
    ({"aggregation": "median"}, r"aggregation='median' is not allowed"),
    ({"data": "/nonexistent/mnist.npz"}, r"data='/nonexistent/mnist.npz' does not exist"),
    ({"groups": 11}, r"groups=11 is out of range"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainingConfig(**kwargs)


def test_malformed_data_file(tmp_path):
    bad = tmp_path / "mnist.npz"
    np.savez(bad, images=np.zeros(3))
    with pytest.raises(ConfigError, match=r"is not an MNIST file: expected arrays x_train"):
        FederatedTrainingModel(TrainingConfig(data=str(bad)), seed=0)


def test_global_loss_and_accuracy_are_means_over_every_clients_samples():
    """The model's distinct-row shortcut reports the mean over all clients' samples."""
    m = FederatedTrainingModel(TrainingConfig(N=6, rounds=2, train=300, test=200), seed=4).run()
    assert m.loss() == pytest.approx(float(np.mean(svm_loss(m.w, m.X, m.y, m.config.lam))),
                                     rel=1e-12)
    assert m.test_accuracy() == m.test_correct().mean()
    assert m.loss_star <= m.loss()
