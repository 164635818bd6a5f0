"""Ring nodes of the PPSP protocols (Liu et al.), and how they choose their noise scale."""

from __future__ import annotations

from collections.abc import Iterable

import mesa
import numpy as np

from privgames.mechanisms.ppsp import optimal_c


class RingNode(mesa.Agent):
    """A node with a secret that talks only to its successor.

    Its numeric state lives in the model's arrays (``model.state``), which the vectorized
    protocol updates; ``x`` reads this node's entry (replication 0) through its ring position.

    Attributes:
        node_id: its id on the ring (the paper's ``i - 1``).
        secret: ``s_i``.
        c: its noise scale ``c_i`` (the strategy it learns).
        weights: its private ``(gamma_u, gamma_a, gamma_p)``.
    """

    def __init__(self, model: mesa.Model, node_id: int, secret: float, c: float,
                 weights: tuple[float, float, float]) -> None:
        super().__init__(model)
        self.node_id = int(node_id)
        self.secret = float(secret)
        self.c = float(c)
        self.weights = tuple(float(w) for w in weights)

    @property
    def x(self) -> float:
        """Its current state ``x_i(k)`` (first replication), read from the model's array."""
        return float(self.model.state_of(self.node_id)[0])

    def preferred_c(self, n: int, K: int, delta: float, d: float) -> float:
        """The common ``c`` it would pick if everyone shared its weights (Theorem 4)."""
        return optimal_c(*self.weights, n, K, delta, d)

    def best_respond(self, others_min: float, others_max: float, n: int, K: int, delta: float,
                     d: float) -> None:
        """Best response to the other nodes' smallest and largest ``c``.

        Its cost (``tradeoff_cost`` with its weights) depends on the network's largest ``c_M``
        (utility, accuracy) and smallest ``c_m`` (privacy, an externality). Below
        ``others_min`` its cost falls as ``c`` grows, above ``others_max`` it rises, and in
        between it is flat: every ``c`` in ``[others_min, others_max]`` is a best response.
        It picks the one closest to its preferred ``c``.
        """
        self.c = float(np.clip(self.preferred_c(n, K, delta, d), others_min, others_max))

    def respond_to(self, ring: Iterable[RingNode], n: int, K: int, delta: float,
                   d: float) -> None:
        """Best-respond to the ``c`` of the other nodes of ``ring`` (one learning move)."""
        others = [node.c for node in ring if node is not self]
        self.best_respond(min(others), max(others), n, K, delta, d)
