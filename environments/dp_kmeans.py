"""DP k-means under a budget strategy (``papers/budget-allocation-series.txt``, section 7.2,
Algorithm 1): ``repetitions`` independent runs at once, one Mesa step per iteration.

The kernel (``privgames.mechanisms.dp_kmeans``) is vectorised over points and repetitions; the
model walks the repetitions in blocks so that memory stays bounded at any size.
"""

from __future__ import annotations

from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.environments.base import Environment
from privgames.environments.budget_queries import check_series
from privgames.environments.config import Footprint, check_bool, check_int
from privgames.environments.kmeans_data import (
    DEFAULTS,
    assignment_points,
    check_data,
    load_points,
)
from privgames.environments.streams import Seed, generator, spawn
from privgames.mechanisms.budget import allocate, parse_method, protect
from privgames.mechanisms.dp_kmeans import dp_iteration, nearest, nivc, weighted_f1

#: Largest ``(repetitions, points)`` label block held at once (entries): 64 MiB.
LABEL_BLOCK = 8 * 2**20


@dataclass(frozen=True)
class KMeansConfig:
    """One DP k-means setting.

    Attributes:
        data: ``unbalance`` (labelled, scored by weighted F1), ``birch3`` (100,000 points,
            scored by NIVC) or the path of a CSV of points (a ``label`` column makes it
            labelled).
        k: clusters (default: 8 for unbalance, 20 for birch3, the number of labels of a
            labelled CSV, else 8).
        epsilon: total budget (default: the paper's, 0.3 for unbalance, 0.5 for birch3; 0.3).
        iterations: the total number of iterations ``N`` the budget is split over.
        method: strategy, optionally ``/protection`` (``flip-geo/perturb``).
        repetitions: independent runs.
        U_s, r, t: the strategy's parameters (``privgames.mechanisms.budget.allocate``).
        epsilon_n, positive: noisy-n's parameters (``protect``).
    """

    data: str = "unbalance"
    k: int | None = None
    epsilon: float | None = None
    iterations: int = 10
    method: str = "avg"
    repetitions: int = 100
    U_s: float | None = None
    r: float | None = None
    t: float | None = None
    epsilon_n: float | None = None
    positive: bool = True

    def __post_init__(self) -> None:
        points, labels = load_points(check_data(self.data))
        default = DEFAULTS.get(self.data, {"k": (int(labels.max()) + 1 if labels is not None
                                                 else 8), "epsilon": 0.3})
        if self.k is None:
            object.__setattr__(self, "k", default["k"])
        if self.epsilon is None:
            object.__setattr__(self, "epsilon", default["epsilon"])
        check_int("k", self.k, 1, points.shape[0])
        check_series("iterations", self.iterations, self.epsilon, self.r, self.t, self.U_s)
        check_int("repetitions", self.repetitions, 1)
        check_bool("positive", self.positive)
        self.budgets()

    def budgets(self) -> NDArray:
        """The announced budget sequence of the ``iterations`` iterations."""
        return allocate(parse_method(self.method)[0], self.iterations, self.epsilon, self.r,
                        self.t, self.U_s, "iterations")

    def footprint(self) -> Footprint:
        """A label block (at most 64 MiB), the score block (8 MiB), the points and the
        centroids; work: point-centroid distances."""
        n, d = load_points(self.data)[0].shape
        peak = (min(8.0 * self.repetitions * n, 8.0 * LABEL_BLOCK) + 8 * 2**20 + 32.0 * n * d
                + 48.0 * self.repetitions * self.k * (d + 1))
        return Footprint(peak, float(self.repetitions) * self.iterations * n * self.k,
                         "repetitions")


class DPKMeansModel(Environment):
    """``repetitions`` runs of Algorithm 1, each with its own (protected) budget sequence and
    its own data-independent start (centroids uniform in ``[-1, 1]^d``).

    Attributes:
        points, labels: the scaled data and its labels (``None``: unlabelled).
        budgets: ``(repetitions, iterations)`` budgets after protection.
        centroids: ``(repetitions, k, d)``.
    """

    def __init__(self, config: KMeansConfig, seed: Seed = None) -> None:
        own, start_seed, protection_seed, noise_seed = spawn(seed, 4)
        super().__init__(config, own)
        c = config
        self.points, self.labels = load_points(c.data)
        self._prepared = assignment_points(c.data)
        strategy, protection = parse_method(c.method)
        rows = np.broadcast_to(c.budgets(), (c.repetitions, c.iterations))
        self.budgets = protect(rows, protection, generator(protection_seed), strategy=strategy,
                               epsilon_n=c.epsilon_n, positive=c.positive, r=c.r, t=c.t,
                               U_s=c.U_s)
        d = self.points.shape[1]
        self.centroids = generator(start_seed).uniform(-1.0, 1.0, (c.repetitions, c.k, d))
        self._noise = generator(noise_seed)
        self.block = max(1, LABEL_BLOCK // self.points.shape[0])
        self.datacollector = mesa.DataCollector(model_reporters={
            "epsilon_spent": lambda m: float(np.mean(m.budgets[:, : m.steps].sum(axis=1)))})

    def rounds_left(self) -> int:
        return self.config.iterations - self.steps

    def step(self) -> None:
        """One iteration in every repetition (block by block)."""
        R, k, d = self.centroids.shape
        i = self.steps - 1  # Mesa counts the step before calling it
        count_noise = self._noise.laplace(size=(R, k))
        sum_noise = self._noise.laplace(size=(R, k, d))
        for lo in range(0, R, self.block):
            part = slice(lo, lo + self.block)
            self.centroids[part] = dp_iteration(self._prepared, self.centroids[part],
                                                self.budgets[part, i], count_noise[part],
                                                sum_noise[part])
        self.datacollector.collect(self)

    def scores(self) -> NDArray:
        """Each repetition's weighted F1 (labelled data) or NIVC (unlabelled)."""
        out = []
        for lo in range(0, self.centroids.shape[0], self.block):
            c = self.centroids[lo: lo + self.block]
            out.append(nivc(self._prepared, c) if self.labels is None else
                       weighted_f1(self.labels, nearest(self.points, c), self.config.k))
        return np.concatenate(out)

    @property
    def score_name(self) -> str:
        return "nivc" if self.labels is None else "f1"

    def predicted(self) -> dict:
        """What the budgets predict: the expected squared noise of the last iteration's
        centroid count, ``2 (2/eps_N)^2``, averaged over repetitions (the paper's stability
        argument, section 7.2.3)."""
        return {"last_count_noise_var": float(np.mean(8.0 / self.budgets[:, -1] ** 2))}
