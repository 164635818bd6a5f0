"""The SI-PPSP ring on Ray: shards of consecutive nodes as actors (``backend="ray"``).

Each shard owns a contiguous segment of the ring and its own copies of the noise streams of its
node ids, so it draws the numbers the vectorized ring would give those nodes; per step it emits
its last node's message to the next shard and absorbs the previous shard's. With the same seed
the states equal the vectorized backend's. A shard that dies is detected at the next snapshot
and the run ends with :class:`ShardLostError` naming the lost nodes and the sum they carried.
"""

from __future__ import annotations

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

#: Steps between snapshots (a synchronisation point that also detects lost shards).
SNAPSHOT_EVERY = 100


class ShardLostError(RuntimeError):
    """A shard actor died: its nodes and the part of the network sum they held are lost."""


class RingShard:
    """One shard: a contiguous segment of the ring (ids in ring order) and its states."""

    def __init__(self, config: PPSPConfig, seed: np.random.SeedSequence, ids: NDArray,
                 state: NDArray, noise_ids: list[int], secrets: NDArray) -> None:
        self.config, self.ids, self.state, self.secrets = config, ids, state, secrets
        self.noise = RingNoise(seed, config, noise_ids)
        self.std = Schedule(config)
        self.window = Window(config)

    def emit(self, k: int, leaver: int | None) -> NDArray:
        """Draw step ``k``'s noise and compute the messages; return the last node's."""
        self.beta = self.std(k, self.ids) * self.noise.step(self.ids)
        self.d = self.state - self.beta
        if leaver is not None:
            p = int(np.flatnonzero(self.ids == leaver)[0])
            self.d[:, p] = self.state[:, p] - self.secrets[leaver]
        return self.d[:, -1].copy()

    def absorb(self, d_in: NDArray, keeper: int | None, leaver: int | None, target: float,
               m: int) -> None:
        """Finish step ``k``: shift the messages in, apply the leave rules, record."""
        shifted = np.concatenate([d_in[:, None], self.d[:, :-1]], axis=1)
        new = shifted + self.beta
        if keeper is not None:  # the leaver's predecessor keeps its state and receives
            q = int(np.flatnonzero(self.ids == keeper)[0])
            new[:, q] = shifted[:, q] + self.state[:, q]
        if leaver is not None:
            p = int(np.flatnonzero(self.ids == leaver)[0])
            new = np.delete(new, p, axis=1)
            self.ids = np.delete(self.ids, p)
        self.state = new
        self.window.record(self.ids, self.state, target, m)

    def insert(self, after: int, node: int, value: float) -> None:
        """A node joins after node ``after`` with state ``value``."""
        pos = int(np.flatnonzero(self.ids == after)[0]) + 1
        self.ids = np.insert(self.ids, pos, node)
        self.window.join(node, after)
        self.state = np.insert(self.state, pos, value, axis=1)

    def snapshot(self) -> tuple[NDArray, NDArray]:
        return self.ids.copy(), self.state.copy()

    def records(self) -> tuple[NDArray, NDArray, NDArray | None]:
        """Per step: this shard's segment of the estimator error and of the network sum, and
        its nodes' estimates (:meth:`Window.parts`)."""
        return self.window.parts()


def run_ray_ring(model, kill_shard: tuple[int, int] | None = None) -> RingRun:
    """Run ``model``'s SI-PPSP on Ray shards (an embedded local Ray unless one is running).

    ``kill_shard=(shard, step)`` kills that shard's actor at that step (fault injection).
    """
    ray = ensure_ray()
    c: PPSPConfig = model.config
    labels = c.segment_of()[model.ids]
    segments = [list(model.ids[labels == s]) for s in range(labels.max() + 1)]
    home = _join_home(c, segments)
    actor = ray.remote(RingShard)
    starts = np.cumsum([0] + [len(seg) for seg in segments])[:-1]
    shards = [actor.remote(c, model.noise_seed, np.array(seg),
                           model.state[:, lo:lo + len(seg)],
                           seg + ([c.join_node] if home == s else []), model.secrets)
              for s, (lo, seg) in enumerate(zip(starts, segments, strict=True))]
    try:
        return _drive(ray, model, shards, segments, home, kill_shard)
    finally:  # a finished or failed run leaves no actors behind in the session
        for shard in shards:
            ray.kill(shard)


def _drive(ray, model, shards, segments, home, kill_shard) -> RingRun:
    """Submit every step's emit/absorb calls, snapshot every ``SNAPSHOT_EVERY`` steps."""
    c: PPSPConfig = model.config
    members = [set(seg) for seg in segments]
    ring = list(model.ids)
    snapshot = (0, ray.get([sh.snapshot.remote() for sh in shards]))
    targets = []
    for k in range(c.K):
        if k == c.join_at:
            pos = ring.index(c.join_next_to) + 1
            ring.insert(pos, c.join_node)
            members[home].add(c.join_node)
            shards[home].insert.remote(c.join_next_to, c.join_node, model.secrets[c.join_node])
        leaver = c.leave_node if k == c.leave_at else None
        keeper = ring[ring.index(leaver) - 1] if leaver is not None else None
        if leaver is not None:
            ring.remove(leaver)
        target = float(model.secrets[ring].sum())
        targets.append(target)
        out = [sh.emit.remote(k, leaver if leaver in members[s] else None)
               for s, sh in enumerate(shards)]
        for s, sh in enumerate(shards):
            sh.absorb.remote(out[s - 1], keeper if keeper in members[s] else None,
                             leaver if leaver in members[s] else None, target, len(ring))
        if leaver is not None:
            for mem in members:
                mem.discard(leaver)
        if kill_shard is not None and k == kill_shard[1]:
            ray.kill(shards[kill_shard[0]])
        if (k + 1) % SNAPSHOT_EVERY == 0 or k == c.K - 1:
            snapshot = _snapshot(ray, shards, snapshot, k + 1)
    parts = ray.get([sh.records.remote() for sh in shards])
    ids, state = _assemble(snapshot[1], ring)
    # each shard fills its own segment's column and leaves 0 elsewhere: adding the shards is
    # exact, and the sum over segments is then the one Window.result makes
    error = np.sum([p[0] for p in parts], axis=0).sum(axis=-1)
    sums = np.sum([p[1] for p in parts], axis=0).sum(axis=-1)
    estimates = None
    if parts[0][2] is not None:  # each shard holds its own nodes' estimates, NaN elsewhere
        estimates = parts[0][2]
        for p in parts[1:]:
            estimates = np.where(np.isnan(estimates), p[2], estimates)
    return RingRun(error, sums, np.array(targets), estimates, None, ids, state)


def _join_home(c: PPSPConfig, segments: list[list[int]]) -> int | None:
    if c.join_at is None:
        return None
    return next(s for s, seg in enumerate(segments) if c.join_next_to in seg)


def _snapshot(ray, shards, previous, step):
    try:
        return step, ray.get([sh.snapshot.remote() for sh in shards])
    except ray.exceptions.RayActorError as err:
        lost = [s for s, sh in enumerate(shards) if not _alive(ray, sh)]
        last_step, states = previous
        details = []
        for s in lost:
            ids, state = states[s]
            details.append(f"shard {s} (nodes {', '.join(map(str, ids))}) carried "
                           f"{state[0].sum():.6g} of the network sum at step {last_step}")
        raise ShardLostError(
            f"ring shard lost between step {last_step} and step {step}: "
            + "; ".join(details) + ". The surviving nodes' estimates miss that part of the sum "
            "(no checkpoint to recover from).") from err


def _alive(ray, shard) -> bool:
    try:
        ray.get(shard.snapshot.remote(), timeout=10)
        return True
    except Exception:  # noqa: BLE001 - any failure means the actor is gone
        return False


def _assemble(states: list[tuple[NDArray, NDArray]], ring: list[int]) -> tuple[NDArray, NDArray]:
    ids = np.concatenate([s[0] for s in states])
    state = np.concatenate([s[1] for s in states], axis=1)
    order = np.array([int(np.flatnonzero(ids == i)[0]) for i in ring])
    return ids[order], state[:, order]
