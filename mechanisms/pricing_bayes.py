"""The pricing game under incomplete information (Hong & Duan, section IV): binary types.

Each client's sensitivity is ``alpha_L`` with probability ``eta`` and ``alpha_H`` otherwise,
independently; it reports a type and chooses its noise on its expected cost over the others'
types. The server aggregates by the MLE rule with the weights ``1 / sigma_hat(report)^2`` of the
reported type's target noise, so the aggregate's error scale is exact for any actual noise:
``Delta = sqrt(sum_i w_i^2 sigma_i^2) / sum_i w_i`` (the paper's ``Delta^inc``). A strategy is
symmetric: per true type (L = 0, H = 1) a report ``rho[t]`` and a noise ``s[t]``.

The mechanism (Definition 5) charges ``P_i = beta(report) (w~_i - mean)^2 - r(report)
p(N_hat_L) - q``, ``p(n)`` the Binomial(N, eta) probability of the reported count of L types.
Its constants are derived here (Proposition 5's ``A_1..A_4`` are in a technical report we do
not have): ``beta`` from the first-order conditions at the social optimum, the rewards from the
two truthfulness constraints, ``q`` from ex-ante budget balance (``docs/errata.md``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from privgames.mechanisms.validation import ConfigError

TRUTHFUL = (0, 1)
#: The symmetric reporting cases of Lemmas 1-3: everyone reports L, everyone H, everyone
#: misreports, everyone is truthful.
CASES = {"all_L": (0, 0), "all_H": (1, 1), "misreport": (1, 0), "truthful": (0, 1)}


@dataclass(frozen=True)
class BinaryGame:
    """The common knowledge: ``N`` clients, types ``alpha_L < alpha_H`` with ``P(L) = eta``,
    the game's constants ``kappa, L_F, c, S`` (eq 4, 9) and the aggregation rule (``mle``:
    weights by the reported type's target noise; ``mean``: equal weights, reports matter only
    through the prices)."""

    N: int
    alpha_L: float
    alpha_H: float
    eta: float
    kappa: float = 1.0
    L_F: float = 1.0
    c: float = 1.0
    S: float = 1.0
    aggregation: str = "mle"

    def __post_init__(self) -> None:
        if self.aggregation not in ("mle", "mean"):
            raise ConfigError(f"aggregation={self.aggregation!r} is not allowed: aggregation "
                             "must be one of mle, mean")
        if self.N < 2:
            raise ConfigError(f"N={self.N!r} is out of range: N must be an integer >= 2")
        if not 0 < self.eta < 1:
            raise ConfigError(f"eta={self.eta!r} is out of range: eta must lie in (0, 1)")
        if not 0 < self.alpha_L < self.alpha_H < 1:
            raise ConfigError(f"alpha_L={self.alpha_L!r}, alpha_H={self.alpha_H!r}: they must "
                             "satisfy 0 < alpha_L < alpha_H < 1")

    @property
    def alpha(self) -> NDArray:
        return np.array([self.alpha_L, self.alpha_H])

    @cached_property
    def others(self) -> NDArray:
        """``P(n of the N - 1 others are L)``, ``n = 0..N-1`` (computed once per game:
        scipy.stats' pmf costs 125 us a call, most of a paper-scale BNE run)."""
        from scipy.stats import binom  # here, not at import: scipy.stats costs ~0.8 s
        return binom.pmf(np.arange(self.N), self.N - 1, self.eta)

    @cached_property
    def likely_others(self) -> tuple[NDArray, NDArray]:
        """The counts ``n`` of L types among the others that carry the Binomial's mass, and
        their probabilities: every count at least ``1e-20`` as likely as the mode (the others
        weigh under ``N 1e-20`` of an expectation; at N = 10^4 they are 96% of the counts)."""
        keep = np.flatnonzero(self.others >= self.others.max() * 1e-20)
        return keep, self.others[keep]

    @cached_property
    def all_counts(self) -> NDArray:
        """``P(n of all N clients are L)``, ``n = 0..N``."""
        from scipy.stats import binom
        return binom.pmf(np.arange(self.N + 1), self.N, self.eta)


@dataclass(frozen=True)
class Mechanism:
    """Definition 5's prices: penalties ``beta`` and rewards ``r`` by reported type (L, H),
    the server's target noise by reported type (its MLE weights), and the compensation."""

    beta: tuple[float, float] = (0.0, 0.0)
    reward: tuple[float, float] = (0.0, 0.0)
    target: tuple[float, float] = (1.0, 1.0)
    q: float = 0.0


def _count_probability(game: BinaryGame, count: NDArray) -> NDArray:
    """``p(N_hat_L)``: the Binomial(N, eta) probability of ``count`` L types."""
    return game.all_counts[count]


def expected_cost(game: BinaryGame, mech: Mechanism, t: int, report: int, sigma: NDArray,
                  rho: tuple[int, int], s: NDArray) -> NDArray:
    """A type-``t`` client's expected cost (eq 13) when it reports ``report`` and adds noise
    ``sigma`` (any shape), the others playing the symmetric strategy ``(rho, s)``.

    The expectation is over the number ``n`` of L types among the others (Binomial(N-1, eta),
    its likely counts: :attr:`BinaryGame.likely_others`), vectorised over ``n``; it includes the
    penalty, the reward and the compensation.
    """
    sigma = np.asarray(sigma, dtype=float)[..., None]
    n, pmf = game.likely_others
    weight = (1.0 / np.asarray(mech.target, dtype=float) ** 2 if game.aggregation == "mle"
              else np.ones(2))  # by reported type
    w_self, w_l, w_h = weight[report], weight[rho[0]], weight[rho[1]]
    m = game.N - 1 - n
    with np.errstate(over="ignore", invalid="ignore"):
        var = w_self**2 * sigma**2 + n * w_l**2 * s[0] ** 2 + m * w_h**2 * s[1] ** 2
        total = w_self + n * w_l + m * w_h
        delta = np.sqrt(var) / total
        accuracy = np.sum(pmf * game.kappa * delta * (1 + delta / (2 * game.L_F)), axis=-1)
    sigma = sigma[..., 0]
    privacy = game.alpha[t] * game.c * game.S / sigma
    others_var = (game.N - 1) * (game.eta * s[0] ** 2 + (1 - game.eta) * s[1] ** 2)
    penalty = mech.beta[report] * (((game.N - 1) / game.N) ** 2 * sigma**2
                                   + others_var / game.N**2)
    reported_l = (report == 0) + n * (rho[0] == 0) + m * (rho[1] == 0)
    reward = mech.reward[report] * np.sum(pmf * _count_probability(game, reported_l))
    return (1 - game.alpha[t]) * accuracy + privacy + penalty - reward - mech.q


def _argmin_noise(f, ref: float, points: int = 121, decades: float = 8.0,
                  zooms: int = 8) -> tuple[float, float]:
    """Global minimiser of ``f`` over ``sigma > 0`` (log grid, then finer grids around the
    best point); returns ``(sigma, f(sigma))``."""
    t = np.log(ref) + np.linspace(-decades, decades, points) * math.log(10)
    step = t[1] - t[0]
    for _ in range(zooms + 1):
        values = f(np.exp(t))
        k = int(np.nanargmin(values))
        best, value = t[k], float(values[k])
        t = best + step * np.linspace(-1, 1, 41)
        step = 2 * step / 40
    return float(np.exp(best)), value


def best_noise(game: BinaryGame, mech: Mechanism, t: int, report: int, rho: tuple[int, int],
               s: NDArray) -> tuple[float, float]:
    """A type-``t`` client's best noise and its expected cost, given its report."""
    ref = float(np.exp(np.mean(np.log(np.asarray(mech.target)))))
    return _argmin_noise(lambda x: expected_cost(game, mech, t, report, x, rho, s), ref)


def case_equilibrium(game: BinaryGame, mech: Mechanism, rho: tuple[int, int],
                     rounds: int = 200, tol: float = 1e-8) -> NDArray:
    """The symmetric noise ``(s_L, s_H)`` at which both types best-respond, every client
    reporting by ``rho`` (Lemmas 1-3, solved by damped best-response iteration)."""
    s = np.array(mech.target, dtype=float)
    for _ in range(rounds):
        new = np.array([best_noise(game, mech, t, rho[t], rho, s)[0] for t in (0, 1)])
        new = np.exp(0.5 * np.log(new) + 0.5 * np.log(s))
        if np.max(np.abs(new / s - 1)) < tol:
            return new
        s = new
    return s


def expected_social_cost(game: BinaryGame, s: NDArray) -> float:
    """``E[sum_i J_i]`` over the realised number of L types (Binomial(N, eta)) when every
    client reports truthfully and type ``t`` adds ``s[t]`` (the server's weights match)."""
    n = np.arange(game.N + 1)
    pmf = _count_probability(game, n)
    if game.aggregation == "mle":
        delta = (n / s[0] ** 2 + (game.N - n) / s[1] ** 2) ** -0.5
    else:
        delta = np.sqrt(n * s[0] ** 2 + (game.N - n) * s[1] ** 2) / game.N
    accuracy = game.kappa * delta * (1 + delta / (2 * game.L_F))
    weight = n * (1 - game.alpha_L) + (game.N - n) * (1 - game.alpha_H)
    privacy = game.c * game.S * (n * game.alpha_L / s[0] + (game.N - n) * game.alpha_H / s[1])
    return float(np.sum(pmf * (weight * accuracy + privacy)))


def social_optimum(game: BinaryGame) -> NDArray:
    """The type-contingent noise ``(s_L**, s_H**)`` minimising the expected social cost
    (Nelder-Mead over ``log s`` from several starts)."""
    def f(log_s: NDArray) -> float:
        return expected_social_cost(game, np.exp(np.clip(log_s, -40, 40)))

    scale = math.log((game.c * game.S / game.kappa) ** 0.5 + game.L_F)
    starts = [np.array([scale + a, scale + b]) for a, b in ((0, 0), (-1, 1), (1, 3), (-2, 0))]
    # Tolerances a float cost can meet: the flat minimum pins log s only to ~1e-8 (sqrt of
    # machine epsilon), and fatol=1e-15 is below one ulp of a cost of order 10, so the simplex
    # cycled to maxiter (80,000 evaluations, 11-35 s for some paper-scale games)
    best = min((minimize(f, x0, method="Nelder-Mead",
                         options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20_000})
                for x0 in starts), key=lambda r: r.fun)
    return np.exp(best.x)


def penalty_coefficients(game: BinaryGame, target: NDArray) -> NDArray:
    """``(beta_L, beta_H)`` making ``target`` each type's first-order point when everyone is
    truthful: ``beta_t = (alpha_t c S / s_t^2 - (1 - alpha_t) dE[L^u]/ds_t) /
    (2 ((N-1)/N)^2 s_t)``, the derivative taken with the server's weights fixed (a client's
    noise does not change its weight)."""
    mech = Mechanism(target=tuple(target))
    out = []
    for t in (0, 1):
        s = float(target[t])
        h = 1e-6 * s

        def accuracy(x: float, t: int = t) -> float:
            base = expected_cost(game, mech, t, t, np.array([x]), TRUTHFUL, target)[0]
            return base - game.alpha[t] * game.c * game.S / x  # the accuracy part alone

        slope = (accuracy(s + h) - accuracy(s - h)) / (2 * h)
        marginal_privacy = game.alpha[t] * game.c * game.S / s**2
        out.append((marginal_privacy - slope) / (2 * ((game.N - 1) / game.N) ** 2 * s))
    return np.array(out)


def report_probabilities(game: BinaryGame) -> NDArray:
    """``(Q_L, Q_H)``: expected ``p(N_hat_L)`` of a client reporting L or H when the others
    report truthfully (the paper's Q_2 and Q_1)."""
    n = np.arange(game.N)
    return np.array([np.sum(game.others * _count_probability(game, n + 1)),
                     np.sum(game.others * _count_probability(game, n))])


def design(game: BinaryGame) -> dict:
    """Proposition 5's mechanism, derived: target ``s**``, penalties, rewards, compensation.

    With the others truthful at ``s**``, let ``C_t(a)`` be a type-``t`` client's lowest
    expected cost (without reward) when it reports ``a`` and then chooses its noise. Truth is
    a BNE iff ``r_L Q_L - r_H Q_H >= C_L(L) - C_L(H) = D_L`` and
    ``r_H Q_H - r_L Q_L >= C_H(H) - C_H(L) = D_H``: feasible iff ``D_L + D_H <= 0``. We take
    the midpoint ``u = (D_L - D_H) / 2`` of the feasible interval for ``r_L Q_L - r_H Q_H`` and
    the smallest non-negative rewards that give it. ``q`` balances the expected budget.
    """
    target = social_optimum(game)
    beta = penalty_coefficients(game, target)
    priced = Mechanism(beta=tuple(beta), target=tuple(target))
    cost = np.array([[best_noise(game, priced, t, a, TRUTHFUL, target)[1] for a in (0, 1)]
                     for t in (0, 1)])
    d_l, d_h = cost[0, 0] - cost[0, 1], cost[1, 1] - cost[1, 0]
    q_prob = report_probabilities(game)
    u = (d_l - d_h) / 2
    reward = np.array([max(u, 0.0) / q_prob[0], max(-u, 0.0) / q_prob[1]])
    mech = Mechanism(beta=tuple(beta), reward=tuple(reward), target=tuple(target))
    mech = dataclasses.replace(mech, q=compensation(game, mech, target))
    return {"target": target, "beta": beta, "reward": reward, "feasible": d_l + d_h <= 0,
            "D": np.array([d_l, d_h]), "Q": q_prob, "mechanism": mech}


def compensation(game: BinaryGame, mech: Mechanism, s: NDArray) -> float:
    """Ex-ante budget balance under truthful reports and noise ``s``: ``q`` is the expected
    per-client penalty minus reward."""
    n = np.arange(game.N + 1)
    pmf = _count_probability(game, n)
    mean_var = (n * s[0] ** 2 + (game.N - n) * s[1] ** 2) / game.N
    own = ((game.N - 1) / game.N) ** 2
    penalty_l = mech.beta[0] * (own * s[0] ** 2 + (game.N * mean_var - s[0] ** 2) / game.N**2)
    penalty_h = mech.beta[1] * (own * s[1] ** 2 + (game.N * mean_var - s[1] ** 2) / game.N**2)
    p = _count_probability(game, n)
    total = n * (penalty_l - mech.reward[0] * p) + (game.N - n) * (penalty_h
                                                                     - mech.reward[1] * p)
    return float(np.sum(pmf * total) / game.N)


def deviation_gains(game: BinaryGame, mech: Mechanism, s: NDArray) -> NDArray:
    """Per type: how much a client gains by misreporting (and re-choosing its noise) when the
    others are truthful at ``s``; truth is a BNE iff no gain is positive."""
    gains = []
    for t in (0, 1):
        honest = expected_cost(game, mech, t, t, np.array([s[t]]), TRUTHFUL, s)[0]
        honest = min(honest, best_noise(game, mech, t, t, TRUTHFUL, s)[1])
        lie = best_noise(game, mech, t, 1 - t, TRUTHFUL, s)[1]
        gains.append(honest - lie)
    return np.array(gains)
