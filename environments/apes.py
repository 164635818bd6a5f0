"""Personalized-LDP federated learning with a shuffler: APES, S-APES and their baselines
(``papers/apes-shuffle-clip-laplace.txt``, Algorithms 1-2, Table 3).

``n`` users (Mesa agents, views of the model's arrays) each hold ``samples`` training samples
and a private budget ``eps_i``; every round they compute the gradient of a softmax logistic
regression at the global model (``d = classes x features``: 650 on scikit-learn's digits,
7,850 on MNIST), clip it to ``[-C, C]``, perturb every dimension with their own budget and
send value and budget to the shuffler, which permutes each dimension and the budget list; the
analyzer averages, calibrates and steps. Users are processed in ``groups`` (each group's noise
has its own stream per round), one after another or as Ray tasks: the same numbers either way.
The reports matrix ``(n, d)`` (a row per user, as sent) is the largest array; everything else is
per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.apes_agents import Analyzer, PLDPUser, Shuffler
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
    check_reals,
)
from privgames.environments.fl_training import BACKENDS, load_dataset
from privgames.environments.streams import Seed, child, generator, spawn
from privgames.environments.threads import one_thread
from privgames.mechanisms.noise import clip_laplace_sample, clip_laplace_zero, laplace_sample
from privgames.mechanisms.shuffle import DISTRIBUTIONS, accounting, personalized_budgets

FRAMEWORKS = ("non-private", "ldp-min", "pldp", "unis", "apes", "s-apes")
#: The frameworks without a shuffler: the analyzer receives the reports as the users sent them.
UNSHUFFLED = ("non-private", "ldp-min", "pldp")
SPARSIFY = ("post", "random")
CLASSES = 10
#: The local budgets' range of validity. Below ``MIN_BUDGET`` eq (1)'s closed form (the
#: analyzer's calibration) cancels, its relative error passing 1e-8 (5e-6 at 0.001, against
#: 50-digit arithmetic; Table 2's budgets are >= 0.05); above ``MAX_BUDGET`` the amplification
#: bounds' ``e^eps`` overflows (at 709).
MIN_BUDGET, MAX_BUDGET = 0.01, 700.0


@dataclass(frozen=True)
class APESConfig:
    """One federated run.

    Attributes:
        n: users. distribution: Table 2's budget distribution; budgets: the users' budgets
            instead (``n`` numbers > 0, or the path of a text/``.npy`` file of them).
        framework: ``non-private``, ``ldp-min`` (every user at the smallest budget, Laplace),
            ``pldp`` (own budgets, Laplace, no shuffler), ``unis`` (own budgets, Laplace,
            shuffler), ``apes`` (Clip-Laplace, shuffler, calibration), ``s-apes`` (APES with
            sparsification).
        C: clip bound of every gradient coordinate (``Delta f = 2C``, ``lambda_i = 2C/eps_i``).
        b_ratio: S-APES's share ``b/d`` of dimensions sent (``b = max(1, round(b_ratio d))``).
        sparsify: ``post`` (top-b after perturbation, Algorithm 2) or ``random``.
        rounds, lr: training rounds and step size. samples: training samples per user (drawn
            with replacement from half the data; the other half is the test set).
        data: ``None`` for scikit-learn's digits, or an MNIST ``.npz`` / IDX folder.
        delta_s, delta_prime: the shuffling bound's delta and Proposition 1's ``delta'``.
        groups: user groups (noise streams; Ray tasks; ``None``: 4, or ``n`` when fewer
            users); backend: ``vectorized`` or ``ray``.
    """

    n: int = 500
    distribution: str = "uniform2"
    budgets: tuple[float, ...] | str | None = None
    framework: str = "apes"
    C: float = 0.1
    b_ratio: float = 0.2
    sparsify: str = "post"
    rounds: int = 30
    lr: float = 1.0
    samples: int = 8
    data: str | None = None
    delta_s: float = 1e-8
    delta_prime: float = 1e-5
    groups: int | None = None
    backend: str = "vectorized"

    def __post_init__(self) -> None:
        check_int("n", self.n, 2, 10**6)
        check_choice("distribution", self.distribution, tuple(DISTRIBUTIONS))
        if self.budgets is not None:
            object.__setattr__(self, "budgets", _read_budgets(self.budgets, self.n))
        check_choice("framework", self.framework, FRAMEWORKS)
        check_real("C", self.C, 0.0, low_open=True)
        check_real("b_ratio", self.b_ratio, 0.0, 1.0, low_open=True)
        check_choice("sparsify", self.sparsify, SPARSIFY)
        check_int("rounds", self.rounds, 1)
        check_real("lr", self.lr, 0.0, low_open=True)
        check_int("samples", self.samples, 1, 10**4)
        if self.data is not None and (not isinstance(self.data, str)
                                      or not Path(self.data).exists()):
            raise ConfigError(f"data={self.data!r} does not exist: give an MNIST .npz file or "
                              "a folder with its IDX files (or leave it unset for the digits)")
        check_real("delta_s", self.delta_s, 0.0, 1.0, low_open=True, high_open=True)
        check_real("delta_prime", self.delta_prime, 0.0, 1.0, low_open=True, high_open=True)
        if self.groups is None:  # the default follows n, so that n < 4 needs no groups
            object.__setattr__(self, "groups", min(4, self.n))
        check_int("groups", self.groups, 1, self.n)
        check_choice("backend", self.backend, BACKENDS)

    @property
    def features(self) -> int:
        return 65 if self.data is None else 785

    @property
    def d(self) -> int:
        return CLASSES * self.features

    @property
    def b(self) -> int:
        """Dimensions each user sends (all but S-APES send all ``d``)."""
        return max(1, round(self.b_ratio * self.d)) if self.framework == "s-apes" else self.d

    def footprint(self) -> Footprint:
        """The ``(n, d)`` reports, a group's gradients and samples, the data. Work: draws."""
        group = math.ceil(self.n / self.groups)
        peak = (8.0 * self.d * self.n * 2 + 8.0 * group * (self.samples * self.features
                                                         + 4 * self.d) + 8.0 * 70_000 * 785)
        return Footprint(peak, 3.0 * self.rounds * self.n * self.d, "n")


def _read_budgets(value: object, n: int) -> tuple[float, ...]:
    """User-supplied budgets: a list of ``n`` numbers > 0, or a text / ``.npy`` file."""
    if isinstance(value, str):
        path = Path(value)
        try:
            values = (np.load(path) if path.suffix == ".npy" else np.loadtxt(path, ndmin=1))
            if np.asarray(values).dtype.kind not in "iuf":
                raise ValueError(f"it holds {np.asarray(values).dtype} values")
        except Exception as err:  # an untrusted file: numpy's parsers raise many kinds
            raise ConfigError(f"budgets={value!r} is not a readable file of numbers "
                              f"({type(err).__name__}: {err}): budgets must be a list of n "
                              "numbers > 0 or a text/.npy file of them") from None
        value = [float(v) for v in np.ravel(values)]
    values = check_reals("budgets", value, MIN_BUDGET, high=MAX_BUDGET)
    if len(values) != n:
        raise ConfigError(f"budgets has {len(values)} entries: it must have n={n}")
    return values


def softmax_gradients(w: NDArray, X: NDArray, y: NDArray) -> NDArray:
    """Per user, the cross-entropy gradient of ``softmax(X w^T)`` at ``w`` (``(classes,
    features)``) averaged over its samples: ``X`` ``(users, samples, features)``, labels ``y``
    ``(users, samples)``; returns ``(users, classes * features)``."""
    logits = X @ w.T
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    p[np.arange(y.shape[0])[:, None], np.arange(y.shape[1])[None, :], y] -= 1.0
    p /= X.shape[1]  # the average over samples, on the small factor
    g = p.transpose(0, 2, 1) @ X  # a batched matrix product: 3x einsum's speed
    return g.reshape(X.shape[0], -1)


def perturb(g: NDArray, eps: NDArray, config: APESConfig, rng: np.random.Generator,
            out: NDArray | None = None) -> NDArray:
    """A group's reports ``(users, d)``, into ``out`` when given (else a new array): each
    user's clipped gradient ``g`` (in ``[-C, C]``) perturbed per dimension with its own budget
    under its framework's mechanism (S-APES: Algorithm 2's top-b after perturbation, or random
    b, the rest replaced by perturbed zeros; random b are chosen before perturbing, so only
    they are drawn: the same law as perturbing all ``d`` and choosing after, with ``b/d`` of
    the draws)."""
    c = config
    f = c.framework
    out = np.empty(g.shape) if out is None else out
    e = eps[:, None]
    if f == "non-private":
        out[...] = g
    elif f in ("ldp-min", "pldp", "unis"):
        laplace_sample(g, e, c.C, rng, out)
    elif f == "apes":
        clip_laplace_sample(g, e, c.C, rng, out=out)
    else:
        if c.sparsify == "post":  # the top-b of the perturbed values: all d are perturbed
            perturbed = clip_laplace_sample(g, e, c.C, rng)
            keep = _largest(np.abs(perturbed, out=out), c.b)  # out is scratch until padded
            kept = perturbed.take(keep)
        else:  # b chosen at random, independently of g: only those b are perturbed
            keep = _largest(rng.random(g.shape), c.b)
            kept = clip_laplace_sample(g.take(keep), e, c.C, rng)
        clip_laplace_zero(e, c.C, g.shape, rng, out)
        np.put(out, keep, kept)
    return out


def _largest(score: NDArray, b: int) -> NDArray:
    """Per row, the flat indices (into the row-major array) of the ``b`` largest scores, in no
    order (flat: ``take`` and ``put`` then cost half of ``take_along_axis``'s)."""
    rows, d = score.shape
    return np.argpartition(score, d - b, axis=1)[:, d - b:] + d * np.arange(rows)[:, None]


def group_reports(w: NDArray, X: NDArray, y: NDArray, eps: NDArray, config: APESConfig,
                  seed: np.random.SeedSequence,
                  out: NDArray | None = None) -> tuple[NDArray, NDArray]:
    """One group's ``(reports, clipped gradients)`` for one round, from the group's own stream
    (one BLAS thread: the same bits in a Ray worker); the reports into ``out`` when given."""
    with one_thread():
        g = softmax_gradients(w, X, y)
        np.clip(g, -config.C, config.C, out=g)
    return perturb(g, eps, config, generator(seed), out), g


class APESModel(Environment):
    """Users, a shuffler and an analyzer training a logistic regression for ``rounds`` rounds.

    Attributes:
        budgets: the users' local budgets ``(n,)``; shuffled_budgets: as the analyzer sees them.
        reports: the last round's reports ``(n, d)``, a row per user as sent
            (:meth:`shuffled_reports`: as the analyzer receives them).
        w: the global model ``(classes, features)``; true_mean: the last round's average
            clipped gradient (for the estimator's error).
    """

    def __init__(self, config: APESConfig, seed: Seed = None) -> None:
        own, budget_seed, self.noise_seed, self.shuffle_seed = spawn(seed, 4)
        super().__init__(config, own)
        c = config
        x, labels = load_dataset(c.data)
        pool = self.rng.permutation(x.shape[0])
        train, test = np.array_split(pool, 2)
        self.data_x, self.data_y = x, labels
        self.user_samples = self.rng.choice(train, (c.n, c.samples))
        self.test_index = test
        self.budgets = (np.array(c.budgets) if c.budgets is not None
                        else personalized_budgets(c.distribution, c.n, generator(budget_seed)))
        if c.framework == "ldp-min":
            self.budgets = np.full(c.n, self.budgets.min())
        self.shuffled_budgets = self.budgets.copy()
        self.shuffler_rng = generator(self.shuffle_seed)
        self.w = np.zeros((CLASSES, x.shape[1]))
        self.reports = np.zeros((c.n, c.d))
        self.true_mean = np.zeros(c.d)
        self.gradient_error = math.nan
        self.groups = [slice(int(p[0]), int(p[-1]) + 1)
                       for p in np.array_split(np.arange(c.n), c.groups)]  # consecutive users
        self.group_data = [(x[self.user_samples[p]], labels[self.user_samples[p]])
                           for p in self.groups]  # each group's samples, gathered once
        self.users = PLDPUser.create_agents(self, c.n, index=list(range(c.n)))
        self.shuffler = Shuffler(self)
        self.analyzer = Analyzer(self)
        self.datacollector = mesa.DataCollector(model_reporters={
            "test_accuracy": APESModel.test_accuracy,
            "gradient_error": lambda m: m.gradient_error})

    def step(self) -> None:
        """One round: reports, shuffle (skipped by PLDP and LDP-Min: no shuffler), analysis."""
        self.collect_reports(self.steps - 1)
        if self.config.framework not in UNSHUFFLED:
            self.shuffler.shuffle()
        self.analyzer.aggregate()
        self.datacollector.collect(self)

    def collect_reports(self, round_: int) -> None:
        """Every group's reports into ``reports`` (a group's rows, in place: no transposed
        copy of the ``n x d`` reports)."""
        c = self.config
        jobs = [(self.w, X, y, self.budgets[p], c, child(self.noise_seed, round_, k))
                for k, (p, (X, y)) in enumerate(zip(self.groups, self.group_data, strict=True))]
        if c.backend == "ray":
            from privgames.environments.ray_session import ensure_ray

            ray = ensure_ray()
            task = ray.remote(group_reports)
            results = ray.get([task.remote(*job) for job in jobs])
            for p, (rep, _) in zip(self.groups, results, strict=True):
                self.reports[p] = rep
        else:  # each group writes its rows of the reports: no copy
            results = [group_reports(*job, self.reports[p])
                       for job, p in zip(jobs, self.groups, strict=True)]
        clean = np.zeros(c.d)
        for _, g in results:
            clean += g.sum(axis=0)
        self.true_mean = clean / c.n

    def permutation_stream(self) -> np.random.Generator:
        """The shuffler's stream for this round's reports (its own child of the shuffle seed,
        so reading the shuffled reports never moves another stream)."""
        return generator(child(self.shuffle_seed, 1, self.steps))

    def shuffled_reports(self) -> NDArray:
        """The last round's reports as the analyzer receives them: shuffled within each
        dimension by the shuffler, as sent by the users where the framework has none."""
        if self.config.framework in UNSHUFFLED:
            return self.reports
        return self.shuffler.shuffled()

    def estimate(self, mean: NDArray) -> NDArray:
        """The analyzer's gradient estimate from the per-dimension means: calibrated by eq (1)
        with the shuffled budgets under Clip-Laplace, the plain mean under Laplace or without
        noise.

        S-APES with random sparsification divides the mean by the ``b/d`` share of real values
        (the padding's dummies have mean 0), which makes it unbiased. With top-b (``post``) it
        does not: the kept values are the largest perturbed ones, not a random share, and the
        rescale made the gradient's RMS error 3-4 times larger at every budget we measured
        (``docs/errata.md``, S-APES analyzer)."""
        c = self.config
        if c.framework not in ("apes", "s-apes"):
            return mean
        scale = c.d / c.b if c.framework == "s-apes" and c.sparsify == "random" else 1.0
        return self.analyzer.calibration()(mean * scale)

    def test_accuracy(self) -> float:
        return float(self.test_correct().mean())

    def test_correct(self) -> NDArray:
        """Per test sample: 1 if the global model classifies it right."""
        x = self.data_x[self.test_index]
        return (np.argmax(x @ self.w.T, axis=1) == self.data_y[self.test_index]).astype(float)

    def predicted(self) -> dict:
        """The privacy accounting of this run's budgets (``mechanisms.shuffle.accounting``)."""
        c = self.config
        return accounting(self.budgets, c.framework, c.d, c.b, c.delta_s, c.delta_prime)
