"""Experiments of SAR slicing against colluders (Chained-DP paper, section VI, Fig 8)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim, gaussian_epsilon_claim, z_threshold
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames.environments.sar import SARConfig, SARModel, sar_epsilon, simulate_attacks
from privgames.environments.streams import generator
from privgames.mechanisms.sar import colluder_threshold

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

#: The measured rates and what the theory (``SARConfig.predicted``) calls them.
RATES = {"success_rate": "failure_probability", "exposed_fraction": "exposed_fraction",
         "whole_vector_exposure": "whole_vector_exposure"}


def attack_unit(config: SARConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population of attack trials: measured rates beside the theory, tidy rows.

    Per-round means are the Monte-Carlo draws (the colluding set is shared by a round's
    slices, so rounds, not slices, are independent). ``max_exact_error`` is the largest
    reconstruction error among successful attacks when nobody but the first user adds noise.
    """
    rng = generator(seed)  # one consumer: preferences, then the attack trials
    beta = (np.array(config.beta) if config.beta is not None
            else rng.uniform(0.0, config.beta_max, config.K))
    out = simulate_attacks(config, rng, beta)
    theory = config.predicted()
    per_round = {"success_rate": out["success"].mean(axis=1),
                 "exposed_fraction": out["exposed_fraction"],
                 "whole_vector_exposure": out["success"].all(axis=1).astype(float)}
    rows = [row for name, samples in per_round.items()
            for row in mean_rows(name, samples, theory[RATES[name]])]
    worst = out["worst"][out["success"]]
    rows += [{"metric": "max_exact_error", "value": float(worst.max()) if worst.size else 0.0},
             {"metric": "trials", "value": float(out["success"].size)},
             *({"metric": k, "value": v} for k, v in sar_epsilon(config, beta).items()),
             {"metric": "delta_hat", "value": max(theory["failure_probability"], config.delta)}]
    return pd.DataFrame(rows).assign(method=config.attacker)


def attack_summary(by: list[str]):
    """Measured vs predicted rates; a table per grid point when there is a grid."""

    def summarize(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
        tables = [pooled(rows, name, by) for name in RATES]
        table = tables[0]
        for t in tables[1:]:
            table = table.merge(t, on=[*by, "method"])
        trials = _trials(rows, by, table)
        z = pd.concat([_rate_z(table[r], table[f"{r}_predicted"], table[f"{r}_se"], trials)
                       for r in RATES])
        exact = rows.loc[rows["metric"] == "max_exact_error", "value"].max()
        summary = {"trials": int(rows.loc[rows["metric"] == "trials", "value"].sum()),
                   **{k: float(rows.loc[rows["metric"] == k, "value"].max())
                      for k in ("epsilon", "epsilon_slice", "epsilon_paper")},
                   "delta_hat": float(rows.loc[rows["metric"] == "delta_hat", "value"].max()),
                   "max_z": float(z.max()), "max_z_threshold": z_threshold(z.size),
                   "exact_recovery": bool(exact < 1e-9),
                   "max_reconstruction_error": float(exact)}
        if by:
            return {**summary, "table": table.to_dict(orient="records")}
        r = table.iloc[0]
        return {"success_rate": r["success_rate"], "success_rate_se": r["success_rate_se"],
                "predicted_failure_probability": r["success_rate_predicted"],
                "exposed_fraction": r["exposed_fraction"],
                "exposed_fraction_se": r["exposed_fraction_se"],
                "predicted_exposed_fraction": r["exposed_fraction_predicted"],
                "whole_vector_exposure": r["whole_vector_exposure"],
                "whole_vector_exposure_se": r["whole_vector_exposure_se"],
                "predicted_whole_vector_exposure": r["whole_vector_exposure_predicted"],
                **summary}

    return summarize


def _trials(rows: pd.DataFrame, by: list[str], table: pd.DataFrame) -> pd.Series:
    """The attacked victim-slices behind each row of ``table`` (summed over populations)."""
    counts = rows[rows["metric"] == "trials"].groupby([*by, "method"])["value"].sum()
    return table.join(counts.rename("_trials"), on=[*by, "method"])["_trials"]


def _rate_z(measured: pd.Series, predicted: pd.Series, se: pd.Series,
            trials: pd.Series) -> pd.Series:
    """``|measured - predicted|`` in standard errors. The standard error is the measured one,
    but at least the binomial ``sqrt(p (1 - p) / trials)`` at the prediction (the smallest a
    rate over that many slices can have): a rare event seen in no trial has a measured SE of
    0, and whether zero is unlikely is what the prediction's own SE says."""
    gap = (measured - predicted).abs()
    se = np.maximum(se, np.sqrt(predicted * (1 - predicted) / trials))
    return (gap / se.where(se > 0)).where(se > 0, np.where(gap > 0, np.inf, 0.0))


def threshold_unit(config: SARConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Fig 8: the colluder threshold for this K, and the failure rate measured at it."""
    p = colluder_threshold(config.K, config.attacker)
    rows = attack_unit(dataclasses.replace(config, p=p), seed)
    extra = pd.DataFrame([{"metric": "threshold", "value": p, "method": config.attacker},
                          {"metric": "target", "value": 1.0 / config.K**2,
                           "method": config.attacker}])
    return pd.concat([rows, extra], ignore_index=True)


def threshold_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Thresholds per K and attacker, with the failure rate measured there vs 1/K^2."""
    table = pooled(rows, "success_rate", ["K"]).merge(
        rows[rows["metric"] == "threshold"].groupby(["K", "method"])["value"].first()
        .rename("threshold").reset_index(), on=["K", "method"])
    table["target"] = 1.0 / table["K"] ** 2
    z = _rate_z(table["success_rate"], table["target"], table["success_rate_se"],
                _trials(rows, ["K"], table))
    return {"table": table.to_dict(orient="records"), "max_z": float(z.max()),
            "max_z_threshold": z_threshold(len(table))}


def _epsilon_claim(s: Mapping[str, Any]) -> Claim:
    """Theorems 6-7: the paper's epsilon of the SAR release (eq 30 per slice, slices in
    parallel) as an upper bound on the exact user-level one. A failure is explained by parallel
    composition where the slices compose to more than one slice's epsilon, else by eq (3)'s
    range."""
    sliced = s["epsilon"] > s["epsilon_slice"] * (1 + 1e-12)
    return gaussian_epsilon_claim("Theorems 6-7 (slices in parallel), eq (30)", s["epsilon"],
                                  s["epsilon_paper"], **(
                                      {"erratum": "Theorem 6 applied to slices"} if sliced
                                      else {}))


def attack_claims(s: Mapping[str, Any]) -> list[Claim]:
    """sar-attack: measured rates against eq (31) / corrected eq (32), exactness, epsilon."""
    formula = "eq (31)" if s["parameters"]["attacker"] == "weak" else "eq (32) as corrected"
    return [
        Claim(f"{formula}: a slice's failure probability (times 1 - p_p)",
              s["predicted_failure_probability"], s["success_rate"], se=s["success_rate_se"],
              erratum="eq (32), Theorem 8"),
        Claim("expected exposed fraction of the victim's vector", s["predicted_exposed_fraction"],
              s["exposed_fraction"], se=s["exposed_fraction_se"]),
        Claim("whole-vector exposure E_c[P(slice | c)^N]", s["predicted_whole_vector_exposure"],
              s["whole_vector_exposure"], se=s["whole_vector_exposure_se"]),
        Claim("Definitions 4-5: colluders recover a noise-free victim's slice exactly "
              "(largest error <= 1e-9)", 0.0, s["max_reconstruction_error"], kind="at_most",
              tolerance=1e-9),
        _epsilon_claim(s),
    ]


def grid_claims(what: str):
    """Claims of a grid of attacks: every rate against the theory, exactness, epsilon."""

    def claims(s: Mapping[str, Any]) -> list[Claim]:
        return [Claim(f"{what}: success, exposed fraction and whole-vector exposure = eq (31) "
                      "/ corrected eq (32) at every grid point", None, s["max_z"],
                      tolerance=s["max_z_threshold"], kind="z"),
                Claim("Definitions 4-5: exact recovery of a noise-free slice", 0.0,
                      s["max_reconstruction_error"], kind="at_most", tolerance=1e-9),
                _epsilon_claim(s)]

    return claims


def threshold_claims(s: Mapping[str, Any]) -> list[Claim]:
    """sar-thresholds: at eq (33)'s p_k (strong: root finding) the failure rate is 1/K^2."""
    return [Claim("eq (33), Fig 8: at the threshold p_k the measured failure rate is 1/K^2 "
                  "(every K and attacker)", None, s["max_z"], tolerance=s["max_z_threshold"],
                  kind="z")]


def participation_unit(config: SARConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Participation dynamics: users estimate p and opt out past the threshold."""
    model = SARModel(config, seed).run()
    rows = model.results().melt(id_vars="round", var_name="metric")
    predicted = model.predicted()
    extra = pd.DataFrame([{"round": config.rounds, "metric": f"predicted_{k}", "value": v}
                          for k, v in predicted.items()])
    return pd.concat([rows, extra], ignore_index=True).assign(method=config.attacker)


def participation_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Final participation and attack success per grid point: each a mean over the populations
    where it is defined, beside how many those are (``populations``, and ``NAME_populations``
    per mean: no attack succeeds or fails where everyone has left, so ``success_rate`` may
    average fewer populations than ``participants``)."""
    last = rows[rows["round"] == params["rounds"]]
    wide = last.pivot_table(index=["p", "method", "population"], columns="metric",
                            values="value", dropna=False).reset_index()
    grouped = wide.groupby(["p", "method"])
    table = grouped.mean(numeric_only=True).reset_index()
    table["populations"] = grouped["population"].nunique().to_numpy()
    averaged = ["participants", "p_estimate", "success_rate"]
    for metric in averaged:
        table[f"{metric}_populations"] = grouped[metric].count().to_numpy()
    keep = ["p", "method", "populations", *averaged, *(f"{m}_populations" for m in averaged),
            "predicted_largest_admitting_K", "predicted_failure_probability"]
    return {"table": table[keep].to_dict(orient="records")}


_ATTACK = {"config_type": SARConfig, "run_unit": attack_unit, "source": "chained-dp-bas-sar",
           "table_caption": "Per grid point and attacker, pooled over populations: measured "
                            "rates with standard errors beside the theory (eq 31, corrected "
                            "eq 32, the binomial mixture for exposure)."}

register(Experiment(
    name="sar-attack",
    summarize=attack_summary([]),
    claims=attack_claims,
    plot=figure(FIGURES, "attack"),
    defaults={"trials": 25_000},
    paper={"trials": 250_000},
    populations=4,
    **_ATTACK,
))

register(Experiment(
    name="sar-success-vs-p",
    grid={"p": [0.05, 0.1, 0.2, 0.3, 0.5], "K": [5, 10, 20], "attacker": ["weak", "strong"]},
    summarize=attack_summary(["p", "K"]),
    claims=grid_claims("success vs p and K"),
    defaults={"trials": 5_000, "d": 1},
    paper={"trials": 100_000, "K": [3, 5, 10, 20, 50, 100]},
    populations=2,
    plot=figure(FIGURES, "measured_vs_predicted", "p", "success_rate", hue="K"),
    **_ATTACK,
))

register(Experiment(
    name="sar-exposure-vs-N",
    grid={"N": [1, 2, 5, 10, 20], "attacker": ["weak", "strong"]},
    summarize=attack_summary(["N"]),
    claims=grid_claims("exposure vs N"),
    defaults={"trials": 5_000, "d": 20, "K": 10, "p": 0.4},
    paper={"trials": 100_000, "N": [1, 2, 4, 5, 10, 20]},
    populations=2,
    plot=figure(FIGURES, "measured_vs_predicted", "N", "whole_vector_exposure"),
    **_ATTACK,
))

register(Experiment(
    name="sar-thresholds",
    config_type=SARConfig,
    run_unit=threshold_unit,
    grid={"K": [3, 5, 10, 20, 50, 100], "attacker": ["weak", "strong"]},
    summarize=threshold_summary,
    claims=threshold_claims,
    source="chained-dp-bas-sar",
    table_caption="Per K and attacker: the threshold p_k, and the failure rate measured there "
                  "(standard error) against the target 1/K^2.",
    defaults={"trials": 10_000, "d": 1},
    paper={"K": list(range(3, 101)), "trials": 200_000},
    populations=2,
    plot=figure(FIGURES, "thresholds"),
))

register(Experiment(
    name="sar-participation",
    config_type=SARConfig,
    run_unit=participation_unit,
    grid={"p": [0.02, 0.05, 0.1, 0.2], "attacker": ["weak", "strong"]},
    summarize=participation_summary,
    source="chained-dp-bas-sar",
    table_caption="Per p and attacker, at the last round: participants, their estimate of p, "
                  "attack success (each a mean over the populations where it is defined, with "
                  "how many those are: NAME_populations of populations), and the largest K "
                  "whose threshold admits p.",
    defaults={"K": 20, "N": 5, "d": 10, "rounds": 30},
    paper={"K": 50, "rounds": 200, "populations": 20},
    populations=3,
    plot=figure(FIGURES, "participation"),
))
