"""Kernels compiled with numba where numpy's vectorised passes cannot express them well (loops
with short, data-dependent inner work: README, Benchmarks, why numba)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any


def compiled(function: Callable[..., Any] | None = None, *, inline: bool = False,
             uses: tuple[Callable[..., Any], ...] = ()) -> Any:
    """``function`` compiled by numba (``nopython``, no fast-math: IEEE results, the same bits
    on every machine; numpy's error model: ``x / 0`` is ``inf``, not an exception) on its
    first call. numba is imported then, not when the module is, and
    the machine code is cached on disk beside the module.

    ``inline``: a helper that other kernels call, inlined into them; once built it replaces
    its name in its module, where numba looks for it when it compiles a kernel that calls it.
    ``uses``: the helpers a kernel calls, built before it. A helper lives in its callers'
    file: numba's disk cache keys a kernel on its own file only, so a kernel would keep a
    changed helper of another file's old code."""
    if function is None:
        return lambda f: compiled(f, inline=inline, uses=uses)

    @cache
    def build() -> Callable[..., Any]:
        from numba import njit

        for helper in uses:
            helper.build()
        kernel = njit(cache=True, nogil=True, error_model="numpy",
                      **({"inline": "always"} if inline else {}))(function)
        if inline:
            function.__globals__[function.__name__] = kernel
        return kernel

    @wraps(function)
    def call(*args: Any) -> Any:
        return build()(*args)

    call.build = build
    return call
