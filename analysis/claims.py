"""Claims of the papers beside our measurements, each with a verdict.

A :class:`Claim` pairs what a paper states (a value, a formula's prediction or an inequality)
with what privgames measured, and judges it:

* **holds** — an equality within 3 standard errors (a Monte-Carlo figure; several comparisons
  at once use the family-wise threshold of :func:`z_threshold`) or within a stated tolerance (a
  deterministic figure);
* **bound** — an inequality the measurement satisfies; the slack says by how much;
* **fails** — the measurement contradicts the printed claim; ``erratum`` names the entry of
  ``docs/errata.md`` that explains it (a failure without one is a finding to investigate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtr, ndtri

VERDICTS = ("holds", "bound", "fails")


def z_threshold(comparisons: int, sigmas: float = 3.0) -> float:
    """Threshold on the largest |z| of ``comparisons`` independent z-scores at the
    family-wise level of one ``sigmas``-sigma test (Bonferroni): 3.0 for one comparison."""
    level = 2 * ndtr(-sigmas)  # two-sided tail of one sigmas-sigma test
    return float(-ndtri(level / (2 * max(comparisons, 1))))


@dataclass(frozen=True)
class Claim:
    """One printed claim and our measurement of it.

    Attributes:
        claim: what the paper states, citing the equation or theorem.
        paper: the paper's (or the formula's) value; for a bound, the bound.
        measured: our number.
        se: standard error of ``measured`` (Monte-Carlo claims).
        tolerance: allowed absolute difference (deterministic claims), or for ``z`` claims the
            z threshold.
        kind: ``equal`` (|measured - paper| within 3 SE or ``tolerance``), ``true`` (a
            qualitative claim; ``measured`` says whether it was observed), ``at_most``
            (measured <= paper), ``at_least`` (measured >= paper), ``z`` (``measured`` is a
            largest |z|-score, ``tolerance`` its threshold) or ``false`` (the printed claim is
            contradicted by ``measured``, see ``erratum``).
        erratum: the ``docs/errata.md`` entry that explains a failure.
    """

    claim: str
    paper: float | str | None
    measured: float | str | None
    se: float | None = None
    tolerance: float | None = None
    kind: str = "equal"
    erratum: str | None = None

    def verdict(self) -> tuple[str, str]:
        """``(verdict, detail)``: the verdict and the numbers behind it."""
        m, p = self.measured, self.paper
        if self.kind == "false":
            return "fails", f"see errata: {self.erratum}"
        if m is None or (isinstance(m, float) and math.isnan(m)):
            return "fails", "not measured"
        if self.kind == "true":
            return ("holds" if m else "fails"), ("as claimed" if m else "contradicted")
        if self.kind == "z":
            ok = m <= self.tolerance
            return ("holds" if ok else "fails"), f"max z = {m:.2f}, threshold {self.tolerance:.2f}"
        if self.kind in ("at_most", "at_least"):
            gap = (p - m) if self.kind == "at_most" else (m - p)
            allowed = 3 * self.se if self.se else (self.tolerance or 0.0)
            if gap >= -allowed:
                rel = f" ({gap / abs(p):.3g} of the bound)" if p else ""
                return "bound", f"slack {gap:.4g}{rel}"
            return "fails", f"violated by {-gap:.4g}" + (f"; {self.erratum}" if self.erratum
                                                         else "")
        diff = abs(m - p)
        if self.se:
            z = diff / self.se
            ok, detail = z <= 3.0, f"z = {z:.2f} (3 SE)"
        elif self.se == 0.0 and self.tolerance is None:
            ok, detail = diff == 0.0, f"|diff| = {diff:.3g} (exact)"
        else:
            tol = self.tolerance or 0.0
            ok, detail = diff <= tol, f"|diff| = {diff:.3g} (tolerance {tol:.3g})"
        if not ok and self.erratum:
            detail += f"; see errata: {self.erratum}"
        return ("holds" if ok else "fails"), detail

    def row(self) -> dict:
        """The claim as a report row."""
        verdict, detail = self.verdict()
        return {"claim": self.claim, "paper": _fmt(self.paper), "measured": _fmt(self.measured),
                "± SE": _fmt(self.se), "verdict": f"**{verdict}**", "detail": detail}


def gaussian_epsilon_claim(where: str, exact: float, paper: float) -> Claim:
    """The paper's classical epsilon (eq 3) against the exact one: a bound where eq (3) is in
    its range (``epsilon < 1``) and is an upper bound, a failure otherwise."""
    claim = f"{where}: the release is epsilon-DP with epsilon from eq (3)"
    if paper < 1.0 and exact <= paper:
        return Claim(claim, paper, exact, kind="at_most")
    return Claim(claim, paper, exact, kind="false",
                 erratum="eq (3), eq (30): eq (3) holds only for epsilon < 1; `measured` is the "
                         "exact (analytic Gaussian) epsilon")


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
