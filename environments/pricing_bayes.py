"""The pricing game under incomplete information: clients with binary private types learn which
type to report and how much noise to add, on their expected costs (section IV).

Each client draws its type (``alpha_L`` with probability ``eta``); the common knowledge is the
distribution. Every round each client best-responds, report and noise, to the symmetric
strategy the clients of each type currently play (clients of one type face the same problem,
so they move together); the server's mechanism (Definition 5, constants derived in
``privgames.mechanisms.pricing_bayes``) is ``full`` (penalties, rewards, compensation),
``penalties`` (no rewards) or ``none``. Paper: ``papers/pricing-fl-noise.txt``, section IV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mesa
import numpy as np
from numpy.typing import NDArray

from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
)
from privgames.environments.streams import Seed
from privgames.mechanisms.pricing import AGGREGATIONS
from privgames.mechanisms.pricing_bayes import (
    TRUTHFUL,
    BinaryGame,
    Mechanism,
    best_noise,
    design,
    deviation_gains,
    expected_social_cost,
)

MECHANISMS = ("full", "penalties", "none")


@dataclass(frozen=True)
class BayesConfig:
    """Parameters of the incomplete-information game.

    Attributes:
        N: clients (>= 2). eta: probability of the low type, in (0, 1).
        alpha_L, alpha_H: the two sensitivities, ``0 < alpha_L < alpha_H < 1``.
        kappa, L_F, c, S: the game's constants (> 0). aggregation: ``mle`` or ``mean``.
        mechanism: ``full`` (Definition 5 as derived), ``penalties`` (without rewards) or
            ``none`` (no prices; the MLE weights still follow the reports).
        rounds: best-response rounds at most; damping: weight of the best response in the
            move of the noise (log scale), in (0, 1]; tolerance: relative change that counts
            as settled.
    """

    N: int = 20
    eta: float = 0.5
    alpha_L: float = 0.25
    alpha_H: float = 0.75
    kappa: float = 1.0
    L_F: float = 1.0
    c: float = 1.0
    S: float = 1.0
    aggregation: str = "mean"
    mechanism: str = "full"
    rounds: int = 100
    damping: float = 0.5
    tolerance: float = 1e-7

    def footprint(self) -> Footprint:
        """Expected costs over the ``N`` counts of the others' types on ``121`` noise
        candidates; an agent per client. Work: those evaluations per round."""
        peak = 8.0 * 121 * self.N * 6 + 2000.0 * self.N
        return Footprint(peak, self.rounds * 4.0 * 450 * self.N, "N")

    def __post_init__(self) -> None:
        check_int("N", self.N, 2)
        check_real("eta", self.eta, 0.0, 1.0, low_open=True, high_open=True)
        check_real("alpha_L", self.alpha_L, 0.0, 1.0, low_open=True, high_open=True)
        check_real("alpha_H", self.alpha_H, 0.0, 1.0, low_open=True, high_open=True)
        if self.alpha_L >= self.alpha_H:
            raise ConfigError(f"alpha_L={self.alpha_L!r} is out of range: alpha_L must be "
                              f"below alpha_H={self.alpha_H!r}")
        for name in ("kappa", "L_F", "c", "S"):
            check_real(name, getattr(self, name), 0.0, low_open=True)
        check_choice("aggregation", self.aggregation, AGGREGATIONS)
        check_choice("mechanism", self.mechanism, MECHANISMS)
        check_int("rounds", self.rounds, 1)
        check_real("damping", self.damping, 0.0, 1.0, low_open=True)
        check_real("tolerance", self.tolerance, 0.0, low_open=True)

    def game(self) -> BinaryGame:
        return BinaryGame(self.N, self.alpha_L, self.alpha_H, self.eta, self.kappa, self.L_F,
                          self.c, self.S, self.aggregation)


class TypedClient(mesa.Agent):
    """A client with a private binary type; it reports a type and chooses its noise.

    Attributes:
        type: 0 (low sensitivity ``alpha_L``) or 1 (``alpha_H``), private.
        report: the type it reports; sigma: its noise.
    """

    def __init__(self, model: mesa.Model, type: int) -> None:  # noqa: A002 - the paper's word
        super().__init__(model)
        self.type = int(type)
        self.report = self.type
        self.sigma = float(model.design["target"][self.type])

    def respond(self, rho: tuple[int, int], s: NDArray) -> None:
        """Best response on expected costs: for each report its best noise, then the cheaper
        report (the current one unless the other is cheaper by more than rounding); the noise
        moves ``damping`` of the way (log scale). Clients of one type face one problem, which
        the model solves once per type and round (``model.best_move``)."""
        m = self.model
        report, sigma = m.best_move(self.type, self.report, rho, s)
        lam = m.config.damping
        self.sigma = math.exp((1 - lam) * math.log(self.sigma) + lam * math.log(sigma))
        self.report = report


class BayesianPricingModel(Environment):
    """Clients learn their reports and noise under a chosen mechanism.

    Attributes:
        design: the derived mechanism (target noise, penalties, rewards, feasibility, ``D``).
        mechanism: the prices in force (per ``config.mechanism``).
        clients: the ``TypedClient`` agents.
    """

    def __init__(self, config: BayesConfig, seed: Seed = None) -> None:
        super().__init__(config, seed)
        self.game = config.game()
        self.design = design(self.game)
        full = self.design["mechanism"]
        self.mechanism = {"full": full,
                          "penalties": Mechanism(beta=full.beta, target=full.target),
                          "none": Mechanism(target=full.target)}[config.mechanism]
        types = (self.rng.random(config.N) >= config.eta).astype(int)
        self.clients = TypedClient.create_agents(self, config.N, type=list(types))
        self.strategy = (TRUTHFUL, np.array(self.design["target"], dtype=float))
        self.change = math.nan
        self.datacollector = mesa.DataCollector(model_reporters={
            "report_L": lambda m: m.strategy[0][0], "report_H": lambda m: m.strategy[0][1],
            "sigma_L": lambda m: float(m.strategy[1][0]),
            "sigma_H": lambda m: float(m.strategy[1][1]),
            "expected_social_cost": lambda m: m.expected_social_cost(),
            "change": lambda m: m.change})

    def best_move(self, t: int, current: int, rho: tuple[int, int],
                  s: NDArray) -> tuple[int, float]:
        """A type-``t`` client's best (report, noise) against ``(rho, s)``, cached per round."""
        key = (t, current)
        if key not in self._moves:
            options = [best_noise(self.game, self.mechanism, t, a, rho, s) for a in (0, 1)]
            other = 1 - current
            cheaper = options[other][1] < options[current][1] - 1e-12 * abs(options[current][1])
            report = other if cheaper else current
            self._moves[key] = (report, options[report][0])
        return self._moves[key]

    def step(self) -> None:
        """Every client best-responds to the current symmetric strategy; the strategy of each
        type becomes its clients' (a type with no client in this population moves as its
        clients would)."""
        rho, s = self.strategy
        self._moves: dict[tuple[int, int], tuple[int, float]] = {}
        self.clients.do("respond", rho, s)
        new_rho, new_s = list(rho), s.copy()
        for t in (0, 1):
            group = self.clients.select(lambda c, t=t: c.type == t)
            if len(group):
                new_rho[t], new_s[t] = group[0].report, group[0].sigma
            else:
                ghost = TypedClient(self, t)  # a would-be client of the absent type
                ghost.report, ghost.sigma = rho[t], s[t]
                ghost.respond(rho, s)
                new_rho[t], new_s[t] = ghost.report, ghost.sigma
                ghost.remove()
        self.change = float(np.max(np.abs(new_s / s - 1)) + (tuple(new_rho) != rho))
        self.strategy = (tuple(new_rho), new_s)
        self.datacollector.collect(self)
        self.running = self.change > self.config.tolerance

    def truthful(self) -> bool:
        return self.strategy[0] == TRUTHFUL

    def expected_social_cost(self) -> float:
        """Expected social cost of the current strategy if reports are truthful (the
        mechanism's prices are transfers); ``nan`` otherwise."""
        return expected_social_cost(self.game, self.strategy[1]) if self.truthful() else math.nan

    def deviation_gains(self) -> NDArray:
        """Gain per type from misreporting against the others' current (truthful) strategy."""
        return deviation_gains(self.game, self.mechanism, self.strategy[1])

    def predicted(self) -> dict:
        """The derived mechanism and the optimum it is meant to implement."""
        return {**self.design, "optimal_social_cost":
                expected_social_cost(self.game, self.design["target"])}
