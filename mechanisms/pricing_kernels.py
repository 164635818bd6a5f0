"""A pricing-game client's arithmetic, compiled with numba (``papers/pricing-fl-noise.txt``): its
cost (eq 4-9 with Definition 4's expected penalty), its global best response, and the damped
move toward it.

Imported on first use by :mod:`privgames.mechanisms.pricing` (numba's import is not paid by
code that never solves the game). Why compiled: a client moving in turn searches alone, where
numpy's per-call overhead (some forty calls a search over a 163-point grid) made a move cost
about 80 us against a few us here; a round of simultaneous responses is one pass over the
clients instead of forty over a (grid x N) array. No fast-math: IEEE results, and the cost is
the same operations in the same order as a numpy expression of it would be.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, vectorize

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}  # x / 0 is inf, as in numpy


def _error_scale(s: float, others: float, mle: bool, n: int) -> float:
    """The aggregate's error scale with client ``i`` at ``sigma_i = s``: ``(others +
    s^-2)^-1/2`` (MLE, eq 8) or ``sqrt(others + s^2) / N`` (mean, eq 7)."""
    return 1.0 / math.sqrt(others + 1.0 / (s * s)) if mle else math.sqrt(others + s * s) / n


_error_scale_at = njit(**_JIT)(_error_scale)


def _cost(s: float, others: float, alpha: float, beta: float, kappa: float, L_F: float,
          c: float, S: float, mle: bool, n: int) -> float:
    """``J_i`` plus the expected penalty's own part at ``sigma_i = s`` in ``[0, inf]``:
    ``(1 - alpha) kappa Delta (1 + Delta / (2 L_F)) + alpha c S / s + beta ((N-1)/N)^2 s^2``
    (``Delta``: :func:`_error_scale`). A term that is ``0 * inf`` at an end (privacy with
    ``alpha = 0`` at ``s = 0``, the penalty with ``beta = 0`` at ``s = inf``) is 0: neither
    term is ever negative."""
    d = _error_scale_at(s, others, mle, n)
    privacy = alpha * c * S / s
    penalty = beta * ((n - 1) / n) ** 2 * (s * s)
    return ((1.0 - alpha) * kappa * d * (1.0 + d / (2.0 * L_F))
            + (privacy if privacy > 0.0 else 0.0) + (penalty if penalty > 0.0 else 0.0))


def _slope(s: float, others: float, alpha: float, beta: float, kappa: float, L_F: float,
           c: float, S: float, mle: bool, n: int) -> float:
    """``d/ds`` of :func:`_cost` inside ``(0, inf)``: ``(1 - alpha) kappa (1 + Delta / L_F)
    dDelta/ds - alpha c S / s^2 + 2 beta ((N-1)/N)^2 s``."""
    d = _error_scale_at(s, others, mle, n)
    dd = (d / s) * (d / s) * (d / s) if mle else s / (n * n * d)  # not pow: 20 ns a call
    accuracy = (1.0 - alpha) * kappa * (1.0 + d / L_F) * dd
    return accuracy - alpha * c * S / (s * s) + 2.0 * beta * ((n - 1) / n) ** 2 * s


#: The cost as a numpy ufunc (broadcasting, no temporaries): ``costs(s, others, alpha, beta,
#: kappa, L_F, c, S, mle, n)``.
costs = vectorize(["float64(float64, float64, float64, float64, float64, float64, float64, "
                   "float64, boolean, int64)"], cache=True)(_cost)
_cost_at = njit(**_JIT)(_cost)


@njit(**_JIT)
def accuracy_table(levels: np.ndarray, rests: np.ndarray, L_F: float, mle: bool,
                   n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_cost`'s accuracy factors for a client whose rest of the aggregate is
    ``rests[a]`` choosing ``levels[j]``: ``Delta`` and ``1 + Delta / (2 L_F)``, ``(a, j)``."""
    d = np.empty((rests.size, levels.size))
    e = np.empty((rests.size, levels.size))
    for a in range(rests.size):
        for j in range(levels.size):
            x = _error_scale_at(levels[j], rests[a], mle, n)
            d[a, j] = x
            e[a, j] = 1.0 + x / (2.0 * L_F)
    return d, e


@njit(**_JIT)
def grid_costs(action: np.ndarray, columns: np.ndarray, levels: np.ndarray, d: np.ndarray,
               e: np.ndarray, alpha: np.ndarray, beta: np.ndarray, others: np.ndarray,
               kappa: float, c: float, S: float, n: int, out: np.ndarray) -> np.ndarray:
    """:func:`_cost` plus ``others[i]`` for client ``i`` of each candidate ``levels[columns[i,
    k]]`` (``columns`` of one row: the same for every client), its rest of the aggregate the
    one of its current level ``levels[action[i]]`` (:func:`accuracy_table`'s row). Every
    client's rest takes one of the grid's few values, so ``Delta`` comes from the table: one
    pass, the same operations in the same order as :func:`_cost` (the same bits), into
    ``out`` (``(clients, k)``, from numpy: an array numba allocates is faulted in page by
    page, 4 times the pass at 10^6 clients)."""
    rows, k = action.size, columns.shape[1]
    shared = columns.shape[0] == 1
    whole = shared and k == levels.size  # every level in order: contiguous rows of the table
    for m in range(k if whole else 0):
        whole = whole and columns[0, m] == m
    q = ((n - 1) / n) ** 2
    squares = levels * levels
    for i in range(rows):
        a = action[i]
        accuracy = (1.0 - alpha[i]) * kappa
        privacy = alpha[i] * c * S
        penalty = beta[i] * q
        if whole:  # a loop the compiler vectorizes
            da, ea, o = d[a], e[a], out[i]
            for j in range(k):
                o[j] = _cell(accuracy, da[j], ea[j], privacy, penalty, levels[j], squares[j],
                             others[i])
            continue
        row = columns[0] if shared else columns[i]
        for m in range(k):
            j = row[m]
            out[i, m] = _cell(accuracy, d[a, j], e[a, j], privacy, penalty, levels[j],
                              squares[j], others[i])
    return out


@njit(**_JIT)
def grid_own_least(action: np.ndarray, levels: np.ndarray, d: np.ndarray, e: np.ndarray,
                   alpha: np.ndarray, beta: np.ndarray, others: np.ndarray, kappa: float,
                   c: float, S: float, n: int, own: np.ndarray, least: np.ndarray) -> None:
    """Each client's :func:`grid_costs` row over every level, not kept: its cell at its own
    level into ``own`` and its smallest into ``least`` (numpy's ``min``: a NaN first; in four
    lanes, as ``learning_games.row_minima``), the same bits as the table's, in one pass."""
    k = levels.size
    q = ((n - 1) / n) ** 2
    squares = levels * levels
    row = np.empty(k)
    for i in range(action.size):
        a = action[i]
        accuracy = (1.0 - alpha[i]) * kappa
        privacy = alpha[i] * c * S
        penalty = beta[i] * q
        da, ea = d[a], e[a]
        for j in range(k):
            row[j] = _cell(accuracy, da[j], ea[j], privacy, penalty, levels[j], squares[j],
                           others[i])
        own[i] = row[a]
        l0 = l1 = l2 = l3 = row[0]
        for j in range(1, 1 + 4 * ((k - 1) // 4), 4):
            g0, g1, g2, g3 = row[j], row[j + 1], row[j + 2], row[j + 3]
            l0 = g0 if g0 < l0 or g0 != g0 else l0
            l1 = g1 if g1 < l1 or g1 != g1 else l1
            l2 = g2 if g2 < l2 or g2 != g2 else l2
            l3 = g3 if g3 < l3 or g3 != g3 else l3
        for j in range(1 + 4 * ((k - 1) // 4), k):
            g0 = row[j]
            l0 = g0 if g0 < l0 or g0 != g0 else l0
        l0 = l1 if l1 < l0 or l1 != l1 else l0
        l2 = l3 if l3 < l2 or l3 != l3 else l2
        least[i] = l2 if l2 < l0 or l2 != l2 else l0


@njit(**_JIT)
def realized_costs(v: np.ndarray, noise: np.ndarray, numerator: np.ndarray,
                   outside: np.ndarray, weight: np.ndarray, beta: np.ndarray, loss: float,
                   mean: float, out: np.ndarray) -> np.ndarray:
    """One round's realized cost per client (``learning_slices.PricingSlice._realized``):
    ``weight loss + max(numerator / v, 0) + beta (noise - mean)^2``, the penalty ``outside``
    where ``v`` is not finite; numpy's operations in numpy's order, in one pass (the same
    bits as ``np.fmax``, ``np.where`` and the sums: the privacy term is never ``-0.0``)."""
    for i in range(v.size):
        x = numerator[i] / v[i]
        d = noise[i] - mean
        penalty = beta[i] * (d * d) if abs(v[i]) < np.inf else outside[i]
        out[i] = (weight[i] * loss + (x if x > 0.0 else 0.0)) + penalty
    return out


@njit(inline="always", **_JIT)
def _cell(accuracy: float, d: float, e: float, privacy: float, penalty: float, level: float,
          square: float, other: float) -> float:
    """:func:`grid_costs`' one cell: :func:`_cost`'s terms in its order, plus ``other``."""
    p = privacy / level
    b = penalty * square
    return (accuracy * d * e + (p if p > 0.0 else 0.0) + (b if b > 0.0 else 0.0)) + other


def _damped(sigma: float, target: float, smallest: float, damping: float) -> float:
    """Move ``damping`` of the way from ``sigma`` to ``target`` in precision ``1/sigma``; a
    target of opting out is reached once the precision is below ``1e-6`` of the largest
    client's (``1/smallest``)."""
    x = (1.0 - damping) / sigma + damping / target
    if math.isinf(target) and x < 1e-6 * (1.0 / smallest):
        return math.inf
    return 1.0 / x


#: The damped move as a numpy ufunc, ``damped(sigma, target, smallest, damping)``, and for one
#: client (floats in, a float out, no ufunc machinery).
damped = vectorize(["float64(float64, float64, float64, float64)"], cache=True)(_damped)
damped_at = njit(**_JIT)(_damped)
_slope_at = njit(**_JIT)(_slope)


@njit(**_JIT)
def best_responses(others: np.ndarray, alpha: np.ndarray, beta: np.ndarray, n: int,
                   kappa: float, L_F: float, c: float, S: float, mle: bool, ref: float,
                   log_offsets: np.ndarray, multiples: np.ndarray, xtol: float) -> np.ndarray:
    """Each client's global minimiser of :func:`_cost` over ``[0, inf]``.

    The grid ``ref * multiples`` (``multiples = exp(log_offsets)``; a ``nan`` cost counts as
    the largest), then the sign change of the slope between the best point's neighbours by
    bisection in ``log sigma`` to ``xtol`` (without a sign change: the end it converges to; a
    ``nan`` slope counts as not falling), kept if it costs no more than the grid's best; then
    the ends: opting out (``sigma = inf``) when cheaper, and ``sigma = 0`` for ``alpha_i = 0``
    when no dearer.
    """
    m, points = alpha.size, log_offsets.size
    log_ref = math.log(ref)
    out = np.empty(m)
    for i in range(m):
        o, a, b = others[i], alpha[i], beta[i]
        k, best_value = 0, _cost_at(ref * multiples[0], o, a, b, kappa, L_F, c, S,
                                    mle, n)
        lowest = math.inf if math.isnan(best_value) else best_value
        for j in range(1, points):
            value = _cost_at(ref * multiples[j], o, a, b, kappa, L_F, c, S, mle, n)
            if value < lowest:
                k, best_value, lowest = j, value, value
        lo = log_ref + log_offsets[max(k - 1, 0)]
        hi = log_ref + log_offsets[min(k + 1, points - 1)]
        if not _slope_at(math.exp(lo), o, a, b, kappa, L_F, c, S, mle, n) < 0.0:
            t = lo
        else:
            top = _slope_at(math.exp(hi), o, a, b, kappa, L_F, c, S, mle, n)
            if top < 0.0:
                t = hi
            elif math.isnan(top):
                t = lo
            else:
                while hi - lo > xtol:
                    mid = 0.5 * (lo + hi)
                    if mid <= lo or mid >= hi:
                        break
                    if _slope_at(math.exp(mid), o, a, b, kappa, L_F, c, S, mle, n) < 0.0:
                        lo = mid
                    else:
                        hi = mid
                t = 0.5 * (lo + hi)
        best = math.exp(t)
        refined = _cost_at(best, o, a, b, kappa, L_F, c, S, mle, n)
        if refined <= best_value:
            best_value = refined
        else:
            best = ref * multiples[k]
        opting_out = _cost_at(math.inf, o, a, b, kappa, L_F, c, S, mle, n)
        if opting_out < best_value:
            best, best_value = math.inf, opting_out
        if a == 0.0 and _cost_at(0.0, o, a, b, kappa, L_F, c, S, mle, n) <= best_value:
            best = 0.0
        out[i] = best
    return out
