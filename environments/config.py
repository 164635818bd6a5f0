"""Configuration of the environments: the validators (from :mod:`privgames.mechanisms.validation`,
re-exported for environments and plugins) and each population's :class:`Footprint`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

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
           "check_int", "check_real", "check_reals", "footprint_of"]


@dataclass(frozen=True)
class Footprint:
    """What one population of a configuration costs, estimated before it runs.

    Attributes:
        peak_bytes: the largest memory it holds at once (its biggest arrays; kernels that
            chunk count one chunk).
        work: elementary operations (random draws, node-steps, gradient terms), for the work
            budget and the progress bar.
        driver: the parameter that drives ``peak_bytes`` (named in a refusal).
        exchanges: the driver's round trips to its Ray shards (0 in process), for the
            estimate of a run's time.
    """

    peak_bytes: float
    work: float
    driver: str
    exchanges: float = 0.0

    @classmethod
    def of(cls, config: Any, terms: list[tuple[tuple[str, ...], float]],
           work: float) -> Footprint:
        """The footprint whose memory is the sum of ``terms``: each the bytes of arrays sized
        by the product of some parameters. The refusal names the largest term's parameter
        that the user raised most above its default (``agents x rounds`` at 10x the default
        agents names ``agents``, at 10x the default rounds ``rounds``)."""
        names, _ = max(terms, key=lambda t: t[1])
        defaults = {f.name: f.default for f in dataclasses.fields(config)}
        driver = max(names, key=lambda n: float(getattr(config, n)) / float(defaults[n]))
        return cls(sum(b for _, b in terms), work, driver)

    @classmethod
    def assumed(cls, config: Any) -> Footprint:
        """A conservative footprint for a configuration that gives none (a plug-in without
        ``footprint()``): its integer parameters are counts, the two largest size an array of
        float64, and the work is all of them multiplied."""
        counts = sorted(((v, f.name) for f in dataclasses.fields(config)
                         if isinstance(v := getattr(config, f.name), int)
                         and not isinstance(v, bool)), reverse=True)
        if not counts:
            return cls(0.0, 1.0, "")
        sizes = [max(float(v), 1.0) for v, _ in counts]
        return cls(8.0 * math.prod(sizes[:2]), math.prod(sizes), counts[0][1])


def footprint_of(config: Any) -> Footprint:
    """``config.footprint()``, or :meth:`Footprint.assumed` when it gives none."""
    return config.footprint() if hasattr(config, "footprint") else Footprint.assumed(config)
