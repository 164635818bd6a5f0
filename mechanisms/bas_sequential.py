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
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms import chain
from privgames.mechanisms.learning_games import (
    GridGame,
    _check_grid_points,
    grid_distance,
    relative_gain,
)
from privgames.mechanisms.validation import ConfigError


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
        self.active = np.ones(self.n, dtype=bool)
        self._cached: tuple = (None, None, None)  # the last profile's key and cost parts

    # --- the chain ----------------------------------------------------------------------------
    def _state_of(self, u: NDArray) -> NDArray:
        """The observed state of a running variance: its grid index, the top for above."""
        step = self.grid[1] - self.grid[0]
        return np.minimum(np.rint(u / step).astype(int), self.grid.size - 1)

    def row(self, k: int | NDArray, s: NDArray) -> NDArray:
        """Follower ``k``'s row at state ``s``."""
        return 1 + (np.asarray(k) - 1) * self.grid.size + s

    def path(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """The rows that play when every row would play ``values`` (leader first, then each
        follower's row at the state it receives), and the users' variances in chain order."""
        rows, sigma2, u = np.zeros(self.K, dtype=int), np.zeros(self.K), 0.0
        sigma2[0] = u = values[0]
        for k in range(1, self.K):
            rows[k] = self.row(k, self._state_of(np.array(u)))
            sigma2[k] = values[rows[k]]
            u += sigma2[k]
        return rows, sigma2

    def played(self, values: NDArray) -> None:
        """The round's path decides who plays: the leader and one row per follower."""
        self.active = np.zeros(self.n, dtype=bool)
        self.active[self.path(values)[0]] = True

    def _totals(self, values: NDArray, entering: NDArray) -> NDArray:
        """The chain's total variance when each row's user has brought the running variance
        to ``entering`` (``(n, k)``) and the followers after it play ``values``."""
        total = entering.copy()
        for j in range(1, self.K):
            after = (self.user < j)[:, None]
            total = np.where(after, total + values[self.row(j, self._state_of(total))], total)
        return total

    # --- the game's interface -----------------------------------------------------------------
    def _parts(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """Every row's total variance and privacy cost for each grid action, ``(n, m)`` each
        (the last profile's are kept: a round asks for them several times)."""
        key = values.tobytes()
        if self._cached[0] != key:
            prefix = self.grid[self.state][:, None] * (self.user > 0)[:, None] + self.grid
            alpha = self.alpha[self.user][:, None]
            with np.errstate(divide="ignore"):
                privacy = np.where(alpha > 0, alpha / np.sqrt(prefix), 0.0)
            self._cached = (key, self._totals(values, prefix), privacy)
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
        columns = self._columns(candidates)
        return np.take_along_axis(total + privacy, columns, axis=1)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        """Each row's cost with the accuracy term replaced by one release's squared error per
        coordinate, ``S chi^2_d / d`` (one release a round, its ``S`` the row's total)."""
        v = np.asarray(values, dtype=float)
        total, privacy = (np.take_along_axis(x, self._columns(v[:, None]), axis=1)[:, 0]
                          for x in self._parts(v))
        return privacy + total * rng.chisquare(self.d) / self.d

    def references(self) -> dict[str, NDArray]:
        """Theorem 1's subgame-perfect profile on the grid, by backward induction."""
        policy = np.zeros(self.n)
        for k in range(self.K - 1, 0, -1):  # each follower anticipates those after it
            rows = self.row(k, np.arange(self.grid.size))
            policy[rows] = self.grid[np.argmin(self.costs(policy)[rows], axis=1)]
        policy[0] = self.grid[np.argmin(self.costs(policy)[0])]
        return {"theorem1": policy}

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
