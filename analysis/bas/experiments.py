"""Experiments of the BAS chain (Chained-DP paper, section VII, Figs 3-7)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim, gaussian_epsilon_claim, z_threshold
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_profile, mean_rows, metric_means, pooled
from privgames.environments.bas_chain import BASChainConfig, BASChainModel
from privgames.environments.streams import replaying, spawn
from privgames.mechanisms.chain import (
    chain_mse,
    ldp_variances,
    price_of_anarchy,
    price_of_anarchy_bound,
    social_cost,
    user_costs,
)

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

#: The profiles compared: learned, and the theory's three (``BASChainModel.profiles``).
METHODS = ("chained", "nash", "ldp", "optimum")
LABELS = {"chained": "learned Chained-DP", "nash": "Theorem 1 NE", "ldp": "LDP (eq 26)",
          "optimum": "centralized optimum"}

#: Misreport grid of the truthfulness check: bid = factor * beta_k.
MISREPORTS = (0.0, 0.5, 0.9, 1.1, 2.0, 10.0)


def chain_unit(config: BASChainConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population: learn, then Monte-Carlo the final chain; tidy rows.

    Rows carry ``round, method, metric, position, value``: the learning trajectory
    (``distance``, ``total_variance`` per round), the final profiles (``sigma2`` per position
    for ``chained`` and ``nash``), the final metrics of every profile and ``rounds_to_converge``.
    """
    model = BASChainModel(config, seed).run()
    last = config.rounds
    trajectory = model.results().melt(id_vars="round", var_name="metric").assign(method="chained")
    errors = model.monte_carlo()
    final = []
    for name, sigma2 in model.profiles().items():
        final += [{"method": name, **row} for row in
                  mean_rows("mse", errors[name], chain_mse(sigma2.sum(), config.K, config.d))]
        final += [{"method": name, "metric": metric, "value": float(value)} for metric, value in
                  (("total_variance", sigma2.sum()), ("epsilon", model.epsilon(sigma2)),
                   ("epsilon_paper", model.epsilon(sigma2, paper=True)),
                   ("mean_cost", model.costs(sigma2).mean()))]
    final = pd.DataFrame(final).assign(round=last)
    profiles = [pd.DataFrame({"round": last, "method": name, "metric": "sigma2",
                              "position": np.arange(config.K), "value": sigma2})
                for name, sigma2 in (("chained", model.learned()),
                                     ("nash", model.predicted()["nash"]))]
    converge = pd.DataFrame([
        {"round": last, "method": "chained", "metric": metric,
         "value": math.nan if rounds is None else float(rounds)}
        for metric, rounds in (("rounds_to_converge", model.rounds_to_converge()),
                               ("rounds_to_settle", model.rounds_to_settle()))])
    if model.experience is not None:
        converge.loc[len(converge)] = {"round": last, "method": "chained",
                                       "metric": "grid_nash_distance",
                                       "value": model.grid_distance()}
    rows = pd.concat([trajectory, final, *profiles, converge], ignore_index=True)
    return rows.astype({"position": "Int64"})[["round", "method", "metric", "position", "value"]]


def chain_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Predicted vs learned profile, convergence and MSE of every profile (bas-chain)."""
    last = rows[(rows["metric"] == "distance") & (rows["round"] == params["rounds"])]
    rtc = rows.loc[rows["metric"] == "rounds_to_converge", "value"]
    settle = rows.loc[rows["metric"] == "rounds_to_settle", "value"]
    grid = rows.loc[rows["metric"] == "grid_nash_distance", "value"]
    summary: dict[str, Any] = {
        "predicted_sigma2": mean_profile(rows, "nash"),
        "learned_sigma2": mean_profile(rows, "chained"),
        "rounds_to_converge": None if rtc.isna().any() else int(rtc.max()),
        "rounds_to_settle": None if settle.isna().any() else int(settle.max()),
        "final_distance": float(last["value"].max()),
        "populations": int(rows["population"].nunique()),
        "learner": params["learner"],
        "feedback": BASChainConfig(learner=params["learner"],
                                   feedback=params["feedback"]).resolved_feedback,
        "final_distance_grid_nash": None if grid.empty else float(grid.max()),
    }
    for r in pooled(rows, "mse").itertuples():
        summary[f"mse_{r.method}"] = r.mse
        summary[f"mse_{r.method}_se"] = r.mse_se
        summary[f"mse_{r.method}_predicted"] = r.mse_predicted
    summary["chained_below_ldp"] = summary["mse_chained"] < summary["mse_ldp"]
    eps = metric_means(rows, "epsilon").merge(metric_means(rows, "epsilon_paper"), on="method")
    for r in eps.itertuples():  # mean over populations of the worst user's epsilon
        summary[f"epsilon_{r.method}"] = r.epsilon
        summary[f"epsilon_paper_{r.method}"] = r.epsilon_paper
    summary["epsilon"] = summary["epsilon_chained"]
    summary["epsilon_paper"] = summary["epsilon_paper_chained"]
    return summary


def figure_summary(by: list[str]):
    """Summary of a figure experiment: a predicted-vs-measured table per grid point."""

    def summarize(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
        table = pooled(rows, "mse", by)
        for metric in ("epsilon", "epsilon_paper", "mean_cost"):
            table = table.merge(metric_means(rows, metric, by), on=[*by, "method"])
        wide = table.pivot_table(index=by, columns="method", values="mse")
        # where every subsequence holds one user the chain is LDP (eq 9: equal MSEs), so the
        # claim is judged where eq (9) puts Chained-DP strictly below LDP
        theory = table.pivot_table(index=by, columns="method", values="mse_predicted")
        apart = theory["chained"] < theory["ldp"] * (1 - 1e-9)
        z = np.abs(table["mse"] - table["mse_predicted"]) / table["mse_se"]
        chained = table["method"] == "chained"
        worst = table.loc[chained]
        return {"table": table.to_dict(orient="records"),
                "sampling": params["sampling"],  # which path the MSEs came from
                "chained_below_ldp": bool((wide["chained"] < wide["ldp"])[apart].all()),
                "max_z_chained": float(z[chained].max()),
                "max_z": float(z.max()), "max_z_threshold": z_threshold(len(table)),
                "epsilon_chained_max": float(worst["epsilon"].max()),
                "epsilon_paper_chained_max": float(
                    worst.loc[worst["epsilon"].idxmax(), "epsilon_paper"])}

    return summarize


def figure_claims(figure: str, x: str):
    """Claims of a figure experiment: eq (9) at every grid point, Chained-DP below LDP, and the
    privacy budget of the learned chain."""

    def claims(s: Mapping[str, Any]) -> list[Claim]:
        return [
            Claim(f"{figure}: MSE = eq (9) for every method and {x} (max over the grid)", None,
                  s["max_z"], tolerance=s["max_z_threshold"], kind="z"),
            Claim(f"{figure}: Chained-DP's MSE is below LDP's at every {x} (where a "
                  "subsequence has more than one user)", True,
                  s["chained_below_ldp"], kind="true"),
            gaussian_epsilon_claim(f"{figure}, worst grid point", s["epsilon_chained_max"],
                                   s["epsilon_paper_chained_max"]),
        ]

    return claims


def chain_claims(s: Mapping[str, Any]) -> list[Claim]:
    """bas-chain: convergence to Theorem 1, eq (9) for every profile, the budget (eq 30)."""
    out = [Claim("Theorem 1: best responses reach the NE (m max beta, 0, ..., 0); "
                 "relative distance after the last round", 0.0, s["final_distance"],
                 tolerance=s["parameters"]["tolerance"])]
    if s.get("final_distance_grid_nash") is not None:  # learners from experience (issue 21)
        out.append(Claim(f"{s['learner']} ({s['feedback']} feedback) reaches the chain's grid "
                         "NE, each user best-responding to the levels above it (relative "
                         "distance; tolerance one grid step)", 0.0,
                         s["final_distance_grid_nash"],
                         tolerance=1.0 / (s["parameters"]["grid_points"] - 1)))
    for method in METHODS:
        out.append(Claim(f"eq (9): MSE of the {LABELS[method]} profile",
                         s[f"mse_{method}_predicted"], s[f"mse_{method}"],
                         se=s[f"mse_{method}_se"]))
    out.append(Claim("Fig 3-7: Chained-DP's MSE is below LDP's (eq 26)", s["mse_ldp"],
                     s["mse_chained"], se=s["mse_chained_se"], kind="at_most"))
    out.append(gaussian_epsilon_claim("eq (30), learned chain", s["epsilon"],
                                      s["epsilon_paper"]))
    return out


def properties_claims(s: Mapping[str, Any]) -> list[Claim]:
    """bas-properties: E1-E4 of section V-B."""
    return [
        Claim("Theorem 2 (truthfulness): no misreported bid lowers a user's cost "
              "(largest gain over the misreport grid)", 0.0, s["truthful_max_gain"],
              kind="at_most", tolerance=1e-9),
        Claim("Theorem 3 (fairness): every user's equilibrium cost is equal (eq 25); "
              "spread / mean cost", 0.0, s["fairness_spread_mean"], tolerance=1e-9,
              erratum="Theorem 3 (fairness), eq (25)"),
        Claim("Theorem 4 (voluntary participation): leaving costs more than staying "
              "(smallest margin)", 0.0, s["participation_min_margin"], kind="at_least"),
        Claim("Theorem 5: PoA = (r + 2 r^(-1/2)) / 3 (closed form) vs measured social costs; "
              "largest |difference|", 0.0, s["poa_max_abs_error"], tolerance=1e-9),
        Claim("Theorem 5 (as its proof derives it): PoA <= max beta / min beta in every "
              "population", True, s["poa_within_bound"], kind="true"),
    ]


def _user_costs(model: BASChainModel) -> dict[int, float]:
    """Each user's cost at the learned profile, keyed by user index."""
    return dict(zip(model.order.tolist(), model.costs(model.learned()), strict=True))


def properties_unit(config: BASChainConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """E1-E4 measured on learned equilibria of one population (section V-B).

    The leader starts from the bids (``prior="bids"``), so that bids matter beyond the order.
    Truthfulness: each user re-runs the learning with each misreported bid (common random
    numbers: the same seed) and its cost is compared with the truthful run's. Fairness: spread
    of the users' equilibrium costs. Voluntary participation: a user who leaves plays LDP alone
    while the others learn their own chain. Efficiency: social cost of the learned profile over
    that of the centralized optimum, against the Theorem 5 bound.
    """
    seeds = spawn(seed, 2)
    honest_model = BASChainModel(config, seeds[0]).run()
    beta, honest = honest_model.beta, _user_costs(honest_model)
    gains = []
    for k in range(config.K):
        for factor in MISREPORTS:
            bids = beta.copy()
            bids[k] = factor * beta[k]
            with replaying():  # common random numbers: the honest run's population
                lie = BASChainModel(dataclasses.replace(config, beta=tuple(beta),
                                                        bids=tuple(bids)), seeds[0]).run()
            gains.append(honest[k] - _user_costs(lie)[k])
    margins = []
    for k, leave_seed in enumerate(spawn(seeds[1], config.K)):
        others = tuple(np.delete(beta, k))
        rest = dataclasses.replace(config, K=config.K - 1, beta=others, bids=None,
                                   subsequences=1)
        others_total = BASChainModel(rest, leave_seed).run().learned().sum()
        alone = user_costs(ldp_variances(beta[k:k + 1]), beta[k:k + 1])[0]  # eq (14) alone
        margins.append(alone + others_total - honest[k])  # plus the others' noise, eq (11)
    costs = np.array(list(honest.values()))
    ordered = beta[honest_model.order]
    values = {
        "truthful_max_gain": max(gains),
        "fairness_spread": float(np.ptp(costs) / costs.mean()),
        "participation_min_margin": min(margins),
        "poa_measured": social_cost(honest_model.learned(), ordered)
        / social_cost(honest_model.predicted()["optimum"], ordered),
        "poa_predicted": price_of_anarchy(beta),
        "poa_bound": price_of_anarchy_bound(beta),
    }
    return pd.DataFrame([{"round": config.rounds, "method": "chained", "metric": k,
                          "value": float(v)} for k, v in values.items()])


def properties_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Whether each economic property held in every population, with the numbers."""
    v = rows.pivot_table(index="population", columns="metric", values="value")
    return {
        "truthful": bool((v["truthful_max_gain"] <= 1e-9).all()),
        "truthful_max_gain": float(v["truthful_max_gain"].max()),
        "fair": bool((v["fairness_spread"] <= 1e-9).all()),
        "fairness_spread_mean": float(v["fairness_spread"].mean()),
        "voluntary_participation": bool((v["participation_min_margin"] > 0).all()),
        "participation_min_margin": float(v["participation_min_margin"].min()),
        "poa_mean": float(v["poa_measured"].mean()),
        "poa_max_abs_error": float((v["poa_measured"] - v["poa_predicted"]).abs().max()),
        "poa_within_bound": bool((v["poa_measured"] <= v["poa_bound"]).all()),
    }


BAS_CHAIN = register(Experiment(
    name="bas-chain",
    config_type=BASChainConfig,
    run_unit=chain_unit,
    summarize=chain_summary,
    defaults={"replications": 1000},
    paper={"sampling": "chi-square", "replications": 10000, "populations": 20},
    populations=4,
    plot=figure(FIGURES, "convergence"),
    source="chained-dp-bas-sar",
    claims=chain_claims,
))

_FIGURE = {"run_unit": chain_unit, "config_type": BASChainConfig, "populations": 4,
           "source": "chained-dp-bas-sar",
           "table_caption": "Per grid point and method, pooled over populations: measured MSE "
                            "with its standard error, eq (9)'s prediction, the worst user's "
                            "epsilon (exact and as printed) and the mean cost (eq 14)."}

register(Experiment(
    name="bas-mse-vs-d",
    grid={"d": [2, 10, 25, 50, 100]},
    summarize=figure_summary(["d"]),
    claims=figure_claims("Fig 3", "d"),
    defaults={"replications": 300, "rounds": 5},
    paper={"sampling": "chi-square", "d": list(range(2, 101, 7)), "replications": 5000,
           "populations": 20},
    plot=figure(FIGURES, "methods_vs", "d", ("mse", "epsilon")),
    **_FIGURE,
))

register(Experiment(
    name="bas-mse-vs-beta",
    grid={"beta_max": [0.1, 0.4, 0.7, 1.0, 1.3]},
    summarize=figure_summary(["beta_max"]),
    claims=figure_claims("Figs 4-5", "beta_max"),
    defaults={"replications": 300, "rounds": 5},
    paper={"sampling": "chi-square",
           "beta_max": [round(0.1 * i, 1) for i in range(1, 14)], "replications": 5000,
           "populations": 20},
    plot=figure(FIGURES, "methods_vs", "beta_max", ("mse", "mean_cost")),
    **_FIGURE,
))

register(Experiment(
    name="bas-split",
    grid={"subsequences": [1, 2, 5, 10, 25, 50], "split": ["random", "sorted"]},
    summarize=figure_summary(["subsequences", "split"]),
    claims=figure_claims("Fig 6", "subsequences"),
    defaults={"K": 100, "replications": 200, "rounds": 5},
    paper={"sampling": "chi-square", "subsequences": [1, 2, 4, 5, 10, 20, 25, 50, 100],
           "replications": 5000,
           "populations": 20},
    plot=figure(FIGURES, "methods_vs", "subsequences", ("mse",), style="split"),
    **_FIGURE,
))

register(Experiment(
    name="bas-mse-vs-K",
    grid={"K": [3, 5, 10, 20, 50, 100]},
    summarize=figure_summary(["K"]),
    claims=figure_claims("Fig 7", "K"),
    defaults={"replications": 300, "rounds": 5},
    paper={"sampling": "chi-square", "K": [3, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
           "replications": 5000,
           "populations": 20},
    plot=figure(FIGURES, "methods_vs", "K", ("mse",)),
    **_FIGURE,
))

register(Experiment(
    name="bas-properties",
    config_type=BASChainConfig,
    run_unit=properties_unit,
    summarize=properties_summary,
    defaults={"K": 8, "rounds": 8, "replications": 1, "prior": "bids"},
    paper={"K": 10, "populations": 50},
    populations=4,
    plot=figure(FIGURES, "properties"),
    source="chained-dp-bas-sar",
    claims=properties_claims,
))
