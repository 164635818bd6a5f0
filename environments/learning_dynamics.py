"""Users who learn from what they experience: the four games played round after round by
no-regret, fictitious-play, zeroth-order and best-response learners, each seeing only the
feedback the game gives it (the cost of every action, or only its own realized cost).

The analyst's view is kept apart: per round, the distance of the last iterate to the theory's
profile, each agent's average external regret against its grid, the CCE gap of the empirical
joint play, and social costs beside the predicted NE's and the optimum's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.learners import (
    FEEDBACK_SETTINGS,
    GRID_LEARNERS,
    SPSA,
    STARTS,
    GridLearner,
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
from privgames.environments.streams import child, generator
from privgames.mechanisms import chain
from privgames.mechanisms.bas_sequential import BASSequentialGame
from privgames.mechanisms.learning_games import (
    BASGame,
    BayesPricingGame,
    GridGame,
    PPSPGame,
    PricingGame,
    SARGame,
    check_levels,
    deviation_gain,
)
from privgames.mechanisms.pricing import AGGREGATIONS
from privgames.mechanisms.pricing_bayes import BinaryGame

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")
ATTACKERS = ("weak", "strong")
WEIGHTINGS = ("equal", "unequal")
BACKENDS = ("vectorized", "ray")
#: A round's fixed cost (the learner's, the game's and the analyst's Python calls), in the
#: operations of an ``agents x grid`` pass: about a millisecond.
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
        backend: ``vectorized`` (one process) or ``ray`` (one population split into ``shards``
            Ray actors, the driver holding only aggregates; every game).
        shards: the Ray actors of one population (an integer >= 1, at most one per 1,024
            agents, or ``auto``: one per CPU of the Ray cluster).
        history: keep every round's last iterate in the driver (``backend=ray``; O(rounds x
            agents) of memory).
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
        """The learners' and the analyst's ``(agents, grid)`` arrays, the played history;
        work: a few ``agents x grid`` passes a round, and a round's fixed Python cost
        (:data:`ROUND_OPS`). Under incomplete information the agents
        and actions double, and the interim expectations (a few MB a pass) cost about four
        times the rest."""
        bayes = self.game == "pricing-bayes"
        sequential = self.game == "bas-sequential"  # a row per follower and state
        if self.backend == "ray":
            return self._shard_footprint()
        rows = self.agents * (2 if bayes else self.grid_points if sequential else 1)
        cells = float(rows) * self.grid_points * (2 if bayes else 1)
        return Footprint.of(self, [(("agents", "grid_points"), 80.0 * cells),
                                   (("agents", "rounds"), 9.0 * rows * self.rounds),
                                   (("agents",), 2000.0 * rows + (8e6 if bayes else 0))],
                            (30.0 * cells * (5 if bayes else 3 if sequential else 1)
                             + ROUND_OPS) * self.rounds * self.starts)

    def _shard_footprint(self) -> Footprint:
        """With ``backend=ray``, the largest shard's arrays (about nine ``agents/shards x
        grid`` float arrays; under incomplete information twice the rows and actions, and the
        analyst's type profiles, a byte each; in the sequential chain a row per state) and,
        with ``history``, the driver's ``rounds x agents``."""
        shards = 1 if self.shards == "auto" else self.shards
        bayes = self.game == "pricing-bayes"
        share = float(-(-self.agents // shards))
        cells = share * self.grid_points * (4 if bayes else self.grid_points
                                            if self.game == "bas-sequential" else 1)
        peak = max(90.0 * cells + (600.0 + (300.0 if bayes else 0.0)) * share,
                   8.0 * self.rounds * self.agents if self.history else 0.0)
        driver = "rounds" if self.history and peak > 90.0 * cells else "agents"
        return Footprint(peak, 30.0 * self.agents * self.grid_points * self.rounds
                         * self.starts * (35 if bayes else 1), driver)

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
        if self.backend == "ray":
            if self.shards != "auto":
                check_int("shards", self.shards, 1)
                from privgames.environments.shards import layout
                layout(self.agents, self.shards)
        elif self.shards != 1:
            raise ConfigError(f"shards={self.shards!r} is not allowed with backend="
                              f"{self.backend!r}: shards split one population over Ray actors "
                              "(backend='ray')")
        elif self.history:
            raise ConfigError("history=True is not allowed with backend='vectorized': the "
                              "in-process engine always keeps the history")
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


def make_game(config: LearningConfig, rng: np.random.Generator) -> GridGame:
    """The configured game, with the agents' private types drawn from ``rng``."""
    c, n = config, config.agents
    if c.game == "bas":
        return BASGame(rng.uniform(0.0, c.beta_max, n), c.d, c.grid_points, c.grid)
    if c.game == "bas-sequential":  # Stage 1-2: truthful bids, the top bidder not first
        beta = rng.uniform(0.0, c.beta_max, n)
        return BASSequentialGame(beta[chain.bas_order(beta, rng)], c.d, c.grid_points)
    if c.game == "sar":
        return SARGame(n, c.p, c.attacker)
    if c.game == "ppsp":
        from privgames.environments.ppsp_ring import NoiseGameConfig
        ring = NoiseGameConfig(n=n, weighting=c.weighting, spread=c.spread)
        return PPSPGame(ring.weights(rng), ring.K, ring.delta, ring.d, c.grid_points, c.grid)
    if c.game == "pricing-bayes":
        game = BinaryGame(n, c.alpha_L, c.alpha_H, c.p_low, aggregation=c.aggregation)
        return BayesPricingGame(game, c.pricing, rng, c.grid_points, c.grid)
    alpha = np.clip(rng.normal(c.alpha_mean, c.alpha_std, n), 0.01, 0.99)
    return PricingGame(alpha, 1.0, 1.0, 1.0, 1.0, c.aggregation, c.pricing, c.grid_points,
                       c.grid)


def make_learning_model(config: LearningConfig, seed=None, start_run: int = 0) -> Environment:
    """The engine ``config.backend`` names: :class:`LearningModel` in this process, or the
    population split over Ray actors
    (:class:`~privgames.environments.learning_shards.ShardedLearningModel`); ``start_run``:
    which of the population's ``starts`` it plays."""
    if config.backend == "ray":
        from privgames.environments.learning_shards import ShardedLearningModel

        return ShardedLearningModel(config, seed, start_run=start_run)
    return LearningModel(config, seed, start_run)


#: The streams of a population's seed (``LearningModel``): types, the learners' draws, the
#: release, the scales, the types drawn each round, the starts (one child per start run).
TYPES, ACT, RELEASE, SCALES, ROUND_TYPES, START = range(6)


def learner_units(costs: NDArray, own: NDArray, full: bool, span: NDArray, low: NDArray,
                  high: NDArray, on: NDArray | None = None) -> tuple[NDArray, NDArray, bool]:
    """Costs as the learner sees them, in its units: full information capped at the row's
    smallest plus the span, over the span; bandit clipped to the range, over it; 0 for an
    agent not ``on`` this round (its regret is unchanged). Also whether the cost some agent
    on played (``own``) was capped or clipped (an infinite one included)."""
    if full:
        floor = costs.min(axis=1, keepdims=True)
        raw = [(x - floor) / span[:, None] for x in (costs, own)]
    else:
        raw = [(x - low[:, None]) / (high - low)[:, None] for x in (costs, own)]
    on = np.ones((costs.shape[0], 1), dtype=bool) if on is None else on[:, None]
    with np.errstate(invalid="ignore"):
        capped = bool(np.any(on & ~((raw[1] >= 0.0) & (raw[1] <= 1.0))))
    return (*(np.where(on, np.clip(x, 0.0, 1.0), 0.0) for x in raw), capped)


def expected_under(p: NDArray, costs: NDArray) -> NDArray:
    """Each agent's expected cost under its mixed strategy (an infinite cost weighs only
    where it is played with positive probability)."""
    with np.errstate(invalid="ignore"):
        return np.where(p > 0, p * costs, 0.0).sum(axis=1)


class RegretSums:
    """The analyst's running sums over rounds, per agent, in the learner's capped units
    (``"learner"``, where the bounds hold) and the game's own (``"game"``): each grid action's
    cost, the played action's, and the learner's expected cost under the strategy it drew
    from (both engines keep one: :class:`LearningModel`, and each shard of
    :class:`~privgames.environments.learning_shards.ShardedLearningModel`)."""

    UNITS = ("learner", "game")

    def __init__(self, n: int, m: int, full: bool, span: NDArray, low: NDArray,
                 high: NDArray) -> None:
        self.full, self.span, self.low, self.high = full, span, low, high
        self.grid = {u: np.zeros((n, m)) for u in self.UNITS}
        self.played = {u: np.zeros(n) for u in self.UNITS}
        self.mixed = {u: np.zeros(n) for u in self.UNITS}

    def add(self, costs: NDArray, own: NDArray, learner: GridLearner,
            on: NDArray | None = None) -> tuple[bool, bool]:
        """One round: every grid action's expected cost ``(n, m)``, the played one's ``(n,
        1)``, the learner (the strategies it drew from; SPSA plays its point), the agents that
        played (``None``: all). Returns whether some played cost was capped into the
        learner's units, and whether one was infinite."""
        drawn_from = None if isinstance(learner, SPSA) else learner.drawn_from
        bounded, own_bounded, capped = learner_units(costs, own, self.full, self.span,
                                                     self.low, self.high, on)
        on = np.ones(costs.shape[0], dtype=bool) if on is None else on
        own_game = np.where(on, own[:, 0], 0.0)
        for units, grid_costs, played in (("learner", bounded, own_bounded[:, 0]),
                                          ("game", np.where(on[:, None], costs, 0.0),
                                           own_game)):
            self.grid[units] += grid_costs
            self.played[units] += played
            self.mixed[units] += (played if drawn_from is None
                                  else expected_under(drawn_from, grid_costs))
        return capped, bool(np.any(on & np.isinf(own[:, 0])))

    def regrets(self, units: str = "learner") -> NDArray:
        """Each agent's total external regret: its expected cost minus its best fixed
        action's (``inf`` in the game's units once play met an infinite cost that a fixed
        action avoids)."""
        return deviation_gain(self.mixed[units], self.grid[units].min(axis=1))

    def cce_gains(self, units: str = "learner") -> NDArray:
        """Each agent's total gain from deviating to its best fixed action from the realized
        play (the CCE gap's, before averaging)."""
        return deviation_gain(self.played[units], self.grid[units].min(axis=1))


class Player(mesa.Agent):
    """A user, node or client: its private type is in the game, its learner state is its row
    of the learner's arrays (updated for all agents at once), read through its index. Under
    incomplete information (``pricing-bayes``) a player is a client's row for one type
    (Harsanyi's agent form): client ``index % agents``, type ``index // agents``."""

    def __init__(self, model: LearningModel, index: int) -> None:
        super().__init__(model)
        self.index = int(index)

    @property
    def strategy(self) -> NDArray:
        """Its mixed strategy over the grid."""
        return self.model.learner.probabilities()[self.index]

    @property
    def action(self) -> float:
        """The action it played last round."""
        return float(self.model.played[self.index])


class LearningModel(Environment):
    """Learners play the configured game; the analyst measures what they reach.

    Attributes:
        game: the game (types, costs, the theory's profiles). learner: every agent's learner.
        references: the theory's profiles on the grid, the predicted one first.
        played: last round's actions. history: every round's actions, ``(rounds, agents)``.
        active_history: which agents played in each round (all but under incomplete
            information, where only each client's row of its drawn type plays).
    """

    def __init__(self, config: LearningConfig, seed=None, start_run: int = 0) -> None:
        super().__init__(config, seed)
        c = config
        base = self.rng.bit_generator.seed_seq
        self.game = make_game(c, generator(child(base, TYPES)))
        self._act_rng = generator(child(base, ACT))  # the learners' own randomisation
        self._release_rng = generator(child(base, RELEASE))  # the release (bandit costs)
        self._type_rng = generator(child(base, ROUND_TYPES))  # types drawn each round (-bayes)
        self.feedback = c.resolved_feedback
        g = self.game
        self.span, self.low, self.high = g.scales(generator(child(base, SCALES)))
        self.start_run = start_run
        start = start_actions(c.start, c.learner, g.grid.size,
                              generator(child(base, START, start_run)).random(g.n))
        self.learner = make_grid_learner(c.learner, g.grid, g.n, c.rounds, self.feedback,
                                         self.span, self.low, self.high, c.step_size, start)
        self.references = g.references()
        self.predicted_name = next(iter(self.references))
        self.players = Player.create_agents(self, g.n, list(range(g.n)))
        self.history = np.zeros((c.rounds, g.n))
        self.active_history = np.ones((c.rounds, g.n), dtype=bool)
        self.played = np.zeros(g.n)
        self.sums = RegretSums(g.n, g.grid.size, self.feedback == "full", self.span,
                               self.low, self.high)
        self._social_total, self._social_rounds = 0.0, 0
        self.infinite_cost_rounds = 0  # rounds where some agent's played cost was infinite
        self.capped_rounds = 0  # rounds where some played cost was capped (learner's units)
        self._iterate = self.learner.current()
        self.last_change = 0
        self._iterates: list[int] = []  # a hash of each round's last iterate
        self._of_iterate: dict[str, float] = {}  # its measurements, until it changes
        self.datacollector = mesa.DataCollector(model_reporters={
            "distance": LearningModel.distance, "nash_gap": LearningModel.nash_gap,
            "nash_gap_relative": LearningModel.nash_gap_relative,
            "max_average_regret": LearningModel.max_average_regret,
            "cce_gap": LearningModel.cce_gap, "social_cost": LearningModel.social_cost,
            "average_social_cost": LearningModel.average_social_cost})

    # --- protocol -------------------------------------------------------------------------
    def step(self) -> None:
        """One round: every agent acts, gets its feedback, updates; the analyst records."""
        g = self.game
        g.begin_round(self._type_rng)
        values = self.learner.act(self._act_rng)
        g.played(values)
        costs = g.costs(values)
        feedback = costs if self.feedback == "full" else g.realized(values, self._release_rng)
        self.learner.observe(feedback, g.active)
        own = g.costs(values, values[:, None])
        capped, infinite = self.sums.add(costs, own, self.learner, g.active)
        self.capped_rounds += capped
        self.infinite_cost_rounds += infinite
        social = g.social_cost(values)
        if math.isfinite(social):
            self._social_total += social
            self._social_rounds += 1
        self.played = values
        self.history[self.steps - 1] = values
        if g.active is not None:
            self.active_history[self.steps - 1] = g.active
        mode = self.learner.current()
        if not np.array_equal(mode, self._iterate):
            self._iterate, self.last_change = mode, self.steps
            self._of_iterate.clear()
        self._iterates.append(hash(mode.tobytes()))
        self.datacollector.collect(self)

    # --- the analyst's measurements ------------------------------------------------------------
    def opted_out(self) -> int:
        """Agents whose last iterate is the opt-out (``inf``)."""
        return int(np.isinf(self.last_iterate()).sum())

    def last_iterate(self) -> NDArray:
        """Each agent's current strategy as one action: its most likely grid action (SPSA: its
        current level), as of the last round."""
        return self._iterate

    def _measured(self, name: str, measure) -> float:
        """A measurement of the last iterate, taken when it changes, not every round."""
        if name not in self._of_iterate:
            self._of_iterate[name] = measure(self.last_iterate())
        return self._of_iterate[name]

    def distance(self) -> float:
        """Distance of the last iterate to the predicted profile (fraction of the grid)."""
        return self._measured("distance", lambda v: self.game.distance(
            v, self.references[self.predicted_name]))

    def nash_gap(self) -> float:
        """The last iterate's largest unilateral deviation gain (in units of the span)."""
        return self._measured("nash_gap", lambda v: self.game.nash_gap(v, self.span))

    def nash_gap_relative(self) -> float:
        """The last iterate's largest deviation gain as a fraction of the deviator's own cost
        (absolute where that cost is 0): what ``converged`` is judged by."""
        return self._measured("nash_gap_relative", self.game.nash_gap_relative)

    def subgame_gap_relative(self) -> float | None:
        """In a sequential game, the last iterate's largest deviation gain of any row at its
        state, reached or not (relative to its own cost; 0 at a subgame-perfect profile);
        ``None`` in a simultaneous game."""
        if not hasattr(self.game, "subgame_gap_relative"):
            return None
        return self._measured("subgame_gap_relative", self.game.subgame_gap_relative)

    def path_summary(self) -> dict[str, float]:
        """In the sequential chain: the last iterate's path
        (:meth:`~privgames.mechanisms.bas_sequential.BASSequentialGame.path_summary`)."""
        return self.game.path_summary(self.last_iterate())

    def average_regrets(self, units: str = "learner") -> NDArray:
        """Each agent's average external regret against its grid: its expected cost (under
        the strategy it drew from) minus its best fixed action's, in its learner's capped
        units (``units="learner"``, where the bounds hold) or the game's own (``"game"``:
        ``inf`` once a played strategy met an infinite cost a fixed action avoids)."""
        return self.sums.regrets(units) / max(self.steps, 1)

    def max_average_regret(self, units: str = "learner") -> float:
        return float(self.average_regrets(units).max())

    def cce_gap(self, units: str = "learner") -> float:
        """The CCE gap of the empirical joint play: the largest average gain any agent gets by
        deviating to a fixed grid action from the rounds' realized actions (in the learner's
        units, or the game's: see :meth:`average_regrets`)."""
        return float(max(self.sums.cce_gains(units).max() / max(self.steps, 1), 0.0))

    def social_cost(self) -> float:
        """The social cost of the last iterate."""
        return self._measured("social_cost", self.game.social_cost)

    def average_social_cost(self) -> float:
        """The time-averaged play's social cost, over the rounds where it was finite (zero
        noise on a lone prefix, or everyone opting out, costs ``inf``)."""
        return self._social_total / self._social_rounds if self._social_rounds else math.inf

    def regret_bound(self) -> float | None:
        """The learner's bound on the average regret after the rounds played, or ``None``."""
        bound = self.learner.regret_bound(self.steps)
        return None if bound is None else bound / self.steps

    def azuma(self) -> float:
        """How far realized play's average regret may exceed the expected one's, at
        confidence ``1 - AZUMA_DELTA`` for every agent (Azuma-Hoeffding, increments in
        ``[-1, 1]``)."""
        return math.sqrt(2.0 * math.log(2.0 * self.game.n / AZUMA_DELTA) / max(self.steps, 1))

    def outcome(self) -> dict:
        """Where the last iterate ended: ``converged`` (unchanged over the last tenth of the
        rounds, and no agent gains more than ``tolerance`` of its own cost by deviating:
        :meth:`nash_gap_relative`); ``reached``: the nearest theory
        profile within ``tolerance``, else ``other equilibrium`` or ``none``; ``play``:
        ``converged``, ``stuck`` (unchanged, not an equilibrium), ``cycles`` (over the last
        tenth it keeps returning to profiles it left: at most half as many distinct ones as
        changes) or ``wanders``."""
        tol = self.config.tolerance
        tail = max(self.steps // 10, 1)
        stable = self.last_change <= self.steps - tail
        converged = bool(stable and self.nash_gap_relative() <= tol)
        mode = self.last_iterate()
        near = {name: self.game.distance(mode, ref) for name, ref in self.references.items()}
        name, gap = min(near.items(), key=lambda kv: kv[1])
        reached = name if stable and gap <= tol else ("other equilibrium" if converged
                                                      else "none")
        recent = self._iterates[-tail - 1:]
        changes = sum(a != b for a, b in zip(recent, recent[1:], strict=False))
        play = ("converged" if converged else "stuck" if stable else
                "cycles" if changes >= 2 and len(set(recent)) <= changes / 2 else "wanders")
        return {"converged": converged, "reached": reached, "play": play,
                **{f"distance_{k}": v for k, v in near.items()}}

    def predicted(self) -> dict:
        """The theory's profiles, their deviation gains and social costs, and the optimum."""
        g = self.game
        return {"references": self.references,
                "nash_gaps": {k: g.nash_gap(v, self.span) for k, v in self.references.items()},
                "nash_gaps_relative": {k: g.nash_gap_relative(v)
                                       for k, v in self.references.items()},
                "social_costs": {k: g.social_cost(v) for k, v in self.references.items()},
                "optimum": g.optimum()}
