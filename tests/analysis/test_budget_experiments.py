"""The budget-allocation experiments through the public API and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import privgames
from privgames.analysis.budget.experiments import TABLES
from privgames.analysis.cli import main


def test_table2_matches_the_expected_noise_within_3_se():
    """Done-criterion: every strategy and N within 3 SE of sum 2/eps_i^2 (fixed seed; 4
    populations of 100 rounds each), the printed value beside it with its z-score."""
    s = privgames.run("budget-noise", seed=0, workers=0).summary
    table = pd.DataFrame(s["table"])
    assert len(table) == 15 and set(table["N"]) == {20, 50, 100}
    assert (table["z"].abs() <= 3).all()
    assert table[["mse", "mse_se", "expected_mse", "printed", "printed_z"]].notna().all().all()
    # the printed Table 2 is one noisy 100-round realisation of the same expectation
    assert (table["printed_z"].abs() <= 3).all()


def test_expected_noise_is_computed_from_the_budgets():
    s = privgames.run("budget-noise", seed=1, workers=0, strategy=["avg"], N=[20],
                      populations=1).summary
    assert s["table"][0]["expected_mse"] == pytest.approx(20 * 2 * 20**2)


def test_tables_3_to_5_reproduced_with_the_stated_reading():
    """Tables 4 and 5 to the printed precision (0.01) at every N; Table 3 too except two printed
    upper ends (N = 5, 10: typos, errata); the literal readings are far off."""
    s = privgames.run("budget-us-bounds", seed=0, workers=0).summary
    table = pd.DataFrame(s["table"])
    assert len(table) == sum(len(v[2]) for v in TABLES.values())
    assert s["table4_max_gap"] <= 0.01 and s["table5_max_gap"] <= 0.01
    assert s["table3_cells_off"] == [5, 10]
    t3 = table[(table["table"] == 3) & ~table["N"].isin([5, 10])]
    assert (t3[["gap_low", "gap_high"]] <= 0.01).all().all()
    assert s["table4_floor_t_max_gap"] > 1 and s["table3_literal_max_gap"] > 100


def test_dp_kmeans_contract_and_orderings(tmp_path):
    s = privgames.run("dp-kmeans", seed=0, workers=0, out=tmp_path,
                      method=["avg", "flip-geo", "bisection"], iterations=[3, 12],
                      repetitions=40).summary
    table = pd.DataFrame(s["table"])
    assert {"f1", "f1_se", "f1_sd", "iterations", "method"} <= set(table.columns)
    last = table[table["iterations"] == 12].set_index("method")
    # bisection spends half its budget first: by 12 iterations its last centroids are noise
    assert last.loc["bisection", "f1"] + 3 * last.loc["bisection", "f1_se"] < last.loc["avg",
                                                                                       "f1"]
    assert (tmp_path / "dp-kmeans.parquet").exists()


def test_dp_kmeans_reports_the_real_unbalance(tmp_path, capsys):
    """``privgames run dp-kmeans --set data=unbalance --json`` runs on the shipped real set and
    says so: 6,500 points in 8 labelled clusters, scored by F1."""
    assert main(["run", "dp-kmeans", "--set", "data=unbalance", "--set", 'method=["avg"]',
                 "--set", "iterations=[2]", "--set", "repetitions=4", "--workers", "0",
                 "--json", "--out", str(tmp_path)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["points"], s["clusters"], s["score"]) == (6500, 8, "f1")
    assert s["parameters"]["data"] == "unbalance"


def test_dp_kmeans_on_a_user_csv(tmp_path):
    rng = np.random.default_rng(0)
    pts = np.vstack([rng.normal(c, 0.05, (200, 2)) for c in ((0, 0), (1, 1), (0, 1))])
    pd.DataFrame({"a": pts[:, 0], "b": pts[:, 1]}).to_csv(tmp_path / "p.csv", index=False)
    s = privgames.run("dp-kmeans", seed=0, workers=0, data=str(tmp_path / "p.csv"), k=3,
                      epsilon=5.0, method=["avg"], iterations=[4], repetitions=10).summary
    assert s["score"] == "nivc" and 0 < s["table"][0]["nivc"] < 1


def test_collusion_matches_the_budgets_and_random_arrangement_protects():
    r = privgames.run("budget-collusion", seed=0, workers=0,
                      method=["geo", "geo/random", "geo/perturb", "avg"], trials=4000)
    s = r.summary
    assert s["max_abs_z"] <= 3.5  # family-wise threshold for 4 comparisons
    assert s["protection_gain"]["geo/random"] > 2
    verdicts = r.claims()["verdict"]
    assert (verdicts != "fails").all()


def test_analysts_reach_the_offline_best_per_task():
    s = privgames.run("budget-analysts", seed=0, workers=0, rounds=300, analysts=10,
                      offline_repetitions=200).summary
    for task, r in s["tasks"].items():
        # the share is a binomial sample of analysts: 0.9 within 3 of its SE at 0.9 (the
        # claim's own rule; the real Unbalance's strategies are close, 8 of 10 here)
        assert r["near_best_share"] >= 0.9 - 3 * math.sqrt(0.9 * 0.1 / r["analysts"]), task
        assert r["late_regret_per_round"] < r["early_regret_per_round"]
    assert s["tasks"]["sum"]["offline_best"] == "avg"


@pytest.mark.parametrize("name,setting,needle", [
    ("budget-noise", "epsilon=-1", "epsilon=-1"),
    ("budget-noise", "N=0", "N=0"),
    ("budget-noise", "r=1.5", "r=1.5"),
    ("budget-noise", "t=0", "t=0"),
    ("budget-noise", 'U_s=[[20, 5]]', "U_s=5.0 is out of range"),
    ("budget-noise", 'strategy=["bogus"]', "strategy='bogus'"),
    ("budget-collusion", 'method=["geo/bogus"]', "protection 'bogus'"),
    ("dp-kmeans", 'data="/nonexistent.csv"', "data="),
    ("budget-us-bounds", "table=[7]", "table=7 is out of range"),
])
def test_bad_input_is_one_line(name, setting, needle, capsys):
    assert main(["run", name, "--set", setting, "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_malformed_csv_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n3,oops\n")
    assert main(["run", "dp-kmeans", "--set", f"data={json.dumps(str(bad))}", "--workers",
                 "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "row 3, column 'y'" in err
