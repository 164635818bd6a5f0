"""Users and the colluding coalition of the SAR protocol (Chained-DP paper, section VI)."""

from __future__ import annotations

import mesa
import numpy as np
from numpy.typing import NDArray
from scipy.special import betaincinv


class SARUser(mesa.Agent):
    """A user who slices its vector and decides each round whether to take part.

    It does not know ``p``: it counts how often the neighbours it meets in the slices'
    sequences turn out to be colluders (the soft trust boundary it "obtains by observing",
    section VI-B) and opts out for good once it is confident that ``p`` exceeds the threshold
    of eq (33) (the pre-mechanism): the one-sided Clopper-Pearson lower bound of ``p`` at
    level ``confidence`` passes the threshold (``confidence=0``: the point estimate does).

    Attributes:
        index: its index among the users (into the model's arrays).
        participating: whether it takes part in the chain.
        colluding: whether it is in this round's colluding set.
        seen: neighbours observed so far; ``colluders_seen``: how many of them colluded.
    """

    def __init__(self, model: mesa.Model, index: int) -> None:
        super().__init__(model)
        self.index = int(index)
        self.participating = True
        self.colluding = False
        self.seen = 0
        self.colluders_seen = 0

    @property
    def p_estimate(self) -> float:
        """Its estimate of ``p``: the observed colluder frequency (0 before any observation)."""
        return self.colluders_seen / self.seen if self.seen else 0.0

    def observe(self, neighbours: int, colluders: int) -> None:
        """Record how many neighbours it met this round and how many of them colluded."""
        self.seen += int(neighbours)
        self.colluders_seen += int(colluders)

    def p_lower_bound(self, confidence: float) -> float:
        """One-sided Clopper-Pearson lower confidence bound of ``p``."""
        if confidence == 0.0 or self.colluders_seen == 0:
            return self.p_estimate if confidence == 0.0 else 0.0
        # the Beta(x, n - x + 1) quantile; scipy.special's ufunc, not scipy.stats' beta.ppf,
        # whose argument checks cost 150 us a call (70% of a paper-scale participation run)
        return float(betaincinv(self.colluders_seen, self.seen - self.colluders_seen + 1,
                                1.0 - confidence))

    def decide(self, threshold: float, min_observations: int, confidence: float) -> None:
        """Opt out when confident that ``p`` exceeds ``threshold`` (after enough evidence)."""
        if self.seen >= min_observations and self.p_lower_bound(confidence) > threshold:
            self.participating = False


class ColludingAdversary(mesa.Agent):
    """The coalition of this round's colluders: it pools the sums they received and sent.

    Attributes:
        attacker: ``weak`` (Definition 4) or ``strong`` (Definition 5, with data poisoning).
        successes, attempts: victim-slices reconstructed within tolerance, and attacked.
    """

    def __init__(self, model: mesa.Model, attacker: str) -> None:
        super().__init__(model)
        self.attacker = attacker
        self.successes = 0
        self.attempts = 0

    def record(self, success: NDArray) -> None:
        """Tally this round's attack outcomes."""
        self.successes += int(np.count_nonzero(success))
        self.attempts += int(success.size)
