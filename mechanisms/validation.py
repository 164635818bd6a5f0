"""Validation at the boundary: every invalid value names the parameter, its value and the range.

The one error type for bad input is :class:`ConfigError` (a ``ValueError``). It lives in
``mechanisms`` so that the pure math validates its arguments without importing anything above
it; environments, agents and analysis use the same checks (``environments.config``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real

import numpy as np


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """An integer in ``[low, high]`` (``high=None``: no upper bound)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"{name}={value!r} is not an integer: {name} must be an integer "
                          f"{_interval(low, high, True, True)}")
    if value < low or (high is not None and value > high):
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be an integer "
                          f"{_interval(low, high, True, True)}")
    return int(value)


def check_real(name: str, value: object, low: float = -math.inf, high: float = math.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in the interval given by ``low``/``high`` and openness flags."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} is not a finite number: {name} must be a number "
                          f"{_interval(low, high, not low_open, not high_open)}")
    bad_low = value <= low if low_open else value < low
    bad_high = value >= high if high_open else value > high
    if bad_low or bad_high:
        raise ConfigError(f"{name}={value!r} is out of range: {name} must be "
                          f"{_interval(low, high, not low_open, not high_open)}")
    return float(value)


def check_reals(name: str, values: object, low: float = -math.inf,
                low_open: bool = False) -> tuple[float, ...]:
    """A non-empty list of finite numbers, each ``>= low`` (or ``> low``)."""
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) == 0:
        raise ConfigError(f"{name}={values!r} is not a list: {name} must be a non-empty list "
                          "of numbers")
    for i, v in enumerate(values):
        check_real(f"{name}[{i}]", v, low, low_open=low_open)
    return tuple(float(v) for v in values)


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """One of the listed strings."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not allowed: {name} must be one of "
                          + ", ".join(choices))
    return str(value)


def _interval(low: float, high: float | None, low_closed: bool, high_closed: bool) -> str:
    if high is None or high == math.inf:
        return f"{'>=' if low_closed else '>'} {low}"
    if low == -math.inf:
        return f"{'<=' if high_closed else '<'} {high}"
    return f"in {'[' if low_closed else '('}{low}, {high}{']' if high_closed else ')'}"


def check_grid(grid: object) -> np.ndarray:
    """An action grid: a non-empty 1-d array of distinct numbers, each finite or ``inf`` (the
    opt-out, where a game has one: infinite noise), in increasing order."""
    g = np.asarray(grid, dtype=float)
    if g.ndim != 1 or g.size == 0:
        raise ConfigError(f"grid={grid!r} is not allowed: grid must be a non-empty list of "
                          "numbers")
    if np.any(np.isnan(g)) or np.any(g == -np.inf) or np.unique(g).size != g.size:
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: grid must hold distinct "
                          "numbers, each finite or inf (the opt-out)")
    return np.sort(g)
