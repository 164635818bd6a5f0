"""The theory of ``learning-dynamics``' games on an explicit action grid: grids, the
theory's reference profiles, the cost formulas a game's round evaluates, and the measures of a
profile (deviation gains, distances).

A game's round is written once, as a slice of a population
(:mod:`privgames.environments.learning_slices`), from the functions here. The classes kept
are the grid games whose theory is tested on its own: :class:`BASGame` (also the bas-chain
experiment's sub-sequence game), :class:`SARGame`, and
:class:`~privgames.mechanisms.bas_sequential.BASSequentialGame`; each gives
``costs(values, candidates)`` (expected cost of each candidate given the others' actions),
``realized(values, rng)`` (one realized cost, drawn from the simulated release),
``references`` (the theory's profiles snapped to the grid, the predicted NE first) and
:meth:`GridGame.nash_gap` (the largest gain of a unilateral deviation: whether a profile is
an equilibrium of the grid game is measured, not assumed).

The stage games are simultaneous: each agent's cost is the paper's, evaluated at everyone's
current action. For the BAS chain that makes the first user's equilibrium ``m beta_1`` (it no
longer anticipates the followers, as in Theorem 1's subgame-perfect NE), so both are given;
:mod:`privgames.mechanisms.bas_sequential` plays the chain as the sequential game it is.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms import chain, ppsp, pricing, sar
from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.pricing_bayes import (
    CASES,
    TRUTHFUL,
    BinaryGame,
    Mechanism,
    case_equilibrium,
    design,
    expected_social_cost,
)
from privgames.mechanisms.validation import ConfigError, check_grid


class GridGame(ABC):
    """A game of ``n`` agents on a common action grid.

    Attributes:
        grid: the actions, ``(m,)``, increasing (``inf``: the opt-out).
        n: the agents.
        log_scale: whether distances between actions are measured on a log scale.
    """

    grid: NDArray
    n: int
    log_scale: bool = False
    #: The agents that play this round (``None``: all; see :meth:`played`).
    active: NDArray | None = None

    def played(self, values: NDArray) -> None:
        """What the round's actions decide of who plays (a sequential game's path; nothing
        in a simultaneous game)."""
        return None

    def middle(self) -> NDArray:
        """Everyone's action when the learners' cost scales are read: the grid's middle."""
        return np.full(self.n, self.grid[(self.grid.size - 1) // 2])

    def scales(self, rng: np.random.Generator, draws: int = 64) -> tuple[NDArray, ...]:
        """Per agent ``(span, low, high)``: the spread of its finite costs over the grid, and
        the range of a realized cost (that spread widened by 3 standard deviations of
        realized costs), with everyone at the :meth:`middle` action, over ``draws`` rounds.
        Costs beyond are clipped by the learners, and their guarantees hold for the clipped
        costs."""
        middle = self.middle()
        c = self.costs(middle)
        finite = np.where(np.isfinite(c), c, np.nan)
        lo = np.nanmin(finite, axis=1, initial=np.inf)
        hi = np.nanmax(finite, axis=1, initial=-np.inf)
        return scales_from(lo, hi, [self.realized(middle, rng) for _ in range(draws)])

    @abstractmethod
    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        """Expected cost of agent ``i`` playing ``candidates[i, j]`` (default: the grid) while
        the others play ``values``; ``(n, k)``."""

    @abstractmethod
    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        """Each agent's realized cost of one round played at ``values``, ``(n,)``."""

    @abstractmethod
    def references(self) -> dict[str, NDArray]:
        """The theory's profiles, the predicted NE first."""

    def optimum(self) -> float:
        """The smallest social cost (the theory's, continuous where it has one; by default the
        best common action)."""
        return float(min(self.social_cost(np.full(self.n, a)) for a in self.grid))

    def own_costs(self, values: NDArray) -> NDArray:
        """Each agent's expected cost at the profile."""
        return self.costs(values, np.asarray(values, dtype=float)[:, None])[:, 0]

    def social_cost(self, values: NDArray) -> float:
        return float(np.sum(self.own_costs(values)))

    def deviation(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """Each agent's expected cost at the profile and its best on the grid against it."""
        return self.own_costs(values), self.costs(values).min(axis=1)

    def nash_gap(self, values: NDArray, scale: ArrayLike) -> float:
        """The largest gain of a unilateral deviation to a grid action, in units of each
        agent's ``scale`` (0 at a pure NE of the grid game)."""
        gain = deviation_gain(*self.deviation(values))
        with np.errstate(over="ignore"):  # a gain beyond 1e308 spans is inf
            return float(np.max(gain / np.asarray(scale, dtype=float)))

    def nash_gap_relative(self, values: NDArray) -> float:
        """The largest unilateral deviation gain as a fraction of the deviator's own cost
        (absolute where that cost is 0): 0 at a pure NE of the grid game, 0.05 where some
        agent would save 5 % of its cost."""
        return float(np.max(relative_gain(*self.deviation(values))))

    def snap(self, values: ArrayLike) -> NDArray:
        """The nearest grid action of each value (on the game's scale)."""
        return snap_to(self.grid, values, self.log_scale)

    def distance(self, values: NDArray, reference: NDArray) -> float:
        """Largest distance of an agent's action from the reference's, as a fraction of the
        grid's finite width (an opt-out against a level counts 1)."""
        return grid_distance(self.grid, values, reference, self.log_scale)


def deviation_gain(own: NDArray, best: NDArray) -> NDArray:
    """``own - best``, 0 where both are infinite (no action escapes an infinite cost)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(own) & np.isinf(best), 0.0, own - best)


def relative_gain(own: NDArray, best: NDArray) -> NDArray:
    """The deviation gain over ``|own|`` where the own cost is finite and non-zero, else the
    gain itself (0 at a zero cost with nothing better; ``inf`` from an infinite cost that a
    finite one escapes)."""
    gain = deviation_gain(own, best)
    scaled = np.isfinite(own) & (own != 0)
    return np.where(scaled, gain / np.where(scaled, np.abs(own), 1.0), gain)


def largest_gains(own: NDArray, best: NDArray, span: NDArray) -> tuple[float, float]:
    """``max(deviation_gain / span)`` and ``max(relative_gain)`` in one compiled pass (the
    same operations per agent; a NaN wins, as numpy's ``max``)."""
    return _largest_gains(np.asarray(own, dtype=float), np.asarray(best, dtype=float),
                          np.broadcast_to(np.asarray(span, dtype=float), np.shape(own)))


@compiled
def _largest_gains(own, best, span):
    gap = relative = -np.inf
    for i in range(own.size):
        o, b = own[i], best[i]
        gain = 0.0 if abs(o) == np.inf and abs(b) == np.inf else o - b
        x = gain / span[i]
        gap = x if (x > gap or x != x) and gap == gap else gap
        r = gain / abs(o) if abs(o) < np.inf and o != 0 else gain
        relative = r if (r > relative or r != r) and relative == relative else relative
    return gap, relative


def _on_scale(v: NDArray, log_scale: bool) -> NDArray:
    if not log_scale:
        return v
    with np.errstate(divide="ignore"):
        return np.log(v)


def snap_to(grid: NDArray, values: ArrayLike, log_scale: bool) -> NDArray:
    """The nearest action of ``grid`` to each value (on a log scale if ``log_scale``)."""
    v, g = _on_scale(np.asarray(values, dtype=float), log_scale), _on_scale(grid, log_scale)
    with np.errstate(invalid="ignore"):
        gap = np.abs(v[:, None] - g[None, :])
    gap = np.where(np.isinf(v[:, None]) & np.isinf(g[None, :]), 0.0, gap)
    return grid[np.nanargmin(np.where(np.isnan(gap), np.inf, gap), axis=1)]


def grid_distance(grid: NDArray, values: NDArray, reference: NDArray, log_scale: bool) -> float:
    """:meth:`GridGame.distance` on ``grid`` (any subset of the agents): the largest
    ``min(|a - b| / width, 1)`` (1 where it is NaN, 0 where both are infinite), compiled."""
    a, b = _on_scale(values, log_scale), _on_scale(reference, log_scale)
    finite = _on_scale(grid[np.isfinite(grid)], log_scale)
    width = max(finite[-1] - finite[0], 1e-300)
    return float(_largest_distance(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                   width))


@compiled
def _largest_distance(a, b, width):
    largest = -np.inf
    for i in range(a.size):
        if abs(a[i]) == np.inf and abs(b[i]) == np.inf:
            d = 0.0
        else:
            d = abs(a[i] - b[i]) / width
            d = 1.0 if d != d or d > 1.0 else d
        largest = d if d > largest else largest
    return largest


#: Agents whose realized samples' deviation :func:`scales_from` takes at a time.
SAMPLED = 1 << 16


def scales_from(lo: NDArray, hi: NDArray, samples: ArrayLike) -> tuple[NDArray, ...]:
    """``(span, low, high)`` from each agent's smallest and largest finite cost over the grid
    and its realized costs ``samples`` (rounds x agents, NaN where it did not play):
    :meth:`GridGame.scales`'s last step."""
    samples = np.asarray(samples, dtype=float)
    sd = np.empty(samples.shape[1:])
    with warnings.catch_warnings():  # a row that never played has no deviation: 0
        warnings.simplefilter("ignore", RuntimeWarning)
        for start in range(0, sd.size, SAMPLED):  # a part at a time: nanstd copies them
            part = slice(start, start + SAMPLED)
            columns = samples[:, part]
            width = columns.shape[1]  # numpy sums a lone column pairwise, not round by round:
            if width == 1:  # taken as among others (a shard of one agent)
                columns = np.repeat(columns, 2, axis=1)
            sd[part] = np.nan_to_num(np.nanstd(columns, axis=0))[:width]
    span = np.maximum(hi - lo, 1e-12 * np.maximum(np.abs(hi), 1e-300))
    return span, lo - 3.0 * sd, np.maximum(hi + 3.0 * sd, lo - 3.0 * sd + span)


def _check_grid_points(points: int) -> int:
    if not isinstance(points, int | np.integer) or points < 2:
        raise ConfigError(f"grid_points={points!r} is out of range: grid_points must be an "
                          "integer >= 2")
    return int(points)


def _own_grid(grid: ArrayLike | None, default: NDArray, opt_out: bool = True) -> NDArray:
    """The user's grid (checked by :func:`check_levels`), else the default."""
    return default if grid is None else check_levels(grid, opt_out)


def check_levels(grid: ArrayLike, opt_out: bool) -> NDArray:
    """A grid of noise levels: :func:`check_grid`, every level ``>= 0``, and ``inf`` only
    where the game has an opt-out."""
    g = check_grid(grid)
    if np.any(g < 0) or (not opt_out and np.isinf(g).any()):
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: noise levels must be >= 0"
                          + ("" if opt_out else " and finite (this game has no opt-out)"))
    if np.isfinite(g).sum() < 1:
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: it needs a finite level")
    return g


class BASGame(GridGame):
    """Users in sequence order choose their noise variance ``sigma_k^2`` (Chained-DP, eq 14):
    ``C_k = sum_i sigma_i^2 + alpha_k (sum_{i<=k} sigma_i^2)^(-1/2)``.

    Grid: ``grid_points`` variances evenly over ``[0, m max beta]``. A realized cost replaces
    the accuracy term (the release's noise variance per coordinate) by the squared error of one
    ``d``-dimensional release, ``S chi^2_d / d`` (variance ``2 S^2 / d``).
    """

    def __init__(self, beta: ArrayLike, d: int, grid_points: int = 21,
                 grid: ArrayLike | None = None) -> None:
        self.beta = np.asarray(beta, dtype=float)
        self.alpha = chain.alpha_from_beta(self.beta)
        self.d = int(d)
        self.grid = bas_grid(float(self.beta.max()), grid_points, grid)
        self.n = self.beta.size

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        return bas_costs(v, v.sum(), np.cumsum(v) - v, self.alpha, cand)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        total = float(np.sum(values))
        return bas_realized(self.own_costs(values), total, rng.chisquare(self.d), self.d)

    def references(self) -> dict[str, NDArray]:
        return {"nash": self._simultaneous_nash(),
                "theorem1": self.snap(chain.nash_equilibrium(self.beta))}

    def _simultaneous_nash(self) -> NDArray:
        """The grid game's NE in one pass down the chain (:func:`bas_chain_replies`)."""
        return bas_chain_replies(self.grid, self.alpha, 0.0)[0]

    def optimum(self) -> float:
        return chain.social_cost(chain.central_optimum(self.beta), self.beta)


def bas_grid(beta_max: float, grid_points: int, grid: ArrayLike | None) -> NDArray:
    """:class:`BASGame`'s grid: ``grid_points`` variances evenly over ``[0, m max beta]``."""
    return _own_grid(grid, np.linspace(0.0, chain.M * beta_max, _check_grid_points(grid_points)),
                     opt_out=False)


def bas_costs(v: NDArray, total: float, upstream: NDArray, alpha: NDArray,
              candidates: NDArray, lowest: bool = False, out: NDArray | None = None
              ) -> NDArray:
    """:meth:`BASGame.costs` of the agents ``v`` from the profile's total and each agent's
    upstream variance (the sum of those before it), so that a shard of the chain computes
    them: ``C_k = (total - v_k) + x + alpha_k (upstream_k + x)^(-1/2)`` for each candidate
    ``x`` (eq 14; ``candidates`` ``(1, m)`` for every agent or ``(n, k)`` per agent; the
    privacy term is 0 where ``alpha_k = 0``), in one compiled pass (into ``out`` if given);
    ``lowest``: each agent's smallest (:func:`row_least`)."""
    v = np.asarray(v, dtype=float)
    c = np.atleast_2d(np.asarray(candidates, dtype=float))
    upstream, alpha = np.asarray(upstream, dtype=float), np.asarray(alpha, dtype=float)

    def fill(rows: slice, out: NDArray) -> NDArray:
        _bas_costs(v[rows], float(total), upstream[rows], alpha[rows],
                   c if len(c) == 1 else c[rows], out)
        return out

    if lowest and len(c) == 1 and np.all(np.isfinite(c)) and np.all(np.diff(c[0]) > 0):
        least = np.empty(v.size)
        _bas_least(v, float(total), upstream, alpha, c[0], least)
        return least
    return cost_table(fill, v.size, c.shape[1], lowest, out)


@compiled
def _bas_least(v, total, upstream, alpha, grid, least):
    """Each agent's smallest :func:`bas_costs` over an increasing grid, equal to the full
    table's ``min`` but from a few cells: a cell's cost is ``(total - v) + x`` plus a privacy
    term that falls as ``x`` grows, each operation rounded monotonically, so from any start
    no cell further right whose ``(total - v) + x`` exceeds the best yet can be smaller, nor
    any further left than a cell whose privacy term added to ``(total - v) + grid[0]``
    exceeds it. The start decides how few cells are taken, not the result: the first cell at
    the continuous minimiser ``x = (alpha / 2)^(2/3) - upstream`` or right of it, found as
    ``(upstream + x)^3 >= (alpha / 2)^2`` (no power function: it cost 15 ns a user, three
    times the rest). An agent with a non-finite input takes every cell."""
    k = grid.size
    for i in range(v.size):
        a, u, base = alpha[i], upstream[i], total - v[i]
        if not (abs(base) < np.inf and 0.0 <= u < np.inf and abs(a) < np.inf):
            low = np.inf
            for j in range(k):
                cost = base + grid[j] + (a / np.sqrt(u + grid[j]) if a > 0 else 0.0)
                low = cost if (cost < low or cost != cost) and low == low else low
            least[i] = low
            continue
        start = 0
        if a > 0:
            target = 0.25 * a * a
            while start < k - 1:
                x = u + grid[start]
                if not x * x * x < target:
                    break
                start += 1
        best = base + grid[start] + (a / np.sqrt(u + grid[start]) if a > 0 else 0.0)
        j = start + 1
        while j < k and base + grid[j] <= best:  # the privacy term is >= 0
            cost = base + grid[j] + (a / np.sqrt(u + grid[j]) if a > 0 else 0.0)
            best = cost if cost < best else best
            j += 1
        floor = base + grid[0]
        for j in range(start - 1, -1, -1):  # a > 0 here: the term grows to the left
            privacy = a / np.sqrt(u + grid[j])
            cost = base + grid[j] + privacy
            best = cost if cost < best else best
            if floor + privacy > best:
                break
        least[i] = best


def cost_table(fill: Callable[[slice, NDArray], NDArray], n: int, k: int, lowest: bool,
               out: NDArray | None = None) -> NDArray:
    """The ``(n, k)`` cost table that ``fill(rows, out)`` writes (into ``out`` if given),
    or with ``lowest`` each row's smallest entry (:func:`row_least`)."""
    if lowest:
        return row_least(fill, n, k)
    return fill(slice(None), np.empty((n, k)) if out is None else out)


def row_least(fill: Callable[[slice, NDArray], NDArray], n: int, k: int) -> NDArray:
    """Each of ``n`` rows' smallest entry (:func:`row_minima`) of a ``(n, k)`` table that
    ``fill(rows, out)`` writes a block of rows at a time into a cache-sized buffer: the
    table is never whole (at 10^6 agents it would be 168 MB to write, read and fault in)."""
    block = max(1, 65536 // k)  # a 512 kB buffer: in the core's L2 cache
    buffer, least = np.empty((min(block, n), k)), np.empty(n)
    for start in range(0, n, block):
        stop = min(n, start + block)
        _row_least(fill(slice(start, stop), buffer[:stop - start]), least[start:stop])
    return least


def row_minima(table: NDArray) -> NDArray:
    """Each row's smallest entry, as numpy's ``min`` (a NaN wins), in one compiled pass
    (numpy's reduction over short rows is slow: 36 ms for 10^6 rows of two)."""
    least = np.empty(len(table))
    _row_least(np.ascontiguousarray(table, dtype=float), least)
    return least


@compiled
def _row_least(table, least):
    """Each row's smallest, NaN first, in four lanes (the value is numpy's ``min``'s; of
    ``-0.0`` and ``0.0`` in one row the first lane's)."""
    n, k = table.shape
    for i in range(n):
        l0 = l1 = l2 = l3 = table[i, 0]
        for j in range(1, 1 + 4 * ((k - 1) // 4), 4):
            g0, g1, g2, g3 = table[i, j], table[i, j + 1], table[i, j + 2], table[i, j + 3]
            l0 = g0 if g0 < l0 or g0 != g0 else l0
            l1 = g1 if g1 < l1 or g1 != g1 else l1
            l2 = g2 if g2 < l2 or g2 != g2 else l2
            l3 = g3 if g3 < l3 or g3 != g3 else l3
        for j in range(1 + 4 * ((k - 1) // 4), k):
            g0 = table[i, j]
            l0 = g0 if g0 < l0 or g0 != g0 else l0
        l0 = l1 if l1 < l0 or l1 != l1 else l0
        l2 = l3 if l3 < l2 or l3 != l3 else l2
        least[i] = l2 if l2 < l0 or l2 != l2 else l0


@compiled
def _bas_costs(v, total, upstream, alpha, candidates, out):
    n, k = v.size, candidates.shape[1]
    for i in range(n):
        row = candidates[0] if candidates.shape[0] == 1 else candidates[i]
        a, u, base, o = alpha[i], upstream[i], total - v[i], out[i]
        if a > 0:
            for j in range(k):
                o[j] = base + row[j] + a / np.sqrt(u + row[j])
        else:
            for j in range(k):
                o[j] = base + row[j] + 0.0


def bas_realized(own: NDArray, total: ArrayLike, chisquare: ArrayLike, d: int) -> NDArray:
    """:meth:`BASGame.realized`: the own costs with the accuracy term (the total variance)
    replaced by one release's squared error per coordinate, ``total chi^2_d / d`` (one draw
    per round: ``total`` and ``chisquare`` scalars, or one per round along a leading axis)."""
    total, chisquare = np.asarray(total, float), np.asarray(chisquare, float)
    return own - total[..., None] + (total * chisquare / d)[..., None]


def bas_chain_replies(grid: NDArray, alpha: NDArray, prefix: float) -> tuple[NDArray, float]:
    """The grid game's NE down the chain from ``prefix`` (the variance the first of these
    users receives): a user's cost depends on its own level only through its prefix (Lemma 1
    on the grid), so each best-responds to the levels above it (ties to the lowest). Returns
    the levels and the prefix after the last, so that the pass continues on the next shard."""
    v = np.zeros(alpha.size)
    for k in range(alpha.size):
        with np.errstate(divide="ignore"):
            own = grid + (alpha[k] / np.sqrt(prefix + grid) if alpha[k] > 0 else 0.0)
        v[k] = grid[int(np.argmin(own))]
        prefix += v[k]
    return v, prefix


class SARGame(GridGame):
    """SAR participation: each of ``K`` users takes part (1) or opts out (0). A participant's
    slice is exposed with eq (31)'s (weak) or the corrected eq (32)'s (strong) probability for
    the participants' count ``k``; it values taking part at the risk eq (33) accepts, ``1/K^2``.
    Cost: ``delta(k) - 1/K^2`` when taking part, 0 when not. A realized cost draws whether the
    colluders exposed it this round: its place in a uniformly random order of the ``k``
    participants and the colluding of the others, each with probability ``p``.
    """

    grid = np.array([0.0, 1.0])

    def __init__(self, K: int, p: float, attacker: str = "weak") -> None:
        sar.failure_probability(max(K, 3), p, attacker)  # validates p and the attacker
        self.K, self.p, self.attacker = int(K), float(p), attacker
        self.n = self.K
        self.tolerated = 1.0 / self.K**2

    def exposure(self, k: ArrayLike) -> NDArray:
        """The failure probability with ``k`` participants (0 below 3: no one is interior):
        :func:`privgames.mechanisms.sar.failure_probability`'s formulas, vectorized and for a
        real-valued ``k`` (SPSA's fractional participation); equal to it at every integer
        ``k >= 3`` (tested)."""
        k = np.asarray(k, dtype=float)
        if self.attacker == "weak":
            return np.maximum(k - 2.0, 0.0) / np.maximum(k, 1.0) * self.p**2
        if self.p == 0.0:
            return np.zeros_like(k)
        q = 1.0 - self.p
        return np.maximum(1.0 + q ** (k - 1) - 2.0 * (1.0 - q**k) / (np.maximum(k, 1) * self.p),
                          0.0)

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        return self.costs_given(v, v.sum(), candidates)

    def costs_given(self, v: NDArray, count: float, candidates: ArrayLike | None = None,
                    index: NDArray | None = None, out: NDArray | None = None) -> NDArray:
        """:meth:`costs` of the users ``v`` from the participants' ``count`` (a shard's);
        ``index``: ``v``'s grid indices where known, so that the exposure is taken once per
        grid action and gathered (the same numbers: a user's count is ``count`` or
        ``count + 1``), and the grid's costs once per action: a user's row is its action's;
        ``out``: the array the table is written into (``index`` is in range: numpy's
        ``take`` writes straight into it with ``mode="clip"``, through a copy otherwise)."""
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        if index is not None:
            gain = self.exposure((count - self.grid) + 1.0) - self.tolerated
            if candidates is None:
                return np.take(cand * gain[:, None], index, axis=0, out=out, mode="clip")
            return np.multiply(cand, gain[index][:, None], out=out)
        return np.multiply(cand, self.exposure((count - v)[:, None] + 1.0) - self.tolerated,
                           out=out)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        v = np.asarray(values, dtype=float)
        k = int(v.sum())
        position = rng.integers(0, max(k, 1), self.K)
        return self.realized_given(v, k, position, rng.random((2, self.K)))

    def realized_given(self, v: NDArray, k: int, position: NDArray, u: NDArray) -> NDArray:
        """:meth:`realized` from the draws: each user's place among the ``k`` participants
        and two uniforms ``u[..., :, i]`` (its predecessor's and successor's colluding, weak
        attacker; the strong attacker's some-colluder-before and some-colluder-after)."""
        if self.attacker == "weak":
            interior = (position > 0) & (position < k - 1)
            exposed = interior & (u < self.p).all(axis=-2)
        else:
            q = 1.0 - self.p
            before = u[..., 0, :] < 1.0 - q**position
            after = u[..., 1, :] < 1.0 - q ** (k - 1 - position)
            exposed = before & after
        return v * (exposed - self.tolerated)

    def participants(self) -> int:
        """The NE's number of participants: the ``k``-th does not regret taking part
        (``delta(k) <= 1/K^2``) and an outsider would (``delta(k + 1) > 1/K^2``)."""
        gain = self.exposure(np.arange(1, self.K + 1)) - self.tolerated
        return int(np.argmax(gain > 0)) if np.any(gain > 0) else self.K

    def references(self) -> dict[str, NDArray]:
        """The NE (:meth:`participants`); the users are alike, so which ``k`` take part is
        immaterial (the first ``k``)."""
        return {"nash": (np.arange(self.K) < self.participants()).astype(float)}

    def distance(self, values: NDArray, reference: NDArray) -> float:
        """The users are alike: the gap in the participating share."""
        return float(abs(np.mean(values) - np.mean(reference)))


def ppsp_grid(lo: float, hi: float, grid_points: int, grid: ArrayLike | None) -> NDArray:
    """The PPSP noise game's grid (log-spaced a decade either side) from the nodes'
    smallest and largest preferred ``c``."""
    return _own_grid(grid, np.geomspace(lo / 10.0, hi * 10.0, _check_grid_points(grid_points)),
                     opt_out=False)


def ppsp_costs(v: NDArray, largest: NDArray, smallest: NDArray, weights: NDArray,
               args: tuple, candidates: NDArray, lowest: bool = False,
               out: NDArray | None = None) -> NDArray:
    """Theorem 4's weighted cost of each candidate ``c`` for the nodes ``v``, from the
    profile's two largest and two smallest values (in increasing order), so that a shard of
    the ring computes them: each node's others' largest and smallest ``c``, then the cost
    (into ``out`` if given); ``lowest``: each node's smallest (:func:`row_least`)."""
    high = np.where(v == largest[-1], largest[-2], largest[-1])  # the others' largest
    low = np.where(v == smallest[0], smallest[1], smallest[0])  # and smallest
    coefficients = _ppsp_coefficients(*args)
    c = np.atleast_2d(np.asarray(candidates, dtype=float))
    weights = np.ascontiguousarray(weights, dtype=float)

    def fill(rows: slice, out: NDArray) -> NDArray:
        _ppsp_costs(high[rows], low[rows], weights[rows], coefficients,
                    c if len(c) == 1 else c[rows], out)
        return out

    return cost_table(fill, high.size, c.shape[1], lowest, out)


@functools.cache
def _ppsp_coefficients(n: int, *args: float) -> NDArray:
    """:func:`ppsp.tradeoff_cost`'s three coefficients for ``(n, K, delta, d)``, taken once
    (the kernel's input; never written)."""
    return np.array([math.pi * n * math.sqrt(n / 6.0), math.pi**2 * n**2 / 3.0,
                     ppsp.tradeoff_cost(0.0, 1.0, 0.0, 0.0, 1.0, n, *args)])


def two_extremes(v: NDArray) -> tuple[NDArray, NDArray]:
    """``v``'s two largest and two smallest values, each pair in increasing order (one of
    each when ``v`` has one), in one compiled pass: ``np.partition`` took 0.12 ms at 10^4."""
    if v.size < 2:
        return v[-2:].copy(), v[:2].copy()
    out = np.empty(4)
    _two_extremes(np.ascontiguousarray(v, dtype=float), out)
    return out[2:], out[:2]


@compiled
def _two_extremes(v, out):
    s0, s1 = (v[0], v[1]) if v[0] <= v[1] else (v[1], v[0])  # the smallest first
    l0, l1 = s0, s1  # the largest last
    for i in range(2, v.size):
        x = v[i]
        if x < s1:
            s0, s1 = (x, s0) if x < s0 else (s0, x)
        if x > l0:
            l0, l1 = (l1, x) if x > l1 else (x, l1)
    out[0], out[1], out[2], out[3] = s0, s1, l0, l1


@compiled
def _ppsp_costs(high, low, weights, coefficients, candidates, out):
    n, k = high.size, candidates.shape[1]
    for i in range(n):
        row = candidates[0] if candidates.shape[0] == 1 else candidates[i]
        for j in range(k):
            c = row[j]
            c_max, c_min = max(high[i], c), min(low[i], c)
            out[i, j] = (weights[i, 0] * c_max * coefficients[0]
                         + weights[i, 1] * (c_max * c_max) * coefficients[1]
                         + weights[i, 2] * coefficients[2] / c_min)


def ppsp_realized(own: NDArray, c_max: float, weights: NDArray, args: tuple,
                  z: ArrayLike) -> NDArray:
    """A node's realized cost: the accuracy term drawn as the estimator's squared error
    (``z``: one standard normal per round, scalar or along a leading axis)."""
    zero = np.zeros_like(weights[:, 1])
    accuracy = ppsp.tradeoff_cost(c_max, np.inf, zero, weights[:, 1], zero, *args)
    out = accuracy * (np.asarray(z, float)[..., None] ** 2 - 1.0)
    return np.add(own, out, out=out)


def release_loss(error: float, kappa: float, L_F: float) -> float:
    """Eq (9)'s loss ``kappa (Delta + Delta^2 / (2 L_F))`` estimated without bias from one
    release error ``e ~ N(0, Delta^2)``: ``|e| sqrt(pi/2)`` for ``Delta``, ``e^2`` for
    ``Delta^2`` (``inf`` when nothing was released)."""
    estimate = abs(error) * math.sqrt(math.pi / 2.0)
    return kappa * (estimate + error * error / (2.0 * L_F))


#: Type profiles the interim expected costs average over: every profile (weighted by the
#: prior) when there are at most this many, else this many drawn from the prior.
TYPE_PROFILES = 128


def type_profiles(N: int, eta: float, uniform: Callable[[int], NDArray],
                  clients: slice = slice(None)) -> tuple[NDArray, NDArray]:
    """The analyst's type profiles of the ``clients`` (columns; 1 = H) and their weights:
    all ``2^N`` with their prior probabilities when there are at most :data:`TYPE_PROFILES`,
    else that many drawn from the prior with ``uniform(k)`` (``k`` rows of the clients'
    uniforms)."""
    if 2**N <= TYPE_PROFILES:
        bits = (np.arange(2**N)[:, None] >> np.arange(N)) & 1
        prior = np.where(bits == 0, eta, 1.0 - eta).prod(axis=1)
        return bits[:, clients].astype(np.int8), prior
    return ((uniform(TYPE_PROFILES) >= eta).astype(np.int8),
            np.full(TYPE_PROFILES, 1.0 / TYPE_PROFILES))


class BayesRules:
    """What pricing-bayes' costs need besides the profile, the same for every client: the
    mechanism, the noise levels, the reports' MLE weights and the theory's symmetric
    strategies (each shard of a population holds them whole).

    A profile enters a row's cost only through the sums over clients of :attr:`parts` (the
    MLE weight ``w``, ``w^2 sigma^2``, ``sigma^2``, a report of L), less its own client's.
    Those sums are taken from the counts of clients per (type profile, type, action)
    (:meth:`counts`): integers, so they add up exactly in any order, over shards too, and
    every row's arithmetic after them is elementwise, so a row's cost does not depend on how
    many rows are computed with it.

    Attributes:
        levels: the ``m`` noise levels. grid: the actions ``0 .. 2m - 1`` (index ``j``
            reports type ``j // m`` and adds ``levels[j % m]``). weight: each report's MLE
            weight. parts: ``(4, 2m)``, each action's summands. strategies: the theory's
            symmetric profiles by name, ``(rho, s)``, the predicted one first.
    """

    def __init__(self, game: BinaryGame, prices: bool, grid_points: int = 21,
                 grid: ArrayLike | None = None) -> None:
        self.bayes = game
        self.design = design(game)
        full = self.design["mechanism"]
        self.mechanism = full if prices else Mechanism(target=full.target)
        self.prices = prices
        self.reports_matter = prices or game.aggregation == "mle"
        self.strategies = self._reference_strategies()
        noises = np.concatenate([s for _, s in self.strategies.values()])
        self.levels = _own_grid(grid, np.geomspace(noises.min() / 3.0, noises.max() * 3.0,
                                                   _check_grid_points(grid_points)),
                                opt_out=False)
        if self.levels[0] <= 0:
            raise ConfigError(f"grid={self.levels.tolist()!r} is not allowed: noise levels of "
                              "pricing-bayes must be > 0")
        self.m_levels = self.levels.size
        self.grid = np.arange(2.0 * self.m_levels)
        index = np.arange(self.grid.size)
        self._reports, self._noises = index // self.m_levels, self.levels[index % self.m_levels]
        self.weight = (1.0 / np.asarray(full.target) ** 2 if game.aggregation == "mle"
                       else np.ones(2))
        report, sigma = self.decode(self.grid)
        w = self.weight[report]
        self.parts = np.stack([w, w**2 * sigma**2, sigma**2, (report == 0).astype(float)])

    def decode(self, values: ArrayLike) -> tuple[NDArray, NDArray]:
        """Grid indices to ``(report, noise)`` (index ``j``: ``j // m`` and the level
        ``j % m``, from two tables)."""
        j = np.asarray(values).astype(np.intp)
        return self._reports[j], self._noises[j]

    def label(self, value: float) -> str:
        report, sigma = self.decode(value)
        return f"{'LH'[int(report)]} {float(sigma):.3g}"

    def _reference_strategies(self) -> dict[str, tuple[tuple[int, int], NDArray]]:
        """With prices, Definition 5's truthful BNE at the target noise first; then the
        symmetric profile of each (other) reporting case of Lemmas 1-3, where each type
        best-responds (the truthful one first without prices). Under the mean rule without
        prices reports do not matter: the truthful case alone."""
        target = np.asarray(self.design["target"], dtype=float)
        first = {"bne": (TRUTHFUL, target)} if self.prices else {}
        if self.reports_matter:
            names = sorted((k for k in CASES if not (self.prices and k == "truthful")),
                           key=lambda k: k != "truthful")
        else:  # the mean rule without prices
            names = ["truthful"]
        return {**first, **{k: (CASES[k], case_equilibrium(self.bayes, self.mechanism,
                                                            CASES[k])) for k in names}}

    def row_actions(self, rho: tuple[int, int], s: NDArray, row_type: NDArray) -> NDArray:
        """The symmetric strategy ``(rho, s)`` as each row's grid action (nearest level)."""
        gap = np.abs(np.log(np.asarray(s)[row_type])[:, None] - np.log(self.levels)[None, :])
        return np.asarray(rho)[row_type] * self.m_levels + gap.argmin(axis=1).astype(float)

    def row_distances(self, values: NDArray, reference: NDArray) -> NDArray:
        """Each row's distance from the reference's action: 1 for another report (where
        reports matter), else the gap in log noise over the levels' log width."""
        (ra, sa), (rb, sb) = self.decode(values), self.decode(reference)
        width = max(math.log(self.levels[-1] / self.levels[0]), 1e-300)
        d = np.minimum(np.abs(np.log(sa / sb)) / width, 1.0)
        return np.where(ra != rb, 1.0, d) if self.reports_matter else d

    # --- sums from counts ---------------------------------------------------------------------
    def counts(self, actions: NDArray, types: NDArray) -> NDArray:
        """Clients per (profile, type, action), ``(S, 2, 2m)``, from each client's action per
        type ``actions`` (``(2, C)``: its two rows) and the profiles' types (``(S, C)``; read
        by client: held as the transpose of a ``(C, S)`` array, they are not copied)."""
        return _counts(np.ascontiguousarray(actions, dtype=np.int64),
                       np.ascontiguousarray(types.T, dtype=np.int8), self.grid.size)

    def totals(self, counts: NDArray) -> NDArray:
        """The clients' sums of :attr:`parts` per profile, ``(4, S)``."""
        return (counts.sum(axis=1)[None, :, :] * self.parts[:, None, :]).sum(axis=-1)

    # --- costs --------------------------------------------------------------------------------
    def interim(self, totals: NDArray, p: ArrayLike, actions: NDArray, types: NDArray,
                client: NDArray, row_type: NDArray, out: NDArray | None = None,
                at: NDArray | None = None) -> NDArray:
        """Each row's cost of each grid action averaged over profiles with
        weights ``p``, whose types are ``types`` (``(S, C)``): eq (13)'s integrand given the
        others' sums, ``totals`` (:meth:`totals`) less its client's own :attr:`parts` (its
        action in each profile: ``actions[t, client]``, ``(2, C)``, of its type ``t`` there).
        The penalty and reward are linear in the others' sums, so their averages are taken
        first; they, and the accuracy term's, are a client's (its two rows differ only in
        ``alpha``), so they are taken once per client. Into ``out``'s rows ``at`` if given
        (a slice's kept table: the other rows are left as they are)."""
        g, mech = self.bayes, self.mechanism
        p = np.asarray(p, dtype=float) / np.sum(p)
        # A client's others' sums in profile s depend only on its action a there: the
        # accuracy term of each (s, a, candidate), and the reports of L and the squares of
        # each (s, a), are tables; each client then sums its profiles' entries (compiled).
        others = totals[:, :, None] - self.parts[:, None, :]  # (4, S, actions)
        last = len(g.all_counts) - 1  # (s, a) that no row meets may fall outside: clipped
        reported_l = np.clip(np.rint(others[3]).astype(np.int64), 0, last)
        w_all, sk = self.weight[self._reports], self._noises
        with np.errstate(divide="ignore", invalid="ignore"):  # at (s, a) no row meets
            d2 = (((w_all * sk) ** 2)[None, None, :] + others[1][:, :, None]) / np.square(
                w_all[None, None, :] + others[0][:, :, None])  # (S, own action, candidate)
            accuracy_table = np.sqrt(d2) + d2 / (2.0 * g.L_F)
        all_counts = np.asarray(g.all_counts, dtype=float)
        tables = (all_counts[np.minimum(reported_l + 1, last)], all_counts[reported_l],
                  np.ascontiguousarray(others[2]))
        actions = np.ascontiguousarray(actions, dtype=np.int64)
        if len(p) == 1:  # one profile (a round's types): its entries as they are (weight 1),
            # each client's of its action there
            own = actions[types[0], np.arange(actions.shape[1])]
            accuracy, sums = accuracy_table[0], [table[0] for table in tables]
        else:
            accuracy, *sums = _interim_sums(accuracy_table, *tables, p, actions,
                                            np.ascontiguousarray(types.T, dtype=np.int8))
            own = np.arange(actions.shape[1])
        if out is None:
            out, at = np.empty((len(client), self.grid.size)), np.arange(len(client))
        constants = np.array([g.kappa, g.c, g.S, ((g.N - 1) / g.N) ** 2, float(g.N**2),
                              mech.q])
        _interim_costs(accuracy, own, *sums, np.asarray(client, dtype=np.int64),
                       g.alpha[row_type], self._reports, self._noises,
                       np.asarray(mech.beta, dtype=float), np.asarray(mech.reward, dtype=float),
                       constants, out, np.asarray(at, dtype=np.int64))
        return out

    def realized(self, t: NDArray, a: NDArray, s: NDArray, noise: NDArray, w_noise: float,
                 w: float, noise_sum: float, reported_l: int) -> NDArray:
        """The realized costs of clients of types ``t`` who reported ``a``, added ``s`` and
        drew ``noise``, given the round's sums over all clients (``sum w e``, ``sum w``,
        ``sum e``, the reports of L): the release's error replaces ``Delta`` (as in
        pricing FL), the penalty is ``beta (n_i - mean n)^2``."""
        g, mech = self.bayes, self.mechanism
        accuracy = release_loss(w_noise / w, g.kappa, g.L_F)
        spread = noise - noise_sum / g.N
        return ((1.0 - g.alpha[t]) * accuracy + g.alpha[t] * g.c * g.S / s
                + np.asarray(mech.beta)[a] * spread**2
                - np.asarray(mech.reward)[a] * g.all_counts[reported_l] - mech.q)

    def social(self, counts: NDArray, p: ArrayLike) -> float:
        """The expected ``sum_i J_i`` (prices are transfers) over profiles with weights ``p``,
        from the counts of clients per (profile, type, action)."""
        g = self.bayes
        total = self.totals(counts)
        accuracy = pricing.loss_bound(np.sqrt(total[1]) / total[0], g.kappa, g.L_F)
        privacy = g.alpha[:, None] * pricing.privacy_loss(self._noises, g.c, g.S)
        each = (accuracy * (counts.sum(axis=2) * (1.0 - g.alpha)).sum(axis=1)
                + (counts * privacy[None]).sum(axis=(1, 2)))
        return float(np.average(each, weights=p))

    def optimum(self) -> float:
        """The exact expected social cost at the type-contingent optimum."""
        return expected_social_cost(self.bayes, self.design["target"])


@compiled
def _interim_sums(accuracy, joins, stays, squares, p, actions, by_client):
    """:meth:`BayesRules.interim`'s sums over the profiles, per client: each profile's entry
    of the client's action there (``actions[by_client[client, s], client]``), weighted by
    ``p[s]``, in profile order: the accuracy term of each candidate, the rewards' counts (an
    L report joining or not) and the others' squared noise."""
    clients, profiles = by_client.shape
    k = accuracy.shape[2]
    out = np.zeros((clients, k))
    l_joins, l_stays, sq = np.zeros(clients), np.zeros(clients), np.zeros(clients)
    acc = np.zeros(k)  # one client's, kept apart from the table it reads
    for c in range(clients):
        acc[:] = 0.0
        joined, stayed, squared = 0.0, 0.0, 0.0
        for s in range(profiles):
            a = actions[by_client[c, s], c]
            w = p[s]
            joined += w * joins[s, a]
            stayed += w * stays[s, a]
            squared += w * squares[s, a]
            for j in range(k):
                acc[j] += w * accuracy[s, a, j]
        out[c] = acc
        l_joins[c], l_stays[c], sq[c] = joined, stayed, squared
    return out, l_joins, l_stays, sq


@compiled
def _interim_costs(accuracy, entry, l_joins, l_stays, squares, client, alpha, reports, sigmas,
                   beta, reward, constants, out, at):
    """Eq (13)'s integrand of each row and grid action from its client's sums (client
    ``i``'s: entry ``entry[i]`` of ``l_joins``, ``l_stays`` and ``squares``, row
    ``entry[i]`` of ``accuracy``: its own, or its action's in a single profile), into row
    ``at[r]`` of ``out``: ``(1 - alpha) kappa accuracy + alpha c S / sigma + beta (((N -
    1)/N)^2 sigma^2 + squares / N^2) - r count - q``, each operation in that order
    (``constants``: ``kappa, c, S, ((N - 1)/N)^2, N^2, q``; ``reports``, ``sigmas``: each
    action's). A row's and an action's parts are taken once, not per cell (the same
    operations, so the same bits), and a row's loop over the actions is vectorized."""
    kappa, c_privacy, size, spread, n2, q = constants
    k = reports.size
    noise_part, fine, joins = np.empty(k), np.empty(k), np.empty(k, np.bool_)
    for j in range(k):
        noise_part[j] = spread * sigmas[j] ** 2
        fine[j] = beta[reports[j]]
        joins[j] = reports[j] == 0
    for r in range(client.size):
        a, o, e = alpha[r], at[r], entry[client[r]]
        weight, privacy, others = (1.0 - a) * kappa, a * c_privacy * size, squares[e] / n2
        joined, stayed = reward[0] * l_joins[e], reward[1] * l_stays[e]
        for j in range(k):
            out[o, j] = (weight * accuracy[e, j] + privacy / sigmas[j]
                         + fine[j] * (noise_part[j] + others)
                         - (joined if joins[j] else stayed) - q)


@compiled
def _counts(actions, by_client, k):
    """Clients per (profile, type, action) from each client's profile types (``by_client``,
    ``(C, S)``, 0 or 1): a client of type 1 in profile ``s`` counts in ``(s, 1, its type-1
    action)``, one of type 0 in ``(s, 0, its type-0 action)``, so each client adds its row
    of types, whole, to the type-1 tally of its type-1 action and to the type-1 tally of its
    type-0 action (a loop the compiler vectorizes), and type 0's counts are its action's
    clients less that tally (integers: exact in any order)."""
    clients, profiles = by_client.shape
    ones = np.zeros((k, profiles), np.int32)  # type-1 clients by their type-1 action
    also = np.zeros((k, profiles), np.int32)  # type-1 clients by their type-0 action
    rows = np.zeros(k, np.int64)  # clients by their type-0 action
    for c in range(clients):
        a0, a1 = actions[0, c], actions[1, c]
        rows[a0] += 1
        t, one, other = by_client[c], ones[a1], also[a0]
        for s in range(profiles):
            one[s] += t[s]
            other[s] += t[s]
    out = np.empty((profiles, 2, k))
    for s in range(profiles):
        for a in range(k):
            out[s, 0, a] = rows[a] - also[a, s]
            out[s, 1, a] = ones[a, s]
    return out
