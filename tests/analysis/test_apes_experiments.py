"""The APES experiments through the public API and the CLI."""

from __future__ import annotations

import json

import pytest

import privgames
from privgames.analysis.cli import main


def test_apes_contract(tmp_path, capsys):
    assert main(["run", "apes", "--workers", "0", "--json", "--out", str(tmp_path), "--set",
                 'framework=["unis", "apes", "s-apes"]', "--set", "n=200", "--set",
                 "rounds=10", "--set", "populations=1"]) == 0
    s = json.loads(capsys.readouterr().out)
    for key in ("eps_central", "eps_central_baseline", "eps_central_baseline_closed",
                "eps_central_eon", "eps_central_eon_closed", "accuracy", "accuracy_se",
                "eps_user_central"):
        assert set(s[key]) == {"unis", "apes", "s-apes"}, key
    assert s["eps_central"]["apes"] == s["eps_central_eon"]["apes"]
    assert s["eps_central"]["unis"] == s["eps_central_baseline"]["unis"]
    assert s["eps_user_central"]["s-apes"] < s["eps_user_central"]["apes"]


def test_bounds_reproduce_table3_and_explain_the_closed_forms():
    r = privgames.run("apes-bounds", workers=0, n=[10_000], distribution=["uniform2"])
    t3 = r.summary["table3"]
    assert round(t3["baseline_numerical"], 3) == 0.069 and round(t3["eon_numerical"], 3) == 0.057
    claims = r.claims()
    failing = claims[claims["verdict"] == "fails"]
    assert len(failing) == 2 and failing["detail"].str.contains("errata").all()


def test_audit_contract():
    s = privgames.run("apes-audit", workers=0, n=[10], trials=20_000).summary
    lo, hi = s["audit_eps_lower_ci"]["10"]
    assert s["audit_eps_lower"]["10"] == lo <= hi
    assert s["max_excess_over_eon"] <= 0


@pytest.mark.parametrize("setting,needle", [
    ("C=0", "C=0"), ("b_ratio=0", "b_ratio=0"), ('framework=["x"]', "framework='x'"),
    ("delta_s=2", "delta_s=2"), ('distribution="cauchy"', "distribution='cauchy'"),
    ('data="/missing.npz"', "data="),
])
def test_bad_input_is_one_line(setting, needle, capsys):
    assert main(["run", "apes", "--set", setting, "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
