"""The games of ``learning-dynamics`` as slices of one population: what one shard computes.

A slice owns the agents ``[start, stop)`` of a population split over shards
(:mod:`privgames.environments.shards`): their private types, learners, random streams and the
analyst's running sums. Every cost comes from the population's *aggregates*, which the driver
(:class:`~privgames.environments.learning_dynamics.LearningModel`) combines from the shards'
partials: a game's round is written once, here, and runs in process or on Ray alike. The games
are aggregative, so what crosses the network is small. Per game (besides the measurements'
partials every round: social cost's sum, the largest regret, CCE gain, distance and deviation
gain, and one hash per block of the last iterate):

=========  ===========================================  =======================================
game       once (setup)                                 per round (and for the last iterate)
=========  ===========================================  =======================================
pricing    eq 10/11's summands' sums, the profiles'     ``sum sigma^-2`` (MLE) or
           extremes (the grid), eq 11's aggregate       ``sum sigma^2`` (mean), the count of
           (Definition 4), 64 scale rounds' release     opt-outs, ``sum sigma^2`` of the
           sums                                          finite; bandit: the release's sums
bas        ``max beta``, ``sum alpha``; the grid NE's   the blocks' sums of ``sigma^2`` (the
           pass down the chain (one prefix, shard to    total, and each user's upstream
           shard)                                       variance: an exclusive scan)
sar        nothing                                      the participants' count
ppsp       the weights' sums (Theorem 4's ``c``), the   each shard's two largest and two
           preferred ``c``'s extremes (the grid)        smallest ``c``
bas-       ``max beta``, ``sum alpha``, the first       each shard's level map (``m``
sequen-    user's preference (Stage 2's swap);          integers), from which each shard has
tial       Theorem 1 by backward induction, one map     the level its first user receives and
           handed from the last shard back              the map of the users after it
pricing-   the optimum (the first shard's); 64 scale    clients per (type, action) this round
bayes      rounds' counts and release sums              and per (profile, type, action) over
                                                        the analyst's profiles (integers,
                                                        exact in any sum); bandit: the
                                                        release's ``sum w e``, ``sum e``
=========  ===========================================  =======================================

Sums travel as one partial per block of 1,024 agents, so every number is the same at any shard
count; a draw every agent shares (a round's release error in BAS and PPSP) comes from one
generator each shard holds a copy of.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from privgames.agents.learners import SPSA, make_grid_learner, start_actions
from privgames.environments.config import ConfigError
from privgames.environments.learning_measures import RegretSums
from privgames.environments.shards import (
    BLOCK,
    BlockStreams,
    Partials,
    block_sums,
    exclusive_scan,
)
from privgames.environments.streams import child, generator
from privgames.mechanisms import chain, ppsp, pricing
from privgames.mechanisms.bas_sequential import (
    apply_map,
    backward_induction,
    chain_costs,
    chain_tables,
    compose,
    follower_maps,
    identity_map,
    leader_map,
    rest_maps,
    walk,
)
from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.learning_games import (
    SAMPLED,
    BayesRules,
    SARGame,
    _own_grid,
    bas_chain_replies,
    bas_costs,
    bas_grid,
    bas_realized,
    cost_table,
    grid_distance,
    largest_gains,
    ppsp_costs,
    ppsp_grid,
    ppsp_realized,
    relative_gain,
    release_loss,
    row_minima,
    scales_from,
    snap_to,
    two_extremes,
    type_profiles,
)
from privgames.mechanisms.pricing_bayes import BinaryGame

#: Streams of the population's seed: the types, the learners' draws, the release, the scales
#: (each per block), the starts (``(START, start_run)``, then the block), the draws every
#: agent shares (``(COMMON, 0)`` a round's, ``(COMMON, 1)`` the scale rounds'), and the types
#: drawn each round under incomplete information (per block).
TYPES, ACT, RELEASE, SCALES, START, COMMON, ROUND_TYPES = range(7)
#: Rounds of realized costs at the grid's middle that set the bandit learners' ranges.
SCALE_DRAWS = 64
#: Blocks of agents whose realized costs are drawn at a time (the scale rounds': 64 rounds of
#: 16,384 agents, 8 MB an array), where a game's draws make several arrays a round.
PART = 16
#: :func:`_played_cells`' rows for "every row".
_EVERY = np.zeros(0, dtype=np.bool_)


@dataclass(frozen=True)
class AgentView:
    """One agent, read from its shard when asked: a shard keeps no Python object per agent
    (at 10^6 agents a ``mesa.Agent`` each would cost more than the agents' numbers).

    Attributes:
        index: the agent (its row). private: its private type by name (pricing's
            ``alpha``, BAS's ``beta``, PPSP's weights; SAR's users have none). strategy: its
            mixed strategy now (what its next action is drawn from). action: the action it
            last played. iterate: its
            last iterate. reference: its action in the predicted profile. costs: its expected
            cost of each grid action against last round's play (NaN before a round).
    """

    index: int
    private: dict[str, float]
    strategy: NDArray
    action: float
    iterate: float
    reference: float
    costs: NDArray


def block_hashes(values: NDArray) -> NDArray:
    """One 32-bit hash per block of agents of ``values`` (``(rows per agent, agents)``; as
    floats: their sum over the blocks is exact and the same at any shard count), so that the
    driver tells a profile it saw before: FNV-1a over the block's 64-bit words, then
    splitmix64's finish (integer arithmetic: the same on every machine), compiled."""
    words = np.ascontiguousarray(values, dtype=float).view(np.uint64)
    return _block_hashes(words, BLOCK, np.empty(-(-words.shape[1] // BLOCK)))


@compiled
def _block_hashes(words, block, out):
    rows, size = words.shape
    for b in range(out.size):
        h = np.uint64(14695981039346656037)
        for r in range(rows):
            for j in range(b * block, min(size, (b + 1) * block)):
                h = (h ^ words[r, j]) * np.uint64(1099511628211)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[b] = float((h ^ (h >> np.uint64(31))) >> np.uint64(32))
    return out


@compiled
def _played_cells(costs, index, active, out):
    """Each row's cost of the action it played, ``costs[i, index[i]]``, for the rows that
    played (``active``; empty: every row), into ``out`` (the others keep theirs)."""
    every = active.size == 0
    for i in range(index.size):
        if every or active[i]:
            out[i] = costs[i, index[i]]
    return out


class GameSlice:
    """Agents ``[start, stop)`` of a learning game: learners, feedback and measurements; a
    game's subclass gives its types, the aggregates it needs and its costs from them.

    The driver calls, in order: each of :attr:`SETUP` (``"all"``: every shard, the partials
    combined and added to the totals; ``"chain"`` (``"reverse"``: from the last shard):
    shard after shard, each given what the one
    before returned), :meth:`middle_partials`, :meth:`set_scales`; then per round :meth:`act`
    and :meth:`respond`, and :meth:`measure` when the last iterate moved.
    """

    SETUP: ClassVar[tuple[tuple[str, str], ...]] = ()
    log_scale: ClassVar[bool] = False
    #: Whether :meth:`_costs` writes a round's table into ``out``: kept for the slice, as a
    #: fresh one is faulted in at every round (168 MB at 10^6 agents: 12 ms).
    KEEPS_TABLE: ClassVar[bool] = False
    #: The private types kept per agent, by attribute name (:meth:`private_types`).
    TYPES: ClassVar[tuple[str, ...]] = ()
    #: Learner rows per agent (``pricing-bayes``: one per type, kept as ``t size + i``;
    #: ``bas-sequential``: one per observed state, kept as ``i ROWS + s``: :meth:`_rows_of`).
    ROWS: ClassVar[int] = 1

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        self.c, self.start, self.n, self.size = config, start, config.agents, stop - start
        self.rows = self.ROWS * self.size
        self.active: NDArray | None = None  # the rows that play this round (None: all)
        self.full = config.resolved_feedback == "full"
        (self.type_stream, self.act_stream, self.release_stream,
         self.scale_stream) = (BlockStreams(seed, k, start, stop, self.n) for k in range(4))
        self.start_stream = BlockStreams(child(seed, START), start_run, start, stop, self.n)
        self.common, self.common_scales = (generator(child(seed, COMMON, k)) for k in range(2))
        self.references: dict[str, NDArray] = {}
        self.optimum_profile: NDArray | None = None
        self.grid: NDArray = np.zeros(0)
        self.learner = self.sums = self.mode = self.values = self.draws = None
        self.value_index = self.mode_index = None  # their grid indices (not SPSA's points)
        self._table: NDArray | None = None  # the round's costs (:attr:`KEEPS_TABLE`)
        self._totals: dict = {}  # the last round's aggregates (an agent's costs, on request)
        self._iterate: Partials | None = None  # the last iterate's partials, while it stays

    # --- a game's pieces ------------------------------------------------------------------------
    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        """What the others' costs need of these agents' actions ``v`` (names ``prefix``ed)."""
        raise NotImplementedError

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               lowest: bool = False) -> NDArray:
        """Each agent's cost of each candidate (default: the grid), the others playing ``v``
        (whose aggregates are ``totals``); ``lowest``: each agent's smallest of them, as
        numpy's ``min`` (the compiled tables take it without the table)."""
        raise NotImplementedError

    def _realized(self, v: NDArray, draws: Any, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        """One realized cost per agent (``rows`` rounds of them along a leading axis), drawing
        what it needs from ``stream`` (per agent) and ``common`` (shared)."""
        raise NotImplementedError

    def _draw(self, v: NDArray, stream: BlockStreams, rows: int | None) -> Any:
        """What a round draws before the aggregates are combined (pricing's release noise)."""
        return None

    def _release_partials(self, v: NDArray, draws: Any, partials: Partials) -> Partials:
        """``partials`` with what the release of ``draws`` adds to the aggregates."""
        return partials

    def _social(self, v: NDArray, totals: dict, own: NDArray) -> NDArray:
        """Each agent's share of the social cost (by default its own cost)."""
        return own

    def _social_sums(self, v: NDArray, totals: dict, own: NDArray) -> NDArray:
        """The social cost of ``v`` as block sums (:meth:`_social`'s shares)."""
        return block_sums(self._social(v, totals, own), self.start)

    def _round_costs(self, v: NDArray, totals: dict) -> NDArray:
        """The round's cost table as the learners and the analyst read it: the rows that
        played (:attr:`active`; the others' are not read); into one array kept for the slice
        where :attr:`KEEPS_TABLE`."""
        if not self.KEEPS_TABLE:
            return self._costs(v, totals)
        if self._table is None:
            self._table = np.empty((self.rows, self.grid.size))
        return self._costs(v, totals, out=self._table)

    def __getstate__(self) -> dict:
        """A checkpoint leaves out the kept table (made again at the next round)."""
        return {**self.__dict__, "_table": None}

    def _grid_index(self, values: NDArray) -> NDArray | None:
        """The grid indices of ``values`` if they are the round's actions or the last
        iterate (the learners' own), else None (SPSA's points, or other values)."""
        for known, index in ((self.values, self.value_index), (self.mode, self.mode_index)):
            if values is known and index is not None:
                return index
        return None

    def _deviation(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """Each agent's cost at ``v`` and its best on the grid against it."""
        return self._costs(v, totals, v[:, None])[:, 0], self._costs(v, totals, lowest=True)

    def _begin_round(self) -> None:
        """What is drawn before a round is played (pricing-bayes: the clients' types)."""

    def _played(self, v: NDArray, totals: dict) -> None:
        """What the round's actions decide of who plays (bas-sequential: the path)."""

    def _private(self, i: int) -> dict[str, float]:
        """Agent ``i``'s (local index) private type by name."""
        return {}

    def _distance_partials(self, mode: NDArray) -> Partials:
        """The last iterate's distance to each reference (the largest per agent)."""
        return Partials(maxima={f"distance_{name}": grid_distance(self.grid, mode, ref,
                                                                  self.log_scale)
                                for name, ref in self.references.items()})

    @classmethod
    def distance_from(cls, totals: dict, name: str, config: Any) -> float:
        """:meth:`_distance_partials` combined: the distance to reference ``name``."""
        return totals[f"distance_{name}"]

    @classmethod
    def optimum_from(cls, totals: dict, config: Any) -> float | None:
        """The smallest social cost from the setup's totals, or ``None``: the social cost of
        :attr:`optimum_profile`, measured."""
        return None

    # --- setup --------------------------------------------------------------------------------
    def middle_partials(self, totals: dict) -> Partials:
        """Everyone at the grid's middle action (where the learners' scales are read): its
        aggregates, with the scale rounds' release."""
        self.middle = np.full(self.rows, self.grid[(self.grid.size - 1) // 2])
        self._scale_draws = self._draw(self.middle, self.scale_stream, SCALE_DRAWS)
        return self._release_partials(self.middle, self._scale_draws,
                                      self._profile_partials(self.middle))

    def _scales(self, totals: dict) -> tuple[NDArray, ...]:
        """Each agent's cost span and realized range at the middle (as
        :meth:`~privgames.mechanisms.learning_games.GridGame.scales`)."""
        costs = self._costs(self.middle, totals)
        lo, hi = np.empty(self.rows), np.empty(self.rows)
        for start in range(0, self.rows, SAMPLED):  # no copy of the whole table
            rows = slice(start, start + SAMPLED)
            finite = np.where(np.isfinite(costs[rows]), costs[rows], np.nan)
            lo[rows], hi[rows] = np.nanmin(finite, axis=1), np.nanmax(finite, axis=1)
        return scales_from(lo, hi, self._realized(self.middle, self._scale_draws, totals,
                                                  self.scale_stream, self.common_scales,
                                                  SCALE_DRAWS))

    def _row_uniform(self, stream: BlockStreams) -> NDArray:
        """One uniform per learner row (each agent's ``ROWS`` from its block's stream)."""
        return self._rows_of(stream.uniform() if self.ROWS == 1 else stream.uniform(self.ROWS))

    def _rows_of(self, x: NDArray) -> NDArray:
        """Per-agent numbers ``(ROWS, size)`` as learner rows (here ``t size + i``)."""
        return x.ravel()

    def _by_agent(self, rows: NDArray) -> NDArray:
        """Learner rows as ``(ROWS, size)``: :meth:`_rows_of` undone."""
        return rows.reshape(self.ROWS, -1)

    @classmethod
    def population(cls, x: NDArray, config: Any) -> NDArray:
        """Every shard's :meth:`_by_agent` rows side by side, ``(ROWS, agents)``, in the
        in-process engine's row order (here ``t N + i``)."""
        return x.ravel()

    @classmethod
    def row_count(cls, config: Any) -> int:
        """The in-process engine's learner rows."""
        return cls.ROWS * config.agents

    @classmethod
    def locate(cls, index: int, config: Any) -> tuple[int, int]:
        """The agent and its row (of ``ROWS``) of the in-process engine's row ``index``; a
        ``ConfigError`` outside them."""
        rows = cls.row_count(config)
        if not isinstance(index, int | np.integer) or not 0 <= index < rows:
            raise ConfigError(f"agent={index!r} is out of range: agents are 0 to {rows - 1}")
        return cls._agent_row(int(index), config)

    @classmethod
    def _agent_row(cls, index: int, config: Any) -> tuple[int, int]:
        t, agent = divmod(index, config.agents)
        return agent, t

    def _local(self, agent: int, row: int) -> int:
        """The local learner row of ``agent``'s ``row``."""
        return int(self._by_agent(np.arange(self.rows))[row, agent - self.start])

    def set_scales(self, totals: dict) -> None:
        """The learners' units (:meth:`_scales`), then the learners."""
        self.span, self.low, self.high = self._scales(totals)
        c = self.c
        start = start_actions(c.start, c.learner, self.grid.size,
                              self._row_uniform(self.start_stream))
        self.learner = make_grid_learner(c.learner, self.grid, self.rows, c.rounds,
                                         c.resolved_feedback, self.span, self.low, self.high,
                                         c.step_size, start)
        self.sums = RegretSums(self.rows, self.grid.size, self.full, self.span, self.low,
                               self.high)
        if isinstance(self.learner, SPSA):
            self.mode = self.learner.current()
        else:
            self.mode_index = self.learner.mode()
            self.mode = self.grid[self.mode_index]

    def reference_names(self) -> list[str]:
        """The theory's profiles, the predicted one first."""
        return list(self.references)

    def grid_of(self) -> NDArray:
        return self.grid

    # --- a round -----------------------------------------------------------------------------
    def act(self) -> Partials:
        """Every agent plays (bandit: and the release is drawn)."""
        self._begin_round()
        u = self._row_uniform(self.act_stream) if self.learner.draws else None
        v = self.values = self.learner.act_with(u)
        self.value_index = None if isinstance(self.learner, SPSA) else self.learner.last
        partials = self._profile_partials(v)
        if not self.full:
            self.draws = self._draw(v, self.release_stream, None)
            partials = self._release_partials(v, self.draws, partials)
        return partials

    def respond(self, totals: dict) -> Partials:
        """Feedback, the learners' update and the analyst's running sums, from the totals."""
        v = self.values
        self._totals = totals
        self._played(v, totals)
        costs = self._round_costs(v, totals)
        feedback = costs if self.full else self._realized(v, self.draws, totals,
                                                          self.release_stream, self.common, None)
        point = isinstance(self.learner, SPSA)  # plays points off the grid; the others, cells
        own = (self._costs(v, totals, v[:, None])[:, 0] if point
               else _played_cells(costs, self.learner.last, _EVERY if self.active is None
                                  else self.active, np.zeros(self.rows)))
        # the analyst reads the strategies played before the learners take their next ones
        sums = self.sums.add(costs, own, None if point else self.learner.drawn_from,
                             self.active)
        self.learner.observe(feedback, self.active)
        if point:
            mode = self.learner.current()
            changed, self.mode = not np.array_equal(mode, self.mode), mode
        else:  # the grid's actions are distinct: the same indices, the same actions
            index = self.learner.mode()
            changed = (index is not self.mode_index
                       and not np.array_equal(index, self.mode_index))
            if changed:
                self.mode_index, self.mode = index, self.grid[index]
        if changed or self._iterate is None:  # a function of the iterate alone: kept
            self._iterate = self.iterate_partials()
        partials = Partials(dict(self._iterate.sums), dict(self._iterate.maxima),
                            dict(self._iterate.gathered))
        partials.sums["social"] = self._social_sums(v, totals, own)
        partials.maxima.update({**{k: float(x) for k, x in sums.items()},
                                "changed": float(changed)})
        return partials

    def iterate_partials(self) -> Partials:
        """The last iterate's aggregates (names ``mode_``-prefixed), its hash and its
        distances' partials: functions of the iterate alone (a round sends them again
        unchanged while the iterate stays)."""
        partials = self._profile_partials(self.mode, prefix="mode_")
        distance = self._distance_partials(self.mode)
        partials.sums.update(distance.sums)
        partials.sums["mode_hash"] = block_hashes(self._by_agent(self.mode))
        partials.maxima.update(distance.maxima)
        return partials

    def _profile(self, which: str) -> NDArray:
        if which == "mode":
            return self.mode
        return self.optimum_profile if which == "optimum" else self.references[which]

    def profile_partials(self, which: str) -> Partials:
        """The aggregates of a reference profile (or ``optimum``), names prefixed by it."""
        return self._profile_partials(self._profile(which), prefix=f"{which}_")

    @staticmethod
    def _named(totals: dict, which: str) -> dict:
        """The totals of profile ``which``, without its prefix."""
        return {k[len(which) + 1:]: v for k, v in totals.items() if k.startswith(f"{which}_")}

    def measure(self, totals: dict, which: str = "mode") -> Partials:
        """The deviation gains and social cost of the last iterate (``which="mode"``), a
        reference profile or the optimum's, from its aggregates."""
        t = self._named(totals, which)
        m = self._profile(which)
        own, best = self._deviation(m, t)
        gap, relative = largest_gains(own, best, self.span)
        return Partials({"social": self._social_sums(m, t, own),
                         "opted_out": block_sums(np.isinf(m), self.start)},
                        {"nash_gap": float(gap), "nash_gap_relative": float(relative)})

    def iterate(self) -> NDArray:
        """These agents' last iterate, ``(ROWS, size)``."""
        return self._by_agent(self.mode)

    def actions(self) -> NDArray:
        """These agents' actions of the last round, ``(ROWS, size)`` (what ``history=true``
        gathers)."""
        return self._by_agent(self.values)

    def reference_rows(self, name: str) -> NDArray:
        """These agents' rows of reference profile ``name``, ``(ROWS, size)``."""
        return self._by_agent(self.references[name])

    def scale_rows(self, k: int) -> NDArray:
        """These agents' rows of the learners' span (``k=0``), low (1) or high (2)."""
        return self._by_agent((self.span, self.low, self.high)[k])

    def private_types(self) -> dict[str, NDArray]:
        """These agents' private types by name (:attr:`TYPES`)."""
        return {name: getattr(self, name) for name in self.TYPES}

    def label(self, value: float) -> str:
        """An action as a reader sees it."""
        return f"{value:.3g}"

    def view(self, agent: int) -> AgentView:
        """Agent ``agent`` (the population's row: :meth:`locate`) as this shard holds it, made
        on access."""
        i = self._local(*self.locate(agent, self.c))
        strategy = self.learner.strategy(i)
        predicted = next(iter(self.references.values()))
        costs = (np.full(self.grid.size, np.nan) if self.values is None
                 else self._costs(self.values, self._totals)[i].copy())
        return AgentView(agent, self._private(i), strategy,
                         float("nan") if self.values is None else float(self.values[i]),
                         float(self.mode[i]), float(predicted[i]), costs)


GAME = (1.0, 1.0, 1.0, 1.0)  # pricing's kappa, L_F, c, S: as LearningModel's pricing game


def pricing_delta(total: float, n: int, aggregation: str) -> float:
    """The release's error scale ``Delta`` from eq (3)'s aggregate (``sum sigma^-2`` under
    MLE, ``sum sigma^2`` under the mean)."""
    total = np.float64(total)
    with np.errstate(divide="ignore"):
        return float(total**-0.5 if aggregation == "mle" else np.sqrt(total) / n)


class PricingSlice(GameSlice):
    """Clients ``[start, stop)`` of pricing FL: private sensitivities ``alpha_i``, noise
    ``sigma_i`` on a log grid a decade either side of the eq (10) and eq (11) profiles (and,
    under the MLE rule, ``inf``: opting out, infinitely penalised with prices); eq (10)'s
    profile the reference (eq 11's with Definition 4's prices).

    Client ``i`` pays eq (5)'s ``J_i`` plus, with prices, the expected penalty ``beta_i E[(w~_i
    - mean w~)^2]`` of Definition 4 (the compensation, a transfer independent of its own
    choice, is left out). A realized cost draws the clients' noises, aggregates them by the
    rule, and replaces ``Delta`` and ``Delta^2`` in eq (9) by their unbiased estimates from the
    release's error ``e``: ``|e| sqrt(pi/2)`` and ``e^2``; the penalty is the realized
    ``beta_i (w~_i - mean w~)^2``."""

    SETUP = (("type_partials", "all"), ("profiles", "all"), ("set_grid", "all"))
    KEEPS_TABLE = True
    log_scale = True
    TYPES = ("alpha",)

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        super().__init__(config, seed, start, stop, start_run)
        self.mle = config.aggregation == "mle"
        self.alpha = np.clip(self.type_stream.normal(scale=config.alpha_std,
                                                     loc=config.alpha_mean), 0.01, 0.99)
        self.beta = np.zeros(self.size)

    def type_partials(self, totals: dict) -> Partials:
        summands = pricing.foc_summands(self.alpha, self.c.aggregation)
        return Partials({k: block_sums(v, self.start) for k, v in summands.items()},
                        {"neg_alpha_min": -float(self.alpha.min())})

    def profiles(self, totals: dict) -> Partials:
        """Eq (10) and eq (11) for these clients; their extremes set the grid."""
        self.eq10, self.eq11 = (pricing.foc_profile_from(
            self.alpha, totals, self.n, *GAME, self.c.aggregation, social)
            for social in (False, True))
        both = np.concatenate([self.eq10, self.eq11])
        parts = pricing.aggregate_parts(self.eq11, self.c.aggregation)
        return Partials({"parts11": block_sums(parts, self.start),
                         "privacy11": block_sums(self.alpha * GAME[2] * GAME[3] / self.eq11,
                                                 self.start)},
                        {"hi": float(both.max()), "neg_lo": -float(both.min())})

    def set_grid(self, totals: dict) -> Partials:
        """The common grid, Definition 4's coefficients from eq 11's aggregate, the
        reference profile."""
        c = self.c
        lo, hi = -totals["neg_lo"], totals["hi"]
        levels = np.geomspace(lo / 10.0, hi * 10.0, c.grid_points - self.mle)
        self.grid = _own_grid(c.grid, np.append(levels, np.inf) if self.mle else levels,
                              opt_out=self.mle)
        self._grid_terms = {name: self._term(self.grid, name) for name in ("part", "sq", "w")}
        if c.pricing:
            delta11 = pricing_delta(totals["parts11"], self.n, c.aggregation)
            self.beta = pricing.penalty_from(self.alpha, self.eq11, delta11, totals["W"],
                                             self.n, GAME[0], GAME[1], c.aggregation)
        name = "eq11" if c.pricing else "eq10"
        self.references = {name: snap_to(self.grid, self.eq11 if c.pricing else self.eq10,
                                         True)}
        self._realized_terms = (self.alpha * GAME[2] * GAME[3],  # eq 5's privacy numerator,
                                np.where(self.beta > 0, np.inf, 0.0),  # an opt-out's penalty
                                1.0 - self.alpha)  # and its loss's weight: kept for the run
        return Partials()

    @classmethod
    def optimum_from(cls, totals: dict, config: Any) -> float:
        """The smallest social cost: mean rule, eq (11)'s profile;
        MLE, only the least sensitive client adds noise (``social_optimum``)."""
        kappa, L_F, c, S = GAME
        w_total, delta11 = totals["W"], pricing_delta(totals["parts11"], config.agents,
                                                       config.aggregation)
        if config.aggregation == "mean":
            return w_total * float(pricing.loss_bound(delta11, kappa, L_F)) + totals["privacy11"]
        alpha_min = -totals["neg_alpha_min"]
        t = alpha_min * c * S / (kappa * w_total)
        from scipy.optimize import brentq

        hi = min(math.sqrt(t), (t * L_F) ** (1 / 3))
        d = brentq(lambda x: x * x * (1 + x / L_F) - t, 0.0, hi * (1 + 1e-12),
                   xtol=1e-300, rtol=4 * np.finfo(float).eps)
        return w_total * float(pricing.loss_bound(d, kappa, L_F)) + alpha_min * c * S / d

    def _private(self, i: int) -> dict[str, float]:
        return {"alpha": float(self.alpha[i])}

    def _term(self, v: NDArray, name: str) -> NDArray:
        """Per value of ``v``: its ``part`` of eq (3)'s aggregate, ``sq`` (``sigma^2``) or
        ``w`` (``sigma^-2``), the last two 0 for an opt-out; gathered from the grid's where
        ``v`` are the round's actions or the last iterate (the same numbers: no power per
        client)."""
        index = self._grid_index(v)
        if index is not None:
            return self._grid_terms[name][index]
        if name == "part":
            return pricing.aggregate_parts(v, self.c.aggregation)
        with np.errstate(divide="ignore", over="ignore"):
            return np.where(np.isfinite(v), v * v if name == "sq" else v**-2.0, 0.0)

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        parts = self._term(v, "part")
        finite = np.isfinite(parts)
        sq = self._term(v, "sq")
        return Partials({f"{prefix}parts": block_sums(np.where(finite, parts, 0.0), self.start),
                         f"{prefix}inf_parts": block_sums(~finite, self.start),
                         f"{prefix}sq": block_sums(sq, self.start)})

    def _draw(self, v: NDArray, stream: BlockStreams, rows: int | None) -> NDArray:
        """The release noise each client adds, ``N(0, sigma^2)`` (0 for an opt-out)."""
        inside = np.isfinite(v)
        noise = stream.normal(rows)
        noise *= np.where(inside, v, 0)
        noise[..., ~inside] = 0.0
        return noise

    def _release_partials(self, v: NDArray, noise: NDArray, partials: Partials) -> Partials:
        inside = np.isfinite(v)
        w = self._term(v, "w")
        partials.sums.update({"w_noise": block_sums(w * noise, self.start),
                              "w": block_sums(w, self.start),
                              "noise": block_sums(noise, self.start),
                              "outside": block_sums(~inside, self.start)})
        return partials

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               lowest: bool = False, out: NDArray | None = None) -> NDArray:
        """Each client's expected cost of each candidate from the totals: eq (5) and the
        expected penalty. Where the actions and candidates are the grid's levels (a round's,
        always), a client's rest of the aggregate is one of the grid's few: its accuracy
        factors come from a table (:func:`~privgames.mechanisms.pricing_kernels.grid_costs`:
        the same bits as eq 5 evaluated per cell; 0.09 s against 0.22 s a round at 10^6
        clients)."""
        cand = self.grid[None, :] if candidates is None else candidates
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            others = self._others(v, totals)
            action = self._levels(v)
            own_level = (candidates is not None and candidates.shape == (v.size, 1)
                         and action is not None and np.array_equal(candidates[:, 0], v))
            columns = action[:, None] if own_level else self._levels(cand)
            if action is not None and columns is not None:
                from privgames.mechanisms.pricing_kernels import grid_costs

                kappa, L_F, c, S = GAME
                d, e = self._accuracy(totals)

                def fill(rows: slice, out: NDArray) -> NDArray:
                    return grid_costs(action[rows], columns if len(columns) == 1
                                      else columns[rows], self.grid, d, e, self.alpha[rows],
                                      self.beta[rows], others[rows], kappa, c, S, self.n, out)

                return cost_table(fill, v.size, columns.shape[1], lowest, out)
            rest = pricing.rest_from_total(pricing.aggregate_parts(v, self.c.aggregation),
                                           totals["parts"], int(round(totals["inf_parts"])))
            rest = rest[:, None]
            cost = pricing.own_cost(cand, rest, self.alpha[:, None], *GAME,
                                    self.c.aggregation, self.beta[:, None], self.n)
        cost = np.add(cost, others[:, None], out=out)
        return cost.min(axis=1) if lowest else cost

    def _others(self, v: NDArray, totals: dict) -> NDArray:
        """Each client's expected penalty from the others' noise (Definition 4)."""
        return np.fmax(self.beta * (totals["sq"] - self._term(v, "sq")) / self.n**2, 0.0)

    def _accuracy(self, totals: dict) -> tuple[NDArray, NDArray]:
        """:func:`~privgames.mechanisms.pricing_kernels.accuracy_table` for a client at each
        grid level, its rest of the aggregate from the totals."""
        from privgames.mechanisms.pricing_kernels import accuracy_table

        rests = pricing.rest_from_total(pricing.aggregate_parts(self.grid, self.c.aggregation),
                                        totals["parts"], int(round(totals["inf_parts"])))
        return accuracy_table(self.grid, rests, GAME[1], self.mle, self.n)

    def _deviation(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """Each client's cost at its grid level and its best reply's, from its row of costs
        in one pass, the row not kept (:func:`~privgames.mechanisms.pricing_kernels.
        grid_own_least`; at 10^4 clients 0.36 against 0.48 ms for the two taken apart)."""
        action = self._levels(v)
        if action is None:
            return super()._deviation(v, totals)
        from privgames.mechanisms.pricing_kernels import grid_own_least

        own, least = np.empty(v.size), np.empty(v.size)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            others, (d, e) = self._others(v, totals), self._accuracy(totals)
        kappa, _, c, S = GAME
        grid_own_least(action, self.grid, d, e, self.alpha, self.beta, others, kappa, c, S,
                       self.n, own, least)
        return own, least

    def _levels(self, values: NDArray) -> NDArray | None:
        """The grid indices of ``values`` (same shape), or None if one is off the grid."""
        index = self._grid_index(values)
        if index is not None:
            return index
        index = np.minimum(np.searchsorted(self.grid, values), self.grid.size - 1)
        return index if np.array_equal(self.grid[index], values) else None

    def _realized(self, v: NDArray, noise: NDArray, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        """One realized cost per client from the release, as the class says (``noise``:
        one round's ``(n,)`` or several rounds' ``(k, n)``, taken a round at a time)."""
        from privgames.mechanisms.pricing_kernels import realized_costs

        kappa, L_F = GAME[:2]
        w_sum, w_noise, e_sum = (np.asarray(totals[k]) for k in ("w", "w_noise", "noise"))
        out = np.empty(noise.shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.mle:
                error = np.where(w_sum > 0, w_noise / np.where(w_sum > 0, w_sum, 1.0), np.inf)
            else:
                error = np.where(totals["outside"] == 0, e_sum / self.n, np.inf)
            loss = np.reshape([release_loss(float(e), kappa, L_F) for e in np.ravel(error)],
                              np.shape(error))
            mean = e_sum / self.n
        v = np.asarray(v, dtype=float)
        for r in np.ndindex(loss.shape):  # a round at a time, one compiled pass each
            realized_costs(v, noise[r], *self._realized_terms, self.beta, float(loss[r]),
                           float(mean[r]), out[r])
        return out

    def _social(self, v: NDArray, totals: dict, own: NDArray) -> NDArray:
        """Eq (5)'s ``J_i`` with ``Delta`` from the totals (a client opting out pays only
        accuracy; eq 6 sums them)."""
        total = totals["parts"] if round(totals["inf_parts"]) == 0 else math.inf
        u = float(pricing.loss_bound(pricing_delta(total, self.n, self.c.aggregation),
                                     GAME[0], GAME[1]))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(self.alpha > 0, self.alpha * pricing.privacy_loss(v, *GAME[2:]), 0.0)
        return (1.0 - self.alpha) * u + p


class BASSlice(GameSlice):
    """Users ``[start, stop)`` of the BAS chain's stage game (as
    :class:`~privgames.mechanisms.learning_games.BASGame`): preferences ``U[0, beta_max]``,
    noise variances on an even grid; the grid game's NE (one pass down the chain, continued
    shard to shard) and Theorem 1's profile the references."""

    SETUP = (("type_partials", "all"), ("set_grid", "all"), ("chain_nash", "chain"))
    TYPES = ("beta", "alpha")
    KEEPS_TABLE = True

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        super().__init__(config, seed, start, stop, start_run)
        self.beta = config.beta_max * self.type_stream.uniform()
        self.alpha = chain.alpha_from_beta(self.beta)

    def type_partials(self, totals: dict) -> Partials:
        return Partials({"alpha_sum": block_sums(self.alpha, self.start)},
                        {"beta_max": float(self.beta.max())})

    def set_grid(self, totals: dict) -> Partials:
        """The grid; Theorem 1's profile ``(m max beta, 0, ..., 0)`` and the social optimum's
        (all noise first: ``m (mean alpha)^(2/3)``, :func:`chain.central_optimum`)."""
        self.grid = bas_grid(totals["beta_max"], self.c.grid_points, self.c.grid)
        self._theorem1, self.optimum_profile = np.zeros(self.size), np.zeros(self.size)
        if self.start == 0:
            self._theorem1[0] = chain.M * totals["beta_max"]
            self.optimum_profile[0] = chain.M * (totals["alpha_sum"] / self.n) ** (2.0 / 3.0)
        self._theorem1 = snap_to(self.grid, self._theorem1, False)
        return Partials()

    def chain_nash(self, totals: dict, prefix: float | None) -> float:
        """The grid game's NE for these users, from the variance the first receives."""
        nash, prefix = bas_chain_replies(self.grid, self.alpha, prefix or 0.0)
        self.references = {"nash": nash, "theorem1": self._theorem1}
        return prefix

    def _private(self, i: int) -> dict[str, float]:
        return {"beta": float(self.beta[i])}

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        return Partials(gathered={f"{prefix}blocks": block_sums(v, self.start)})

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               lowest: bool = False, out: NDArray | None = None) -> NDArray:
        blocks = totals["blocks"]
        return bas_costs(v, blocks.sum(), exclusive_scan(v, self.start, blocks), self.alpha,
                         self.grid[None, :] if candidates is None else candidates, lowest,
                         out)

    def _realized(self, v: NDArray, draws: Any, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        own = self._costs(v, totals, v[:, None])[:, 0]
        return bas_realized(own, totals["blocks"].sum(), common.chisquare(self.c.d, rows),
                            self.c.d)


class SARSlice(GameSlice):
    """Users ``[start, stop)`` of SAR participation (as
    :class:`~privgames.mechanisms.learning_games.SARGame`): take part (1) or not (0); the NE's
    count of participants the reference (the first ``k`` users)."""

    SETUP = (("set_grid", "all"),)
    KEEPS_TABLE = True

    def set_grid(self, totals: dict) -> Partials:
        self.game = SARGame(self.n, self.c.p, self.c.attacker)
        self.grid = self.game.grid
        self.references = {"nash": (np.arange(self.start, self.start + self.size)
                                    < self.game.participants()).astype(float)}
        return Partials()

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        return Partials({f"{prefix}count": block_sums(v, self.start)})

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               lowest: bool = False, out: NDArray | None = None) -> NDArray:
        costs = self.game.costs_given(v, totals["count"], candidates, self._grid_index(v),
                                      out)
        return row_minima(costs) if lowest else costs

    def _realized(self, v: NDArray, draws: Any, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        """Each user's place among the participants and two uniforms, from its own stream,
        :data:`PART` blocks at a time (the scale rounds' draws are never whole)."""
        k = int(round(totals["count"]))
        out = np.empty(v.shape if rows is None else (rows, v.size))
        for users, part in stream.parts(PART):
            position = part.integers(max(k, 1), rows)
            u = part.uniform(2 if rows is None else 2 * rows)
            out[..., users] = self.game.realized_given(
                v[users], k, position, u if rows is None else u.reshape(rows, 2, -1))
        return out

    def _distance_partials(self, mode: NDArray) -> Partials:
        """The users are alike: the participants' counts, now and in each reference."""
        return Partials({"count_mode": block_sums(mode, self.start),
                         **{f"count_{name}": block_sums(ref, self.start)
                            for name, ref in self.references.items()}})

    @classmethod
    def distance_from(cls, totals: dict, name: str, config: Any) -> float:
        """The gap in the participating share (as ``SARGame.distance``)."""
        return abs(totals["count_mode"] - totals[f"count_{name}"]) / config.agents

    @classmethod
    def optimum_from(cls, totals: dict, config: Any) -> float:
        """The better common action (``GridGame.optimum``): nobody, or everyone taking part."""
        n = config.agents
        game = SARGame(n, config.p, config.attacker)
        everyone = n * float(game.costs_given(np.ones(1), n, np.ones((1, 1)))[0, 0])
        return min(0.0, everyone)


class PPSPSlice(GameSlice):
    """Nodes ``[start, stop)`` of the PPSP ring's noise game: node ``i`` pays Theorem 4's
    weighted cost with its own weights, ``gamma_u M_u(c_max) + gamma_a M_a(c_max) + gamma_p
    M_p(c_min)``. Any common ``c`` is a NE (a node alone above the others raises ``c_max``,
    alone below lowers ``c_min``), so the predicted profile is Theorem 4's optimum for the
    summed weights. A realized cost draws the estimator's squared error (Gaussian with
    Theorem 2's variance) for the accuracy term. Private weights, ``c`` on a log
    grid a decade either side of the preferred ``c``; Theorem 4's common ``c`` for the summed
    weights the reference."""

    SETUP = (("type_partials", "all"), ("set_grid", "all"))
    log_scale = True
    TYPES = ("weights",)
    KEEPS_TABLE = True

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        from privgames.environments.ppsp_ring import NoiseGameConfig

        super().__init__(config, seed, start, stop, start_run)
        ring = NoiseGameConfig(n=config.agents, weighting=config.weighting,
                               spread=config.spread)
        self.weights = np.ascontiguousarray(ring.weights_from(  # the kernels read rows
            None if config.weighting == "equal" else self.type_stream.uniform(3).T, self.size))
        self.args = (config.agents, ring.K, ring.delta, ring.d)

    def type_partials(self, totals: dict) -> Partials:
        preferred = ppsp.optimal_c_each(self.weights, *self.args)
        return Partials({"weights": block_sums(self.weights.T, self.start)},
                        {"c_hi": float(preferred.max()), "neg_c_lo": -float(preferred.min())})

    def set_grid(self, totals: dict) -> Partials:
        """The grid; Theorem 4's ``c`` for the summed weights (snapped: the reference; as it
        is: the optimum's profile)."""
        self.grid = ppsp_grid(-totals["neg_c_lo"], totals["c_hi"], self.c.grid_points,
                              self.c.grid)
        common = ppsp.optimal_c(*totals["weights"], *self.args)
        self.optimum_profile = np.full(self.size, common)
        self.references = {"theorem4": snap_to(self.grid, self.optimum_profile, True)}
        return Partials()

    def _private(self, i: int) -> dict[str, float]:
        return dict(zip(("gamma_u", "gamma_a", "gamma_p"), map(float, self.weights[i]),
                        strict=True))

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        largest, smallest = two_extremes(v)
        return Partials(gathered={f"{prefix}largest": largest, f"{prefix}smallest": smallest})

    def _extremes(self, totals: dict) -> tuple[NDArray, NDArray]:
        return np.sort(totals["largest"])[-2:], np.sort(totals["smallest"])[:2]

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               lowest: bool = False, out: NDArray | None = None) -> NDArray:
        largest, smallest = self._extremes(totals)
        return ppsp_costs(v, largest, smallest, self.weights, self.args,
                          self.grid[None, :] if candidates is None else candidates, lowest,
                          out)

    def _realized(self, v: NDArray, draws: Any, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        own = self._costs(v, totals, v[:, None])[:, 0]
        return ppsp_realized(own, self._extremes(totals)[0][-1], self.weights, self.args,
                             common.standard_normal(rows))


class BayesPricingSlice(GameSlice):
    """Clients ``[start, stop)`` of pricing FL under incomplete information (section IV) in
    agent form: each client has a row for each of its two types, and every round each
    client's type is drawn afresh from the prior (L with probability ``eta``), so only the row
    of its drawn type plays and learns. The time-averaged play of no-regret rows is a Bayesian
    coarse correlated equilibrium (Hartline, Syrgkanis & Tardos 2015); the agent-form regret
    is what the analyst measures. An action is a report and a noise; a row's cost, given the
    others' realized types and actions, is eq (13)'s integrand, with Definition 5's prices as
    derived or none; the analyst's deviation gains and social costs are interim expectations
    over the others' types (:data:`~privgames.mechanisms.learning_games.TYPE_PROFILES`).
    Two learner rows a client
    (``t size + i`` here, ``t N + i`` in the population), its type drawn each round from its
    block's stream, the analyst's type profiles drawn per block. Every cost comes from the
    counts of clients per (profile, type, action) (:class:`~privgames.mechanisms.
    learning_games.BayesRules`): integers, so they add up exactly over shards; each shard
    sends its counts whole (``(S 2 2m, 1)``: a few hundred kB at the default 128 profiles)."""

    ROWS = 2
    KEEPS_TABLE = True
    SETUP = (("optimum_partials", "all"),)
    log_scale = True

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        super().__init__(config, seed, start, stop, start_run)
        c = config
        self.rules = bayes_rules(c.agents, c.alpha_L, c.alpha_H, c.p_low, c.aggregation,
                                 c.pricing, c.grid_points, c.grid)
        self.eta = self.rules.bayes.eta
        self.round_types = BlockStreams(seed, ROUND_TYPES, start, stop, self.n)
        self.grid = self.rules.grid
        self.row_type = np.repeat(np.arange(2), self.size)
        self.client = np.tile(np.arange(self.size), 2)
        profiles, self.weights = type_profiles(self.n, self.eta, self.type_stream.uniform,
                                               slice(start, stop))
        self.profiles = np.ascontiguousarray(profiles.T).T  # (S, C), held by client
        self.references = {name: self.rules.row_actions(rho, s, self.row_type)
                           for name, (rho, s) in self.rules.strategies.items()}
        self.types = np.zeros(self.size, dtype=np.int8)

    def optimum_partials(self, totals: dict) -> Partials:
        """The optimum's expected social cost (the theory's, computed by the first shard)."""
        return Partials(maxima={"optimum": self.rules.optimum() if self.start == 0
                                else -math.inf})

    @classmethod
    def optimum_from(cls, totals: dict, config: Any) -> float:
        return totals["optimum"]

    def label(self, value: float) -> str:
        return self.rules.label(value)

    def _private(self, i: int) -> dict[str, float]:
        t = i // self.size
        return {"type": float(t), "alpha": float(self.rules.bayes.alpha[t])}

    def _begin_round(self) -> None:
        self.types = (self.round_types.uniform() >= self.eta).astype(np.int8)
        self.active = np.concatenate([self.types == 0, self.types == 1])

    def _by_type(self, v: NDArray) -> NDArray:
        """Each client's action for each type, ``(2, size)`` (the learners' own indices where
        ``v`` is the round's play or the last iterate)."""
        index = self._grid_index(v)
        return (v.astype(np.int64) if index is None else index).reshape(2, self.size)

    def _actions(self, v: NDArray, types: NDArray) -> NDArray:
        """Each client's action under ``types`` (its row of its type)."""
        return np.where(types != 0, *self._by_type(v)[::-1])

    def _counts(self, v: NDArray, types: NDArray) -> NDArray:
        """Clients per (profile, type, action) as one column (integers: exact in any sum)."""
        return self.rules.counts(self._by_type(v), types).reshape(-1, 1)

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        """The analyst's profiles' counts (any profile's interim costs and social cost) and,
        for the round's play (no ``prefix``), the counts under the round's types (its costs
        and release)."""
        partials = Partials({f"{prefix}profile_counts": self._counts(v, self.profiles)})
        if not prefix:
            partials.sums["counts"] = self._counts(v, self.types[None])
        return partials

    def _interim(self, v: NDArray, counts: NDArray, types: NDArray, p: NDArray,
                 rows: NDArray | None = None, out: NDArray | None = None) -> NDArray:
        """Every row's (or the ``rows``') cost of each grid action over profiles ``types``
        (weights ``p``) whose combined counts are ``counts`` (``out``: into its ``rows``)."""
        every = slice(None) if rows is None else rows
        return self.rules.interim(self.rules.totals(counts.reshape(len(p), 2, -1)), p,
                                  self._by_type(v), types, self.client[every],
                                  self.row_type[every], out, None if out is None else rows)

    def _costs(self, v: NDArray, totals: dict, *, out: NDArray | None = None) -> NDArray:
        """This round's costs of the rows that play, into ``out`` (the slice's kept table,
        whose other rows keep an earlier round's: no reader takes them) or a fresh table (0
        for the others: not computed). No candidates but the grid: the deviations are interim
        costs (:meth:`_deviation`), and no learner of this game plays off the grid."""
        rows = np.flatnonzero(self.active)
        table = np.zeros((self.rows, self.grid.size)) if out is None else out
        return self._interim(v, totals["counts"], self.types[None], np.ones(1), rows, table)

    def _release(self, v: NDArray, types: NDArray) -> tuple[NDArray, NDArray]:
        """Each client's report and noise level under ``types``."""
        return self.rules.decode(self._actions(v, types))

    def _draw(self, v: NDArray, stream: BlockStreams,
              rows: int | None) -> tuple[NDArray, NDArray, NDArray]:
        """Each client's release under the round's types: its report, its noise level
        ``sigma`` and the noise it adds, ``N(0, sigma^2)``."""
        report, sigma = self._release(v, self.types)
        return report, sigma, stream.normal() * sigma

    def _release_partials(self, v: NDArray, draws: tuple, partials: Partials) -> Partials:
        report, _, noise = draws
        w = self.rules.weight[report]
        partials.sums.update({"w_noise": block_sums(w * noise, self.start),
                              "noise": block_sums(noise, self.start)})
        return partials

    def _realized_rows(self, types: NDArray, noise: NDArray, counts: NDArray, w_noise: float,
                       noise_sum: float, release: tuple[NDArray, NDArray],
                       fill: float = np.nan) -> NDArray:
        """The playing rows' realized costs (``fill`` for the others) of the clients'
        ``release`` (report and noise level, :meth:`_release`): the round's sums of the
        weights and the reports of L from its counts (finite: every noise level and the sum of
        the weights are positive)."""
        report, sigma = release
        total = self.rules.totals(counts.reshape(1, 2, -1))[:, 0]
        out = np.full(self.rows, fill)
        out[types.astype(np.int64) * self.size + np.arange(self.size)] = self.rules.realized(
            types, report, sigma, noise, float(w_noise), total[0], float(noise_sum),
            int(round(total[3])))
        return out

    def _realized(self, v: NDArray, draws: tuple, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        report, sigma, noise = draws
        return self._realized_rows(self.types, noise, totals["counts"], totals["w_noise"],
                                   totals["noise"], (report, sigma), fill=0.0)

    def middle_partials(self, totals: dict) -> Partials:
        """:data:`SCALE_DRAWS` rounds, each with its clients' types drawn, every row
        truthful at the middle level: their counts and release sums."""
        m = self.rules.m_levels
        self.middle = self.row_type * m + (m - 1) // 2.0
        self._scale_types = (self.round_types.uniform(SCALE_DRAWS) >= self.eta).astype(np.int8)
        self._scale_noise = self.scale_stream.normal(SCALE_DRAWS) * self.rules.levels[(m - 1)
                                                                                     // 2]
        w = self.rules.weight[self._scale_types]  # truthful: the report is the type
        return Partials({"scale_counts": np.stack([self._counts(self.middle, t[None])[:, 0]
                                                   for t in self._scale_types])[..., None],
                         "scale_w_noise": block_sums(w * self._scale_noise, self.start),
                         "scale_noise": block_sums(self._scale_noise, self.start)})

    def _scales(self, totals: dict) -> tuple[NDArray, ...]:
        """As :meth:`~privgames.mechanisms.learning_games.GridGame.scales`: each row's cost
        span over the scale rounds it played, and its realized costs there."""
        lo, hi = np.full(self.rows, np.nan), np.full(self.rows, np.nan)
        samples = []
        for k, types in enumerate(self._scale_types):
            on = np.concatenate([types == 0, types == 1])
            every = self._interim(self.middle, totals["scale_counts"][k], types[None],
                                  np.ones(1))
            finite = np.where(np.isfinite(every) & on[:, None], every, np.nan)
            lo = np.fmin(lo, np.nanmin(finite, axis=1, initial=np.inf))
            hi = np.fmax(hi, np.nanmax(finite, axis=1, initial=-np.inf))
            samples.append(self._realized_rows(types, self._scale_noise[k],
                                               totals["scale_counts"][k],
                                               totals["scale_w_noise"][k],
                                               totals["scale_noise"][k],
                                               self._release(self.middle, types)))
        unseen = ~np.isfinite(lo)  # a row whose type never came up: as if it played the last
        c = np.where(np.isfinite(every), every, np.nan)[unseen]
        lo[unseen] = np.nanmin(c, axis=1, initial=np.inf)
        hi[unseen] = np.nanmax(c, axis=1, initial=-np.inf)
        return scales_from(lo, hi, samples)

    def _deviation(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """Each row's interim expected cost and its best on the grid (over the profiles)."""
        interim = self._interim(v, totals["profile_counts"], self.profiles, self.weights)
        return interim[np.arange(self.rows), v.astype(int)], interim.min(axis=1)

    def _social_sums(self, v: NDArray, totals: dict, own: NDArray) -> NDArray:
        """The expected social cost over the profiles, from their combined counts (one
        number, sent by the first shard)."""
        if self.start:
            return np.zeros(1)
        counts = totals["profile_counts"].reshape(len(self.weights), 2, -1)
        return np.array([self.rules.social(counts, self.weights)])

    def _distance_partials(self, mode: NDArray) -> Partials:
        return Partials(maxima={f"distance_{name}": float(self.rules.row_distances(
            mode, ref).max()) for name, ref in self.references.items()})


@dataclass
class ChainTables:
    """One profile's costs in the sequential chain, by user and the prefix it passes on,
    ``(users, 2m - 1)`` each (:func:`~privgames.mechanisms.bas_sequential.chain_tables`): the
    total variance, the privacy term and their sum; made from them when first asked for, the
    rows' ``(rows, m)`` cost table (read only) and each row's best reply's cost."""

    total: NDArray
    privacy: NDArray
    cost: NDArray
    every: NDArray | None = None
    best: NDArray | None = None


class BASSequentialSlice(GameSlice):
    """Users ``[start, stop)`` of the sequential BAS chain (as
    :class:`~privgames.mechanisms.bas_sequential.BASSequentialGame`), in chain order: a row
    per observed state (``i m + s`` here; the leader, user 0, plays only its first row, the
    others mirror it and never play). A shard's followers act on the running level as one
    *map* (:func:`~privgames.mechanisms.bas_sequential.compose`); each shard sends its map of
    the profile, ``m`` integers, and from all of them every shard knows the level its first
    user receives and the map of the users after it, exactly (levels are grid steps).

    Types: preferences drawn per block in chain order; if user 0 holds the largest, it
    changes places with a user drawn uniformly among the others (from a stream every shard
    holds): the distribution of Stage 2's shuffle until the top bidder is not first."""

    SETUP = (("type_partials", "all"), ("swap_partials", "all"), ("set_grid", "all"),
             ("chain_references", "reverse"))
    TYPES = ("beta", "alpha")

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int, stop: int,
                 start_run: int = 0) -> None:
        self.ROWS = config.grid_points
        super().__init__(config, seed, start, stop, start_run)
        self.beta = config.beta_max * self.type_stream.uniform()
        self.partner = int(generator(child(seed, COMMON, 2)).integers(1, self.n))
        self._cached: dict = {}
        self._round: NDArray | None = None  # the round's cost table (:meth:`_round_costs`)

    # --- the chain's order, grid and Theorem 1 --------------------------------------------------
    def type_partials(self, totals: dict) -> Partials:
        return Partials({"alpha_sum": block_sums(chain.alpha_from_beta(self.beta), self.start)},
                        {"beta_max": float(self.beta.max()),
                         "first": float(self.beta[0]) if self.start == 0 else -math.inf})

    def _swapped_with(self, totals: dict) -> int | None:
        """The user that takes the first place from a first user with the top preference."""
        return None if totals["first"] < totals["beta_max"] else self.partner

    def swap_partials(self, totals: dict) -> Partials:
        j = self._swapped_with(totals)
        mine = j is not None and self.start <= j < self.start + self.size
        return Partials(maxima={"beta_j": float(self.beta[j - self.start]) if mine
                                else -math.inf})

    def set_grid(self, totals: dict) -> Partials:
        j = self._swapped_with(totals)
        if j is not None:
            if self.start == 0:
                self.beta[0] = totals["beta_j"]
            if self.start <= j < self.start + self.size:
                self.beta[j - self.start] = totals["first"]
        self.alpha = chain.alpha_from_beta(self.beta)
        self.grid = np.linspace(0.0, chain.M * totals["beta_max"], self.c.grid_points)
        self.step = float(self.grid[1] - self.grid[0])
        self.user = np.repeat(np.arange(self.size), self.ROWS)
        self.state = np.tile(np.arange(self.ROWS), self.size)
        self.real = (self.user + self.start > 0) | (self.state == 0)  # not the leader's mirrors
        self.entering = np.where(self.user + self.start > 0, self.state, 0)  # the leader's: 0
        return Partials()

    def chain_references(self, totals: dict, after: NDArray | None) -> NDArray:
        """Theorem 1's subgame-perfect replies of these users by backward induction, given
        the map of the users after them; returns their own map (handed to the shard before)."""
        after = identity_map(self.ROWS) if after is None else after
        lead = int(self.start == 0)
        policy, first = backward_induction(self.alpha[lead:], self.step, after)
        if lead:
            leader = np.argmin(chain_costs(first[None], self.alpha[:1], np.zeros(1, np.int64),
                                           self.step)[0, 0])
            policy = np.vstack([np.full(self.ROWS, leader), policy])
        self.references = {"theorem1": self.grid[policy.ravel()]}
        return first

    @classmethod
    def optimum_from(cls, totals: dict, config: Any) -> float:
        """The social optimum (:func:`~privgames.mechanisms.chain.central_optimum`: all noise
        first, ``S = (sum alpha / 2K)^(2/3)``): ``K S + sum alpha S^(-1/2)``."""
        k, alpha_sum = config.agents, totals["alpha_sum"]
        total = (alpha_sum / (2.0 * k)) ** (2.0 / 3.0)
        return k * total + alpha_sum / math.sqrt(total)

    # --- rows, maps and costs ---------------------------------------------------------------
    def _rows_of(self, x: NDArray) -> NDArray:
        return x.T.ravel()

    def _by_agent(self, rows: NDArray) -> NDArray:
        return rows.reshape(-1, self.ROWS).T

    @classmethod
    def population(cls, x: NDArray, config: Any) -> NDArray:
        """Row 0 the leader, then ``1 + (k - 1) m + s``."""
        return np.concatenate([x[:1, 0], x[:, 1:].T.ravel()])

    @classmethod
    def row_count(cls, config: Any) -> int:
        return 1 + (config.agents - 1) * config.grid_points

    @classmethod
    def _agent_row(cls, index: int, config: Any) -> tuple[int, int]:
        m = config.grid_points
        return (0, 0) if index == 0 else (1 + (index - 1) // m, (index - 1) % m)

    def _private(self, i: int) -> dict[str, float]:
        return {"beta": float(self.beta[i // self.ROWS])}

    def _indices(self, v: NDArray) -> NDArray:
        """The grid indices (steps) of ``v``: the learners' own for the round's actions and
        the last iterate."""
        index = self._grid_index(v)
        return np.rint(v / self.step).astype(np.int64) if index is None else index

    def _maps(self, v: NDArray) -> NDArray:
        """Each user's level map (the leader's: its action), ``(size, m)``."""
        index = self._indices(v).reshape(self.size, self.ROWS)
        maps = follower_maps(index)
        if self.start == 0:
            maps[0] = leader_map(index[0, 0], self.ROWS)
        return maps

    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        return Partials(gathered={f"{prefix}maps": rest_maps(self._maps(v),
                                                            identity_map(self.ROWS))[1],
                                  f"{prefix}starts": np.array([self.start])})

    def _around(self, totals: dict) -> tuple[int, NDArray, int]:
        """From every shard's map: the level this shard's first user receives, the map of the
        users after it, and the chain's total (steps)."""
        maps = totals["maps"].reshape(-1, self.ROWS)
        mine = int(np.flatnonzero(totals["starts"] == self.start)[0])
        u = 0
        for f in maps[:mine]:
            u = int(apply_map(f, [u])[0])
        after = identity_map(self.ROWS)
        for f in maps[:mine:-1]:
            after = compose(after, f)
        total = u
        for f in maps[mine:]:
            total = int(apply_map(f, [total])[0])
        return u, after, total

    def _tables(self, v: NDArray, totals: dict) -> ChainTables:
        """The profile's :class:`ChainTables`; the last two profiles' kept (a round asks for
        its actions' and its last iterate's several times)."""
        _, after, _ = self._around(totals)
        key = (v.tobytes(), after.tobytes())
        if key not in self._cached:
            rest, _ = rest_maps(self._maps(v), after)
            total, privacy = chain_tables(rest, self.alpha, self.step)
            self._cached = {**dict(list(self._cached.items())[-1:]),
                            key: ChainTables(total, privacy, total + privacy)}
        return self._cached[key]

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None,
               rows: NDArray | slice = slice(None)) -> NDArray:
        """A row's cost of action ``a`` is its user's cost at prefix ``state + a``; the whole
        table (read only) is each user's windows of its prefixes, copied once a profile
        (``rows``: those of the candidates given)."""
        tables = self._tables(v, totals)
        if candidates is not None:
            return tables.cost[self.user[rows, None], self.entering[rows, None]
                               + self._indices(np.asarray(candidates))]
        if tables.every is None:
            m = self.ROWS
            every = np.array(sliding_window_view(tables.cost, m, axis=1)).reshape(self.rows, m)
            if self.start == 0:  # the leader's rows: all at state 0
                every[:m] = tables.cost[0, :m]
            every.flags.writeable = False
            tables.every = every
        return tables.every

    def _round_costs(self, v: NDArray, totals: dict) -> NDArray:
        """The rows on the path (1 a user) from their users' windows, 0 elsewhere: one table
        kept for the slice, the last round's rows set back to 0."""
        if self._round is None:
            self._round, self._round_rows = np.zeros((self.rows, self.ROWS)), np.zeros(0, int)
        self._round[self._round_rows] = 0.0
        rows = self._round_rows = np.flatnonzero(self.active)
        self._round[rows] = self._costs(v, totals, np.broadcast_to(self.grid,
                                                                   (rows.size, self.ROWS)), rows)
        return self._round

    def _path(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """The rows of these users on the round's path and the level each passes on."""
        u, _, _ = self._around(totals)
        maps = self._maps(v)
        states, levels = walk(maps, u)
        if self.start == 0:
            states[0] = 0
        return np.arange(self.size) * self.ROWS + states, levels

    def path_rows(self, totals: dict) -> NDArray:
        """The population rows of these users on the last iterate's path (``totals``: its
        aggregates, ``mode_`` prefixed)."""
        local, _ = self._path(self.mode, self._named(totals, "mode"))
        user, state = divmod(local, self.ROWS)
        k = user + self.start
        return np.where(k == 0, 0, 1 + (k - 1) * self.ROWS + state)

    def _played(self, v: NDArray, totals: dict) -> None:
        self.active = np.zeros(self.rows, dtype=bool)
        self.active[self._path(v, totals)[0]] = True

    def _realized(self, v: NDArray, draws: Any, totals: dict, stream: BlockStreams,
                  common: np.random.Generator, rows: int | None) -> NDArray:
        """One release a round: the accuracy term is ``S chi^2_d / d``."""
        tables = self._tables(v, totals)
        total, privacy = tables.total, tables.privacy
        at = self.user, self.entering + self._indices(v)
        total, privacy = total[at], privacy[at]
        chi = common.chisquare(self.c.d, rows) / self.c.d
        return privacy + total * (chi if rows is None else chi[:, None])

    def _every_deviation(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """Every row's cost and its best reply at its state, on the path or not (the best
        kept with the profile's tables: a measurement asks twice)."""
        tables = self._tables(v, totals)
        if tables.best is None:  # a row's best: the smallest of its window of prefixes
            cost, m = tables.cost, self.ROWS
            best = cost[:, :m].copy()
            for a in range(1, m):
                np.minimum(best, cost[:, a:a + m], out=best)
            if self.start == 0:  # the leader's rows: all at state 0
                best[0] = best[0, 0]
            tables.best = best.ravel()
        return self._costs(v, totals, v[:, None])[:, 0], tables.best

    def _deviation(self, v: NDArray, totals: dict) -> tuple[NDArray, NDArray]:
        """On the path: each playing row's cost and its best reply at its state (0 and 0 off
        it: its state never comes up)."""
        own, best = self._every_deviation(v, totals)
        on = np.zeros(self.rows, dtype=bool)
        on[self._path(v, totals)[0]] = True
        return np.where(on, own, 0.0), np.where(on, best, 0.0)

    def _social_sums(self, v: NDArray, totals: dict, own: NDArray) -> NDArray:
        """Eq (14) of each user on the path: the total plus ``alpha`` over the square root of
        its prefix (the level it passes on)."""
        _, levels = self._path(v, totals)
        total = self._around(totals)[2] * self.step
        with np.errstate(divide="ignore"):
            privacy = np.where(self.alpha > 0, self.alpha / np.sqrt(levels * self.step), 0.0)
        return block_sums(total + privacy, self.start)

    def _distance_partials(self, mode: NDArray) -> Partials:
        """On the path of the last iterate (its totals are not known here: the distance is
        taken in :meth:`measure`)."""
        return Partials()

    def measure(self, totals: dict, which: str = "mode") -> Partials:
        """As :meth:`GameSlice.measure`, and: the largest deviation gain of any row at its
        state (``subgame_gap_relative``), the distance on the path, the leader's level in
        steps below the top and the total over Theorem 1's."""
        out = super().measure(totals, which)
        t, m = self._named(totals, which), self._profile(which)
        own, best = self._every_deviation(m, t)
        rows, _ = self._path(m, t)
        _, _, total = self._around(t)
        top = self.ROWS - 1
        out.maxima.update({
            "subgame_gap_relative": float(np.max(relative_gain(own, best)[self.real])),
            "total_over_theorem1": total / top,
            "leader_steps_below": float(top - self._indices(m[:1])[0]) if self.start == 0
            else -math.inf,
            **{f"distance_{name}": grid_distance(self.grid, m[rows], ref[rows], False)
               for name, ref in self.references.items()}})
        return out


@functools.lru_cache(maxsize=8)
def bayes_rules(agents: int, alpha_L: float, alpha_H: float, p_low: float, aggregation: str,
                prices: bool, grid_points: int, grid: tuple[float, ...] | None) -> BayesRules:
    """The mechanism, levels and theory's strategies of pricing-bayes (the same for every
    shard and population of a configuration: its theory costs about a second at 10^3 clients,
    so a process computes it once; read only)."""
    return BayesRules(BinaryGame(agents, alpha_L, alpha_H, p_low, aggregation=aggregation),
                      prices, grid_points, grid)


#: The slice of each game that runs over shards.
SLICES: dict[str, type[GameSlice]] = {"bas": BASSlice, "sar": SARSlice, "ppsp": PPSPSlice,
                                      "pricing": PricingSlice,
                                      "pricing-bayes": BayesPricingSlice,
                                      "bas-sequential": BASSequentialSlice}
