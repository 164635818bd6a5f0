"""Random streams: every consumer of randomness draws from its own child of the unit's seed.

Children are addressed, not counted: ``child(seed, i)`` is the ``SeedSequence`` with spawn key
``seed.spawn_key + (i,)``, so a stream does not depend on how often anything else spawned.
:func:`generator` is the one place where a seed becomes a ``numpy.random.Generator``; inside
:func:`stream_log` it records each stream's key, so a test can assert that no two consumers of
a unit share a stream. A deliberate reuse (common random numbers, e.g. re-running a population
with one bid changed) is declared with :func:`replaying`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

Seed = int | np.random.SeedSequence | None

_log: list[tuple[tuple, bool]] | None = None
_replaying = False


def as_seed_sequence(seed: Seed) -> np.random.SeedSequence:
    """``seed`` as a ``SeedSequence`` (an int or None becomes the root of a new tree)."""
    return seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)


def child(seed: Seed, *path: int) -> np.random.SeedSequence:
    """The descendant of ``seed`` at ``path`` (``child(s, 2)`` is the third child of ``s``)."""
    s = as_seed_sequence(seed)
    return np.random.SeedSequence(s.entropy, spawn_key=(*s.spawn_key, *path),
                                  pool_size=s.pool_size)


def spawn(seed: Seed, n: int) -> list[np.random.SeedSequence]:
    """The first ``n`` children of ``seed``: one per consumer of randomness."""
    return [child(seed, i) for i in range(n)]


def generator(seed: Seed) -> np.random.Generator:
    """A ``Generator`` on ``seed``'s stream, recorded when a :func:`stream_log` is open."""
    s = as_seed_sequence(seed)
    if _log is not None:
        _log.append(((s.entropy, tuple(s.spawn_key)), _replaying))
    return np.random.default_rng(s)


@contextmanager
def stream_log() -> Iterator[list[tuple[tuple, bool]]]:
    """Record every stream opened inside: ``[((entropy, spawn_key), replayed), ...]``."""
    global _log
    previous, _log = _log, []
    try:
        yield _log
    finally:
        _log = previous


@contextmanager
def replaying() -> Iterator[None]:
    """Streams opened inside deliberately repeat earlier ones (common random numbers)."""
    global _replaying
    previous, _replaying = _replaying, True
    try:
        yield
    finally:
        _replaying = previous


def reused_streams(log: list[tuple[tuple, bool]]) -> list[tuple]:
    """Keys opened more than once without :func:`replaying`."""
    seen: set[tuple] = set()
    reused = []
    for key, replayed in log:
        if key in seen and not replayed:
            reused.append(key)
        seen.add(key)
    return reused
