"""Sum queries under a budget sequence: the total noise of Table 2 and the collusion attack of
section 6.1 (``papers/budget-allocation-series.txt``).

Queries are sensitivity-normalised (section 5.2.1: ``Delta f = 1``), so the ``i``-th answer
carries ``Lap(1 / epsilon_i)`` noise, variance ``2 / epsilon_i^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privgames.agents.budget_agents import ColludingUser
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_bool,
    check_choice,
    check_int,
    check_real,
)
from privgames.environments.streams import Seed, generator, spawn
from privgames.mechanisms.budget import allocate, expected_mse, parse_method, protect

POOLS = ("query", "all")


#: Longest budget sequence: validation builds the sequence, so its length is bounded before
#: the memory guard sees the run (each budget would be at most 1e-6 of the total).
MAX_SEQUENCE = 10**6


def check_series(n_name: str, n: int, epsilon: float, r: float | None, t: float | None,
                 U_s: float | None) -> None:
    """The shared allocation parameters: ``1 <= n <= 10^6``, ``epsilon > 0``, ``r``, ``t`` in
    (0, 1), ``U_s > 0`` (its Lemma 3 interval is checked where the sequence is built)."""
    check_int(n_name, n, 1, MAX_SEQUENCE)
    check_real("epsilon", epsilon, 0.0, low_open=True)
    for name, value in (("r", r), ("t", t)):
        if value is not None:
            check_real(name, value, 0.0, 1.0, low_open=True, high_open=True)
    if U_s is not None:
        check_real("U_s", U_s, 0.0, low_open=True)


@dataclass(frozen=True)
class NoiseConfig:
    """Table 2: ``rounds`` rounds (the paper's ``l``) of ``N`` sum queries under ``strategy``.

    Attributes:
        strategy: an allocation strategy (``privgames.mechanisms.budget.STRATEGIES``).
        N: queries per round; epsilon: the total budget.
        U_s: the noise bound of the ``ac-`` strategies: a number, or ``[[N, U_s], ...]`` pairs
            (Table 2 pairs ``N = 20, 50, 100`` with ``U_s = 30, 95, 200``); an ``N`` without a
            pair gets the middle of Lemma 3's interval.
        r, t: series parameters (default: eq 14 and eq 16).
        rounds: rounds averaged (eq 37).
    """

    strategy: str = "avg"
    N: int = 20
    epsilon: float = 1.0
    U_s: float | tuple | None = None
    r: float | None = None
    t: float | None = None
    rounds: int = 100

    def __post_init__(self) -> None:
        check_int("N", self.N, 1, MAX_SEQUENCE)
        if isinstance(self.U_s, list | tuple):
            pairs = []
            for i, pair in enumerate(self.U_s):
                if not isinstance(pair, list | tuple) or len(pair) != 2:
                    raise ConfigError(f"U_s[{i}]={pair!r} is not allowed: U_s must be a number "
                                      "or a list of [N, U_s] pairs")
                pairs.append((check_int(f"U_s[{i}][0]", pair[0], 1),
                              check_real(f"U_s[{i}][1]", pair[1], 0.0, low_open=True)))
            object.__setattr__(self, "U_s", tuple(pairs))
        check_series("N", self.N, self.epsilon, self.r, self.t, self.us_for_N())
        check_int("rounds", self.rounds, 1)
        self.budgets()  # validates the strategy and U_s (Lemma 3)

    def us_for_N(self) -> float | None:
        """The ``U_s`` that applies at this ``N``."""
        if isinstance(self.U_s, tuple):
            return dict(self.U_s).get(self.N)
        return self.U_s

    def budgets(self) -> NDArray:
        return allocate(self.strategy, self.N, self.epsilon, self.r, self.t, self.us_for_N(), "N")

    def footprint(self) -> Footprint:
        """The ``(rounds, N)`` noise block; work: its draws."""
        return Footprint(16.0 * self.rounds * self.N, float(self.rounds * self.N), "rounds")


def round_mse(config: NoiseConfig, seed: Seed) -> NDArray:
    """Eq (37): each round's total squared noise ``sum_i N_A(i, epsilon)^2``, ``(rounds,)``."""
    noise = generator(seed).laplace(0.0, 1.0 / config.budgets(), (config.rounds, config.N))
    return np.sum(noise * noise, axis=1)


@dataclass(frozen=True)
class CollusionConfig:
    """Section 6.1: ``users`` colluders each submit the same ``queries`` sum queries under their
    own total budget ``epsilon`` and pool their noisy answers.

    Attributes:
        method: the strategy, optionally with a protection (``geo/random``, ``geo/perturb``,
            ``geo/noisy-n``); without one the colluders know every budget.
        users: colluders (the paper's ``m``); queries: queries each (``w``).
        epsilon, U_s, r, t: each colluder's total budget and the strategy's parameters
            (``privgames.mechanisms.budget.allocate``).
        pool: ``query`` (each query's ``m`` answers) or ``all`` (all ``w m`` answers, when the
            queries are semantically the same).
        trials: independent attacks; epsilon_n: the budget of noisy-n's ``Lap(1/epsilon_n)``
            (default ``epsilon``); positive: noisy-n adds ``|eta|`` (the paper's default).
    """

    method: str = "geo"
    users: int = 10
    queries: int = 20
    epsilon: float = 1.0
    U_s: float | None = None
    r: float | None = None
    t: float | None = None
    pool: str = "query"
    trials: int = 2000
    epsilon_n: float | None = None
    positive: bool = True

    def __post_init__(self) -> None:
        check_series("queries", self.queries, self.epsilon, self.r, self.t, self.U_s)
        check_int("users", self.users, 1)
        check_int("trials", self.trials, 1)
        check_choice("pool", self.pool, POOLS)
        if self.epsilon_n is not None:
            check_real("epsilon_n", self.epsilon_n, 0.0, low_open=True)
        check_bool("positive", self.positive)
        strategy, _ = parse_method(self.method)
        allocate(strategy, self.queries, self.epsilon, self.r, self.t, self.U_s, "queries")

    def footprint(self) -> Footprint:
        """About six ``(trials, users, queries)`` arrays; work: the answers' draws."""
        cells = float(self.trials) * self.users * self.queries
        return Footprint.of(self, [(("trials", "users", "queries"), 48.0 * cells)], cells)


class CollusionModel(Environment):
    """Colluding users answer their queries under their (protected) budget sequences and pool
    the answers (one step: ``trials`` independent attacks at once).

    Without protection the budgets are predictable (section 6.1), so the coalition weights each
    answer by its precision ``epsilon^2 / 2`` (the best unbiased linear pool); under a
    protection it does not know which budget went with which answer and averages. It attacks
    the query with the largest announced budget.

    Attributes:
        base: the announced sequence; budgets: ``(trials, users, queries)`` after protection;
        answers: the noisy answers (true answers 0, so an answer is its noise);
        estimate: the coalition's pooled estimates, ``(trials, queries)`` (``pool=query``) or
        ``(trials, 1)`` (``all``); target: the attacked query.
    """

    def __init__(self, config: CollusionConfig, seed: Seed = None) -> None:
        own, protection_seed, noise_seed = spawn(seed, 3)
        super().__init__(config, own)
        c = config
        self.strategy, self.protection = parse_method(c.method)
        self.base = allocate(self.strategy, c.queries, c.epsilon, c.r, c.t, c.U_s, "queries")
        rows = np.broadcast_to(self.base, (c.trials * c.users, c.queries))
        self.budgets = protect(rows, self.protection, generator(protection_seed),
                               strategy=self.strategy, epsilon_n=c.epsilon_n,
                               positive=c.positive, r=c.r, t=c.t, U_s=c.U_s
                               ).reshape(c.trials, c.users, c.queries)
        self._noise = generator(noise_seed)
        self.target = int(np.argmax(self.base)) if c.pool == "query" else 0
        self.users = ColludingUser.create_agents(self, c.users, index=list(range(c.users)))
        self.answers = np.zeros_like(self.budgets)
        self.estimate = np.zeros((c.trials, c.queries if c.pool == "query" else 1))

    def rounds_left(self) -> int:
        return 1

    def _weights(self) -> NDArray:
        known = self.protection == "none"
        return self.budgets**2 if known else np.ones_like(self.budgets)

    def _pooled(self, values: NDArray) -> NDArray:
        axes = (1,) if self.config.pool == "query" else (1, 2)
        w = self._weights()
        return np.sum(w * values, axis=axes) / np.sum(w, axis=axes)

    def step(self) -> None:
        """Every user answers (vectorised), then the coalition pools."""
        self.answers = self._noise.laplace(0.0, 1.0 / self.budgets)
        est = self._pooled(self.answers)
        self.estimate = est if est.ndim == 2 else est[:, None]

    def squared_error(self) -> NDArray:
        """The attacked query's squared error in each trial ``(trials,)``."""
        return self.estimate[:, self.target] ** 2

    def conditional_mse(self) -> NDArray:
        """What the realised budgets predict for the attacked query in each trial: the pool's
        variance ``sum_j w_j^2 2/eps_j^2 / (sum_j w_j)^2`` ``(trials,)``."""
        axes = (1,) if self.config.pool == "query" else (1, 2)
        w = self._weights()
        var = np.sum(w * w * 2.0 / self.budgets**2, axis=axes) / np.sum(w, axis=axes) ** 2
        return var if var.ndim == 1 else var[:, self.target]

    def predicted(self) -> dict:
        """The attack's expected squared error (averaged over the protections' randomness),
        and one honest answer's at the same query under the average strategy."""
        c = self.config
        return {"attack_mse": float(np.mean(self.conditional_mse())),
                "single_answer_mse_avg": 2.0 * (c.queries / c.epsilon) ** 2,
                "expected_total_mse": float(expected_mse(self.base))}

