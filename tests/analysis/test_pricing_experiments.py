"""The pricing experiments through the public API and the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import privgames
from privgames.analysis.cli import main


def test_pricing_fl_contract(tmp_path, capsys):
    assert main(["run", "pricing-fl", "--workers", "0", "--json", "--out", str(tmp_path),
                 "--set", "aggregation=mean", "--set", "pricing=true", "--set",
                 "populations=2"]) == 0
    s = json.loads(capsys.readouterr().out)
    for key in ("predicted_sigma", "learned_sigma", "social_cost", "optimal_social_cost", "poa",
                "mean_net_payment", "mean_net_payment_se", "is_equilibrium"):
        assert key in s
    assert s["is_equilibrium"] and abs(s["poa"] - 1) < 1e-9
    assert abs(s["mean_net_payment"]) < 3 * s["mean_net_payment_se"]


def test_opted_out_clients_are_named_infinities_in_standard_json(tmp_path):
    from privgames.analysis.results import parquet_infinities, read_json

    s = privgames.run("pricing-fl", seed=0, workers=0, out=tmp_path, populations=1).summary
    assert s["learned_sigma"].count(float("inf")) == len(s["learned_sigma"]) - 1
    path = tmp_path / "pricing-fl.summary.json"
    text = path.read_text()
    assert "Infinity" not in text  # not JSON: a null, and the reason beside it
    opted = [k for k, v in json.loads(text)["non_finite"].items()
             if k.startswith("learned_sigma[")]
    assert len(opted) == len(s["learned_sigma"]) - 1
    reasons = {json.loads(text)["non_finite"][k]["reason"] for k in opted}
    assert len(reasons) == 1 and "opts out" in reasons.pop()
    assert read_json(path)["learned_sigma"] == s["learned_sigma"]
    rows = parquet_infinities(tmp_path / "pricing-fl.parquet")
    assert "opts out" in rows["sigma"]["reason"] and rows["sigma"]["count"] > 0


def test_mle_verdicts_name_the_errata():
    claims = privgames.run("pricing-fl", seed=0, workers=0, populations=1).claims()
    failing = claims[claims["verdict"] == "fails"]
    assert len(failing) >= 2 and failing["detail"].str.contains("errata").all()


def test_poa_family_matches_learned_equilibria():
    s = privgames.run("pricing-poa", seed=0, workers=0, N=[2, 10, 100]).summary
    assert s["poa_max_relative_gap_mean"] < 1e-6 and s["poa_increasing_mean"]


def test_bad_input_is_one_line(capsys):
    assert main(["run", "pricing-fl", "--set", "alpha=[0.5,2]", "--set", "N=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "alpha[1]=2" in err and "(0.0, 1.0)" in err


def test_truthful_reporting_verified_over_a_grid():
    s = privgames.run("pricing-bne", seed=0, workers=0, eta=[0.3, 0.7], alpha_L=[0.1],
                      alpha_H=[0.6], N=12).summary
    assert s["truthful_is_bne"] and not s["truthful_without_rewards_is_bne"]
    assert s["max_distance"] < 1e-6 and s["feasible"]


def test_pricing_fl_incomplete_information_contract():
    s = privgames.run("pricing-fl", seed=0, workers=0, information="incomplete", pricing=True,
                      aggregation="mean", eta=0.4, alpha_L=0.2, alpha_H=0.6,
                      populations=1).summary
    assert s["truthful_is_bne"] and not s["truthful_without_rewards_is_bne"]
    assert len(s["learned_sigma"]) == 2 and s["max_final_distance"] < 1e-6


@pytest.mark.ray
def test_pricing_rows_are_identical_on_ray(ray_session):
    """Same seed, same bits: the dynamics (elementwise numpy) and the training (BLAS pinned to
    one thread, as in a Ray worker) give identical rows serially and on 2 workers."""
    for name, params in (("pricing-fig1", {"alpha_std": [0.1], "populations": 2}),
                         ("pricing-training", {"sigma_high": [0.3], "rounds": 4,
                                               "populations": 1})):
        serial = privgames.run(name, seed=1, workers=0, **params).rows
        on_ray = privgames.run(name, seed=1, workers=2, **params).rows
        pd.testing.assert_frame_equal(serial, on_ray, check_exact=True)
