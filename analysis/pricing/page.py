"""The pricing FL game (pricing-fl-noise.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import THEORY, Page, integer_x, new_figure, series
from privgames.environments.pricing_fl import PricingConfig, PricingFLModel
from privgames.mechanisms.pricing import social_cost


def pricing_agents(env: PricingFLModel) -> Figure:
    """Clients by sensitivity alpha: their noise sigma (bars coloured by alpha), eq (10)'s NE
    and the social optimum as ticks (a triangle at the top where infinite); a client who opted
    out (sigma infinite) is a dotted grey bar to the top."""
    fig, ax = new_figure()
    order = np.argsort(env.alpha)
    sigma = env.sigma[order]
    theory = env.predicted()
    finite = np.isfinite(sigma)
    shown = np.concatenate([sigma, theory["eq10"], theory["optimum"]])
    top = 1.15 * float(np.max(shown[np.isfinite(shown)], initial=1.0))
    x = np.arange(1, sigma.size + 1)
    colours = matplotlib.colormaps["viridis"](env.alpha[order])
    width = float(np.clip(400.0 / sigma.size, 0.5, 12.0))  # one line collection: fast at 10^3
    ax.vlines(x[finite], 0.0, sigma[finite], colors=colours[finite], linewidth=width,
              label="σ (learned)")
    ax.vlines(x[~finite], 0.0, top, colors="lightgrey", linewidth=width, linestyles=":",
              label="opted out (σ = ∞)")
    for name, colour, label in (("eq10", "black", "eq (10) NE"),
                                ("optimum", "red", "social optimum (▲: opts out)")):
        value = theory[name][order]
        out = np.isinf(value)
        ax.scatter(x[~out], value[~out], marker="_", s=200, color=colour, label=label, zorder=3)
        ax.scatter(x[out], np.full(out.sum(), 0.96 * top), marker="^", s=40, color=colour,
                   zorder=3)
    ax.set(xlabel="client (by sensitivity α, colour)", ylabel="noise σ", ylim=(0, top),
           title=f"{sigma.size} clients, round {env.steps}, "
                 f"{'with' if env.config.pricing else 'without'} prices")
    ax.legend(fontsize="small", loc="upper left")
    integer_x(ax)
    return fig


def pricing_cost(env: PricingFLModel, sigma: np.ndarray) -> float:
    """Eq (6)'s social cost of the profile ``sigma`` in this population."""
    return social_cost(sigma, env.alpha, *env.game, env.config.aggregation)


def pricing_measures(env: PricingFLModel) -> Figure:
    fig, ax = new_figure()
    cost = series(env, "social_cost")
    ax.plot(np.arange(1, cost.size + 1), cost, marker="o", markersize=3, label="learned")
    theory = env.predicted()
    ax.axhline(pricing_cost(env, theory["optimum"]), **THEORY, label="social optimum")
    if np.all(np.isfinite(theory["eq10"])):
        ax.axhline(pricing_cost(env, theory["eq10"]), color="grey", linewidth=1,
                   label="eq (10) NE")
    ax.set(xlabel="round", ylabel="social cost", title="social cost against the optimum")
    integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def pricing_readings(env: PricingFLModel) -> dict[str, float]:
    return {"rounds": env.steps, "σ of client 1": float(env.sigma[0]),
            "social cost": env.social_cost(),
            "optimum cost": pricing_cost(env, env.predicted()["optimum"]),
            "participants": int(np.isfinite(env.sigma).sum())}


PAGE = Page("pricing", "Pricing FL", PricingFLModel, PricingConfig,
            ("N", "alpha_mean", "alpha_std", "pricing", "aggregation", "update", "damping",
             "rounds"),
            pricing_agents, pricing_measures, pricing_readings, fixed={"N": 20},
            display_max={"N": 1000, "alpha_std": 0.5, "rounds": 500})
