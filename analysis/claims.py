"""Claims of the papers beside our measurements, each with a verdict.

A :class:`Claim` pairs what a paper states (a value, a formula's prediction or an inequality)
with what privgames measured, and judges it:

* **holds** — an equality within 3 standard errors (a Monte-Carlo figure; several comparisons
  at once use the family-wise threshold of :func:`z_threshold`) or within a stated tolerance (a
  deterministic figure);
* **bound** — an inequality the measurement satisfies (by more than 3 standard errors, when
  it has one); the slack says by how much;
* **fails** — the measurement contradicts the printed claim, by the same rules (an inequality:
  by more than 3 standard errors);
* **not resolved** — an inequality whose measurement lies within 3 standard errors of its
  bound: the data separate neither side (never read as a failure);
* **too few runs** — the same, for a claim that knows how many runs it stands on (``runs``):
  the detail says about how many would separate a difference of the measured size;
* **not applicable** — the paper's reference does not apply to the run, or nothing was
  measured, with the reason.

No verdict is a constant: a claim that the papers get wrong is stated as printed and fails
only because the measurement contradicts it (so it would read "holds" if the paper were right).
``erratum`` names the entry of ``docs/errata.md`` that explains such a failure; it is shown only
on a computed failure, and the caller passes it only for the case it explains (a rule, a
reading). A failure without one is a finding to investigate, and says so ("unexplained").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtr, ndtri

VERDICTS = ("holds", "bound", "fails", "not resolved", "too few runs", "not applicable")
KINDS = ("equal", "true", "at_most", "at_least", "z")


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
            (measured <= paper), ``at_least`` (measured >= paper) or ``z`` (``measured`` is a
            largest |z|-score, ``tolerance`` its threshold).
        erratum: the ``docs/errata.md`` entry that explains a failure (shown only on one).
        inapplicable: why the paper's reference does not apply to this run (another budget
            than the printed table's, nothing to compare); the claim is then not judged.
        runs: how many independent runs ``measured`` and ``se`` stand on, where that is what
            limits the evidence (shares of runs); an undecided inequality then reads "too
            few runs".
    """

    claim: str
    paper: float | str | None
    measured: float | str | None
    se: float | None = None
    tolerance: float | None = None
    kind: str = "equal"
    erratum: str | None = None
    inapplicable: str | None = None
    runs: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not allowed: kind must be one of "
                             + ", ".join(KINDS))

    def verdict(self) -> tuple[str, str]:
        """``(verdict, detail)``: the verdict and the numbers behind it; a failure's detail
        ends with its erratum."""
        if self.inapplicable:
            return "not applicable", self.inapplicable
        m = self.measured
        if m is None or (isinstance(m, float) and math.isnan(m)):
            return "not applicable", "nothing measured"
        verdict, detail = self._judge()
        if verdict == "fails":
            detail += (f"; see errata: {self.erratum}" if self.erratum
                       else "; unexplained (no erratum)")
        return verdict, detail

    def _judge(self) -> tuple[str, str]:
        m, p = self.measured, self.paper
        if self.kind == "true":
            return ("holds" if m else "fails"), ("as claimed" if m else "contradicted")
        if self.kind == "z":
            ok = m <= self.tolerance
            return ("holds" if ok else "fails"), f"max z = {m:.2f}, threshold {self.tolerance:.2f}"
        if self.kind in ("at_most", "at_least"):
            gap = (p - m) if self.kind == "at_most" else (m - p)
            if self.se and abs(gap) < 3 * self.se:
                return self._undecided(gap / self.se)
            allowed = 0.0 if self.se else (self.tolerance or 0.0)
            if gap >= -allowed:
                rel = f" ({gap / abs(p):.3g} of the bound)" if p else ""
                return "bound", f"slack {gap:.4g}{rel}"
            return "fails", f"violated by {-gap:.4g}"
        diff = abs(m - p)
        if self.se:
            z = diff / self.se
            ok, detail = z <= 3.0, f"z = {z:.2f} (3 SE)"
        elif self.se == 0.0 and self.tolerance is None:
            ok, detail = diff == 0.0, f"|diff| = {diff:.3g} (exact)"
        else:
            tol = self.tolerance or 0.0
            ok, detail = diff <= tol, f"|diff| = {diff:.3g} (tolerance {tol:.3g})"
        return ("holds" if ok else "fails"), detail

    def _undecided(self, z: float) -> tuple[str, str]:
        """An inequality within 3 SE of its bound: how far, and what would separate it."""
        detail = f"z = {z:.2f}, within 3 SE of the bound"
        if self.runs is None:
            return "not resolved", detail
        runs = math.ceil(round(self.runs * (3 / z) ** 2, 9)) if z else 0
        need = f"; about {runs:,} runs would separate a difference of this size" if z else ""
        return "too few runs", f"n = {self.runs}: {detail}{need}"

    def row(self) -> dict:
        """The claim as a report row."""
        verdict, detail = self.verdict()
        return {"claim": self.claim, "paper": _fmt(self.paper), "measured": _fmt(self.measured),
                "± SE": _fmt(self.se), "verdict": verdict, "detail": detail}


EQ3_ERRATUM = ("eq (3), eq (30): eq (3) holds only for epsilon < 1; `measured` is the exact "
               "(analytic Gaussian) epsilon")


def gaussian_epsilon_claim(where: str, exact: float, paper: float,
                           erratum: str = EQ3_ERRATUM) -> Claim:
    """The paper's classical epsilon (eq 3) as an upper bound on the exact one: a bound where it
    is one (inside eq (3)'s range ``epsilon < 1`` it always is), a failure where the exact
    epsilon exceeds it, explained by ``erratum`` (by default eq (3)'s range)."""
    return Claim(f"{where}: the release is epsilon-DP with epsilon from eq (3)", paper, exact,
                 kind="at_most", erratum=erratum)


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
