"""One population of ``learning-dynamics`` split over shards: the driver.

Each shard (:mod:`privgames.environments.shards`) owns a range of the agents as a slice of the
game (:mod:`privgames.environments.learning_slices`, which lists per game what crosses the
network); the driver combines the shards' partials into the aggregates each round needs and
keeps the per-round measurements: O(shards) numbers, never an agent.
"""

from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privgames.agents.learners import make_grid_learner, start_actions
from privgames.environments.base import Environment
from privgames.environments.config import ConfigError
from privgames.environments.learning_dynamics import AZUMA_DELTA
from privgames.environments.learning_slices import SLICES, AgentView
from privgames.environments.shards import ShardedRun, resolve_shards
from privgames.environments.streams import as_seed_sequence


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
    distances: dict = field(default_factory=dict)
    history: list[NDArray] | None = None


class ShardedLearningModel(Environment):
    """``learning-dynamics`` over shards (``backend``, ``shards``; the games of
    :data:`~privgames.environments.learning_slices.SLICES`): the driver holds the per-round
    measurements and O(shards) aggregates, never an agent.

    Attributes:
        run_: the :class:`~privgames.environments.shards.ShardedRun`. predicted_name: the
            predicted reference profile's name; reference_names: all of them.
    """

    def __init__(self, config: Any, seed=None, in_process: bool = False,
                 start_run: int = 0) -> None:
        super().__init__(config, seed)
        c = config
        self.slice_ = SLICES[c.game]
        base = as_seed_sequence(self.rng.bit_generator.seed_seq)
        backend = "vectorized" if in_process else c.backend
        make = functools.partial(self.slice_, start_run=start_run)
        self.run_ = r = ShardedRun(make, c, base, c.agents,
                                   resolve_shards(c.shards, backend), backend,
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
        self.learner = make_grid_learner(  # for its bound's formula only
            c.learner, self.grid, 1, c.rounds, c.resolved_feedback,
            start=start_actions(c.start, c.learner, self.grid.size, np.zeros(1)))
        self.state = DriverState(history=[] if c.history else None)
        self._saved_state = (0, copy.deepcopy(self.state))
        if r.checkpoint_every and r.backend == "ray":
            r.checkpoint(0)

    def _measure_profile(self, which: str) -> dict[str, Any]:
        """The combined :meth:`~privgames.environments.learning_slices.GameSlice.measure` of
        a reference profile (or ``optimum``)."""
        r = self.run_
        return r.total("measure", r.total("profile_partials", which), which)

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
        s.distances = {name: self.slice_.distance_from({**s.of_iterate, **out}, name,
                                                       self.config)
                       for name in self.reference_names}
        s.hashes.append(out["mode_hash"])
        s.capped_rounds += int(out["capped"])
        s.infinite_cost_rounds += int(out["infinite"])
        if math.isfinite(out["social"]):
            s.social_total += out["social"]
            s.social_rounds += 1
        if s.history is not None:
            s.history.append(self.last_iterate())
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

    def results(self) -> pd.DataFrame:
        """Per round: the measurements (as ``LearningModel.results``)."""
        return pd.DataFrame(self.state.rows)

    def last_iterate(self) -> NDArray:
        """Every agent's last iterate, gathered from the shards: O(agents), on request (under
        incomplete information the rows ``t N + i``, as the in-process engine's)."""
        return self.slice_.population(np.concatenate(self.run_.call("iterate"), axis=1),
                                      self.config)

    def agent(self, index: int) -> AgentView:
        """Agent ``index`` (a learner row of the in-process engine where an agent has
        several), read from the shard that owns it."""
        return self.run_.on(self.run_.owner(self.slice_.locate(index, self.config)[0]), "view",
                            index)

    def distance(self) -> float:
        return self.state.rows[-1]["distance"]

    def nash_gap_relative(self) -> float:
        return self.state.rows[-1]["nash_gap_relative"]

    def subgame_gap_relative(self) -> float | None:
        """As :meth:`LearningModel.subgame_gap_relative` (``None`` in a simultaneous
        game)."""
        return self.state.of_iterate.get("subgame_gap_relative")

    def path_summary(self) -> dict[str, float]:
        """As :meth:`LearningModel.path_summary`, from the shards' measurements."""
        return {k: self.state.of_iterate[k] for k in ("leader_steps_below",
                                                      "total_over_theorem1")}

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
        """Agents whose last iterate is the opt-out (pricing under MLE)."""
        return int(round(self.state.of_iterate["opted_out"]))

    def azuma(self) -> float:
        """As :meth:`LearningModel.azuma`."""
        rows = self.slice_.row_count(self.config)
        return math.sqrt(2.0 * math.log(2.0 * rows / AZUMA_DELTA)
                         / max(self.steps, 1))

    def outcome(self) -> dict:
        """As :meth:`LearningModel.outcome`."""
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

