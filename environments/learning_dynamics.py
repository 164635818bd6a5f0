"""Users who learn from what they experience: the games played round after round by no-regret,
fictitious-play, zeroth-order and best-response learners, each seeing only the feedback the
game gives it (the cost of every action, or only its own realized cost).

**One engine.** A population is split into shards (:mod:`privgames.environments.shards`), each
a slice of the game (:mod:`privgames.environments.learning_slices`: a game's round is written
once, there); ``backend="vectorized"`` runs the shards in this process, ``backend="ray"`` in
Ray actors. Random draws are keyed by block of agents and sums travel per block, so the same
seed gives equal rows, summaries and last iterates on either backend and at any shard count.
The driver (:class:`LearningModel`) holds the analyst's per-round measurements and O(shards)
aggregates, never an agent: per round, the distance of the last iterate to the theory's
profile, each agent's average external regret against its grid, the CCE gap of the empirical
joint play, and social costs beside the predicted NE's and the optimum's.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mesa
import numpy as np
import pandas as pd
from mesa.agent import AgentSet
from numpy.typing import NDArray

from privgames.agents.learners import (
    FEEDBACK_SETTINGS,
    GRID_LEARNERS,
    STARTS,
    make_grid_learner,
    resolve_feedback,
    start_actions,
)
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_bool,
    check_choice,
    check_int,
    check_real,
)
from privgames.environments.learning_slices import SLICES, AgentView
from privgames.environments.shards import ShardedRun, resolve_shards
from privgames.environments.streams import as_seed_sequence
from privgames.mechanisms.learning_games import check_levels
from privgames.mechanisms.pricing import AGGREGATIONS

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")
ATTACKERS = ("weak", "strong")
WEIGHTINGS = ("equal", "unequal")
BACKENDS = ("vectorized", "ray")
#: A round's fixed cost per shard (the learner's, the game's and the analyst's Python calls),
#: in the operations of an ``agents x grid`` pass: about a millisecond.
ROUND_OPS = 3e5
#: The confidence of the Azuma-Hoeffding allowance between realized and expected regret.
AZUMA_DELTA = 1e-3


@dataclass(frozen=True)
class LearningConfig:
    """One population learning one game.

    Attributes:
        game: ``bas`` (chain users' noise variance, the stage game played simultaneously),
            ``bas-sequential`` (the same users in chain order, the leader first, each
            follower replying to the running level it receives: one learner row per follower
            and observed state, Theorem 1's subgame-perfect profile the reference), ``sar``
            (participation), ``ppsp`` (ring
            nodes' noise scale ``c``), ``pricing`` (FL clients' noise ``sigma``) or
            ``pricing-bayes`` (pricing FL under incomplete information: clients with a binary
            type drawn every round report a type and choose ``sigma``; the agents are the
            clients' rows per type, ``2 agents`` of them).
        learner: ``best_response``, ``fictitious``, ``hedge``, ``regret_matching`` (full
            information), ``exp3`` or ``spsa`` (bandit).
        feedback: ``full``, ``bandit``, or ``auto`` (the learner's own kind).
        agents: users, nodes or clients (>= 3). rounds: rounds of play (the horizon the
            default step sizes are tuned for). grid_points: actions on the grid (>= 2; SAR's
            grid is always take part or not). grid: the actions themselves, replacing the
            default grid (``inf``: the opt-out, in pricing FL under the MLE rule;
            ``pricing-bayes``: the noise levels, each taken with either report). step_size:
            ``hedge``/``exp3``: the weights' rate; ``spsa``: its gain ``a``; ``None``: the
            standard one. eta: the old name of step_size (deprecated: pricing's ``eta`` is
            the prior probability of the low type, here ``p_low``; accepted, with a note,
            until the next release).
        start: where the learners start (``random``: each agent a uniformly drawn action,
            Hedge and EXP3 a prior with half its weight there, regret matching playing it
            until some regret is positive; ``uniform``: the learners' uniform mixed start, a
            drawn action for the deterministic ones; ``middle``: the grid's middle action,
            which in PPSP is Theorem 4's profile). starts: runs per population from
            independent starts (the basins: which reference each run reaches).
        tolerance: distance (fraction of the grid) within which the last iterate is at a
            reference profile, and ``nash_gap_relative`` (each agent's largest deviation gain
            as a fraction of its own cost) within which it is an equilibrium.
        beta_max, d: BAS preferences ``U[0, beta_max]`` and the release's dimension.
        p, attacker: SAR's colluding probability and attacker.
        weighting, spread: PPSP's node weights (``unequal``: each weight times a factor
            log-uniform in ``[1/spread, spread]``).
        aggregation, pricing, alpha_mean, alpha_std: pricing FL's rule, whether Definition 4's
            prices are charged (``pricing-bayes``: Definition 5's mechanism as derived), and
            the clients' sensitivities ``N(mean, std)`` clipped to ``[0.01, 0.99]``.
        alpha_L, alpha_H, p_low: ``pricing-bayes``'s two sensitivities ``0 < alpha_L <
            alpha_H < 1`` and the prior probability of the low one (the paper's ``eta``).
        backend: where the population's shards run: ``vectorized`` (in this process) or
            ``ray`` (one Ray actor each, spread over the cluster's nodes). One engine: the
            same seed gives equal rows, summaries and last iterates on either backend and at
            any shard count.
        shards: the shards of one population (an integer >= 1, at most one per 1,024
            agents, or ``auto``: one per CPU of the Ray cluster, at most one per 1,024
            agents; in process ``auto`` is one).
        history: keep every round's played actions in the driver (O(rounds x agents) of
            memory; without it the driver holds O(rounds) numbers).
        checkpoint_every: rounds between the shards' checkpoints (``backend=ray``; a killed
            shard is restored from the last one; 0: none).
    """

    game: str = "bas"
    learner: str = "hedge"
    feedback: str = "auto"
    agents: int = 10
    rounds: int = 500
    grid_points: int = 21
    grid: tuple[float, ...] | None = None
    step_size: float | None = None
    start: str = "random"
    starts: int = 1
    tolerance: float = 0.05
    beta_max: float = 1.3
    d: int = 50
    p: float = 0.15
    attacker: str = "weak"
    weighting: str = "unequal"
    spread: float = 2.0
    aggregation: str = "mle"
    pricing: bool = False
    alpha_mean: float = 0.5
    alpha_std: float = 0.2
    alpha_L: float = 0.25
    alpha_H: float = 0.75
    p_low: float = 0.5
    backend: str = "vectorized"
    shards: int | str = 1
    history: bool = False
    checkpoint_every: int = 25
    eta: float | None = None  # deprecated: step_size

    #: Which games use a game's own parameter (a run setting one that none of its games
    #: uses is refused by name).
    OWNERS: ClassVar[tuple[str, dict[str, tuple[str, ...]]]] = ("game", {
        "beta_max": ("bas", "bas-sequential"), "d": ("bas", "bas-sequential"),
        "p": ("sar",), "attacker": ("sar",), "weighting": ("ppsp",), "spread": ("ppsp",),
        "aggregation": ("pricing", "pricing-bayes"), "pricing": ("pricing", "pricing-bayes"),
        "alpha_mean": ("pricing",), "alpha_std": ("pricing",), "alpha_L": ("pricing-bayes",),
        "alpha_H": ("pricing-bayes",), "p_low": ("pricing-bayes",)})

    def footprint(self) -> Footprint:
        """The shards' arrays: 72 bytes an agent-action (the learners' losses and strategies,
        the analyst's sums in both units, the round's kept cost table; under incomplete
        information twice the rows and actions, in the sequential chain a row per state) and
        1.2 kB an agent (its 64 scale rounds' realized costs and release, taken at setup,
        and its vectors; pricing-bayes' type profiles 0.3 kB more), so that it bounds the
        process's peak over its memory before, and by at most three times
        (``test_the_memory_guard_estimates_the_engines_peak``). The process's peak at 10^6
        agents (2026-11-29, the interpreter and kernels included): pricing 1.78 GB at 21
        actions and 1.39 GB at 5, SAR 0.76 GB, BAS 1.27 GB (3.1, 2.9, 2.8 and 1.75 GB before
        the scale rounds were taken a part of the agents at a time). All of them in
        this process, the largest shard's on Ray (the driver's beside them); with
        ``history``, the driver's ``rounds x agents``. Work: a few ``agents x grid`` passes a
        round and a round's fixed Python cost (:data:`ROUND_OPS` a shard); on Ray, two
        exchanges with the shards a round."""
        shards = 1 if self.shards == "auto" else self.shards
        bayes = self.game == "pricing-bayes"
        held = -(-self.agents // shards) if self.backend == "ray" else self.agents
        actions = 2 if self.game == "sar" else self.grid_points
        per_agent = actions * (4 if bayes else self.grid_points
                               if self.game == "bas-sequential" else 1)
        arrays = (72.0 * per_agent + 1200.0 + (300.0 if bayes else 0.0)) * held
        history = 8.0 * self.rounds * self.agents if self.history else 0.0
        passes = 9.0 if bayes else 3.0 if self.game == "bas-sequential" else 1.0
        work = ((30.0 * passes * self.agents * per_agent + ROUND_OPS * shards)
                * self.rounds * self.starts)
        fp = Footprint.of(self, [(("agents", "grid_points"), arrays),
                                 (("agents", "rounds"), history)], work)
        exchanges = 2.0 * self.rounds * self.starts if self.backend == "ray" else 0.0
        return dataclasses.replace(fp, exchanges=exchanges)

    def __post_init__(self) -> None:
        check_choice("game", self.game, GAMES)
        check_choice("learner", self.learner, tuple(GRID_LEARNERS))
        check_choice("feedback", self.feedback, FEEDBACK_SETTINGS)
        resolve_feedback(self.learner, self.feedback)
        check_int("agents", self.agents, 3)
        check_int("rounds", self.rounds, 2)
        check_int("grid_points", self.grid_points, 2)
        if self.grid is not None:
            if self.game in ("sar", "bas-sequential"):
                raise ConfigError(f"grid is not allowed with game={self.game!r}: " + (
                    "its actions are take part (1) or opt out (0)" if self.game == "sar" else
                    "its followers observe the running level on the even default grid "
                    "(set grid_points)"))
            opt_out = self.game == "pricing" and self.aggregation == "mle"  # not in -bayes
            object.__setattr__(self, "grid", tuple(check_levels(self.grid, opt_out).tolist()))
            if len(self.grid) < 2:
                raise ConfigError(f"grid={list(self.grid)!r} is not allowed: a game needs at "
                                  "least two actions to learn among")
        if self.eta is not None:  # the old name
            check_real("eta", self.eta, 0.0, low_open=True)
            if self.step_size is not None:
                raise ConfigError(f"eta={self.eta!r} is the old name of step_size: give "
                                  "step_size only", "eta")
            warnings.warn("learning-dynamics: eta is now step_size (pricing's eta is the "
                          "prior probability of the low type); eta is accepted until the "
                          "next release", FutureWarning, stacklevel=3)
            object.__setattr__(self, "step_size", self.eta)
            object.__setattr__(self, "eta", None)
        if self.step_size is not None:
            check_real("step_size", self.step_size, 0.0, low_open=True)
            if self.learner not in ("hedge", "exp3", "spsa"):
                raise ConfigError(f"step_size={self.step_size!r} is not allowed with learner="
                                  f"{self.learner!r}: only hedge, exp3 and spsa take a step size")
        check_choice("start", self.start, STARTS)
        check_int("starts", self.starts, 1)
        check_real("tolerance", self.tolerance, 0.0, 1.0, low_open=True)
        check_real("beta_max", self.beta_max, 0.0, 1e100, low_open=True)  # alpha = beta^1.5
        check_int("d", self.d, 1)
        check_real("p", self.p, 0.0, 1.0, high_open=True)
        check_choice("attacker", self.attacker, ATTACKERS)
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_real("spread", self.spread, 1.0)
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        check_bool("pricing", self.pricing)
        check_real("alpha_mean", self.alpha_mean, 0.0, 1.0)
        check_real("alpha_std", self.alpha_std, 0.0)
        check_real("alpha_L", self.alpha_L, 0.0, 1.0, low_open=True, high_open=True)
        check_real("alpha_H", self.alpha_H, self.alpha_L, 1.0, low_open=True, high_open=True)
        check_real("p_low", self.p_low, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("backend", self.backend, BACKENDS)
        check_bool("history", self.history)
        check_int("checkpoint_every", self.checkpoint_every, 0)
        if self.shards != "auto":
            check_int("shards", self.shards, 1)
            from privgames.environments.shards import layout
            layout(self.agents, self.shards)
        if self.game == "pricing-bayes" and self.learner == "spsa":
            raise ConfigError("learner='spsa' is not allowed with game='pricing-bayes': its "
                              "action includes a discrete report, and a client's row plays "
                              "only in the rounds of its type")
        if self.game == "bas-sequential" and self.learner == "spsa":
            raise ConfigError("learner='spsa' is not allowed with game='bas-sequential': a "
                              "follower's row plays only in the rounds its state comes up, "
                              "and SPSA's two-round perturbation needs every round")

    @property
    def resolved_feedback(self) -> str:
        """The feedback the learner gets (``auto``: its own kind)."""
        return resolve_feedback(self.learner, self.feedback)


@dataclass
class DriverState:
    """What the driver keeps of a run: per-round rows, the iterate's hashes and measurements,
    the running social cost; and, with ``history``, every round's actions."""

    rows: list[dict] = field(default_factory=list)
    hashes: list[float] = field(default_factory=list)
    of_iterate: dict = field(default_factory=dict)
    mode_totals: dict = field(default_factory=dict)
    social_total: float = 0.0
    social_rounds: int = 0
    capped_rounds: int = 0
    infinite_cost_rounds: int = 0
    last_change: int = 0
    distances: dict = field(default_factory=dict)
    history: list[NDArray] | None = None


class Player(mesa.Agent):
    """A user, node or client: a view on its shard's rows, read when asked (no state of its
    own; a learner row of the population, so under incomplete information a client's row for
    one type and in the sequential chain a follower's row for one observed state).

    Attributes:
        index: its row in the population (:meth:`LearningModel.view`).
    """

    def __init__(self, model: LearningModel, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    def view(self) -> AgentView:
        """Everything its shard holds of it, now."""
        return self.model.view(self.index)

    @property
    def private(self) -> dict[str, float]:
        """Its private type by name (pricing's ``alpha``, BAS's ``beta``, PPSP's weights)."""
        return self.view().private

    @property
    def strategy(self) -> NDArray:
        """Its mixed strategy over the grid now (what its next action is drawn from)."""
        return self.view().strategy

    @property
    def action(self) -> float:
        """The action it played last round."""
        return self.view().action

    @property
    def costs(self) -> NDArray:
        """Its expected cost of each grid action against last round's play."""
        return self.view().costs


class LearningModel(Environment):
    """Learners play the configured game over shards; the analyst measures what they reach.

    ``model.agents`` is a Mesa ``AgentSet`` of :class:`Player` views, made on first access
    (a round needs no Python object per agent).

    Attributes:
        run_: the :class:`~privgames.environments.shards.ShardedRun`. grid: the actions.
        learner: the learners' kind (for its regret bound's formula). predicted_name: the
            predicted reference profile's name; reference_names: all of them. state: the
            driver's :class:`DriverState`.
    """

    def __init__(self, config: LearningConfig, seed=None, start_run: int = 0) -> None:
        super().__init__(config, seed)
        c = config
        self.slice_ = SLICES[c.game]
        base = as_seed_sequence(self.rng.bit_generator.seed_seq)
        make = functools.partial(self.slice_, start_run=start_run)
        shards = resolve_shards(c.shards, c.backend, c.agents)
        self.run_ = r = ShardedRun(make, c, base, c.agents, shards, c.backend,
                                   c.checkpoint_every)
        totals: dict[str, Any] = {}
        for method, kind in self.slice_.SETUP:
            if kind in ("chain", "reverse"):  # shard after shard, in agent order or back
                carry = None
                order = range(len(r.shards))
                for i in order if kind == "chain" else reversed(order):
                    carry = r.on(i, method, totals, carry)
            else:
                totals.update(r.total(method, totals))
        r.call("set_scales", {**totals, **r.total("middle_partials", totals)})
        self.reference_names = r.on(0, "reference_names")
        self.predicted_name = self.reference_names[0]
        optimum = self.slice_.optimum_from(totals, c)
        self.optimum_ = self._measure_profile("optimum")["social"] if optimum is None else optimum
        self.grid = r.on(0, "grid_of")
        self.learner = make_grid_learner(
            c.learner, self.grid, 1, c.rounds, c.resolved_feedback,
            start=start_actions(c.start, c.learner, self.grid.size, np.zeros(1)))
        self.state = DriverState(history=[] if c.history else None)
        self._measure_iterate(r.total("iterate_partials"))
        self._saved_state = (0, copy.deepcopy(self.state))
        self._players = False
        if r.checkpoint_every and r.backend == "ray":
            r.checkpoint(0)

    @property
    def agents(self) -> AgentSet:
        """Every agent as a :class:`Player` view (made on first access)."""
        if not self._players:
            self._players = True
            Player.create_agents(self, self.slice_.row_count(self.config),
                                 list(range(self.slice_.row_count(self.config))))
        return super().agents

    def _measure_profile(self, which: str) -> dict[str, Any]:
        """The combined :meth:`~privgames.environments.learning_slices.GameSlice.measure` of
        a reference profile (or ``optimum``)."""
        r = self.run_
        return r.total("measure", r.total("profile_partials", which), which)

    # --- protocol -------------------------------------------------------------------------
    def step(self) -> None:
        """One round over every shard. A shard's actor that dies is replaced: every shard goes
        back to the last checkpoint, and the rounds since are played again."""
        try:
            self._round(self.steps)
        except self.run_.failures() as err:
            if not self.run_.checkpoint_every:
                raise ConfigError(f"a shard failed ({type(err).__name__}) and checkpoint_every"
                                  "=0 keeps no checkpoint to restore it from") from None
            since = self.run_.restore()  # the round of self._saved_state too
            self.state = copy.deepcopy(self._saved_state[1])
            for t in range(since + 1, self.steps + 1):
                self._round(t)

    def _round(self, t: int) -> None:
        """Round ``t``: act, combine, respond, combine, measure (when the iterate moved)."""
        r, s = self.run_, self.state
        out = r.total("respond", r.total("act"))
        if out["changed"]:
            s.last_change = t
        self._measure_iterate(out, again=bool(out["changed"]))
        s.hashes.append(out["mode_hash"])
        s.capped_rounds += int(out["capped"])
        s.infinite_cost_rounds += int(out["infinite"])
        if math.isfinite(out["social"]):
            s.social_total += out["social"]
            s.social_rounds += 1
        if s.history is not None:
            s.history.append(self._gather("actions"))
        s.rows.append({
            "round": t, "distance": s.distances[self.predicted_name],
            "nash_gap": s.of_iterate["nash_gap"],
            "nash_gap_relative": s.of_iterate["nash_gap_relative"],
            "max_average_regret": out["regret"] / t, "cce_gap": max(out["cce"] / t, 0.0),
            "max_average_regret_game_units": out["regret_game"] / t,
            "cce_gap_game_units": max(out["cce_game"] / t, 0.0),
            "social_cost": s.of_iterate["social"],
            "average_social_cost": (s.social_total / s.social_rounds if s.social_rounds
                                    else math.inf)})
        if r.checkpoint_every and r.backend == "ray" and t % r.checkpoint_every == 0:
            r.checkpoint(t)
            self._saved_state = (t, copy.deepcopy(s))

    def _measure_iterate(self, out: dict[str, Any], again: bool = True) -> None:
        """The last iterate's measurements from its partials ``out`` (its aggregates, taken
        anew when ``again``, and its distances to the references)."""
        s = self.state
        if again or not s.of_iterate:
            s.mode_totals = {k: v for k, v in out.items() if k.startswith("mode_")}
            s.of_iterate = self.run_.total("measure", s.mode_totals)
        s.distances = {name: self.slice_.distance_from({**s.of_iterate, **out}, name,
                                                       self.config)
                       for name in self.reference_names}

    def results(self) -> pd.DataFrame:
        """Per round: the measurements, with a 1-based ``round``."""
        return pd.DataFrame(self.state.rows)

    def trace(self, column: str) -> NDArray:
        """One measurement over the rounds so far."""
        return np.array([row[column] for row in self.state.rows], dtype=float)

    # --- the population, gathered on request (O(agents)) --------------------------------------
    def _gather(self, method: str, *args: Any) -> NDArray:
        """Every shard's ``(ROWS, size)`` answer side by side, as population rows."""
        return self.slice_.population(np.concatenate(self.run_.call(method, *args), axis=1),
                                      self.config)

    def last_iterate(self) -> NDArray:
        """Each row's current strategy as one action: its most likely grid action (SPSA: its
        current level), as of the last round (under incomplete information the rows ``t N +
        i``; in the sequential chain the leader, then ``1 + (k - 1) m + s``)."""
        return self._gather("iterate")

    def reference(self, name: str | None = None) -> NDArray:
        """The theory's profile ``name`` (default: the predicted one) on the grid, per row."""
        return self._gather("reference_rows", name or self.predicted_name)

    @property
    def history(self) -> NDArray | None:
        """Every round's played actions, ``(rounds, rows)`` (``None`` unless ``history``)."""
        h = self.state.history
        return None if h is None else np.array(h).reshape(len(h), -1)

    def scales(self) -> tuple[NDArray, NDArray, NDArray]:
        """Each row's learner units ``(span, low, high)``."""
        return tuple(self._gather("scale_rows", k) for k in range(3))

    def types(self) -> dict[str, NDArray]:
        """Each agent's private type by name (in agent order; PPSP's weights ``(agents,
        3)``)."""
        parts = self.run_.call("private_types")
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def view(self, index: int) -> AgentView:
        """Row ``index`` of the population, read from the shard that owns it."""
        return self.run_.on(self.run_.owner(self.slice_.locate(index, self.config)[0]), "view",
                            index)

    def label(self, value: float) -> str:
        """An action as a reader sees it (under incomplete information: report and noise)."""
        return self.run_.on(0, "label", value)

    def path_rows(self) -> NDArray:
        """In the sequential chain: the rows on the last iterate's path (the users in chain
        order, each at the state it receives)."""
        return np.concatenate(self.run_.call("path_rows", self.state.mode_totals))

    def placement(self) -> dict[str, int]:
        """Shards per node (``local``: in this process)."""
        nodes = self.run_.nodes()
        return {node: nodes.count(node) for node in sorted(set(nodes))}

    # --- the analyst's measurements ---------------------------------------------------------
    def distance(self) -> float:
        """Distance of the last iterate to the predicted profile (fraction of the grid)."""
        return self.state.distances[self.predicted_name]

    def nash_gap(self) -> float:
        """The last iterate's largest unilateral deviation gain (in units of the span)."""
        return self.state.of_iterate["nash_gap"]

    def nash_gap_relative(self) -> float:
        """The last iterate's largest deviation gain as a fraction of the deviator's own cost
        (absolute where that cost is 0): what ``converged`` is judged by."""
        return self.state.of_iterate["nash_gap_relative"]

    def subgame_gap_relative(self) -> float | None:
        """In a sequential game, the last iterate's largest deviation gain of any row at its
        state, reached or not (relative to its own cost; 0 at a subgame-perfect profile);
        ``None`` in a simultaneous game."""
        return self.state.of_iterate.get("subgame_gap_relative")

    def path_summary(self) -> dict[str, float]:
        """In the sequential chain: the leader's level in steps below Theorem 1's and the
        release's total variance over Theorem 1's, on the last iterate's path."""
        return {k: self.state.of_iterate[k] for k in ("leader_steps_below",
                                                      "total_over_theorem1")}

    def max_average_regret(self, units: str = "learner") -> float:
        """The largest average external regret against the grid, as of the last round: in
        the learner's capped units (``"learner"``, where the bounds hold) or the game's own
        (``"game"``: ``inf`` once a played strategy met an infinite cost a fixed action
        avoids)."""
        return self.state.rows[-1]["max_average_regret" + ("" if units == "learner"
                                                             else "_game_units")]

    def cce_gap(self, units: str = "learner") -> float:
        """The CCE gap of the empirical joint play: the largest average gain any agent gets by
        deviating to a fixed grid action from the rounds' realized actions."""
        return self.state.rows[-1]["cce_gap" + ("" if units == "learner" else "_game_units")]

    def social_cost(self) -> float:
        """The social cost of the last iterate."""
        return self.state.of_iterate["social"]

    def average_social_cost(self) -> float:
        """The time-averaged play's social cost, over the rounds where it was finite."""
        return self.state.rows[-1]["average_social_cost"]

    @property
    def capped_rounds(self) -> int:
        """Rounds where some played cost was capped into the learner's units."""
        return self.state.capped_rounds

    @property
    def infinite_cost_rounds(self) -> int:
        """Rounds where some agent's played cost was infinite."""
        return self.state.infinite_cost_rounds

    def opted_out(self) -> int:
        """Agents whose last iterate is the opt-out (pricing under MLE)."""
        return int(round(self.state.of_iterate["opted_out"]))

    def regret_bound(self) -> float | None:
        """The learner's bound on the average regret after the rounds played, or ``None``."""
        bound = self.learner.regret_bound(self.steps)
        return None if bound is None else bound / self.steps

    def azuma(self) -> float:
        """How far realized play's average regret may exceed the expected one's, at
        confidence ``1 - AZUMA_DELTA`` for every row (Azuma-Hoeffding, increments in
        ``[-1, 1]``)."""
        rows = self.slice_.row_count(self.config)
        return math.sqrt(2.0 * math.log(2.0 * rows / AZUMA_DELTA) / max(self.steps, 1))

    def outcome(self) -> dict:
        """Where the last iterate ended: ``converged`` (unchanged over the last tenth of the
        rounds, and no agent gains more than ``tolerance`` of its own cost by deviating:
        :meth:`nash_gap_relative`); ``reached``: the nearest theory profile within
        ``tolerance``, else ``other equilibrium`` or ``none``; ``play``: ``converged``,
        ``stuck`` (unchanged, not an equilibrium), ``cycles`` (over the last tenth it keeps
        returning to profiles it left: at most half as many distinct ones as changes) or
        ``wanders``."""
        tol = self.config.tolerance
        tail = max(self.steps // 10, 1)
        s = self.state
        stable = s.last_change <= self.steps - tail
        converged = bool(stable and s.of_iterate["nash_gap_relative"] <= tol)
        name, gap = min(s.distances.items(), key=lambda kv: kv[1])
        reached = name if stable and gap <= tol else ("other equilibrium" if converged
                                                      else "none")
        recent = s.hashes[-tail - 1:]
        changes = sum(a != b for a, b in zip(recent, recent[1:], strict=False))
        play = ("converged" if converged else "stuck" if stable else
                "cycles" if changes >= 2 and len(set(recent)) <= changes / 2 else "wanders")
        return {"converged": converged, "reached": reached, "play": play,
                **{f"distance_{k}": v for k, v in s.distances.items()}}

    def predicted(self) -> dict:
        """The reference profiles' deviation gains and social costs, and the optimum."""
        at = {name: self._measure_profile(name) for name in self.reference_names}
        return {"nash_gaps": {k: v["nash_gap"] for k, v in at.items()},
                "nash_gaps_relative": {k: v["nash_gap_relative"] for k, v in at.items()},
                "social_costs": {k: v["social"] for k, v in at.items()},
                "optimum": self.optimum_}

    def close(self) -> None:
        """Release the shards (their actors, their checkpoints)."""
        self.run_.close()
