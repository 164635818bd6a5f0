"""Agents of the budget-allocation environments (``papers/budget-allocation-series.txt``):
colluding users (section 6.1) and analysts who learn which allocation strategy suits their task.

Agents are views: their state lives in the model's arrays, indexed by ``index``.
"""

from __future__ import annotations

import mesa
import numpy as np
from numpy.typing import NDArray


class ColludingUser(mesa.Agent):
    """A user who submits the coalition's ``w`` queries under its own total budget and shares
    its noisy answers with the other colluders (section 6.1).

    Attributes:
        index: its row in the model's ``(trials, users, queries)`` arrays.
    """

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    @property
    def budgets(self) -> NDArray:
        """Its budget sequence in each trial ``(trials, w)`` (after its protection)."""
        return self.model.budgets[:, self.index]

    @property
    def answers(self) -> NDArray:
        """Its noisy answers in each trial ``(trials, w)``."""
        return self.model.answers[:, self.index]


class Analyst(mesa.Agent):
    """An analyst who runs a workload under a total budget each round and learns, from the
    utility it observes, which allocation strategy to use (Gaussian Thompson sampling over the
    strategies: each arm's posterior mean is its observed mean utility, its spread the
    standard error; every arm is tried twice first). It never sees the offline ranking.

    Attributes:
        index: its row in the model's ``(analysts, arms)`` tallies.
    """

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    @property
    def favourite(self) -> int:
        """The arm it has pulled most: the strategy it ends up with."""
        return int(np.argmax(self.model.pulls[self.index]))


def thompson_choices(pulls: NDArray, total: NDArray, total_sq: NDArray,
                     rng: np.random.Generator, warmup: int = 2) -> NDArray:
    """Each analyst's next arm ``(analysts,)`` from its own tallies ``(analysts, arms)``: an
    arm tried fewer than ``warmup`` times first, else the largest draw from
    ``N(mean, var / pulls)`` with the arm's sample variance (vectorised over analysts)."""
    n = np.maximum(pulls, 1)
    mean = total / n
    var = np.maximum(total_sq / n - mean**2, 0.0) * n / np.maximum(n - 1, 1)
    draw = mean + np.sqrt(var / n) * rng.standard_normal(pulls.shape)
    untried = pulls < warmup
    draw = np.where(untried, np.inf, draw)
    return np.argmax(draw + untried * rng.random(pulls.shape), axis=1)
