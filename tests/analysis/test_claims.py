"""Verdicts of the report: each rule can fail, and thresholds come from the normal law."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from privgames.analysis.claims import Claim, gaussian_epsilon_claim, z_threshold


def test_equality_holds_within_three_standard_errors_only():
    assert Claim("x", 1.0, 1.29, se=0.1).verdict()[0] == "holds"
    assert Claim("x", 1.0, 1.31, se=0.1).verdict()[0] == "fails"
    assert Claim("x", 0.0, 1e-7, tolerance=1e-6).verdict()[0] == "holds"
    assert Claim("x", 0.0, 1e-5, tolerance=1e-6).verdict()[0] == "fails"


def test_z_threshold_is_the_family_wise_three_sigma_level():
    assert z_threshold(1) == pytest.approx(3.0)
    m = 20  # P(max of m |z| > t) = 1 - (1 - 2 sf(t))^m ~ the one-test level 2 sf(3)
    t = z_threshold(m)
    assert 1 - (1 - 2 * norm.sf(t)) ** m == pytest.approx(2 * norm.sf(3.0), rel=0.01)
    assert Claim("z", None, t - 0.01, tolerance=t, kind="z").verdict()[0] == "holds"
    assert Claim("z", None, t + 0.01, tolerance=t, kind="z").verdict()[0] == "fails"


def test_bounds_report_slack_or_fail():
    verdict, detail = Claim("b", 2.0, 1.5, kind="at_most").verdict()
    assert verdict == "bound" and "slack 0.5" in detail
    assert Claim("b", 2.0, 2.5, kind="at_most").verdict()[0] == "fails"
    assert Claim("b", 2.0, 1.6, se=0.1, kind="at_most").verdict()[0] == "bound"  # 4 SE inside
    assert Claim("b", 1.0, 0.5, kind="at_least").verdict()[0] == "fails"


@pytest.mark.parametrize("kind,sign", [("at_most", 1.0), ("at_least", -1.0)])
def test_a_bound_needs_three_standard_errors_on_its_side_or_the_tolerance(kind, sign):
    """With an SE: 3.01 SE inside the bound is a bound, 3.01 SE past it fails, and anything in
    between is not resolved (too few runs, when the claim counts its runs), never a failure;
    without an SE the tolerance decides; with neither, the bound is exact."""
    past = lambda d: 1.0 + sign * d  # noqa: E731 - a measurement d beyond the bound 1.0
    assert Claim("b", 1.0, past(-0.301), se=0.1, kind=kind).verdict()[0] == "bound"
    assert Claim("b", 1.0, past(0.301), se=0.1, kind=kind).verdict()[0] == "fails"
    for d in (-0.299, 0.0, 0.299):
        verdict, detail = Claim("b", 1.0, past(d), se=0.1, kind=kind).verdict()
        assert verdict == "not resolved" and "within 3 SE" in detail
    verdict, detail = Claim("b", 1.0, past(0.1), se=0.1, kind=kind, runs=2).verdict()
    assert verdict == "too few runs" and "n = 2" in detail and "about 18 runs" in detail
    assert Claim("b", 1.0, past(0.0499), tolerance=0.05, kind=kind).verdict()[0] == "bound"
    assert Claim("b", 1.0, past(0.0501), tolerance=0.05, kind=kind).verdict()[0] == "fails"
    assert Claim("b", 1.0, past(1e-12), kind=kind).verdict()[0] == "fails"
    assert Claim("b", 1.0, past(0.0), kind=kind).verdict()[0] == "bound"


def test_nothing_measured_is_not_applicable_and_a_fail_without_erratum_says_so():
    assert Claim("x", 1.0, None).verdict() == ("not applicable", "nothing measured")
    assert Claim("x", 1.0, math.nan, se=0.1).verdict()[0] == "not applicable"
    assert Claim("x", 1.0, 2.0, se=0.1).verdict()[1].endswith("unexplained (no erratum)")
    assert Claim("x", 1.0, 2.0, se=0.1, erratum="eq (3)").verdict()[1].endswith(
        "see errata: eq (3)")


def test_equality_on_both_sides_of_three_standard_errors_and_the_tolerance():
    for sign in (1.0, -1.0):
        assert Claim("x", 1.0, 1.0 + sign * 0.2999, se=0.1).verdict()[0] == "holds"
        assert Claim("x", 1.0, 1.0 + sign * 0.3001, se=0.1).verdict()[0] == "fails"
        assert Claim("x", 1.0, 1.0 + sign * 0.0099, tolerance=0.01).verdict()[0] == "holds"
        assert Claim("x", 1.0, 1.0 + sign * 0.0101, tolerance=0.01).verdict()[0] == "fails"
    assert Claim("x", 1.0, 1.0, se=0.0).verdict()[0] == "holds"  # exact
    assert Claim("x", 1.0, 1.0 + 1e-15, se=0.0).verdict()[0] == "fails"


def test_paper_epsilon_is_a_bound_only_inside_eq3s_range():
    assert gaussian_epsilon_claim("r", exact=0.6, paper=0.8).verdict()[0] == "bound"
    verdict, detail = gaussian_epsilon_claim("r", exact=67.0, paper=39.0).verdict()
    assert verdict == "fails" and "eq (3)" in detail
    assert Claim("q", True, math.nan, kind="true").verdict()[0] == "not applicable"
