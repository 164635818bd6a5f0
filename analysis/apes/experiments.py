"""Experiments of APES / S-APES (Liu et al., ``papers/apes-shuffle-clip-laplace.txt``): the
Table 3 analogue, the bounds vs n (Fig 2a), accuracy vs the clip bound (Fig 3a), post- vs
random sparsification (Fig 3b), and an empirical privacy audit."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames.environments.apes import APESConfig, APESModel
from privgames.environments.apes_audit import AuditConfig, audit
from privgames.environments.config import Footprint, check_choice, check_int, check_real
from privgames.environments.streams import generator
from privgames.mechanisms.shuffle import (
    DISTRIBUTIONS,
    baseline_bound,
    delta_central,
    eon_bound,
    erlingsson_closed,
    personalized_budgets,
)

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

SOURCE = "apes-shuffle-clip-laplace"
#: Table 3's central epsilons (Uniform2, n = 10,000, delta_s = 1e-8).
TABLE3 = {"baseline": 0.069, "eon": 0.057}


# --- federated training ---------------------------------------------------------------------
def training_unit(config: APESConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Accuracy and the gradient estimate's error per round; at the end the test accuracy
    (per sample, pooled) and the run's privacy accounting."""
    model = APESModel(config, seed).run()
    path = model.results().melt(id_vars="round", var_name="metric")
    final = mean_rows("accuracy", model.test_correct(), np.nan)
    final += [{"metric": k, "value": float(v)} for k, v in model.predicted().items()]
    return pd.concat([path, pd.DataFrame(final)], ignore_index=True).assign(
        method=config.framework).astype({"round": "Int64"})


PRIVACY = ("eps_central", "delta_central", "eps_central_baseline", "eps_central_baseline_closed",
           "eps_central_eon", "eps_central_eon_closed", "eps_user_local_min",
           "eps_user_local_max", "eps_user_local_paper_min", "eps_user_local_paper_max",
           "eps_user_central")


def training_table(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group and method: pooled accuracy with SE, the mean of each privacy number."""
    acc = pooled(rows, "accuracy", by).drop(columns="accuracy_predicted")
    final = rows[rows["round"].isna() & rows["metric"].isin(PRIVACY)]
    privacy = final.pivot_table(index=[*by, "method"], columns="metric", values="value",
                                aggfunc="mean").reset_index()
    return acc.merge(privacy, on=[*by, "method"])


def training_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """The Table 3 analogue: per framework accuracy (pooled SE) and every privacy number."""
    table = training_table(rows, [])
    out: dict[str, Any] = {"table": table.to_dict(orient="records")}
    for key in ("accuracy", "accuracy_se", "eps_central", "eps_central_baseline",
                "eps_central_baseline_closed", "eps_central_eon", "eps_central_eon_closed",
                "eps_user_central"):
        out[key] = {r["method"]: r[key] for r in out["table"]}
    return out


def training_claims(s: Mapping[str, Any]) -> list[Claim]:
    acc, se = s["accuracy"], s["accuracy_se"]
    out = []
    if {"apes", "unis"} <= set(acc):
        gap = acc["apes"] - acc["unis"]
        out.append(Claim("Table 3: APES (Clip-Laplace, calibrated) is more accurate than UniS "
                         "(Laplace) under the same budgets (difference, >= -3 SE)", 0.0, gap,
                         se=math.hypot(se["apes"], se["unis"]), kind="at_least"))
    if "apes" in acc:
        eon, base = s["eps_central_eon"]["apes"], s["eps_central_baseline"]["apes"]
        out.append(Claim("Theorem 4 vs eq (2): the EoN central epsilon is below the baseline's "
                         "(numerical forms)", base, eon, kind="at_most"))
    if {"apes", "s-apes"} <= set(acc):
        out.append(Claim("Proposition 1: S-APES's user-level central epsilon is below APES's",
                         s["eps_user_central"]["apes"], s["eps_user_central"]["s-apes"],
                         kind="at_most"))
    if {"apes", "ldp-min"} <= set(acc):
        out.append(Claim("Table 3: APES is more accurate than LDP-Min (difference, >= -3 SE)",
                         0.0, acc["apes"] - acc["ldp-min"],
                         se=math.hypot(se["apes"], se["ldp-min"]), kind="at_least"))
    return out


_NON_PRIVATE = "the Non-Private framework adds no noise: its privacy loss is unbounded"
_TRAINING = {"config_type": APESConfig, "run_unit": training_unit, "source": SOURCE,
             "infinite": dict.fromkeys(("eps_central", "eps_user_central"), _NON_PRIVATE)}

register(Experiment(
    name="apes",
    summarize=training_summary,
    claims=training_claims,
    plot=figure(FIGURES, "apes_training"),
    grid={"framework": ["non-private", "ldp-min", "pldp", "unis", "apes", "s-apes"]},
    paper={"n": 10_000, "populations": 3},
    populations=2,
    table_caption="Per framework: test accuracy (pooled SE), central epsilon (dimension "
                  "level; the baseline and EoN bounds in both forms), local and central "
                  "user-level epsilons.",
    **_TRAINING,
))


def sweep_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Accuracy per swept parameter and method."""
    by = [k for k in ("C", "b_ratio", "sparsify") if k in rows.columns]
    table = training_table(rows, by)
    return {"table": table[[*by, "method", "accuracy", "accuracy_se"]].to_dict(
        orient="records")}


def clip_claims(s: Mapping[str, Any]) -> list[Claim]:
    t = pd.DataFrame(s["table"])
    top = t[t["C"] == t["C"].max()].set_index("method")
    out = []
    if {"apes", "unis"} <= set(top.index):
        out.append(Claim(f"Fig 3(a): at the largest clip bound (C = {t['C'].max()}) "
                         "Clip-Laplace (APES) is more accurate than Laplace (UniS)", 0.0,
                         top.loc["apes", "accuracy"] - top.loc["unis", "accuracy"],
                         se=math.hypot(top.loc["apes", "accuracy_se"],
                                       top.loc["unis", "accuracy_se"]), kind="at_least"))
        spread = t.groupby("method")["accuracy"].agg(lambda a: a.max() - a.min())
        out.append(Claim("Fig 3(a): Clip-Laplace's accuracy varies less with C than Laplace's "
                         "(range over C)", spread["unis"], spread["apes"], kind="at_most"))
    return out


register(Experiment(
    name="apes-clip",
    summarize=sweep_summary,
    claims=clip_claims,
    plot=figure(FIGURES, "apes_sweep", "C", "clip bound C", True),
    grid={"C": [0.02, 0.1, 0.5, 1.0], "framework": ["apes", "unis"]},
    paper={"n": 10_000, "C": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0], "populations": 3},
    populations=1,
    table_caption="Per clip bound and mechanism: test accuracy with pooled SE.",
    **_TRAINING,
))


def sparsify_claims(s: Mapping[str, Any]) -> list[Claim]:
    t = pd.DataFrame(s["table"]).pivot_table(index="b_ratio", columns="sparsify",
                                             values=["accuracy", "accuracy_se"])
    gap = t["accuracy"]["post"] - t["accuracy"]["random"]
    se = np.hypot(t["accuracy_se"]["post"], t["accuracy_se"]["random"])
    return [Claim("Fig 3(b): post-sparsification is at least as accurate as random "
                  "sparsification at every ratio (smallest difference, -3 SE allowed)", 0.0,
                  float(gap.min()), se=float(se[gap.idxmin()]), kind="at_least")]


register(Experiment(
    name="apes-sparsify",
    summarize=sweep_summary,
    claims=sparsify_claims,
    plot=figure(FIGURES, "apes_sweep", "b_ratio", "sparsification ratio b/d", False),
    grid={"b_ratio": [0.05, 0.1, 0.2], "sparsify": ["post", "random"]},
    defaults={"framework": "s-apes"},
    paper={"n": 10_000, "b_ratio": [0.02, 0.05, 0.1, 0.15, 0.2], "populations": 3},
    populations=1,
    table_caption="Per ratio b/d and sparsification: test accuracy with pooled SE.",
    **_TRAINING,
))


# --- bounds ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundsConfig:
    """Central-epsilon bounds of one draw of personalized budgets.

    Attributes:
        n: users.
        distribution: of their budgets (Table 2).
        delta_s: the delta of the central bound.
    """

    n: int = 10_000
    distribution: str = "uniform2"
    delta_s: float = 1e-8

    def __post_init__(self) -> None:
        check_int("n", self.n, 2, 10**7)
        check_choice("distribution", self.distribution, tuple(DISTRIBUTIONS))
        check_real("delta_s", self.delta_s, 0.0, 1.0, low_open=True, high_open=True)

    def footprint(self) -> Footprint:
        return Footprint(200.0 * self.n, 50.0 * self.n, "n")


def bounds_unit(config: BoundsConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Every bound on one draw of budgets: baseline (eq 2) and EoN (Theorem 4) in both forms,
    Erlingsson'19's closed form, and ``delta^c``."""
    eps = personalized_budgets(config.distribution, config.n, generator(seed))
    d = config.delta_s
    values = {"baseline/numerical": baseline_bound(eps, d), "baseline/closed":
              baseline_bound(eps, d, "closed"), "eon/numerical": eon_bound(eps, d),
              "eon/closed": eon_bound(eps, d, "closed"),
              "erlingsson19/closed": erlingsson_closed(eps, d)}
    rows = [{"method": k, "metric": "eps_central", "value": v} for k, v in values.items()]
    rows += [{"method": "eon/closed", "metric": "delta_central", "value":
              delta_central(eps, d)},
             {"method": "local", "metric": "eps_max", "value": float(eps.max())}]
    return pd.DataFrame(rows)


def bounds_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per (distribution, n) and bound: the central epsilon; Table 3's cell beside its
    printed value when it is on the grid."""
    eps = rows[rows["metric"] == "eps_central"]
    table = eps.groupby(["distribution", "n", "method"])["value"].mean().unstack().reset_index()
    out: dict[str, Any] = {"table": table.to_dict(orient="records")}
    eon_below = (table["eon/numerical"] <= table["baseline/numerical"] + 1e-12).all()
    out["eon_below_baseline"] = bool(eon_below)
    cell = table[(table["distribution"] == "uniform2") & (table["n"] == 10_000)]
    if len(cell) and params["delta_s"] == 1e-8:
        r = cell.iloc[0]
        out["table3"] = {f"{bound}_{form}": float(r[f"{bound}/{form}"])
                         for bound in ("baseline", "eon") for form in ("numerical", "closed")}
    decreasing = table.sort_values("n").groupby("distribution")["eon/numerical"].apply(
        lambda v: bool(np.all(np.diff(v.to_numpy()) <= 1e-12)))
    out["eon_decreasing_in_n"] = bool(decreasing.all())
    return out


def bounds_claims(s: Mapping[str, Any]) -> list[Claim]:
    out = [Claim("Fig 2(a): the EoN bound is below the baseline's at every n and distribution "
                 "(numerical forms)", True, s["eon_below_baseline"], kind="true"),
           Claim("Fig 2(a): the central epsilon falls as n grows (EoN, numerical)", True,
                 s["eon_decreasing_in_n"], kind="true")]
    t3 = s.get("table3")
    if t3:
        for bound in ("baseline", "eon"):
            printed = TABLE3[bound]
            out.append(Claim(f"Table 3 ({bound}, Uniform2, n = 10,000, delta_s = 1e-8): the "
                             "numerical form, to two significant digits", printed,
                             round(t3[f"{bound}_numerical"], 3), tolerance=5e-4))
            out.append(Claim(f"Table 3 ({bound}): the printed closed form gives the printed "
                             "value to two significant digits", printed,
                             round(t3[f"{bound}_closed"], 3), tolerance=5e-4,
                             erratum="Table 3 (central epsilons: numerical, not closed)"))
    return out


register(Experiment(
    name="apes-bounds",
    config_type=BoundsConfig,
    run_unit=bounds_unit,
    summarize=bounds_summary,
    claims=bounds_claims,
    plot=figure(FIGURES, "apes_bounds"),
    grid={"n": [1_000, 10_000, 100_000], "distribution": ["uniform1", "uniform2", "gauss2",
                                                         "mixgauss2"]},
    paper={"n": [1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000],
           "distribution": list(DISTRIBUTIONS)},
    populations=1,
    source=SOURCE,
    table_caption="Per distribution and n: central epsilon of each bound (numerical: the clone "
                  "reduction evaluated exactly; closed: the printed formula, the trivial max "
                  "eps outside its range).",
))


# --- audit ----------------------------------------------------------------------------------------
def audit_unit(config: AuditConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """The distinguishing attack beside the upper bounds for the same budgets."""
    result = audit(config, seed)
    eps = result.pop("budgets")
    lo, hi = result.pop("audit_eps_lower_ci")
    values = {**result, "audit_eps_upper": hi,
              "eon_numerical": eon_bound(eps, config.delta_s),
              "eon_closed": eon_bound(eps, config.delta_s, "closed"),
              "baseline_numerical": baseline_bound(eps, config.delta_s),
              "eps_max": float(eps.max())}
    return pd.DataFrame([{"metric": k, "value": float(v)} for k, v in values.items()]).assign(
        method="sum-threshold")


def audit_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per n: the certified lower bound and its interval against the upper bounds, and the
    tightness (lower / EoN upper)."""
    wide = rows.pivot_table(index="n", columns="metric", values="value").reset_index()
    wide["tightness"] = wide["audit_eps_lower"] / wide["eon_numerical"]
    return {"table": wide.to_dict(orient="records"),
            "audit_eps_lower": {int(r.n): r.audit_eps_lower for r in wide.itertuples()},
            "audit_eps_lower_ci": {int(r.n): [r.audit_eps_lower, r.audit_eps_upper]
                                   for r in wide.itertuples()},
            "max_excess_over_eon": float((wide["audit_eps_lower"]
                                          - wide["eon_numerical"]).max()),
            "max_tightness": float(wide["tightness"].max())}


def audit_claims(s: Mapping[str, Any]) -> list[Claim]:
    return [Claim("the audit's certified lower bound never exceeds the EoN upper bound "
                  f"(largest excess; tightness up to {s['max_tightness']:.2f})", 0.0,
                  s["max_excess_over_eon"], kind="at_most")]


register(Experiment(
    name="apes-audit",
    config_type=AuditConfig,
    run_unit=audit_unit,
    summarize=audit_summary,
    claims=audit_claims,
    plot=figure(FIGURES, "apes_audit"),
    grid={"n": [10, 100, 1000]},
    defaults={"trials": 50_000},
    paper={"trials": 1_000_000},
    populations=1,
    source=SOURCE,
    table_caption="Per n: the attack's certified lower bound (CP lower end), its point "
                  "estimate and upper end, the EoN (both forms) and baseline upper bounds, "
                  "and tightness = lower / EoN.",
))
