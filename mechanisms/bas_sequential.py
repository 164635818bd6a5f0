"""Stage 3 of BAS as the sequential game it is, for learners (``learning-dynamics``,
``game=bas-sequential``).

Users in the chain's order (Stage 2: the highest bidder is not first) add noise in turn; user
``k`` pays eq (14)'s ``C_k = sum_i sigma_i^2 + alpha_k (sum_{i<=k} sigma_i^2)^(-1/2)``. The
first user (the leader) chooses its variance before anyone; a follower sees the running noise
level it receives (the protocol hands it the running sum, with ``observation=exact`` its
variance) and chooses in reply. A follower's strategy is therefore a *response per observed
state*; the learners hold one row per (follower, state), and only the row of the state a
follower receives plays and learns in a round (the agent form of the extensive game, as
``pricing-bayes`` has a row per type).

States: the actions are ``m`` variances evenly over ``[0, m max beta]`` (step ``h``), so every
running sum is a multiple of ``h``; a follower observes it exactly up to the grid's top, and
every level at or above the top as the top (where, with ``u >= m beta_k`` for every user,
adding nothing is every follower's best reply).

Theorem 1's profile is subgame perfect: :meth:`BASSequentialGame.references` gives it on the
grid by backward induction (each follower's best reply at every state, anticipating the
followers after it; then the leader's), and the leader's level is Theorem 1's ``m max beta``
snapped to the grid (tested by brute force over all the leader's levels).

**Levels as maps.** Running levels are counted in grid steps (integers, so exact). What a run
of followers does to the level it receives is a *map* (:func:`follower_maps`, :func:`compose`):
a table for the levels below the top and, from the top on, a constant it adds (every follower
there observes the top). A row's total is the map of the followers after it applied to the
level it passes on (:func:`rest_maps`), so every row's cost takes ``O(m)`` per follower, not a
walk down the chain; a population split over shards composes its shards' maps the same way.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms import chain
from privgames.mechanisms.compiled import compiled
from privgames.mechanisms.learning_games import (
    GridGame,
    _check_grid_points,
    grid_distance,
    relative_gain,
)
from privgames.mechanisms.validation import ConfigError


def follower_maps(policy: NDArray) -> NDArray:
    """Each follower's map of levels (grid steps) from its action index per observed state,
    ``policy`` ``(users, m)``: entry ``u < m - 1`` is the level it passes on when it receives
    ``u``; entry ``m - 1`` what it adds at the top and above."""
    maps = np.array(policy, dtype=np.int64)
    maps[:, :-1] += np.arange(maps.shape[1] - 1)
    return maps


def identity_map(m: int) -> NDArray:
    """The map of no follower."""
    return np.append(np.arange(m - 1), 0)


def apply_map(f: NDArray, u: ArrayLike) -> NDArray:
    """The levels map ``f`` (``(m,)``, or a stack ``(n, m)`` row by row) passes on for received
    levels ``u`` (``(k,)``, or ``(n, k)``)."""
    u = np.asarray(u, dtype=np.int64)
    top = f.shape[-1] - 1
    return np.where(u < top, np.take_along_axis(f, np.minimum(u, top - 1), axis=-1),
                    u + f[..., -1:])


def compose(g: NDArray, f: NDArray) -> NDArray:
    """The map of ``f``'s followers, then ``g``'s (row by row for stacks)."""
    return np.concatenate([apply_map(g, f[..., :-1]), f[..., -1:] + g[..., -1:]], axis=-1)


def rest_maps(maps: NDArray, after: NDArray) -> tuple[NDArray, NDArray]:
    """For a run of followers with ``maps``, each one's map from the level it passes on to the
    chain's total (the followers after it, then ``after``), and the run's own map from the
    level its first follower receives: one compiled pass from the last follower back, each
    map composed with the running one (maps of integers compose exactly)."""
    return _rest_maps(np.ascontiguousarray(maps, dtype=np.int64),
                      np.ascontiguousarray(after, dtype=np.int64))


@compiled
def _rest_maps(maps, after):
    n, m = maps.shape
    top = m - 1
    rest = np.empty((n, m), dtype=np.int64)
    run = after.copy()
    for k in range(n - 1, -1, -1):
        rest[k] = run
        composed = np.empty(m, dtype=np.int64)  # maps[k] first, then run (as compose)
        for s in range(top):
            u = maps[k, s]
            composed[s] = run[u] if u < top else u + run[top]
        composed[top] = maps[k, top] + run[top]
        run = composed
    return rest, run


def chain_tables(rest: NDArray, alpha: NDArray, step: float) -> tuple[NDArray, NDArray]:
    """Eq (14)'s two terms for each user (its map to the total ``rest``, ``(users, m)``) by
    the prefix it passes on, ``e`` = received level + action in steps, ``0 .. 2m - 2``:
    ``(users, 2m - 1)`` each, the total variance (compiled: a table look-up below the top, the
    level plus the map's constant from it on) and ``alpha (e h)^(-1/2)``. A row's cost of
    action ``a`` at state ``s`` is entry ``s + a``: each (state, action) table is a window."""
    entering = np.arange(2 * rest.shape[1] - 1)
    a = alpha[:, None]
    with np.errstate(divide="ignore"):
        privacy = np.where(a > 0, a / np.sqrt(entering * step), 0.0)
    return _chain_totals(np.ascontiguousarray(rest, dtype=np.int64), float(step)), privacy


@compiled
def _chain_totals(rest, step):
    users, m = rest.shape
    top = m - 1
    out = np.empty((users, 2 * m - 1))
    for u in range(users):
        for e in range(2 * m - 1):
            out[u, e] = float(rest[u, e] if e < top else e + rest[u, top]) * step
    return out


def chain_parts(rest: NDArray, alpha: NDArray, states: NDArray,
                step: float) -> tuple[NDArray, NDArray]:
    """:func:`chain_tables` at each received level ``states`` (``(k,)`` steps) and each
    action, ``(users, k, m)`` each."""
    entering = np.asarray(states, dtype=np.int64)[:, None] + np.arange(rest.shape[1])
    return tuple(x[:, entering] for x in chain_tables(rest, alpha, step))


def chain_costs(rest: NDArray, alpha: NDArray, states: NDArray, step: float) -> NDArray:
    """Eq (14)'s cost, :func:`chain_parts` summed."""
    total, privacy = chain_parts(rest, alpha, states, step)
    return total + privacy


def backward_induction(alpha: NDArray, step: float, after: NDArray) -> tuple[NDArray, NDArray]:
    """Each follower's best reply (action index) at every state, the later ones anticipated
    (the followers after the run play by ``after``), and the run's map with those replies."""
    m = after.size
    policy = np.zeros((alpha.size, m), dtype=np.int64)
    r = after
    for k in range(alpha.size - 1, -1, -1):
        policy[k] = np.argmin(chain_costs(r[None], alpha[k:k + 1], np.arange(m), step)[0],
                              axis=1)
        r = compose(r, follower_maps(policy[k:k + 1])[0])
    return policy, r


def walk(maps: NDArray, u: int) -> tuple[NDArray, NDArray]:
    """The state each follower of a run receives from level ``u`` on (steps; the top from
    there on) and the level it passes on."""
    m = maps.shape[1]
    states = np.full(len(maps), m - 1, dtype=np.int64)
    levels = np.empty(len(maps), dtype=np.int64)
    k = 0
    while k < len(maps) and u < m - 1:  # below the top: one follower at a time
        states[k] = u
        u = levels[k] = int(maps[k, u])
        k += 1
    levels[k:] = u + np.cumsum(maps[k:, -1])  # at the top: each adds its top action
    return states, levels


def leader_map(action: int, m: int) -> NDArray:
    """The leader's map: whatever it receives (nothing), it passes on its ``action``."""
    return np.full(m, action, dtype=np.int64)


class BASSequentialGame(GridGame):
    """``K`` users in chain order; row 0 is the leader, row ``1 + (k - 1) m + s`` follower ``k``
    (``1 <= k < K``) at observed state ``s`` (the running variance ``grid[s]``).

    Attributes:
        beta, alpha: the users' preferences and privacy weights, in chain order.
        user, state: each row's user and observed state (the leader's state is 0).
        active: after :meth:`played`, the rows on the round's path.
    """

    def __init__(self, beta: ArrayLike, d: int, grid_points: int = 21) -> None:
        self.beta = np.asarray(beta, dtype=float)
        self.alpha = chain.alpha_from_beta(self.beta)
        self.d = int(d)
        self.K = self.beta.size
        if self.K < 2:
            raise ConfigError("a sequential chain needs at least two users (agents >= 2)")
        self.grid = np.linspace(0.0, chain.M * float(self.beta.max()),
                                _check_grid_points(grid_points))
        m = self.grid.size
        self.n = 1 + (self.K - 1) * m
        self.user = np.concatenate([[0], np.repeat(np.arange(1, self.K), m)])
        self.state = np.concatenate([[0], np.tile(np.arange(m), self.K - 1)])
        self.step = float(self.grid[1] - self.grid[0])
        self.active = np.ones(self.n, dtype=bool)
        self._cached: tuple = (None, None, None)  # the last profile's key and cost parts

    # --- the chain ----------------------------------------------------------------------------
    def row(self, k: int | NDArray, s: NDArray) -> NDArray:
        """Follower ``k``'s row at state ``s``."""
        return 1 + (np.asarray(k) - 1) * self.grid.size + s

    def _indices(self, values: ArrayLike) -> NDArray:
        """Grid levels as their indices (steps)."""
        return np.rint(np.asarray(values, dtype=float) / self.step).astype(np.int64)

    def _maps(self, values: NDArray) -> NDArray:
        """The followers' level maps when each row plays ``values``."""
        return follower_maps(self._indices(values[1:]).reshape(self.K - 1, self.grid.size))

    def path(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """The rows that play when every row would play ``values`` (leader first, then each
        follower's row at the state it receives), and the users' variances in chain order."""
        values = np.asarray(values, dtype=float)
        states = walk(self._maps(values), int(self._indices(values[0])))[0]
        rows = np.concatenate([[0], self.row(np.arange(1, self.K), states)])
        return rows, values[rows]

    def played(self, values: NDArray) -> None:
        """The round's path decides who plays: the leader and one row per follower."""
        self.active = np.zeros(self.n, dtype=bool)
        self.active[self.path(values)[0]] = True

    # --- the game's interface -----------------------------------------------------------------
    def _parts(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """Every row's total variance and privacy cost for each grid action, ``(n, m)`` each
        (:func:`chain_parts`; the last profile's are kept: a round asks for them several
        times)."""
        key = values.tobytes()
        if self._cached[0] != key:
            m = self.grid.size
            rest, first = rest_maps(self._maps(values), identity_map(m))
            leader = chain_parts(first[None], self.alpha[:1], np.zeros(1, dtype=np.int64),
                                 self.step)
            followers = chain_parts(rest, self.alpha[1:], np.arange(m), self.step)
            self._cached = (key, *(np.concatenate([a[0], b.reshape(-1, m)])
                                   for a, b in zip(leader, followers, strict=True)))
        return self._cached[1], self._cached[2]

    def _columns(self, candidates: ArrayLike | None) -> NDArray:
        """The grid indices of ``candidates`` (``(n, k)`` grid levels; ``None``: all)."""
        if candidates is None:
            return np.broadcast_to(np.arange(self.grid.size), (self.n, self.grid.size))
        c = np.asarray(candidates, dtype=float)
        index = np.clip(np.searchsorted(self.grid, c), 0, self.grid.size - 1)
        if not np.array_equal(self.grid[index], c):
            raise ConfigError("bas-sequential evaluates grid actions only")
        return index

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        """Each row's cost of each candidate at its state, the later followers replying by
        ``values`` (off the path too: what the row would pay if its state came up)."""
        total, privacy = self._parts(np.asarray(values, dtype=float))
        return np.take_along_axis(total + privacy, self._columns(candidates), axis=1)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        """Each row's cost with the accuracy term replaced by one release's squared error per
        coordinate, ``S chi^2_d / d`` (one release a round, its ``S`` the row's total)."""
        v = np.asarray(values, dtype=float)
        total, privacy = (np.take_along_axis(x, self._columns(v[:, None]), axis=1)[:, 0]
                          for x in self._parts(v))
        return privacy + total * rng.chisquare(self.d) / self.d

    def references(self) -> dict[str, NDArray]:
        """Theorem 1's subgame-perfect profile on the grid, by backward induction
        (:func:`backward_induction`: each follower anticipates those after it)."""
        m = self.grid.size
        policy, first = backward_induction(self.alpha[1:], self.step, identity_map(m))
        leader = np.argmin(chain_costs(first[None], self.alpha[:1], np.zeros(1, dtype=np.int64),
                                       self.step)[0, 0])
        return {"theorem1": self.grid[np.concatenate([[leader], policy.ravel()])]}

    def middle(self) -> NDArray:
        return np.full(self.n, self.grid[(self.grid.size - 1) // 2])

    def deviation(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """On the path of ``values``: each playing row's cost and its best reply at its state
        (a Nash equilibrium of the sequential game leaves these equal); rows off the path
        count as no gain (their state never comes up)."""
        own, best = super().deviation(values)
        on = np.zeros(self.n, dtype=bool)
        on[self.path(values)[0]] = True
        return np.where(on, own, 0.0), np.where(on, best, 0.0)

    def subgame_gap_relative(self, values: NDArray) -> float:
        """The largest deviation gain of any row at its state, on the path or not, relative to
        its own cost (0 at a subgame-perfect profile)."""
        return float(np.max(relative_gain(*super().deviation(values))))

    def path_summary(self, values: NDArray) -> dict[str, float]:
        """On the path of ``values``: the leader's level in grid steps below Theorem 1's (``m
        max beta``, the grid's top) and the release's total variance over Theorem 1's."""
        sigma2 = self.path(np.asarray(values, dtype=float))[1]
        step = self.grid[1] - self.grid[0]
        return {"leader_steps_below": float(round((self.grid[-1] - sigma2[0]) / step)),
                "total_over_theorem1": float(sigma2.sum() / self.grid[-1])}

    def social_cost(self, values: NDArray) -> float:
        """Eq (14) summed over the users, on the round's path."""
        return chain.social_cost(self.path(np.asarray(values, dtype=float))[1], self.beta)

    def optimum(self) -> float:
        return chain.social_cost(chain.central_optimum(self.beta), self.beta)

    def distance(self, values: NDArray, reference: NDArray) -> float:
        """On the path of ``values``: the largest distance of a playing row's action from the
        reference's at the same state (fraction of the grid), the leader's level included."""
        rows = self.path(np.asarray(values, dtype=float))[0]
        return grid_distance(self.grid, np.asarray(values)[rows], np.asarray(reference)[rows],
                             False)
