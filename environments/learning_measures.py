"""The analyst's running sums of a learning population: regret against the grid and the CCE
gap of the realized play, in the learners' capped units (where their bounds hold) and the
game's own, taken in one compiled pass over a round's ``agents x actions`` costs.

Per agent and round, with ``c`` its cost of each grid action against the others' play,
``c_a`` the played action's and ``p`` the strategy it drew from:

* learner units: full information ``min((c - min c) / span, 1)`` (costs capped at the row's
  smallest plus the span); bandit ``clip((c - low) / (high - low), 0, 1)``; 0 for an agent
  that did not play (its sums are unchanged);
* the sums: each action's total ``sum_t c``, the played ``sum_t c_a`` and the expected
  ``sum_t p . c`` (an infinite cost weighs only where ``p > 0``);
* external regret ``sum_t p . c - min_j sum_t c_j`` and the CCE gain ``sum_t c_a - min_j sum_t
  c_j`` (0 where both are infinite: no action escapes an infinite cost), their largest over
  the agents.

Each row's arithmetic is its own, so the numbers do not depend on how agents are split into
shards.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from privgames.mechanisms.compiled import compiled


@compiled(rows_of=0)
def _add_round(costs, own, p, on, full, span, low, high, grid, played, mixed, lows, pair):
    """One round into the sums (``grid (2, n, m)``, ``played``/``mixed (2, n)``: learner
    units first, then the game's, and ``lows (2, n)``: each row's smallest ``grid`` sum,
    taken again only for the rows that played); ``p`` empty for a learner that plays a point
    (SPSA).
    Returns ``(capped, infinite, regret, cce, regret_game, cce_game)``: whether a played
    cost of an agent on was capped into the learner's units or infinite, and the largest
    totals."""
    n, m = costs.shape
    m = 2 if len(pair) == 2 else m  # a constant for two actions (compiled's rows_of)
    capped = False
    infinite = False
    best = np.full(4, -np.inf)
    mixed_strategy = p.shape[0] == n
    row = np.empty(m)  # a row's costs in the learner's units
    for i in range(n):
        if on[i]:
            if full:
                shift = costs[i, 0]
                for j in range(1, m):
                    c = costs[i, j]
                    if c < shift or c != c:
                        shift = c
                        if c != c:
                            break
                scale = span[i]
            else:
                shift = low[i]
                scale = high[i] - low[i]
            raw = (own[i] - shift) / scale
            if not (raw >= 0.0 and raw <= 1.0):
                capped = True
            if own[i] == np.inf or own[i] == -np.inf:
                infinite = True
            own_units = 0.0 if raw < 0.0 else 1.0 if raw > 1.0 else raw
            played[0, i] += own_units
            played[1, i] += own[i]
            for j in range(m):  # no sum carried from cell to cell: vectorized
                c = costs[i, j]
                x = (c - shift) / scale
                units = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
                row[j] = units
                grid[0, i, j] += units
                grid[1, i, j] += c
            expected, expected_game = 0.0, 0.0
            if mixed_strategy:  # the expected costs, added in the actions' order
                for j in range(m):
                    q = p[i, j]
                    if q > 0.0:
                        expected += q * row[j]
                        expected_game += q * costs[i, j]
            for u in range(2):  # the smallest sum, NaN taken as smallest, in four lanes (a
                # sum from +0.0 is never -0.0: the lanes give the first smallest's bits)
                l0 = l1 = l2 = l3 = grid[u, i, 0]
                for j in range(1, 1 + 4 * ((m - 1) // 4), 4):
                    g0, g1 = grid[u, i, j], grid[u, i, j + 1]
                    g2, g3 = grid[u, i, j + 2], grid[u, i, j + 3]
                    l0 = g0 if g0 < l0 or g0 != g0 else l0
                    l1 = g1 if g1 < l1 or g1 != g1 else l1
                    l2 = g2 if g2 < l2 or g2 != g2 else l2
                    l3 = g3 if g3 < l3 or g3 != g3 else l3
                for j in range(1 + 4 * ((m - 1) // 4), m):
                    g0 = grid[u, i, j]
                    l0 = g0 if g0 < l0 or g0 != g0 else l0
                if m >= 5:  # lanes 1-3 hold cells (else the first cell: l0 has it)
                    l0 = l1 if l1 < l0 or l1 != l1 else l0
                    l2 = l3 if l3 < l2 or l3 != l3 else l2
                    l0 = l2 if l2 < l0 or l2 != l2 else l0
                lows[u, i] = l0
            if mixed_strategy:
                mixed[0, i] += expected
                mixed[1, i] += expected_game
            else:
                mixed[0, i] += own_units
                mixed[1, i] += own[i]
        for u in range(2):
            low_sum = lows[u, i]
            for k, total in enumerate((mixed[u, i], played[u, i])):
                if np.isinf(total) and np.isinf(low_sum):
                    gain = 0.0
                else:
                    gain = total - low_sum
                slot = 2 * u + k
                if gain > best[slot] or gain != gain:
                    best[slot] = gain
    return capped, infinite, best[0], best[1], best[2], best[3]


class RegretSums:
    """The running sums of ``n`` agents over ``m`` grid actions (each shard keeps one for its
    rows), in the learners' units (``grid[0]``, ``played[0]``, ``mixed[0]``) and the game's
    (``[1]``).

    Attributes:
        full: full-information units (else bandit). span, low, high: each agent's units.
    """

    def __init__(self, n: int, m: int, full: bool, span: NDArray, low: NDArray,
                 high: NDArray) -> None:
        self.full, self.span, self.low, self.high = full, span, low, high
        self.grid = np.zeros((2, n, m))
        self.played = np.zeros((2, n))
        self.mixed = np.zeros((2, n))
        self.lows = np.zeros((2, n))

    def add(self, costs: NDArray, own: NDArray, drawn_from: NDArray | None,
            on: NDArray | None = None) -> dict[str, float | bool]:
        """One round: every grid action's expected cost ``(n, m)``, the played one's
        ``(n,)``, the strategies they were drawn from (``None``: a point was played), the
        agents that played (``None``: all). Returns ``capped`` and ``infinite`` (whether some
        played cost was capped into the learner's units, or infinite) and the largest totals
        ``regret``, ``cce`` and, in the game's units, ``regret_game``, ``cce_game``."""
        n = costs.shape[0]
        out = _add_round(np.ascontiguousarray(costs, dtype=float),
                         np.ascontiguousarray(own, dtype=float),
                         np.zeros((0, 0)) if drawn_from is None else drawn_from,
                         np.ones(n, dtype=np.bool_) if on is None else on, self.full,
                         self.span, self.low, self.high, self.grid, self.played, self.mixed,
                         self.lows)
        return dict(zip(("capped", "infinite", "regret", "cce", "regret_game", "cce_game"),
                        (bool(out[0]), bool(out[1]), *map(float, out[2:])), strict=True))
