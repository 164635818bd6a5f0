"""An empirical privacy audit of the shuffled Clip-Laplace reports (APES, one dimension).

Two neighbouring data sets differ in one user's datum: ``+C`` (``D``) or ``-C`` (``D'``); the
others hold 0. The target is given the largest budget (the worst case of Theorem 4). In every
trial all ``n`` users perturb with their own budgets and the shuffler releases the multiset of
values (and, separately, of budgets); the attacker thresholds the sum of the released values.
Half of the trials choose the threshold and its direction, the other half measure it: with
Clopper-Pearson bounds on the true- and false-positive rates, ``eps >= ln((TPR - delta) /
FPR)`` for any ``(eps, delta)``-DP release, so the interval's lower end is a certified lower
bound on the central epsilon (at the stated confidence), to set beside the upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from privgames.environments.config import Footprint, check_choice, check_int, check_real
from privgames.environments.streams import Seed, generator, spawn
from privgames.mechanisms.noise import clip_laplace_sample, clip_laplace_zero
from privgames.mechanisms.shuffle import DISTRIBUTIONS, personalized_budgets

#: Draws per block of trials: bounded memory, and a block in cache (2^18 drew 1.2x faster
#: than 2^22 at n = 1,000; 2^14 is slower again, by the per-block overhead).
BLOCK = 1 << 18


@dataclass(frozen=True)
class AuditConfig:
    """One audit of the shuffled Clip-Laplace reports.

    Attributes:
        n: users.
        distribution: of their budgets (Table 2).
        C: the clip bound.
        trials: attacks per data set.
        delta_s: the delta of the bound audited.
        confidence: of each Clopper-Pearson bound (two-sided interval per rate).
    """

    n: int = 100
    distribution: str = "uniform2"
    C: float = 1.0
    trials: int = 100_000
    delta_s: float = 1e-8
    confidence: float = 0.95

    def __post_init__(self) -> None:
        check_int("n", self.n, 2, 10**6)
        check_choice("distribution", self.distribution, tuple(DISTRIBUTIONS))
        check_real("C", self.C, 0.0, low_open=True)
        check_int("trials", self.trials, 100)
        check_real("delta_s", self.delta_s, 0.0, 1.0, low_open=True, high_open=True)
        check_real("confidence", self.confidence, 0.5, 1.0, high_open=True)

    def footprint(self) -> Footprint:
        return Footprint(8.0 * min(BLOCK, self.trials * self.n) * 4 + 32.0 * self.trials,
                         2.0 * self.trials * self.n, "trials")


def released_sums(budgets: NDArray, trials: int, C: float,
                  seeds: tuple[Seed, Seed, Seed]) -> tuple[NDArray, NDArray]:
    """The sum of the shuffled reports in each trial on ``D`` (user 0 holds ``+C``) and on
    ``D'`` (``-C``), the others 0 in both. The shuffle leaves a sum unchanged, so the multiset
    is not materialised; the others' sum has the same law in both data sets, so trial ``t``
    of ``D`` and of ``D'`` share it (drawn by the zero-centred sampler, a third of the general
    one's work) and differ in the target's report only: each data set's trials are exactly
    i.i.d. with its law, which is all each rate's Clopper-Pearson interval needs, at half the
    draws. ``seeds``: the others', ``D``'s target's and ``D'``'s target's streams."""
    others_rng, d_rng, d2_rng = (generator(s) for s in seeds)
    on_d, on_d2 = np.empty(trials), np.empty(trials)
    step = max(1, BLOCK // budgets.size)
    for lo in range(0, trials, step):
        k = min(step, trials - lo)
        others = clip_laplace_zero(budgets[1:], C, (k, budgets.size - 1), others_rng).sum(axis=1)
        for out, value, rng in ((on_d, C, d_rng), (on_d2, -C, d2_rng)):
            target = clip_laplace_sample(np.full((k, 1), value), budgets[:1], C, rng)
            out[lo: lo + k] = target[:, 0] + others
    return on_d, on_d2


def clopper_pearson(k: NDArray, n: int, confidence: float) -> tuple[NDArray, NDArray]:
    """Two-sided Clopper-Pearson interval of a binomial proportion."""
    a = (1 - confidence) / 2
    k = np.asarray(k, dtype=float)
    from scipy.stats import beta as beta_dist  # here, not at import: scipy.stats costs ~0.8 s
    lo = np.where(k > 0, beta_dist.ppf(a, k, n - k + 1), 0.0)
    hi = np.where(k < n, beta_dist.ppf(1 - a, k + 1, n - k), 1.0)
    return lo, hi


def _eps(tpr: NDArray, fpr: NDArray, delta: float) -> NDArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((tpr > delta) & (fpr > 0), np.log((tpr - delta) / fpr),
                        np.where(tpr > delta, np.inf, -np.inf))


def audit(config: AuditConfig, seed: Seed) -> dict:
    """The attack: ``audit_eps_lower`` (the certified lower end), ``audit_eps_estimate`` and
    ``audit_eps_lower_ci`` (Clopper-Pearson on both rates), the threshold, the budgets."""
    c = config
    budget_seed, *sum_seeds = spawn(seed, 4)
    budgets = personalized_budgets(c.distribution, c.n, generator(budget_seed))
    budgets[[0, int(np.argmax(budgets))]] = budgets[[int(np.argmax(budgets)), 0]]
    on_d, on_d2 = released_sums(budgets, 2 * c.trials, c.C, tuple(sum_seeds))
    choose_d, test_d = on_d[: c.trials], on_d[c.trials:]
    choose_d2, test_d2 = on_d2[: c.trials], on_d2[c.trials:]
    best = (-math.inf, 0.0, 1.0)
    for sign in (1.0, -1.0):  # reject when sign * sum >= threshold
        a, b = np.sort(sign * choose_d), np.sort(sign * choose_d2)
        grid = np.quantile(a, np.linspace(0.5, 1.0, 201)[:-1])
        tpr = 1 - np.searchsorted(a, grid) / a.size
        fpr = 1 - np.searchsorted(b, grid) / b.size
        lo_t, _ = clopper_pearson(tpr * a.size, a.size, c.confidence)
        _, hi_f = clopper_pearson(fpr * b.size, b.size, c.confidence)
        score = _eps(lo_t, hi_f, c.delta_s)
        k = int(np.argmax(score))
        if score[k] > best[0]:
            best = (float(score[k]), float(grid[k]), sign)
    _, threshold, sign = best
    hits_d = int(np.sum(sign * test_d >= threshold))
    hits_d2 = int(np.sum(sign * test_d2 >= threshold))
    lo_t, hi_t = clopper_pearson(hits_d, c.trials, c.confidence)
    lo_f, hi_f = clopper_pearson(hits_d2, c.trials, c.confidence)
    estimate = float(_eps(np.array(hits_d / c.trials), np.array(hits_d2 / c.trials),
                          c.delta_s))
    lower = float(_eps(lo_t, hi_f, c.delta_s))
    upper = float(_eps(hi_t, lo_f, c.delta_s))
    return {"audit_eps_lower": max(lower, 0.0), "audit_eps_estimate": estimate,
            "audit_eps_lower_ci": [max(lower, 0.0), upper], "threshold": threshold,
            "direction": sign, "true_positive": hits_d / c.trials,
            "false_positive": hits_d2 / c.trials, "budgets": budgets}
