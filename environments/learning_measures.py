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


@compiled
def _add_round(costs, own, p, on, full, span, low, high, grid, played, mixed, lows):
    """One round into the sums (``grid (2, n, m)``, ``played``/``mixed (2, n)``: learner
    units first, then the game's, and ``lows (2, n)``: each row's smallest ``grid`` sum,
    taken again only for the rows that played); ``p`` empty for a learner that plays a point
    (SPSA).
    Returns ``(capped, infinite, regret, cce, regret_game, cce_game)``: whether a played
    cost of an agent on was capped into the learner's units or infinite, and the largest
    totals."""
    n, m = costs.shape
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


#: A float's bits made an integer that orders as the float does (NaN aside): its magnitude
#: bits flipped where the sign is set. Integer maxima vectorize; a float's need NaN ruled out.
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_INF_BITS = np.int64(0x7FF0000000000000)


@compiled
def _add_pairs(costs, own, p, on, full, span, low, high, grid0, grid1, played0, played1, mixed0,
               mixed1, lows0, lows1):
    """:func:`_add_round` where the rows have two actions, in two passes over each block of
    rows written without a branch (a row that did not play adds -0.0, which leaves every
    float as it is), so that LLVM vectorizes across rows: the sums, then each row's
    smallest sums and gains, their largest kept as integers that order as the floats do
    (a NaN gain is looked for apart: the last wins, as in :func:`_add_round`). The same
    operations in the same order: the same numbers, pinned in the tests."""
    n = costs.shape[0]
    mixed_strategy = p.shape[0] == n
    flat_costs, flat_p = costs.reshape(-1), p.reshape(-1)
    flat_grid0, flat_grid1 = grid0.reshape(-1), grid1.reshape(-1)
    capped = infinite = nan = 0
    t0 = t1 = t2 = t3 = -_INF_BITS - 1  # the largest gains' keys (-inf's): regret, cce, ..._game
    block = 2048
    for start in range(0, n, block):
        size = min(n, start + block) - start
        # views from the block's start: indices from 0 that LLVM can bound
        c, q = flat_costs[2 * start:2 * (start + size)], flat_p[2 * start:2 * (start + size)]
        g0 = flat_grid0[2 * start:2 * (start + size)]
        g1 = flat_grid1[2 * start:2 * (start + size)]
        p0, p1 = played0[start:start + size], played1[start:start + size]
        m0, m1 = mixed0[start:start + size], mixed1[start:start + size]
        w0, w1 = lows0[start:start + size], lows1[start:start + size]
        you, live = own[start:start + size], on[start:start + size]
        sv, lv, hv = span[start:start + size], low[start:start + size], high[start:start + size]
        for r in range(size):
            a, b = c[2 * r], c[2 * r + 1]
            if full:
                shift = b if b < a or b != b else a
                scale = sv[r]
            else:
                shift = lv[r]
                scale = hv[r] - lv[r]
            o = you[r]
            raw = (o - shift) / scale
            capped |= live[r] & ((raw < 0.0) | (raw > 1.0) | (raw != raw))
            infinite |= live[r] & ((o == np.inf) | (o == -np.inf))
            own_units = 0.0 if raw < 0.0 else 1.0 if raw > 1.0 else raw
            x = (a - shift) / scale
            ua = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
            x = (b - shift) / scale
            ub = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
            if mixed_strategy:  # the expected costs, in the actions' order, q > 0 only
                qa, qb = q[2 * r], q[2 * r + 1]
                e = e_game = 0.0
                e, e_game = (e + qa * ua, e_game + qa * a) if qa > 0.0 else (e, e_game)
                e, e_game = (e + qb * ub, e_game + qb * b) if qb > 0.0 else (e, e_game)
            else:
                e, e_game = own_units, o
            z = -0.0  # x + -0.0 is x, bit for bit (+0.0 would make -0.0 +0.0)
            g0[2 * r] += ua if live[r] else z
            g0[2 * r + 1] += ub if live[r] else z
            g1[2 * r] += a if live[r] else z
            g1[2 * r + 1] += b if live[r] else z
            p0[r] += own_units if live[r] else z
            p1[r] += o if live[r] else z
            m0[r] += e if live[r] else z
            m1[r] += e_game if live[r] else z
        for r in range(size):  # each row's smallest sums, then its four gains' keys
            x, y = g0[2 * r], g0[2 * r + 1]
            w0[r] = least0 = y if y < x or y != y else x
            x, y = g1[2 * r], g1[2 * r + 1]
            w1[r] = least1 = y if y < x or y != y else x
            d0 = 0.0 if np.isinf(m0[r]) and np.isinf(least0) else m0[r] - least0
            d1 = 0.0 if np.isinf(p0[r]) and np.isinf(least0) else p0[r] - least0
            d2 = 0.0 if np.isinf(m1[r]) and np.isinf(least1) else m1[r] - least1
            d3 = 0.0 if np.isinf(p1[r]) and np.isinf(least1) else p1[r] - least1
            b0, b1 = np.float64(d0).view(np.int64), np.float64(d1).view(np.int64)
            b2, b3 = np.float64(d2).view(np.int64), np.float64(d3).view(np.int64)
            nan |= (((b0 & _MAGNITUDE) > _INF_BITS) | ((b1 & _MAGNITUDE) > _INF_BITS)
                    | ((b2 & _MAGNITUDE) > _INF_BITS) | ((b3 & _MAGNITUDE) > _INF_BITS))
            b0, b1 = b0 ^ ((b0 >> 63) & _MAGNITUDE), b1 ^ ((b1 >> 63) & _MAGNITUDE)
            b2, b3 = b2 ^ ((b2 >> 63) & _MAGNITUDE), b3 ^ ((b3 >> 63) & _MAGNITUDE)
            t0, t1 = (b0 if b0 > t0 else t0), (b1 if b1 > t1 else t1)
            t2, t3 = (b2 if b2 > t2 else t2), (b3 if b3 > t3 else t3)
    largest = np.array([t0, t1, t2, t3])  # the keys made floats again
    largest = (largest ^ ((largest >> 63) & _MAGNITUDE)).view(np.float64)
    if nan:  # the last NaN gain of each kind, as _add_round keeps it
        for i in range(n):
            for s, (total, least) in enumerate(((mixed0[i], lows0[i]), (played0[i], lows0[i]),
                                                (mixed1[i], lows1[i]), (played1[i], lows1[i]))):
                gain = 0.0 if np.isinf(total) and np.isinf(least) else total - least
                if gain != gain:
                    largest[s] = gain
    return capped != 0, infinite != 0, largest[0], largest[1], largest[2], largest[3]


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
        n, m = costs.shape
        sums = (self.grid, self.played, self.mixed, self.lows)
        if m == 2:  # each unit's sums apart: _add_pairs
            sums = tuple(part[u] for part in sums for u in range(2))
        out = (_add_pairs if m == 2 else _add_round)(
            np.ascontiguousarray(costs, dtype=float), np.ascontiguousarray(own, dtype=float),
            np.zeros((0, 0)) if drawn_from is None else drawn_from,
            np.ones(n, dtype=np.bool_) if on is None else on, self.full, self.span, self.low,
            self.high, *sums)
        return dict(zip(("capped", "infinite", "regret", "cce", "regret_game", "cce_game"),
                        (bool(out[0]), bool(out[1]), *map(float, out[2:])), strict=True))
