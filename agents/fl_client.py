"""Federated-learning clients of the pricing game (Hong & Duan, ``papers/pricing-fl-noise.txt``)."""

from __future__ import annotations

import mesa
import numpy as np

from privgames.mechanisms.pricing import global_best_response


class FLClient(mesa.Agent):
    """A client with a private privacy sensitivity that chooses the noise on its updates.

    Its noise level lives in the model's array (``model.sigma``); the client reads and writes
    it through its index. It learns by best response: from the aggregate's published error
    scale and its own noise it infers the rest of the aggregate, adds the price it is charged
    (its penalty coefficient), and moves (damped, in precision ``1/sigma``) toward the global
    minimiser of its own cost, opting out (``sigma = inf``) when that is cheapest.

    Attributes:
        index: its position in the model's arrays.
        alpha: its private sensitivity ``alpha_i`` in [0, 1].
        reported: the type it reports (``alpha_i`` under complete information).
    """

    def __init__(self, model: mesa.Model, index: int, alpha: float) -> None:
        super().__init__(model)
        self.index = int(index)
        self.alpha = float(alpha)
        self.reported = float(alpha)

    @property
    def sigma(self) -> float:
        """Its current noise standard deviation."""
        return float(self.model.sigma[self.index])

    def respond(self) -> None:
        """One best-response move given what it observes now (used in turn, one client at a
        time; the simultaneous update does the same for every client at once)."""
        m, i = self.model, self.index
        turns = m.turns  # the profile's sums as they stand: O(1) a move
        target = global_best_response(
            turns.rest(i), np.array([self.alpha]), m.beta[i: i + 1], m.config.N, *m.game,
            m.config.aggregation, turns.scale(m.game))[0]
        turns.move(i, float(m.damped(m.sigma[i], target, turns.smallest)))
