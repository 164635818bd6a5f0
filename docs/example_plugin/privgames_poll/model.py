"""The poll as a Mesa model on privgames' environment surface."""

from __future__ import annotations

from dataclasses import dataclass

import mesa
import numpy as np

from privgames.environments.base import Environment
from privgames.environments.config import check_int, check_real
from privgames_poll.mechanism import equilibrium_scale, mean_mse, respondent_cost


@dataclass(frozen=True)
class PollConfig:
    """Attributes: n respondents (>= 2); a_max: privacy weights drawn from U(0, a_max];
    Delta: answer range; rounds: learning rounds; step: the learners' relative step;
    replications: noisy polls drawn at the end."""

    n: int = 20
    a_max: float = 1.0
    Delta: float = 1.0
    rounds: int = 60
    step: float = 0.5
    replications: int = 2000

    def __post_init__(self) -> None:
        check_int("n", self.n, 2)
        check_real("a_max", self.a_max, 0.0, low_open=True)
        check_real("Delta", self.Delta, 0.0, low_open=True)
        check_int("rounds", self.rounds, 1)
        check_real("step", self.step, 0.0, 1.0, low_open=True)
        check_int("replications", self.replications, 1)


class Respondent(mesa.Agent):
    """A respondent with a private weight ``a``; it learns its scale ``b`` from the cost it
    observes, by a multiplicative search that keeps a move only when the cost fell."""

    def __init__(self, model: mesa.Model, index: int, a: float) -> None:
        super().__init__(model)
        self.index, self.a, self.b, self.rate = index, float(a), 1.0, model.config.step

    def learn(self) -> None:
        m = self.model
        now = m.cost_of(self, self.b)
        for trial in (self.b * (1 + self.rate), self.b / (1 + self.rate)):
            if m.cost_of(self, trial) < now:
                self.b = trial
                return
        self.rate /= 2  # neither direction helps: look closer


class PollModel(Environment):
    """Respondents learn their noise; the theory is :func:`equilibrium_scale`."""

    def __init__(self, config: PollConfig, seed=None) -> None:
        super().__init__(config, seed)
        a = self.rng.uniform(0.0, config.a_max, config.n) + 1e-9
        self.respondents = Respondent.create_agents(self, config.n, index=list(range(config.n)),
                                                    a=list(a))
        self.datacollector = mesa.DataCollector(model_reporters={
            "distance": lambda m: float(np.max(np.abs(m.scales() / m.predicted()["b"] - 1)))})

    def scales(self) -> np.ndarray:
        return np.array(self.respondents.get("b"))

    def cost_of(self, who: Respondent, b: float) -> float:
        """``who``'s cost if it played ``b`` while the others keep theirs."""
        profile = self.scales()
        profile[who.index] = b
        return float(respondent_cost(profile, who.a, self.config.Delta)[who.index])

    def step(self) -> None:
        self.respondents.shuffle_do("learn")
        self.datacollector.collect(self)

    def predicted(self) -> dict:
        b = equilibrium_scale(self.respondents.get("a"), self.config.Delta)
        return {"b": b, "mse": mean_mse(b)}

    def poll_errors(self) -> np.ndarray:
        """Squared error of the published mean in ``replications`` noisy polls."""
        noise = self.rng.laplace(0.0, self.scales(), (self.config.replications, self.config.n))
        return noise.mean(axis=1) ** 2
