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

Each shard builds its own segment from the configuration and the seeds (secrets, states, noise
streams, its window of the estimator): the driver holds no node, only each shard's node count,
the secrets' sum and the per-step records. Every ``SNAPSHOT_EVERY`` steps each shard
checkpoints its state (states, records, the noise streams' positions) into Ray's object
store; the driver keeps the references. A shard that dies is replaced by a new actor restored
from the last checkpoint, the survivors are rolled back to it, and the run replays from there:
it ends with the states of an undisturbed run.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from privgames.environments import progress
from privgames.environments.ppsp_ring import (
    PPSPConfig,
    RingNoise,
    RingRun,
    Schedule,
    Window,
    ring_total,
)
from privgames.environments.ray_session import ensure_ray

#: Steps between checkpoints (a synchronisation point that also detects lost shards).
SNAPSHOT_EVERY = 100
#: Memory per shard for one block's noise ``(T, replications, m)``; bounds the block length.
BLOCK_BYTES = 64 * 2**20
#: Restarts of lost shards after which the run gives up.
MAX_RECOVERIES = 3
#: The final ids and states are gathered in the driver only up to this many numbers.
GATHER_LIMIT = 2**22


class ShardLostError(RuntimeError):
    """Shard actors kept dying: the run gave up after ``MAX_RECOVERIES`` restarts."""


class RingShard:
    """One shard: a contiguous segment of the ring (ids in ring order) and its states, built
    in the shard from the configuration and the seeds (the driver never holds a node)."""

    def setup(self, config: PPSPConfig, secret_state: dict,
              noise_seed: np.random.SeedSequence, segment: int,
              join_secret: float | None) -> None:
        """Take segment ``segment`` of the initial ring for a new run: its nodes' secrets
        (drawn from the model's stream, skipped to the segment), states, noise streams and
        window; ``join_secret``: the joining node's (it joins in the shard of its
        predecessor)."""
        vars(self).clear()
        c = config
        bounds = c.segment_bounds()
        lo, hi = int(bounds[segment]), int(bounds[segment + 1])
        home = c.join_at is not None and lo <= c.join_next_to < hi
        self.config, self.ids = c, np.arange(lo, hi)
        self.window = Window(c, (lo, hi, c.join_node if home else None, segment))
        secrets = draw_secrets(c, secret_state, lo, hi)
        self.state = np.tile(secrets, (c.replications, 1))
        # each slot's secret; the joiner's replaces its id's (as PPSPModel.secrets does)
        self.secrets = np.append(secrets, [join_secret] if self.window.joiner is not None
                                 else [])
        if c.join_at is not None and lo <= c.join_node < hi:
            self.secrets[c.join_node - lo] = join_secret
        self.noise = RingNoise(noise_seed, c, np.append(self.ids, [c.join_node] if home
                                                         else []).astype(int))
        self.std = Schedule(config)
        self.betas: NDArray | None = None
        self._ring: NDArray | None = None  # the ids the cached schedule is for

    def _secret(self, node: int) -> float:
        return float(self.secrets[self.window.slots(np.array([node]))[0]])

    def secret_total(self, leaver: int | None) -> float:
        """The secrets of this segment's nodes (but ``leaver``), summed in ring order."""
        ids = self.ids if leaver is None else self.ids[self.ids != leaver]
        return float(self.secrets[self.window.slots(ids)].sum())

    def predecessor(self, node: int) -> int | None:
        """The node before ``node`` in this segment (``None``: it is the first)."""
        p = int(np.flatnonzero(self.ids == node)[0])
        return int(self.ids[p - 1]) if p else None

    def last(self) -> int:
        return int(self.ids[-1])

    def emit(self, k0: int, T: int, leaver: int | None) -> NDArray:
        """Draw the noise of steps ``k0 .. k0+T-1`` and return the last node's ``T`` messages.

        They depend only on the last ``T`` nodes' states (``T <= m``), stepped here with a
        stale first column that cannot reach the last node within the block. At most one step
        (``T = 1``) has a leaver, who sends ``x - s`` (section IV-E)."""
        R, m = self.config.replications, self.ids.size
        if self._ring is not self.ids:
            self._ring, self._std = self.ids, self.std.for_ring(self.ids)
        self.betas = self._buffer("betas", (T, R, m))
        for t in range(T):
            self.noise.step(self.ids, out=self.betas[t])
            self.betas[t] *= self._std(k0 + t)
        tail, out = self.state[:, m - T:].copy(), np.empty((T, R))
        for t in range(T):
            beta = self.betas[t, :, m - T:]
            d = tail - beta
            if leaver is not None and leaver == self.ids[-1]:
                d[:, -1] = tail[:, -1] - self._secret(leaver)
            out[t] = d[:, -1]
            tail[:, 1:] = d[:, :-1]
            tail += beta
        return out

    def absorb(self, d_in: NDArray, keeper: int | None, leaver: int | None, targets: NDArray,
               sizes: NDArray) -> None:
        """Step the block with the predecessor's messages ``d_in`` (``(T, R)``), apply the
        leave rules, record every step."""
        spare = self._buffer("spare", self.state.shape)
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
        self._buffers["spare"] = spare  # the array not holding the state

    def _buffer(self, name: str, shape: tuple) -> NDArray:
        """A scratch array kept between calls (allocating 8 R m bytes a step costs more than
        the step; a checkpoint leaves the buffers out)."""
        buffers = vars(self).setdefault("_buffers", {})
        if name not in buffers or buffers[name].shape != shape:
            buffers[name] = np.empty(shape)
        return buffers[name]

    def _leave_step(self, beta: NDArray, d_in: NDArray, keeper: int | None,
                    leaver: int | None) -> None:
        """The step in which ``leaver`` leaves (:func:`~privgames.environments.ppsp_ring.
        leave_step`, with the predecessor's message ``d_in`` and either node possibly in
        another shard)."""
        d = self.state - beta
        if leaver is not None:
            p = int(np.flatnonzero(self.ids == leaver)[0])
            d[:, p] = self.state[:, p] - self._secret(leaver)
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

    def insert(self, after: int, node: int) -> None:
        """A node joins after node ``after`` with its secret as its state."""
        pos = int(np.flatnonzero(self.ids == after)[0]) + 1
        self.ids = np.insert(self.ids, pos, node)
        self.window.join(node, after)
        self.state = np.insert(self.state, pos, self._secret(node), axis=1)

    def checkpoint(self) -> dict:
        """Everything this shard holds: states, records and the noise streams' positions."""
        return {k: v for k, v in vars(self).items() if k not in ("_buffers", "betas")}

    def restore(self, saved: dict) -> None:
        """Return to a checkpoint (copied: arrays from Ray's object store are read-only)."""
        vars(self).clear()
        vars(self).update(copy.deepcopy(saved))

    def release(self) -> None:
        """Drop the finished run's arrays (the actor stays for the next run)."""
        vars(self).clear()

    def alive(self) -> bool:
        return True

    def peak_rss(self) -> int:
        """This actor process's peak resident memory so far, bytes (Linux)."""
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

    def finish(self, gather: bool) -> tuple[tuple[NDArray, NDArray, NDArray | None],
                                            NDArray | None, NDArray | None]:
        """Per step: this shard's segment of the estimator error and of the network sum, and
        its nodes' estimates (:meth:`Window.parts`); with ``gather``, its node ids and final
        states."""
        return self.window.parts(), *((self.ids, self.state) if gather else (None, None))


def draw_secrets(config: PPSPConfig, state: dict, lo: int, hi: int) -> NDArray:
    """The secrets of node ids ``[lo, hi)`` (``< n``): the configuration's, or the uniform
    draws on ``[0, 100]`` that :class:`~privgames.environments.ppsp_ring.PPSPModel` makes from
    its generator, whose ``state`` it saved before the draw, skipped ahead to ``lo`` (one
    64-bit draw a number): a shard draws its own nodes' numbers of the whole ring's draw."""
    if config.secrets is not None:
        return np.array(config.secrets[lo:hi], dtype=float)
    bits = getattr(np.random, state["bit_generator"])()
    bits.state = state
    bits.advance(lo)
    return np.random.Generator(bits).uniform(0.0, 100.0, hi - lo)


@dataclass
class _Ring:
    """The driver's view: each shard's node count, the sum of the active secrets, the step
    reached and the target of every step so far (O(shards + K), never a node)."""

    sizes: list[int]
    target: float
    step: int = 0
    targets: list[float] = field(default_factory=list)

    def copy(self) -> _Ring:
        return replace(self, sizes=list(self.sizes), targets=list(self.targets))


def run_ray_ring(model, kill_shard: tuple[int, int] | None = None) -> RingRun:
    """Run ``model``'s SI-PPSP on Ray shards (an embedded local Ray unless one is running).

    The shards build their segments from the seeds; the driver sends each block's step
    numbers and events and keeps per-step records: the final ids and states are gathered only
    when they hold at most ``GATHER_LIMIT`` numbers (else ``None`` in the result).
    ``kill_shard=(shard, step)`` kills that shard's actor once, in the first block that
    reaches ``step`` (fault injection: the run recovers from the last checkpoint).
    """
    ray = ensure_ray()
    c: PPSPConfig = model.config
    join_secret = None
    if c.join_at is not None:
        join_secret = (c.join_secret if c.join_secret is not None else
                       float(draw_secrets(c, model.secret_state, c.join_node, c.join_node + 1)[0]))
    args = [(c, model.secret_state, model.noise_seed, s, join_secret)
            for s in range(c.segments)]
    shards = _lease(ray, len(args))
    for sh, a in zip(shards, args, strict=True):
        sh.setup.remote(*a)
    try:
        ring = _Ring(np.diff(c.segment_bounds()).tolist(),
                     ring_total(ray.get([sh.secret_total.remote(None) for sh in shards])))
        run = _drive(ray, model, shards, ring, args, kill_shard)
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


def _drive(ray, model, shards, ring: _Ring, args: list[tuple], kill_shard) -> RingRun:
    """Submit each block's emit/absorb calls; checkpoint every ``SNAPSHOT_EVERY`` steps (each
    shard's state stays in Ray's object store: the driver keeps the references) and recover
    a lost shard from the last checkpoint (before the first: from ``setup(*args)``),
    detected at a checkpoint or at the end."""
    c: PPSPConfig = model.config
    saved = (ring.copy(), None)  # None: the shards as set up
    recoveries = reported = 0
    gather = c.final_size * c.replications <= GATHER_LIMIT
    while True:
        try:
            before = None  # the block submitted before: its calls and the step it ends at
            while ring.step < c.K:
                ring.step, calls = _submit_block(ray, c, shards, ring)
                if before is not None:  # one block stays queued while the bar moves
                    ray.get(before[0])
                    reported = _report(reported, before[1], c.K)
                if kill_shard is not None and ring.step > kill_shard[1]:
                    ray.kill(shards[kill_shard[0]])
                    kill_shard = None
                if ring.step % SNAPSHOT_EVERY == 0 and ring.step != c.K:
                    states = [sh.checkpoint.remote() for sh in shards]
                    ray.get([sh.alive.remote() for sh in shards])  # each after its checkpoint
                    saved = (ring.copy(), states)
                before = (calls, ring.step)
            finished = ray.get([sh.finish.remote(gather) for sh in shards])
            _report(reported, c.K, c.K)
            break
        except ray.exceptions.RayActorError as err:
            recoveries += 1
            if recoveries > MAX_RECOVERIES:
                raise ShardLostError(f"ring shards were lost {recoveries} times; giving up "
                                     f"at step {saved[0].step}") from err
            ring = _recover(ray, shards, saved, args, ring.step)
    parts = [f[0] for f in finished]
    ids = state = None
    if gather:  # the segments in order are the ring in order
        ids = np.concatenate([f[1] for f in finished])
        state = np.concatenate([f[2] for f in finished], axis=1)
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


def _report(reported: int, step: int, K: int) -> int:
    """Report the steps from ``reported`` to ``step`` to the progress bar (a replay after a
    recovery counts once); the steps reported now."""
    if step > reported:
        progress.advance((step - reported) / K)
    return max(reported, step)


def _submit_block(ray, c: PPSPConfig, shards, ring: _Ring) -> tuple[int, list]:
    """Submit the next block of steps (one exchange); the step it ends at, and its calls."""
    k = ring.step
    if k == c.join_at:
        home = _segment_of(c, c.join_next_to)
        shards[home].insert.remote(c.join_next_to, c.join_node)
        ring.sizes[home] += 1
    leaver = c.leave_node if k == c.leave_at else None
    T = 1 if leaver is not None else _block_length(c, ring, k)
    keeper = at = keeper_at = None
    if leaver is not None:  # its predecessor keeps its state: in its shard, or the last before
        at = keeper_at = _segment_of(c, leaver)
        keeper = ray.get(shards[at].predecessor.remote(leaver))
        if keeper is None:
            keeper_at = (at - 1) % len(shards)
            keeper = ray.get(shards[keeper_at].last.remote())
    if k in (c.join_at, c.leave_at):  # summed over the new ring, as the vectorized ring does
        ring.target = ring_total(ray.get([sh.secret_total.remote(leaver) for sh in shards]))
    if leaver is not None:
        ring.sizes[at] -= 1
    targets = np.full(T, ring.target)
    sizes = np.full(T, sum(ring.sizes))
    ring.targets.extend(targets)
    out = [sh.emit.remote(k, T, leaver if s == at else None) for s, sh in enumerate(shards)]
    calls = [sh.absorb.remote(out[s - 1], keeper if s == keeper_at else None,
                              leaver if s == at else None, targets, sizes)
             for s, sh in enumerate(shards)]
    return k + T, calls


def _segment_of(c: PPSPConfig, node: int) -> int:
    """The shard that holds ``node`` (an id of the initial ring)."""
    return int(np.searchsorted(c.segment_bounds(), node, side="right")) - 1


def _block_length(c: PPSPConfig, ring: _Ring, k: int) -> int:
    """Steps until the next event, checkpoint or the end, at most the smallest shard's size
    and what ``BLOCK_BYTES`` holds of the largest shard's noise."""
    largest = max(ring.sizes)
    T = min(min(ring.sizes), max(1, BLOCK_BYTES // (8 * c.replications * largest)))
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
