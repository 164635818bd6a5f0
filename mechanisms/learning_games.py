"""The four games as repeated stage games on an explicit action grid, for learners that learn
from what they experience (``learning-dynamics``).

Each game gives, for every agent at once:

* ``costs(values, candidates)`` -- the expected cost of each candidate action given the
  others' current actions (full-information feedback; the analysis also uses it for regret);
* ``realized(values, rng)`` -- one realized cost per agent, drawn from the simulated release
  (bandit feedback): its mean is the expected cost, its variance the release's;
* :meth:`GridGame.scales` -- the units the learners map costs to ``[0, 1]`` by, read off the
  costs when everyone plays the grid's middle action (no theory involved);
* ``references`` -- named profiles of the theory, snapped to the grid, the predicted NE first;
  whether a profile is an equilibrium of the grid game is measured, not assumed:
  :meth:`GridGame.nash_gap` is the largest gain of a unilateral deviation (the printed eq (10)
  of pricing FL under the MLE rule is not one).

The stage games are simultaneous: each agent's cost is the paper's, evaluated at everyone's
current action. For the BAS chain that makes the first user's equilibrium ``m beta_1`` (it no
longer anticipates the followers, as in Theorem 1's subgame-perfect NE), so both are given.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privgames.mechanisms import chain, ppsp, pricing, sar
from privgames.mechanisms.validation import ConfigError, check_grid


class GridGame(ABC):
    """A game of ``n`` agents on a common action grid.

    Attributes:
        grid: the actions, ``(m,)``, increasing (``inf``: the opt-out).
        n: the agents.
        log_scale: whether distances between actions are measured on a log scale.
    """

    grid: NDArray
    n: int
    log_scale: bool = False

    def scales(self, rng: np.random.Generator, draws: int = 64) -> tuple[NDArray, ...]:
        """Per agent ``(span, low, high)``: the spread of its finite costs over the grid, and
        the range of a realized cost (that spread widened by 3 standard deviations of
        ``draws`` realized costs), with everyone at the grid's middle action. Costs beyond are
        clipped by the learners, and their guarantees hold for the clipped costs."""
        middle = np.full(self.n, self.grid[(self.grid.size - 1) // 2])
        c = self.costs(middle)
        finite = np.where(np.isfinite(c), c, np.nan)
        lo, hi = np.nanmin(finite, axis=1), np.nanmax(finite, axis=1)
        sd = np.std([self.realized(middle, rng) for _ in range(draws)], axis=0)
        span = np.maximum(hi - lo, 1e-12 * np.maximum(np.abs(hi), 1e-300))
        return span, lo - 3.0 * sd, np.maximum(hi + 3.0 * sd, lo - 3.0 * sd + span)

    @abstractmethod
    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        """Expected cost of agent ``i`` playing ``candidates[i, j]`` (default: the grid) while
        the others play ``values``; ``(n, k)``."""

    @abstractmethod
    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        """Each agent's realized cost of one round played at ``values``, ``(n,)``."""

    @abstractmethod
    def references(self) -> dict[str, NDArray]:
        """The theory's profiles, the predicted NE first."""

    def optimum(self) -> float:
        """The smallest social cost (the theory's, continuous where it has one; by default the
        best common action)."""
        return float(min(self.social_cost(np.full(self.n, a)) for a in self.grid))

    def own_costs(self, values: NDArray) -> NDArray:
        """Each agent's expected cost at the profile."""
        return self.costs(values, np.asarray(values, dtype=float)[:, None])[:, 0]

    def social_cost(self, values: NDArray) -> float:
        return float(np.sum(self.own_costs(values)))

    def nash_gap(self, values: NDArray, scale: ArrayLike) -> float:
        """The largest gain of a unilateral deviation to a grid action, in units of each
        agent's ``scale`` (0 at a pure NE of the grid game)."""
        own = self.own_costs(values)
        best = self.costs(values).min(axis=1)
        with np.errstate(invalid="ignore"):
            gain = np.where(np.isinf(own) & np.isinf(best), 0.0, own - best)
        return float(np.max(gain / np.asarray(scale, dtype=float)))

    def snap(self, values: ArrayLike) -> NDArray:
        """The nearest grid action of each value (on the game's scale)."""
        v, g = self._scale(np.asarray(values, dtype=float)), self._scale(self.grid)
        with np.errstate(invalid="ignore"):
            gap = np.abs(v[:, None] - g[None, :])
        gap = np.where(np.isinf(v[:, None]) & np.isinf(g[None, :]), 0.0, gap)
        return self.grid[np.nanargmin(np.where(np.isnan(gap), np.inf, gap), axis=1)]

    def distance(self, values: NDArray, reference: NDArray) -> float:
        """Largest distance of an agent's action from the reference's, as a fraction of the
        grid's finite width (an opt-out against a level counts 1)."""
        a, b = self._scale(values), self._scale(reference)
        finite = self._scale(self.grid[np.isfinite(self.grid)])
        width = max(finite[-1] - finite[0], 1e-300)
        with np.errstate(invalid="ignore"):
            d = np.abs(a - b) / width
        d = np.where(np.isinf(a) & np.isinf(b), 0.0, np.minimum(np.nan_to_num(d, nan=1.0), 1.0))
        return float(d.max())

    def _scale(self, v: NDArray) -> NDArray:
        if not self.log_scale:
            return v
        with np.errstate(divide="ignore"):
            return np.log(v)


def _check_grid_points(points: int) -> int:
    if not isinstance(points, int | np.integer) or points < 2:
        raise ConfigError(f"grid_points={points!r} is out of range: grid_points must be an "
                          "integer >= 2")
    return int(points)


def _own_grid(grid: ArrayLike | None, default: NDArray, opt_out: bool = True) -> NDArray:
    """The user's grid (checked by :func:`check_levels`), else the default."""
    return default if grid is None else check_levels(grid, opt_out)


def check_levels(grid: ArrayLike, opt_out: bool) -> NDArray:
    """A grid of noise levels: :func:`check_grid`, every level ``>= 0``, and ``inf`` only
    where the game has an opt-out."""
    g = check_grid(grid)
    if np.any(g < 0) or (not opt_out and np.isinf(g).any()):
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: noise levels must be >= 0"
                          + ("" if opt_out else " and finite (this game has no opt-out)"))
    if np.isfinite(g).sum() < 1:
        raise ConfigError(f"grid={g.tolist()!r} is not allowed: it needs a finite level")
    return g


class BASGame(GridGame):
    """Users in sequence order choose their noise variance ``sigma_k^2`` (Chained-DP, eq 14):
    ``C_k = sum_i sigma_i^2 + alpha_k (sum_{i<=k} sigma_i^2)^(-1/2)``.

    Grid: ``grid_points`` variances evenly over ``[0, m max beta]``. A realized cost replaces
    the accuracy term (the release's noise variance per coordinate) by the squared error of one
    ``d``-dimensional release, ``S chi^2_d / d`` (variance ``2 S^2 / d``).
    """

    def __init__(self, beta: ArrayLike, d: int, grid_points: int = 21,
                 grid: ArrayLike | None = None) -> None:
        self.beta = np.asarray(beta, dtype=float)
        self.alpha = chain.alpha_from_beta(self.beta)
        self.d = int(d)
        top = chain.M * float(self.beta.max())
        self.grid = _own_grid(grid, np.linspace(0.0, top, _check_grid_points(grid_points)),
                              opt_out=False)
        self.n = self.beta.size

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        others = v.sum() - v
        upstream = np.cumsum(v) - v
        with np.errstate(divide="ignore"):
            privacy = self.alpha[:, None] / np.sqrt(upstream[:, None] + cand)
        return others[:, None] + cand + np.where(self.alpha[:, None] > 0, privacy, 0.0)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        total = float(np.sum(values))
        error = total * rng.chisquare(self.d) / self.d  # ||noise||^2 / d of one release
        return self.own_costs(values) - total + error

    def references(self) -> dict[str, NDArray]:
        return {"nash": self._simultaneous_nash(),
                "theorem1": self.snap(chain.nash_equilibrium(self.beta))}

    def _simultaneous_nash(self) -> NDArray:
        """The grid game's NE in one pass down the chain: a user's cost depends on its own
        level only through its prefix (Lemma 1 on the grid), so each best-responds to the
        levels above it (ties to the lowest)."""
        v, prefix = np.zeros(self.n), 0.0
        for k in range(self.n):
            with np.errstate(divide="ignore"):
                own = self.grid + (self.alpha[k] / np.sqrt(prefix + self.grid)
                                   if self.alpha[k] > 0 else 0.0)
            v[k] = self.grid[int(np.argmin(own))]
            prefix += v[k]
        return v

    def optimum(self) -> float:
        return chain.social_cost(chain.central_optimum(self.beta), self.beta)


class SARGame(GridGame):
    """SAR participation: each of ``K`` users takes part (1) or opts out (0). A participant's
    slice is exposed with eq (31)'s (weak) or the corrected eq (32)'s (strong) probability for
    the participants' count ``k``; it values taking part at the risk eq (33) accepts, ``1/K^2``.
    Cost: ``delta(k) - 1/K^2`` when taking part, 0 when not. A realized cost draws whether the
    colluders exposed it this round: its place in a uniformly random order of the ``k``
    participants and the colluding of the others, each with probability ``p``.
    """

    grid = np.array([0.0, 1.0])

    def __init__(self, K: int, p: float, attacker: str = "weak") -> None:
        sar.failure_probability(max(K, 3), p, attacker)  # validates p and the attacker
        self.K, self.p, self.attacker = int(K), float(p), attacker
        self.n = self.K
        self.tolerated = 1.0 / self.K**2

    def exposure(self, k: ArrayLike) -> NDArray:
        """The failure probability with ``k`` participants (0 below 3: no one is interior):
        :func:`privgames.mechanisms.sar.failure_probability`'s formulas, vectorized and for a
        real-valued ``k`` (SPSA's fractional participation); equal to it at every integer
        ``k >= 3`` (tested)."""
        k = np.asarray(k, dtype=float)
        if self.attacker == "weak":
            return np.maximum(k - 2.0, 0.0) / np.maximum(k, 1.0) * self.p**2
        if self.p == 0.0:
            return np.zeros_like(k)
        q = 1.0 - self.p
        return np.maximum(1.0 + q ** (k - 1) - 2.0 * (1.0 - q**k) / (np.maximum(k, 1) * self.p),
                          0.0)

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        others = v.sum() - v
        return cand * (self.exposure(others[:, None] + 1.0) - self.tolerated)

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        v = np.asarray(values, dtype=float)
        k = int(v.sum())
        position = rng.integers(0, max(k, 1), self.K)
        if self.attacker == "weak":
            interior = (position > 0) & (position < k - 1)
            exposed = interior & (rng.random((2, self.K)) < self.p).all(axis=0)
        else:
            q = 1.0 - self.p
            before = rng.random(self.K) < 1.0 - q**position
            after = rng.random(self.K) < 1.0 - q ** (k - 1 - position)
            exposed = before & after
        return v * (exposed - self.tolerated)

    def references(self) -> dict[str, NDArray]:
        """The NE: ``k`` users take part, where the ``k``-th does not regret it
        (``delta(k) <= 1/K^2``) and an outsider would (``delta(k + 1) > 1/K^2``); the users are
        alike, so which ``k`` is immaterial (the first ``k``)."""
        gain = self.exposure(np.arange(1, self.K + 1)) - self.tolerated
        k = int(np.argmax(gain > 0)) if np.any(gain > 0) else self.K
        return {"nash": (np.arange(self.K) < k).astype(float)}

    def distance(self, values: NDArray, reference: NDArray) -> float:
        """The users are alike: the gap in the participating share."""
        return float(abs(np.mean(values) - np.mean(reference)))


class PPSPGame(GridGame):
    """Ring nodes choose their noise scale ``c_i``; node ``i`` pays Theorem 4's weighted cost
    with its own weights, ``gamma_u M_u(c_max) + gamma_a M_a(c_max) + gamma_p M_p(c_min)``.

    Any common ``c`` is a NE (a node alone above the others raises ``c_max``, alone below
    lowers ``c_min``), so the predicted profile is Theorem 4's optimum for the summed weights,
    and a learned common level is an equilibrium too. Grid: log-spaced over a decade either
    side of the nodes' preferred ``c``. A realized cost draws the estimator's squared error
    (Gaussian with Theorem 2's variance) for the accuracy term.
    """

    log_scale = True

    def __init__(self, weights: ArrayLike, K: int, delta: float, d: float,
                 grid_points: int = 21, grid: ArrayLike | None = None) -> None:
        self.weights = np.asarray(weights, dtype=float)
        self.args = (self.weights.shape[0], int(K), float(delta), float(d))
        preferred = [ppsp.optimal_c(*w, *self.args) for w in self.weights]
        lo, hi = min(preferred) / 10.0, max(preferred) * 10.0
        self.grid = _own_grid(grid, np.geomspace(lo, hi, _check_grid_points(grid_points)),
                              opt_out=False)
        self.n = self.weights.shape[0]

    def _cost(self, c_max: ArrayLike, c_min: ArrayLike, w: NDArray) -> NDArray:
        return ppsp.tradeoff_cost(c_max, c_min, w[..., 0], w[..., 1], w[..., 2], *self.args)

    def _accuracy(self, c_max: ArrayLike, w: NDArray) -> NDArray:
        zero = np.zeros_like(w[..., 1])
        return ppsp.tradeoff_cost(c_max, np.inf, zero, w[..., 1], zero, *self.args)

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        order = np.sort(v)
        high = np.where(v == order[-1], order[-2], order[-1])  # the others' largest
        low = np.where(v == order[0], order[1], order[0])  # and smallest
        return self._cost(np.maximum(high[:, None], cand), np.minimum(low[:, None], cand),
                          self.weights[:, None, :])

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        v = np.asarray(values, dtype=float)
        accuracy = self._accuracy(v.max(), self.weights)
        return self.own_costs(v) + accuracy * (rng.standard_normal() ** 2 - 1.0)

    def references(self) -> dict[str, NDArray]:
        common = ppsp.optimal_c(*self.weights.sum(axis=0), *self.args)
        return {"theorem4": self.snap(np.full(self.n, common))}

    def optimum(self) -> float:
        c = ppsp.optimal_c(*self.weights.sum(axis=0), *self.args)
        return self.social_cost(np.full(self.n, c))


class PricingGame(GridGame):
    """FL clients choose their noise ``sigma_i``; client ``i`` pays eq (5)'s ``J_i`` plus, with
    prices, the expected penalty ``beta_i E[(w~_i - mean w~)^2]`` of Definition 4 (the
    compensation, a transfer independent of its own choice, is left out).

    Grid: log-spaced over a decade either side of the eq (10) and eq (11) profiles, and, under
    the MLE rule, ``inf`` (opting out; infinitely penalised with prices). A realized cost draws
    the clients' noises, aggregates them by the rule, and replaces ``Delta`` and ``Delta^2`` in
    eq (9) by their unbiased estimates from the release's error ``e``: ``|e| sqrt(pi/2)`` and
    ``e^2``; the penalty is the realized ``beta_i (w~_i - mean w~)^2``.
    """

    log_scale = True

    def __init__(self, alpha: ArrayLike, kappa: float, L_F: float, c: float, S: float,
                 aggregation: str = "mle", prices: bool = False, grid_points: int = 21,
                 grid: ArrayLike | None = None) -> None:
        self.alpha = np.asarray(alpha, dtype=float)
        self.game = (kappa, L_F, c, S)
        self.aggregation = aggregation
        n = self.alpha.size
        self.beta = (pricing.penalty_coefficients(self.alpha, *self.game, aggregation) if prices
                     else np.zeros(n))
        eq10 = pricing.equilibrium_noise(self.alpha, *self.game, aggregation)
        eq11 = pricing.optimal_noise(self.alpha, *self.game, aggregation)
        lo = min(eq10.min(), eq11.min()) / 10.0
        hi = max(eq10.max(), eq11.max()) * 10.0
        levels = np.geomspace(lo, hi, _check_grid_points(grid_points) - (aggregation == "mle"))
        self.grid = _own_grid(grid, np.append(levels, np.inf) if aggregation == "mle"
                              else levels, opt_out=aggregation == "mle")
        self.prices = prices
        self.n = n

    def costs(self, values: NDArray, candidates: ArrayLike | None = None) -> NDArray:
        v = np.asarray(values, dtype=float)
        cand = self.grid[None, :] if candidates is None else np.asarray(candidates, float)
        n = v.size
        rest = pricing.rest_of_aggregate(v, self.aggregation)[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            own = pricing.own_cost(cand, rest, self.alpha[:, None], *self.game,
                                   self.aggregation, self.beta[:, None], n)
            finite = np.where(np.isfinite(v), v * v, 0.0)
            others = np.fmax(self.beta * (finite.sum() - finite) / n**2, 0.0)  # E penalty's rest
        return own + others[:, None]

    def realized(self, values: NDArray, rng: np.random.Generator) -> NDArray:
        v = np.asarray(values, dtype=float)
        n = v.size
        kappa, L_F, c, S = self.game
        inside = np.isfinite(v)
        noise = np.where(inside, rng.standard_normal(n) * np.where(inside, v, 0.0), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.aggregation == "mle":
                w = np.where(inside, v**-2.0, 0.0)
                error = float(np.sum(w * noise) / w.sum()) if w.sum() > 0 else math.inf
            else:
                error = float(noise.sum() / n) if inside.all() else math.inf
            estimate = abs(error) * math.sqrt(math.pi / 2.0)
            accuracy = (1.0 - self.alpha) * kappa * (estimate + error * error / (2.0 * L_F))
            privacy = np.fmax(self.alpha * c * S / v, 0.0)
            spread = noise - noise.sum() / n
            penalty = np.where(inside, self.beta * spread**2,
                               np.where(self.beta > 0, np.inf, 0.0))
        return accuracy + privacy + penalty

    def references(self) -> dict[str, NDArray]:
        name, profile = ("eq11", pricing.optimal_noise) if self.prices else (
            "eq10", pricing.equilibrium_noise)
        return {name: self.snap(profile(self.alpha, *self.game, self.aggregation))}

    def optimum(self) -> float:
        s = pricing.social_optimum(self.alpha, *self.game, self.aggregation)
        return pricing.social_cost(s, self.alpha, *self.game, self.aggregation)

    def social_cost(self, values: NDArray) -> float:
        """Eq (6): the prices are transfers and cancel out."""
        return pricing.social_cost(values, self.alpha, *self.game, self.aggregation)
