"""The Clip-Laplace mechanism and its calibration (APES, ``papers/apes-shuffle-clip-laplace.txt``,
Definition 4, Theorem 1, eq 1), and the classic Laplace mechanism of the baselines.

``CLap(x, lambda, A)`` is the Laplace density centred at ``x`` truncated to ``[-A, A]`` and
renormalised. For gradients clipped to ``[-C, C]`` (``Delta f = 2C``), APES uses ``lambda =
2C / eps`` and ``A = C`` (Theorem 1: ``eps``-LDP). The printed normalising constant repeats one
exponent; the correct one is ``S = 1 - e^(-(A - x)/lambda)/2 - e^(-(A + x)/lambda)/2``
(``docs/errata.md``). Everything here is vectorised and broadcasts over its arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.interpolate import CubicHermiteSpline
from scipy.optimize.elementwise import find_root
from scipy.special import gammainc

from privgames.mechanisms.validation import ConfigError


def _scale(eps: ArrayLike, C: float) -> NDArray:
    e = np.asarray(eps, dtype=float)
    if np.any(~(e > 0)) or not C > 0:
        raise ConfigError(f"eps must be > 0 and C > 0 (got eps min {np.min(e)!r}, C={C!r})")
    return 2.0 * C / e


def normaliser(x: ArrayLike, lam: ArrayLike, A: float) -> NDArray:
    """``S``: the Laplace mass of ``[-A, A]`` around ``x`` (Definition 4, corrected)."""
    x = np.asarray(x, dtype=float)
    return 1.0 - 0.5 * np.exp(-(A - x) / lam) - 0.5 * np.exp(-(A + x) / lam)


def clip_laplace_pdf(y: ArrayLike, x: ArrayLike, eps: ArrayLike, C: float,
                     A: float | None = None) -> NDArray:
    """Density of ``CLap(x, 2C/eps, A)`` at ``y`` (``A`` defaults to ``C``)."""
    A = C if A is None else A
    lam = _scale(eps, C)
    y, x = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    inside = np.abs(y) <= A
    dens = np.exp(-np.abs(y - x) / lam) / (2.0 * lam * normaliser(x, lam, A))
    return np.where(inside, dens, 0.0)


def clip_laplace_sample(x: ArrayLike, eps: ArrayLike, C: float, rng: np.random.Generator,
                        A: float | None = None, out: NDArray | None = None) -> NDArray:
    """Exact draws of ``CLap(x, 2C/eps, A)`` by the inverse CDF of the truncated Laplace: a
    uniform on the Laplace CDF's range over ``[-A, A]`` mapped back, each tail computed from its
    own side (no cancellation near either end). One uniform per draw, transformed in
    cache-sized blocks by branch-free passes over reused buffers (``_clap_block``); into
    ``out`` when given (C-contiguous, of the broadcast shape)."""
    A = C if A is None else A
    return _blockwise(x, _scale(eps, C), rng, lambda *block: _clap_block(*block, A=A), out)


def _blockwise(x: ArrayLike, lam: NDArray, rng: np.random.Generator,
               kernel: Callable[..., None], out: NDArray | None = None) -> NDArray:
    """Draws of the shape of ``x`` and ``lam`` broadcast, ``kernel(x, lam, rng, out, *work)``
    filling them a block of rows at a time with four reused work buffers; ``lam`` stays a
    column when it is one budget per row. Blocks consume the generator in order, so the draws
    do not depend on ``BLOCK``."""
    x = np.asarray(x, dtype=float)
    shape = np.broadcast_shapes(x.shape, lam.shape)
    flat = (int(np.prod(shape[:-1])), shape[-1]) if shape else (1, 1)
    xb = np.broadcast_to(x, shape).reshape(flat)
    per_row = lam.ndim == 0 or lam.shape[-1] == 1  # one budget per user: keep it compact
    lam_b = (np.broadcast_to(lam, (*shape[:-1], 1)).reshape(flat[0], 1) if per_row
             else np.broadcast_to(lam, shape).reshape(flat))
    if out is None:
        out = np.empty(shape)
    elif out.shape != shape or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous array of shape {shape}")
    rows = out.reshape(flat)  # a view
    step = max(1, BLOCK // flat[1])
    work = np.empty((4, min(step, flat[0]), flat[1]))
    for lo in range(0, flat[0], step):
        sl = slice(lo, lo + step)
        kernel(xb[sl], lam_b[sl], rng, rows[sl], *work[:, :rows[sl].shape[0]])
    return out


def clip_laplace_zero(eps: ArrayLike, C: float, shape: tuple[int, ...],
                      rng: np.random.Generator, out: NDArray | None = None) -> NDArray:
    """Exact draws of ``CLap(0, 2C/eps, C)`` (S-APES's padding) of ``shape``, ``eps``
    broadcasting against it: the law is symmetric, so one uniform ``V`` gives the sign of
    ``2V - 1`` and, through ``U = |2V - 1|``, the magnitude by the truncated exponential's
    inverse CDF ``-lam log(1 - U (1 - e^(-C/lam)))``: half the general sampler's passes."""
    zero = np.broadcast_to(np.zeros(()), shape)
    return _blockwise(zero, _scale(eps, C), rng, lambda *block: _zero_block(*block, C=C), out)


def _zero_block(_: NDArray, lam: NDArray, rng: np.random.Generator, out: NDArray,
                w: NDArray, *__: NDArray, C: float) -> None:
    """One block of :func:`clip_laplace_zero`, in place."""
    rng.random(out=w)
    w *= 2.0
    w -= 1.0  # 2V - 1, exact
    np.abs(w, out=out)
    out *= np.expm1(-C / lam)  # -U q, q the magnitude's mass below C
    np.log1p(out, out=out)
    out *= -lam
    np.minimum(out, C, out=out)  # rounding: the magnitude stays in [0, C]
    np.copysign(out, w, out=out)


#: Draws transformed at once by :func:`clip_laplace_sample` (fits the L2 cache).
BLOCK = 1 << 14


def _clap_block(x: NDArray, lam: NDArray, rng: np.random.Generator, out: NDArray,
                low: NDArray, high: NDArray, mass: NDArray, v: NDArray, *, A: float) -> None:
    """One block of ``CLap``, in place, in doubled CDF units: ``2F(-A) = K / E`` and ``2(1 -
    F(A)) = K E`` with ``E = e^(x/lam)``, ``K = e^(-A/lam)`` (one exponential per draw; two
    where ``A/lam > 700`` would overflow). With ``V`` uniform, ``2F(z) = 2F(-A) + 2V S`` and,
    from the top, ``2(1 - F(z)) = 2(1 - F(A)) + 2(1 - V) S``."""
    if x.min() < -A or x.max() > A:  # the tails below hold on [-A, A] only
        raise ConfigError(f"x must lie in [-A, A] = [{-A!r}, {A!r}] (got values from "
                          f"{float(x.min())!r} to {float(x.max())!r}): clip the inputs first")
    a = A / lam
    if np.max(a) < 700.0:
        np.divide(x, lam, out=low)
        np.exp(low, out=low)
        k = np.exp(-a)
        np.multiply(low, k, out=high)
        np.divide(k, low, out=low)
    else:
        np.exp((x - A) / lam, out=high)
        np.exp(-(x + A) / lam, out=low)
    np.add(low, high, out=mass)
    np.subtract(2.0, mass, out=mass)  # 2S
    rng.random(out=v)
    np.multiply(v, mass, out=out)
    out += low  # 2F(z)
    np.subtract(1.0, v, out=v)
    v *= mass
    v += high  # 2(1 - F(z))
    _from_tails(out, v, x, lam, low)
    np.clip(out, -A, A, out=out)


def _laplace_block(x: NDArray, lam: NDArray, rng: np.random.Generator, out: NDArray,
                   v: NDArray, side: NDArray, *_: NDArray) -> None:
    """One block of ``x + Lap(lam)``: ``2F(z) = 2V``, ``2(1 - F(z)) = 2(1 - V)``; ``V = 0``
    (probability ``2^-53``, which numpy's ``laplace`` redraws) is held at the next grid
    point's tail, so no draw is infinite."""
    rng.random(out=v)
    np.multiply(v, 2.0, out=out)
    np.maximum(out, _EPS, out=out)
    np.subtract(1.0, v, out=v)
    v *= 2.0
    _from_tails(out, v, x, lam, side)


def _from_tails(below: NDArray, above: NDArray, x: NDArray, lam: NDArray,
                side: NDArray) -> None:
    """The Laplace inverse CDF from both doubled tails at once, into ``below``: the smaller
    tail is ``e^(-|z - x|/lam)`` on ``z``'s side, which the sign of their difference picks
    (one logarithm, branch-free: no masked copies)."""
    np.subtract(below, above, out=side)  # > 0 above x
    np.minimum(below, above, out=above)
    np.log(above, out=above)
    above *= lam  # -|z - x|: copysign keeps the magnitude
    np.copysign(above, side, out=above)
    np.add(above, x, out=below)


_EPS = float(np.finfo(float).eps)


def _moments(x: NDArray, lam: NDArray, A: float) -> tuple[NDArray, NDArray]:
    """First and second moments of ``CLap(x, lam, A)`` from the incomplete gamma function:
    ``int_0^a u^j e^(-u/lam) du = lam^(j+1) j! P(j+1, a/lam)`` on each side of ``x``."""
    a, b = (A + x) / lam, (A - x) / lam

    def m(j: int, t: NDArray) -> NDArray:
        return lam ** (j + 1) * float(np.prod(np.arange(1, j + 1))) * gammainc(j + 1, t)

    norm = 2.0 * lam * normaliser(x, lam, A)
    first = (x * m(0, a) - m(1, a) + x * m(0, b) + m(1, b)) / norm
    second = (x * x * m(0, a) - 2 * x * m(1, a) + m(2, a) + x * x * m(0, b) + 2 * x * m(1, b)
              + m(2, b)) / norm
    return first, second


def clip_laplace_mean(x: ArrayLike, eps: ArrayLike, C: float) -> NDArray:
    """Eq (1): ``E[CLap(x, 2C/eps, C)] = ((C + lam)(e1 - e2) + 2x) / (2 - e1 - e2)``, ``e1 =
    e^((-C - x)/lam)``, ``e2 = e^((-C + x)/lam)`` (checked against numerical integration)."""
    lam = _scale(eps, C)
    x = np.asarray(x, dtype=float)
    e1, e2 = np.exp((-C - x) / lam), np.exp((-C + x) / lam)
    return ((C + lam) * (e1 - e2) + 2.0 * x) / (2.0 - e1 - e2)


def clip_laplace_mean_slope(x: ArrayLike, eps: ArrayLike, C: float) -> NDArray:
    """``d/dx`` of eq (1) (positive: the mean is increasing in ``x``)."""
    lam = _scale(eps, C)
    x = np.asarray(x, dtype=float)
    e1, e2 = np.exp((-C - x) / lam), np.exp((-C + x) / lam)
    num, den = (C + lam) * (e1 - e2) + 2.0 * x, 2.0 - e1 - e2
    dnum = 2.0 - (C + lam) * (e1 + e2) / lam
    dden = (e1 - e2) / lam
    return (dnum * den - num * dden) / den**2


def clip_laplace_var(x: ArrayLike, eps: ArrayLike, C: float) -> NDArray:
    """Variance of ``CLap(x, 2C/eps, C)`` (closed form via the incomplete gamma function)."""
    first, second = _moments(np.asarray(x, dtype=float), _scale(eps, C), C)
    return second - first**2


def laplace_sample(x: ArrayLike, eps: ArrayLike, C: float, rng: np.random.Generator,
                   out: NDArray | None = None) -> NDArray:
    """The classic Laplace mechanism for gradients in ``[-C, C]``: ``x + Lap(2C/eps)``, by the
    inverse CDF of one uniform per draw as numpy's ``laplace`` (same draws up to rounding),
    in blocks over reused buffers: a fifth of its time."""
    return _blockwise(x, _scale(eps, C), rng, _laplace_block, out)


#: Grid points of the calibration curve (cubic Hermite with exact slopes, error ~ h^4).
CALIBRATION_GRID = 257


class Calibration:
    """The analyzer's calibration (section "Analyzing Process"): for each dimension, the ``g``
    in ``[-C, C]`` with ``(1/n) sum_i E[CLap(g, 2C/eps_i, C)] = mean``.

    The curve ``g -> (1/n) sum_i E_i(g)`` depends only on the multiset of (shuffled) budgets,
    so it is built once: evaluated exactly (eq 1 and its slope) on a grid, in chunks of
    budgets, and interpolated by a cubic Hermite spline. A call inverts it per dimension with a
    vectorised bracketing root finder; means outside the curve's range (noise) map to the
    nearest end, ``-C`` or ``C``.
    """

    def __init__(self, eps: ArrayLike, C: float) -> None:
        eps = np.asarray(eps, dtype=float).ravel()
        self.C = C
        grid = np.linspace(-C, C, CALIBRATION_GRID)
        curve, slope = np.zeros_like(grid), np.zeros_like(grid)
        for lo in range(0, eps.size, _CHUNK):
            e = eps[None, lo:lo + _CHUNK]
            curve += clip_laplace_mean(grid[:, None], e, C).sum(axis=1)
            slope += clip_laplace_mean_slope(grid[:, None], e, C).sum(axis=1)
        self.curve = curve / eps.size
        self.spline = CubicHermiteSpline(grid, self.curve, slope / eps.size)

    def __call__(self, mean: ArrayLike) -> NDArray:
        C, curve = self.C, self.curve
        target = np.asarray(mean, dtype=float)
        flat = target.ravel()
        out = np.where(flat >= curve[-1], C, -C)  # saturated: beyond the curve's range
        inside = (flat > curve[0]) & (flat < curve[-1])
        if inside.any():
            t = flat[inside]
            res = find_root(lambda g, tt: self.spline(g) - tt,
                            (np.full_like(t, -C), np.full_like(t, C)), args=(t,),
                            tolerances={"xatol": 1e-13 * C, "xrtol": 0.0})
            out[inside] = res.x
        return out.reshape(target.shape)


#: Budgets per chunk of the calibration curve's evaluation (a ``grid x chunk`` array).
_CHUNK = 4096
