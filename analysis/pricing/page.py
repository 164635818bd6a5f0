"""The pricing FL game (pricing-fl-noise.txt), its page for ``privgames viz`` (a
:class:`~privgames.analysis.pages.Page`): its agents drawn, its live measurement beside the
theory, the numbers it shows."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.pages import (
    MANY,
    THEORY,
    Page,
    dots,
    integer_x,
    legend_below,
    log_y,
    new_figure,
    series,
)
from privgames.environments.pricing_fl import PricingConfig, PricingFLModel
from privgames.mechanisms.pricing import social_cost


def pricing_agents(env: PricingFLModel) -> Figure:
    """Clients by sensitivity alpha (colour, with its bar): their learned noise sigma, eq
    (10)'s NE and the social optimum, on a log scale when they span more than two decades.
    Up to :data:`~privgames.analysis.pages.MANY` clients: a disc each, the theory as ticks, an
    infinite sigma (opting out) as a triangle at the top; above: points, the theory as
    lines, the opted-out counted in the title."""
    fig, ax = new_figure()
    order = np.argsort(env.alpha)
    sigma, alpha = env.sigma[order], env.alpha[order]
    theory = {name: env.predicted()[name][order] for name in ("eq10", "optimum")}
    x = np.arange(1, sigma.size + 1)
    shown = np.concatenate([sigma, *theory.values()])
    shown = shown[np.isfinite(shown) & (shown > 0)]
    low, high = (float(shown.min()), float(shown.max())) if shown.size else (1.0, 1.0)
    log = high > 100.0 * low
    top = high * 3.0 if log else 1.15 * high
    points = ax.scatter(x, np.where(np.isfinite(sigma), sigma, np.nan), c=alpha,
                        cmap="viridis", zorder=3, label="σ (learned)", **dots(sigma.size))
    fig.colorbar(points, ax=ax, label="sensitivity α")
    many = sigma.size > MANY
    for name, colour, label in (("eq10", "black", "eq (10) NE"),
                                ("optimum", "red", "social optimum")):
        value = theory[name]
        if many:
            ax.step(x, value, where="mid", color=colour, linewidth=1, label=label)
        else:
            ax.scatter(x, value, marker="_", s=200, color=colour, label=label, zorder=4)
            out = np.isinf(value)
            ax.scatter(x[out], np.full(out.sum(), top), marker="^", s=40, color=colour,
                       zorder=4)
    out = ~np.isfinite(sigma)
    if not many and out.any():
        ax.scatter(x[out], np.full(out.sum(), top), marker="^", s=60, color="grey",
                   label="opts out (σ = ∞, ▲)", zorder=3)
    if log:
        log_y(ax)
    ax.set_ylim(low / 3.0 if log else 0.0, top * (1.6 if log else 1.05))
    opted = f", {int(out.sum())} opted out" if many else ""
    ax.set(xlabel="client (by sensitivity α)", ylabel="noise σ",
           title=f"{sigma.size} clients, round {env.steps}, "
                 f"{'with' if env.config.pricing else 'without'} prices{opted}")
    legend_below(fig, ax)
    integer_x(ax)
    return fig


def pricing_cost(env: PricingFLModel, sigma: np.ndarray) -> float:
    """Eq (6)'s social cost of the profile ``sigma`` in this population."""
    return social_cost(sigma, env.alpha, *env.game, env.config.aggregation)


def pricing_measures(env: PricingFLModel) -> Figure:
    """The social cost per round beside the optimum's and eq (10)'s NE's, on a log scale when
    one of them dwarfs the rest (the NE's can be a thousand times the optimum's)."""
    fig, ax = new_figure()
    cost = series(env, "social_cost")
    ax.plot(np.arange(1, cost.size + 1), cost, marker="o", markersize=3, label="learned")
    theory = env.predicted()
    levels = [pricing_cost(env, theory["optimum"])]
    ax.axhline(levels[0], **THEORY, label="social optimum")
    if np.all(np.isfinite(theory["eq10"])):
        levels.append(pricing_cost(env, theory["eq10"]))
        ax.axhline(levels[1], color="grey", linewidth=1, label="eq (10) NE")
    drawn = np.concatenate([cost, levels])
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    if drawn.size and drawn.max() > 100 * drawn.min():
        log_y(ax)
    ax.set(xlabel="round", ylabel="social cost", title="social cost against the optimum")
    integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def pricing_readings(env: PricingFLModel) -> dict[str, float]:
    return {"rounds": env.steps, "σ of client 1": float(env.sigma[0]),
            "social cost": env.social_cost(),
            "optimum cost": pricing_cost(env, env.predicted()["optimum"]),
            "participants": int(np.isfinite(env.sigma).sum())}


def pricing_detail(env: PricingFLModel, rank: int) -> dict[str, float]:
    """The client of rank ``rank`` by sensitivity (1 is the least sensitive; past the end:
    the most), as the figure orders them."""
    k = min(rank, env.alpha.size)
    client = int(np.argsort(env.alpha)[k - 1])
    theory = env.predicted()
    return {f"client {k} by α: α": float(env.alpha[client]),
            f"client {k} by α: σ": float(env.sigma[client]),
            f"client {k} by α: eq (10) σ": float(theory["eq10"][client]),
            f"client {k} by α: optimum σ": float(theory["optimum"][client])}


PAGE = Page("pricing", "Pricing FL", PricingFLModel, PricingConfig,
            ("N", "alpha_mean", "alpha_std", "pricing", "aggregation", "update", "damping",
             "rounds"),
            pricing_agents, pricing_measures, pricing_readings, detail=pricing_detail,
            size="N", fixed={"N": 20},
            display_max={"N": 1000, "alpha_std": 0.5, "rounds": 500})
