"""Kernels compiled with numba where numpy's vectorised passes cannot express them well (loops
with short, data-dependent inner work: README, Benchmarks, why numba)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any


def compiled(function: Callable[..., Any]) -> Any:
    """``function`` compiled by numba (``nopython``, no fast-math: IEEE results, the same bits
    on every machine; numpy's error model: ``x / 0`` is ``inf``, not an exception) on its
    first call. numba is imported then, not when the module is, and the machine code is
    cached on disk beside the module. A kernel keeps its helpers in its own file: numba's
    disk cache keys a kernel on its own file only, so a kernel would keep a changed helper
    of another file's old code."""

    @cache
    def build() -> Callable[..., Any]:
        from numba import njit

        return njit(cache=True, nogil=True, error_model="numpy")(function)

    @wraps(function)
    def call(*args: Any) -> Any:
        return build()(*args)

    return call
