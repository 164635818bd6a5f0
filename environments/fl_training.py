"""Federated training with noisy clients: the pricing paper's squared-SVM on real data.

Clients (Mesa agents over the model's arrays) each hold ``train`` and ``test`` samples drawn
with replacement from a data set (scikit-learn's ``load_digits`` by default, or an MNIST file
the user points to), as a binary task (even vs odd digit). Every round each client trains
locally from the global model and uploads with its own Gaussian noise; the server aggregates by
the mean (eq 7) or MLE (eq 8) rule. ``backend="ray"`` runs groups of clients as Ray actors (the
shape of Flower's simulation engine) and gives the same numbers as the vectorised path.
Paper: ``papers/pricing-fl-noise.txt``, sections III-A and IV.
"""

from __future__ import annotations

import functools
import gzip
import math
from dataclasses import dataclass
from pathlib import Path

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
)
from privgames.environments.streams import Seed, child, generator, spawn
from privgames.environments.threads import one_thread
from privgames.mechanisms.fl_training import (
    accuracy,
    aggregate,
    local_updates,
    smoothness,
    svm_loss_and_gradient,
)
from privgames.mechanisms.pricing import AGGREGATIONS, error_scale, loss_bound

BACKENDS = ("vectorized", "ray")


def load_dataset(path: str | None) -> tuple[NDArray, NDArray]:
    """Features in [0, 1] with a bias column, and digit labels: scikit-learn's ``load_digits``
    (``path=None``), or an MNIST ``.npz`` (arrays ``x_train, y_train[, x_test, y_test]``) or a
    folder of the four IDX files (gzipped or not)."""
    if path is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        x, labels = digits.data / 16.0, digits.target
    else:
        x, labels = _read_mnist(Path(path))
        _check_arrays(x, labels, path)
        x = x.reshape(x.shape[0], -1) / 255.0
    return np.hstack([x, np.ones((x.shape[0], 1))]), np.asarray(labels, dtype=int)


def _check_arrays(x: NDArray, labels: NDArray, path: str) -> None:
    """Images ``(N, ...)`` of pixels in [0, 255] and ``N`` integer labels, ``N >= 2`` (half
    the pool trains, half tests)."""
    where = f"data={path!r}"
    if x.ndim < 2 or labels.ndim != 1 or x.shape[0] != labels.shape[0] or x.shape[0] < 2:
        raise ConfigError(f"{where} holds images of shape {x.shape} and labels of shape "
                          f"{labels.shape}: it needs N >= 2 images (N, ...) and N labels")
    if x.dtype.kind not in "iuf" or labels.dtype.kind not in "iu":
        raise ConfigError(f"{where} holds {x.dtype} images and {labels.dtype} labels: it needs "
                          "numeric pixels and integer labels")
    if not (np.all(np.isfinite(x)) and x.min() >= 0 and x.max() <= 255):
        raise ConfigError(f"{where}: its pixels must be numbers in [0, 255]")


@functools.lru_cache(maxsize=4)
def _checked_file(path: str, mtime_ns: int, size: int) -> None:
    """Read ``path`` once per version of the file, for its errors (the arrays are not kept)."""
    load_dataset(path)


def _read_mnist(path: Path) -> tuple[NDArray, NDArray]:
    if not path.exists():
        raise ConfigError(f"data={str(path)!r} does not exist: give an MNIST .npz file or a "
                          "folder with its IDX files")
    try:
        if path.is_dir():
            images = sorted(p for p in path.iterdir() if "images" in p.name and "idx3" in p.name)
            labels = sorted(p for p in path.iterdir() if "labels" in p.name and "idx1" in p.name)
            if not images or len(images) != len(labels):
                raise ConfigError("no matching *images*idx3* / *labels*idx1* files")
            return (np.concatenate([_idx(p) for p in images]),
                    np.concatenate([_idx(p) for p in labels]))
        with np.load(path) as f:
            xs = [f[k] for k in ("x_train", "x_test") if k in f]
            ys = [f[k] for k in ("y_train", "y_test") if k in f]
            if not xs or len(xs) != len(ys):
                raise ConfigError("expected arrays x_train, y_train (and x_test, y_test)")
            return np.concatenate(xs), np.concatenate(ys)
    except Exception as err:  # an untrusted file: numpy's, zip's and gzip's parsers raise
        why = err if isinstance(err, ConfigError) else f"{type(err).__name__}: {err}"
        raise ConfigError(f"data={str(path)!r} is not an MNIST file: {why}") from None


def _idx(path: Path) -> NDArray:
    """An IDX array (the MNIST distribution format)."""
    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ConfigError(f"{path.name} is not an unsigned-byte IDX file")
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims)
    if data.size != math.prod(shape):
        raise ConfigError(f"{path.name} is truncated")
    return data.reshape(shape)


@dataclass(frozen=True)
class TrainingConfig:
    """Parameters of one federated training run.

    Attributes:
        N: clients (>= 2). sigma: the clients' noise levels, one number or N numbers >= 0
            (``inf``: opted out); by default the first half of the clients add ``sigma_low``
            and the others ``sigma_high`` (heterogeneous noise).
        aggregation: ``mle`` or ``mean``. rounds: training rounds ``T``; steps: local gradient
            steps per round; lam: the loss's ``lambda``; lr: step size as a fraction of
            ``1 / L_F``.
        train, test: samples per client (drawn with replacement). data: ``None`` for
            scikit-learn's digits, or a path to an MNIST ``.npz`` file or IDX folder.
        backend: ``vectorized`` or ``ray`` (groups of clients as Ray actors); groups: actors.
    """

    N: int = 10
    sigma: float | tuple[float, ...] | None = None
    sigma_low: float = 0.01
    sigma_high: float = 0.3
    aggregation: str = "mle"
    rounds: int = 30
    steps: int = 5
    lam: float = 0.01
    lr: float = 1.0
    train: int = 1000
    test: int = 1000
    data: str | None = None
    backend: str = "vectorized"
    groups: int = 2

    def footprint(self) -> Footprint:
        """Every client's train and test samples (``d`` = 65 for the digits, 785 for MNIST),
        with the data set itself. Work: gradient terms of the local steps."""
        d = 65 if self.data is None else 785
        peak = 8.0 * self.N * (self.train + self.test) * d * 2 + 8.0 * 70_000 * d
        work = self.rounds * self.N * self.steps * self.train * d * 4.0
        return Footprint(peak, work, "N" if self.N >= self.train else "train")

    def __post_init__(self) -> None:
        check_int("N", self.N, 2)
        if self.sigma is not None:
            values = self.sigma if isinstance(self.sigma, list | tuple) else [self.sigma] * self.N
            if len(values) != self.N:
                raise ConfigError(f"sigma has {len(values)} entries: give one number or N={self.N}")
            for i, v in enumerate(values):
                if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v < 0:
                    raise ConfigError(f"sigma[{i}]={v!r} is out of range: sigma must be a number "
                                      ">= 0 (inf: opted out)")
            object.__setattr__(self, "sigma", tuple(float(v) for v in values))
        check_real("sigma_low", self.sigma_low, 0.0)
        check_real("sigma_high", self.sigma_high, 0.0)
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        check_int("rounds", self.rounds, 1)
        check_int("steps", self.steps, 1)
        check_real("lam", self.lam, 0.0, low_open=True)
        check_real("lr", self.lr, 0.0, 1.0, low_open=True)
        check_int("train", self.train, 1)
        check_int("test", self.test, 1)
        if self.data is not None and not isinstance(self.data, str):
            raise ConfigError(f"data={self.data!r} is not a path: data must be the path of an "
                              "MNIST .npz file or IDX folder")
        if self.data is not None and not Path(self.data).exists():
            raise ConfigError(f"data={self.data!r} does not exist: give an MNIST .npz file or "
                              "a folder with its IDX files")
        if self.data is not None:  # read before any run starts: a bad file is one line
            info = Path(self.data).stat()
            _checked_file(self.data, info.st_mtime_ns, info.st_size)
        check_choice("backend", self.backend, BACKENDS)
        check_int("groups", self.groups, 1, self.N)

    def noise(self) -> NDArray:
        if self.sigma is not None:
            return np.array(self.sigma)
        half = self.N // 2
        return np.array([self.sigma_low] * half + [self.sigma_high] * (self.N - half))


class TrainingClient(mesa.Agent):
    """A client: its data and noise live in the model's arrays at its ``index``."""

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    @property
    def sigma(self) -> float:
        return float(self.model.sigma[self.index])


def _client_noise(seed: np.random.SeedSequence, index: int, round_: int, d: int) -> NDArray:
    """Client ``index``'s standard normal noise of round ``round_``: its own stream, so any
    grouping of clients draws the same numbers."""
    return generator(child(seed, index, round_)).standard_normal(d)


def _distinct_rows(index: NDArray, x: NDArray,
                   labels: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """The samples ``x[index]`` (drawn with replacement) as distinct rows, their labels and
    multiplicities: the global loss and accuracy are means over them."""
    rows, counts = np.unique(index, return_counts=True)
    return x[rows], labels[rows], counts


class TrainingGroup:
    """A Ray actor holding a group of clients' data (Flower's simulation shape)."""

    def __init__(self, X: NDArray, y: NDArray, index: NDArray, seed: np.random.SeedSequence,
                 lam: float, lr: float, steps: int) -> None:
        self.X, self.y, self.index, self.seed = X, y, index, seed
        self.lam, self.lr, self.steps = lam, lr, steps

    def updates(self, w: NDArray, sigma: NDArray, round_: int) -> NDArray:
        with one_thread():
            local = local_updates(w, self.X, self.y, self.lam, self.lr, self.steps)
        noise = np.stack([_client_noise(self.seed, int(i), round_, w.size) for i in self.index])
        return local + np.where(np.isfinite(sigma), sigma, 0.0)[:, None] * noise


class FederatedTrainingModel(Environment):
    """Federated rounds of noisy local training, aggregated by the mean or MLE rule.

    Attributes:
        X, y: training data ``(N, train, d)`` and labels in {-1, +1}; ``X_test``, ``y_test``.
        train_rows, test_rows: the same samples as distinct rows, labels and multiplicities.
        sigma: the clients' noise levels; w: the global model.
        L_F: the loss's smoothness bound; w_star, loss_star: the noise-free optimum of the
            global loss (centralised gradient descent), for the gap and the bound of eq (9).
    """

    def __init__(self, config: TrainingConfig, seed: Seed = None) -> None:
        own, self.noise_seed = spawn(seed, 2)
        super().__init__(config, own)
        c = config
        x, digits = load_dataset(c.data)
        labels = np.where(digits % 2 == 0, 1.0, -1.0)  # even vs odd
        pool = self.rng.permutation(x.shape[0])
        train_pool, test_pool = np.array_split(pool, 2)
        tr = self.rng.choice(train_pool, (c.N, c.train))
        te = self.rng.choice(test_pool, (c.N, c.test))
        self.X, self.y = x[tr], labels[tr]
        self.X_test, self.y_test = x[te], labels[te]
        self.train_rows = _distinct_rows(tr, x, labels)
        self.test_rows = _distinct_rows(te, x, labels)
        self.sigma = c.noise()
        with one_thread():  # the same bits in a Ray worker (see step)
            self.L_F = smoothness(self.X, c.lam)
            self.w_star, self.loss_star = self._optimum()
        self.lr = c.lr / self.L_F
        self.w = np.zeros(x.shape[1])
        self._loss_of, self._loss = None, math.nan
        self.clients = TrainingClient.create_agents(self, c.N, index=list(range(c.N)))
        self._groups = None
        self.datacollector = mesa.DataCollector(model_reporters={
            "loss": lambda m: m.loss(), "loss_gap": lambda m: m.loss() - m.loss_star,
            "accuracy": lambda m: m.test_accuracy()})

    def _optimum(self) -> tuple[NDArray, float]:
        """The noise-free global optimum (L-BFGS on the strongly convex loss)."""
        from scipy.optimize import minimize

        X, y, counts = self.train_rows
        res = minimize(svm_loss_and_gradient, np.zeros(X.shape[1]),
                       args=(X, y, self.config.lam, counts), jac=True, method="L-BFGS-B",
                       options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
        return res.x, float(res.fun)

    def loss(self) -> float:
        """The global loss ``F`` of the current model on all clients' training data (computed
        once per model: the round's ``loss`` and ``loss_gap`` both report it)."""
        if self._loss_of is not self.w:
            self._loss_of = self.w
            X, y, counts = self.train_rows
            self._loss = svm_loss_and_gradient(self.w, X, y, self.config.lam, counts)[0]
        return self._loss

    def test_accuracy(self) -> float:
        return accuracy(self.w, *self.test_rows)

    def test_correct(self) -> NDArray:
        """Per test sample (all clients'): 1 if the global model classifies it right."""
        X = self.X_test.reshape(-1, self.X.shape[-1])
        return (np.sign(X @ self.w) == self.y_test.ravel()).astype(float)

    def step(self) -> None:
        """One round: local training, noisy uploads, aggregation. BLAS runs on one thread so
        that the sums are added in the same order in a Ray worker (which Ray limits to one
        thread) as here: the same seed gives the same bits on any backend."""
        with one_thread():
            self.w = aggregate(self.updates(self.steps - 1), self.sigma,
                               self.config.aggregation)
            self.datacollector.collect(self)

    def updates(self, k: int) -> NDArray:
        """Round ``k``'s noisy uploads of every client, ``(N, d)`` (call under one BLAS
        thread, as :meth:`step` does, for backend-independent bits)."""
        c = self.config
        if c.backend == "ray":
            return self._ray_updates(k)
        local = local_updates(self.w, self.X, self.y, c.lam, self.lr, c.steps)
        noise = np.stack([_client_noise(self.noise_seed, i, k, self.w.size) for i in range(c.N)])
        return local + np.where(np.isfinite(self.sigma), self.sigma, 0.0)[:, None] * noise

    def _ray_updates(self, k: int) -> NDArray:
        from privgames.environments.ray_session import ensure_ray

        ray = ensure_ray()
        c = self.config
        parts = np.array_split(np.arange(c.N), c.groups)
        if self._groups is None:
            actor = ray.remote(TrainingGroup)
            self._groups = [actor.remote(self.X[p], self.y[p], p, self.noise_seed, c.lam,
                                         self.lr, c.steps) for p in parts]
        return np.concatenate(ray.get([g.updates.remote(self.w, self.sigma[p], k)
                                       for g, p in zip(self._groups, parts, strict=True)]))

    def close(self) -> None:
        """Release the Ray actors (the vectorised backend holds none)."""
        if self._groups is not None:
            import ray

            for g in self._groups:
                ray.kill(g)
            self._groups = None

    def predicted(self) -> dict[str, float]:
        """Eq (9)'s bound on ``F(w^T) - F(w*)`` for the configured noise and rule, with
        ``kappa = 16 ||w^0 - w*||``."""
        kappa = 16.0 * float(np.linalg.norm(self.w_star))
        delta = float(error_scale(self.sigma, self.config.aggregation))
        return {"bound": float(loss_bound(delta, kappa, self.L_F)), "delta": delta,
                "kappa": kappa, "L_F": self.L_F}
