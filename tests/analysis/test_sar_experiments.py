"""SAR experiments through the CLI and the experiment API."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import privgames
from privgames.analysis.cli import main


def test_sar_attack_contract(tmp_path, capsys):
    args = ["run", "sar-attack", "--workers", "0", "--out", str(tmp_path), "--json",
            "--set", "K=10", "--set", "p=0.3", "--set", "N=2", "--set", "d=8",
            "--set", "attacker=strong", "--set", "trials=30000"]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    for key in ("success_rate", "success_rate_se", "predicted_failure_probability",
                "exposed_fraction", "whole_vector_exposure", "predicted_whole_vector_exposure"):
        assert key in s
    assert s["trials"] == 4 * 30000
    assert abs(s["success_rate"] - s["predicted_failure_probability"]) < 3 * s["success_rate_se"]
    assert s["exact_recovery"]


def test_bad_sar_input_exits_2(capsys):
    assert main(["run", "sar-attack", "--set", "colluders=[0,1]"]) == 2
    assert "contains the victim 0" in capsys.readouterr().err


def test_thresholds_and_success_grid(tmp_path):
    s = privgames.run("sar-thresholds", params={"K": [3, 10, 30], "trials": 20000}, seed=0,
                      workers=0, out=tmp_path).summary
    table = pd.DataFrame(s["table"])
    assert (table["success_rate_predicted"] - table["target"]).abs().max() < 1e-9
    assert s["max_z"] < 3
    g = privgames.run("sar-success-vs-p", params={"K": [5, 10], "p": [0.1, 0.4]}, seed=0,
                      workers=0, out=tmp_path).summary
    assert g["max_z"] < 3 and g["exact_recovery"]


def test_participation_experiment(tmp_path):
    s = privgames.run("sar-participation", params={"p": [0.0, 0.5], "attacker": "strong",
                                             "rounds": 12}, seed=0, workers=0,
             out=tmp_path).summary
    table = pd.DataFrame(s["table"]).set_index("p")
    assert table.loc[0.0, "participants"] == 20
    assert table.loc[0.5, "participants"] < 3
    # each mean says how many populations it averages; a rate is undefined where nobody is left
    rows = pd.read_parquet(tmp_path / "sar-participation.parquet")
    last = rows[rows["round"] == 12].pivot_table(index=["p", "population"], columns="metric",
                                                 values="value", dropna=False)
    for p, g in last.groupby(level="p"):
        assert table.loc[p, "populations"] == 3
        assert table.loc[p, "success_rate_populations"] == g["success_rate"].notna().sum()
        assert table.loc[p, "participants_populations"] == 3


def test_a_rare_event_seen_zero_times_is_judged_by_its_binomial_error():
    """Rates against the theory in standard errors: at p = 1e-4 over 20,000 slices, zero
    successes (measured SE 0) is sqrt(2) binomial SEs from the prediction, not infinitely far;
    a rate measured with no spread where the theory says 0 is infinitely far; equal is 0."""
    from privgames.analysis.sar.experiments import _rate_z

    z = _rate_z(pd.Series([0.0, 0.5, 0.0, 0.31]), pd.Series([1e-4, 0.0, 0.0, 0.3]),
                pd.Series([0.0, 0.0, 0.0, 0.005]), pd.Series([20_000.0, 100.0, 100.0, 100.0]))
    assert z[0] == pytest.approx(1e-4 / (1e-4 * (1 - 1e-4) / 20_000) ** 0.5)
    assert z[1] == float("inf") and z[2] == 0.0
    assert z[3] == pytest.approx(0.01 / (0.3 * 0.7 / 100) ** 0.5)  # the binomial SE is larger
