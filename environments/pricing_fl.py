"""The pricing FL game: clients learn their noise by best response, with or without prices.

Clients are Mesa agents over one noise array; each round every client (at once, or in turn in
a random order) moves toward its global best response to what it observes. The theory (eq 10,
eq 11, the true social optimum, the corrected penalties) comes from
``privgames.mechanisms.pricing`` and is only used to measure the distance.
Paper: ``papers/pricing-fl-noise.txt``, sections II-III.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.agents.fl_client import FLClient
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_bool,
    check_choice,
    check_int,
    check_real,
    check_reals,
)
from privgames.environments.streams import Seed, generator, spawn
from privgames.mechanisms.pricing import (
    AGGREGATIONS,
    aggregate_parts,
    compensation,
    equilibrium_noise,
    expected_penalty,
    global_best_response,
    is_equilibrium,
    optimal_noise,
    penalty_coefficients,
    reference_scale,
    rest_from_total,
    rest_of_aggregate,
    scale_from_logs,
    social_cost,
    social_optimum,
)

UPDATES = ("simultaneous", "sequential")
INFORMATION = ("complete", "incomplete")


@dataclass(frozen=True)
class PricingConfig:
    """Parameters of one population of the pricing game.

    Attributes:
        N: clients (>= 2).
        alpha: the clients' sensitivities (N numbers in (0, 1)); ``None`` draws them from a
            normal with ``alpha_mean`` and ``alpha_std``, clipped to ``[alpha_floor,
            1 - alpha_floor]`` (the first-order conditions need ``alpha`` inside (0, 1)).
        alpha_mean, alpha_std: mean and standard deviation of the drawn sensitivities.
        alpha_floor: the drawn sensitivities are clipped to ``[alpha_floor, 1 - alpha_floor]``.
        kappa, L_F, c, S: the loss bound's constant and smoothness (eq 9), the Gaussian
            mechanism's constant and sensitivity (eq 4); all > 0.
        pricing: charge Definition 4's prices (with the corrected coefficients).
        aggregation: ``mle`` (eq 8) or ``mean`` (eq 7).
        information: ``complete`` (section III) or ``incomplete`` (section IV: binary types
            ``alpha_L < alpha_H`` with ``P(alpha_L) = eta``; run by
            ``privgames.environments.pricing_bayes``, ``pricing`` choosing the full derived
            mechanism or none).
        rounds: best-response rounds at most (the run stops once no client moves by more
            than ``tolerance``); ``update``: ``sequential`` (in turn, a random order each
            round: always reached an equilibrium here) or ``simultaneous`` (all at once,
            vectorised, for large N; it can cycle under the MLE rule); ``damping``: weight of
            the best response in the move, in (0, 1], applied to the precision ``1 / sigma``.
        start: the clients' first noise: ``random`` (each client's own multiple of its eq (11)
            level, drawn log-uniformly in [1/10, 10], so the profile is not proportional to
            the answer), or one multiple for every client (a number > 0).
        tolerance: relative change below which the dynamics count as settled.
        replications: Monte-Carlo draws of the noisy updates for the payments.
        eta, alpha_L, alpha_H: incomplete information's prior ``P(alpha_L) = eta`` (in (0, 1))
            and its two types (``0 < alpha_L < alpha_H < 1``).
    """

    N: int = 10
    alpha: tuple[float, ...] | None = None
    alpha_mean: float = 0.5
    alpha_std: float = 0.2
    alpha_floor: float = 0.01
    kappa: float = 1.0
    L_F: float = 1.0
    c: float = 1.0
    S: float = 1.0
    pricing: bool = False
    aggregation: str = "mle"
    information: str = "complete"
    rounds: int = 100
    update: str = "sequential"
    damping: float = 0.5
    start: float | str = "random"
    tolerance: float = 1e-9
    replications: int = 2000
    eta: float = 0.5
    alpha_L: float = 0.25
    alpha_H: float = 0.75

    def footprint(self) -> Footprint:
        """The best-response grid ``(161, N)``, the agents and their per-round records, the
        payment draws ``(replications, N)``. Work: cost evaluations."""
        work = self.rounds * self.N * 450.0 + self.replications * self.N
        return Footprint.of(self, [(("N",), 8.0 * 161 * self.N * 4 + 3000.0 * self.N),
                                   (("rounds", "N"), 100.0 * self.rounds * self.N),
                                   (("replications", "N"), 24.0 * self.replications * self.N)],
                            work)

    def __post_init__(self) -> None:
        check_int("N", self.N, 2)
        if self.alpha is not None:
            values = check_reals("alpha", self.alpha, 0.0)
            for i, v in enumerate(values):  # at 0 or 1 a client's choice is degenerate
                check_real(f"alpha[{i}]", v, 0.0, 1.0, low_open=True, high_open=True)
            if len(values) != self.N:
                raise ConfigError(f"alpha has {len(values)} entries: it must have N={self.N}")
            object.__setattr__(self, "alpha", values)
        check_real("alpha_mean", self.alpha_mean, 0.0, 1.0)
        check_real("alpha_std", self.alpha_std, 0.0)
        check_real("alpha_floor", self.alpha_floor, 0.0, 0.5, low_open=True, high_open=True)
        drawn = {"alpha_mean": 0.5, "alpha_std": 0.2, "alpha_floor": 0.01}  # the defaults
        moved = [k for k, v in drawn.items() if getattr(self, k) != v]
        if self.alpha is not None and moved:  # pricing-fig1 sweeps alpha_std
            raise ConfigError(f"alpha={list(self.alpha)!r} fixes the clients' sensitivities, so "
                              f"{moved[0]}={getattr(self, moved[0])!r} (of the drawn ones) is not"
                              " used: give one of the two", "alpha")
        for name in ("kappa", "L_F", "c", "S"):
            check_real(name, getattr(self, name), 0.0, low_open=True)
        check_bool("pricing", self.pricing)
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        check_choice("information", self.information, INFORMATION)
        check_int("rounds", self.rounds, 1)
        check_choice("update", self.update, UPDATES)
        check_real("damping", self.damping, 0.0, 1.0, low_open=True)
        if self.start != "random":
            check_real("start", self.start, 0.0, low_open=True)
        check_real("tolerance", self.tolerance, 0.0, low_open=True)
        check_int("replications", self.replications, 1)
        if self.information == "incomplete":
            if self.alpha is not None:
                raise ConfigError("alpha is not allowed with information='incomplete': the "
                                  "clients' types are drawn from alpha_L, alpha_H and eta")
            self.bayes()  # validates eta and alpha_L < alpha_H

    def bayes(self):
        """The incomplete-information game with this configuration's shared parameters."""
        from privgames.environments.pricing_bayes import BayesConfig

        return BayesConfig(N=self.N, eta=self.eta, alpha_L=self.alpha_L, alpha_H=self.alpha_H,
                           kappa=self.kappa, L_F=self.L_F, c=self.c, S=self.S,
                           aggregation=self.aggregation,
                           mechanism="full" if self.pricing else "none", rounds=self.rounds,
                           damping=self.damping)


class ExactSum:
    """A sum kept exactly while terms are added and removed: every finite float is a whole
    multiple of 2^-1074, so the sum is kept as that whole number (a running float sum would
    drift, and the rest of an aggregate that one large part dominates would come out wrong,
    even negative)."""

    def __init__(self, terms: NDArray) -> None:
        self.units = sum(map(_units, terms.tolist()))

    def add(self, x: float) -> None:
        self.units += _units(x)

    def value(self) -> float:
        """The sum, correctly rounded (Python's integer division is)."""
        return self.units / _UNIT


_UNIT = 1 << 1074  # 2^1074: the smallest float's reciprocal


def _units(x: float) -> int:
    """``x`` (finite) in multiples of 2^-1074, exactly."""
    numerator, denominator = x.as_integer_ratio()
    return numerator << (1075 - denominator.bit_length())


class Turns:
    """What a client moving in turn reads of the profile, kept up to date move by move, so
    that a round of N moves costs O(N), not O(N^2): the exact sum of the aggregate's finite
    parts and the count of its infinite ones (:func:`rest_from_total`), the sum of the logs of
    the positive finite noise levels and their count (:func:`scale_from_logs`), and the
    smallest noise level (the damping's largest precision).

    Attributes:
        sigma: the model's profile (moves are written into it).
        parts: each client's part of the aggregate (:func:`aggregate_parts`), kept with it.
    """

    def __init__(self, sigma: NDArray, aggregation: str) -> None:
        self.sigma, self.aggregation = sigma, aggregation
        self.parts = parts = aggregate_parts(sigma, aggregation)
        finite = np.isfinite(parts)
        self.total, self.infinite = ExactSum(parts[finite]), int(np.sum(~finite))
        usable = np.isfinite(sigma) & (sigma > 0)
        self.logs, self.usable = ExactSum(np.log(sigma[usable])), int(np.sum(usable))
        self.smallest = float(np.min(sigma))

    def rest(self, i: int) -> NDArray:
        """Client ``i``'s view of the rest of the aggregate (:func:`rest_of_aggregate`)."""
        return rest_from_total(self.parts[i: i + 1], self.total.value(), self.infinite)

    def scale(self, game: tuple[float, ...]) -> float:
        """Where the best-response grid is centred (:func:`reference_scale`)."""
        return scale_from_logs(self.logs.value(), self.usable, *game)

    def move(self, i: int, new: float) -> None:
        """Client ``i`` takes noise level ``new``: the sums follow."""
        old, was = float(self.sigma[i]), float(self.parts[i])
        self.parts[i: i + 1] = aggregate_parts(np.array([new]), self.aggregation)
        for value, part, sign in ((old, was, -1), (new, float(self.parts[i]), 1)):
            if math.isfinite(part):
                self.total.add(sign * part)
            else:
                self.infinite += sign
            if math.isfinite(value) and value > 0:
                self.logs.add(sign * math.log(value))
                self.usable += sign
        self.sigma[i] = new
        if new < self.smallest:
            self.smallest = new
        elif old == self.smallest and new > old:  # the smallest moved up: look again
            self.smallest = float(np.min(self.sigma))


class PricingFLModel(Environment):
    """Clients learn their noise; the server aggregates and (optionally) charges prices.

    Attributes:
        config: the validated configuration.
        alpha: the clients' private sensitivities (the theory's input, not the agents').
        sigma: the clients' noise levels (``inf``: opted out), owned by the model.
        beta: each client's penalty coefficient (0 without pricing); ``q``: the compensation.
        clients: the ``FLClient`` agents (an ``AgentSet``, by index).
    """

    def __init__(self, config: PricingConfig, seed: Seed = None) -> None:
        own, self._payment_seed = spawn(seed, 2)
        super().__init__(config, own)
        c = config
        self.alpha = (np.array(c.alpha) if c.alpha is not None else np.clip(
            self.rng.normal(c.alpha_mean, c.alpha_std, c.N), c.alpha_floor, 1 - c.alpha_floor))
        self.game = (c.kappa, c.L_F, c.c, c.S)
        self._theory: dict[str, NDArray] | None = None
        interior = bool(np.all((self.alpha > 0) & (self.alpha < 1)))
        self.beta = (penalty_coefficients(self.alpha, *self.game, c.aggregation)
                     if c.pricing else np.zeros(c.N))
        if c.pricing and not interior:
            raise ConfigError("pricing needs every alpha_i inside (0, 1): the penalties are "
                              "built from eq (11), which has no interior solution otherwise")
        start = (optimal_noise(self.alpha, *self.game, c.aggregation) if interior
                 else np.ones(c.N))
        multiple = (np.exp(self.rng.uniform(-math.log(10), math.log(10), c.N))
                    if c.start == "random" else c.start)
        self.sigma = multiple * start
        self.q = compensation(self.beta, self.predicted()["target"]) if c.pricing else 0.0
        self.clients = FLClient.create_agents(self, c.N, index=list(range(c.N)),
                                              alpha=list(self.alpha))
        self.datacollector = mesa.DataCollector(
            model_reporters={"social_cost": PricingFLModel.social_cost,
                             "distance": PricingFLModel.distance,
                             "participants": lambda m: int(np.sum(np.isfinite(m.sigma))),
                             "change": lambda m: m.change},
            agent_reporters={"sigma": "sigma"})
        self.change = math.nan
        self.turns: Turns | None = None  # a round of moves in turn (``update="sequential"``)

    # --- what the clients observe ---------------------------------------------------------
    def observe_others(self) -> NDArray:
        """Each client's view of the rest of the aggregate, inferred from the published error
        scale ``Delta`` and its own noise (``Delta^-2 - sigma_i^-2`` for MLE, ``N^2 Delta^2 -
        sigma_i^2`` for the mean)."""
        return rest_of_aggregate(self.sigma, self.config.aggregation)

    def reference_scale(self) -> float:
        return reference_scale(self.sigma, *self.game)

    def damped(self, sigma: NDArray | float, target: NDArray | float,
               smallest: float | None = None) -> NDArray:
        """Move ``damping`` of the way to ``target`` in precision ``1/sigma`` (arrays, or
        scalars for one client; :func:`~privgames.mechanisms.pricing_kernels.damped`). A
        client whose best response is to opt out fades out (its precision shrinks by ``1 -
        damping`` a round) and counts as out once its precision is below ``1e-6`` of the
        largest client's (``1/smallest``, the smallest noise level of the profile when not
        given): leaving at once would let all clients leave together, a coordination failure
        of simultaneous moves."""
        from privgames.mechanisms.pricing_kernels import damped, damped_at

        smallest = float(np.min(self.sigma)) if smallest is None else smallest
        if np.ndim(target) == 0:  # one client: a compiled call on floats
            return damped_at(float(sigma), float(target), smallest, self.config.damping)
        with np.errstate(divide="ignore"):
            return damped(sigma, target, smallest, self.config.damping)

    # --- protocol ---------------------------------------------------------------------------
    def step(self) -> None:
        """One round: every client moves toward its global best response."""
        before = self.sigma.copy()
        c = self.config
        if c.update == "sequential":
            self.turns = Turns(self.sigma, c.aggregation)
            self.clients.shuffle_do("respond")
        else:
            target = global_best_response(self.observe_others(), self.alpha, self.beta, c.N,
                                          *self.game, c.aggregation, self.reference_scale())
            self.sigma = self.damped(self.sigma, target)
        with np.errstate(invalid="ignore"):
            rel = np.abs(np.where(before == self.sigma, 0.0, self.sigma / before - 1.0))
        self.change = float(np.max(rel))
        self.datacollector.collect(self)
        self.running = self.change > self.config.tolerance  # settled: nothing moves any more

    def rounds_to_settle(self) -> int | None:
        """First round after which no client's noise moves by more than ``tolerance``."""
        change = self.results()["change"].to_numpy()
        calm = np.flatnonzero(change > self.config.tolerance)
        if calm.size == change.size:
            return None
        return int(calm[-1] + 2) if calm.size else 1

    # --- measurement and theory -------------------------------------------------------------
    def social_cost(self) -> float:
        return social_cost(self.sigma, self.alpha, *self.game, self.config.aggregation)

    def distance(self) -> float:
        """Largest relative distance of the noise to the profile the setting predicts."""
        target = self.predicted()["target"]
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(np.where(self.sigma == target, 0.0, self.sigma / target - 1.0))
        return float(np.max(np.where(np.isnan(rel), np.inf, rel)))

    def predicted(self) -> dict[str, NDArray]:
        """Eq (10), eq (11), the true social optimum, and the target of the dynamics: eq (11)
        under pricing (what the penalties implement), eq (10) without."""
        if self._theory is None:
            c = self.config
            interior = bool(np.all((self.alpha > 0) & (self.alpha < 1)))
            nan = np.full(c.N, np.nan)
            eq10 = equilibrium_noise(self.alpha, *self.game, c.aggregation) if interior else nan
            eq11 = optimal_noise(self.alpha, *self.game, c.aggregation) if interior else nan
            self._theory = {"eq10": eq10, "eq11": eq11,
                            "optimum": social_optimum(self.alpha, *self.game, c.aggregation),
                            "target": eq11 if c.pricing else eq10}
        return self._theory

    def is_equilibrium(self) -> bool:
        """Every client at a global best response (prices included)."""
        return bool(np.all(is_equilibrium(self.sigma, self.alpha, *self.game,
                                          self.beta if self.config.pricing else None,
                                          self.config.aggregation)))

    def net_payments(self) -> NDArray:
        """Mean net payment over clients, ``mean_i P_i``, in each of ``replications`` rounds of
        noisy updates at the current profile (Definition 4; 0 without pricing)."""
        c = self.config
        if not c.pricing:
            return np.zeros(c.replications)
        rng = generator(self._payment_seed)
        noise = self.sigma * rng.standard_normal((c.replications, c.N))
        gap = noise - noise.mean(axis=1, keepdims=True)
        return (self.beta * gap**2).mean(axis=1) - self.q

    def expected_net_payment(self) -> float:
        """Ex-ante ``mean_i E[P_i]`` at the current profile (0 without pricing)."""
        if not self.config.pricing:
            return 0.0
        return float(np.mean(self.beta * expected_penalty(self.sigma)) - self.q)
