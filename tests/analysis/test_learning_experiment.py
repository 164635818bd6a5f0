"""The learning-dynamics experiment through the CLI: its summary contract, its computed claims,
its bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from privgames.analysis.cli import main
from privgames.analysis.experiments import get
from privgames.analysis.learning.experiments import learning_claims, reached_shares


def _run(capsys, tmp_path, *sets):
    """The run's summary, with 2 populations and 300 rounds unless ``sets`` say otherwise (a
    parameter is given once: a repeated --set is refused)."""
    given = {"populations": "2", "rounds": "300",
             **dict(s.split("=", 1) for s in sets)}
    args = ["run", "learning-dynamics", "--workers", "0", "--out", str(tmp_path), "--json"]
    for key, value in given.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("game,learner,feedback", [
    ("pricing", "exp3", "bandit"), ("sar", "regret_matching", "full"),
    ("bas", "best_response", "full"), ("ppsp", "spsa", "bandit"),
    ("pricing-bayes", "regret_matching", "full")])
def test_summary_contract(capsys, tmp_path, game, learner, feedback):
    s = _run(capsys, tmp_path, f"game={game}", f"learner={learner}", f"feedback={feedback}")
    assert (s["game"], s["learner"], s["feedback"], s["rounds"]) == (game, learner, feedback, 300)
    assert 0.0 <= s["final_distance"] <= 1.0
    assert isinstance(s["converged"], bool)
    assert s["cce_gap"] >= 0.0 and s["max_average_regret"] >= s["cce_gap"] - s["azuma"]
    if learner in ("exp3", "regret_matching"):
        assert 0.0 < s["max_average_regret"] <= s["regret_bound"]
    else:
        assert s["regret_bound"] is None
    assert sum(s["reached"].values()) == 2  # one outcome per population
    assert s["start"] == "random" and s["pooled_runs"] == 2
    assert sum(v["share"] for v in s["reached_share"].values()) == pytest.approx(1.0)
    assert s["nash_gap_relative"] >= 0.0 and s["infinite_cost_rounds"] >= 0
    assert s["cce_gap_game_units"] is None or s["cce_gap_game_units"] >= 0.0


def test_ppsp_from_random_starts_reports_each_references_share_and_judges_theorem4(
        capsys, tmp_path):
    """Three starts per population: six runs, each ending at one outcome; the share of
    Theorem 4's profile has its binomial SE and is judged by a claim."""
    s = _run(capsys, tmp_path, "game=ppsp", "learner=regret_matching", "start=random",
             "starts=3")
    assert s["pooled_runs"] == 6 and sum(s["reached"].values()) == 6
    shares = s["reached_share"]
    assert set(shares) == {"theorem4", "other equilibrium", "none"}
    for name, v in shares.items():
        assert v["share"] == s["reached"].get(name, 0) / 6
        assert v["se"] == pytest.approx(math.sqrt(v["share"] * (1 - v["share"]) / 6))
    claim = learning_claims(s)[-1]
    assert "theorem4" in claim.claim and claim.measured == shares["theorem4"]["share"]
    # judged with the larger of the binomial SE and the SE of a share of one half (6 runs)
    z = (shares["theorem4"]["share"] - 0.5) / max(shares["theorem4"]["se"], math.sqrt(0.25 / 6))
    assert claim.verdict()[0] == ("bound" if z >= 3 else "fails" if z <= -3 else "too few runs")


def test_best_response_in_bas_converges_to_its_equilibrium(capsys, tmp_path):
    s = _run(capsys, tmp_path, "game=bas", "learner=best_response")
    assert s["converged"] and s["final_distance"] == 0.0 and s["reached"] == {"nash": 2}
    assert s["reached_share"]["nash"] == {"share": 1.0, "se": 0.0}
    verdicts = [c.verdict()[0] for c in learning_claims(s)]
    assert verdicts[-1] == "too few runs"  # 2 of 2 runs: a coin flip under one half


def _shares(reached: dict[str, int]) -> dict:
    """Shares and binomial SEs written out: s, sqrt(s (1 - s) / n)."""
    n = sum(reached.values())
    return {k: {"share": v / n, "se": ((v / n) * (1 - v / n) / n) ** 0.5}
            for k, v in reached.items()}


def test_claims_are_computed_from_the_measurement():
    """The regret claim fails when the measured regret exceeds the bound, holds (as a bound)
    when within; the selection claim is judged from the predicted profile's share of runs
    with the larger of its binomial SE and that of a share of one half: a bound beyond 3 SE
    above one half, a failure beyond 3 SE below, too few runs in between."""
    reached = {"nash": 32, "other equilibrium": 8, "none": 0}
    run = {"game": "bas", "learner": "hedge", "feedback": "full", "regret_bound": 0.1,
           "max_average_regret": 0.05, "azuma": 0.01, "cce_gap": 0.04, "converged": True,
           "final_distance": 0.0, "reached": reached, "predicted": "nash",
           "reached_share": _shares(reached), "pooled_runs": 40}
    summary = {"runs": [run], "tolerance": 0.05, "start": "random"}
    # 32 of 40: (0.8 - 0.5) / sqrt(0.25 / 40) = 3.79 SE above one half
    assert [c.verdict()[0] for c in learning_claims(summary)] == ["bound", "bound", "bound"]
    for nash, verdict in ((26, "too few runs"), (14, "too few runs"), (8, "fails"),
                          (0, "fails")):  # z = 1.90, -1.90, -3.79, -6.32
        shares = _shares({"nash": nash, "none": 40 - nash})
        claim = learning_claims({**summary, "runs": [{**run, "reached_share": shares}]})[-1]
        assert claim.verdict()[0] == verdict, nash
    two = {**run, "pooled_runs": 2, "reached_share": _shares({"nash": 0, "none": 2})}
    verdict, detail = learning_claims({**summary, "runs": [two]})[-1].verdict()
    assert verdict == "too few runs" and "n = 2" in detail
    bad = {**run, "max_average_regret": 0.2, "cce_gap": 0.5}
    assert [c.verdict()[0] for c in learning_claims({**summary, "runs": [bad]})][:2] == [
        "fails", "fails"]


LEARNERS = ("best_response", "fictitious", "hedge", "regret_matching", "exp3", "spsa")


def test_a_game_parameter_is_taken_where_some_swept_game_uses_it(capsys, tmp_path):
    """alpha_std with game=[bas, pricing]: the pricing populations use it, so the run goes."""
    s = _run(capsys, tmp_path, 'game=["bas", "pricing"]', "learner=best_response",
             "alpha_std=0.3", "rounds=20")
    assert {r["game"] for r in s["runs"]} == {"bas", "pricing"}


def test_default_grid_is_every_game_and_learner_the_game_allows():
    """Every game and learner but SPSA under incomplete information and in the sequential
    chain, which the grid leaves out when one of the two is swept, and refuses when both are
    set."""
    e = get("learning-dynamics")
    points = e.points(e.resolve())
    assert {(p["game"], p["learner"]) for p in points} == {
        (g, learner) for g in ("bas", "bas-sequential", "sar", "ppsp", "pricing",
                               "pricing-bayes")
        for learner in LEARNERS} - {("pricing-bayes", "spsa"), ("bas-sequential", "spsa")}
    swept = e.points(e.resolve({"game": "pricing-bayes"}))
    assert [p["learner"] for p in swept] == [x for x in LEARNERS if x != "spsa"]
    assert [p["game"] for p in e.points(e.resolve({"learner": "spsa"}))] == [
        "bas", "sar", "ppsp", "pricing"]


@pytest.mark.parametrize("sets,needle", [
    (["learner=adam"], "learner='adam' is not allowed"),
    (["learner=hedge", "feedback=bandit"], "feedback='bandit' is not allowed with learner="
                                           "'hedge'"),
    (["game=bas", "learner=hedge", "grid=[]"], "grid=[] is not allowed"),
    (["game=bas", "learner=hedge", "grid=[0, 1e999]"], "no opt-out"),
    (["learner=exp3", "step_size=-0.1"], "step_size=-0.1 is out of range"),
    (["learner=exp3", "eta=0.1", "step_size=0.1"], "eta=0.1 is the old name of step_size"),
    (["learner=fictitious", "eta=0.1"], "step_size=0.1 is not allowed with learner="),
    (["game=chess"], "game='chess' is not allowed"),
    (["game=pricing-bayes", "learner=spsa"], "learner='spsa' is not allowed with "
                                             "game='pricing-bayes'"),
    (["game=pricing-bayes", "learner=hedge", "p_low=0"], "p_low=0 is out of range"),
    (["game=bas", "alpha_std=0.3"], "alpha_std=0.3 is not used by game=bas: it is a parameter "
                                     "of game=pricing"),
    (["game=[\"sar\", \"ppsp\"]", "beta_max=2"], "beta_max=2 is not used by game=ppsp/sar"),
    (["game=bas-sequential", "learner=spsa"], "learner='spsa' is not allowed with "
                                              "game='bas-sequential'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, sets, needle):
    args = ["run", "learning-dynamics", "--workers", "0", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_the_figure_has_a_row_per_game_feedback_groups_symlog_regret_and_basins(capsys,
                                                                                  tmp_path):
    """Problem 6: one row per game; the regret panel keeps negative values (symlog) and draws
    each no-regret learner's bound beside it; bandit learners are drawn dash-dotted and listed
    after the full-information ones; the basins panel's bars sum to one per learner."""
    import pandas as pd

    from privgames.analysis.learning.figures import learning_dynamics

    _run(capsys, tmp_path, "game=[\"bas\", \"sar\"]",
         "learner=[\"exp3\", \"hedge\", \"best_response\"]")
    rows = pd.read_parquet(tmp_path / "learning-dynamics.parquet")
    fig = learning_dynamics(rows)
    axes = np.array(fig.axes[:6]).reshape(2, 3)
    assert [ax.get_yscale() for ax in axes[:, 1]] == ["symlog", "symlog"]
    assert all(ax.get_ylim()[0] < 0 for ax in axes[:, 1])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["hedge (full)", "best_response (full)", "exp3 (bandit)"]
    styles = {line.get_label(): line.get_linestyle() for line in axes[0, 0].get_lines()}
    assert styles["exp3 (bandit)"] == "-." and styles["hedge (full)"] == "-"
    assert len(axes[0, 1].get_lines()) == 1 + 2 * 2  # the zero line, two learners x 2
    widths = np.zeros(3)
    for bar in axes[0, 2].patches:
        widths[round(bar.get_y() + bar.get_height() / 2)] += bar.get_width()
    np.testing.assert_allclose(widths, 1.0)


def test_reached_shares_written_out():
    """3 of 8 runs at ``nash``, 1 at another equilibrium, 4 at none: shares 3/8, 1/8, 4/8 with
    SE sqrt(s (1 - s) / 8); a reference never reached has share 0 and SE 0."""
    import pandas as pd

    ended = pd.Series(["nash"] * 3 + ["other equilibrium"] + ["none"] * 4)
    shares = reached_shares(ended, ["nash", "theorem1"])
    assert list(shares) == ["nash", "theorem1", "other equilibrium", "none"]
    for name, count in (("nash", 3), ("theorem1", 0), ("other equilibrium", 1), ("none", 4)):
        s = count / 8
        assert shares[name]["share"] == s
        assert shares[name]["se"] == pytest.approx(math.sqrt(s * (1 - s) / 8), rel=1e-12)


def test_the_summary_pools_runs_as_it_says(capsys, tmp_path):
    """Per (game, learner): regret, CCE gap and nash gaps are the largest over the runs' last
    rounds, the distance their mean, converged only when every run converged (read here from
    the rows, one value per run)."""
    import pandas as pd

    s = _run(capsys, tmp_path, "game=sar", "learner=hedge", "starts=2")
    rows = pd.read_parquet(tmp_path / "learning-dynamics.parquet")
    final = rows[rows["round"] == 300].pivot_table(index=["population", "start_run"],
                                                   columns="metric", values="value")
    assert len(final) == 4
    for key in ("max_average_regret", "cce_gap", "nash_gap_relative", "regret_bound"):
        assert s[key] == final[key].max()
    assert s["final_distance"] == pytest.approx(final["final_distance"].mean(), rel=1e-12)
    assert s["converged"] == bool(final["converged"].min() == 1.0)
    assert s["infinite_cost_rounds"] == int(final["infinite_cost_rounds"].max())
    settled = final["settled_round"].dropna()  # issue 44: a median says over how many runs
    assert s["settled_runs"] == len(settled)
    if len(settled):
        assert s["settled_round"] == settled.median()


def test_eta_is_the_old_name_of_step_size(capsys, tmp_path):
    """issue 33: learning-dynamics' step size is step_size (pricing's eta is a prior); the old
    name still runs, the same rows, with one note on stderr."""
    new = _run(capsys, tmp_path / "new", "game=sar", "learner=hedge", "step_size=0.3",
               "rounds=40")
    args = ["run", "learning-dynamics", "--workers", "0", "--out", str(tmp_path / "old"),
            "--json", "--set", "populations=2", "--set", "rounds=40", "--set", "game=sar",
            "--set", "learner=hedge", "--set", "eta=0.3"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["max_average_regret"] == new["max_average_regret"]
    assert out.err.count("privgames: note: learning-dynamics: eta is now step_size") == 1
    assert "Warning" not in out.err
