"""Learning rules: how an agent picks its next strategy from what it experiences.

Two families share this module.

*Best response* (today's reference in the environments): ``update(current, target)`` maps the
current strategy and the best response the agent computed from its own type and what the
protocol lets it observe to its next strategy (:class:`ExactBestResponse`,
:class:`DampedBestResponse`). A learner never sees the predicted equilibrium.

*Learning from experience* (the ``learning-dynamics`` environment): ``n`` agents each hold a
state over an explicit grid of actions (noise levels, with ``inf`` the opt-out where a game has
one), ``act(rng)`` gives every agent's action and ``observe(feedback)`` updates every state at
once, from one of two kinds of feedback:

* ``full`` -- each agent's cost of every action on its grid given what the others just did,
  ``(n, m)``;
* ``bandit`` -- only each agent's own realized cost, ``(n,)``, a noisy sample from the simulated
  release, never the expected cost.

A round costs ``O(n m)`` numpy work: 10^4 agents are one array, not 10^4 Python objects.
Costs are mapped to ``[0, 1]``, the scale the regret bounds are stated in: full-information
costs by subtracting each row's smallest (regret is unchanged by a constant per round) and
dividing by the game's declared ``span`` of one agent's costs in a round; bandit costs by the
declared range ``[low, high]`` of a realized cost. Both are clipped (an infinite cost, e.g. zero
noise on a lone prefix, counts as the worst), and the guarantees hold for the clipped costs.

Each learner states its guarantee, ``regret_bound(T)``: a bound on the expected total external
regret after ``T`` rounds on costs in ``[0, 1]``, ``None`` where there is none.

* :class:`Hedge` (Freund & Schapire 1997; Cesa-Bianchi & Lugosi 2006, Theorem 2.2): with
  ``eta = sqrt(8 ln m / T)`` at most ``sqrt(T ln m / 2)``, an average of ``sqrt(ln m / (2T))``;
* :class:`EXP3` (Auer et al. 2002; the loss form of Bubeck & Cesa-Bianchi 2012, Theorem 3.1):
  with ``eta = sqrt(2 ln m / (T m))`` at most ``sqrt(2 T m ln m)``;
* :class:`RegretMatching` (Hart & Mas-Colell 2000; Cesa-Bianchi & Lugosi 2006, Corollary 2.1,
  the polynomial potential with ``p = 2``): at most ``sqrt(T (m - 1))``;
* :class:`FictitiousPlay` (Brown 1951): best response to the average of the cost vectors so far
  (the others' empirical play); no guarantee against arbitrary costs (its empirical frequencies
  converge in two-player zero-sum games, Robinson 1951);
* :class:`GridBestResponse`: best response to the last round's costs (the reference);
* :class:`SPSA` (Spall 1992, 1998): a zeroth-order gradient step on the continuous noise level
  from two realized costs at ``x +- c_t``, projected onto the grid's finite interval, with
  Spall's gains ``a_t = a / (t + 1)^0.602``, ``c_t = c / (t + 1)^0.101``; no regret bound here
  (the costs are not convex in the level), so ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.validation import (
    ConfigError,
    check_choice,
    check_grid,
    check_int,
    check_real,
)


class Learner(Protocol):
    """Chooses the next strategy from the current one and the current best response."""

    def update(self, current: float, target: float) -> float: ...


@dataclass(frozen=True)
class ExactBestResponse:
    """Play the best response to the latest observation."""

    def update(self, current: float, target: float) -> float:
        return target


@dataclass(frozen=True)
class DampedBestResponse:
    """Move a fraction ``rate`` of the way towards the best response (0 < rate <= 1)."""

    rate: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ConfigError(f"damping={self.rate!r} is out of range: damping must lie in (0, 1]")

    def update(self, current: float, target: float) -> float:
        return current + self.rate * (target - current)


LEARNERS = ("best_response", "damped")


def make_learner(name: str, damping: float = 0.5) -> Learner:
    """Build a learner by name: ``best_response`` or ``damped`` (with ``damping``)."""
    if name == "best_response":
        return ExactBestResponse()
    if name == "damped":
        return DampedBestResponse(damping)
    raise ConfigError(f"learner={name!r} is not allowed: learner must be one of {LEARNERS}")


FEEDBACK = ("full", "bandit")
#: What a config's ``feedback`` takes: a kind, or ``auto`` (the learner's own).
FEEDBACK_SETTINGS = ("auto", *FEEDBACK)


def resolve_feedback(learner: str, feedback: str) -> str:
    """The feedback a grid learner gets: ``auto`` is its own kind (full information for
    fictitious play, Hedge, regret matching and best response; bandit for EXP3 and SPSA); a
    kind it cannot learn from is refused by name."""
    kinds = GRID_LEARNERS[learner].feedback_kinds
    if feedback not in ("auto", *kinds):
        raise ConfigError(f"feedback={feedback!r} is not allowed with learner={learner!r}: it "
                          "learns from " + " or ".join(kinds) + " feedback")
    return kinds[0] if feedback == "auto" else feedback


class GridLearner:
    """``n`` agents, each choosing an action of ``grid`` every round, their states in arrays.

    Attributes:
        grid: the actions, ``(m,)``. agents: ``n``. rounds: the horizon ``T`` a default step
            size is tuned for. feedback: ``full`` or ``bandit``.
        span: per agent, the largest difference between its costs of two actions in one round
            (full information; larger differences are clipped).
        low, high: per agent, the range of a realized cost (bandit; clipped to it).
        last: the actions played last round, ``(n,)`` indices into ``grid``.
        drawn_from: the mixed strategies they were drawn from, ``(n, m)``, until
            :meth:`observe`: the exponential-weights learners then take their next
            strategies in place, in the pass that updates their losses (a reader of the
            strategies played, such as the analyst's sums, reads them before).
        lowest: the exponential-weights learners' action of the smallest loss per agent
            (their :meth:`mode`), taken in the same pass.
    """

    #: The feedback kinds this learner can use.
    feedback_kinds: tuple[str, ...] = ("full",)
    #: Whether acting draws a uniform per agent (a deterministic rule draws none).
    draws: bool = True
    #: Whether its own start (no ``start`` given) is the uniform mixed strategy (else the
    #: grid's middle action).
    mixed_start: bool = False

    def __init__(self, grid: ArrayLike, agents: int, rounds: int, feedback: str | None = None,
                 span: ArrayLike = 1.0, low: ArrayLike = 0.0, high: ArrayLike = 1.0,
                 start: ArrayLike | None = None) -> None:
        self.grid = check_grid(grid)
        self.agents = check_int("agents", agents, 1)
        self.rounds = check_int("rounds", rounds, 1)
        self.feedback = check_choice("feedback", feedback or self.feedback_kinds[0],
                                     self.feedback_kinds)
        self.span = _per_agent("span", span, self.agents)
        self.low = _per_agent("low", low, self.agents, positive=False)
        self.high = _per_agent("high", high, self.agents, positive=False)
        if np.any(self.high <= self.low):
            raise ConfigError("high must exceed low for every agent")
        self.last = np.zeros(self.agents, dtype=int)
        self.drawn_from: NDArray | None = None
        self.lowest: NDArray | None = None
        self._mapped: NDArray | None = None
        self.start = None if start is None else _start_indices(start, self.agents, self.m)

    def __getstate__(self) -> dict:
        """A checkpoint leaves out the units' buffer."""
        return {**self.__dict__, "_mapped": None}

    @property
    def first(self) -> NDArray:
        """Each agent's first action index (its ``start``, else the grid's middle)."""
        return (np.full(self.agents, (self.m - 1) // 2) if self.start is None
                else self.start)

    @property
    def m(self) -> int:
        return self.grid.size

    def probabilities(self) -> NDArray:
        """Each agent's mixed strategy, ``(n, m)``."""
        p = np.zeros((self.agents, self.m))
        p[np.arange(self.agents), self._choice()] = 1.0
        return p

    def _choice(self) -> NDArray:
        """A deterministic learner's action indices (overridden by the deterministic ones)."""
        raise NotImplementedError

    def mode(self) -> NDArray:
        """Each agent's most likely action now, ``(n,)`` indices into ``grid``."""
        return np.argmax(self.probabilities(), axis=1)

    def current(self) -> NDArray:
        """Each agent's strategy now as one action value (the last iterate): its most likely
        grid action."""
        return self.grid[self.mode()]

    def act(self, rng: np.random.Generator) -> NDArray:
        """Every agent's action value this round, drawn from its mixed strategy (one uniform
        per agent from ``rng``; the strategies are kept in ``drawn_from``)."""
        return self.act_with(rng.random(self.agents) if self.draws else None)

    def act_with(self, u: NDArray | None) -> NDArray:
        """:meth:`GridLearner.act` with the agents' uniforms given (``(n,)``; a population split
        over shards draws them by blocks of agents, :mod:`privgames.environments.shards`)."""
        self.last = np.empty(self.agents, dtype=np.int64)
        values = np.empty(self.agents)
        self.drawn_from = self._drawn_strategies(u, self.last, values)
        return values

    def _drawn_strategies(self, u: NDArray, out: NDArray, values: NDArray) -> NDArray:
        """The strategies this round's actions are drawn from (kept in ``drawn_from``
        until the next round), each row's action drawn with its uniform into ``out``, its
        value into ``values``."""
        p = self.probabilities()
        _draw(p, u, out, self.grid, values)
        return p

    def strategy(self, i: int) -> NDArray:
        """Agent ``i``'s mixed strategy now (what its next action is drawn from)."""
        return self.probabilities()[i].copy()

    def observe(self, feedback: ArrayLike, active: NDArray | None = None) -> None:
        """Update from the round's feedback: ``(n, m)`` costs (full information) or ``(n,)``
        realized costs of the actions played (bandit). ``active``: the agents that played this
        round (all by default); the others observe nothing and keep their state (a client's
        row for a type it does not have this round, in a game of incomplete information)."""
        c = np.asarray(feedback, dtype=float)
        active = (np.ones(self.agents, dtype=bool) if active is None
                  else np.asarray(active, dtype=bool))
        if self.feedback == "full":
            if c.shape != (self.agents, self.m):
                raise ConfigError(f"full-information feedback must have shape ({self.agents}, "
                                  f"{self.m}), got {c.shape}")
            self._observe_full(np.ascontiguousarray(c), active)
        else:
            if c.shape != (self.agents,):
                raise ConfigError(f"bandit feedback must be one realized cost per agent, "
                                  f"shape ({self.agents},), got {c.shape}")
            mapped = np.clip((c - self.low) / (self.high - self.low), 0.0, 1.0)
            self._update(np.where(active, mapped, 0.0), active)

    def _observe_full(self, costs: NDArray, active: NDArray) -> None:
        """Full-information costs into the learner's units (one ``(n, m)`` buffer for every
        round), then :meth:`_update`."""
        if self._mapped is None:
            self._mapped = np.empty((self.agents, self.m))
        self._update(_map_full(costs, self.span, active, self._mapped), active)

    def _update(self, costs: NDArray, active: NDArray) -> None:
        """Update from costs already mapped to ``[0, 1]`` (zero for the agents not
        ``active``, which leaves the no-regret learners' states unchanged); Hedge learns
        from the costs themselves (:meth:`_observe_full`)."""
        raise NotImplementedError

    def regret_bound(self, T: int) -> float | None:
        """A bound on each agent's expected total external regret after ``T`` rounds (costs in
        ``[0, 1]``), or ``None``."""
        return None


def _start_indices(start: ArrayLike, n: int, m: int) -> NDArray:
    idx = np.broadcast_to(np.asarray(start), (n,))
    if idx.dtype.kind not in "iu" or np.any((idx < 0) | (idx >= m)):
        raise ConfigError(f"start must hold one action index in [0, {m - 1}] per agent")
    return idx.astype(int)


def _prior(learner: GridLearner) -> tuple[NDArray, float]:
    """The exponential-weights learners' initial cumulative costs and ``ln(1 / pi_min)``: no
    start, the uniform prior (zeros, ``ln m``); a start, the prior ``pi`` with half the weight
    on the agent's start action and the rest shared by the others (initial costs
    ``-ln(pi) / eta`` up to a constant), so that its bound pays ``ln(2 (m - 1))`` for it."""
    if learner.start is None or learner.m < 2:
        return np.zeros((learner.agents, learner.m)), math.log(max(learner.m, 1))
    # -ln pi up to the constant ln 2: 0 on the start, ln(m - 1) elsewhere
    offset = np.full((learner.agents, learner.m), math.log(learner.m - 1))
    offset[np.arange(learner.agents), learner.start] = 0.0
    return offset, math.log(2.0 * (learner.m - 1))


def _per_agent(name: str, value: ArrayLike, n: int, positive: bool = True) -> NDArray:
    v = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    if not np.all(np.isfinite(v)) or (positive and np.any(v <= 0)):
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be finite"
                          + (" and > 0" if positive else ""))
    return v


def _softmin(cumulative: NDArray, eta: float) -> NDArray:
    """Each row's ``exp(-eta (L - min L))``, normalised: exponential weights, compiled
    (:func:`_learn_rows`)."""
    p = np.empty(cumulative.shape)
    _learn_rows(cumulative, eta, p, _NO_ROWS, np.ones(len(cumulative), dtype=np.bool_),
                _NONE, _NO_SPAN, False, False, True)
    return p


#: fdlibm's ``exp`` (``e_exp.c``, Sun Microsystems 1993): ``x = k ln 2 + r`` with ln 2 in two
#: parts, ``exp(r)`` from a degree-5 polynomial in ``r^2`` (a Remez fit), error below 1 ulp;
#: ``2^k`` from a table (subnormals and 0 included). Written out in IEEE operations, so that
#: the compiler vectorizes it (libm's ``exp`` is a call per element: 5 ns, against 1 ns
#: here) and its bits are the same on every CPU (glibc chooses its ``exp`` by the CPU's FMA;
#: numpy's is another code with AVX-512).
_LN2_HI, _LN2_LO, _INV_LN2 = 6.93147180369123816490e-01, 1.90821492927058770002e-10, \
    1.44269504088896338700e+00
_P1, _P2, _P3, _P4, _P5 = (1.66666666666666019037e-01, -2.77777777770155933842e-03,
                           6.61375632143793436117e-05, -1.65339022054652515390e-06,
                           4.13813679705723846039e-08)
_TWO_TO = 2.0 ** np.arange(-1077.0, 1.0)  # 2^k for k = -1077 .. 0
#: The smallest exponent taken (``exp`` of anything below is 0 in float64).
_EXP_FLOOR = -745.5
#: :func:`_learn_rows`' arguments for a part it does not take (no costs, no ranks).
_NONE, _NO_ROWS, _NO_SPAN = np.zeros((0, 0)), np.zeros(0, dtype=np.int64), np.zeros(0)


@compiled(rows_of=0)
def _learn_rows(losses: NDArray, eta: float, p: NDArray, lowest: NDArray, rows: NDArray,
                costs: NDArray, span: NDArray, add: bool, rank: bool, weigh: bool,
                pair: tuple) -> bool:
    """One pass over the ``rows``, a block at a time while it is in cache:

    * ``costs`` (full information, ``(n, m)``; empty: none) in the learner's units, each
      row less its smallest (NaN counts as ``inf``), over its ``span``, capped at 1, added to
      ``losses`` (``add``) or written over them (0 in a row not taken);
    * ``rank``: each row's action of the smallest loss into ``lowest``, as numpy's
      ``argmin`` takes it (the first of equal smallest, a NaN first of all);
    * ``weigh``: each row's exponential weights ``exp(-eta (L - min L))``, normalised, into
      ``p``: the block's exponents into one buffer, fdlibm's ``exp`` over it in one
      vectorized loop, then each row normalised. A row's minimum and sum run in four lanes
      (one chain per row would wait on each operation).

    With two actions (``pair``) a block's rows are read as flat runs and each step is written
    without a branch (a row not taken is computed and not kept), so that LLVM vectorizes
    across rows: the same operations in the same order, the same bits (NaN's sign aside,
    which IEEE leaves open), pinned against the loops for any ``m`` in the tests.

    Returns whether a rank in ``lowest`` changed.
    """
    moved = False
    n, m = losses.shape
    two = len(pair) == 2  # a constant (compiled's rows_of)
    m = 2 if two else m
    units = costs.shape[0] == n
    block = max(1, 4096 // m)
    x = np.empty(block * m)
    lows = np.empty(block)  # each row's smallest loss
    flat_losses, flat_costs, flat_p = losses.reshape(-1), costs.reshape(-1), p.reshape(-1)
    shifted = 0  # the rows of the two-action path whose rank changed
    for start in range(0, n, block):
        stop = min(n, start + block)
        count = 0
        # views from the block's start: indices from 0 that LLVM can bound
        on, lv = rows[start:stop], flat_losses[2 * start:2 * stop]
        cv, sv = flat_costs[2 * start:2 * stop], span[start:stop]
        for r in range(stop - start if two else 0):
            l0, l1 = lv[2 * r], lv[2 * r + 1]
            if units:
                c0, c1 = cv[2 * r], cv[2 * r + 1]
                low = np.inf  # the smallest cost, NaN aside
                low = c0 if c0 < low else low
                low = c1 if c1 < low else low
                u0 = ((np.inf if c0 != c0 else c0) - low) / sv[r]
                u1 = ((np.inf if c1 != c1 else c1) - low) / sv[r]
                u0, u1 = 1.0 if u0 > 1.0 else u0, 1.0 if u1 > 1.0 else u1
                if add:
                    l0, l1 = (l0 + u0, l1 + u1) if on[r] else (l0, l1)
                else:
                    l0, l1 = (u0, u1) if on[r] else (0.0, 0.0)
                lv[2 * r], lv[2 * r + 1] = l0, l1
            if weigh:
                low = lows[r] = l1 if l1 < l0 else l0  # the lanes' min(), all it comes to
                x[2 * r] = max(-eta * (l0 - low), _EXP_FLOOR)
                x[2 * r + 1] = max(-eta * (l1 - low), _EXP_FLOOR)
                count += 2
        for i in range(0 if two else start, 0 if two else stop):
            if not rows[i]:
                if units and not add:
                    for j in range(m):
                        losses[i, j] = 0.0
                continue
            if units:  # the smallest cost, NaN aside, in four lanes
                l0 = l1 = l2 = l3 = np.inf
                for j in range(0, 4 * (m // 4), 4):
                    c0, c1 = costs[i, j], costs[i, j + 1]
                    c2, c3 = costs[i, j + 2], costs[i, j + 3]
                    l0, l1 = c0 if c0 < l0 else l0, c1 if c1 < l1 else l1
                    l2, l3 = c2 if c2 < l2 else l2, c3 if c3 < l3 else l3
                for j in range(4 * (m // 4), m):
                    c0 = costs[i, j]
                    l0 = c0 if c0 < l0 else l0
                low = min(min(l0, l1), min(l2, l3))
                for j in range(m):
                    c = costs[i, j]
                    u = ((np.inf if c != c else c) - low) / span[i]
                    u = 1.0 if u > 1.0 else u
                    if add:
                        losses[i, j] += u
                    else:
                        losses[i, j] = u
            if weigh:
                l0 = l1 = l2 = l3 = losses[i, 0]
                for j in range(1, 1 + 4 * ((m - 1) // 4), 4):
                    l0, l1 = min(l0, losses[i, j]), min(l1, losses[i, j + 1])
                    l2, l3 = min(l2, losses[i, j + 2]), min(l3, losses[i, j + 3])
                for j in range(1 + 4 * ((m - 1) // 4), m):
                    l0 = min(l0, losses[i, j])
                low = lows[i - start] = min(min(l0, l1), min(l2, l3))
                for j in range(m):
                    x[count + j] = max(-eta * (losses[i, j] - low), _EXP_FLOOR)
                count += m
        if weigh:
            for q in range(count):
                v = x[q]
                k = np.rint(v * _INV_LN2)
                hi = v - k * _LN2_HI
                lo = k * _LN2_LO
                r = hi - lo
                t = r * r
                c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
                x[q] = (1.0 - ((lo - (r * c) / (2.0 - c)) - hi)) * _TWO_TO[int(k) + 1077]
        if not (rank or weigh):
            continue
        pv, rv = flat_p[2 * start:2 * stop], lowest[start:stop]
        for r in range(stop - start if two else 0):
            l0, l1 = lv[2 * r], lv[2 * r + 1]
            if rank:  # numpy's argmin: a NaN first, else the first smallest
                k = 0 if l0 != l0 else 1 if (l1 != l1 or l1 < l0) else 0
                before = rv[r]
                rv[r] = k if on[r] else before
                shifted |= on[r] & (k != before)
            if weigh:
                x0, x1 = x[2 * r], x[2 * r + 1]
                total = x0 + x1  # the lanes' sum: their zeros add nothing to an exp, never -0.0
                q0, q1 = pv[2 * r], pv[2 * r + 1]
                pv[2 * r], pv[2 * r + 1] = (x0 / total, x1 / total) if on[r] else (q0, q1)
        count = 0
        for i in range(0 if two else start, 0 if two else stop):
            if not rows[i]:
                continue
            total = np.nan
            if weigh:
                s0 = s1 = s2 = s3 = 0.0
                for j in range(0, 4 * (m // 4), 4):
                    s0, s1 = s0 + x[count + j], s1 + x[count + j + 1]
                    s2, s3 = s2 + x[count + j + 2], s3 + x[count + j + 3]
                for j in range(4 * (m // 4), m):
                    s0 += x[count + j]
                total = (s0 + s1) + (s2 + s3)
                for j in range(m):
                    p[i, j] = x[count + j] / total
                count += m
            if not rank:
                continue
            before = lowest[i]
            if total == total:  # no NaN among the losses (it would make the sum NaN)
                j = 0
                while losses[i, j] != lows[i - start]:
                    j += 1
                lowest[i] = j
            else:
                lowest[i] = 0
                low = losses[i, 0]
                if low == low:
                    for j in range(1, m):
                        c = losses[i, j]
                        if c != c:
                            lowest[i] = j
                            break
                        if c < low:
                            low = c
                            lowest[i] = j
            moved = moved or lowest[i] != before
    return moved or shifted != 0


@compiled
def _importance_weighted(estimates: NDArray, played: NDArray, costs: NDArray, p: NDArray,
                         active: NDArray) -> None:
    """EXP3's estimates: each row that played (``active``) gains its cost over its
    probability on its played action (one compiled pass over the rows)."""
    for i in range(played.size):
        if active[i]:
            a = played[i]
            estimates[i, a] += costs[i] / p[i, a]


def _row_argmin(x: NDArray) -> NDArray:
    """Each row's ``argmin`` as numpy takes it (the first of equal smallest, a NaN first of
    all), in one compiled pass over the rows (numpy's reduction over short rows is slower)."""
    out = np.zeros(len(x), dtype=np.int64)
    _learn_rows(x, 0.0, _NONE, out, np.ones(len(x), np.bool_), _NONE, _NO_SPAN, False, True,
                False)
    return out


@compiled(rows_of=0)
def _draw(p: NDArray, u: NDArray, out: NDArray, grid: NDArray, values: NDArray,
          pair: tuple) -> NDArray:
    """Each row's action index drawn with its uniform ``u`` into ``out``: the number of
    actions whose cumulative probability is below it (the last action at most); its grid
    value into ``values`` (in the same pass: a gather after it costs a millisecond at 10^6).

    A row's probabilities are never negative, so its cumulative sums only grow (a NaN stays):
    those below ``u`` are the ones before the first that is not, and they are counted
    without a branch. Rows of more than two actions go four at a time, four chains of
    additions at once (one row's waits on each: at 10^4 x 21, 0.19 ms a round against
    0.13)."""
    two = len(pair) == 2  # a constant (compiled's rows_of)
    n, m = p.shape[0], 2 if two else p.shape[1]
    fours = 0 if two else n - n % 4
    for i in range(0, fours, 4):
        s0 = s1 = s2 = s3 = 0.0
        k0 = k1 = k2 = k3 = 0
        for j in range(m):
            s0, s1, s2, s3 = s0 + p[i, j], s1 + p[i + 1, j], s2 + p[i + 2, j], s3 + p[i + 3, j]
            k0, k1 = k0 + (s0 < u[i]), k1 + (s1 < u[i + 1])
            k2, k3 = k2 + (s2 < u[i + 2]), k3 + (s3 < u[i + 3])
        for row, k in ((i, k0), (i + 1, k1), (i + 2, k2), (i + 3, k3)):
            out[row] = min(k, m - 1)
            values[row] = grid[out[row]]
    for i in range(fours, n):  # the rest, or every row of two actions
        cumulative, k = 0.0, 0
        for j in range(m):
            cumulative += p[i, j]
            k += cumulative < u[i]
        out[i] = min(k, m - 1)
        values[i] = grid[out[i]]
    return out


def _map_full(costs: NDArray, span: NDArray, active: NDArray, out: NDArray) -> NDArray:
    """Full-information costs in ``[0, 1]`` into ``out`` (:func:`_learn_rows`' units); 0 for
    a row that did not play."""
    _learn_rows(out, 0.0, _NONE, _NO_ROWS, active, costs, span, False, False, False)
    return out


def _step(name: str, eta: float | None, default: float) -> float:
    return default if eta is None else check_real(name, eta, 0.0, low_open=True)


class _ExponentialWeights(GridLearner):
    """Hedge's and EXP3's common part: the strategy ``p ∝ pi exp(-eta L)`` of each agent's
    per-action losses ``L`` (:attr:`losses`: Hedge's cumulative costs, EXP3's estimates),
    kept with its last iterate and taken again in place for the agents that observe
    (:meth:`_learn`)."""

    mixed_start = True
    losses: NDArray
    _mode: NDArray | None = None  # the ranks as last handed out, while none has changed

    def probabilities(self) -> NDArray:
        return _softmin(self.losses, self.eta)

    def _drawn_strategies(self, u: NDArray, out: NDArray, values: NDArray) -> NDArray:
        p = self._kept()
        _draw(p, u, out, self.grid, values)
        return p

    def strategy(self, i: int) -> NDArray:
        return self._kept()[i].copy()

    def mode(self) -> NDArray:
        """The ranks (:attr:`lowest`) as a read-only copy: the same one while no pass that
        observes changes a rank (a reader tells an unmoved iterate by identity, at no
        pass over the agents)."""
        self._kept()  # the weights fall with the losses
        if self._mode is None:
            self._mode = self.lowest.copy()
            self._mode.flags.writeable = False
        return self._mode

    def _kept(self) -> NDArray:
        """The strategies now, ``(n, m)``, and each row's action of the smallest loss
        (``lowest``): taken from every row's losses on first use, then by each pass that
        observes (:meth:`_learn`), for the rows that observed."""
        if self.drawn_from is None:
            self.drawn_from = np.empty((self.agents, self.m))
            self.lowest = np.zeros(self.agents, dtype=np.int64)
            _learn_rows(self.losses, self.eta, self.drawn_from, self.lowest,
                        np.ones(self.agents, dtype=np.bool_), _NONE, _NO_SPAN, False, True, True)
        return self.drawn_from

    def _learn(self, active: NDArray, costs: NDArray | None = None) -> None:
        """The update in one compiled pass over the rows that observed (:func:`_learn_rows`):
        full-information ``costs`` (Hedge) added to the losses in the learner's units, then
        each row's action of the smallest loss (:meth:`mode`) and its next strategy, written
        over the one it drew from (a row that did not observe keeps its losses, so its
        strategy: no pass over it)."""
        if _learn_rows(self.losses, self.eta, self._kept(), self.lowest, active,
                       _NONE if costs is None else costs, self.span, True, True, True):
            self._mode = None


class Hedge(_ExponentialWeights):
    """Multiplicative weights on the cumulative costs, ``p ∝ pi exp(-eta L)`` (``pi``: the
    prior, uniform or leaning to the agent's start), with the standard step ``eta = sqrt(8
    ln(1 / pi_min) / T)`` (``ln m`` from the uniform start) unless one is given (full
    information)."""

    def __init__(self, *args, eta: float | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        offset, self.log_prior = _prior(self)
        self.eta = _step("eta", eta,
                         math.sqrt(8.0 * max(self.log_prior, math.log(2)) / self.rounds))
        self.cumulative = offset / self.eta

    @property
    def losses(self) -> NDArray:
        return self.cumulative

    def _observe_full(self, costs: NDArray, active: NDArray) -> None:
        self._learn(active, costs)

    def regret_bound(self, T: int) -> float | None:
        """``ln m / eta + eta T / 8``: Hedge's bound with a fixed step, valid at every round
        ``T`` (Freund and Schapire 1997; Cesa-Bianchi and Lugosi, Theorem 2.2). With the
        default step it is ``sqrt(T ln m / 2)`` at the horizon only: before it, the
        horizon-tuned step pays ``ln m / eta`` in full (the per-round curve
        ``sqrt(t ln m / 2)`` did not hold before the last round). From a start (a prior
        ``pi``), ``ln(1 / pi_min) = ln(2 (m - 1))`` replaces ``ln m`` (the same proof: the
        potential starts at ``ln pi_a`` for the compared action ``a``)."""
        return self.log_prior / self.eta + self.eta * T / 8.0


class EXP3(_ExponentialWeights):
    """Exponential weights on importance-weighted estimates (the played action's cost divided by
    its probability) from the prior ``pi`` (as :class:`Hedge`), ``eta = sqrt(2 ln(1 / pi_min)
    / (T m))`` unless one is given (bandit)."""

    feedback_kinds = ("bandit",)

    def __init__(self, *args, eta: float | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        offset, self.log_prior = _prior(self)
        self.eta = _step("eta", eta, math.sqrt(2.0 * max(self.log_prior, math.log(2))
                                               / (self.rounds * self.m)))
        self.estimates = offset / self.eta

    @property
    def losses(self) -> NDArray:
        return self.estimates

    def _update(self, costs: NDArray, active: NDArray) -> None:
        _importance_weighted(self.estimates, self.last, costs, self._kept(), active)
        self._learn(active)

    def regret_bound(self, T: int) -> float | None:
        """``ln m / eta + eta m T / 2``: EXP3's expected-regret bound with a fixed step, at
        every round ``T`` (Bubeck and Cesa-Bianchi 2012, Theorem 3.1, losses in ``[0, 1]``);
        with the default step, ``sqrt(2 T m ln m)`` at the horizon; from a start, ``ln(2 (m -
        1))`` replaces ``ln m`` (as for :class:`Hedge`)."""
        return self.log_prior / self.eta + self.eta * self.m * T / 2.0


class RegretMatching(GridLearner):
    """Play each action with probability proportional to its positive cumulative regret;
    while none is positive, uniformly, or the agent's start action if it has one (any play
    keeps Blackwell's condition there, so the bound is the same); full information."""

    mixed_start = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.regret = np.zeros((self.agents, self.m))
        self._idle = np.full((self.agents, self.m), 1.0 / self.m)
        if self.start is not None:
            self._idle = np.zeros((self.agents, self.m))
            self._idle[np.arange(self.agents), self.start] = 1.0
        self._p = self._idle

    def probabilities(self) -> NDArray:
        return self._p

    def _update(self, costs: NDArray, active: NDArray) -> None:
        self.regret += np.einsum("nm,nm->n", self._p, costs)[:, None] - costs
        positive = np.maximum(self.regret, 0.0)
        total = positive.sum(axis=1, keepdims=True)
        self._p = np.where(total > 0, positive / np.where(total > 0, total, 1.0), self._idle)

    def regret_bound(self, T: int) -> float | None:
        return math.sqrt(T * (self.m - 1))


class FictitiousPlay(GridLearner):
    """Best response (the lowest action on ties) to the average of the cost vectors seen so
    far, i.e. to the others' empirical play; deterministic, full information. Before any
    observation it plays its :attr:`~GridLearner.first` action."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cumulative = np.zeros((self.agents, self.m))
        self._seen = np.zeros(self.agents, dtype=bool)

    def _choice(self) -> NDArray:
        return np.where(self._seen, _row_argmin(self.cumulative), self.first)

    def _update(self, costs: NDArray, active: NDArray) -> None:
        self.cumulative += costs
        self._seen |= active


class GridBestResponse(GridLearner):
    """Best response (the lowest action on ties) to the last round's costs on the grid (the
    reference); it starts from its :attr:`~GridLearner.first` action."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._best = self.first.copy()

    def _choice(self) -> NDArray:
        return self._best

    def _update(self, costs: NDArray, active: NDArray) -> None:
        self._best = np.where(active, np.argmin(costs, axis=1), self._best)


class SPSA(GridLearner):
    """Simultaneous-perturbation stochastic approximation on the continuous noise level in the
    grid's finite interval ``[g_0, g_max]`` (no opt-out), from bandit feedback.

    Each agent keeps ``x`` in ``[0, 1]`` (the interval's fraction); over two rounds it plays
    ``x + c_t`` then ``x - c_t`` (clipped), and steps ``x <- clip(x - a_t (y+ - y-) / (2 c_t))``
    with its two realized costs ``y+-`` (scaled by its range). It starts in the middle, or at
    its start action's place in the interval (the opt-out: the interval's top).
    """

    feedback_kinds = ("bandit",)

    def __init__(self, *args, a: float = 0.5, c: float = 0.1, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        finite = self.grid[np.isfinite(self.grid)]
        if finite.size < 2:
            raise ConfigError("spsa needs a grid with at least two finite levels")
        self.interval = (float(finite[0]), float(finite[-1]))
        self.a = check_real("spsa_a", a, 0.0, low_open=True)
        self.c = check_real("spsa_c", c, 0.0, 0.5, low_open=True)
        lo, hi = self.interval
        self.x = (np.full(self.agents, 0.5) if self.start is None else
                  np.clip((np.minimum(self.grid[self.start], hi) - lo) / (hi - lo), 0.0, 1.0))
        self.t = 0
        self._plus = np.zeros(self.agents)

    def _gains(self) -> tuple[float, float]:
        k = self.t // 2 + 1
        return self.a / k**0.602, self.c / k**0.101

    draws = False

    def act_with(self, u: NDArray | None) -> NDArray:
        _, c = self._gains()
        sign = 1.0 if self.t % 2 == 0 else -1.0
        lo, hi = self.interval
        values = lo + np.clip(self.x + sign * c, 0.0, 1.0) * (hi - lo)
        self.last = np.abs(self.grid[None, :] - values[:, None]).argmin(axis=1)
        self.drawn_from = self.probabilities()
        return values

    def probabilities(self) -> NDArray:
        p = np.zeros((self.agents, self.m))
        p[np.arange(self.agents), self.last] = 1.0
        return p

    def _update(self, costs: NDArray, active: NDArray) -> None:
        if not active.all():
            raise ConfigError("spsa cannot learn in a game of incomplete information: its "
                              "two-round perturbation needs every agent to play every round")
        a, c = self._gains()
        if self.t % 2 == 0:
            self._plus = costs
        else:
            self.x = np.clip(self.x - a * (self._plus - costs) / (2.0 * c), 0.0, 1.0)
        self.t += 1

    def values(self) -> NDArray:
        """The agents' current levels (the centre of their perturbation)."""
        lo, hi = self.interval
        return lo + self.x * (hi - lo)

    def current(self) -> NDArray:
        return self.values()


#: Where a population's learners start (``LearningConfig.start``).
STARTS = ("random", "uniform", "middle")


def start_actions(start: str, learner: str, m: int, u: NDArray) -> NDArray | None:
    """Each agent's start action index on a grid of ``m``: ``middle``, the grid's middle;
    ``random``, a uniformly drawn action per agent (``u``: its own uniform in ``[0, 1)``);
    ``uniform``, the learner's uniform mixed start (``None``) where it has one (Hedge, EXP3,
    regret matching), else a drawn action as ``random``."""
    check_choice("start", start, STARTS)
    if start == "middle":
        return np.full(u.size, (m - 1) // 2)
    if start == "uniform" and GRID_LEARNERS[learner].mixed_start:
        return None
    return np.minimum((u * m).astype(int), m - 1)


#: Name -> learner class of the learning-dynamics learners.
GRID_LEARNERS: dict[str, type[GridLearner]] = {
    "best_response": GridBestResponse, "fictitious": FictitiousPlay, "hedge": Hedge,
    "exp3": EXP3, "spsa": SPSA, "regret_matching": RegretMatching}


def make_grid_learner(name: str, grid: ArrayLike, agents: int, rounds: int,
                      feedback: str = "full", span: ArrayLike = 1.0, low: ArrayLike = 0.0,
                      high: ArrayLike = 1.0, eta: float | None = None,
                      start: ArrayLike | None = None) -> GridLearner:
    """A learner by name (:data:`GRID_LEARNERS`) with the game's grid, agents, horizon, feedback
    and cost scales; ``eta``, the step size, only for ``hedge``, ``exp3`` (its weights' rate)
    and ``spsa`` (its gain ``a``); ``start``, each agent's start action index (``None``: the
    learner's own start, uniform or the grid's middle)."""
    kind = GRID_LEARNERS[check_choice("learner", name, tuple(GRID_LEARNERS))]
    feedback = resolve_feedback(name, check_choice("feedback", feedback, FEEDBACK))
    scales = {"span": span, "low": low, "high": high, "start": start}
    if eta is not None and kind in (Hedge, EXP3):
        return kind(grid, agents, rounds, feedback, eta=eta, **scales)
    if eta is not None and kind is SPSA:
        return kind(grid, agents, rounds, feedback, a=eta, **scales)
    if eta is not None:
        raise ConfigError(f"eta={eta!r} is not allowed with learner={name!r}: only hedge, exp3 "
                          "and spsa take a step size")
    return kind(grid, agents, rounds, feedback, **scales)
