"""The ``learning-dynamics`` experiment: learners that learn from what they experience, in every
game; what they reach beside the theory's equilibria, their regret beside its bound, and the CCE
gap of their joint play."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim
from privgames.analysis.experiments import Experiment, figure, register
from privgames.environments import progress
from privgames.environments.learning_dynamics import LearningConfig, LearningModel

#: Where this game's figures are drawn (imported when a figure is drawn).
FIGURES = f"{__package__}.figures"

#: Per-round metrics kept in the rows (at most ``TRACE_POINTS`` rounds, log-spaced).
TRACE = ("distance", "nash_gap", "nash_gap_relative", "max_average_regret", "cce_gap",
         "regret_bound", "social_cost", "average_social_cost")
TRACE_POINTS = 60
LABELS = ("game", "learner", "feedback")


def learning_unit(config: LearningConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population learns from each of its ``starts``; per start run (``start_run``), its
    trace over rounds and where it ended."""
    runs = []
    for k in range(config.starts):
        model = LearningModel(config, seed, start_run=k)
        try:
            with progress.part(1.0 / config.starts):
                runs.append(_trace_and_outcome(model.run(), config).assign(start_run=k))
        finally:
            model.close()
    return pd.concat(runs, ignore_index=True)


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
            "max_average_regret_game_units": model.max_average_regret("game"),
            "cce_gap_game_units": model.cce_gap("game"),
            "infinite_cost_rounds": float(model.infinite_cost_rounds),
            "settled_round": settled_round(trace["distance"].to_numpy(), config.tolerance),
            "capped_rounds": float(model.capped_rounds),
            "predicted_nash_gap_relative":
                predicted["nash_gaps_relative"][model.predicted_name],
            "azuma": model.azuma(), "predicted_social_cost":
                predicted["social_costs"][model.predicted_name],
            "predicted_nash_gap": predicted["nash_gaps"][model.predicted_name],
            "optimum_social_cost": predicted["optimum"],
            **{k: v for k, v in outcome.items() if k.startswith("distance_")}}
    subgame = model.subgame_gap_relative()
    if subgame is not None:  # the sequential chain: subgame perfection, the path's levels
        last["subgame_gap_relative"] = subgame
        last.update(model.path_summary())
    end = pd.DataFrame({"round": config.rounds, "metric": list(last), "value": list(last.values())})
    return pd.concat([rows, end], ignore_index=True).assign(
        feedback=config.resolved_feedback, reached=outcome["reached"], play=outcome["play"],
        predicted=model.predicted_name, placement=json.dumps(model.placement()))


def settled_round(distance: np.ndarray, tolerance: float) -> float:
    """The first round from which the last iterate stays within ``tolerance`` of the
    predicted profile to the end (``nan`` when the last round is not)."""
    outside = np.flatnonzero(distance > tolerance)
    if outside.size and outside[-1] == distance.size - 1:
        return float("nan")
    return float(outside[-1] + 2 if outside.size else 1)


def learning_summary(rows: pd.DataFrame, params: Mapping[str, Any]) -> dict:
    """Per (game, learner, feedback), pooled over runs (populations times their ``starts``):
    the contract's numbers (the last round's largest regret, CCE gap and last iterate's
    deviation gain ``nash_gap``, the mean final distance, ``converged`` when every run
    converged), what was reached and how play ended (``play``: converged, stuck, cycles or
    wanders, counted over runs), and the social costs. ``reached_share``: per reference
    profile (and ``other equilibrium``, ``none``) the share of runs that reached it and its
    binomial standard error. ``settled_round``: the median over the runs that settled,
    ``settled_runs`` of the ``pooled_runs``. ``nash_gap_relative``: the largest deviation gain
    over the deviator's own cost (what ``converged`` is judged by). Regret and the CCE gap are
    in the learners' capped units (where the bounds hold); ``*_game_units``, in the game's own (the
    largest over runs, ``inf`` where play met an infinite cost), beside the most rounds of a
    run whose played cost was infinite (``infinite_cost_rounds``) or capped
    (``capped_rounds``). One combination: its numbers at the top level. ``opted_out``: the
    mean number of agents whose last iterate is the opt-out (pricing FL under the MLE
    rule). In the sequential chain, ``subgame_gap_relative`` (the largest gain of any
    follower's reply at any state, reached or not), and, over runs, the mean
    ``leader_steps_below`` Theorem 1's level and ``total_over_theorem1`` (the release's total
    variance over Theorem 1's)."""
    rounds = int(params["rounds"])
    by = [c for c in ("game", "learner") if c in rows] + ["feedback"]
    run_keys = [c for c in ("population", "start_run") if c in rows]
    runs = []
    for key, g in rows.groupby(by, sort=False):
        final = g[g["round"] == rounds]

        def value(metric: str, how: str = "max", final=final) -> float | None:
            v = final.loc[final["metric"] == metric, "value"]
            return None if v.empty or v.isna().all() else float(getattr(v, how)())

        ended = g.groupby(run_keys)[["reached", "play"]].first() if run_keys else g.iloc[:1]
        references = sorted(m[len("distance_"):] for m in final["metric"].unique()
                            if m.startswith("distance_"))
        labels = dict(zip(by, key, strict=True))
        game = labels.get("game", params["game"])
        learner = labels.get("learner", params["learner"])
        runs.append({
            "game": game, "learner": learner, "feedback": labels["feedback"], "rounds": rounds,
            "final_distance": value("final_distance", "mean"),
            "max_average_regret": value("max_average_regret"),
            "regret_bound": value("regret_bound"),
            "cce_gap": value("cce_gap"), "azuma": value("azuma"),
            "nash_gap": value("nash_gap"), "nash_gap_relative": value("nash_gap_relative"),
            "subgame_gap_relative": value("subgame_gap_relative"),
            "leader_steps_below": value("leader_steps_below", "mean"),
            "total_over_theorem1": value("total_over_theorem1", "mean"),
            "settled_round": value("settled_round", "median"),
            "settled_runs": int(final.loc[final["metric"] == "settled_round",
                                          "value"].notna().sum()),
            "converged": bool(value("converged", "min") == 1.0),
            "opted_out": value("opted_out", "mean"),
            "max_average_regret_game_units": value("max_average_regret_game_units"),
            "cce_gap_game_units": value("cce_gap_game_units"),
            "infinite_cost_rounds": _count(value("infinite_cost_rounds")),
            "capped_rounds": _count(value("capped_rounds")),
            **{k: ended[k].value_counts().to_dict() for k in ("reached", "play")},
            "reached_share": reached_shares(ended["reached"], references),
            "predicted": str(g["predicted"].iloc[0]),
            "predicted_nash_gap": value("predicted_nash_gap"),
            "predicted_nash_gap_relative": value("predicted_nash_gap_relative"),
            "social_cost": value("social_cost", "mean"),
            "average_social_cost": value("average_social_cost", "mean"),
            "predicted_social_cost": value("predicted_social_cost", "mean"),
            "optimum_social_cost": value("optimum_social_cost", "mean"),
            "populations": int(g["population"].nunique()) if "population" in g else 1,
            "pooled_runs": len(ended), "placement": placement(g, run_keys)})
    out: dict[str, Any] = {"runs": runs, "tolerance": float(params["tolerance"]),
                           "start": str(params.get("start", "random")),
                           "starts": int(params.get("starts", 1)),
                           "table": [{**r, "reached": _reached(r["reached"]),
                                      "play": _reached(r["play"])} for r in runs]}
    if len(runs) == 1:
        out.update(runs[0])
    return out


def learning_claims(s: Mapping[str, Any]) -> list[Claim]:
    """Per (game, learner): regret within the learner's bound and the CCE gap within the
    largest average regret (plus the Azuma-Hoeffding allowance between realized and expected
    play), both in the learner's capped units, where the bounds hold; and the selection:
    the last iterate reaches the predicted profile in at least half of the runs from the
    configured starts (its share and binomial SE, the other references' shares beside); in
    the sequential chain, subgame perfection of the last iterate."""
    out = []
    for r in s["runs"]:
        where = f"{r['game']}, {r['learner']} ({r['feedback']})"
        if r["regret_bound"] is not None:
            out.append(Claim(f"{where}: average external regret within the learner's bound "
                             "(capped units)", r["regret_bound"], r["max_average_regret"],
                             kind="at_most"))
        out.append(Claim(f"{where}: CCE gap of the time-averaged play at most the largest "
                         "average regret (+ Azuma allowance; capped units)",
                         r["max_average_regret"] + r["azuma"], r["cce_gap"], kind="at_most"))
        share = r["reached_share"][r["predicted"]]
        others = ", ".join(f"{k} {v['share']:.2f}" for k, v in r["reached_share"].items()
                           if k != r["predicted"])
        out.append(Claim(f"{where}: from {s['start']} starts the last iterate reaches the "
                         f"predicted profile ({r['predicted']}) in at least half of the "
                         f"{r['pooled_runs']} runs (shares of the rest: {others}; play: "
                         f"{_reached(r.get('play', {}))})", 0.5, share["share"],
                         se=max(share["se"], math.sqrt(0.25 / r["pooled_runs"])),
                         kind="at_least", runs=r["pooled_runs"]))
        if r.get("subgame_gap_relative") is not None:
            out.append(Claim(f"{where}: the last iterate is subgame perfect, as Theorem 1's "
                             "profile: no user's reply at any state, reached or not, gains "
                             "more than the tolerance of its own cost (largest relative gain)",
                             s["tolerance"], r["subgame_gap_relative"], kind="at_most"))
    return out


def reached_shares(reached: pd.Series, references: list[str]) -> dict[str, dict]:
    """Per reference profile, ``other equilibrium`` and ``none``: the share of the runs that
    ended there and its binomial standard error ``sqrt(s (1 - s) / runs)``."""
    n = len(reached)
    out = {}
    for name in [*references, "other equilibrium", "none"]:
        share = float((reached == name).sum()) / n
        out[name] = {"share": share, "se": float(np.sqrt(share * (1.0 - share) / n))}
    return out


def placement(rows: pd.DataFrame, run_keys: list[str]) -> dict[str, int]:
    """Shards per node (Ray's node id; ``local``: in process), added up over the runs."""
    runs = rows.groupby(run_keys)["placement"].first() if run_keys else rows["placement"][:1]
    out: dict[str, int] = {}
    for where in runs:
        for node, count in json.loads(where).items():
            out[node] = out.get(node, 0) + count
    return out


def _count(value: float | None) -> int | None:
    return None if value is None else int(value)


def _reached(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in counts.items())


#: The grid actions whose cost is infinite.
_INFINITE_ACTIONS = ("BAS's zero noise has an unbounded privacy cost; pricing's opt-out is "
                     "infinitely penalised with prices")

register(Experiment(
    name="learning-dynamics",
    config_type=LearningConfig,
    run_unit=learning_unit,
    summarize=learning_summary,
    grid={"game": ["bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes"],
          "learner": ["best_response", "fictitious", "hedge", "regret_matching", "exp3",
                      "spsa"]},
    exclude=({"game": "pricing-bayes", "learner": "spsa"},
             {"game": "bas-sequential", "learner": "spsa"}),
    defaults={"rounds": 500},
    paper={"rounds": 2000, "populations": 4, "starts": 3},
    populations=2,
    plot=figure(FIGURES, "learning_dynamics"),
    claims=learning_claims,
    infinite={**dict.fromkeys(("max_average_regret_game_units", "cce_gap_game_units"),
                              "in the game's own units, play met an action of infinite cost "
                              f"({_INFINITE_ACTIONS}); the learner-units values are finite"),
              **dict.fromkeys(("nash_gap", "nash_gap_relative", "subgame_gap_relative",
                               "social_cost"),
                              "the profile holds an action of infinite cost "
                              f"({_INFINITE_ACTIONS})")},
    table_caption="Per game and learner: the last iterate's distance to the predicted "
                  "profile, the largest average regret beside its bound, the CCE gap, whether "
                  "play converged and to what. These claims test our learners, not the "
                  "papers: a failure (play that does not converge to the predicted profile) "
                  "is a finding, reported with what was reached.",
))
