"""Experiments of series privacy-budget allocation (Bai et al.,
``papers/budget-allocation-series.txt``): Table 2's total noise, Tables 3-5's ``U_s``
intervals, DP k-means (Figs 10-14), the collusion attack against each protection, and
analysts who learn their strategy."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim, z_threshold
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames.environments.budget_analysts import AnalystConfig, AnalystModel
from privgames.environments.budget_queries import (
    CollusionConfig,
    CollusionModel,
    NoiseConfig,
    round_mse,
)
from privgames.environments.config import Footprint, check_int
from privgames.environments.dp_kmeans import DPKMeansModel, KMeansConfig
from privgames.environments.kmeans_data import load_points
from privgames.mechanisms.budget import (
    SQRT2,
    calibrate,
    compound,
    expected_mse,
    taylor,
    taylor_t,
    us_bounds,
)

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

SOURCE = "budget-allocation-series"

# --- Table 2 -------------------------------------------------------------------------------------
#: The total budget Table 2 is printed for.
TABLE2_EPSILON = 1.0
#: Table 2 as printed: (strategy, N) -> mean total squared noise over l = 100 rounds.
TABLE2 = {("avg", 20): 1.53e4, ("avg", 50): 2.56e5, ("avg", 100): 2.08e6,
          ("geo", 20): 2.14e4, ("geo", 50): 3.26e5, ("geo", 100): 2.54e6,
          ("bl-taylor", 20): 3.03e4, ("bl-taylor", 50): 5.96e5, ("bl-taylor", 100): 5.26e6,
          ("ac-geo", 20): 1.63e4, ("ac-geo", 50): 2.88e5, ("ac-geo", 100): 2.20e6,
          ("ac-bl-taylor", 20): 1.67e4, ("ac-bl-taylor", 50): 3.00e5,
          ("ac-bl-taylor", 100): 3.04e6}


def round_mse_sd(budgets: np.ndarray) -> float:
    """Standard deviation of one round's total squared Laplace noise: ``Var(X^2) = 20 b^4``
    for ``X ~ Lap(b)``, ``b = 1/epsilon_i``, summed over the independent queries."""
    return math.sqrt(float(np.sum(20.0 / budgets**4)))


def noise_unit(config: NoiseConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Each round's total squared noise (eq 37), pooled: ``mse`` with ``_var``, ``_n`` and
    ``mse_predicted`` = ``sum_i 2 / epsilon_i^2``."""
    b = config.budgets()
    rows = mean_rows("mse", round_mse(config, seed), float(expected_mse(b)))
    rows.append({"metric": "round_sd_exact", "value": round_mse_sd(b)})
    return pd.DataFrame(rows).assign(method=config.strategy, epsilon=config.epsilon)


def noise_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per (N, strategy): simulated MSE with pooled SE, the expectation, their z-score, and the
    printed Table 2 value with its z-score (SE of a mean of the paper's l = 100 rounds)."""
    table = pooled(rows, "mse", ["N"]).rename(columns={"method": "strategy",
                                                      "mse_predicted": "expected_mse"})
    sd = rows[rows["metric"] == "round_sd_exact"].groupby(["N", "method"])["value"].first()
    table["z"] = (table["mse"] - table["expected_mse"]) / table["mse_se"]
    table["printed"] = [TABLE2.get((s, int(n)), np.nan) for s, n in
                        zip(table["strategy"], table["N"], strict=True)]
    se_paper = np.array([sd[(n, s)] for n, s in zip(table["N"], table["strategy"],
                                                    strict=True)]) / 10.0
    table["printed_z"] = (table["printed"] - table["expected_mse"]) / se_paper
    table = table.sort_values(["N", "strategy"])
    return {"table": table.to_dict(orient="records"),
            "max_abs_z": float(table["z"].abs().max()),
            "max_abs_printed_z": float(table["printed_z"].abs().max()),
            "comparisons": len(table)}


def noise_claims(s: Mapping[str, Any]) -> list[Claim]:
    out = [Claim("Table 2: the simulated mean total noise is sum_i 2/eps_i^2 for every "
                 "strategy and N (largest |z|, 3 SE each)", 0.0, s["max_abs_z"], kind="z",
                 tolerance=3.0)]
    epsilon = s.get("parameters", {}).get("epsilon", TABLE2_EPSILON)
    why = (None if epsilon == TABLE2_EPSILON else f"Table 2 is printed for epsilon = "
           f"{TABLE2_EPSILON:g}; this run has epsilon = {epsilon:g}")
    out += [_printed_claim(r, why) for r in s["table"] if not np.isnan(r["printed"])]
    return out


def _printed_claim(r: Mapping[str, Any], inapplicable: str | None = None) -> Claim:
    """One printed Table 2 cell against the expectation, with the SE of the paper's own
    100-round mean."""
    se = abs(r["printed"] - r["expected_mse"]) / abs(r["printed_z"]) if r["printed_z"] else None
    return Claim(f"Table 2, {r['strategy']} at N={int(r['N'])}: the printed MSE is the "
                 "strategy's expectation sum_i 2/eps_i^2 (SE of the paper's 100-round mean)",
                 r["printed"], r["expected_mse"], se=se, erratum="Table 2 (printed MSEs)",
                 inapplicable=inapplicable)


register(Experiment(
    name="budget-noise",
    config_type=NoiseConfig,
    run_unit=noise_unit,
    summarize=noise_summary,
    claims=noise_claims,
    plot=figure(FIGURES, "budget_noise"),
    grid={"strategy": ["avg", "geo", "bl-taylor", "ac-geo", "ac-bl-taylor"], "N": [20, 50, 100]},
    defaults={"U_s": [[20, 30.0], [50, 95.0], [100, 200.0]], "rounds": 100},
    paper={"populations": 40},
    populations=4,
    source=SOURCE,
    table_caption="Per N and strategy: simulated mean total squared noise with pooled SE, the "
                  "expectation sum_i 2/eps_i^2, their z-score; the printed Table 2 value and "
                  "its z-score against the expectation (SE of one 100-round mean).",
))


# --- Tables 3-5 ----------------------------------------------------------------------------------
#: Tables 3-5 as printed: table -> (strategy, epsilon, {N: (low, high)}).
TABLES = {
    3: ("geo", 0.3, {3: (14.15, 22.40), 4: (18.86, 30.56), 5: (23.58, 38.70),
                     6: (28.29, 46.81), 7: (33.00, 54.93), 8: (37.72, 63.04),
                     9: (42.43, 71.14), 10: (47.15, 79.30), 11: (51.86, 87.36),
                     12: (56.57, 95.46), 13: (61.29, 103.56), 14: (66.00, 111.67)}),
    4: ("bl-taylor", 0.3, {3: (14.15, 17.67), 4: (18.86, 24.53), 5: (23.58, 31.93),
                           6: (28.29, 39.88), 7: (33.00, 48.50), 8: (37.72, 60.42),
                           9: (42.43, 72.62), 10: (47.15, 84.70), 11: (51.86, 96.46),
                           12: (56.57, 107.79), 13: (61.29, 118.70), 14: (66.00, 129.25)}),
    5: ("geo", 0.5, {5: (14.15, 23.21), 10: (28.29, 47.55), 15: (42.43, 71.86),
                     20: (56.57, 96.16), 25: (70.72, 120.47), 30: (84.86, 144.77),
                     35: (99.00, 169.07), 40: (113.14, 193.37), 45: (127.28, 217.67)}),
}
#: One unit in the last printed digit.
PRINTED = 0.01


@dataclass(frozen=True)
class BoundsConfig:
    """One of Tables 3-5, computed exactly, with the literal readings.

    Attributes:
        table: the paper's table (3, 4 or 5).
    """

    table: int = 3

    def __post_init__(self) -> None:
        check_int("table", self.table, min(TABLES), max(TABLES))

    def footprint(self) -> Footprint:
        return Footprint(1e5, 1e3, "table")


def bounds_unit(config: BoundsConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Per printed N: Lemma 3's interval as the tables compute it (``low``, ``high``), the
    literal Lemma 3 upper end ``sqrt(2) n / eps_k`` (``high_literal``) and, for the Taylor
    table, the upper end under the literal default ``t = e^(1 - floor(n/2))``
    (``high_floor_t``, NaN where that ``t`` is 1), beside the printed pair."""
    strategy, eps, printed = TABLES[config.table]
    rows = []
    for n, (p_low, p_high) in printed.items():
        low, high = us_bounds(strategy, n, eps)
        values = {"low": low, "high": high, "high_literal": high * n,
                  "printed_low": p_low, "printed_high": p_high}
        if strategy == "bl-taylor":
            t = taylor_t(n, "floor")
            values["high_floor_t"] = (SQRT2 / (eps * compound(calibrate(taylor(n, t)), 1.0).min())
                                      if t < 1 else np.nan)
        rows += [{"N": n, "metric": k, "value": float(v)} for k, v in values.items()]
    return pd.DataFrame(rows).assign(method=strategy, epsilon=eps)


def bounds_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """The tables side by side, and the largest gap between computed and printed ends."""
    wide = rows.pivot_table(index=["table", "method", "epsilon", "N"], columns="metric",
                            values="value").reset_index()
    wide["gap_low"] = (wide["low"] - wide["printed_low"]).abs()
    wide["gap_high"] = (wide["high"] - wide["printed_high"]).abs()
    out = {"table": wide.to_dict(orient="records")}
    for t, g in wide.groupby("table"):
        out[f"table{t}_max_gap"] = float(g[["gap_low", "gap_high"]].max().max())
        off = g[(g["gap_low"] > PRINTED) | (g["gap_high"] > PRINTED)]
        out[f"table{t}_cells_off"] = [int(n) for n in off["N"]]
        if "high_floor_t" in g and g["high_floor_t"].notna().any():  # the Taylor table only
            out[f"table{t}_floor_t_max_gap"] = float(
                (g["high_floor_t"] - g["printed_high"]).abs().max())
        out[f"table{t}_literal_max_gap"] = float(
            (g["high_literal"] - g["printed_high"]).abs().max())
    return out


def bounds_claims(s: Mapping[str, Any]) -> list[Claim]:
    out = []
    for t in sorted(TABLES):
        key = f"table{t}_max_gap"
        if key not in s:
            continue
        off = s[f"table{t}_cells_off"]
        out.append(Claim(f"Table {t}: the U_s interval [sqrt(2) n/eps, sqrt(2)/eps_min] to "
                         "the printed precision (largest gap)" + (
                             f"; cells off by more than 0.01: N={off}" if off else ""),
                         0.0, s[key], tolerance=PRINTED,
                         erratum="Table 3 (two printed upper ends)" if t == 3 else None))
        out.append(Claim(f"Table {t}: Lemma 3's literal upper end sqrt(2) n/eps_k (largest gap "
                         "to the printed one)", 0.0, s[f"table{t}_literal_max_gap"],
                         tolerance=PRINTED, erratum="Lemma 3 (upper end of U_s)"))
        if f"table{t}_floor_t_max_gap" in s:
            out.append(Claim(f"Table {t}: the literal Taylor default t = e^(1 - floor(n/2)) "
                             "(largest gap to the printed upper ends)", 0.0,
                             s[f"table{t}_floor_t_max_gap"], tolerance=PRINTED,
                             erratum="eq (16) (Taylor default t)"))
    return out


register(Experiment(
    name="budget-us-bounds",
    config_type=BoundsConfig,
    run_unit=bounds_unit,
    summarize=bounds_summary,
    claims=bounds_claims,
    plot=figure(FIGURES, "budget_us_bounds"),
    grid={"table": [3, 4, 5]},
    populations=1,
    source=SOURCE,
    table_caption="Per table and N: the interval as computed (low, high), Lemma 3's literal "
                  "upper end (high_literal), the upper end under the literal Taylor default "
                  "(high_floor_t), the printed pair and the gaps.",
))


# --- DP k-means ----------------------------------------------------------------------------------
def kmeans_unit(config: KMeansConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """``repetitions`` DP k-means runs: the score (``f1`` or ``nivc``) pooled, and its standard
    deviation over repetitions (Fig 14)."""
    model = DPKMeansModel(config, seed).run()
    scores = model.scores()
    name = model.score_name
    rows = mean_rows(name, scores, np.nan)
    rows.append({"metric": f"{name}_sd", "value": float(scores.std(ddof=1))
                 if scores.size > 1 else 0.0})
    return pd.DataFrame(rows).assign(method=config.method)


def kmeans_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """The data set's size (``points``, labelled ``clusters``, null when unlabelled); per method
    and total iterations the score with its pooled SE and SD; the best method at the largest
    iteration count, and each method's difference to AVG there (z)."""
    name = "f1" if (rows["metric"] == "f1").any() else "nivc"
    table = pooled(rows, name, ["iterations"]).drop(columns=f"{name}_predicted")
    sd = rows[rows["metric"] == f"{name}_sd"].groupby(["iterations", "method"])["value"].mean()
    table[f"{name}_sd"] = [sd[(i, m)] for i, m in zip(table["iterations"], table["method"],
                                                      strict=True)]
    sign = 1.0 if name == "f1" else -1.0  # higher F1, lower NIVC is better
    last = table[table["iterations"] == table["iterations"].max()].set_index("method")
    points, labels = load_points(params["data"])
    out = {"score": name, "points": int(points.shape[0]),
           "clusters": None if labels is None else int(labels.max()) + 1,
           "table": table.to_dict(orient="records"),
           "best_at_most_iterations": str((sign * last[name]).idxmax()),
           "iterations_max": int(table["iterations"].max())}
    if "avg" in last.index:
        diff = sign * (last[name] - last.loc["avg", name])
        se = np.sqrt(last[f"{name}_se"] ** 2 + last.loc["avg", f"{name}_se"] ** 2)
        out["better_than_avg_z"] = {m: float(diff[m] / se[m]) for m in last.index if m != "avg"}
    return out


#: What each data set's figures claim against AVG at the largest iteration count (section 7.2):
#: the methods that beat it and those it beats (judged by the z of the difference: beyond 3 on
#: the claimed side holds, beyond 3 on the other fails, in between is not resolved).
KMEANS_ORDERINGS = {
    "unbalance": ("Figs 10-11", ("flip-geo", "ac-flip-geo", "flip-taylor"),
                  ("bisection", "cormode", "bl-taylor")),
    "birch3": ("Fig 13", ("flip-geo", "ac-flip-geo", "flip-taylor"), ()),
}


def kmeans_claims(s: Mapping[str, Any]) -> list[Claim]:
    """The figures' orderings against AVG on the set they were drawn from (Figs 10-11 on
    Unbalance, Fig 13 on Birch3); none for a user's data set."""
    data = s["parameters"]["data"]
    if data not in KMEANS_ORDERINGS:
        return []
    figures, better, worse = KMEANS_ORDERINGS[data]
    z, n = s.get("better_than_avg_z", {}), s["iterations_max"]
    # The measurement is the z of the difference: 0 is the bound, 1 its standard error, so a
    # |z| under 3 separates neither side ("not resolved"), never a failure.
    out = [Claim(f"{figures} ({data}): {method} beats AVG at {n} iterations (z of the difference "
                 f"in {s['score']})", 0.0, z[method], se=1.0, kind="at_least",
                 erratum="Figs 10-13 (k-means orderings)")
           for method in better if method in z]
    out += [Claim(f"{figures} ({data}): {method} is worse than AVG at {n} iterations (z of the "
                  f"difference in {s['score']})", 0.0, z[method], se=1.0, kind="at_most")
            for method in worse if method in z]
    return out


register(Experiment(
    name="dp-kmeans",
    config_type=KMeansConfig,
    run_unit=kmeans_unit,
    summarize=kmeans_summary,
    claims=kmeans_claims,
    plot=figure(FIGURES, "budget_kmeans"),
    grid={"method": ["avg", "geo", "flip-geo", "ac-geo", "ac-flip-geo", "bisection", "cormode",
                     "bl-taylor", "flip-taylor", "flip-geo/perturb", "flip-geo/noisy-n"],
          "iterations": [2, 5, 8, 11, 14]},
    defaults={"data": "unbalance", "repetitions": 100},
    paper={"data": "birch3", "method": ["avg", "flip-geo", "ac-flip-geo", "flip-taylor"],
           "iterations": [5, 10, 15, 20, 25, 30, 35, 40, 45], "repetitions": 1000,
           "populations": 1},  # the paper's 1,000 runs per point
    populations=2,
    source=SOURCE,
    table_caption="Per total iterations and method: mean score over repetitions with pooled SE "
                  "and the standard deviation over repetitions (F1: higher is better; NIVC: "
                  "lower is better).",
))


# --- collusion -----------------------------------------------------------------------------------
def collusion_unit(config: CollusionConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """The attacked query's squared error per trial, pooled, against what the realised budgets
    predict (``attack_mse_predicted``); the same for one honest answer under AVG."""
    model = CollusionModel(config, seed).run()
    theory = model.predicted()
    rows = mean_rows("attack_mse", model.squared_error(), theory["attack_mse"])
    rows.append({"metric": "single_answer_mse_avg", "value": theory["single_answer_mse_avg"]})
    return pd.DataFrame(rows).assign(method=config.method)


def collusion_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per method: the attack's MSE (pooled SE) vs the budgets' prediction (z), and its ratio
    to the unprotected strategy's (> 1: the protection makes the attack less accurate)."""
    table = pooled(rows, "attack_mse")
    table["z"] = (table["attack_mse"] - table["attack_mse_predicted"]) / table["attack_mse_se"]
    table["strategy"] = table["method"].str.partition("/")[0]
    bare = table[~table["method"].str.contains("/")].set_index("strategy")["attack_mse"]
    table["vs_unprotected"] = [row.attack_mse / bare[row.strategy] if row.strategy in bare
                               else np.nan for row in table.itertuples()]
    protections = table[table["method"].str.contains("/")]
    return {"table": table.to_dict(orient="records"),
            "max_abs_z": float(table["z"].abs().max()),
            "comparisons": len(table),
            "protection_gain": {r.method: float(r.vs_unprotected)
                                for r in protections.itertuples()}}


def collusion_claims(s: Mapping[str, Any]) -> list[Claim]:
    out = [Claim("section 6.1: the coalition's pooled error is what the budgets predict, for "
                 "every strategy and protection (largest |z|)", 0.0, s["max_abs_z"], kind="z",
                 tolerance=z_threshold(s["comparisons"]))]
    gain = s["protection_gain"]
    for method, ratio in gain.items():
        if method.endswith("/random"):
            out.append(Claim(f"section 6.2: a random arrangement ({method}) makes the attack on "
                             "the most-budgeted query less accurate (MSE ratio to unprotected)",
                             1.0, ratio, kind="at_least"))
    return out


register(Experiment(
    name="budget-collusion",
    config_type=CollusionConfig,
    run_unit=collusion_unit,
    summarize=collusion_summary,
    claims=collusion_claims,
    plot=figure(FIGURES, "budget_collusion"),
    grid={"method": ["avg", "geo", "geo/random", "geo/perturb", "geo/noisy-n", "flip-geo",
                     "flip-geo/random", "flip-geo/perturb", "flip-geo/noisy-n", "bl-taylor",
                     "bl-taylor/random", "bl-taylor/perturb", "bl-taylor/noisy-n"]},
    paper={"trials": 20000, "populations": 5},
    populations=2,
    source=SOURCE,
    table_caption="Per method (strategy/protection): the attack's MSE on the most-budgeted "
                  "query with pooled SE, the budgets' prediction and z, and the ratio to the "
                  "unprotected strategy's attack MSE.",
))


# --- analysts ------------------------------------------------------------------------------------
def analysts_unit(config: AnalystConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Per round: the analysts' mean regret against the offline-best strategy (cumulative);
    at the end: the share whose favourite is the best, or within 3 offline SE of it."""
    model = AnalystModel(config, seed).run()
    theory = model.predicted()
    mean, se = theory["offline_utility"], theory["offline_se"]
    best = theory["best_arm"]
    regret = (mean[best] - mean[model.choices]).mean(axis=1)
    fav = model.favourites()
    near = mean[best] - mean[fav] <= 3.0 * np.sqrt(se[best] ** 2 + se[fav] ** 2)
    path = pd.DataFrame({"round": np.arange(1, config.rounds + 1), "metric": "regret",
                         "value": np.cumsum(regret)})
    final = [{"metric": "best_share", "value": float(np.mean(fav == best))},
             {"metric": "near_best_share", "value": float(np.mean(near))},
             {"metric": "total_regret", "value": float(regret.sum())},
             {"metric": "late_regret_per_round",
              "value": float(regret[len(regret) // 2:].mean())},
             {"metric": "early_regret_per_round",
              "value": float(regret[: max(len(regret) // 2, 1)].mean())}]
    final += [{"metric": "offline_utility", "arm": s, "value": float(m)}
              for s, m in zip(config.strategies, mean, strict=True)]
    final += [{"metric": "favourite_share", "arm": s, "value": float(np.mean(fav == a))}
              for a, s in enumerate(config.strategies)]
    return pd.concat([path, pd.DataFrame(final)], ignore_index=True).assign(
        method="thompson", best=config.strategies[best]).astype({"round": "Int64"})


def analysts_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per task: the offline-best strategy, the share of analysts who end with it (or within
    3 offline SE of it), the regret, and the strategies they end with."""
    final = rows[rows["round"].isna()]
    out: dict[str, Any] = {"tasks": {}}
    for task, g in final.groupby("task"):
        scalar = g[g["arm"].isna()].groupby("metric")["value"].mean()
        fav = g[g["metric"] == "favourite_share"].groupby("arm")["value"].mean()
        util = g[g["metric"] == "offline_utility"].groupby("arm")["value"].mean()
        out["tasks"][task] = {"offline_best": str(g["best"].mode().iloc[0]),
                              "best_share": float(scalar["best_share"]),
                              "near_best_share": float(scalar["near_best_share"]),
                              "analysts": int(params["analysts"]) * g["population"].nunique(),
                              "total_regret": float(scalar["total_regret"]),
                              "early_regret_per_round": float(scalar["early_regret_per_round"]),
                              "late_regret_per_round": float(scalar["late_regret_per_round"]),
                              "favourites": fav.round(3).to_dict(),
                              "offline_utility": util.round(5).to_dict()}
    return out


def analysts_claims(s: Mapping[str, Any]) -> list[Claim]:
    out = []
    for task, r in s["tasks"].items():
        # the share is measured on a sample of analysts: its binomial SE at the claimed 0.9
        out.append(Claim(f"{task}: at least 90% of analysts end with the offline-best strategy "
                         f"({r['offline_best']}) or one within 3 offline SE of it (share)", 0.9,
                         r["near_best_share"], se=math.sqrt(0.9 * 0.1 / r["analysts"]),
                         kind="at_least"))
        out.append(Claim(f"{task}: learning lowers the per-round regret (second half vs first)",
                         r["early_regret_per_round"], r["late_regret_per_round"],
                         kind="at_most"))
    return out


register(Experiment(
    name="budget-analysts",
    config_type=AnalystConfig,
    run_unit=analysts_unit,
    summarize=analysts_summary,
    claims=analysts_claims,
    plot=figure(FIGURES, "budget_analysts"),
    grid={"task": ["sum", "kmeans"]},
    defaults={"strategies": ["avg", "geo", "bl-taylor", "ac-geo", "ac-bl-taylor", "flip-geo",
                             "bisection"], "rounds": 600},
    # 50 analysts as two populations of 25 (independent learners: a population is a batch),
    # each ranked offline by its own 1,000 runs per strategy: the same work as one unit of 50
    # with 2,000, in two units that run side by side
    paper={"rounds": 1000, "analysts": 25, "offline_repetitions": 1000, "populations": 2},
    populations=1,
    source=SOURCE,
))
