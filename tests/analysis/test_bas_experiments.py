"""The BAS experiments end to end: figure summaries, economic properties, reproduce."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest

import privgames
from privgames.analysis.cli import main
from privgames.analysis.results import UNEXPLAINED, parquet_infinities


def test_mse_vs_K_matches_eq9_and_beats_ldp(tmp_path):
    summary = privgames.run("bas-mse-vs-K", params={"K": [3, 10, 40], "populations": 3,
                                                    "replications": 400},
                            seed=2, workers=0, out=tmp_path).summary
    assert summary["chained_below_ldp"]
    table = pd.DataFrame(summary["table"])
    # fixed seed, so deterministic; 3 SE per grid point and method
    z = (table["mse"] - table["mse_predicted"]).abs() / table["mse_se"]
    assert (z < 3).all(), table


def test_one_user_per_subsequence_is_ldp_and_not_held_against_the_chain():
    """With K subsequences of one user each the chain is LDP (eq 9: equal MSEs), so the claim
    that Chained-DP beats LDP is judged at the other grid points only, where it holds."""
    result = privgames.run("bas-split", params={"K": 6, "subsequences": [2, 6],
                                                "split": ["random"], "populations": 2,
                                                "replications": 300}, seed=2, workers=0)
    table = pd.DataFrame(result.summary["table"]).set_index(["subsequences", "method"])
    assert table.loc[(6, "chained"), "mse_predicted"] == pytest.approx(
        table.loc[(6, "ldp"), "mse_predicted"])
    # the two have one law at 6: their measured MSEs agree within 3 SE of the difference
    gap = table.loc[(6, "chained"), "mse"] - table.loc[(6, "ldp"), "mse"]
    assert abs(gap) < 3 * math.hypot(table.loc[(6, "chained"), "mse_se"],
                                     table.loc[(6, "ldp"), "mse_se"])
    assert result.summary["chained_below_ldp"]
    claims = result.claims()
    assert (claims.loc[claims["claim"].str.contains("below LDP"), "verdict"] == "holds").all()


def test_properties_are_measured(tmp_path):
    s = privgames.run("bas-properties", params={"populations": 3}, seed=1, workers=0,
             out=tmp_path).summary
    assert s["truthful"] and s["truthful_max_gain"] <= 1e-9
    assert s["voluntary_participation"] and s["participation_min_margin"] > 0
    assert s["poa_within_bound"] and s["poa_max_abs_error"] < 1e-9
    assert not s["fair"]  # Theorem 3 does not hold: costs differ with alpha_k (docs/errata.md)


@pytest.mark.slow
def test_reproduce_writes_figures_and_a_report_with_verdicts(quick_reproduction):
    """Every experiment: its summary, a figure, a claims table with verdicts; the report opens
    with the per-paper tally, and its counts add up to the verdicts listed below it. On the
    test session's Ray with 2 workers, as the README's quickstart runs it (on its own Ray)."""
    tmp_path = quick_reproduction
    report = (tmp_path / "report.md").read_text()
    names = privgames.experiments()
    for name in names:
        assert f"## {name}" in report
        assert json.loads((tmp_path / f"{name}.summary.json").read_text())["experiment"] == name
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
        assert f"({name}.png)" in report
        assert oct((tmp_path / f"{name}.parquet").stat().st_mode & 0o044) == oct(0o044)
    assert not (tmp_path / ".parts").exists()
    for name in names:  # issue 32: every infinity has its reason, and no other is there
        rows = pd.read_parquet(tmp_path / f"{name}.parquet")
        found = parquet_infinities(tmp_path / f"{name}.parquet")
        assert sum(v["count"] for v in found.values()) == int(
            np.isinf(rows.select_dtypes("number").to_numpy(dtype=float)).sum()), name
        summary = json.loads((tmp_path / f"{name}.summary.json").read_text())
        reasons = [v["reason"] for v in found.values()] + [
            v["reason"] for v in summary.get("non_finite", {}).values()]
        assert UNEXPLAINED not in reasons, name
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert list(timings["seconds"]) == names and min(timings["seconds"].values()) > 0
    assert timings["total"] == pytest.approx(sum(timings["seconds"].values()))
    head, body = report.split(f"## {names[0]}\n", 1)  # the first experiment's section
    tally = pd.read_table(io.StringIO(head.split("## Summary")[1].split("\n\n")[1]), sep="|",
                          skipinitialspace=True).iloc[1:, 1:-1]
    tally.columns = [c.strip() for c in tally.columns]
    for verdict in ("holds", "bound", "fails"):
        assert tally[verdict].astype(int).sum() == body.count(f"**{verdict}**")
    sections = body.split("\n## ")
    papers = "\n".join(x for x in sections if not x.startswith("learning-dynamics"))
    # every failure of a paper's claim is explained; learning-dynamics judges our learners
    assert papers.count("**fails**") == papers.count("see errata")
    # the summary fits a screen: counts per paper, then each failing claim on its own line
    summary = head.split("## Summary", 1)[1]
    assert len(head.splitlines()) < 60
    fails = [line for line in summary.splitlines() if line.startswith("- **")]
    assert len(fails) == body.count("**fails**")
    assert all(line.endswith(")") and ("(erratum: " in line or "(unexplained)" in line)
               for line in fails)
    assert "(paper: )" not in report and "(paper: ``)" not in report
    assert len(papers) < len(body)  # the learning-dynamics section was found and set apart
    assert "Predicted (eq 9) vs measured MSE" not in report


def test_bas_chain_takes_a_learner_from_experience_on_the_command_line(tmp_path, capsys):
    """``learner=`` and ``feedback=`` (issue 21): the summary says which, and measures the
    learned chain against both Theorem 1's NE and the grid game's NE (fictitious play reaches
    the latter; the users do not anticipate their followers, so not the former)."""
    assert main(["run", "bas-chain", "--set", "learner=fictitious", "--set", "rounds=200",
                 "--set", "K=6", "--workers", "0", "--json", "--out", str(tmp_path)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["learner"], s["feedback"]) == ("fictitious", "full")
    assert s["final_distance_grid_nash"] == 0.0 and s["final_distance"] > 0.1
    assert main(["run", "bas-chain", "--set", "learner=hedge", "--set", "feedback=bandit",
                 "--workers", "0", "--out", str(tmp_path)]) == 2
    assert "feedback='bandit' is not allowed with learner='hedge'" in capsys.readouterr().err
