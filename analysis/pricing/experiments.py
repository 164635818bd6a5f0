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
from privgames.environments.fl_training import FederatedTrainingModel, TrainingConfig
from privgames.environments.pricing_bayes import BayesConfig, BayesianPricingModel
from privgames.environments.pricing_fl import PricingConfig, PricingFLModel
from privgames.environments.threads import one_thread
from privgames.mechanisms.pricing import is_equilibrium, poa_family, social_cost
from privgames.mechanisms.pricing_bayes import (
    TRUTHFUL,
    Mechanism,
    case_equilibrium,
    expected_social_cost,
)
from privgames.mechanisms.pricing_bayes import deviation_gains as gains_at

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

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
    if config.information == "incomplete":
        return bne_unit(config.bayes(), seed)
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
    population 0 (``learned_sigma`` uses ``Infinity`` for opted-out clients). Under incomplete
    information the profiles are per type (L, H) and truthfulness is checked."""
    if params["information"] == "incomplete":
        return _incomplete_summary(rows, params)
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


def _incomplete_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    sel = rows[rows["round"].isna()]
    wide = sel.pivot_table(index="population", columns="metric", values="value")
    first = wide.iloc[0]
    gain = "max_gain_full" if params["pricing"] else "max_gain_none"
    truthful = bool((wide[gain] <= GAIN_TOLERANCE).all() & (wide["truthful_learned"] == 1).all())
    return {"predicted_sigma": [first["target_L"], first["target_H"]],
            "learned_sigma": [first["sigma_L"], first["sigma_H"]],
            "social_cost": float(wide["expected_social_cost"].mean()),
            "optimal_social_cost": float(wide["optimal_social_cost"].mean()),
            "poa": float((wide["expected_social_cost"] / wide["optimal_social_cost"]).mean()),
            "max_final_distance": float(wide["distance"].max()),
            "is_equilibrium": truthful, "truthful_is_bne": truthful,
            "truthful_without_rewards_is_bne": bool((wide["max_gain_penalties"]
                                                     <= GAIN_TOLERANCE).all()),
            "mean_net_payment": None, "mean_net_payment_se": None,  # not measured here
            "populations": int(len(wide))}


def pricing_claims(s: Mapping[str, Any]) -> list[Claim]:
    """Propositions 2 and 4 (and eq 11) for the configured rule, judged on the end points."""
    p = s["parameters"]
    if p["information"] == "incomplete":
        return [Claim("Proposition 5: truthful reporting is a BNE" + (
            "" if p["pricing"] else " without prices (reports as cheap talk)"), True,
            s["truthful_is_bne"], kind="true"),
                Claim("Proposition 5: the learned noise is the optimum's", 0.0,
                      s["max_final_distance"], tolerance=1e-6)] if p["pricing"] else [
                Claim("without prices the clients' expected social cost exceeds the optimum",
                      s["optimal_social_cost"], s["social_cost"], kind="at_least")]
    rule = f"{p['aggregation']} rule"

    def mle_only(entry: str) -> str | None:
        """These errata explain failures under the MLE rule only."""
        return entry if p["aggregation"] == "mle" else None

    out = [
        Claim(f"Proposition 2 ({rule}): the solution of eq (10) is the clients' equilibrium "
              "(every client at a global best response)", True, s["eq10_is_equilibrium"],
              kind="true", erratum=mle_only("Proposition 2, eq (10) under the MLE rule")),
        Claim(f"eq (11) ({rule}): the solution is the social optimum (its social cost vs direct "
              "minimisation)", s["optimal_social_cost"], s["eq11_social_cost"],
              tolerance=1e-9 * s["optimal_social_cost"],
              erratum=mle_only("eq (11) under the MLE rule")),
    ]
    if p["pricing"]:
        out += [
            Claim(f"Proposition 4 ({rule}): under Definition 4's prices (corrected eq 12) the "
                  "clients' dynamics reach eq (11) (largest relative distance)", 0.0,
                  s["max_final_distance"], tolerance=1e-6,
                  erratum=mle_only("Proposition 4 under the MLE rule")),
            Claim("Proposition 4: ex-ante budget balance (mean net payment, corrected q)", 0.0,
                  s["mean_net_payment"], se=s["mean_net_payment_se"]),
        ]
    else:
        out.append(Claim(f"without prices ({rule}): best responses reach eq (10) (largest "
                         "relative distance)", 0.0, s["max_final_distance"], tolerance=1e-6,
                         erratum=mle_only("Proposition 2, eq (10) under the MLE rule")))
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
                  "spread", True, s["pricing_lowers_cost_mle"], kind="true",
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


_OPTED_OUT = ("sigma = inf is a client that opts out: it sends no update (the MLE rule lets "
              "it, Proposition 2)")
_ACROSS_OPT_OUT = ("between a profile where a client opts out (sigma = inf) and one where it "
                   "takes part")
_PRICING = {"config_type": PricingConfig, "run_unit": pricing_unit,
            "source": "pricing-fl-noise",
            "infinite": {**dict.fromkeys(("sigma", "sigma_path", "learned_sigma",
                                          "optimal_sigma"), _OPTED_OUT),
                         **dict.fromkeys(("distance", "final_distance", "max_final_distance",
                                          "change"), _ACROSS_OPT_OUT)}}

register(Experiment(
    name="pricing-fl",
    summarize=pricing_summary,
    claims=pricing_claims,
    plot=figure(FIGURES, "pricing_trace"),
    defaults={"N": 10, "rounds": 100},
    paper={"N": 100, "rounds": 200, "populations": 20},
    populations=4,
    **_PRICING,
))

register(Experiment(
    name="pricing-fig1",
    summarize=fig1_summary,
    claims=fig1_claims,
    plot=figure(FIGURES, "pricing_fig1"),
    grid={"alpha_std": [0.0, 0.1, 0.2, 0.3], "pricing": [False, True],
          "aggregation": ["mle", "mean"]},
    defaults={"N": 20, "rounds": 80, "replications": 200},
    paper={"N": 100, "alpha_std": [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35],
           "rounds": 200, "populations": 5},
    populations=3,
    table_caption="Per type spread, pricing and aggregation rule (mean over populations): "
                  "social cost of the learned end point, of the true optimum, their ratio "
                  "(PoA), and the end point's distance to the profile the setting predicts.",
    **_PRICING,
))

register(Experiment(
    name="pricing-poa",
    summarize=poa_summary,
    claims=poa_claims,
    plot=figure(FIGURES, "pricing_poa"),
    grid={"N": [2, 5, 10, 50, 200, 1000], "aggregation": ["mean"]},
    defaults={"alpha_std": 0.0, "rounds": 80, "replications": 10, "update": "simultaneous"},
    paper={"N": [2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000]},
    populations=1,
    table_caption="Per N and rule: PoA of the learned end point (social cost over the true "
                  "optimum) and Proposition 3's family (eq 10 over eq 11, mean rule).",
    **_PRICING,
))


def bne_unit(config: BayesConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Incomplete information: clients learn reports and noise under the configured mechanism;
    truthfulness is then checked by enumeration (each type's best misreport, noise re-chosen)
    under the full mechanism, under penalties without rewards, and without prices."""
    model = BayesianPricingModel(config, seed).run()
    game, full = model.game, model.design["mechanism"]
    path = model.results().melt(id_vars="round", var_name="metric").assign(method="learned")
    finals = {"truthful_learned": float(model.truthful()),
              "target_L": float(model.design["target"][0]),
              "target_H": float(model.design["target"][1]),
              "sigma_L": float(model.strategy[1][0]), "sigma_H": float(model.strategy[1][1]),
              "distance": float(np.max(np.abs(model.strategy[1] / model.design["target"] - 1))),
              "expected_social_cost": model.expected_social_cost(),
              "optimal_social_cost": model.predicted()["optimal_social_cost"],
              "feasible": float(model.design["feasible"]),
              "reward_L": float(model.design["reward"][0]),
              "reward_H": float(model.design["reward"][1]),
              "beta_L": float(full.beta[0]), "beta_H": float(full.beta[1]), "q": full.q,
              "rounds_to_settle": float(model.steps) if not model.running else np.nan}
    variants = {"full": full, "penalties": Mechanism(beta=full.beta, target=full.target),
                "none": Mechanism(target=full.target)}
    for name, mech in variants.items():
        s = case_equilibrium(game, mech, TRUTHFUL)
        gains = gains_at(game, mech, s)
        finals[f"max_gain_{name}"] = float(gains.max())
        if name == "none":
            finals["selfish_social_cost"] = expected_social_cost(game, s)
    final = pd.DataFrame([{"metric": k, "value": float(v)} for k, v in finals.items()])
    return pd.concat([path, final.assign(method="learned")], ignore_index=True).astype(
        {"round": "Int64"})


#: A misreport must gain more than this (relative to the cost scale) to count as profitable.
GAIN_TOLERANCE = 1e-9


def bne_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per grid point: the learned reports, distance to the optimum, and the enumeration's
    best misreport gain with the mechanism, with penalties only, and without prices."""
    by = [k for k in ("eta", "alpha_L", "alpha_H", "N", "aggregation") if k in rows.columns
          and rows[k].nunique() > 1]
    sel = rows[rows["round"].isna()]
    wide = sel.pivot_table(index=[*by, "population"], columns="metric", values="value",
                           dropna=False).reset_index()
    table = wide.groupby(by)[[c for c in wide.columns if c not in (*by, "population")]].mean() \
        if by else wide.drop(columns="population").mean().to_frame().T
    table = table.reset_index() if by else table

    def never(col: str) -> bool:
        return bool((wide[col] <= GAIN_TOLERANCE).all())

    return {"table": table.to_dict(orient="records"),
            "truthful_is_bne": never("max_gain_full") and bool(
                (wide["truthful_learned"] == 1.0).all()),
            "truthful_without_rewards_is_bne": never("max_gain_penalties"),
            "truthful_without_prices_is_bne": never("max_gain_none"),
            "max_gain_full": float(wide["max_gain_full"].max()),
            "min_gain_penalties": float(wide["max_gain_penalties"].min()),
            "max_gain_none": float(wide["max_gain_none"].max()),
            "max_distance": float(wide["distance"].max()),
            "feasible": bool((wide["feasible"] == 1.0).all())}


def bne_claims(s: Mapping[str, Any]) -> list[Claim]:
    rule = s["parameters"]["aggregation"]
    return [
        Claim(f"Proposition 5 ({rule} rule): with the penalties and rewards (constants derived "
              "from the truthfulness constraints) truthful reporting is a BNE (largest gain of a "
              "misreport, every grid point)", 0.0, s["max_gain_full"], kind="at_most",
              tolerance=GAIN_TOLERANCE),
        Claim("Proposition 5: the clients' learned noise is the social optimum's (largest "
              "relative distance)", 0.0, s["max_distance"], tolerance=1e-6),
        Claim("without the rewards (penalties only) truthful reporting is not a BNE: some type "
              "gains by misreporting at every grid point (smallest best gain)", 0.0,
              s["min_gain_penalties"], kind="at_least"),
    ]


def fig2_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Fig 2: expected social cost vs eta with the mechanism (the learned truthful BNE) and
    without prices (the selfish BNE), against the optimum."""
    sel = rows[rows["round"].isna()]
    wide = sel.pivot_table(index=["eta", "population"], columns="metric", values="value",
                           dropna=False).reset_index()
    table = wide.groupby("eta")[["expected_social_cost", "selfish_social_cost",
                                 "optimal_social_cost"]].mean().reset_index()
    return {"table": table.to_dict(orient="records"),
            "mechanism_reaches_optimum": bool(np.allclose(
                table["expected_social_cost"], table["optimal_social_cost"], rtol=1e-6)),
            "mechanism_lowers_cost": bool((table["expected_social_cost"]
                                           <= table["selfish_social_cost"]).all())}


def fig2_claims(s: Mapping[str, Any]) -> list[Claim]:
    return [Claim("Fig 2: with the mechanism the expected social cost is the optimum at every "
                  "eta", True, s["mechanism_reaches_optimum"], kind="true"),
            Claim("Fig 2: the mechanism lowers the social cost at every eta", True,
                  s["mechanism_lowers_cost"], kind="true")]


_BAYES = {"config_type": BayesConfig, "run_unit": bne_unit, "source": "pricing-fl-noise"}

register(Experiment(
    name="pricing-bne",
    summarize=bne_summary,
    claims=bne_claims,
    plot=figure(FIGURES, "pricing_bne"),
    grid={"eta": [0.2, 0.5, 0.8], "alpha_L": [0.1, 0.25], "alpha_H": [0.5, 0.75]},
    defaults={"N": 20},
    paper={"N": 100, "eta": [0.1, 0.3, 0.5, 0.7, 0.9], "alpha_L": [0.05, 0.15, 0.25],
           "alpha_H": [0.5, 0.75, 0.9]},
    populations=1,
    table_caption="Per (eta, alpha_L, alpha_H): learned truthfulness (1 = truthful), distance "
                  "of the learned noise to the optimum, the derived constants, and the best "
                  "misreport's gain with the mechanism (<= 0: truthful is a BNE), with penalties "
                  "only, and without prices.",
    **_BAYES,
))

register(Experiment(
    name="pricing-fig2",
    summarize=fig2_summary,
    claims=fig2_claims,
    plot=figure(FIGURES, "pricing_fig2"),
    grid={"eta": [0.1, 0.3, 0.5, 0.7, 0.9]},
    defaults={"N": 20},
    paper={"N": 100, "eta": [round(0.1 * k, 1) for k in range(1, 10)]},
    populations=1,
    table_caption="Per eta: expected social cost at the learned truthful BNE with the "
                  "mechanism, at the selfish BNE without prices, and at the optimum.",
    **_BAYES,
))


def training_unit(config: TrainingConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One federated training run: loss, gap to the optimum and test accuracy per round; at
    the end the test accuracy (per sample, for pooled standard errors), the loss and eq (9)'s
    bound on the gap."""
    model = FederatedTrainingModel(config, seed)
    try:
        model.run()
    finally:
        model.close()
    with one_thread():  # test accuracy summed in the same order on any backend
        correct = model.test_correct()
    path = model.results().melt(id_vars="round", var_name="metric")
    theory = model.predicted()
    final = pd.DataFrame([*mean_rows("test_accuracy", correct, np.nan),
                          {"metric": "final_loss", "value": model.loss()},
                          {"metric": "final_gap", "value": model.loss() - model.loss_star},
                          {"metric": "bound", "value": theory["bound"]}])
    return pd.concat([path, final], ignore_index=True).assign(method=config.aggregation).astype(
        {"round": "Int64"})


def training_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Accuracy (pooled SE) and loss per aggregation rule and noise spread; the gap against
    eq (9)'s bound."""
    by = ["sigma_high"] if "sigma_high" in rows.columns else []
    acc = pooled(rows.rename(columns={"aggregation": "_rule"}), "test_accuracy", by)
    final = rows[rows["metric"].isin(["final_loss", "final_gap", "bound"])]
    extra = final.pivot_table(index=[*by, "method"], columns="metric", values="value",
                              aggfunc="mean").reset_index()
    table = acc.drop(columns="test_accuracy_predicted").merge(extra, on=[*by, "method"])
    worst = table[table[by[0]] == table[by[0]].max()] if by else table
    wide = table.pivot_table(index=by or None, columns="method",
                             values=["test_accuracy", "test_accuracy_se"]) if by else None
    mle_ok = None  # not compared: one rule ran
    if wide is not None and {"mle", "mean"} <= set(table["method"]):
        gap = wide["test_accuracy"]["mle"] - wide["test_accuracy"]["mean"]
        se = np.sqrt(wide["test_accuracy_se"]["mle"] ** 2 + wide["test_accuracy_se"]["mean"] ** 2)
        mle_ok = bool((gap >= -3 * se).all())
    return {"table": table.to_dict(orient="records"),
            "accuracy": {r.method: r.test_accuracy for r in worst.itertuples()},
            "accuracy_se": {r.method: r.test_accuracy_se for r in worst.itertuples()},
            "loss": {r.method: r.final_loss for r in worst.itertuples()},
            "mle_no_worse_than_mean": mle_ok,
            "gap_within_bound": bool((table["final_gap"] <= table["bound"]).all())}


def training_claims(s: Mapping[str, Any]) -> list[Claim]:
    compared = s["mle_no_worse_than_mean"] is not None
    return [Claim("Proposition 1: the MLE rule trains no worse than the mean at every noise "
                  "spread (test accuracy, 3 SE of the difference)", True,
                  s["mle_no_worse_than_mean"], kind="true",
                  inapplicable=None if compared else "one aggregation rule ran: nothing to "
                  "compare (sweep aggregation=[\"mle\", \"mean\"] and sigma_high)"),
            Claim("eq (9): the loss gap F(w^T) - F(w*) stays within the bound at every point",
                  True, s["gap_within_bound"], kind="true")]


register(Experiment(
    name="pricing-training",
    config_type=TrainingConfig,
    run_unit=training_unit,
    summarize=training_summary,
    claims=training_claims,
    plot=figure(FIGURES, "training_curves"),
    grid={"aggregation": ["mle", "mean"], "sigma_high": [0.01, 0.1, 0.3, 1.0]},
    defaults={"N": 10, "rounds": 30},
    paper={"N": 100, "rounds": 30, "populations": 5},
    populations=2,
    source="pricing-fl-noise",
    table_caption="Per noise spread (half the clients at sigma_low = 0.01, half at sigma_high) "
                  "and rule: test accuracy with its pooled SE, final loss, gap to the optimum "
                  "and eq (9)'s bound on it.",
))
