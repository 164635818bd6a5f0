"""The ``learning-dynamics`` experiment: learners that learn from what they experience, in every
game; what they reach beside the theory's equilibria, their regret beside its bound, and the CCE
gap of their joint play."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim
from privgames.analysis.experiments import Experiment, figure, register
from privgames.environments.learning_dynamics import LearningConfig, make_learning_model

#: Per-round metrics kept in the rows (at most ``TRACE_POINTS`` rounds, log-spaced).
TRACE = ("distance", "nash_gap", "max_average_regret", "cce_gap", "regret_bound",
         "social_cost", "average_social_cost")
TRACE_POINTS = 60
LABELS = ("game", "learner", "feedback")


def learning_unit(config: LearningConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population learns; its trace over rounds and where it ended."""
    model = make_learning_model(config, seed)
    try:
        return _trace_and_outcome(model.run(), config)
    finally:
        model.close()


def _trace_and_outcome(model: Any, config: LearningConfig) -> pd.DataFrame:
    trace = model.results()
    bounds = [model.learner.regret_bound(t) for t in trace["round"]]
    trace["regret_bound"] = [np.nan if b is None else b / t
                             for b, t in zip(bounds, trace["round"], strict=True)]
    keep = np.unique(np.geomspace(1, len(trace), TRACE_POINTS).astype(int) - 1)
    rows = trace.iloc[keep].melt(id_vars="round", value_vars=list(TRACE), var_name="metric")
    outcome = model.outcome()
    predicted = model.predicted()
    last = {"final_distance": model.distance(), "converged": float(outcome["converged"]),
            "opted_out": float(model.opted_out()),
            "azuma": model.azuma(), "predicted_social_cost":
                predicted["social_costs"][model.predicted_name],
            "predicted_nash_gap": predicted["nash_gaps"][model.predicted_name],
            "optimum_social_cost": predicted["optimum"],
            **{k: v for k, v in outcome.items() if k.startswith("distance_")}}
    end = pd.DataFrame({"round": config.rounds, "metric": list(last), "value": list(last.values())})
    return pd.concat([rows, end], ignore_index=True).assign(
        feedback=config.resolved_feedback, reached=outcome["reached"], play=outcome["play"],
        predicted=model.predicted_name)


def learning_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per (game, learner, feedback), pooled over populations: the contract's numbers (the last
    round's largest regret, CCE gap and last iterate's deviation gain ``nash_gap``, the mean
    final distance, ``converged`` when every population converged), what was reached and how
    play ended (``play``: converged, stuck, cycles or wanders, counted over populations), and
    the social costs. One combination: its
    numbers at the top level. ``opted_out``: the mean number of agents whose last iterate is
    the opt-out (pricing FL under the MLE rule)."""
    rounds = int(params["rounds"])
    by = [c for c in ("game", "learner") if c in rows] + ["feedback"]
    runs = []
    for key, g in rows.groupby(by, sort=False):
        final = g[g["round"] == rounds]

        def value(metric: str, how: str = "max", final=final) -> float | None:
            v = final.loc[final["metric"] == metric, "value"]
            return None if v.empty or v.isna().all() else float(getattr(v, how)())

        labels = dict(zip(by, key, strict=True))
        game = labels.get("game", params["game"])
        learner = labels.get("learner", params["learner"])
        runs.append({
            "game": game, "learner": learner, "feedback": labels["feedback"], "rounds": rounds,
            "final_distance": value("final_distance", "mean"),
            "max_average_regret": value("max_average_regret"),
            "regret_bound": value("regret_bound"),
            "cce_gap": value("cce_gap"), "azuma": value("azuma"),
            "nash_gap": value("nash_gap"),
            "converged": bool(value("converged", "min") == 1.0),
            "opted_out": value("opted_out", "mean"),
            **{k: (g.groupby("population")[k].first() if "population" in g
                   else g[k].iloc[:1]).value_counts().to_dict() for k in ("reached", "play")},
            "predicted": str(g["predicted"].iloc[0]),
            "predicted_nash_gap": value("predicted_nash_gap"),
            "social_cost": value("social_cost", "mean"),
            "average_social_cost": value("average_social_cost", "mean"),
            "predicted_social_cost": value("predicted_social_cost", "mean"),
            "optimum_social_cost": value("optimum_social_cost", "mean"),
            "populations": int(g["population"].nunique()) if "population" in g else 1})
    out: dict[str, Any] = {"runs": runs, "tolerance": float(params["tolerance"]),
                           "table": [{**r, "reached": _reached(r["reached"]),
                                      "play": _reached(r["play"])} for r in runs]}
    if len(runs) == 1:
        out.update(runs[0])
    return out


def learning_claims(s: Mapping[str, Any]) -> list[Claim]:
    """Per run: regret within the learner's bound; the CCE gap within the largest average
    regret (plus the Azuma-Hoeffding allowance between realized and expected play);
    last-iterate convergence to the predicted profile, measured."""
    out = []
    for r in s["runs"]:
        where = f"{r['game']}, {r['learner']} ({r['feedback']})"
        if r["regret_bound"] is not None:
            out.append(Claim(f"{where}: average external regret within the learner's bound",
                             r["regret_bound"], r["max_average_regret"], kind="at_most"))
        out.append(Claim(f"{where}: CCE gap of the time-averaged play at most the largest "
                         "average regret (+ Azuma allowance)",
                         r["max_average_regret"] + r["azuma"], r["cce_gap"], kind="at_most"))
        out.append(Claim(f"{where}: the last iterate converges to the predicted profile "
                         f"({r['predicted']}); reached: {_reached(r['reached'])}; play: "
                         f"{_reached(r.get('play', {}))}", True,
                         bool(r["converged"] and r["final_distance"] <= s["tolerance"]),
                         kind="true"))
    return out


def _reached(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in counts.items())


register(Experiment(
    name="learning-dynamics",
    config_type=LearningConfig,
    run_unit=learning_unit,
    summarize=learning_summary,
    grid={"game": ["bas", "sar", "ppsp", "pricing", "pricing-bayes"],
          "learner": ["best_response", "fictitious", "hedge", "regret_matching", "exp3",
                      "spsa"]},
    exclude=({"game": "pricing-bayes", "learner": "spsa"},),
    defaults={"rounds": 500},
    paper={"rounds": 2000, "populations": 4},
    populations=2,
    plot=figure("learning_dynamics"),
    claims=learning_claims,
    table_caption="Per game and learner: the last iterate's distance to the predicted "
                  "profile, the largest average regret beside its bound, the CCE gap, whether "
                  "play converged and to what.",
))
