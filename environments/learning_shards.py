"""The pricing game of ``learning-dynamics`` as one population split over shards.

FL clients with private sensitivities learn their noise ``sigma`` (the same game, learners,
feedback and measurements as :class:`~privgames.environments.learning_dynamics.LearningModel`
with ``game="pricing"``), but each shard (:mod:`privgames.environments.shards`) owns a range of
clients and the driver holds only aggregates. What crosses the network, per shard:

* once: the sums of :func:`~privgames.mechanisms.pricing.foc_summands` (eq 10/11's profiles),
  the profiles' extremes (the grid), the optimum's sums (and, with prices, eq 11's aggregate
  for Definition 4's coefficients), and the 64 scale-reading rounds' aggregates at the grid's
  middle;
* per round: the played profile's aggregate (``sum sigma^-2`` under MLE, ``sum sigma^2`` under
  the mean, the count of infinite parts, ``sum sigma^2`` of the finite for the expected
  penalty; bandit feedback adds the release's ``sum w e``, ``sum w``, ``sum e``), then the
  same three sums for the new last iterate and the measurements' partials (social cost's sum,
  the largest regret, CCE gain, distance and deviation gain).

Each sum travels as one partial per block of 1,024 clients, so the bytes per round are
``O(agents / 1024)`` numbers, and every number is the same at any shard count.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privgames.agents.learners import make_grid_learner, start_actions
from privgames.environments.base import Environment
from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import AZUMA_DELTA, RegretSums
from privgames.environments.shards import (
    BLOCK,
    BlockStreams,
    Partials,
    ShardedRun,
    block_sums,
    resolve_shards,
)
from privgames.environments.streams import as_seed_sequence, child
from privgames.mechanisms import pricing
from privgames.mechanisms.learning_games import (
    _own_grid,
    deviation_gain,
    grid_distance,
    relative_gain,
    release_loss,
    scales_from,
    snap_to,
)

#: Streams of the population's seed: the types, the learners' draws, the release, the scales,
#: the starts (``(START, start_run)``, then the block).
TYPES, ACT, RELEASE, SCALES, START = range(5)
#: Rounds of realized costs at the grid's middle that set the bandit learners' ranges.
SCALE_DRAWS = 64
GAME = (1.0, 1.0, 1.0, 1.0)  # kappa, L_F, c, S: as LearningModel's pricing game


class PricingSlice:
    """Clients ``[start, stop)`` of the pricing game: their types, learner and partial sums."""

    def __init__(self, config: Any, seed: np.random.SeedSequence, start: int,
                 stop: int, start_run: int = 0) -> None:
        self.c, self.start, self.n = config, start, config.agents
        self.mle = config.aggregation == "mle"
        streams = [BlockStreams(seed, k, start, stop, self.n) for k in range(4)]
        self.act_stream, self.release_stream, self.scale_stream = streams[1:]
        self.start_stream = BlockStreams(child(seed, START), start_run, start, stop, self.n)
        self.alpha = np.clip(streams[TYPES].normal(scale=config.alpha_std,
                                                   loc=config.alpha_mean), 0.01, 0.99)
        self.beta = np.zeros(self.alpha.size)
        self.sums = self.learner = self.reference = None
        self.mode: NDArray | None = None
        self.values = self.noise = None

    # --- setup ---------------------------------------------------------------------------
    def type_partials(self) -> Partials:
        summands = pricing.foc_summands(self.alpha, self.c.aggregation)
        return Partials({k: block_sums(v, self.start) for k, v in summands.items()},
                        {"neg_alpha_min": -float(self.alpha.min())})

    def profiles(self, totals: dict) -> Partials:
        """Eq (10) and eq (11) for these clients; their extremes set the grid."""
        self.w_total = totals["W"]
        self.eq10, self.eq11 = (pricing.foc_profile_from(
            self.alpha, totals, self.n, *GAME, self.c.aggregation, social)
            for social in (False, True))
        both = np.concatenate([self.eq10, self.eq11])
        s11 = self.eq11
        parts = pricing.aggregate_parts(s11, self.c.aggregation)
        return Partials({"parts11": block_sums(parts, self.start),
                         "privacy11": block_sums(self.alpha * GAME[2] * GAME[3] / s11,
                                                 self.start)},
                        {"hi": float(both.max()), "neg_lo": -float(both.min())})

    def set_grid(self, lo: float, hi: float, delta11: float) -> Partials:
        """The common grid (as :class:`~privgames.mechanisms.learning_games.PricingGame`),
        Definition 4's coefficients, the reference profile; then the middle's aggregates."""
        c = self.c
        levels = np.geomspace(lo / 10.0, hi * 10.0, c.grid_points - self.mle)
        self.grid = _own_grid(c.grid, np.append(levels, np.inf) if self.mle else levels,
                              opt_out=self.mle)
        if c.pricing:  # Definition 4's coefficients, from eq 11's aggregate delta11
            self.beta = pricing.penalty_from(self.alpha, self.eq11, delta11, self.w_total,
                                             self.n, GAME[0], GAME[1], c.aggregation)
        self.reference = snap_to(self.grid, self.eq11 if c.pricing else self.eq10, True)
        self.middle = np.full(self.alpha.size, self.grid[(self.grid.size - 1) // 2])
        self._scale_noise = self.scale_stream.normal(SCALE_DRAWS) * self.middle
        return self._release_partials(self.middle, self._scale_noise,
                                      self._profile_partials(self.middle))

    def set_scales(self, totals: dict) -> None:
        """Each client's cost span and realized range at the middle (as
        :meth:`~privgames.mechanisms.learning_games.GridGame.scales`), then its learner."""
        costs = self._costs(self.middle, totals)
        finite = np.where(np.isfinite(costs), costs, np.nan)
        lo, hi = np.nanmin(finite, axis=1), np.nanmax(finite, axis=1)
        self.span, self.low, self.high = scales_from(
            lo, hi, self._realized(self.middle, self._scale_noise, totals))
        c = self.c
        start = start_actions(c.start, c.learner, self.grid.size, self.start_stream.uniform())
        self.learner = make_grid_learner(c.learner, self.grid, self.alpha.size, c.rounds,
                                         c.resolved_feedback, self.span, self.low, self.high,
                                         c.step_size, start)
        self.sums = RegretSums(self.alpha.size, self.grid.size, c.resolved_feedback == "full",
                               self.span, self.low, self.high)
        self.mode = self.learner.current()

    # --- a round -----------------------------------------------------------------------------
    def act(self) -> Partials:
        """Every client draws its noise level (and, bandit, the release's noise)."""
        u = self.act_stream.uniform() if self.learner.draws else None
        v = self.values = self.learner.act_with(u)
        partials = self._profile_partials(v)
        if self.c.resolved_feedback == "bandit":
            inside = np.isfinite(v)
            self.noise = np.where(inside, self.release_stream.normal() * np.where(inside, v, 0),
                                  0.0)
            partials = self._release_partials(v, self.noise, partials)
        return partials

    def respond(self, totals: dict) -> Partials:
        """Feedback, the learners' update and the analyst's running sums, from the totals."""
        v = self.values
        costs = self._costs(v, totals)
        full = self.c.resolved_feedback == "full"
        feedback = costs if full else self._realized(v, self.noise, totals)
        self.learner.observe(feedback, None)
        own = self._costs(v, totals, v[:, None])
        capped, infinite = self.sums.add(costs, own, self.learner)
        social = self._client_costs(v, totals)
        mode = self.learner.current()
        changed = not np.array_equal(mode, self.mode)
        self.mode = mode
        partials = self._profile_partials(mode, prefix="mode_")
        partials.sums["social"] = block_sums(social, self.start)
        s = self.sums
        partials.maxima.update({
            "regret": float(s.regrets().max()), "cce": float(s.cce_gains().max()),
            "regret_game": float(s.regrets("game").max()),
            "cce_game": float(s.cce_gains("game").max()),
            "capped": float(capped), "infinite": float(infinite),
            "distance": grid_distance(self.grid, mode, self.reference, True),
            "changed": float(changed)})
        partials.sums["mode_hash"] = block_hashes(mode, self.start)
        return partials

    def reference_partials(self) -> Partials:
        return self._profile_partials(self.reference, prefix="reference_")

    def measure(self, totals: dict, which: str = "mode") -> Partials:
        """The deviation gain and social cost of the last iterate (``which="mode"``) or of the
        reference profile, from its aggregate."""
        t = {k[len(which) + 1:]: v for k, v in totals.items() if k.startswith(f"{which}_")}
        m = self.mode if which == "mode" else self.reference
        own = self._costs(m, t, m[:, None])[:, 0]
        best = self._costs(m, t).min(axis=1)
        with np.errstate(over="ignore"):
            gain = deviation_gain(own, best) / self.span
        return Partials({"social": block_sums(self._client_costs(m, t), self.start),
                         "opted_out": block_sums(np.isinf(m), self.start)},
                        {"nash_gap": float(np.max(gain)),
                         "nash_gap_relative": float(np.max(relative_gain(own, best)))})

    def iterate(self) -> NDArray:
        """These clients' last iterate (what ``history=true`` gathers)."""
        return self.mode

    def grid_of(self) -> NDArray:
        return self.grid

    def view(self, agent: int) -> ClientView:
        """Client ``agent`` as this shard holds it, made on access."""
        i = agent - self.start
        strategy = (np.zeros(self.grid.size) if self.learner.drawn_from is None
                    else self.learner.drawn_from[i].copy())
        return ClientView(agent, float(self.alpha[i]), strategy,
                          float("nan") if self.values is None else float(self.values[i]),
                          float(self.mode[i]), float(self.reference[i]))

    # --- the game's pieces, from totals --------------------------------------------------------
    def _profile_partials(self, v: NDArray, prefix: str = "") -> Partials:
        parts = pricing.aggregate_parts(v, self.c.aggregation)
        finite = np.isfinite(parts)
        sq = np.where(np.isfinite(v), v * v, 0.0)
        return Partials({f"{prefix}parts": block_sums(np.where(finite, parts, 0.0), self.start),
                         f"{prefix}inf_parts": block_sums(~finite, self.start),
                         f"{prefix}sq": block_sums(sq, self.start)})

    def _release_partials(self, v: NDArray, noise: NDArray, partials: Partials) -> Partials:
        inside = np.isfinite(v)
        with np.errstate(divide="ignore"):
            w = np.where(inside, v**-2.0, 0.0)
        partials.sums.update({"w_noise": block_sums(w * noise, self.start),
                              "w": block_sums(w, self.start),
                              "noise": block_sums(noise, self.start),
                              "outside": block_sums(~inside, self.start)})
        return partials

    def _costs(self, v: NDArray, totals: dict, candidates: NDArray | None = None) -> NDArray:
        """:meth:`~privgames.mechanisms.learning_games.PricingGame.costs` from the totals."""
        cand = self.grid[None, :] if candidates is None else candidates
        rest = pricing.rest_from_total(pricing.aggregate_parts(v, self.c.aggregation),
                                       totals["parts"], int(round(totals["inf_parts"])))[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            own = pricing.own_cost(cand, rest, self.alpha[:, None], *GAME, self.c.aggregation,
                                   self.beta[:, None], self.n)
            sq = np.where(np.isfinite(v), v * v, 0.0)
            others = np.fmax(self.beta * (totals["sq"] - sq) / self.n**2, 0.0)
        return own + others[:, None]

    def _realized(self, v: NDArray, noise: NDArray, totals: dict) -> NDArray:
        """:meth:`~privgames.mechanisms.learning_games.PricingGame.realized` from the totals
        (``noise``: one round's ``(n,)`` or several rounds' ``(k, n)``)."""
        kappa, L_F, c, S = GAME
        inside = np.isfinite(v)
        w_sum, w_noise, e_sum = (np.asarray(totals[k]) for k in ("w", "w_noise", "noise"))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.mle:
                error = np.where(w_sum > 0, w_noise / np.where(w_sum > 0, w_sum, 1.0), np.inf)
            else:
                error = np.where(totals["outside"] == 0, e_sum / self.n, np.inf)
            loss = np.vectorize(lambda e: release_loss(float(e), kappa, L_F))(error)
            accuracy = (1.0 - self.alpha) * np.asarray(loss)[..., None]
            privacy = np.fmax(self.alpha * c * S / v, 0.0)
            spread = noise - np.asarray(e_sum)[..., None] / self.n
            penalty = np.where(inside, self.beta * spread**2,
                               np.where(self.beta > 0, np.inf, 0.0))
        return accuracy + privacy + penalty

    def _client_costs(self, v: NDArray, totals: dict) -> NDArray:
        """Eq (5)'s ``J_i`` with ``Delta`` from the totals (a client opting out pays only
        accuracy; eq 6 sums them)."""
        total = np.float64(totals["parts"] if round(totals["inf_parts"]) == 0 else math.inf)
        with np.errstate(divide="ignore"):
            delta = total**-0.5 if self.mle else np.sqrt(total) / self.n
        u = float(pricing.loss_bound(delta, GAME[0], GAME[1]))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = np.where(self.alpha > 0, self.alpha * pricing.privacy_loss(v, *GAME[2:]), 0.0)
        return (1.0 - self.alpha) * u + p



@dataclass(frozen=True)
class ClientView:
    """One client, read from its shard when asked: a shard keeps no Python object per client
    (at 10^6 clients a ``mesa.Agent`` each would cost more than the clients' numbers).

    Attributes:
        index: the client. alpha: its private sensitivity. strategy: the mixed strategy it
            last drew from. action: the noise level it last played. iterate: its last iterate.
        reference: its noise level in the predicted profile.
    """

    index: int
    alpha: float
    strategy: NDArray
    action: float
    iterate: float
    reference: float


@dataclass
class DriverState:
    """What the driver keeps of a sharded run: per-round rows, the iterate's hashes and
    measurements, the running social cost; and, with ``history``, every round's iterate."""

    rows: list[dict] = field(default_factory=list)
    hashes: list[float] = field(default_factory=list)
    of_iterate: dict = field(default_factory=dict)
    social_total: float = 0.0
    social_rounds: int = 0
    capped_rounds: int = 0
    infinite_cost_rounds: int = 0
    last_change: int = 0
    history: list[NDArray] | None = None


def block_hashes(values: NDArray, start: int) -> NDArray:
    """One 32-bit hash per block of ``values`` (as floats: their sum over the blocks is exact
    and the same at any shard count), so that the driver tells a profile it saw before."""
    return np.array([float(int.from_bytes(hashlib.blake2b(values[k:k + BLOCK].tobytes(),
                                                          digest_size=4).digest(), "big"))
                     for k in range(0, values.size, BLOCK)])


class ShardedLearningModel(Environment):
    """``learning-dynamics`` with ``game="pricing"`` over shards (``backend``, ``shards``):
    the driver holds the per-round measurements and O(shards) aggregates, never an agent.

    Attributes:
        run_: the :class:`~privgames.environments.shards.ShardedRun`. predicted_name: the
            reference profile's name (``eq10``, or ``eq11`` with prices).
    """

    def __init__(self, config: Any, seed=None, in_process: bool = False,
                 start_run: int = 0) -> None:
        super().__init__(config, seed)
        c = config
        if c.game != "pricing":
            raise ConfigError(f"backend={c.backend!r} runs game='pricing' so far; game="
                              f"{c.game!r} runs with backend='vectorized'")
        base = as_seed_sequence(self.rng.bit_generator.seed_seq)
        backend = "vectorized" if in_process else c.backend
        make = functools.partial(PricingSlice, start_run=start_run)
        self.run_ = r = ShardedRun(make, c, base, c.agents,
                                   resolve_shards(c.shards, backend), backend,
                                   c.checkpoint_every)
        types = r.total("type_partials")
        ext = r.total("profiles", types)
        self.alpha_min, self.w_total = -types["neg_alpha_min"], types["W"]
        parts11 = ext["parts11"]
        delta11 = parts11**-0.5 if c.aggregation == "mle" else math.sqrt(parts11) / c.agents
        self.optimum_ = self._optimum(delta11, ext["privacy11"])
        r.call("set_scales", r.total("set_grid", -ext["neg_lo"], ext["hi"], delta11))
        self.predicted_name = "eq11" if c.pricing else "eq10"
        self.grid = r.call("grid_of")[0]
        self.learner = make_grid_learner(  # for its bound's formula only
            c.learner, self.grid, 1, c.rounds, c.resolved_feedback,
            start=start_actions(c.start, c.learner, self.grid.size, np.zeros(1)))
        self.state = DriverState(history=[] if c.history else None)
        self._saved_state = (0, copy.deepcopy(self.state))
        if r.checkpoint_every and r.backend == "ray":
            r.checkpoint(0)

    def _optimum(self, delta11: float, privacy11: float) -> float:
        """The smallest social cost (as ``PricingGame.optimum``): mean rule, eq (11)'s profile;
        MLE, only the least sensitive client adds noise (``social_optimum``)."""
        kappa, L_F, c, S = GAME
        if self.config.aggregation == "mean":
            return self.w_total * float(pricing.loss_bound(delta11, kappa, L_F)) + privacy11
        t = self.alpha_min * c * S / (kappa * self.w_total)
        from scipy.optimize import brentq

        hi = min(math.sqrt(t), (t * L_F) ** (1 / 3))
        d = brentq(lambda x: x * x * (1 + x / L_F) - t, 0.0, hi * (1 + 1e-12),
                   xtol=1e-300, rtol=4 * np.finfo(float).eps)
        return self.w_total * float(pricing.loss_bound(d, kappa, L_F)) + self.alpha_min * c * S / d

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
        if out["changed"] or not s.of_iterate:
            s.of_iterate = r.total("measure", {k: v for k, v in out.items()
                                               if k.startswith("mode_")})
            if out["changed"]:
                s.last_change = t
        s.hashes.append(out["mode_hash"])
        s.capped_rounds += int(out["capped"])
        s.infinite_cost_rounds += int(out["infinite"])
        if math.isfinite(out["social"]):
            s.social_total += out["social"]
            s.social_rounds += 1
        if s.history is not None:
            s.history.append(self.last_iterate())
        s.rows.append({
            "round": t, "distance": out["distance"], "nash_gap": s.of_iterate["nash_gap"],
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

    def results(self) -> pd.DataFrame:
        """Per round: the measurements (as ``LearningModel.results``)."""
        return pd.DataFrame(self.state.rows)

    def last_iterate(self) -> NDArray:
        """Every client's last iterate, gathered from the shards: O(agents), on request."""
        return np.concatenate(self.run_.call("iterate"))

    def agent(self, index: int) -> ClientView:
        """Client ``index``, read from the shard that owns it."""
        return self.run_.on(self.run_.owner(index), "view", index)

    def distance(self) -> float:
        return self.state.rows[-1]["distance"]

    def nash_gap_relative(self) -> float:
        return self.state.rows[-1]["nash_gap_relative"]

    def subgame_gap_relative(self) -> None:
        """``None``: the pricing game is simultaneous."""
        return None

    def max_average_regret(self, units: str = "learner") -> float:
        """As :meth:`LearningModel.max_average_regret`, as of the last round."""
        return self.state.rows[-1]["max_average_regret" + ("" if units == "learner"
                                                             else "_game_units")]

    def cce_gap(self, units: str = "learner") -> float:
        """As :meth:`LearningModel.cce_gap`, as of the last round."""
        return self.state.rows[-1]["cce_gap" + ("" if units == "learner" else "_game_units")]

    @property
    def capped_rounds(self) -> int:
        return self.state.capped_rounds

    @property
    def infinite_cost_rounds(self) -> int:
        return self.state.infinite_cost_rounds

    def opted_out(self) -> int:
        """Clients whose last iterate is the opt-out."""
        return int(round(self.state.of_iterate["opted_out"]))

    def azuma(self) -> float:
        """As :meth:`LearningModel.azuma`."""
        return math.sqrt(2.0 * math.log(2.0 * self.config.agents / AZUMA_DELTA)
                         / max(self.steps, 1))

    def outcome(self) -> dict:
        """As :meth:`LearningModel.outcome` (its one reference: eq 10, or eq 11 with prices)."""
        tol = self.config.tolerance
        tail = max(self.steps // 10, 1)
        s = self.state
        stable = s.last_change <= self.steps - tail
        converged = bool(stable and s.of_iterate["nash_gap_relative"] <= tol)
        gap = self.distance()
        reached = self.predicted_name if stable and gap <= tol else (
            "other equilibrium" if converged else "none")
        recent = s.hashes[-tail - 1:]
        changes = sum(a != b for a, b in zip(recent, recent[1:], strict=False))
        play = ("converged" if converged else "stuck" if stable else
                "cycles" if changes >= 2 and len(set(recent)) <= changes / 2 else "wanders")
        return {"converged": converged, "reached": reached, "play": play,
                f"distance_{self.predicted_name}": gap}

    def predicted(self) -> dict:
        """The reference profile's deviation gain and social cost, and the optimum."""
        r = self.run_
        at = r.total("measure", r.total("reference_partials"), "reference")
        name = self.predicted_name
        return {"nash_gaps": {name: at["nash_gap"]},
                "nash_gaps_relative": {name: at["nash_gap_relative"]},
                "social_costs": {name: at["social"]},
                "optimum": self.optimum_}

    def close(self) -> None:
        """Release the shards (their actors, their checkpoints)."""
        self.run_.close()

