"""Experiments of the PPSP ring (Liu et al.): Example 2, bounds, epsilon, trade-off, attacks,
nodes learning their noise."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim, z_threshold
from privgames.analysis.experiments import Experiment, figure, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames.environments.ppsp_ring import (
    EXAMPLE2_SECRETS,
    NoiseGameConfig,
    PPSPConfig,
    PPSPModel,
    trajectory_frame,
)
from privgames.environments.streams import generator, spawn
from privgames.mechanisms import ppsp

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

#: Trajectories keep about this many steps.
TRAJECTORY_POINTS = 300


def ring_unit(config: PPSPConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population (``replications`` rings): trajectory, final error and the theory.

    Rows: per kept step ``error`` (mean over replications), ``sum_drift``, ``target`` (the
    active nodes' secret sum) and, on a static Gaussian ring, ``error_predicted`` (exact), and for
    replication 0 each node's estimate ``y`` (``node`` column); at the end ``final_error``
    (with ``_var``, ``_n``, ``_predicted``: the exact formula on a static Gaussian ring),
    ``sum_preserved``, ``epsilon``, ``utility_bound``, ``variance_bound``.
    """
    model = PPSPModel(config, seed).run()
    run = model.record()
    frame = trajectory_frame(run)
    events = [e for e in (config.leave_at, config.join_at) if e is not None]
    around = [np.arange(e, min(e + 4 * config.n, config.K)) for e in events]  # the spikes
    keep = np.unique(np.concatenate([np.linspace(0, config.K - 1, TRAJECTORY_POINTS).astype(int),
                                     _phase_ends(config), *around]))
    kept = frame.iloc[keep]
    rows = [kept.melt(id_vars="step", value_vars=["error", "sum_drift", "target"],
                      var_name="metric")]
    if run.estimates is not None and config.n <= 50:
        y = pd.DataFrame(run.estimates[keep], columns=range(run.estimates.shape[1]))
        y["step"] = keep + 1
        rows.append(y.melt(id_vars="step", var_name="node").dropna().assign(metric="y"))
        # (a node off the ring has no estimate: its rows are absent, and plots leave a gap)
    static = config.leave_at is None and config.join_at is None
    exact_applies = static and config.noise == "gaussian" and config.protocol == "sync"
    exact = model.exact_error(config.K) if exact_applies else math.nan
    if exact_applies and config.n <= 50:
        steps = kept["step"].to_numpy()
        rows.append(pd.DataFrame({"step": steps, "metric": "error_predicted",
                                  "value": [model.exact_error(int(s)) for s in steps]}))
    theory = model.predicted()
    final = mean_rows("final_error", run.error[-1], exact) + [
        {"metric": "sum_preserved", "value": float(np.allclose(run.sums, run.targets[:, None],
                                                                rtol=1e-9, atol=1e-9))},
        *({"metric": k, "value": theory[k]} for k in ("epsilon", "epsilon_paper",
                                                        "utility_bound", "variance_bound"))]
    rows.append(pd.DataFrame(final + [{"metric": "event", "value": float(e)} for e in events])
                .assign(step=config.K))
    return pd.concat(rows, ignore_index=True).assign(method=config.protocol)


def _phase_ends(config: PPSPConfig) -> np.ndarray:
    events = [e for e in (config.leave_at, config.join_at) if e is not None]
    return np.array([e - 1 for e in events if e > 0] + [config.K - 1], dtype=int)


def ring_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Final error vs the theory; with leave/join, the error and sum at each phase's end."""
    table = pooled(rows, "final_error").iloc[0]
    final = rows[rows["step"] == params["K"]]

    def first(metric: str) -> float:
        return float(final.loc[final["metric"] == metric, "value"].iloc[0])

    summary = {"final_error": table["final_error"], "final_error_se": table["final_error_se"],
               "final_error_predicted": table["final_error_predicted"],
               "sum_preserved": bool(rows.loc[rows["metric"] == "sum_preserved", "value"].min()
                                     == 1.0),
               "epsilon": first("epsilon"), "epsilon_paper": first("epsilon_paper"),
               "utility_bound": first("utility_bound"),
               "variance_bound": first("variance_bound")}
    config = PPSPConfig(**{k: v for k, v in params.items()
                           if k in {f.name for f in dataclasses.fields(PPSPConfig)}})
    ends = _phase_ends(config) + 1
    if len(ends) > 1:
        err = rows[rows["metric"] == "error"].groupby("step")["value"].mean()
        y = rows[rows["metric"] == "y"]
        drift = rows[rows["metric"] == "sum_drift"].set_index("step")["value"]
        summary["phase_end_steps"] = ends.tolist()
        summary["phase_end_errors"] = [float(err[s]) for s in ends]
        summary["phase_targets"] = [float(_target(rows, s)) for s in ends]
        if not y.empty:  # the nodes' own estimates (replication 0 of each population)
            at = [y[y["step"] == s]["value"] for s in ends]
            summary["phase_estimates_median"] = [float(v.median()) for v in at]
            summary["phase_estimates_max_deviation"] = [
                float((v - t).abs().max()) for v, t in zip(at, summary["phase_targets"],
                                                           strict=True)]
        summary["phase_sum_drift"] = [float(drift[s].max()) for s in ends]
    return summary


def _target(rows: pd.DataFrame, step: int) -> float:
    return float(rows[(rows["metric"] == "target") & (rows["step"] == step)]["value"].iloc[0])


def epsilon_unit(config: PPSPConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Theorem 3's budget beside the privacy loss measured on simulated Laplace transcripts:
    the largest log-likelihood ratio between delta-adjacent secrets of node 0, the accuracy of
    the likelihood-ratio test against the epsilon-DP bound, and the mean squared error of the
    best linear estimates of the global eavesdropper (all nodes) and of node 0's two colluding
    neighbours, against their predicted variance."""
    model = PPSPModel(dataclasses.replace(config, noise="laplace"), seed, record_messages=True)
    model.run()
    stats, std = model.transcript_statistics()
    s0 = model.secrets[0]
    loss_a = ppsp.privacy_loss(stats[:, :, :1], std[:, :1], s0, s0 + config.delta)[:, 0]
    loss_b = ppsp.privacy_loss(stats[:, :, :1] + config.delta, std[:, :1], s0,
                               s0 + config.delta)[:, 0]
    correct = np.concatenate([loss_a > 0, loss_b <= 0]).astype(float)
    theory = model.predicted()
    eps = theory["epsilon"]
    estimate, var = ppsp.best_linear_estimate(stats, std)
    sq = (estimate - model.secrets[:config.n]) ** 2
    messages = np.moveaxis(model.record().messages, 0, 1)  # node 0's neighbours: n-1 and 1
    view = ppsp.neighbour_statistics(messages[:, :, -1:], messages[:, :, :1])
    local, local_var = ppsp.best_linear_estimate(view, std[:, :1])
    rows = [*mean_rows("accuracy", correct, ppsp.distinguishing_accuracy_bound(eps), "bound"),
            *mean_rows("eavesdropper_mse", sq.mean(axis=1), float(var.mean())),
            *mean_rows("neighbours_mse", (local[:, 0] - s0) ** 2, float(local_var[0])),
            {"metric": "epsilon", "value": eps},
            {"metric": "epsilon_paper", "value": theory["epsilon_paper"]},
            {"metric": "max_privacy_loss", "value": float(loss_a.max())}]
    return pd.DataFrame(rows).assign(method=config.schedule)


def epsilon_summary(by: list[str]):
    """Budget, measured privacy loss and attack accuracy per grid point."""

    def summarize(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
        table = pooled(rows, "accuracy", by, theory="bound")
        for name in ("eavesdropper_mse", "neighbours_mse"):
            table = table.merge(pooled(rows, name, by), on=[*by, "method"])
        z = pd.concat([(table[m] - table[f"{m}_predicted"]).abs() / table[f"{m}_se"]
                       for m in ("eavesdropper_mse", "neighbours_mse")])
        for metric, how in (("epsilon", "first"), ("epsilon_paper", "first"),
                            ("max_privacy_loss", "max")):
            table = table.merge(rows[rows["metric"] == metric].groupby([*by, "method"])["value"]
                                .agg(how).rename(metric).reset_index(), on=[*by, "method"])
        excess = (table["accuracy"] - table["accuracy_bound"]) / table["accuracy_se"].where(
            table["accuracy_se"] > 0)
        return {"table": table.to_dict(orient="records"),
                "loss_within_epsilon": bool((table["max_privacy_loss"]
                                             <= table["epsilon"] * (1 + 1e-9)).all()),
                "max_loss_ratio": float((table["max_privacy_loss"] / table["epsilon"]).max()),
                "accuracy_within_bound": bool((table["accuracy"] <= table["accuracy_bound"]
                                               + 3 * table["accuracy_se"]).all()),
                "accuracy_max_excess_z": float(excess.fillna(0.0).max()),
                "max_z": float(z.max()), "max_z_threshold": z_threshold(z.size)}

    return summarize


def learning_unit(config: NoiseGameConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Nodes best-respond over their ``c_i``; the path, and its cost against the optimum."""
    weights_seed, model_seed = spawn(seed, 2)  # the nodes' private weights; the ring's own
    ring = PPSPConfig(n=config.n, K=config.K, d=config.d, delta=config.delta, replications=1)
    model = PPSPModel(ring, model_seed)
    weights = config.weights(generator(weights_seed))
    path = model.learn_noise(weights, config.rounds, config.spread)
    final = path[path["round"] == config.rounds]["c"].to_numpy()
    totals = weights.sum(axis=0)
    args = (config.n, config.K, config.delta, config.d)
    optimum = ppsp.optimal_c(*totals, *args)
    learned_cost = ppsp.tradeoff_cost(final.max(), final.min(), *totals, *args)
    extra = [{"metric": "optimal_c", "value": optimum},
             {"metric": "social_cost_ratio",
              "value": float(learned_cost / ppsp.tradeoff_objective(optimum, *totals, *args))},
             {"metric": "max_relative_distance", "value": float(np.max(np.abs(final / optimum
                                                                               - 1.0)))}]
    path = path.rename(columns={"c": "value"}).assign(metric="c")
    return pd.concat([path, pd.DataFrame(extra).assign(round=config.rounds)],
                     ignore_index=True).assign(method=config.weighting)


def learning_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Learned ``c`` against Theorem 4's optimum, per weighting."""
    last = rows[rows["round"] == params["rounds"]]
    out = {}
    for weighting, g in last.groupby("method"):
        c = g.loc[g["metric"] == "c", "value"]

        def metric(name: str, g=g) -> pd.Series:
            return g.loc[g["metric"] == name, "value"]

        out[weighting] = {
            "learned_c_mean": float(c.mean()), "learned_c_min": float(c.min()),
            "learned_c_max": float(c.max()), "optimal_c": float(metric("optimal_c").mean()),
            "max_relative_distance": float(metric("max_relative_distance").max()),
            "social_cost_ratio": float(metric("social_cost_ratio").mean())}
    return out


def tradeoff_unit(config: NoiseGameConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """Theorem 4's cubic root against a numerical minimisation of the weighted objective."""
    from scipy.optimize import minimize_scalar

    w = (config.gamma_u, config.gamma_a, config.gamma_p)
    args = (config.n, config.K, config.delta, config.d)
    root = ppsp.optimal_c(*w, *args)
    numeric = minimize_scalar(lambda c: ppsp.tradeoff_objective(c, *w, *args),
                              bounds=(root / 1e3, root * 1e3), method="bounded",
                              options={"xatol": 1e-12 * root}).x
    return pd.DataFrame([{"metric": "c_cubic", "value": root},
                         {"metric": "c_numeric", "value": numeric},
                         {"metric": "relative_gap", "value": abs(root - numeric) / root}]
                        ).assign(method="harmonic")


def tradeoff_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    wide = rows.pivot_table(index=["gamma_p", "K"], columns="metric", values="value")
    return {"table": wide.reset_index().to_dict(orient="records"),
            "max_relative_gap": float(wide["relative_gap"].max())}


def ring_claims(s: Mapping[str, Any]) -> list[Claim]:
    """ppsp-ring / ppsp-example2: the estimator against the theory, the sum invariant."""
    out = [Claim("SI-PPSP keeps the network sum (every step, every replication)", True,
                 s["sum_preserved"], kind="true")]
    if s["final_error_predicted"] is not None:
        out.append(Claim("final error E sum_i |y_i - sum s| = the exact formula (derived; "
                         "errata: Theorems 1-2)", s["final_error_predicted"], s["final_error"],
                         se=s["final_error_se"]))
    if s["parameters"]["noise"] == "laplace":
        out.append(Claim("Theorem 3 as printed (Laplace scale v) is the ring's epsilon",
                         s["epsilon_paper"], s["epsilon"], tolerance=1e-9 * s["epsilon"],
                         erratum="step 2 vs proof of Theorem 3"))
    ends = s.get("phase_end_steps") or [s["parameters"]["K"]]
    errors = s.get("phase_end_errors") or [s["final_error"]]
    for step, error in zip(ends, errors, strict=True):
        out.append(Claim(f"Theorem 1: sum_i |y_i - sum s| at step {step} is within "
                         "c_M pi n sqrt(n/6)", s["utility_bound"], error, kind="at_most"))
    for step, dev, target in zip(ends, s.get("phase_estimates_max_deviation", []),
                                 s.get("phase_targets", []), strict=False):
        out.append(Claim(f"Figs 2-3: every node's estimate at step {step} is within 2% of the "
                         "active nodes' sum", 0.02 * abs(target), dev, kind="at_most"))
    return out


def epsilon_claims(s: Mapping[str, Any]) -> list[Claim]:
    """ppsp-epsilon / ppsp-attack: Theorem 3 and the attacks it bounds."""
    return [
        Claim("Theorem 3 (basic composition of the K steps' Laplace releases, exact for pure "
              "DP): the transcript's privacy loss never exceeds epsilon; largest loss / epsilon",
              1.0, s["max_loss_ratio"], kind="at_most", tolerance=1e-9),
        Claim("epsilon-DP: a likelihood-ratio test's accuracy is at most e^eps / (1 + e^eps) "
              "(largest excess in SE)", 3.0, s["accuracy_max_excess_z"], kind="at_most"),
        Claim("the eavesdropper's and curious neighbours' best linear estimates have the "
              "predicted variance (every grid point)", None, s["max_z"],
              tolerance=s["max_z_threshold"], kind="z"),
    ]


def tradeoff_claims(s: Mapping[str, Any]) -> list[Claim]:
    """ppsp-tradeoff: Theorem 4's cubic gives the minimiser."""
    return [Claim("Theorem 4: the positive root of the cubic minimises the weighted cost "
                  "(largest relative gap to numerical minimisation)", 0.0,
                  s["max_relative_gap"], tolerance=1e-6)]


def learning_claims(s: Mapping[str, Any]) -> list[Claim]:
    """ppsp-learning: best responses against Theorem 4's optimum."""
    out = []
    if "equal" in s:
        out.append(Claim("Theorem 4 as a game, equal weights: best responses reach the optimal "
                         "c (largest relative distance)", 0.0,
                         s["equal"]["max_relative_distance"], tolerance=1e-6))
    if "unequal" in s:
        out.append(Claim("unequal weights: the learned profile's cost is at least Theorem 4's "
                         "optimum (cost ratio, a price of anarchy)", 1.0,
                         s["unequal"]["social_cost_ratio"], kind="at_least", tolerance=1e-12))
    return out


_ATTACKS = {"source": "ppsp-ring-summation", "claims": epsilon_claims,
            "table_caption": "Per grid point, pooled over populations: the likelihood-ratio "
                             "test's accuracy with its epsilon-DP bound, the eavesdropper's and "
                             "the neighbours' estimation error with its predicted variance, "
                             "Theorem 3's epsilon and the largest privacy loss measured."}

register(Experiment(
    name="ppsp-ring",
    config_type=PPSPConfig,
    run_unit=ring_unit,
    summarize=ring_summary,
    defaults={"K": 500, "c": 100.0, "replications": 50},
    paper={"K": 5000, "replications": 200},
    populations=4,
    plot=figure(FIGURES, "ring_error"),
    source="ppsp-ring-summation",
    claims=ring_claims,
))

register(Experiment(
    name="ppsp-example2",
    config_type=PPSPConfig,
    run_unit=ring_unit,
    summarize=ring_summary,
    defaults={"n": 10, "K": 6000, "c": 1000.0, "d": 1.0, "secrets": list(EXAMPLE2_SECRETS),
              "leave_at": 2000, "join_at": 4000, "replications": 20},
    paper={"replications": 200},
    populations=2,
    plot=figure(FIGURES, "example2"),
    source="ppsp-ring-summation",
    claims=ring_claims,
))

register(Experiment(
    name="ppsp-epsilon",
    config_type=PPSPConfig,
    run_unit=epsilon_unit,
    summarize=epsilon_summary(["K"]),
    grid={"K": [5, 10, 20, 50, 100], "schedule": ["harmonic", "geometric"]},
    defaults={"n": 5, "c": 200.0, "phi": 0.95, "replications": 400},
    paper={"K": [5, 10, 20, 50, 100, 200, 500], "replications": 4000},
    populations=2,
    plot=figure(FIGURES, "theory_vs_measured", "K", "epsilon", "max_privacy_loss"),
    **_ATTACKS,
))

register(Experiment(
    name="ppsp-attack",
    config_type=PPSPConfig,
    run_unit=epsilon_unit,
    summarize=epsilon_summary(["c"]),
    grid={"c": [10.0, 100.0, 1000.0, 10000.0]},
    defaults={"n": 5, "K": 30, "replications": 400},
    paper={"c": [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0], "replications": 4000},
    populations=2,
    plot=figure(FIGURES, "theory_vs_measured", "c", "accuracy_bound", "accuracy",
                yscale="linear"),
    **_ATTACKS,
))

register(Experiment(
    name="ppsp-tradeoff",
    config_type=NoiseGameConfig,
    run_unit=tradeoff_unit,
    summarize=tradeoff_summary,
    grid={"gamma_p": [0.01, 0.1, 1.0, 10.0, 100.0], "K": [10, 100, 1000]},
    populations=1,
    plot=figure(FIGURES, "tradeoff"),
    source="ppsp-ring-summation",
    claims=tradeoff_claims,
    table_caption="Per gamma_p and K: c from Theorem 4's cubic, c from numerical minimisation "
                  "of the weighted cost, and their relative gap.",
))

register(Experiment(
    name="ppsp-learning",
    config_type=NoiseGameConfig,
    run_unit=learning_unit,
    summarize=learning_summary,
    grid={"weighting": ["equal", "unequal"]},
    paper={"n": 100, "rounds": 30, "populations": 20},
    populations=4,
    plot=figure(FIGURES, "learned_c"),
    source="ppsp-ring-summation",
    claims=learning_claims,
))
