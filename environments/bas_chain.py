"""The BAS chain: users in a sequence add Gaussian noise to a running sum (Chained-DP).

Stage 1-2 of the Broadcast-And-Shuffle mechanism fix each (sub-)sequence's order; every step is
one learning round of Stage 3, in which each user picks its noise from what it observes.
Paper: ``papers/chained-dp-bas-sar.txt``, sections IV-V, VII-VIII.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.chain_user import ChainUser
from privgames.agents.learners import (
    FEEDBACK_SETTINGS,
    GRID_LEARNERS,
    LEARNERS,
    GridLearner,
    make_grid_learner,
    make_learner,
    resolve_feedback,
)
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
    check_reals,
)
from privgames.environments.streams import child, generator
from privgames.mechanisms.chain import (
    SAMPLINGS,
    bas_order,
    central_optimum,
    chain_epsilon,
    chain_squared_errors,
    estimate_noise_variance,
    ldp_variances,
    nash_equilibrium,
    split_sequence,
    user_costs,
)
from privgames.mechanisms.learning_games import BASGame

#: Learners from experience on a grid of variances (issue 21; ``best_response`` and ``damped``
#: stay the continuous learners of Theorem 1's dynamics).
EXPERIENCE = tuple(name for name in GRID_LEARNERS if name not in LEARNERS)
OBSERVATIONS = ("exact", "estimated")
PRIORS = ("bids", "none")
SPLITS = ("random", "sorted")


@dataclass(frozen=True)
class BASChainConfig:
    """Parameters of one BAS chain population.

    Attributes:
        K: number of users (>= 2).
        d: vector dimension (>= 1).
        beta: preferences, one per user; ``None`` draws them uniformly from ``[0, beta_max]``.
        beta_max: upper end of the preference range when ``beta`` is drawn.
        bids: broadcast bids (Stage 1); ``None`` means truthful (``bids = beta``).
        delta: the shared DP failure probability, in (0, 1).
        Delta: per-coordinate data bound, data lie in ``[-Delta, Delta]``.
        rounds: learning rounds.
        learner: ``best_response`` or ``damped`` (continuous, from the upstream variance;
            ``damping`` is the damped learner's rate), or a learner from experience on a grid
            of ``grid_points`` variances over ``[0, m max beta]`` (``fictitious``, ``hedge``,
            ``regret_matching``: full information; ``exp3``, ``spsa``: bandit), the
            ``learning-dynamics`` learners, playing every sub-sequence's chain.
        feedback: a grid learner's: ``full`` (the cost of every grid variance given the
            others), ``bandit`` (its own realized cost, the release's squared error in place of
            its variance) or ``auto`` (the learner's own kind).
        grid_points: the grid learners' variances.
        observation: followers see the upstream variance ``exact`` or only the data
            (``estimated``, section VIII).
        prior: the first user's initial belief of the followers' level: ``none`` (it learns
            it from outcomes alone, the default) or from the ``bids`` (``m max`` of the others'
            bids, the level Mechanism 1 prescribes).
        subsequences: number of sub-sequences the users are split into; ``split`` is
            ``random`` or ``sorted`` (Corollary 4).
        tolerance: relative distance to the NE below which a round counts as converged.
        settle: relative change of the chain's outcome below which the first user takes it as
            the followers' settled reaction and revises its belief.
        replications: Monte-Carlo noise draws of the final chain for the MSE.
        sampling: how they are drawn: ``per-user`` (every user's noise, the reference) or
            ``chi-square`` (exact in distribution, one draw per replication; the paper scale
            uses it: about 36 billion normal draws become 1.8 million).
    """

    K: int = 10
    d: int = 50
    beta: tuple[float, ...] | None = None
    beta_max: float = 1.3
    bids: tuple[float, ...] | None = None
    delta: float = 1e-5
    Delta: float = 1.0
    rounds: int = 20
    learner: str = "best_response"
    feedback: str = "auto"
    grid_points: int = 21
    damping: float = 0.5
    observation: str = "exact"
    prior: str = "none"
    subsequences: int = 1
    split: str = "random"
    tolerance: float = 1e-6
    settle: float = 1e-9
    replications: int = 1000
    sampling: str = "per-user"

    @property
    def resolved_feedback(self) -> str | None:
        """A grid learner's feedback (``auto``: its own kind); ``None`` for the continuous
        learners, which observe the upstream variance."""
        return resolve_feedback(self.learner, self.feedback) if self.learner in EXPERIENCE \
            else None

    def footprint(self) -> Footprint:
        """Data ``K x d``, the agents and their per-round records, one 64 MiB noise chunk
        (``chain_squared_errors`` chunks), the squared error of every replication of the four
        profiles (and a copy); work: the Monte-Carlo draws and learning moves."""
        draws = self.K * self.d if self.sampling == "per-user" else 1
        work = 4.0 * self.replications * draws + self.rounds * self.K * self.d
        fp = Footprint.of(self, [(("K", "d"), 16.0 * self.K * self.d),
                                 (("K",), 3000.0 * self.K),
                                 (("rounds", "K"), 200.0 * self.rounds * self.K),
                                 (("replications",), 64.0 * self.replications)], work)
        return dataclasses.replace(fp, peak_bytes=fp.peak_bytes + 64 * 2**20)

    def __post_init__(self) -> None:
        check_int("K", self.K, 2)
        check_int("d", self.d, 1)
        for name in ("beta", "bids"):
            values = getattr(self, name)
            if values is not None:
                object.__setattr__(self, name, check_reals(name, values, 0.0))
                if len(getattr(self, name)) != self.K:
                    raise ConfigError(f"{name} has {len(values)} entries: it must have K={self.K}")
        check_real("beta_max", self.beta_max, 0.0, low_open=True)
        check_real("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        check_real("Delta", self.Delta, 0.0, low_open=True)
        check_int("rounds", self.rounds, 1)
        check_choice("learner", self.learner, LEARNERS + EXPERIENCE)
        check_choice("feedback", self.feedback, FEEDBACK_SETTINGS)
        if self.learner in LEARNERS and self.feedback != "auto":
            raise ConfigError(f"feedback={self.feedback!r} is not allowed with learner="
                              f"{self.learner!r}: it observes the upstream variance; the grid "
                              f"learners ({', '.join(EXPERIENCE)}) take feedback")
        if self.learner in EXPERIENCE:
            resolve_feedback(self.learner, self.feedback)
        check_int("grid_points", self.grid_points, 2)
        check_real("damping", self.damping, 0.0, 1.0, low_open=True)
        check_choice("observation", self.observation, OBSERVATIONS)
        if self.learner in EXPERIENCE and self.observation != "exact":
            raise ConfigError(f"observation={self.observation!r} is not allowed with learner="
                              f"{self.learner!r}: a grid learner observes costs, not the data")
        check_choice("prior", self.prior, PRIORS)
        check_int("subsequences", self.subsequences, 1, self.K)
        check_choice("split", self.split, SPLITS)
        check_real("tolerance", self.tolerance, 0.0, low_open=True)
        check_real("settle", self.settle, 0.0, low_open=True)
        check_int("replications", self.replications, 1)
        check_choice("sampling", self.sampling, SAMPLINGS)


class BASChainModel(Environment):
    """Users learn their noise in BAS-ordered (sub-)sequences; the theory is kept apart.

    Attributes:
        config: the validated configuration.
        beta: the users' private preferences (indexed by user).
        data: the users' vectors, ``(K, d)`` in ``[-Delta, Delta]``.
        sequences: per sub-sequence, the user indices in BAS order.
        users: the ``ChainUser`` agents, indexed like ``beta``.
    """

    def __init__(self, config: BASChainConfig, seed: int | np.random.SeedSequence | None = None,
                 data: NDArray | None = None) -> None:
        super().__init__(config, seed)
        c = config
        self.beta = (np.array(c.beta) if c.beta is not None
                     else self.rng.uniform(0.0, c.beta_max, c.K))
        bids = np.array(c.bids) if c.bids is not None else self.beta
        self.data = self._data(data)
        self.users = list(ChainUser.create_agents(
            self, c.K, beta=list(self.beta), bid=list(bids),
            sigma2=list(ldp_variances(self.beta)),  # before learning, everyone plays alone
            learner=None if c.learner in EXPERIENCE else make_learner(c.learner, c.damping)))
        groups = split_sequence(self.beta, c.subsequences, c.split, self.rng)
        self.sequences = [g[bas_order(bids[g], self.rng)] for g in groups]
        self.order = np.concatenate(self.sequences)
        self.experience = self._grid_learners() if c.learner in EXPERIENCE else None
        for seq in self.sequences:
            if c.prior == "bids" and seq.size > 1:
                # Mechanism 1: the followers top up to Theorem 1's level of their bids
                self.users[seq[0]].belief = float(nash_equilibrium(bids[seq[1:]])[0])
        self._predicted = {
            name: np.concatenate([f(self.beta[seq]) for seq in self.sequences])
            for name, f in (("nash", nash_equilibrium), ("ldp", ldp_variances),
                            ("optimum", central_optimum))}
        self.datacollector = mesa.DataCollector(
            model_reporters={"distance": BASChainModel.distance,
                             "total_variance": lambda m: float(m.learned().sum())},
            agent_reporters={"sigma2": "sigma2"})

    def _data(self, data: NDArray | None) -> NDArray:
        c = self.config
        if data is None:
            return self.rng.uniform(-c.Delta, c.Delta, (c.K, c.d))
        x = np.asarray(data, dtype=float)
        if x.shape != (c.K, c.d):
            raise ConfigError(f"data has shape {x.shape}: it must be (K, d) = ({c.K}, {c.d})")
        if np.any(np.abs(x) > c.Delta):
            raise ConfigError(f"data has entries outside [-Delta, Delta] = [-{c.Delta}, {c.Delta}]")
        return x

    def _grid_learners(self) -> GridLearner:
        """The users' learners from experience, one row per user in sequence order: each
        sub-sequence is a BAS grid game (``mechanisms.learning_games.BASGame``) on one grid
        over ``[0, m max beta]``. Their draws and the releases they observe have their own
        streams, so the continuous learners' runs are unchanged."""
        c = self.config
        base = self.rng.bit_generator.seed_seq
        scales, self._act_rng, self._release_rng = (generator(child(base, k))
                                                    for k in (1, 2, 3))
        grid = BASGame(self.beta, c.d, c.grid_points).grid
        self.games = [BASGame(self.beta[seq], c.d, grid=grid) for seq in self.sequences]
        span, low, high = (np.concatenate(part) for part in
                           zip(*(g.scales(scales) for g in self.games), strict=True))
        return make_grid_learner(c.learner, grid, c.K, c.rounds, c.resolved_feedback, span, low,
                                 high)

    # --- protocol -------------------------------------------------------------------------
    def step(self) -> None:
        """One learning round: every sub-sequence runs Stage 3 of BAS once (a grid learner:
        every user draws its variance, the chains run, each learns from its feedback)."""
        if self.experience is not None:
            self._learn_from_experience()
        else:
            for seq in self.sequences:
                self._play(seq)
        self.datacollector.collect(self)

    def _learn_from_experience(self) -> None:
        values = self.experience.act(self._act_rng)  # in sequence order
        parts = [values[s] for s in self._slices()]
        if self.experience.feedback == "full":
            feedback = np.concatenate([g.costs(v) for g, v in zip(self.games, parts,
                                                                   strict=True)])
        else:
            feedback = np.concatenate([g.realized(v, self._release_rng)
                                       for g, v in zip(self.games, parts, strict=True)])
        self.experience.observe(feedback)
        for k, v in zip(self.order, values, strict=True):
            self.users[k].sigma2 = float(v)

    def _play(self, seq: NDArray) -> None:
        first = self.users[seq[0]]
        first.lead()
        upstream = first.sigma2
        estimated = self.config.observation == "estimated"
        if estimated:
            z = self.rng.standard_normal((seq.size, self.config.d))
            message = self.data[seq[0]] + np.sqrt(first.sigma2) * z[0]
        for position, k in enumerate(seq[1:], start=1):
            user = self.users[k]
            if estimated:
                user.follow_estimate(estimate_noise_variance(message, position, self.config.Delta))
                message = message + self.data[k] + np.sqrt(user.sigma2) * z[position]
            else:
                user.follow(upstream)
            upstream += user.sigma2
        first.observe_outcome(upstream, self.config.settle)

    # --- observation and theory ---------------------------------------------------------------
    def learned(self) -> NDArray:
        """The users' current variances in sequence order (sub-sequences concatenated)."""
        return np.array([self.users[k].sigma2 for k in self.order])

    def predicted(self) -> dict[str, NDArray]:
        """The theory's profiles in the same order: NE (Theorem 1), LDP (eq 26), optimum."""
        return dict(self._predicted)

    def profiles(self) -> dict[str, NDArray]:
        """Learned profile (``chained``) and the theory's, all in sequence order."""
        return {"chained": self.learned(), **self.predicted()}

    def distance(self) -> float:
        """Largest deviation from the NE, relative to the largest NE variance."""
        nash = self._predicted["nash"]
        return float(np.max(np.abs(self.learned() - nash)) / max(nash.max(), 1e-300))

    def grid_distance(self) -> float | None:
        """A grid learner's last iterate (each user's most likely variance; ``learned`` is what
        they played) against its grid game's NE (each user best-responding on the grid to the
        levels above it, ``BASGame``), relative to the largest NE variance;
        ``None`` for the continuous learners."""
        if self.experience is None:
            return None
        nash = np.concatenate([g.references()["nash"] for g in self.games])
        last = self.experience.current()  # the last iterate, in sequence order
        return float(np.max(np.abs(last - nash)) / max(nash.max(), 1e-300))

    def rounds_to_converge(self) -> int | None:
        """First round from which the distance stays below ``tolerance``; None if never."""
        return _first_round_within(self.results()["distance"].to_numpy(), self.config.tolerance)

    def rounds_to_settle(self) -> int | None:
        """First round from which no user's variance moves by more than ``tolerance`` (relative
        to the largest variance); the end point of learning, whether or not it is the NE."""
        wide = self.datacollector.get_agent_vars_dataframe()["sigma2"].unstack().to_numpy()
        moves = np.abs(np.diff(wide, axis=0)).max(axis=1) / max(float(wide.max()), 1e-300)
        first = _first_round_within(moves, self.config.tolerance)  # moves[i]: round i+1 -> i+2
        return None if first is None else first + 1

    def costs(self, sigma2: NDArray) -> NDArray:
        """Each user's cost (eq 14) within its own sub-sequence, in sequence order."""
        return np.concatenate([user_costs(sigma2[part], self.beta[seq])
                               for part, seq in zip(self._slices(), self.sequences, strict=True)])

    def epsilon(self, sigma2: NDArray, paper: bool = False) -> float:
        """The release's privacy budget: the worst user's, from the noise on its data (the
        prefix of the chain up to it), exact (analytic Gaussian) or as the paper computes it."""
        c = self.config
        prefix = np.concatenate([np.cumsum(sigma2[s]) for s in self._slices()])
        return float(np.max(chain_epsilon(prefix, c.d, c.Delta, c.delta, paper)))

    def _slices(self) -> list[slice]:
        ends = np.cumsum([seq.size for seq in self.sequences])
        return [slice(e - seq.size, e) for e, seq in zip(ends, self.sequences, strict=True)]

    def monte_carlo(self, replications: int | None = None) -> dict[str, NDArray]:
        """Squared l2 error of the server's mean per replication, for every profile."""
        reps = self.config.replications if replications is None else replications
        x = self.data[self.order]
        return {name: chain_squared_errors(x, sigma2, reps, self.rng,
                                           sampling=self.config.sampling)
                for name, sigma2 in self.profiles().items()}


def _first_round_within(series: NDArray, tolerance: float) -> int | None:
    """1-based index from which ``series`` stays at or below ``tolerance``; None if never."""
    above = np.flatnonzero(series > tolerance)
    if above.size == series.size:
        return None
    return int(above[-1] + 2) if above.size else 1
