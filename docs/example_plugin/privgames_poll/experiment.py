"""The ``poll`` experiment: registered in privgames through the ``privgames.experiments``
entry point (importing this module registers it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privgames.analysis.claims import Claim
from privgames.analysis.experiments import Experiment, register
from privgames.analysis.metrics import mean_rows, pooled
from privgames_poll.model import PollConfig, PollModel


def poll_unit(config: PollConfig, seed: np.random.SeedSequence) -> pd.DataFrame:
    """One population: learn, then measure the published mean's error."""
    model = PollModel(config, seed).run()
    learned, theory = model.scales(), model.predicted()
    rows = [*mean_rows("mse", model.poll_errors(), theory["mse"]),
            {"metric": "max_relative_distance",
             "value": float(np.max(np.abs(learned / theory["b"] - 1)))}]
    return pd.DataFrame(rows).assign(method="learned")


def poll_summary(rows: pd.DataFrame, params) -> dict:
    mse = pooled(rows, "mse").iloc[0]
    return {"mse": mse["mse"], "mse_se": mse["mse_se"], "mse_predicted": mse["mse_predicted"],
            "max_relative_distance": float(
                rows.loc[rows["metric"] == "max_relative_distance", "value"].max())}


def poll_claims(s) -> list[Claim]:
    return [Claim("respondents learn the equilibrium scale (a Delta n^2 / 4)^(1/3)", 0.0,
                  s["max_relative_distance"], tolerance=1e-3),
            Claim("the published mean's MSE is sum 2 b^2 / n^2", s["mse_predicted"], s["mse"],
                  se=s["mse_se"])]


def poll_plot(rows: pd.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    t = pooled(rows, "mse")
    ax.errorbar([0], t["mse"], yerr=2 * t["mse_se"], fmt="o", label="measured (2 SE)")
    ax.axhline(float(t["mse_predicted"].iloc[0]), linestyle="--", label="theory")
    ax.set(xticks=[], ylabel="MSE of the published mean")
    ax.legend()
    return fig


POLL = register(Experiment(
    name="poll", description="A noisy poll: respondents learn their Laplace scale",
    config_type=PollConfig, run_unit=poll_unit, summarize=poll_summary, claims=poll_claims,
    plot=poll_plot, source="privgames-poll (example plug-in)", populations=2))
