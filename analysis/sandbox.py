"""Run one untrusted piece of work in a child process under limits that the operating system
enforces: killed at its time limit, and unable to allocate past its memory limit.

A page's SQL (``privgames viz --results``) may ask DuckDB for anything a single ``SELECT`` can
do: ``list_sort(range(1e7))`` runs for a minute inside one function call, where DuckDB never
checks its interrupt, and ``unnest(range(3e8))`` allocates gigabytes that DuckDB's own
``memory_limit`` does not count. In the server's process either one takes the server down
with it. Here the work runs in a process forked from a small *fork server* (started once,
with the work's modules imported, so a query starts in a few milliseconds), under
``RLIMIT_AS`` (its address space: what it holds at start plus ``memory``) and ``RLIMIT_CPU``,
and is ``SIGKILL``-ed when ``seconds`` of wall time pass. Only the work's small, already
capped result crosses back.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable
from typing import Any

from privgames.analysis.guard import address_space
from privgames.environments.config import ConfigError

#: Modules the fork server imports once, so that each child starts with them.
PRELOAD = ["privgames.analysis.results", "duckdb", "pandas", "pyarrow.parquet"]

#: Address space a child may reserve beyond ``memory`` that holds no data: DuckDB's
#: allocator and threads reserve it at the first query (measured in a fork server's child:
#: 1.0 GiB fails a one-row query, 1.25 GiB runs it, whatever DuckDB's ``memory_limit``).
OVERHEAD = 3 * 2**29
#: Children running at once (one per core); more wait for a slot, up to their time limit.
SLOTS = max(1, os.cpu_count() or 1)

_context: Any = None
_lock = threading.Lock()
_slots = threading.BoundedSemaphore(SLOTS)


class LimitExceeded(ConfigError):
    """The work passed its time or memory limit and was stopped (its one-line message says
    which)."""


def _fork_server() -> Any:
    global _context
    with _lock:
        if _context is None:
            _context = multiprocessing.get_context("forkserver")
            _context.set_forkserver_preload(PRELOAD)
        return _context


def _child(conn: Any, work: Callable[..., Any], args: tuple, seconds: float,
           memory: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)  # the server's own cap, if it has one
    cap = int(address_space()) + memory + OVERHEAD
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    cpu = int(seconds) + 2  # the parent kills at ``seconds``; this holds if it cannot
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        outcome = ("ok", work(*args))
    except MemoryError:
        outcome = ("memory", "")
    except Exception as err:  # noqa: BLE001 - the parent gives the user its first line
        text = (str(err).strip().splitlines() or [type(err).__name__])[0]
        outcome = ("memory" if "Out of Memory" in text else "error", text)
    conn.send(outcome)
    conn.close()


def run_limited(work: Callable[..., Any], *args: Any, seconds: float, memory: int,
                what: str = "the query") -> Any:
    """``work(*args)`` in a child process, killed after ``seconds`` and unable to allocate
    more than ``memory`` bytes (plus :data:`OVERHEAD`) beyond what it holds at start, at
    most :data:`SLOTS` at once; ``work`` is a module-level
    function (the child imports it) that returns a small picklable value and reports the
    user's mistakes as :class:`~privgames.environments.config.ConfigError`, which is raised
    here with its message.

    Raises:
        LimitExceeded: ``"{what} stopped at 10 s"``, ``"{what} needs more than 256 MB"``,
            or no slot freed within ``seconds``.
        ConfigError: the work's own one-line error.
    """
    context = _fork_server()
    if not _slots.acquire(timeout=seconds):
        raise LimitExceeded(f"{what} waited {seconds:g} s for one of the {SLOTS} running "
                            "before it: try again")
    try:
        return _run(context, work, args, seconds, memory, what)
    finally:
        _slots.release()


def _run(context: Any, work: Callable[..., Any], args: tuple, seconds: float, memory: int,
         what: str) -> Any:
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, work, args, seconds, memory),
                            daemon=True)
    child.start()
    send.close()
    try:
        outcome = receive.recv() if receive.poll(seconds) else ("time", "")
    except (EOFError, OSError):  # it died before it answered
        outcome = None
    finally:
        child.kill()  # SIGKILL, whatever it is doing (nothing if it has ended)
        child.join()
        receive.close()
    if outcome is None:  # past RLIMIT_CPU: SIGXCPU; an allocation it could not survive: else
        outcome = ("time" if child.exitcode == -signal.SIGXCPU else "memory", "")
    kind, value = outcome
    if kind == "time":
        raise LimitExceeded(f"{what} stopped at {seconds:g} s (its time limit)")
    if kind == "memory":
        raise LimitExceeded(f"{what} needs more than {memory / 2**20:.0f} MB of memory "
                            "(its limit)")
    if kind == "error":
        raise ConfigError(value)
    return value
