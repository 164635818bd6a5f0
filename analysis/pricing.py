"""Experiments of the pricing FL game (Hong & Duan, ``papers/pricing-fl-noise.txt``, sections
II-III): best-response dynamics with and without prices, Fig 1, the PoA family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames.environments.pricing_fl import PricingConfig, PricingFLModel
from privgames.mechanisms.pricing import is_equilibrium, poa_family, social_cost

#: Largest N whose per-round, per-client noise goes into the rows (the traces).
TRACE_LIMIT = 200
#: Profiles reported per client: learned, and the theory's three.
PROFILES = ("learned", "eq10", "eq11", "optimum")


def pricing_unit(config: PricingConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population: the best-response path, the end point against the theory, payments.

    Rows: per round ``social_cost``, ``distance`` (to eq 11 under pricing, eq 10 without),
    ``participants``, ``change`` and (N <= ``TRACE_LIMIT``) each client's ``sigma_path``; per
    client ``sigma`` of each profile (``method``); final
    metrics (``method`` ``learned``): the end point's social cost, the true optimum's, the
    printed profiles' (eq 10, eq 11), PoA, whether each profile is what the paper calls it,
    and the net payments (``net_payment`` with ``_var``, ``_n``, ``_predicted`` = 0).
    """
    model = PricingFLModel(config, seed).run()
    agg, game, alpha = config.aggregation, model.game, model.alpha
    theory = model.predicted()
    trajectory = model.results().melt(id_vars="round", var_name="metric").assign(
        method="learned")
    if config.N <= TRACE_LIMIT:  # every client's noise per round
        paths = model.datacollector.get_agent_vars_dataframe()["sigma"].reset_index()
        trajectory = pd.concat([trajectory, pd.DataFrame({
            "round": paths["Step"].to_numpy(), "metric": "sigma_path", "method": "learned",
            "client": paths["AgentID"].to_numpy() - 1, "value": paths["sigma"].to_numpy()})])
    profiles = pd.concat([pd.DataFrame({"method": name, "metric": "sigma",
                                        "client": np.arange(config.N), "value": sigma})
                          for name, sigma in (("learned", model.sigma),
                                              *((k, theory[k]) for k in PROFILES[1:]))])

    def sc(sigma: np.ndarray) -> float:
        return social_cost(sigma, alpha, *game, agg) if np.all(~np.isnan(sigma)) else np.nan

    optimum = sc(theory["optimum"])
    settle = model.rounds_to_settle()
    finals = {
        "social_cost": model.social_cost(), "optimal_social_cost": optimum,
        "eq10_social_cost": sc(theory["eq10"]), "eq11_social_cost": sc(theory["eq11"]),
        "poa": model.social_cost() / optimum,
        "is_equilibrium": float(model.is_equilibrium()),
        "eq10_is_equilibrium": _all_at_best_response(theory["eq10"], alpha, game, None, agg),
        "eq11_is_optimal": float(sc(theory["eq11"]) <= optimum * (1 + 1e-9)),
        "target_is_equilibrium": _all_at_best_response(
            theory["target"], alpha, game, model.beta if config.pricing else None, agg),
        "final_distance": model.distance(),
        "rounds_to_settle": np.nan if settle is None else float(settle),
        "participants": float(np.sum(np.isfinite(model.sigma))),
        "expected_net_payment": model.expected_net_payment(),
        "priced": float(config.pricing),
    }
    final = pd.DataFrame([{"metric": k, "value": float(v)} for k, v in finals.items()]
                         + mean_rows("net_payment", model.net_payments(), 0.0))
    rows = pd.concat([trajectory, profiles, final.assign(method="learned")], ignore_index=True)
    return rows.astype({"client": "Int64", "round": "Int64"})


def _all_at_best_response(sigma, alpha, game, beta, agg) -> float:
    if np.any(np.isnan(sigma)):
        return np.nan
    return float(np.all(is_equilibrium(sigma, alpha, *game, beta, agg)))


FINALS = ("social_cost", "optimal_social_cost", "eq10_social_cost", "eq11_social_cost", "poa",
          "final_distance", "participants")
CHECKS = ("is_equilibrium", "eq10_is_equilibrium", "eq11_is_optimal", "target_is_equilibrium")


def _final(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Final metrics per population, one column each."""
    sel = rows[rows["round"].isna() & rows["metric"].isin(FINALS + CHECKS + ("rounds_to_settle",))]
    return sel.pivot_table(index=[*by, "population"], columns="metric", values="value",
                           dropna=False).reset_index()


def pricing_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """The end point against eq (10), eq (11) and the true optimum; payments; profiles of
    population 0 (``learned_sigma`` uses ``Infinity`` for opted-out clients)."""
    wide = _final(rows, [])
    pay = pooled(rows, "net_payment").iloc[0]

    def profile(method: str) -> list[float]:
        sel = rows[(rows["metric"] == "sigma") & (rows["method"] == method)
                   & (rows["population"] == 0)].sort_values("client")
        return sel["value"].tolist()

    settle = wide["rounds_to_settle"]
    return {
        "predicted_sigma": profile("eq11" if params["pricing"] else "eq10"),
        "learned_sigma": profile("learned"),
        "optimal_sigma": profile("optimum"),
        **{k: float(wide[k].mean()) for k in FINALS},
        "max_final_distance": float(wide["final_distance"].max()),
        "rounds_to_settle": None if settle.isna().any() else int(settle.max()),
        **{k: bool((wide[k] == 1.0).all()) for k in CHECKS},
        "mean_net_payment": pay["net_payment"], "mean_net_payment_se": pay["net_payment_se"],
        "populations": int(wide["population"].nunique()),
    }


def pricing_claims(s: Mapping[str, Any]) -> list[Claim]:
    """Propositions 2 and 4 (and eq 11) for the configured rule, judged on the end points."""
    p = s["parameters"]
    rule = f"{p['aggregation']} rule"
    out = [
        Claim(f"Proposition 2 ({rule}): the solution of eq (10) is the clients' equilibrium "
              "(every client at a global best response)", True, s["eq10_is_equilibrium"],
              kind="true" if s["eq10_is_equilibrium"] else "false",
              erratum="Proposition 2, eq (10) under the MLE rule"),
        Claim(f"eq (11) ({rule}): the solution is the social optimum (its social cost vs direct "
              "minimisation)", s["optimal_social_cost"], s["eq11_social_cost"],
              tolerance=1e-9 * s["optimal_social_cost"],
              erratum="eq (11) under the MLE rule"),
    ]
    if p["pricing"]:
        out += [
            Claim(f"Proposition 4 ({rule}): under Definition 4's prices (corrected eq 12) the "
                  "clients' dynamics reach eq (11) (largest relative distance)", 0.0,
                  s["max_final_distance"], tolerance=1e-6,
                  erratum="Proposition 4 under the MLE rule"),
            Claim("Proposition 4: ex-ante budget balance (mean net payment, corrected q)", 0.0,
                  s["mean_net_payment"], se=s["mean_net_payment_se"]),
        ]
    else:
        out.append(Claim(f"without prices ({rule}): best responses reach eq (10) (largest "
                         "relative distance)", 0.0, s["max_final_distance"], tolerance=1e-6,
                         erratum="Proposition 2, eq (10) under the MLE rule"))
    return out


def fig1_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Fig 1: social cost per type spread, with and without prices, against the optimum."""
    by = ["alpha_std", "pricing", "aggregation"]
    wide = _final(rows, by)
    table = wide.groupby(by)[["social_cost", "optimal_social_cost", "poa", "final_distance"]]
    table = table.mean().reset_index()
    free = table[~table["pricing"].astype(bool)].set_index(["alpha_std", "aggregation"])
    paid = table[table["pricing"].astype(bool)].set_index(["alpha_std", "aggregation"])
    gain = (free["social_cost"] / paid["social_cost"]).reset_index(name="cost_ratio")
    return {"table": table.to_dict(orient="records"),
            "pricing_lowers_cost_mean": bool((gain[gain["aggregation"] == "mean"]
                                              ["cost_ratio"] >= 1 - 1e-9).all()),
            "pricing_lowers_cost_mle": bool((gain[gain["aggregation"] == "mle"]
                                             ["cost_ratio"] >= 1 - 1e-9).all()),
            "priced_mean_reaches_optimum": bool(
                (paid.xs("mean", level="aggregation")["final_distance"] < 1e-6).all())}


def fig1_claims(s: Mapping[str, Any]) -> list[Claim]:
    return [Claim("Fig 1 (mean rule): pricing lowers the social cost at every type spread",
                  True, s["pricing_lowers_cost_mean"], kind="true"),
            Claim("Fig 1 (mean rule): with prices the clients reach the optimum", True,
                  s["priced_mean_reaches_optimum"], kind="true"),
            Claim("Fig 1 (MLE rule, the paper's): pricing lowers the social cost at every type "
                  "spread", True, s["pricing_lowers_cost_mle"],
                  kind="true" if s["pricing_lowers_cost_mle"] else "false",
                  erratum="Proposition 4 under the MLE rule")]


def poa_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """PoA of the learned end points vs N (equal types), beside Proposition 3's family."""
    wide = _final(rows, ["N", "aggregation"])
    table = wide.groupby(["N", "aggregation"])[["poa", "final_distance"]].mean().reset_index()
    alpha = params["alpha_mean"]
    table["poa_family"] = [poa_family(int(n), alpha) for n in table["N"]]
    mean = table[table["aggregation"] == "mean"].sort_values("N")
    gap = (mean["poa"] / mean["poa_family"] - 1).abs().max()
    return {"table": table.to_dict(orient="records"),
            "poa_max_relative_gap_mean": float(gap),
            "poa_increasing_mean": bool(np.all(np.diff(mean["poa"]) > 0)),
            "poa_largest": float(mean["poa"].max()), "N_largest": int(mean["N"].max())}


def poa_claims(s: Mapping[str, Any]) -> list[Claim]:
    return [Claim("Proposition 3 (mean rule, equal types): the learned equilibrium's PoA is the "
                  "family's closed form (largest relative gap)", 0.0,
                  s["poa_max_relative_gap_mean"], tolerance=1e-6),
            Claim(f"Proposition 3: the PoA grows without bound in N (increasing; "
                  f"{s['poa_largest']:.3g} at N={s['N_largest']})", True,
                  s["poa_increasing_mean"], kind="true")]


_PRICING = {"config_type": PricingConfig, "run_unit": pricing_unit,
            "source": "pricing-fl-noise"}

register(Experiment(
    name="pricing-fl",
    description="Pricing FL game: clients learn their noise by global best response, with or "
                "without Definition 4's prices; end point vs eq (10), eq (11), the true optimum",
    summarize=pricing_summary,
    claims=pricing_claims,
    plot=figure("pricing_trace"),
    defaults={"N": 10, "rounds": 100},
    paper={"N": 100, "rounds": 200, "populations": 20},
    populations=4,
    **_PRICING,
))

register(Experiment(
    name="pricing-fig1",
    description="Fig 1: social cost vs the variance of the types (normal, mean 0.5), with and "
                "without prices, MLE and mean rules, against the true optimum",
    summarize=fig1_summary,
    claims=fig1_claims,
    plot=figure("pricing_fig1"),
    grid={"alpha_std": [0.0, 0.1, 0.2, 0.3], "pricing": [False, True],
          "aggregation": ["mle", "mean"]},
    defaults={"N": 20, "rounds": 80, "replications": 200},
    paper={"N": 100, "alpha_std": [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35],
           "rounds": 200, "populations": 20},
    populations=3,
    table_caption="Per type spread, pricing and aggregation rule (mean over populations): "
                  "social cost of the learned end point, of the true optimum, their ratio "
                  "(PoA), and the end point's distance to the profile the setting predicts.",
    **_PRICING,
))

register(Experiment(
    name="pricing-poa",
    description="Proposition 3: PoA of the learned equilibrium vs N with equal types, beside "
                "the closed-form family",
    summarize=poa_summary,
    claims=poa_claims,
    plot=figure("pricing_poa"),
    grid={"N": [2, 5, 10, 50, 200, 1000], "aggregation": ["mean"]},
    defaults={"alpha_std": 0.0, "rounds": 80, "replications": 10, "update": "simultaneous"},
    paper={"N": [2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000]},
    populations=1,
    table_caption="Per N and rule: PoA of the learned end point (social cost over the true "
                  "optimum) and Proposition 3's family (eq 10 over eq 11, mean rule).",
    **_PRICING,
))
