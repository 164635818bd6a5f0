"""One population over many processes: shards of agents, streams and sums keyed by blocks.

A **shard** owns a contiguous range of agents (their types, learner state, random streams and
the partial sums of every measurement); a :class:`ShardedRun` drives its shards in the driver
process (``backend="vectorized"``) or as Ray actors (``backend="ray"``, on any node of the
session's cluster), and holds only what the shards send back: small per-block sums and extremes.

Two keys make the numbers independent of the shard count:

* **Blocks.** Agents fall into blocks of :data:`BLOCK`; a shard's range is a run of whole
  blocks (uneven splits: shards differ by at most one block). Each block has its own random
  stream per purpose, ``(stream, block)`` (:class:`BlockStreams`), so an agent's draws do not
  depend on which shard owns it.
* **Sums.** A shard reports a sum as one partial sum per block (:func:`block_sums`); the
  driver concatenates them in block order and sums that vector (:func:`combine`): the same
  floating-point operations, in the same order, at any shard count. Maxima and minima are
  exact in any order.

A slice of a game implements the methods the driver calls by name (``call``); each returns a
:class:`Partials`, or anything small. Faults: every ``checkpoint_every`` rounds each shard
writes its whole state (streams included) to the run's checkpoint folder; when a shard's actor
dies, every shard is restored from the last checkpoint and the rounds since are played again,
so the run's results equal an uninterrupted run's.
"""

from __future__ import annotations

import copy
import os
import pickle
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from privgames.environments.config import ConfigError
from privgames.environments.streams import child, generator
from privgames.mechanisms.compiled import compiled

#: Agents per block, the unit of random streams, partial sums and shard boundaries.
BLOCK = 1024


def blocks_of(agents: int) -> int:
    """How many blocks ``agents`` agents fill (the last one may be partial)."""
    return -(-agents // BLOCK)


def layout(agents: int, shards: int) -> list[tuple[int, int]]:
    """Each shard's ``[start, stop)``: whole blocks, as even as possible, in order."""
    blocks = blocks_of(agents)
    if not isinstance(shards, int) or shards < 1:
        raise ConfigError(f"shards={shards!r} is out of range: shards must be an integer >= 1")
    if shards > blocks:
        raise ConfigError(f"shards={shards} is out of range for agents={agents}: a shard owns "
                          f"whole blocks of {BLOCK} agents, so shards must be <= {blocks}")
    cuts = [min(b * BLOCK, agents) for b in np.linspace(0, blocks, shards + 1).round()
            .astype(int)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def block_sums(x: NDArray, start: int) -> NDArray:
    """Partial sums over the last axis of ``x`` (agents ``start, start + 1, ...``), one per
    block: each block's sum is computed alone, so it is the same at any shard count."""
    if start % BLOCK:
        raise ValueError(f"start={start} is not on a block boundary")
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    full = n - n % BLOCK
    head = x[..., :full].reshape(*x.shape[:-1], full // BLOCK, BLOCK).sum(axis=-1)
    if full == n:
        return head
    return np.concatenate([head, x[..., full:].sum(axis=-1, keepdims=True)], axis=-1)


class BlockStreams:
    """The random streams of the agents ``[start, stop)``: one generator per ``(stream,
    block)``, children of the population's seed. A draw gives every block its own agents'
    numbers (a partial last block draws only its agents'), concatenated in agent order."""

    def __init__(self, seed: np.random.SeedSequence, stream: int, start: int, stop: int,
                 agents: int) -> None:
        first, last = start // BLOCK, blocks_of(stop)
        self.sizes = [min(BLOCK, agents - b * BLOCK) for b in range(first, last)]
        self.generators = [generator(child(seed, stream, b)) for b in range(first, last)]

    def _draw(self, draw: Callable, rows: int | None) -> NDArray:
        shape = (lambda k: (k,)) if rows is None else (lambda k: (rows, k))
        return np.concatenate([draw(g, shape(k)) for g, k in
                               zip(self.generators, self.sizes, strict=True)], axis=-1)

    def uniform(self, rows: int | None = None) -> NDArray:
        if rows is not None:
            return self._draw(lambda g, s: g.random(s), rows)
        out, done = np.empty(sum(self.sizes)), 0  # one per agent: drawn in place (no joining)
        for g, k in zip(self.generators, self.sizes, strict=True):
            g.random(out=out[done:done + k])
            done += k
        return out

    def normal(self, rows: int | None = None, loc: float = 0.0, scale: float = 1.0) -> NDArray:
        return self._draw(lambda g, s: g.normal(loc, scale, s), rows)

    def integers(self, high: int, rows: int | None = None) -> NDArray:
        """Uniform integers in ``[0, high)``."""
        return self._draw(lambda g, s: g.integers(0, high, s), rows)

    def parts(self, blocks: int) -> Iterator[tuple[slice, BlockStreams]]:
        """The streams ``blocks`` blocks at a time, with their agents' local slice: each
        block keeps its own generator, so the parts' draws, in the whole's order within
        each part, are the whole's numbers (several rounds' draws, made whole, would hold
        gigabytes at 10^6 agents)."""
        done = 0
        for first in range(0, len(self.sizes), blocks):
            part = copy.copy(self)  # the same generators, a run of them
            part.sizes = self.sizes[first:first + blocks]
            part.generators = self.generators[first:first + blocks]
            yield slice(done, done + sum(part.sizes)), part
            done += sum(part.sizes)


def exclusive_scan(x: NDArray, start: int, block_totals: NDArray) -> NDArray:
    """Each agent's sum of the agents before it in the whole population (agents ``start,
    start + 1, ...`` hold ``x``): the totals of the blocks before its own (every block's
    :func:`block_sums`, in order) plus the running sum within its block, so the same at any
    shard count (the chain's prefix, an exclusive scan across shards)."""
    if start % BLOCK:
        raise ValueError(f"start={start} is not on a block boundary")
    x = np.asarray(x, dtype=float)
    before = np.concatenate([[0.0], np.cumsum(block_totals)])[start // BLOCK:]
    return _exclusive_scan(x, before, BLOCK, np.empty(x.size))


@compiled
def _exclusive_scan(x, before, block, out):
    """:func:`exclusive_scan` in one pass: ``before[b]`` plus the running sum from 0."""
    for b in range(-(-x.size // block)):
        running = 0.0
        for i in range(b * block, min(x.size, (b + 1) * block)):
            out[i] = before[b] + running
            running += x[i]
    return out


@dataclass
class Partials:
    """What a shard sends: per-block partial sums (``sums``, last axis the blocks), its
    extremes (``maxima``; a minimum is sent as the maximum of its negative) and small arrays
    the driver passes on whole (``gathered``: concatenated in shard order, as a block's sums
    for a scan, or each shard's largest values)."""

    sums: dict[str, NDArray] = field(default_factory=dict)
    maxima: dict[str, float] = field(default_factory=dict)
    gathered: dict[str, NDArray] = field(default_factory=dict)


def combine(parts: Sequence[Partials]) -> dict[str, Any]:
    """The population's totals from its shards' partials (in shard order = block order)."""
    out: dict[str, Any] = {}
    for name in parts[0].sums:
        out[name] = np.concatenate([p.sums[name] for p in parts], axis=-1).sum(axis=-1)
    for name in parts[0].maxima:
        out[name] = max(p.maxima[name] for p in parts)
    for name in parts[0].gathered:
        out[name] = np.concatenate([p.gathered[name] for p in parts], axis=-1)
    return {k: (float(v) if np.ndim(v) == 0 else v) for k, v in out.items()}


class Shard:
    """A Ray actor's body: it builds its slice (never the driver), answers calls by name, and
    writes and reads its checkpoints."""

    def __init__(self, make: Callable, *args: Any) -> None:
        self.slice = make(*args)

    def reset(self, make: Callable, *args: Any) -> None:
        """Build another population's slice in this actor (a leased idle shard)."""
        self.slice = None
        self.slice = make(*args)

    def release(self) -> None:
        """Drop the slice: the actor waits idle, holding only its process."""
        self.slice = None

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.slice, method)(*args)

    def save(self, path: str) -> str:
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(self.slice, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        return path

    def load(self, path: str) -> None:
        with open(path, "rb") as f:
            self.slice = pickle.load(f)

    def node(self) -> str:
        """The Ray node this shard runs on (``local`` outside Ray)."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"

    def rss(self) -> int:
        """This process's resident memory now, bytes (Linux)."""
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class ShardedRun:
    """A population of ``agents`` split into ``shards`` slices made by ``make(config, seed,
    start, stop)``: in this process (``backend="vectorized"``, one slice per shard) or as Ray
    actors spread over the session's nodes (``backend="ray"``).

    Attributes:
        ranges: each shard's ``[start, stop)``. exchanged: bytes the shards sent and received
            through the driver so far (the pickled arguments and results). restores: how
            often the shards were brought back to a checkpoint after an actor died.
    """

    def __init__(self, make: Callable, config: Any, seed: np.random.SeedSequence, agents: int,
                 shards: int, backend: str, checkpoint_every: int = 0) -> None:
        self.ranges = layout(agents, shards)
        self.backend = backend
        self.exchanged = self.restores = 0
        self.checkpoint_every = checkpoint_every
        self._folder: str | None = None
        self._saved: tuple[int, list[str]] | None = None
        self._args = [(make, config, seed, a, b) for a, b in self.ranges]
        if backend == "ray":
            from privgames.environments.ray_session import ensure_ray

            self._ray = ensure_ray()
            self._nodes: list[str] = []
            self.shards = [self._start(i) for i in range(len(self._args))]
        else:
            self.shards = [Shard(*args) for args in self._args]

    def _start(self, i: int) -> Any:
        """Shard ``i``'s actor on the cluster's alive nodes in turn, with a hard node affinity
        (Ray's ``SPREAD`` and soft affinity are best effort: under load they left a two-node
        cluster's second node empty). A shard restored after its node died is placed on the
        nodes alive then."""
        nodes = sorted(node["NodeID"] for node in self._ray.nodes() if node["Alive"])
        node = nodes[i % len(nodes)]
        self._nodes[i:i + 1] = [node]
        return _lease(self._ray, node, self._args[i])

    def call(self, method: str, *args: Any) -> list[Any]:
        """Every shard's answer to ``method(*args)``, in shard order."""
        if self.backend != "ray":
            return [s.call(method, *args) for s in self.shards]
        results = self._ray.get([s.call.remote(method, *args) for s in self.shards])
        self.exchanged += len(self.shards) * len(pickle.dumps(args)) + sum(
            len(pickle.dumps(r)) for r in results)
        return results

    def owner(self, agent: int) -> int:
        """The shard that owns ``agent``."""
        for i, (start, stop) in enumerate(self.ranges):
            if start <= agent < stop:
                return i
        raise ConfigError(f"agent={agent!r} is out of range: agents are 0 to "
                          f"{self.ranges[-1][1] - 1}")

    def on(self, shard: int, method: str, *args: Any) -> Any:
        """``method(*args)`` on one shard."""
        if self.backend != "ray":
            return self.shards[shard].call(method, *args)
        return self._ray.get(self.shards[shard].call.remote(method, *args))

    def total(self, method: str, *args: Any) -> dict[str, Any]:
        """The combined :class:`Partials` of ``method(*args)`` on every shard."""
        return combine(self.call(method, *args))

    # --- faults -------------------------------------------------------------------------------
    def checkpoint(self, round_: int) -> None:
        """Every shard writes its state for ``round_`` (the driver keeps the file names)."""
        if self._folder is None:  # removed by close(), or at exit (a run stopped by a signal;
            # in a local Ray's worker, with the Ray's folder by the driver: ray_session.SCRATCH)
            from privgames.environments.ray_session import SCRATCH

            scratch = os.environ.get(SCRATCH)
            self._folder = tempfile.mkdtemp(prefix="privgames-shards-", dir=scratch if (
                scratch and os.path.isdir(scratch)) else None)
            self._remove_folder = weakref.finalize(self, shutil.rmtree, self._folder, True)
        paths = [str(Path(self._folder) / f"shard-{i}-round-{round_}.pkl")
                 for i in range(len(self.shards))]
        if self.backend == "ray":
            self._ray.get([s.save.remote(p) for s, p in zip(self.shards, paths, strict=True)])
        else:
            for s, p in zip(self.shards, paths, strict=True):
                s.save(p)
        if self._saved is not None:
            for old in self._saved[1]:
                Path(old).unlink(missing_ok=True)
        self._saved = (round_, paths)

    def failures(self) -> tuple[type[BaseException], ...]:
        """The errors that mean a shard's actor died."""
        return (self._ray.exceptions.RayActorError,) if self.backend == "ray" else ()

    def restore(self) -> int:
        """Replace dead actors and bring every shard back to the last checkpoint; return its
        round."""
        if self._saved is None:
            raise RuntimeError("no checkpoint was written")
        for i, s in enumerate(self.shards):
            try:
                self._ray.get(s.rss.remote())
            except self._ray.exceptions.RayActorError:
                self.shards[i] = self._start(i)
        round_, paths = self._saved
        self._ray.get([s.load.remote(p) for s, p in zip(self.shards, paths, strict=True)])
        self.restores += 1
        return round_

    def nodes(self) -> list[str]:
        """The node of each shard (``local`` in process)."""
        if self.backend == "ray":
            return self._ray.get([s.node.remote() for s in self.shards])
        return ["local"] * len(self.shards)

    def rss(self) -> list[int]:
        """Each shard's resident memory (Ray: its actor process; in process: the driver's)."""
        if self.backend == "ray":
            return self._ray.get([s.rss.remote() for s in self.shards])
        return [self.shards[0].rss()] * len(self.shards)

    def close(self) -> None:
        if self.backend == "ray":
            _release(self._ray, self.shards, self._nodes)
            self.shards = []
        if self._folder is not None:
            self._remove_folder()
            self._folder = None


#: Idle shard actors of this process's Ray session, per node, kept between populations; a
#: leased one builds the next population's slice in its process, instead of a new worker
#: process importing privgames (about a second and 150 MB each; a sweep of sharded
#: populations, or a test of many, starts one per shard otherwise).
_IDLE: dict[str, Any] = {"session": None, "nodes": {}}
_IDLE_LOCK = threading.Lock()
#: At most this many idle actors a node, about 600 MB of idle processes; the rest are killed
#: when released.
MAX_IDLE = 4


def _lease(ray: Any, node: str, args: tuple) -> Any:
    """A shard actor on ``node`` building ``make(*args)``'s slice: an idle one, or a new one
    with a hard node affinity (no CPU reserved: a shard must start even when the run's own
    task holds the CPUs, a sweep's unit on a 2-core machine)."""
    context = ray.get_runtime_context()
    session = (context.get_node_id(), context.get_job_id())  # a new Ray: a new pool
    with _IDLE_LOCK:
        if _IDLE["session"] != session:
            _IDLE.update(session=session, nodes={})
        idle = _IDLE["nodes"].get(node)
        if idle:
            shard = idle.pop()
            shard.reset.remote(*args)  # an actor runs its calls in order: before any other
            return shard
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(num_cpus=0, max_restarts=0)(Shard)
    where = NodeAffinitySchedulingStrategy(node, soft=False)
    return actor.options(scheduling_strategy=where).remote(*args)


def _release(ray: Any, shards: Sequence[Any], nodes: Sequence[str]) -> None:
    """Shards whose population is done: emptied and kept idle for the next one (at most
    :data:`MAX_IDLE` a node), the rest killed."""
    with _IDLE_LOCK:
        for shard, node in zip(shards, nodes, strict=True):
            idle = _IDLE["nodes"].setdefault(node, [])
            if len(idle) < MAX_IDLE:
                shard.release.remote()
                idle.append(shard)
            else:
                ray.kill(shard)


def resolve_shards(shards: int | str, backend: str, agents: int) -> int:
    """``shards``: an integer >= 1 (at most one per block), or ``auto``: one per CPU of the
    Ray cluster, at most one per block of ``agents`` (one in process)."""
    if shards == "auto":
        if backend != "ray":
            return 1
        from privgames.environments.ray_session import ensure_ray

        cpus = int(ensure_ray().cluster_resources().get("CPU", 1))
        return max(1, min(cpus, blocks_of(agents)))
    if isinstance(shards, bool) or not isinstance(shards, int | np.integer) or shards < 1:
        raise ConfigError(f"shards={shards!r} is out of range: shards must be an integer >= 1 "
                          "or 'auto'")
    return int(shards)
