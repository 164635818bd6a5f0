"""How far the running population is: its round loop reports, the sweep's bar shows it.

A model's loop calls :func:`advance` after each round (:meth:`Environment.run
<privgames.environments.base.Environment.run>`) or each block of steps (the ring on Ray);
the sweep says where the report goes while it runs a unit (:func:`reporting`): to its bar in
this process, or from a Ray task to a :class:`Tally` actor that the sweep reads while it
waits. Without a sweep listening, :func:`advance` does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_sink: ContextVar[Callable[[float], None] | None] = ContextVar("privgames_progress",
                                                               default=None)

#: A Ray task sends what it did at most this often (an actor call costs about 1.7 ms).
SEND_EVERY_S = 0.25


def advance(share: float) -> None:
    """Report that the running loop has done another ``share`` (of 1) of its rounds."""
    sink = _sink.get()
    if sink is not None:
        sink(share)


@contextmanager
def reporting(sink: Callable[[float], None] | None) -> Iterator[None]:
    """Send :func:`advance`'s reports to ``sink`` (None: nowhere) while the block runs."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


@contextmanager
def part(fraction: float) -> Iterator[None]:
    """Reports inside count as ``fraction`` of the enclosing run's (one of its several
    models: ``fraction`` = 1 / their number)."""
    sink = _sink.get()
    with reporting(None if sink is None else lambda share: sink(share * fraction)):
        yield


class Tally:
    """A Ray actor that collects what the tasks of a sweep did, per task, until the sweep
    takes it."""

    def __init__(self) -> None:
        self.done: dict[int, float] = {}

    def add(self, task: int, work: float) -> None:
        self.done[task] = self.done.get(task, 0.0) + work

    def take(self) -> dict[int, float]:
        done, self.done = self.done, {}
        return done


def to_tally(tally: object, task: int) -> Callable[[float], None]:
    """A sink for a Ray task: what it did, sent to ``tally`` (a :class:`Tally` actor) at most
    every :data:`SEND_EVERY_S` seconds; the rest is counted when the task's rows arrive."""
    held, last = [0.0], [time.monotonic()]

    def send(work: float) -> None:
        held[0] += work
        now = time.monotonic()
        if now - last[0] >= SEND_EVERY_S:
            tally.add.remote(task, held[0])  # type: ignore[attr-defined]
            held[0], last[0] = 0.0, now

    return send
