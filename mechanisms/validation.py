"""Validation at the boundary: every invalid value names the parameter, its value and the range.

The one error type for bad input is :class:`ConfigError` (a ``ValueError``). It lives in
``mechanisms`` so that the pure math validates its arguments without importing anything above
it; environments, agents and analysis use the same checks (``environments.config``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by check_grid: ``privgames list`` and a bad --set need no numpy
    import numpy as np


#: A real parameter's largest size, and the inverse its smallest but 0. The models square
#: and multiply parameters and their reciprocals, and float64 overflows past 1.8e308 (a game's
#: constant at 1.8e308 made a Mesa reporter's root finder stop on NaN).
MAGNITUDE = 1e100


@dataclass(frozen=True)
class Allowed:
    """The values a validator accepts, for the command line's ``show`` and the pages' inputs.

    Attributes:
        kind: ``int``, ``real``, ``choice``, ``bool`` or ``list`` (of numbers).
        low, high: the bounds (``None``: unbounded); ``low_open``/``high_open``: excluded.
        choices: the allowed strings of a ``choice``.
    """

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        low = -math.inf if self.low is None else self.low
        interval = _interval(low, self.high, not self.low_open, not self.high_open)
        noun = {"int": "an integer", "real": "a number"}.get(self.kind, "a list of numbers, each")
        return f"{noun} {interval}".rstrip()

    def admits(self, value: float) -> bool:
        """Whether a number lies within the bounds."""
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open
                                      else value <= self.high)
        return above and below


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range.

    Attributes:
        parameter: the parameter at fault, where one is (``None`` otherwise).
        allowed: what it accepts, where a validator knows (:class:`Allowed`).
    """

    def __init__(self, message: str, parameter: str | None = None,
                 allowed: Allowed | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.allowed = allowed


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """An integer in ``[low, high]`` (``high=None``: no upper bound)."""
    allowed = Allowed("int", low, high)
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"{name}={value!r} is not an integer: {name} must be {allowed}",
                          name, allowed)
    if not allowed.admits(value):
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be {allowed}",
                          name, allowed)
    return int(value)


def check_real(name: str, value: object, low: float = -math.inf, high: float = math.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in the interval given by ``low``/``high`` and openness flags."""
    allowed = Allowed("real", None if low == -math.inf else low,
                      None if high == math.inf else high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} is not a finite number: {name} must be {allowed}",
                          name, allowed)
    if not allowed.admits(value):
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be "
                          f"{_interval(low, high, not low_open, not high_open)}", name, allowed)
    if abs(value) > MAGNITUDE or 0 < abs(value) < 1 / MAGNITUDE:
        raise ConfigError(f"{name}={value!r} is beyond the numbers the models compute with: "
                          f"{name} must be 0 or between {1 / MAGNITUDE:g} and {MAGNITUDE:g} in "
                          "size", name, allowed)
    return float(value)


def check_reals(name: str, values: object, low: float = -math.inf,
                low_open: bool = False, high: float = math.inf) -> tuple[float, ...]:
    """A non-empty list of finite numbers, each ``>= low`` (or ``> low``) and ``<= high``."""
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) == 0:
        raise ConfigError(f"{name}={values!r} is not a list: {name} must be a non-empty list "
                          "of numbers", name, Allowed("list", None if low == -math.inf else low,
                                                      None if high == math.inf else high,
                                                      low_open=low_open))
    for i, v in enumerate(values):
        check_real(f"{name}[{i}]", v, low, high, low_open=low_open)
    return tuple(float(v) for v in values)


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """One of the listed strings."""
    if not isinstance(value, str) or value not in choices:
        allowed = Allowed("choice", choices=tuple(choices))
        raise ConfigError(f"{name}={value!r} is not allowed: {name} must be {allowed}",
                          name, allowed)
    return str(value)


def check_bool(name: str, value: object) -> bool:
    """``True`` or ``False`` (not a number or a string)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name}={value!r} is not allowed: {name} must be true or false",
                          name, Allowed("bool"))
    return value


def _interval(low: float, high: float | None, low_closed: bool, high_closed: bool) -> str:
    if high is None or high == math.inf:
        return "" if low == -math.inf else f"{'>=' if low_closed else '>'} {low}"
    if low == -math.inf:
        return f"{'<=' if high_closed else '<'} {high}"
    return f"in {'[' if low_closed else '('}{low}, {high}{']' if high_closed else ')'}"


def check_grid(grid: object) -> np.ndarray:
    """An action grid: a non-empty 1-d array of distinct numbers, each finite or ``inf`` (the
    opt-out, where a game has one: infinite noise), in increasing order."""
    import numpy as np

    try:
        g = np.asarray(grid, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"grid={grid!r} is not allowed: grid must be a non-empty list of "
                          "numbers") from None
    if g.ndim != 1 or g.size == 0:
        raise ConfigError(f"grid={grid!r} is not allowed: grid must be a non-empty list of "
                          "numbers")
    if np.any(np.isnan(g)) or np.any(g == -np.inf) or np.unique(g).size != g.size:
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: grid must hold distinct "
                          "numbers, each finite or inf (the opt-out)")
    return np.sort(g)
