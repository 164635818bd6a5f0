"""Kernels compiled with numba where numpy's vectorised passes cannot express them well (loops
with short, data-dependent inner work: README, Benchmarks, why numba)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial, wraps
from typing import Any

#: A kernel's ``pair`` argument (:func:`compiled`'s ``rows_of``): a tuple's length is part of
#: its numba type, so a kernel given ``PAIR`` is compiled with its rows' two actions as a
#: constant, and one given ``ANY`` reads the count from the array.
PAIR, ANY = (0, 0), (0,)


def compiled(function: Callable[..., Any] | None = None, *,
             rows_of: int | None = None) -> Any:
    """``function`` compiled by numba (``nopython``, no fast-math: IEEE results, the same bits
    on every machine; numpy's error model: ``x / 0`` is ``inf``, not an exception) on its
    first call. numba is imported then, not when the module is, and the machine code is
    cached on disk beside the module. A kernel keeps its helpers in its own file: numba's
    disk cache keys a kernel on its own file only, so a kernel would keep a changed helper
    of another file's old code.

    ``rows_of``: the position of an argument whose rows are the agents' actions. The kernel
    then takes a last argument ``pair`` (:data:`PAIR` where those rows have two actions,
    else :data:`ANY`) and is compiled once for each: with two actions a constant, LLVM
    unrolls a row's loops (SAR's participation game at 10^6 users: the learner's pass 13 ms
    a round against 22), and a kernel may take its own path for them (the learners' pass
    does: 10 ms). The same operations in the same order: the same bits. ``kernel.generic(...)``
    runs the kernel as for any count, so that a test can pin a two-action path on it."""
    if function is None:
        return partial(compiled, rows_of=rows_of)

    @cache
    def build() -> Callable[..., Any]:
        from numba import njit

        return njit(cache=True, nogil=True, error_model="numpy")(function)

    if rows_of is None:
        @wraps(function)
        def call(*args: Any) -> Any:
            return build()(*args)
    else:
        @wraps(function)
        def call(*args: Any) -> Any:
            return build()(*args, PAIR if args[rows_of].shape[-1] == 2 else ANY)

        def generic(*args: Any) -> Any:
            return build()(*args, ANY)

        call.generic = generic  # the loops for any count, at two actions too (tests pin on it)

    return call
