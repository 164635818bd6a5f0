"""One BLAS thread for a block of work, so that a matrix product sums in the same order
serially, in a Ray worker or on a cluster node (the same bits on any backend)."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from functools import lru_cache

from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _controller(modules: int) -> ThreadpoolController:
    """The thread pools loaded when ``modules`` modules were (an import may load another)."""
    return ThreadpoolController()


def one_thread() -> AbstractContextManager:
    """A context limiting every thread pool (BLAS, OpenMP) to one thread. The pools are looked
    up again only after an import (``threadpool_limits`` looks them up on every call: 1-2 ms,
    4% of a paper-scale APES round)."""
    return _controller(len(sys.modules)).limit(limits=1)
