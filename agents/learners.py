"""Learning rules: map an agent's current strategy and its best-response target to its next one.

A learner never sees the predicted equilibrium; the agent computes its target from its own type
and what the protocol lets it observe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from privgames.mechanisms.validation import ConfigError


class Learner(Protocol):
    """Chooses the next strategy from the current one and the current best response."""

    def update(self, current: float, target: float) -> float: ...


@dataclass(frozen=True)
class ExactBestResponse:
    """Play the best response to the latest observation."""

    def update(self, current: float, target: float) -> float:
        return target


@dataclass(frozen=True)
class DampedBestResponse:
    """Move a fraction ``rate`` of the way towards the best response (0 < rate <= 1)."""

    rate: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ConfigError(f"damping={self.rate!r} is out of range: damping must lie in (0, 1]")

    def update(self, current: float, target: float) -> float:
        return current + self.rate * (target - current)


LEARNERS = ("best_response", "damped")


def make_learner(name: str, damping: float = 0.5) -> Learner:
    """Build a learner by name: ``best_response`` or ``damped`` (with ``damping``)."""
    if name == "best_response":
        return ExactBestResponse()
    if name == "damped":
        return DampedBestResponse(damping)
    raise ConfigError(f"learner={name!r} is not allowed: learner must be one of {LEARNERS}")
