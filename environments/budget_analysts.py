"""Analysts who learn which budget strategy suits their task
(``papers/budget-allocation-series.txt``, sections 7.1-7.2: independent sum queries favour
the least total noise, iterative k-means favours other shapes).

Each round every analyst runs its workload once under the strategy it picks and observes the
utility; it learns by Thompson sampling (``privgames.agents.budget_agents``). The offline
ranking of the strategies (:meth:`AnalystModel.offline`) is computed separately, from its own
streams, and only used to measure regret.
"""

from __future__ import annotations

from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.budget_agents import Analyst, thompson_choices
from privgames.environments.base import Environment
from privgames.environments.budget_queries import check_series
from privgames.environments.config import ConfigError, Footprint, check_choice, check_int
from privgames.environments.kmeans_data import (
    DEFAULTS,
    assignment_points,
    check_data,
    load_points,
)
from privgames.environments.streams import Seed, child, generator, spawn
from privgames.mechanisms.budget import STRATEGIES, allocate, expected_mse
from privgames.mechanisms.dp_kmeans import dp_iteration, nearest, nivc, weighted_f1

TASKS = ("sum", "kmeans")


@dataclass(frozen=True)
class AnalystConfig:
    """Analysts learning a strategy.

    Attributes:
        task: ``sum`` (``N`` independent sum queries; utility: minus the log of the total
            squared noise over the average strategy's expectation: the log keeps a strategy
            with absurd budgets, like bisection over 50 queries, from swamping the learner with
            heavy-tailed rewards) or ``kmeans`` (DP k-means with ``N``
            iterations on ``data``; utility: weighted F1, or minus NIVC if unlabelled).
        strategies: the arms.
        analysts: learners (independent); rounds: workloads each.
        N: queries or iterations per workload (default: 50 sum queries, as in Table 2; 10
            k-means iterations); epsilon: total budget per workload (default: 1 for sums, the
            data set's for k-means).
        data, k: the k-means data set and clusters (``KMeansConfig``).
        offline_repetitions: runs per strategy for the offline ranking (k-means).
    """

    task: str = "sum"
    strategies: tuple[str, ...] = ("avg", "geo", "flip-geo", "ac-geo", "bl-taylor",
                                   "flip-taylor")
    analysts: int = 20
    rounds: int = 300
    N: int | None = None
    epsilon: float | None = None
    data: str = "unbalance"
    k: int | None = None
    offline_repetitions: int = 400

    def __post_init__(self) -> None:
        check_choice("task", self.task, TASKS)
        check_data(self.data)
        if isinstance(self.strategies, str) or not isinstance(self.strategies, tuple | list) \
                or len(self.strategies) < 2:
            raise ConfigError(f"strategies={self.strategies!r} is not allowed: strategies must "
                              f"be a list of at least two of {', '.join(STRATEGIES)}")
        for s in self.strategies:
            check_choice("strategies[]", s, STRATEGIES)
        object.__setattr__(self, "strategies", tuple(self.strategies))
        check_int("analysts", self.analysts, 1)
        check_int("rounds", self.rounds, 1)
        check_int("offline_repetitions", self.offline_repetitions, 2)
        if self.N is None:
            object.__setattr__(self, "N", 50 if self.task == "sum" else 10)
        if self.epsilon is None:
            object.__setattr__(self, "epsilon", 1.0 if self.task == "sum" else
                               DEFAULTS.get(self.data, {"epsilon": 0.3})["epsilon"])
        check_series("N", self.N, self.epsilon, None, None, None)
        if self.task == "kmeans":
            points, labels = load_points(self.data)
            if self.k is None:
                object.__setattr__(self, "k", DEFAULTS.get(self.data, {"k": 8})["k"])
            check_int("k", self.k, 1, points.shape[0])
        self.arm_budgets()

    def arm_budgets(self) -> NDArray:
        """Each arm's budget sequence ``(arms, N)``."""
        return np.stack([allocate(s, self.N, self.epsilon, n_name="N") for s in self.strategies])

    def footprint(self) -> Footprint:
        """k-means: one workload per analyst holds ``(analysts, points)`` labels; sums: the
        noise block; and the ``(rounds, analysts)`` choices. Work: draws or point-centroid
        distances over all rounds."""
        size = load_points(self.data)[0].shape[0] * (self.k or 8) if self.task == "kmeans" \
            else 1
        per = float(self.N) * size
        runs = self.analysts * self.rounds + len(self.strategies) * self.offline_repetitions
        workload = 8.0 * max(self.analysts, self.offline_repetitions) * per / max(self.N, 1)
        choices = 8.0 * self.rounds * self.analysts  # every round's choice, kept for the rows
        return Footprint(workload + choices + 1e6, runs * per,
                         "rounds" if choices > workload else "analysts")


class AnalystModel(Environment):
    """Analysts (Mesa agents, views of the tallies) learn a strategy by Thompson sampling.

    Attributes:
        pulls, total, total_sq: per analyst and arm: pulls, sum and sum of squares of the
            observed utilities.
        choices: ``(rounds, analysts)`` the arm each analyst played each round.
    """

    def __init__(self, config: AnalystConfig, seed: Seed = None) -> None:
        own, choice_seed, work_seed, self._offline_seed = spawn(seed, 4)
        super().__init__(config, own)
        c = config
        self.budgets = c.arm_budgets()
        arms = len(c.strategies)
        self.pulls = np.zeros((c.analysts, arms))
        self.total = np.zeros((c.analysts, arms))
        self.total_sq = np.zeros((c.analysts, arms))
        self.choices = np.zeros((c.rounds, c.analysts), dtype=int)
        self._choice_rng, self._work_rng = generator(choice_seed), generator(work_seed)
        self.scale = float(expected_mse(np.full(c.N, c.epsilon / c.N)))
        if c.task == "kmeans":
            self.points, self.labels = load_points(c.data)
            self._prepared = assignment_points(c.data)
        self.analysts = Analyst.create_agents(self, c.analysts, index=list(range(c.analysts)))
        self.datacollector = mesa.DataCollector(model_reporters={
            "mean_utility": lambda m: float(np.mean(m.last_utility))})
        self.last_utility = np.zeros(c.analysts)

    def utilities(self, arms: NDArray, rng: np.random.Generator) -> NDArray:
        """The observed utility of one workload per entry of ``arms`` (the arm it runs
        under), all at once: each run's budgets are its arm's."""
        b = self.budgets[arms]  # (runs, N)
        runs = arms.size
        if self.config.task == "sum":
            noise = rng.laplace(0.0, 1.0, b.shape) / b
            return -np.log(np.sum(noise * noise, axis=1) / self.scale)
        c = self.config
        d = self.points.shape[1]
        centroids = rng.uniform(-1.0, 1.0, (runs, c.k, d))
        for i in range(b.shape[1]):
            centroids = dp_iteration(self._prepared, centroids, b[:, i],
                                     rng.laplace(size=(runs, c.k)),
                                     rng.laplace(size=(runs, c.k, d)))
        if self.labels is None:
            return -nivc(self._prepared, centroids)
        return weighted_f1(self.labels, nearest(self.points, centroids), c.k)

    def step(self) -> None:
        """Every analyst picks an arm from its own tallies, runs its workload, observes (the
        workloads of all analysts run as one batch)."""
        arm = thompson_choices(self.pulls, self.total, self.total_sq, self._choice_rng)
        utility = self.utilities(arm, self._work_rng)
        rows = np.arange(arm.size)
        self.pulls[rows, arm] += 1
        self.total[rows, arm] += utility
        self.total_sq[rows, arm] += utility**2
        self.choices[self.steps - 1] = arm
        self.last_utility = utility
        self.datacollector.collect(self)

    def favourites(self) -> NDArray:
        """The arm each analyst ends up with (its most pulled)."""
        return np.array([a.favourite for a in self.analysts])

    def offline(self) -> tuple[NDArray, NDArray]:
        """Each arm's mean utility and its standard error, measured offline from
        ``offline_repetitions`` runs per arm (own streams)."""
        c = self.config
        stats = [self.utilities(np.full(c.offline_repetitions, a),
                                generator(child(self._offline_seed, a)))
                 for a in range(len(c.strategies))]
        return (np.array([s.mean() for s in stats]),
                np.array([s.std(ddof=1) / np.sqrt(s.size) for s in stats]))

    def predicted(self) -> dict:
        mean, se = self.offline()
        return {"offline_utility": mean, "offline_se": se, "best_arm": int(np.argmax(mean))}
