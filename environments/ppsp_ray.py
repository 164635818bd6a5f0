"""The SI-PPSP ring on Ray: shards of consecutive nodes as actors (``backend="ray"``).

Each shard owns a contiguous segment of the ring and its own copies of the noise streams of its
node ids, so it draws the numbers the vectorized ring would give those nodes. The shards
exchange messages a block of steps at a time: in a shard of ``m`` nodes the last node's message
at step ``k0 + t`` depends on the shard's own states at ``k0`` and on the predecessor's messages
of steps before ``k0 + t - m`` only (``x_i(k+1)`` depends on ``x_{i-j}(k+1-j)``), so for
``t < m`` it is computed from the shard's own states. A block of ``T <= m`` steps therefore
takes one exchange: every shard emits its ``T`` outgoing messages (Ray passes them from shard
to shard through the object store, not through the driver), then steps its ``T`` states with
the ``T`` it received. The arithmetic is the vectorized ring's, operation for operation, so
with the same seed the states and records are bit-identical.

Every ``SNAPSHOT_EVERY`` steps the driver checkpoints each shard (states, records, the noise
streams' positions). A shard that dies is replaced by a new actor restored from the last
checkpoint, the survivors are rolled back to it, and the run replays from there: it ends with
the states of an undisturbed run.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from privgames.environments.ppsp_ring import (
    PPSPConfig,
    RingNoise,
    RingRun,
    Schedule,
    Window,
)
from privgames.environments.ray_session import ensure_ray

#: Steps between checkpoints (a synchronisation point that also detects lost shards).
SNAPSHOT_EVERY = 100
#: Memory per shard for one block's noise ``(T, replications, m)``; bounds the block length.
BLOCK_BYTES = 64 * 2**20
#: Restarts of lost shards after which the run gives up.
MAX_RECOVERIES = 3


class ShardLostError(RuntimeError):
    """Shard actors kept dying: the run gave up after ``MAX_RECOVERIES`` restarts."""


class RingShard:
    """One shard: a contiguous segment of the ring (ids in ring order) and its states."""

    def setup(self, config: PPSPConfig, seed: np.random.SeedSequence, ids: NDArray,
              state: NDArray, noise_ids: NDArray, secrets: Mapping[int, float]) -> None:
        """Take the segment ``ids`` with its states for a new run; ``secrets``: the leaver's
        (the only secret a shard uses: it sends ``x - s``)."""
        vars(self).clear()
        self.config, self.ids, self.secrets = config, ids, secrets
        self.state = np.array(state)  # writable: Ray's arguments are read-only views
        self.noise = RingNoise(seed, config, noise_ids)
        self.std = Schedule(config)
        self.window = Window(config)
        self.betas: NDArray | None = None
        self._ring: NDArray | None = None  # the ids the cached schedule is for

    def emit(self, k0: int, T: int, leaver: int | None) -> NDArray:
        """Draw the noise of steps ``k0 .. k0+T-1`` and return the last node's ``T`` messages.

        They depend only on the last ``T`` nodes' states (``T <= m``), stepped here with a
        stale first column that cannot reach the last node within the block. At most one step
        (``T = 1``) has a leaver, who sends ``x - s`` (section IV-E)."""
        R, m = self.config.replications, self.ids.size
        if self._ring is not self.ids:
            self._ring, self._std = self.ids, self.std.for_ring(self.ids)
        self.betas = np.empty((T, R, m))
        for t in range(T):
            np.multiply(self.noise.step(self.ids), self._std(k0 + t), out=self.betas[t])
        tail, out = self.state[:, m - T:].copy(), np.empty((T, R))
        for t in range(T):
            beta = self.betas[t, :, m - T:]
            d = tail - beta
            if leaver is not None and leaver == self.ids[-1]:
                d[:, -1] = tail[:, -1] - self.secrets[leaver]
            out[t] = d[:, -1]
            tail[:, 1:] = d[:, :-1]
            tail += beta
        return out

    def absorb(self, d_in: NDArray, keeper: int | None, leaver: int | None, targets: NDArray,
               sizes: NDArray) -> None:
        """Step the block with the predecessor's messages ``d_in`` (``(T, R)``), apply the
        leave rules, record every step."""
        spare = np.empty_like(self.state)
        for t, beta in enumerate(self.betas):
            if leaver is None and keeper is None:  # in place, as the vectorized ring steps
                np.subtract(self.state, beta, out=self.state)
                spare[:, 0] = d_in[t]
                spare[:, 1:] = self.state[:, :-1]
                np.add(spare, beta, out=spare)
                self.state, spare = spare, self.state
            else:
                self._leave_step(beta, d_in[t], keeper, leaver)
            self.window.record(self.ids, self.state, float(targets[t]), int(sizes[t]))
        self.betas = None

    def _leave_step(self, beta: NDArray, d_in: NDArray, keeper: int | None,
                    leaver: int | None) -> None:
        """The step in which ``leaver`` leaves (:func:`~privgames.environments.ppsp_ring.
        leave_step`, with the predecessor's message ``d_in`` and either node possibly in
        another shard)."""
        d = self.state - beta
        if leaver is not None:
            p = int(np.flatnonzero(self.ids == leaver)[0])
            d[:, p] = self.state[:, p] - self.secrets[leaver]
        shifted = np.empty_like(d)
        shifted[:, 0] = d_in
        shifted[:, 1:] = d[:, :-1]
        new = shifted + beta
        if keeper is not None:  # the leaver's predecessor keeps its state and receives
            q = int(np.flatnonzero(self.ids == keeper)[0])
            new[:, q] = shifted[:, q] + self.state[:, q]
        if leaver is not None:
            new = np.delete(new, p, axis=1)
            self.ids = np.delete(self.ids, p)
        self.state = new

    def insert(self, after: int, node: int, value: float) -> None:
        """A node joins after node ``after`` with state ``value``."""
        pos = int(np.flatnonzero(self.ids == after)[0]) + 1
        self.ids = np.insert(self.ids, pos, node)
        self.window.join(node, after)
        self.state = np.insert(self.state, pos, value, axis=1)

    def checkpoint(self) -> dict:
        """Everything this shard holds: states, records and the noise streams' positions."""
        return vars(self)

    def restore(self, saved: dict) -> None:
        """Return to a checkpoint (copied: arrays from Ray's object store are read-only)."""
        vars(self).clear()
        vars(self).update(copy.deepcopy(saved))

    def release(self) -> None:
        """Drop the finished run's arrays (the actor stays for the next run)."""
        vars(self).clear()

    def alive(self) -> bool:
        return True

    def finish(self) -> tuple[tuple[NDArray, NDArray, NDArray | None], NDArray, NDArray]:
        """Per step: this shard's segment of the estimator error and of the network sum, and
        its nodes' estimates (:meth:`Window.parts`); its node ids and final states."""
        return self.window.parts(), self.ids, self.state


@dataclass
class _Ring:
    """The driver's view: the ring's order, each shard's node ids, the sum of the active
    secrets, the step reached and the target of every step so far. Order and members are
    immutable (a join or leave makes new ones), so a checkpoint's copy costs nothing at
    n = 10^5 (copying them took 4.8 ms)."""

    order: tuple[int, ...]
    members: tuple[frozenset[int], ...]
    target: float
    step: int = 0
    targets: list[float] = field(default_factory=list)

    def copy(self) -> _Ring:
        return replace(self, targets=list(self.targets))


def run_ray_ring(model, kill_shard: tuple[int, int] | None = None) -> RingRun:
    """Run ``model``'s SI-PPSP on Ray shards (an embedded local Ray unless one is running).

    ``kill_shard=(shard, step)`` kills that shard's actor once, in the first block that
    reaches ``step`` (fault injection: the run recovers from the last checkpoint).
    """
    ray = ensure_ray()
    c: PPSPConfig = model.config
    labels = c.segment_of()[model.ids]
    segments = [model.ids[labels == s] for s in range(labels.max() + 1)]
    home = _join_home(c, segments)
    starts = np.cumsum([0] + [len(seg) for seg in segments])[:-1]
    leaving = {} if c.leave_at is None else {c.leave_node: float(model.secrets[c.leave_node])}
    args = [(c, model.noise_seed, seg, model.state[:, lo:lo + len(seg)],
             np.append(seg, [c.join_node] if home == s else []).astype(int), leaving)
            for s, (lo, seg) in enumerate(zip(starts, segments, strict=True))]
    shards = _lease(ray, len(args))
    for sh, a in zip(shards, args, strict=True):
        sh.setup.remote(*a)
    ring = _Ring(tuple(model.ids.tolist()), tuple(frozenset(seg.tolist()) for seg in segments),
                 float(model.secrets[model.ids].sum()))  # the sum the vectorized ring makes
    try:
        run = _drive(ray, model, shards, ring, home, args, kill_shard)
    except BaseException:  # a failed run leaves no actors behind in the session
        for shard in shards:
            ray.kill(shard)
        _pool.clear()
        raise
    for sh in shards:  # an actor runs its calls in order: the next run's setup comes after
        sh.release.remote()
    _pool["shards"][:len(shards)] = shards  # recovered shards replace the lost ones
    return run


#: Shard actors of this process's Ray session, kept between runs so that a worker imports
#: privgames once (about 0.8 s), not once per run.
_pool: dict = {}


def _lease(ray, count: int) -> list:
    """``count`` idle shard actors of the current Ray session (started when missing)."""
    context = ray.get_runtime_context()
    session = (context.get_node_id(), context.get_job_id())
    if _pool.get("session") != session:
        _pool.clear()
        _pool.update(session=session, shards=[], actor=ray.remote(RingShard))
    shards = _pool["shards"]
    shards += [_pool["actor"].remote() for _ in range(count - len(shards))]
    return shards[:count]


def _drive(ray, model, shards, ring: _Ring, home, args: list[tuple], kill_shard) -> RingRun:
    """Submit each block's emit/absorb calls; checkpoint every ``SNAPSHOT_EVERY`` steps and
    recover a lost shard from the last checkpoint (before the first: from ``setup(*args)``),
    detected at a checkpoint or at the end."""
    c: PPSPConfig = model.config
    saved = (ring.copy(), None)  # None: the shards as set up
    recoveries = 0
    while True:
        try:
            while ring.step < c.K:
                ring.step = _submit_block(model, shards, ring, home)
                if kill_shard is not None and ring.step > kill_shard[1]:
                    ray.kill(shards[kill_shard[0]])
                    kill_shard = None
                if ring.step % SNAPSHOT_EVERY == 0 and ring.step != c.K:
                    saved = (ring.copy(), ray.get([sh.checkpoint.remote() for sh in shards]))
            finished = ray.get([sh.finish.remote() for sh in shards])
            break
        except ray.exceptions.RayActorError as err:
            recoveries += 1
            if recoveries > MAX_RECOVERIES:
                raise ShardLostError(f"ring shards were lost {recoveries} times; giving up "
                                     f"at step {saved[0].step}") from err
            ring = _recover(ray, shards, saved, args, ring.step)
    parts = [f[0] for f in finished]
    ids, state = _assemble([f[1] for f in finished], [f[2] for f in finished], ring.order)
    # each shard fills its own segment's column and leaves 0 elsewhere: adding the shards is
    # exact, and the sum over segments is then the one Window.result makes
    error = np.sum([p[0] for p in parts], axis=0).sum(axis=-1)
    sums = np.sum([p[1] for p in parts], axis=0).sum(axis=-1)
    estimates = None
    if parts[0][2] is not None:  # each shard holds its own nodes' estimates, NaN elsewhere
        estimates = parts[0][2]
        for p in parts[1:]:
            estimates = np.where(np.isnan(estimates), p[2], estimates)
    return RingRun(error, sums, np.array(ring.targets), estimates, None, ids, state)


def _submit_block(model, shards, ring: _Ring, home) -> int:
    """Submit the next block of steps (one exchange) and return the step it ends at."""
    c: PPSPConfig = model.config
    k = ring.step
    if k == c.join_at:
        at = ring.order.index(c.join_next_to) + 1
        ring.order = (*ring.order[:at], c.join_node, *ring.order[at:])
        ring.members = tuple(m | {c.join_node} if s == home else m
                             for s, m in enumerate(ring.members))
        shards[home].insert.remote(c.join_next_to, c.join_node, model.secrets[c.join_node])
    leaver = c.leave_node if k == c.leave_at else None
    T = 1 if leaver is not None else _block_length(c, ring, k)
    keeper = ring.order[ring.order.index(leaver) - 1] if leaver is not None else None
    if leaver is not None:
        ring.order = tuple(i for i in ring.order if i != leaver)
    if k in (c.join_at, c.leave_at):  # summed over the new ring, as the vectorized ring does
        ring.target = float(model.secrets[list(ring.order)].sum())
    targets = np.full(T, ring.target)
    sizes = np.full(T, len(ring.order))
    ring.targets.extend(targets)
    out = [sh.emit.remote(k, T, leaver if leaver in ring.members[s] else None)
           for s, sh in enumerate(shards)]
    for s, sh in enumerate(shards):
        sh.absorb.remote(out[s - 1], keeper if keeper in ring.members[s] else None,
                         leaver if leaver in ring.members[s] else None, targets, sizes)
    if leaver is not None:
        ring.members = tuple(m - {leaver} for m in ring.members)
    return k + T


def _block_length(c: PPSPConfig, ring: _Ring, k: int) -> int:
    """Steps until the next event, checkpoint or the end, at most the smallest shard's size
    and what ``BLOCK_BYTES`` holds of the largest shard's noise."""
    largest = max(len(m) for m in ring.members)
    T = min(min(len(m) for m in ring.members), max(1, BLOCK_BYTES // (8 * c.replications
                                                                        * largest)))
    stops = [c.K, (k // SNAPSHOT_EVERY + 1) * SNAPSHOT_EVERY]
    stops += [e for e in (c.join_at, c.leave_at) if e is not None and e > k]
    return max(1, min(T, min(stops) - k))


def _recover(ray, shards, saved, args: list[tuple], reached: int) -> _Ring:
    """Replace every dead shard by a new actor, roll all back to the checkpoint ``saved`` (or
    set them up afresh from ``args`` when there is none yet)."""
    ring, states = saved
    lost = [s for s, sh in enumerate(shards) if not _alive(ray, sh)]
    for s in lost:
        ray.kill(shards[s])
        shards[s] = _pool["actor"].remote()
    if states is None:
        ray.get([sh.setup.remote(*a) for sh, a in zip(shards, args, strict=True)])
    else:
        ray.get([sh.restore.remote(state) for sh, state in zip(shards, states, strict=True)])
    print(f"privgames: warning: ring shard{'s' if len(lost) > 1 else ''} "
          f"{', '.join(map(str, lost))} lost before step {reached}; restarted from the "
          f"checkpoint at step {ring.step}", file=sys.stderr)
    return ring.copy()


def _alive(ray, shard) -> bool:
    try:
        ray.get(shard.alive.remote(), timeout=30)
        return True
    except Exception:  # noqa: BLE001 - any failure means the actor is gone
        return False


def _join_home(c: PPSPConfig, segments: list[NDArray]) -> int | None:
    if c.join_at is None:
        return None
    return next(s for s, seg in enumerate(segments) if c.join_next_to in seg)


def _assemble(ids: list[NDArray], states: list[NDArray],
              ring: tuple[int, ...]) -> tuple[NDArray, NDArray]:
    """The shards' node ids and states, joined in ring order."""
    ids, state = np.concatenate(ids), np.concatenate(states, axis=1)
    position = np.empty(ids.max() + 1, dtype=int)
    position[ids] = np.arange(ids.size)
    order = position[np.array(ring)]
    return ids[order], state[:, order]
