"""Configuration of the environments: the validators (from :mod:`privgames.mechanisms.validation`,
re-exported for environments and plugins) and each population's :class:`Footprint`."""

from __future__ import annotations

from dataclasses import dataclass

from privgames.mechanisms.validation import (
    Allowed,
    ConfigError,
    check_bool,
    check_choice,
    check_grid,
    check_int,
    check_real,
    check_reals,
)

__all__ = ["Allowed", "ConfigError", "Footprint", "check_bool", "check_choice", "check_grid",
           "check_int", "check_real", "check_reals"]


@dataclass(frozen=True)
class Footprint:
    """What one population of a configuration costs, estimated before it runs.

    Attributes:
        peak_bytes: the largest memory it holds at once (its biggest arrays; kernels that
            chunk count one chunk).
        work: elementary operations (random draws, node-steps, gradient terms), for the work
            budget and the progress bar.
        driver: the parameter that drives ``peak_bytes`` (named in a refusal).
    """

    peak_bytes: float
    work: float
    driver: str
