"""Users, shuffler and analyzer of APES / S-APES (``papers/apes-shuffle-clip-laplace.txt``,
Algorithms 1-2). Agents are views: the reports, budgets and model live in the model's arrays.
"""

from __future__ import annotations

import mesa
import numpy as np

from privgames.mechanisms.noise import Calibration


class PLDPUser(mesa.Agent):
    """A user with a private local budget ``epsilon`` (its dimension-level LDP level) who
    perturbs its clipped gradient and sends it, with its budget, to the shuffler.

    Attributes:
        index: its column in the model's report matrix and its entry in the budget list.
    """

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    @property
    def epsilon(self) -> float:
        return float(self.model.budgets[self.index])


class Shuffler(mesa.Agent):
    """The trusted shuffler: permutes the reports within each dimension and the budget list
    separately (Algorithm 1), so the analyzer cannot tell which budget went with which value.

    The budgets are permuted at once. The reports' permutation, ``d`` independent shuffles of
    ``n`` values, is drawn from the round's own stream only when someone reads the shuffled
    reports (:meth:`shuffled`): the analyzer uses each dimension's mean, which no permutation
    changes, and drawing 6.5 million positions a round took as long as the Clip-Laplace draws
    themselves at paper scale (83 vs 100 ms)."""

    def shuffle(self) -> None:
        m = self.model
        m.shuffled_budgets = m.shuffler_rng.permutation(m.budgets)

    def shuffled(self) -> np.ndarray:
        """The last round's reports as the analyzer receives them, ``(n, d)``: each dimension
        (column) in its own uniformly random order (the same on every call for a round)."""
        return self.model.permutation_stream().permuted(self.model.reports, axis=0)


class Analyzer(mesa.Agent):
    """The untrusted analyzer: averages each dimension of the shuffled reports (a mean no
    permutation changes, so it is taken over the reports as they arrived at the shuffler),
    calibrates the Clip-Laplace bias with the shuffled budgets (eq 1), and takes a gradient
    step."""

    def __init__(self, model: mesa.Model) -> None:
        super().__init__(model)
        self._calibration: Calibration | None = None
        self._calibrated_for: np.ndarray | None = None

    def calibration(self) -> Calibration:
        """Eq (1)'s curve for the budgets received, built from them in sorted order (so it does
        not depend on the shuffle) and rebuilt only when their multiset changes: the same
        users send the same budgets every round."""
        budgets = np.sort(self.model.shuffled_budgets)
        if self._calibrated_for is None or not np.array_equal(budgets, self._calibrated_for):
            self._calibration = Calibration(budgets, self.model.config.C)
            self._calibrated_for = budgets
        return self._calibration

    def aggregate(self) -> None:
        m = self.model
        estimate = m.estimate(m.reports.mean(axis=0))
        m.w = m.w - m.config.lr * estimate.reshape(m.w.shape)
        m.gradient_error = float(np.sqrt(np.mean((estimate - m.true_mean) ** 2)))
