"""Learning dynamics (every paper's game), its experiments' figures: each takes a results frame and
returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def learning_dynamics(rows: pd.DataFrame) -> plt.Figure:
    """One row per game: the last iterate's distance to the predicted profile over rounds; the
    largest average regret (solid, on a symmetric log scale that keeps negative regret) beside
    its bound (dotted), for the no-regret learners; and the basins: the share of runs that
    ended at each reference profile, at another equilibrium or at none. Learners are grouped
    by feedback (full information solid and listed first, bandit dash-dotted)."""
    trace = rows[rows["metric"].isin(["distance", "max_average_regret", "regret_bound"])]
    games = list(dict.fromkeys(trace["game"])) if "game" in trace else ["game"]
    order = (rows[["feedback", "learner"]].drop_duplicates()
             .sort_values("feedback", key=lambda f: f != "full", kind="stable"))
    keys = list(order.itertuples(index=False, name=None))
    palette = dict(zip([k[1] for k in keys], sns.color_palette("tab10"), strict=False))
    style = {"full": "-", "bandit": "-."}
    fig, axes = plt.subplots(len(games), 3, figsize=(15, 3.0 * len(games)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.0, 1.0, 0.9]})
    for row, game in zip(axes, games, strict=True):
        g = trace[trace["game"] == game] if "game" in trace else trace
        mean = g.groupby(["feedback", "learner", "metric", "round"], as_index=False)["value"]
        mean = mean.mean()
        for feedback, learner in keys:
            h = mean[(mean["learner"] == learner) & (mean["feedback"] == feedback)]
            if h.empty:
                continue
            line = {"color": palette[learner], "ls": style.get(feedback, "-")}
            d = h[h["metric"] == "distance"]
            row[0].plot(d["round"], d["value"], **line, label=f"{learner} ({feedback})")
            b = h[h["metric"] == "regret_bound"].dropna()
            if not b.empty:
                r = h[h["metric"] == "max_average_regret"]
                row[1].plot(r["round"], r["value"], **line)
                row[1].plot(b["round"], b["value"], color=palette[learner], ls=":", lw=1.2)
        row[0].set(xscale="log", ylabel=f"{game}\ndistance to the prediction",
                   ylim=(-0.03, 1.03))
        if game == "pricing-bayes":
            row[0].text(0.02, 0.04, "a row reporting another type than the prediction is "
                        "at distance 1", transform=row[0].transAxes, fontsize=8)
        row[1].set_xscale("log")
        row[1].set_yscale("symlog", linthresh=1e-3)
        lowest = g.loc[g["metric"] == "max_average_regret", "value"].min()
        row[1].set(ylabel="average regret (capped units)",
                   ylim=(min(-1e-3, 2.0 * lowest if lowest == lowest else 0.0), None))
        row[1].axhline(0.0, color="0.6", lw=0.8)
        _basins(row[2], rows[rows["game"] == game] if "game" in rows else rows, keys)
    for ax in axes[-1, :2]:
        ax.set_xlabel("round")
    axes[0, 0].set_title("last iterate vs the predicted profile (0 = at it)")
    axes[0, 1].set_title("no-regret learners: regret (solid), bound (dotted)")
    axes[0, 2].set_title("where the runs ended (share of runs)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), frameon=False,
               title="learner (feedback): full information solid, bandit dash-dotted")
    fig.tight_layout(rect=(0, 0.06 if len(games) > 1 else 0.15, 1, 1))
    return fig


def _basins(ax: plt.Axes, rows: pd.DataFrame, keys: list[tuple[str, str]]) -> None:
    """Stacked bars per learner: the share of runs (population x start) per outcome."""
    run = [c for c in ("population", "start_run") if c in rows]
    ended = rows.drop_duplicates([*run, "feedback", "learner"])
    counts = pd.crosstab([ended["feedback"], ended["learner"]], ended["reached"],
                         normalize="index")
    present = [k for k in keys if k in counts.index]
    outcomes = sorted(counts.columns, key=lambda o: (o == "none", o == "other equilibrium", o))
    references = [o for o in outcomes if o not in ("none", "other equilibrium")]
    colours = {**dict(zip(references, ("#1b9e77", "#7570b3", "#66a61e"), strict=False)),
               "other equilibrium": "#d95f02", "none": "0.85"}
    left = np.zeros(len(present))
    y = np.arange(len(present))
    for outcome in outcomes:
        share = counts.loc[present, outcome].to_numpy()
        ax.barh(y, share, left=left, color=colours[outcome], label=outcome, edgecolor="white")
        left += share
    ax.set_yticks(y, [f"{learner} ({feedback})" for feedback, learner in present], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
