"""The PPSP ring: nodes sum their secrets by passing masked states to their successors.

SI-PPSP is vectorized over replications and nodes (the model owns the state arrays, the Mesa
agents read them through their ring position); AI-PPSP uses local Poisson clocks; nodes leave
and join as in section IV-E. Paper: ``papers/ppsp-ring-summation.txt``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from privgames.agents.ring_node import RingNode
from privgames.environments.base import Environment
from privgames.environments.config import (
    ConfigError,
    Footprint,
    check_choice,
    check_int,
    check_real,
)
from privgames.environments.streams import child, generator, spawn
from privgames.mechanisms.ppsp import (
    SCHEDULES,
    eavesdropper_statistics,
    epsilon,
    estimator_error_variance,
    gaussian_epsilon,
    noise_std,
    utility_bound,
    variance_bound,
)

NOISES = ("gaussian", "laplace")
PROTOCOLS = ("sync", "async")
BACKENDS = ("vectorized", "ray")
#: Most node ids per noise stream: the noise of ids ``[b B, (b+1) B)`` comes from stream ``b``,
#: so a shard of nodes draws exactly the numbers the whole ring would give them.
NOISE_BLOCK = 16384
#: The estimator keeps the last ``n`` states of every node; above this size it is not tracked.
MAX_WINDOW_BYTES = 256 * 2**20
#: A step's fixed cost in node-steps, and the set-up's cost in steps, for the work estimate,
#: fitted to ppsp-ring's runs at n = 10 (K = 500), 2 10^4 (K = 200) and 2 10^5 (K = 60, 20
#: replications), 0.2 ms a step, 14 ns a node-step, a set-up of 23 steps.
STEP_OPS = 14000.0
SETUP_STEPS = 23.0

EXAMPLE2_SECRETS = (25.1698, 15.3211, 69.9334, 45.7828, 98.0388, 36.6547, 44.2351, 11.1407,
                    53.7235, 100.0)


def _per_node(name: str, value: object, n: int, low: float, high: float = math.inf,
              low_open: bool = True, high_open: bool = False) -> float | tuple[float, ...]:
    """One number shared by every node (kept as one number: O(1) for any ``n``) or n."""
    if not isinstance(value, list | tuple):
        return check_real(name, value, low, high, low_open, high_open)
    if len(value) != n:
        raise ConfigError(f"{name} has {len(value)} entries: give one number or n={n}")
    return tuple(check_real(f"{name}[{i}]", v, low, high, low_open, high_open)
                 for i, v in enumerate(value))


@dataclass(frozen=True)
class PPSPConfig:
    """Parameters of a PPSP ring.

    Attributes:
        n: nodes (> 2). K: protocol steps (sync) or ticks per node (async).
        schedule: ``harmonic`` ``v = c/(k+d)`` or ``geometric`` ``v = c phi^k``; ``v`` is the
            noise's standard deviation. ``c`` (> 0), ``d`` (>= 0; > 0 to simulate the
            harmonic schedule) and ``phi`` (in (0, 1)) are one number or one per node.
        noise: ``gaussian`` or ``laplace``.
        secrets: one per node (default: uniform on [0, 100]).
        leave_at, leave_node: node ``leave_node`` leaves gracefully at step ``leave_at``.
        join_at, join_node, join_next_to, join_secret: node ``join_node`` (an id not on the
            ring then; default: the node that left) joins after ``join_next_to`` (default: the
            leaver's predecessor, else the last node) at step ``join_at`` with secret
            ``join_secret`` (default: its old secret).
        protocol: ``sync`` (SI-PPSP) or ``async`` (AI-PPSP, static ring).
        backend: ``vectorized`` or ``ray`` (shards of consecutive nodes as Ray actors).
        shards: Ray actors. replications: independent runs vectorized together.
        delta: adjacency of secrets for the privacy budget (Theorem 3).
        dp_delta: the DP failure probability of the Gaussian ring's exact epsilon.
    """

    n: int = 10
    K: int = 2000
    schedule: str = "harmonic"
    c: float | tuple[float, ...] = 1000.0
    d: float | tuple[float, ...] = 1.0
    phi: float | tuple[float, ...] = 0.99
    noise: str = "gaussian"
    secrets: tuple[float, ...] | None = None
    leave_at: int | None = None
    leave_node: int | None = None
    join_at: int | None = None
    join_node: int | None = None
    join_next_to: int | None = None
    join_secret: float | None = None
    protocol: str = "sync"
    backend: str = "vectorized"
    shards: int = 2
    replications: int = 20
    delta: float = 1.0
    dp_delta: float = 1e-5

    def footprint(self) -> Footprint:
        """States, noise and spare arrays ``(R, n)``, the estimator's window (bounded by
        ``MAX_WINDOW_BYTES``), a node agent each, and the per-step records; the attack
        experiments also keep every message ``(K, R, n)``. Work: node-steps, a step's fixed cost
        (:data:`STEP_OPS`) and the set-up (:data:`SETUP_STEPS`); on Ray, at most an exchange
        with the shards a step."""
        cap = self.capacity
        work = (float(self.K) + SETUP_STEPS) * cap * self.replications + self.K * STEP_OPS
        window = min(8.0 * cap * cap * self.replications, MAX_WINDOW_BYTES)
        estimates = 8.0 * self.K * cap if window < MAX_WINDOW_BYTES else 0.0
        if self.backend == "ray":  # the largest shard: its segment's arrays and noise block
            m = -(-cap // self.segments)
            shard = 6 * 8.0 * self.replications * m + window + 64 * 2**20 + estimates
            driver = 8.0 * self.K * 2 * self.replications * self.segments + estimates
            return Footprint(max(shard, driver), work, "n" if shard >= driver else "K",
                             exchanges=float(self.K))
        state = 8.0 * self.replications * cap
        records = 8.0 * self.K * (2 * self.replications + cap)
        peak = 6 * state + window + records + 2000.0 * cap
        return Footprint(peak, work, "n" if cap * self.replications >= self.K else "K")

    def __post_init__(self) -> None:
        n = check_int("n", self.n, 3)
        check_int("K", self.K, 1)
        check_choice("schedule", self.schedule, SCHEDULES)
        object.__setattr__(self, "c", _per_node("c", self.c, n, 0.0))
        object.__setattr__(self, "d", _per_node("d", self.d, n, 0.0, low_open=False))
        object.__setattr__(self, "phi", _per_node("phi", self.phi, n, 0.0, 1.0, True, True))
        if self.schedule == "harmonic" and np.min(self.d) == 0:
            raise ConfigError("d=0 gives v(0) = c/0, infinite noise at k=0: to simulate the "
                              "harmonic schedule d must be > 0")
        check_choice("noise", self.noise, NOISES)
        if self.secrets is not None:
            if not isinstance(self.secrets, list | tuple):
                raise ConfigError(f"secrets={self.secrets!r} is not a list: secrets must be n={n} "
                                  "numbers")
            object.__setattr__(self, "secrets", _per_node("secrets", list(self.secrets), n,
                                                          -math.inf, low_open=False))
        check_choice("protocol", self.protocol, PROTOCOLS)
        check_choice("backend", self.backend, BACKENDS)
        check_int("replications", self.replications, 1)
        check_real("delta", self.delta, 0.0, low_open=True)
        check_real("dp_delta", self.dp_delta, 0.0, 1.0, low_open=True, high_open=True)
        self._check_events()
        check_int("shards", self.shards, 1)
        if self.backend == "ray":
            check_int("shards", self.shards, 1, self.n // 2)
            if self.protocol != "sync":
                raise ConfigError("backend='ray' runs protocol='sync' only")

    def _check_events(self) -> None:
        n = self.n
        if (self.leave_at is not None or self.join_at is not None) and self.protocol != "sync":
            raise ConfigError("leave_at/join_at need protocol='sync': the asynchronous ring here "
                              "is static")
        if self.leave_at is not None:
            check_int("leave_at", self.leave_at, 0, self.K - 1)
            node = n - 1 if self.leave_node is None else self.leave_node
            if not isinstance(node, int) or not 0 <= node < n:
                raise ConfigError(f"leave_node={node!r} is not on the ring: leave_node must be a "
                                  f"node id in [0, {n - 1}]")
            object.__setattr__(self, "leave_node", node)
        if self.join_at is not None:
            check_int("join_at", self.join_at, 0, self.K - 1)
            left = self.leave_node if self.leave_at is not None and self.leave_at < self.join_at \
                else None
            node = left if self.join_node is None else self.join_node
            if node is None:
                raise ConfigError("join_node is missing: give the id of the joining node (a new "
                                  f"id >= {n}, or the id of a node that left before join_at)")
            if not isinstance(node, int) or node < 0 or (node < n and node != left):
                raise ConfigError(f"join_node={node!r} is an existing id: a joining node needs an "
                                  f"id not on the ring at join_at (>= {n}, or the node that left)")
            default = (left - 1) % n if left is not None else n - 1
            nxt = default if self.join_next_to is None else self.join_next_to
            on_ring = set(range(n)) - ({left} if left is not None else set())
            if isinstance(nxt, bool) or not isinstance(nxt, int) or nxt not in on_ring:
                raise ConfigError(f"join_next_to={nxt!r} is not on the ring at join_at: it must "
                                  f"be one of {sorted(on_ring)}")
            secret = self.join_secret
            if secret is not None:
                check_real("join_secret", secret)
            if secret is None and node >= n:
                raise ConfigError("join_secret is missing: a new node needs a secret")
            object.__setattr__(self, "join_node", node)
            object.__setattr__(self, "join_next_to", nxt)

    @property
    def capacity(self) -> int:
        """Node ids ever used (noise streams are drawn for all of them every step)."""
        extra = self.join_node + 1 if self.join_at is not None else 0
        return max(self.n, extra)

    @property
    def final_size(self) -> int:
        """Nodes on the ring after the last step (leave and join are within the ``K`` steps)."""
        return (self.n - (self.leave_at is not None) + (self.join_at is not None))

    @property
    def block(self) -> int:
        """Node ids per noise stream: the capacity split into equal blocks of at most
        ``NOISE_BLOCK``, so the ring draws no more numbers than it has nodes (bar rounding)."""
        return math.ceil(self.capacity / math.ceil(self.capacity / NOISE_BLOCK))

    @property
    def segments(self) -> int:
        """Shard segments of the initial ring (``min(shards, n)``)."""
        return min(self.shards, self.n)

    def segment_bounds(self) -> NDArray:
        """Where each segment of the initial ring starts, and the end: ``segments + 1`` ids
        (``np.array_split``'s cut points)."""
        size, extra = divmod(self.n, self.segments)
        lengths = [size + 1] * extra + [size] * (self.segments - extra)
        return np.concatenate([[0], np.cumsum(lengths)])

    def segment_of(self) -> NDArray:
        """The shard segment of every node id: ``shards`` contiguous runs of the initial ring
        (a joining node moves to its predecessor's, :meth:`Window.join`). Both backends add the
        estimator error, the network sum and the secrets' sum (the target) per segment first,
        then over segments, so that their floating-point sums are the same numbers added in the
        same order."""
        labels = np.zeros(self.capacity, dtype=int)
        labels[:self.n] = np.repeat(np.arange(self.segments), np.diff(self.segment_bounds()))
        return labels

    def schedule_arrays(self) -> tuple[NDArray, NDArray, NDArray | None]:
        """``c``, ``d``, ``phi`` (None if harmonic) by node id; a new joined id uses node 0's."""
        idx = np.where(np.arange(self.capacity) < self.n, np.arange(self.capacity), 0)
        c, d, phi = (np.broadcast_to(np.asarray(v, dtype=float), (self.n,))[idx]
                     for v in (self.c, self.d, self.phi))
        return c, d, (None if self.schedule == "harmonic" else phi)


class Schedule:
    """``v_i(k)`` by node id: one number per parameter when every node shares it (O(1) for
    any ring), else arrays by node id."""

    def __init__(self, config: PPSPConfig) -> None:
        shared = all(not isinstance(v, tuple) for v in (config.c, config.d, config.phi))
        if shared:
            self.c, self.d = float(config.c), float(config.d)
            self.phi = None if config.schedule == "harmonic" else float(config.phi)
        else:
            self.c, self.d, self.phi = config.schedule_arrays()
        self.shared = shared

    def __call__(self, k: ArrayLike, ids: NDArray) -> NDArray:
        if self.shared:
            v = noise_std(k, self.c, self.d, self.phi)
            return np.broadcast_to(v, np.broadcast_shapes(np.shape(v), np.shape(ids)))
        return noise_std(k, self.c[ids], self.d[ids], None if self.phi is None else self.phi[ids])

    def for_ring(self, ids: NDArray):
        """``k -> v(k)`` for the nodes ``ids``: a scalar when they share their parameters."""
        if self.shared:
            return lambda k: noise_std(k, self.c, self.d, self.phi)
        params = [self.c[ids], self.d[ids]] + ([] if self.phi is None else [self.phi[ids]])
        if all(np.all(p == p[0]) for p in params):
            params = [float(p[0]) for p in params]
        return lambda k: noise_std(k, *params)


def ring_total(parts: ArrayLike) -> float:
    """A ring-wide sum from its segments' sums in segment order (the sum both backends make
    of the secrets: each shard adds its own segment's)."""
    return float(np.sum(np.asarray(parts, dtype=float)))


class RingNoise:
    """Standard (unit-variance) noise per node id and step, one stream per block of ids.

    Whoever owns ids ``[lo, hi)`` draws the blocks overlapping them once per step and gets the
    same numbers, so a sharded ring reproduces the vectorized one exactly.
    """

    def __init__(self, seed: np.random.SeedSequence, config: PPSPConfig, ids) -> None:
        self.replications, self.kind, self.block = config.replications, config.noise, config.block
        blocks = np.unique(np.asarray(ids, dtype=int) // self.block).tolist()
        self.buffer = np.empty((len(blocks), self.replications, self.block))
        self._ids: NDArray | None = None
        self._columns: slice | NDArray = slice(None)
        self.streams = {b: generator(child(seed, b)) for b in blocks}

    def draw(self) -> dict[int, NDArray]:
        """One step's noise for every owned block: ``{block: (replications, block size)}``."""
        if self.kind == "gaussian":  # into one reused buffer: the caller must not keep it
            for i, g in enumerate(self.streams.values()):
                g.standard_normal(out=self.buffer[i])
            return dict(zip(self.streams, self.buffer, strict=True))
        size = (self.replications, self.block)
        return {b: g.laplace(0.0, 1.0 / math.sqrt(2.0), size) for b, g in self.streams.items()}

    def step(self, ids: NDArray, out: NDArray | None = None) -> NDArray:
        """Draw this step's noise and return the columns of node ids ``ids`` in ring order
        (into ``out`` when given: consecutive ids are copied block by block, never joined)."""
        blocks = self.draw()
        first = min(blocks)
        if ids is not self._ids:  # consecutive ids are a slice (a view), others a gather
            self._ids = ids
            lo = int(ids[0]) - first * self.block
            self._columns = (slice(lo, lo + ids.size) if np.all(np.diff(ids) == 1)
                             else ids - first * self.block)
        if out is not None and isinstance(self._columns, slice):
            lo, hi = self._columns.start, self._columns.stop
            for b, numbers in blocks.items():
                a = (b - first) * self.block  # the block's first column
                s, e = max(lo, a), min(hi, a + self.block)
                if s < e:
                    out[:, s - lo:e - lo] = numbers[:, s - a:e - a]
            return out
        if len(blocks) == 1:
            full = blocks[first]
        elif self.kind == "gaussian" and self.replications == 1:
            full = self.buffer.reshape(1, -1)  # the blocks are already side by side
        else:
            full = np.concatenate([blocks[b] for b in sorted(blocks)], axis=1)
        if out is None:
            return full[:, self._columns]
        out[...] = full[:, self._columns]
        return out


def leave_step(x: NDArray, beta: NDArray, leave: int, leave_secret: float) -> NDArray:
    """One SI-PPSP step in ring order (last axis) in which the node at ``leave`` leaves.

    The leaver sends ``x_p - s_p`` instead of ``x_p - beta_p``; its predecessor sends nothing and
    keeps its state: ``x_{p-1}(k+1) = x_{p-1}(k) + d_{p-2}(k)`` (section IV-E). The others step as
    usual; the leaver's column is removed from the result.
    """
    d = x - beta
    d[..., leave] = x[..., leave] - leave_secret
    shifted = np.roll(d, 1, axis=-1)
    out = shifted + beta
    pred = (leave - 1) % x.shape[-1]
    out[..., pred] = shifted[..., pred] + x[..., pred]
    return np.delete(out, leave, axis=-1)


@dataclass
class RingRun:
    """What a run records: per-step error and states, and the ring at the end."""

    error: NDArray            # (steps, replications): sum_i |y_i - sum of active secrets|
    sums: NDArray             # (steps, replications): network sum of the states
    targets: NDArray          # (steps,): sum of the active nodes' secrets
    estimates: NDArray | None  # (steps, n_max) estimator of replication 0 by node id, or None
    messages: NDArray | None  # (steps, replications, n) transmitted d (static ring) or None
    ids: NDArray | None       # ring order at the end (None: a Ray ring too large to gather)
    state: NDArray | None     # (replications, m) final states in ring order (likewise)


class PPSPModel(Environment):
    """A PPSP ring with Mesa nodes over vectorized state arrays.

    Attributes:
        config: the validated configuration.
        secrets: secret per node id.
        ids: node ids in ring order; ``state``: ``(replications, len(ids))`` states.
        nodes: ``RingNode`` agents by id.

    ``step()`` is one protocol step (Mesa's ``steps`` counts them), ``run(rounds)`` runs the
    remaining of the ``K`` steps by default, :meth:`record` returns what the run recorded and
    :meth:`results` the per-step trajectory. With ``backend="ray"`` the whole run happens in
    one :meth:`run` on Ray shards, which then sets ``steps`` to ``K``; the shards build the
    ring (secrets, states, noise, the Mesa nodes are not made in the driver), and ``ids`` and
    ``state`` are the final ring's when it is small enough to gather
    (:data:`~privgames.environments.ppsp_ray.GATHER_LIMIT`), else ``None``.
    """

    def __init__(self, config: PPSPConfig, seed: int | np.random.SeedSequence | None = None,
                 record_messages: bool = False) -> None:
        own, self.noise_seed, clock = spawn(seed, 3)  # secrets and learning; noise; clocks
        super().__init__(config, own)
        c = config
        self.secret_state = self.rng.bit_generator.state  # where the secrets' draw starts
        self._ray_run: RingRun | None = None
        self.std = Schedule(c)
        if c.backend == "ray":  # the shards build the ring: the driver holds no node
            self.nodes: dict[int, RingNode] = {}
            self.ids = self.state = None
            return
        secrets = (np.array(c.secrets) if c.secrets is not None
                   else self.rng.uniform(0.0, 100.0, c.n))
        self.secrets = np.zeros(c.capacity)
        self.secrets[:c.n] = secrets
        if c.join_at is not None:
            self.secrets[c.join_node] = (c.join_secret if c.join_secret is not None
                                         else self.secrets[c.join_node])
        self.ids = np.arange(c.n)
        self.state = np.tile(secrets, (c.replications, 1))
        node_c = c.schedule_arrays()[0]  # per node id (a joining id takes node 0's)
        self.nodes = {i: RingNode(self, i, self.secrets[i], node_c[i],
                                  (1.0, 1.0, 1.0)) for i in range(c.capacity)}
        self.messages: list[NDArray] | None = [] if record_messages else None
        self.window = Window(c)
        if c.protocol == "sync":
            self._noise = RingNoise(self.noise_seed, c, range(c.capacity))
            self._ring = None
        else:
            self._clock = generator(clock)
            self.mailbox = np.zeros((c.replications, c.n))
            self.ticks = np.zeros((c.replications, c.n), dtype=int)
            self.held = np.zeros((c.replications, c.n))  # holdings seen at each node's ticks

    def state_of(self, node_id: int) -> NDArray:
        """Node ``node_id``'s state in every replication."""
        return self.state[:, int(np.flatnonzero(self.ids == node_id)[0])]

    # --- protocols ----------------------------------------------------------------------
    def step(self) -> None:
        """One protocol step: every node sends once (SI-PPSP), or ``n`` clock ticks (AI-PPSP)."""
        if self.config.backend == "ray":
            raise ConfigError("backend='ray' runs the whole ring in run(): call run(), not step()")
        if self.config.protocol == "sync":
            self._sync_step(self.steps - 1)  # Mesa counted this step before calling it
        else:
            self._async_step()

    def rounds_left(self) -> int:
        """Protocol steps left of the configured ``K``."""
        return self.config.K - self.steps

    def run(self, rounds: int | None = None) -> PPSPModel:
        """Run ``rounds`` protocol steps (default: the rest of the ``K``) and return the model.

        The Ray backend runs all ``K`` steps at once on its shards."""
        c = self.config
        if c.backend != "ray":
            return super().run(rounds)
        if self.steps or rounds not in (None, c.K):
            raise ConfigError(f"rounds={rounds!r}: backend='ray' runs all K={c.K} steps in one "
                              "run() from the start")
        from privgames.environments.ppsp_ray import run_ray_ring

        self._ray_run = run = run_ray_ring(self)
        self.ids, self.state = run.ids, run.state
        self.steps = c.K
        return self

    def record(self) -> RingRun:
        """What the run has recorded so far: per-step errors and sums, final ring and states."""
        if self._ray_run is not None:
            return self._ray_run
        return self.window.result(self.ids, self.state,
                                  None if self.messages is None else np.array(self.messages))

    def results(self) -> pd.DataFrame:
        """Per step: estimator error (mean and SE over replications), sum drift, target."""
        return trajectory_frame(self.record())

    def _sync_step(self, k: int) -> None:
        c = self.config
        self._join_if_due(k)
        if self._ring is not self.ids:  # the ring changed: refresh what depends on it
            self._ring, self._std = self.ids, self.std.for_ring(self.ids)
            self._target = self._secret_total()
            self._spare = np.empty_like(self.state)
        beta = self._noise.step(self.ids)
        beta *= self._std(k)
        if self.messages is not None:
            self.messages.append(self.state - beta)
        if k == c.leave_at:
            p = int(np.flatnonzero(self.ids == c.leave_node)[0])
            self.state = leave_step(self.state, beta, p, self.secrets[c.leave_node])
            self.ids = np.delete(self.ids, p)
            self._target = self._secret_total()
        else:  # x(k+1) = A x(k) + (I - A) beta(k), in place: d = x - beta, shifted, plus beta
            spare = self._spare
            np.subtract(self.state, beta, out=self.state)
            spare[:, 1:] = self.state[:, :-1]
            spare[:, 0] = self.state[:, -1]
            np.add(spare, beta, out=spare)
            self.state, self._spare = spare, self.state
        self.window.record(self.ids, self.state, self._target, self.ids.size)

    def _secret_total(self) -> float:
        """The active nodes' secrets summed per segment, then over segments (as the Ray
        ring's shards and driver sum them)."""
        secrets, segments = self.secrets[self.ids], self.window.segments_of(self.ids)
        return ring_total([secrets[segments[j]].sum() if j in segments else 0.0
                           for j in range(self.config.segments)])

    def _join_if_due(self, k: int) -> None:
        c = self.config
        if k != c.join_at:
            return
        pos = int(np.flatnonzero(self.ids == c.join_next_to)[0]) + 1
        self.ids = np.insert(self.ids, pos, c.join_node)
        self.window.join(c.join_node, c.join_next_to)
        self.state = np.insert(self.state, pos, self.secrets[c.join_node], axis=1)

    def _async_step(self) -> None:
        """AI-PPSP: every node ticks on its own rate-1 Poisson clock; a step is ``n`` ticks.

        On a tick node ``i`` sends ``x_i - beta_i`` to its successor's mailbox and sets
        ``x_i <- beta_i + (its mailbox)``, emptying it; so ``sum_i (x_i + mailbox_i)`` is
        invariant. The next ticking node is uniform among the ``n`` (superposed clocks), and
        ``beta_i`` uses node ``i``'s own tick count ``k_i`` in its schedule. The mass moves one
        hop per tick of its holder, so it coalesces and circles the ring; each unit of it is
        equally likely at any node in the long run, and by PASTA a node's estimate of the sum is
        ``n`` times the mean of what it held (``x_i + mailbox_i``) just before each of its ticks
        so far. Its error falls like ``1/sqrt(ticks)``, not geometrically as in SI-PPSP.
        """
        c = self.config
        R, n = c.replications, c.n
        rows, rng = np.arange(R), self._clock
        for _ in range(n):
            i = rng.integers(0, n, R)
            k_i = self.ticks[rows, i]
            self.held[rows, i] += self.state[rows, i] + self.mailbox[rows, i]
            z = (rng.standard_normal(R) if c.noise == "gaussian"
                 else rng.laplace(0.0, 1.0 / math.sqrt(2.0), R))
            beta = self.std(k_i, i) * z
            self.mailbox[rows, (i + 1) % n] += self.state[rows, i] - beta
            self.state[rows, i] = beta + self.mailbox[rows, i]
            self.mailbox[rows, i] = 0.0
            self.ticks[rows, i] += 1
        target = float(self.secrets[:n].sum())
        estimate = n * self.held / np.maximum(self.ticks, 1)
        self.window.append(np.abs(estimate - target).sum(axis=1)[:, None],
                           (self.state.sum(axis=1) + self.mailbox.sum(axis=1))[:, None], target)

    # --- nodes choosing their noise ------------------------------------------------------------
    def learn_noise(self, weights: NDArray, rounds: int, spread: float = 2.0) -> pd.DataFrame:
        """Best-response dynamics over the nodes' ``c_i`` (harmonic schedule, ``d`` of node 0).

        Each node starts from its own preferred ``c`` times a factor drawn log-uniformly in
        ``[1/spread, spread]``; in every round the nodes, in random order, best-respond to the
        other nodes' smallest and largest ``c`` (which a min-/max-consensus on the ring gives
        them). ``weights`` is ``(n, 3)``: each node's private ``(gamma_u, gamma_a, gamma_p)``.
        Returns ``c`` per round and node.
        """
        c, n = self.config, self.config.n
        ring = self.agents_by_type[RingNode].select(lambda node: node.node_id < n)
        args = (n, c.K, c.delta, float(np.atleast_1d(c.d)[0]))
        factors = spread ** self.rng.uniform(-1.0, 1.0, n)
        for node, w, f in zip(ring, np.asarray(weights, dtype=float), factors, strict=True):
            node.weights = tuple(w)
            node.c = node.preferred_c(*args) * f
        rows = [{"round": 0, "node": node.node_id, "c": node.c} for node in ring]
        for r in range(1, rounds + 1):
            ring.shuffle_do("respond_to", ring, *args)
            rows += [{"round": r, "node": node.node_id, "c": node.c} for node in ring]
        return pd.DataFrame(rows)

    # --- attacks --------------------------------------------------------------------------
    def transcript_statistics(self) -> tuple[NDArray, NDArray]:
        """``S_i(k) = s_i - beta_i(k)`` per replication and the noise std per step, from the
        recorded messages of a static ring (``record_messages=True``)."""
        run = self.record()
        if run.messages is None:
            raise ConfigError("no recorded messages: build the model with record_messages=True "
                             "on a static synchronous ring and run it first")
        stats = eavesdropper_statistics(np.moveaxis(run.messages, 0, 1))  # (R, K, n)
        std = np.stack([self.std(k, np.arange(self.config.n)) for k in range(self.config.K)])
        return stats, std

    # --- theory -------------------------------------------------------------------------
    def predicted(self) -> dict[str, float]:
        """Theorem 1-3 numbers for this ring, and the exact limit of the estimator error.

        ``epsilon`` is exact for the ring's noise: Theorem 3 (with the protocol's Laplace
        scale) for Laplace, the composed analytic Gaussian for Gaussian noise (at
        ``dp_delta``); ``epsilon_paper`` is Theorem 3 as printed."""
        c = self.config
        phi = None if c.schedule == "harmonic" else c.phi
        exact = (epsilon(c.K, c.delta, c.c, c.d, phi) if c.noise == "laplace" else
                 gaussian_epsilon(c.K, c.delta, c.c, c.d, phi, c.dp_delta))
        return {"epsilon": exact, "epsilon_paper": epsilon(c.K, c.delta, c.c, c.d, phi, True),
                "utility_bound": utility_bound(c.c, c.n, phi),
                "variance_bound": variance_bound(c.c, c.n, phi),
                "exact_error": self.exact_error(c.K)}

    def exact_error(self, k: int) -> float:
        """``E sum_i |y_i - s|`` at the end of step ``k`` for Gaussian noise on the static ring:
        ``y_i`` sums the last ``n`` states, so its noise is that of steps ``k-n+1 .. k-1``."""
        c = self.config
        steps = np.arange(k - c.n + 1, k)
        if steps.size == 0 or steps[0] < 0:
            return math.nan
        rows = (np.broadcast_to(self.std(s, np.arange(c.n)), (c.n,)) for s in steps)  # O(n)
        return float(np.sum(np.sqrt(2.0 / math.pi * estimator_error_variance(rows))))


class Window:
    """The estimator ``y_i``: the sum of each node's last ``m`` states (``m`` = ring size).

    States are kept per node, so a node that joins starts with an empty window and one that
    leaves stops counting. When the window of past states fits in ``MAX_WINDOW_BYTES`` the error
    is recorded at every step, from a running sum (add the new states, drop the ones that leave
    the window: O(n R) a step; recomputed exactly once per wrap of the buffer so that rounding
    cannot drift); otherwise only the last ``m`` steps' states are summed, in O(n R) memory, for
    the final error. The error and the network sum are recorded per segment
    (:meth:`PPSPConfig.segment_of`) and added over segments at the end, so a sharded ring
    records exactly the vectorized ring's numbers.

    A shard's window (``span=(lo, hi, joiner, segment)``) keeps only its own nodes: ids
    ``[lo, hi)`` of segment ``segment``, and the node that joins there (``None``: none), so its
    arrays are O(R (hi - lo)), not O(R n).
    """

    def __init__(self, config: PPSPConfig, span: tuple | None = None) -> None:
        self.cap, self.R = config.capacity, config.replications
        self.segments = config.segments
        if span is None:  # the whole ring: a node's slot is its id
            self.lo, self.joiner, size = 0, None, self.cap
            self.labels = config.segment_of()
        else:
            lo, hi, joiner, segment = span
            self.lo = lo
            self.joiner = joiner if joiner is not None and not lo <= joiner < hi else None
            size = hi - lo + (self.joiner is not None)
            self.labels = np.full(size, segment)
        self._ids: NDArray | None = None
        self._slots: NDArray | None = None
        self._cached: dict[int, slice] = {}
        self.enabled = 8 * self.cap * self.cap * self.R <= MAX_WINDOW_BYTES
        self.buffer = np.full((self.cap, self.R, size), np.nan) if self.enabled else None
        self.running = np.zeros((self.R, size))  # the window's sum by slot
        self.included = 0  # past steps in ``running``
        self.last, self.tail_from = config.K - 1, config.K - config.final_size
        self.step = 0
        self.error, self.sums, self.targets, self.estimates = [], [], [], []

    def append(self, error: NDArray, sums: NDArray, target: float) -> None:
        """Record one step's error and network sum, ``(replications, segments)`` (a segment
        with no node here contributes 0), and the target."""
        self.error.append(error)
        self.sums.append(sums)
        self.targets.append(target)
        self.step += 1

    def record(self, ids: NDArray, state: NDArray, target: float, m: int) -> None:
        """Record one step of the nodes ``ids`` (all of the ring, or one shard of it) for a ring
        of ``m`` nodes whose secrets sum to ``target``."""
        slots, segments = self._index(ids)
        error = np.full((self.R, self.segments), np.nan)
        if self.enabled:
            self._slide(slots, state, m)
        elif self.step >= self.tail_from:  # the final estimate's last m states
            self.running[:, slots] += state
        if self.enabled or self.step == self.last:
            y = self.running[:, slots]
            deviation = y - target
            np.abs(deviation, out=deviation)
            error[:] = 0.0  # absent segments add an exact 0
            for j, seg in segments.items():
                error[:, j] = deviation[:, seg].sum(axis=1)
            if self.enabled:
                est = np.full(self.cap, np.nan)
                est[ids] = y[0]
                self.estimates.append(est)
        sums = np.zeros((self.R, self.segments))
        for j, seg in segments.items():
            sums[:, j] = state[:, seg].sum(axis=1)
        self.append(error, sums, target)

    def _slide(self, slots: NDArray | slice, state: NDArray, m: int) -> None:
        """Put this step's states in the buffer and move the running sum to the last
        ``min(m, steps)`` of them."""
        cap, k = self.cap, self.step
        row = self.buffer[k % cap]
        if self.included == cap:  # the row about to be overwritten is the window's oldest
            self.running -= np.nan_to_num(row)
            self.included -= 1
        row[:] = np.nan
        row[:, slots] = state
        self.running[:, slots] += state
        self.included += 1
        want = min(m, k + 1)
        while self.included > want:  # the ring shrank: drop the oldest
            self.running -= np.nan_to_num(self.buffer[(k - self.included + 1) % cap])
            self.included -= 1
        while self.included < want:  # the ring grew: take older states back in
            self.running += np.nan_to_num(self.buffer[(k - self.included) % cap])
            self.included += 1
        if k % cap == cap - 1:  # once per wrap: exact, so rounding cannot accumulate
            rows = [(k - r) % cap for r in range(self.included)]
            self.running = np.nansum(self.buffer[rows], axis=0)

    def slots(self, ids: NDArray) -> NDArray:
        """Where the nodes ``ids`` are kept here (the ids themselves for the whole ring)."""
        if self.lo == 0 and self.joiner is None:
            return ids
        slots = ids - self.lo
        return slots if self.joiner is None else np.where(ids == self.joiner,
                                                          self.labels.size - 1, slots)

    def join(self, node: int, after: int) -> None:
        """``node`` joins the ring after ``after``, in that node's segment."""
        self.labels[self.slots(np.array([node]))] = self.labels[self.slots(np.array([after]))]
        self._ids = None

    def segments_of(self, ids: NDArray) -> dict[int, slice]:
        """Each segment's run of positions in ``ids``."""
        return self._index(ids)[1]

    def _index(self, ids: NDArray) -> tuple[NDArray | slice, dict[int, slice]]:
        """The slots of ``ids`` and each segment's run of positions in them (cached while the
        ring is unchanged: the model replaces ``ids`` when a node leaves or joins)."""
        if ids is not self._ids:
            slots = self.slots(ids)
            if slots.size and slots[-1] - slots[0] == slots.size - 1 and np.all(
                    np.diff(slots) == 1):  # a run: index by a slice (views, no copies)
                slots = slice(int(slots[0]), int(slots[-1]) + 1)
            self._slots = slots
            labels = self.labels[slots]
            cuts = np.flatnonzero(np.diff(labels)) + 1
            starts = np.concatenate(([0], cuts))
            self._cached = {int(labels[a]): slice(a, b)
                            for a, b in zip(starts, [*cuts, ids.size], strict=True)}
            self._ids = ids
        return self._slots, self._cached

    def parts(self) -> tuple[NDArray, NDArray, NDArray | None]:
        """Per step and segment: error and sum, ``(steps, replications, segments)``; and the
        estimates of replication 0 by node id (NaN for ids not recorded here)."""
        return (np.array(self.error), np.array(self.sums),
                np.array(self.estimates) if self.estimates else None)

    def result(self, ids: NDArray, state: NDArray, messages: NDArray | None) -> RingRun:
        """Everything recorded, with the ring's final order and states."""
        error, sums, estimates = self.parts()
        return RingRun(error.sum(axis=-1), sums.sum(axis=-1), np.array(self.targets),
                       estimates, messages, ids.copy(), state.copy())


WEIGHTINGS = ("equal", "unequal")


@dataclass(frozen=True)
class NoiseGameConfig:
    """The nodes' game over their noise scales ``c_i`` (Theorem 4's trade-off, made selfish).

    Attributes:
        n, K, delta, d: ring size, steps, adjacency and the harmonic schedule's ``d``.
        gamma_u, gamma_a, gamma_p: the weights (``equal``: every node's; ``unequal``: each
            node's weights are these times a factor drawn log-uniformly in
            ``[1/spread, spread]``).
        weighting: ``equal`` or ``unequal``. rounds: best-response rounds.
        spread: spread of the nodes' starting guesses and, if unequal, of their weights.
    """

    n: int = 10
    K: int = 100
    delta: float = 1.0
    d: float = 1.0
    gamma_u: float = 1.0
    gamma_a: float = 1.0
    gamma_p: float = 1.0
    weighting: str = "equal"
    rounds: int = 10
    spread: float = 2.0

    def footprint(self) -> Footprint:
        """Each node's best response scans the others: ``n^2`` per round."""
        return Footprint(3000.0 * self.n + 200.0 * self.rounds * self.n,
                         float(self.rounds) * self.n * self.n, "n")

    def __post_init__(self) -> None:
        check_int("n", self.n, 3)
        check_int("K", self.K, 1)
        check_real("delta", self.delta, 0.0, low_open=True)
        check_real("d", self.d, 0.0)
        for name in ("gamma_u", "gamma_a", "gamma_p"):
            check_real(name, getattr(self, name), 0.0, low_open=True)
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_int("rounds", self.rounds, 1)
        check_real("spread", self.spread, 1.0)

    def weights(self, rng: np.random.Generator) -> NDArray:
        """Each node's private ``(gamma_u, gamma_a, gamma_p)``."""
        return self.weights_from(None if self.weighting == "equal"
                                 else rng.random((self.n, 3)))

    def weights_from(self, u: NDArray | None, nodes: int | None = None) -> NDArray:
        """:meth:`weights` from uniforms on ``[0, 1)``, ``(nodes, 3)`` (``None`` when the
        weighting is equal: ``nodes`` rows, default all): each weight times ``spread`` to a
        power uniform on ``[-1, 1]``."""
        base = np.array([self.gamma_u, self.gamma_a, self.gamma_p])
        if u is None:
            return np.tile(base, (self.n if nodes is None else nodes, 1))
        return base * self.spread ** (-1.0 + 2.0 * u)


def trajectory_frame(run: RingRun) -> pd.DataFrame:
    """Per step: mean and standard error of the estimator error, the sum drift, the target."""
    reps = run.error.shape[1]
    return pd.DataFrame({
        "step": np.arange(1, run.error.shape[0] + 1),
        "error": run.error.mean(axis=1),
        "error_se": run.error.std(axis=1, ddof=1) / math.sqrt(reps) if reps > 1 else 0.0,
        "sum_drift": np.abs(run.sums - run.targets[:, None]).max(axis=1),
        "target": run.targets})
