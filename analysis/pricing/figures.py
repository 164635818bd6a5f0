"""The pricing FL game (pricing-fl-noise.txt), its experiments' figures: each takes a results frame
and returns a matplotlib Figure, the measurement beside the theory (shared style:
:mod:`privgames.analysis.figures`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from privgames.analysis.figures import ERROR_BAR_SE, integer_ticks, legend_outside


def pricing_trace(rows: pd.DataFrame) -> plt.Figure:
    """Best-response traces (population 0): each client's noise per round (opted-out clients
    drawn at the top edge), with the profile the setting predicts (eq 11 under prices, eq 10
    without; dotted, same colour); the social cost per round against the printed profiles' and
    the true optimum's."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    pop = rows[rows["population"] == 0]
    paths = pop[pop["metric"] == "sigma_path"]
    priced = pop.loc[pop["metric"] == "priced", "value"]
    target = "eq11" if (not priced.empty and priced.iloc[0] == 1.0) else "eq10"
    predicted = pop[(pop["metric"] == "sigma") & (pop["method"] == target)]
    ax = axes[0]
    finite = paths.loc[np.isfinite(paths["value"]), "value"]
    top = float(finite.max()) * 3 if not finite.empty else 1.0
    palette = sns.color_palette("viridis", n_colors=max(paths["client"].nunique(), 1))
    for colour, (client, g) in zip(palette, paths.groupby("client"), strict=False):
        ax.plot(g["round"], g["value"].clip(upper=top), "-", color=colour, lw=1)
        p = predicted.loc[predicted["client"] == client, "value"]
        if not p.empty and np.isfinite(p.iloc[0]):
            ax.axhline(p.iloc[0], linestyle=":", color=colour, lw=0.8)
    ax.plot([], [], "-", color="grey", label="learned sigma_i")
    ax.plot([], [], ":", color="grey", label=f"{target.replace('eq', 'eq (')}) profile")
    ax.set(yscale="log", xlabel="best-response round", ylabel="sigma_i (top edge: opted out)",
           title="clients' noise")
    integer_ticks(ax)
    legend_outside(ax)
    ax = axes[1]
    cost = pop[pop["metric"] == "social_cost"]
    ax.plot(cost["round"], cost["value"], "-", label="learned profile")
    final = pop[pop["round"].isna()]
    for metric, style, label in (("eq10_social_cost", "--", "eq (10) profile"),
                                 ("eq11_social_cost", "-.", "eq (11) profile"),
                                 ("optimal_social_cost", ":", "true optimum")):
        v = final.loc[final["metric"] == metric, "value"]
        if not v.empty and np.isfinite(v.iloc[0]):
            ax.axhline(v.iloc[0], linestyle=style, color="grey", label=label)
    ax.set(yscale="log", xlabel="best-response round", ylabel="social cost (eq 6)",
           title="social cost")
    integer_ticks(ax)
    legend_outside(ax)
    fig.tight_layout()
    return fig


def pricing_fig1(rows: pd.DataFrame) -> plt.Figure:
    """Fig 1: social cost of the learned end point vs the variance of the types, with and
    without prices (markers, 3 SE over populations), and the true optimum (dashed); one panel
    per aggregation rule."""
    final = rows[rows["metric"].isin(["social_cost", "optimal_social_cost"])].copy()
    final["variance"] = final["alpha_std"] ** 2
    rules = sorted(final["aggregation"].unique())
    fig, axes = plt.subplots(1, len(rules), figsize=(6.2 * len(rules), 4.2), squeeze=False)
    for ax, rule in zip(axes[0], rules, strict=True):
        sel = final[final["aggregation"] == rule]
        learned = sel[sel["metric"] == "social_cost"].assign(
            prices=lambda f: f["pricing"].map({True: "with prices", False: "without prices"}))
        sns.lineplot(learned, x="variance", y="value", hue="prices", marker="o", ax=ax,
                     errorbar=("se", ERROR_BAR_SE), err_style="bars")
        opt = sel[sel["metric"] == "optimal_social_cost"].groupby("variance")["value"].mean()
        ax.plot(opt.index, opt.to_numpy(), "k--", label="true optimum")
        ax.set(yscale="log", xlabel="variance of alpha", ylabel="social cost (eq 6)",
               title=f"{rule} aggregation")
        legend_outside(ax)
    fig.tight_layout()
    return fig


def pricing_poa(rows: pd.DataFrame) -> plt.Figure:
    """PoA of the learned equilibrium vs N (markers) and Proposition 3's family (dashed)."""
    from privgames.mechanisms.pricing import poa_family

    poa = rows[rows["metric"] == "poa"]
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(poa, x="N", y="value", hue="aggregation", marker="o", ax=ax, errorbar=None,
                 linestyle="none")
    n = np.unique(poa["N"])
    alpha = 0.5
    ax.plot(n, [poa_family(int(k), alpha) for k in n], "k--", label="family (eq 10 / eq 11)")
    ax.set(xscale="log", yscale="log", xlabel="N clients (equal types)",
           ylabel="PoA (learned / optimum)", title="Proposition 3: unbounded PoA")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def pricing_bne(rows: pd.DataFrame) -> plt.Figure:
    """Best misreport gain per grid point with the mechanism, with penalties only, and without
    prices (0 line: truthful is a BNE at or below it)."""
    sel = rows[rows["metric"].isin(["max_gain_full", "max_gain_penalties", "max_gain_none"])
               & rows["round"].isna()].copy()
    sel["point"] = [f"eta={e}, aL={a}, aH={b}" for e, a, b in
                    zip(sel["eta"], sel["alpha_L"], sel["alpha_H"], strict=True)]
    sel["prices"] = sel["metric"].str.removeprefix("max_gain_")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    sns.barplot(sel, x="point", y="value", hue="prices", ax=ax)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(xlabel="", ylabel="best gain from misreporting",
           title="Truthfulness by enumeration (theory: <= 0 with the full mechanism)")
    ax.tick_params(axis="x", rotation=60, labelsize="small")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def pricing_fig2(rows: pd.DataFrame) -> plt.Figure:
    """Fig 2: expected social cost vs eta, with the mechanism (markers), without prices, and the
    optimum (dashed)."""
    sel = rows[rows["round"].isna()]
    fig, ax = plt.subplots(figsize=(7, 4))
    for metric, style, label in (("expected_social_cost", "o", "with the mechanism (learned)"),
                                 ("selfish_social_cost", "s-", "without prices"),
                                 ("optimal_social_cost", "k--", "optimum")):
        g = sel[sel["metric"] == metric].groupby("eta")["value"].mean()
        ax.plot(g.index, g.to_numpy(), style, label=label)
    ax.set(xlabel="eta (share of low-sensitivity clients)", ylabel="expected social cost",
           title="Fig 2: incomplete information")
    legend_outside(ax)
    fig.tight_layout()
    return fig


def training_curves(rows: pd.DataFrame) -> plt.Figure:
    """Test accuracy and the loss gap per round, a colour per rule and a line style per noise
    spread; eq (9)'s bound on the gap dotted (same colour, the largest spread)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    per_round = rows[rows["round"].notna()].copy()
    per_round["rule"] = per_round["method"]
    for ax, metric, label in ((axes[0], "accuracy", "test accuracy"),
                              (axes[1], "loss_gap", "F(w_t) - F(w*)")):
        sel = per_round[per_round["metric"] == metric]
        sns.lineplot(sel, x="round", y="value", hue="rule", style="sigma_high", ax=ax,
                     errorbar=None)
        ax.set(xlabel="round", ylabel=label)
        integer_ticks(ax)
    bound = rows[(rows["metric"] == "bound") & (rows["sigma_high"] == rows["sigma_high"].max())]
    for colour, (_, g) in zip(sns.color_palette(), bound.groupby("method", sort=False),
                                 strict=False):
        axes[1].axhline(g["value"].mean(), linestyle=":", color=colour)
    axes[1].plot([], [], ":", color="grey", label="eq (9) bound (largest spread)")
    axes[1].set(yscale="log")
    for ax in axes:
        legend_outside(ax)
    fig.tight_layout()
    return fig
