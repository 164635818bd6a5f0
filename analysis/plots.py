"""Seaborn figures: each takes a results frame and returns a matplotlib Figure.

Every figure shows the measurement beside the theory it tests: measured values as markers with
error bars of two pooled standard errors (:func:`privgames.analysis.metrics.pooled`), the theory
as dashed lines. Legends sit outside the axes so that they hide no line.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from privgames.analysis.metrics import pooled  # noqa: E402

LABELS = {"chained": "Chained-DP (learned)", "nash": "NE (Theorem 1)", "ldp": "LDP (eq 26)",
          "optimum": "centralized optimum"}
MARKERS = {"Chained-DP (learned)": "o", "NE (Theorem 1)": "x", "LDP (eq 26)": "s",
           "centralized optimum": "^"}
YLABELS = {"mse": "MSE  E||mu_hat - mu||^2", "epsilon": "epsilon (worst user)",
           "mean_cost": "mean user cost (eq 14)"}


def _legend_outside(ax: plt.Axes, title: str | None = None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  fontsize="small", frameon=False)


def _integer_ticks(ax: plt.Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def convergence(rows: pd.DataFrame) -> plt.Figure:
    """Distance of the learned profile to the NE per round, one line per population; the NE
    itself is distance 0 (bottom), the tolerance is dotted."""
    sel = rows[(rows["metric"] == "distance") & (rows["method"] == "chained")].copy()
    sel["value"] = sel["value"].clip(lower=1e-16)
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(sel, x="round", y="value", hue="population", ax=ax, marker="o",
                 palette="viridis", legend="full")
    ax.axhline(1e-6, linestyle=":", color="grey", label="tolerance 1e-6")
    ax.set(yscale="log", xlabel="learning round",
           ylabel="max |sigma2 - sigma2_NE| / max sigma2_NE",
           title="Distance of the learned profile to Theorem 1's NE")
    _integer_ticks(ax)
    _legend_outside(ax, "population")
    fig.tight_layout()
    return fig


def methods_vs(rows: pd.DataFrame, x: str, metrics: Sequence[str],
               style: str | None = None) -> plt.Figure:
    """One panel per final metric against grid parameter ``x``, a colour per method.

    MSE: measured (markers, 2 pooled SE) and eq (9) (dashed). Epsilon: exact (solid) and the
    paper's eq (3) (dashed). Mean cost: the learned profile and the NE's (dashed)."""
    by = [x] + ([style] if style else [])
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.2), squeeze=False)
    palette = dict(zip(LABELS.values(), sns.color_palette(n_colors=4), strict=True))
    for ax, metric in zip(axes[0], metrics, strict=True):
        if metric == "mse":
            table = pooled(rows, "mse", by).assign(method=lambda f: f["method"].map(LABELS))
            for (method, *rest), g in table.groupby(["method", *by[1:]], sort=False):
                g = g.sort_values(x)
                tag = f" ({rest[0]})" if rest else ""
                ax.errorbar(g[x], g["mse"], yerr=2 * g["mse_se"], marker=MARKERS[method],
                            ms=7, linestyle="none",
                            color=palette[method], label=f"{method}{tag}",
                            mfc="none" if rest and rest[0] == "sorted" else None)
                ax.plot(g[x], g["mse_predicted"], "--", color=palette[method], lw=1)
            ax.plot([], [], "--", color="grey", label="eq (9) (dashed)")
        elif metric == "epsilon":
            sel = rows[rows["metric"].isin(["epsilon", "epsilon_paper"])
                       & (rows["method"] != "nash")].assign(
                method=lambda f: f["method"].map(LABELS),
                accounting=lambda f: f["metric"].map({"epsilon": "exact (analytic)",
                                                      "epsilon_paper": "eq (3) (paper)"}))
            sns.lineplot(sel, x=x, y="value", hue="method", style="accounting", marker="o",
                         ax=ax, errorbar=None, palette=palette)
        else:
            sel = rows[rows["metric"] == metric].assign(method=lambda f: f["method"].map(LABELS))
            sns.lineplot(sel, x=x, y="value", hue="method", style=style, marker="o", ax=ax,
                         errorbar=("se", 2), palette=palette)
        ax.set(yscale="log", xlabel=x, ylabel=YLABELS.get(metric, metric))
        _legend_outside(ax)
    fig.tight_layout()
    return fig


def properties(rows: pd.DataFrame) -> plt.Figure:
    """E1-E4 per population: the PoA measured against Theorem 5's closed form and bound, and the
    truthfulness gain, fairness spread and participation margin against their claimed zero."""
    v = rows.pivot_table(index="population", columns="metric", values="value").reset_index()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    ax.plot(v["population"], v["poa_measured"], "o", label="measured (learned profile)")
    ax.plot(v["population"], v["poa_predicted"], "x", ms=10, label="closed form (Theorem 5)")
    ax.plot(v["population"], v["poa_bound"], "_", ms=18, mew=2,
            label="bound max beta / min beta")
    ax.axhline(1.0, linestyle=":", color="grey", label="PoA = 1")
    ax.set(yscale="log", xlabel="population", ylabel="price of anarchy",
           title="Efficiency (E4)")
    _integer_ticks(ax)
    _legend_outside(ax)
    ax = axes[1]
    long = v.melt(id_vars="population", value_vars=["truthful_max_gain", "fairness_spread",
                                                     "participation_min_margin"])
    long["metric"] = long["metric"].map({
        "truthful_max_gain": "E1 truthfulness: best misreport gain (claim <= 0)",
        "fairness_spread": "E2 fairness: cost spread / mean (claim = 0)",
        "participation_min_margin": "E3 participation: leave - stay (claim > 0)"})
    sns.barplot(long, x="population", y="value", hue="metric", ax=ax)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(xlabel="population", ylabel="measured",
           title="Truthfulness, fairness, participation (claims relative to 0)")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def attack(rows: pd.DataFrame) -> plt.Figure:
    """sar-attack: each measured rate (2 pooled SE) beside its theory (dashed tick)."""
    names = ["success_rate", "exposed_fraction", "whole_vector_exposure"]
    table = pd.concat([pooled(rows, n).rename(columns={n: "measured", f"{n}_se": "se",
                                                       f"{n}_predicted": "theory"})
                       .assign(rate=n) for n in names], ignore_index=True)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    xs = np.arange(len(table))
    ax.errorbar(xs, table["measured"], yerr=2 * table["se"], fmt="o", capsize=4,
                label="measured (2 SE)")
    ax.hlines(table["theory"], xs - 0.3, xs + 0.3, colors="C1", linestyles="--",
              label="theory (eq 31 / corrected eq 32)")
    ax.set_xticks(xs, [f"{r}\n({m})" for r, m in zip(table["rate"], table["method"],
                                                    strict=True)], fontsize="small")
    ax.set(ylabel="rate per round", title="Collusion attack on one victim")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def measured_vs_predicted(rows: pd.DataFrame, x: str, metric: str,
                          hue: str | None = None) -> plt.Figure:
    """Measured rate (markers, 2 pooled SE) and theory (dashed) against ``x``, per attacker."""
    by = [x] + ([hue] if hue and hue != x else [])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, attacker in zip(axes, ("weak", "strong"), strict=True):
        table = pooled(rows[rows["attacker"] == attacker], metric, by)
        groups = table.groupby(by[1:]) if len(by) > 1 else [(None, table)]
        colours = sns.color_palette("viridis", n_colors=max(len(groups), 1))
        for colour, (key, g) in zip(colours, groups, strict=True):
            g = g.sort_values(x)
            name = "" if key is None else f"{hue}={key[0] if isinstance(key, tuple) else key}"
            ax.errorbar(g[x], g[metric], yerr=2 * g[f"{metric}_se"], fmt="o", color=colour,
                        capsize=3, label=f"measured {name}".strip())
            ax.plot(g[x], g[f"{metric}_predicted"], "--", color=colour, lw=1)
        ax.plot([], [], "--", color="grey", label="theory (dashed)")
        ax.set(title=f"{attacker} attacker", xlabel=x, ylabel=metric.replace("_", " "))
        _legend_outside(ax)
    fig.tight_layout()
    return fig


def thresholds(rows: pd.DataFrame) -> plt.Figure:
    """Fig 8: the colluder threshold p_k vs K, and the failure rate measured at it against the
    target 1/K^2."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    sel = rows[rows["metric"] == "threshold"]
    sns.lineplot(sel, x="K", y="value", hue="attacker", marker="o", ax=axes[0], errorbar=None)
    axes[0].set(xscale="log", yscale="log", xlabel="K", ylabel="p_k (failure <= 1/K^2)",
                title="Thresholds (eq 33; strong by root finding)")
    _legend_outside(axes[0])
    ax = axes[1]
    for colour, attacker in zip(("C0", "C1"), ("weak", "strong"), strict=True):
        t = pooled(rows[rows["attacker"] == attacker], "success_rate", ["K"]).sort_values("K")
        ax.errorbar(t["K"], t["success_rate"], yerr=2 * t["success_rate_se"], fmt="o",
                    color=colour, capsize=3, label=f"measured at p_k ({attacker})")
    k = np.sort(rows["K"].unique())
    ax.plot(k, 1.0 / k**2, "--", color="grey", label="target 1/K^2")
    ax.set(xscale="log", yscale="log", xlabel="K", ylabel="failure rate",
           title="Failure rate at the threshold")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def participation(rows: pd.DataFrame) -> plt.Figure:
    """Participants and attack success per round, a colour per p (line style: attacker). The
    theory, dotted in the same colour: the largest K whose threshold admits p (left) and the
    failure probability of eq (31) / corrected eq (32) at each round's participation (right)."""
    from privgames.mechanisms.sar import failure_probability

    ps = sorted(rows["p"].unique())
    palette = dict(zip(ps, sns.color_palette("viridis", n_colors=len(ps)), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    wide = rows.pivot_table(index=["p", "attacker", "population", "round"], columns="metric",
                            values="value").reset_index()
    wide["theory"] = [failure_probability(int(k), p, a) if k >= 3 else np.nan for k, p, a in
                      zip(wide["participants"], wide["p"], wide["attacker"], strict=True)]
    for ax, metric in zip(axes, ("participants", "success_rate"), strict=True):
        sns.lineplot(wide, x="round", y=metric, hue="p", style="attacker", ax=ax,
                     palette=palette, errorbar=None)
        ax.set(xlabel="round", ylabel=metric.replace("_", " "))
        _integer_ticks(ax)
    for (p, attacker), g in wide.groupby(["p", "attacker"]):
        axes[1].plot(*zip(*g.groupby("round")["theory"].mean().items(), strict=True), ":",
                     color=palette[p], lw=1.2)
        admitted = rows[(rows["metric"] == "predicted_largest_admitting_K") & (rows["p"] == p)
                        & (rows["attacker"] == attacker)]["value"]
        if not admitted.empty:
            axes[0].axhline(admitted.iloc[0], linestyle=":", color=palette[p], lw=1.2)
    for ax in axes:
        ax.plot([], [], ":", color="grey", label="theory (dotted)")
        _legend_outside(ax)
    axes[0].set_title("participants (dotted: largest K admitting p)")
    axes[1].set_title("attack success (dotted: eq 31 / 32 at the participation)")
    fig.tight_layout()
    return fig


def ring_error(rows: pd.DataFrame) -> plt.Figure:
    """Estimator error sum_i |y_i - sum s| per step: measured (mean over replications and
    populations), the exact prediction (dashed) and Theorem 1's asymptotic bound (dotted)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for metric, style, label in (("error", "-", "measured"),
                                 ("error_predicted", "--", "exact formula")):
        sel = rows[rows["metric"] == metric]
        if not sel.empty:
            mean = sel.groupby("step")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), style, label=label)
    bound = rows.loc[rows["metric"] == "utility_bound", "value"]
    if not bound.empty:
        ax.axhline(bound.iloc[0], linestyle=":", color="grey", label="Theorem 1 bound")
    ax.set(yscale="log", xlabel="step k", ylabel="sum_i |y_i(k) - sum s|")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def example2(rows: pd.DataFrame) -> plt.Figure:
    """Figs 2-3 of the PPSP paper: estimates y_i(k) beside the active nodes' sum (dashed), and
    the summed error with the leave and the join marked (dotted)."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    y = rows[(rows["metric"] == "y") & (rows["population"] == 0)].pivot_table(
        index="step", columns="node", values="value")
    steps = rows.loc[rows["metric"] == "error", "step"].drop_duplicates().sort_values()
    axes[0].plot(y.reindex(steps).index, y.reindex(steps).to_numpy(), lw=0.8)  # gaps: absent
    target = rows[(rows["metric"] == "target") & (rows["population"] == 0)].sort_values("step")
    axes[0].plot(target["step"], target["value"], "k--", lw=1.2, label="sum of active secrets")
    axes[0].set(ylim=(0, 1000), xlabel="step k", ylabel="y_i(k)",
                title="estimates (replication 0, one line per node)")
    _legend_outside(axes[0])
    err = rows[rows["metric"] == "error"].groupby("step")["value"].mean()
    axes[1].plot(err.index, err.to_numpy(), lw=1, label="measured")
    events = rows.loc[rows["metric"] == "event", "value"].unique()
    for i, step in enumerate(sorted(events)):
        axes[1].axvline(step, linestyle=":", color="grey",
                        label="leave / join" if i == 0 else None)
    axes[1].set(yscale="log", xlabel="step k", ylabel="sum_i |y_i - sum s|",
                title="error (mean over replications)")
    _legend_outside(axes[1])
    fig.tight_layout()
    return fig


def theory_vs_measured(rows: pd.DataFrame, x: str, theory: str, measured: str,
                       yscale: str = "log") -> plt.Figure:
    """A theoretical quantity (dashed) and its measured counterpart (markers, 2 pooled SE where
    the measurement is a Monte-Carlo mean) against ``x``, a colour per method."""
    fig, ax = plt.subplots(figsize=(7, 4))
    has_se = (rows["metric"] == f"{measured}_var").any()
    for colour, (method, g) in zip(sns.color_palette(), rows.groupby("method"), strict=False):
        t = g[g["metric"] == theory].groupby(x)["value"].mean()
        ax.plot(t.index, t.to_numpy(), "--", color=colour, label=f"{theory} ({method})")
        if has_se:
            m = pooled(g, measured, [x], theory=theory.removeprefix(f"{measured}_"))
            ax.errorbar(m[x], m[measured], yerr=2 * m[f"{measured}_se"], fmt="o",
                        color=colour, capsize=3, label=f"{measured} ({method}, 2 SE)")
        else:
            m = g[g["metric"] == measured].groupby(x)["value"].max()
            ax.plot(m.index, m.to_numpy(), "o", color=colour, label=f"{measured} ({method})")
    ax.set(xscale="log", yscale=yscale, xlabel=x,
           ylabel=f"{measured} (markers) vs {theory} (dashed)")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def tradeoff(rows: pd.DataFrame) -> plt.Figure:
    """Theorem 4: c from the cubic (line) and from numerical minimisation (markers) vs gamma_p,
    a colour per K."""
    wide = rows.pivot_table(index=["gamma_p", "K"], columns="metric", values="value")
    wide = wide.reset_index()
    fig, ax = plt.subplots(figsize=(7, 4))
    for colour, (k, g) in zip(sns.color_palette(n_colors=wide["K"].nunique()),
                              wide.groupby("K"), strict=True):
        ax.plot(g["gamma_p"], g["c_cubic"], "-", color=colour, label=f"cubic, K={k}")
        ax.plot(g["gamma_p"], g["c_numeric"], "o", mfc="none", color=colour,
                label=f"numerical, K={k}")
    ax.set(xscale="log", yscale="log", xlabel="gamma_p (privacy weight)",
           ylabel="optimal c", title="Theorem 4: cubic root vs numerical minimum")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def learned_c(rows: pd.DataFrame) -> plt.Figure:
    """Each node's c per best-response round (population 0), per weighting, with Theorem 4's
    optimum for the summed weights (dashed, same colour)."""
    sel = rows[(rows["metric"] == "c") & (rows["population"] == 0)]
    methods = sorted(sel["method"].unique())
    palette = dict(zip(methods, sns.color_palette(n_colors=len(methods)), strict=True))
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(sel, x="round", y="value", hue="method", units="node", estimator=None, ax=ax,
                 lw=0.8, palette=palette)
    optimum = rows[(rows["metric"] == "optimal_c") & (rows["population"] == 0)]
    for _, r in optimum.iterrows():
        ax.axhline(r["value"], linestyle="--", color=palette[r["method"]], lw=1.2)
    ax.plot([], [], "--", color="grey", label="Theorem 4 optimum")
    ax.set(yscale="log", xlabel="best-response round", ylabel="c_i",
           title="Nodes learning their noise scale")
    _integer_ticks(ax)
    _legend_outside(ax, "weighting")
    fig.tight_layout()
    return fig


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
    _integer_ticks(ax)
    _legend_outside(ax)
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
    _integer_ticks(ax)
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def pricing_fig1(rows: pd.DataFrame) -> plt.Figure:
    """Fig 1: social cost of the learned end point vs the variance of the types, with and
    without prices (markers, 2 SE over populations), and the true optimum (dashed); one panel
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
                     errorbar=("se", 2), err_style="bars")
        opt = sel[sel["metric"] == "optimal_social_cost"].groupby("variance")["value"].mean()
        ax.plot(opt.index, opt.to_numpy(), "k--", label="true optimum")
        ax.set(yscale="log", xlabel="variance of alpha", ylabel="social cost (eq 6)",
               title=f"{rule} aggregation")
        _legend_outside(ax)
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
    _legend_outside(ax)
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
    _legend_outside(ax)
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
    _legend_outside(ax)
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
        _integer_ticks(ax)
    bound = rows[(rows["metric"] == "bound") & (rows["sigma_high"] == rows["sigma_high"].max())]
    for colour, (_, g) in zip(sns.color_palette(), bound.groupby("method", sort=False),
                                 strict=False):
        axes[1].axhline(g["value"].mean(), linestyle=":", color=colour)
    axes[1].plot([], [], ":", color="grey", label="eq (9) bound (largest spread)")
    axes[1].set(yscale="log")
    for ax in axes:
        _legend_outside(ax)
    fig.tight_layout()
    return fig


def budget_noise(rows: pd.DataFrame) -> plt.Figure:
    """Table 2: simulated total noise per strategy (markers, 2 pooled SE), the expectation
    sum_i 2/eps_i^2 (dashed ticks) and the printed values (crosses); one panel per N."""
    from privgames.analysis.budget import TABLE2, TABLE2_EPSILON

    epsilon = float(rows["epsilon"].iloc[0]) if "epsilon" in rows else TABLE2_EPSILON
    table = pooled(rows, "mse", ["N"])
    ns = sorted(table["N"].unique())
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 4.2), squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        t = table[table["N"] == n].reset_index(drop=True)
        x = np.arange(len(t))
        ax.errorbar(x, t["mse"], yerr=2 * t["mse_se"], fmt="o", label="simulated (2 SE)")
        ax.scatter(x, t["mse_predicted"], marker="_", s=600, color="black",
                   label="sum 2/eps_i^2")
        if epsilon == TABLE2_EPSILON:  # the printed values are for that budget only
            printed = [TABLE2.get((m, int(n)), np.nan) for m in t["method"]]
            ax.scatter(x, printed, marker="x", color="C3", label="printed (Table 2)")
        ax.set_xticks(x, t["method"], rotation=45, ha="right")
        ax.set(yscale="log", title=f"N = {n}", ylabel="mean total squared noise")
    _legend_outside(axes[0][-1])
    fig.suptitle(f"Table 2: total noise of N sum queries (eps = {epsilon:g})")
    fig.tight_layout()
    return fig


def budget_us_bounds(rows: pd.DataFrame) -> plt.Figure:
    """Tables 3-5: the U_s interval per N as computed (lines) and as printed (markers), one
    panel per table; Lemma 3's literal upper end is off the scale and left out."""
    tables = sorted(rows["table"].unique())
    fig, axes = plt.subplots(1, len(tables), figsize=(4.6 * len(tables), 4.2), squeeze=False)
    for ax, t in zip(axes[0], tables, strict=True):
        w = rows[rows["table"] == t].pivot_table(index="N", columns="metric", values="value")
        for end, colour in (("low", "C0"), ("high", "C1")):
            ax.plot(w.index, w[end], "-", color=colour, label=f"{end} (computed)")
            ax.plot(w.index, w[f"printed_{end}"], "o", color=colour, mfc="none",
                    label=f"{end} (printed)")
        if "high_floor_t" in w:
            ax.plot(w.index, w["high_floor_t"], ":", color="grey",
                    label="high, t = e^(1 - floor(n/2))")
        method = rows[rows["table"] == t]["method"].iloc[0]
        eps = rows[rows["table"] == t]["epsilon"].iloc[0]
        ax.set(xlabel="total iterations N", ylabel="U_s",
               title=f"Table {t}: {method}, eps = {eps}")
        _integer_ticks(ax)
    _legend_outside(axes[0][-1])
    fig.tight_layout()
    return fig


def budget_kmeans(rows: pd.DataFrame) -> plt.Figure:
    """Figs 10-14: the DP k-means score vs total iterations per method (2 pooled SE), and its
    standard deviation over repetitions."""
    score = "f1" if (rows["metric"] == "f1").any() else "nivc"
    table = pooled(rows, score, ["iterations"])
    sd = rows[rows["metric"] == f"{score}_sd"]
    methods = list(dict.fromkeys(table["method"]))
    colours = dict(zip(methods, sns.color_palette("tab20", len(methods)), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.4))
    for method, g in table.groupby("method", sort=False):
        g = g.sort_values("iterations")
        axes[0].errorbar(g["iterations"], g[score], yerr=2 * g[f"{score}_se"], marker="o",
                         capsize=2, label=method, linestyle="--" if "/" in method else "-",
                         color=colours[method])
    sns.lineplot(sd, x="iterations", y="value", hue="method", marker="o", ax=axes[1],
                 errorbar=None, legend=False, palette=colours)
    label = "weighted F1 (higher is better)" if score == "f1" else "NIVC (lower is better)"
    axes[0].set(xlabel="total iterations N", ylabel=label, title="DP k-means per strategy")
    axes[1].set(xlabel="total iterations N", ylabel=f"SD of {score} over repetitions",
                title="Stability (Fig 14)")
    for ax in axes:
        _integer_ticks(ax)
    _legend_outside(axes[0], "method")
    fig.tight_layout()
    return fig


def budget_collusion(rows: pd.DataFrame) -> plt.Figure:
    """The colluders' error on the most-budgeted query per method (bars: measured, 2 pooled
    SE; black ticks: what the budgets predict); higher is safer."""
    t = pooled(rows, "attack_mse").reset_index(drop=True)
    x = np.arange(len(t))
    fig, ax = plt.subplots(figsize=(9, 4.4))
    ax.bar(x, t["attack_mse"], yerr=2 * t["attack_mse_se"], color="C0", alpha=0.8,
           label="attack MSE (measured, 2 SE)")
    ax.scatter(x, t["attack_mse_predicted"], marker="_", s=500, color="black",
               label="predicted from the budgets")
    ax.set_xticks(x, t["method"], rotation=45, ha="right")
    ax.set(yscale="log", ylabel="pooled estimate's squared error",
           title="Collusion (section 6.1): the attack's error per strategy/protection")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def budget_analysts(rows: pd.DataFrame) -> plt.Figure:
    """The analysts' cumulative regret against the offline-best strategy per round (one line
    per task), and the share ending with each strategy."""
    path = rows[rows["metric"] == "regret"]
    fav = rows[rows["metric"] == "favourite_share"]
    tasks = sorted(path["task"].unique())
    fig, axes = plt.subplots(1, len(tasks) + 1, figsize=(4.6 * (len(tasks) + 1), 4.2))
    for ax, task in zip(axes[:-1], tasks, strict=True):
        sel = path[path["task"] == task]
        sns.lineplot(sel, x="round", y="value", ax=ax, errorbar=None)
        # linear below 1% of the largest regret: the early rounds' jump and the late growth
        # both show, with labelled decades over the panel's own range
        ax.set_yscale("symlog", linthresh=max(float(sel["value"].max()) / 100, 1e-9))
        ax.set(xlabel="round", ylabel="mean cumulative regret", ylim=(0, None),
               title=f"{task}: regret (offline best {sel['best'].iloc[0]})")
    sns.barplot(fav, x="arm", y="value", hue="task", ax=axes[-1], errorbar=None)
    axes[-1].set(xlabel="", ylabel="share of analysts", title="strategy they end with")
    axes[-1].tick_params(axis="x", rotation=45)
    _legend_outside(axes[-1], "task")
    fig.tight_layout()
    return fig


def apes_training(rows: pd.DataFrame) -> plt.Figure:
    """Test accuracy per round per framework (mean over populations), and the final accuracy
    beside each framework's central epsilon (the Table 3 analogue)."""
    per_round = rows[(rows["metric"] == "test_accuracy") & rows["round"].notna()]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    sns.lineplot(per_round, x="round", y="value", hue="method", ax=axes[0], errorbar=None)
    axes[0].set(xlabel="round", ylabel="test accuracy", title="Training")
    _integer_ticks(axes[0])
    final = pooled(rows, "accuracy")
    eps = rows[rows["metric"] == "eps_central"].groupby("method")["value"].mean()
    x = np.arange(len(final))
    axes[1].errorbar(x, final["accuracy"], yerr=2 * final["accuracy_se"], fmt="o")
    axes[1].set_xticks(x, [f"{m}\neps_c={eps[m]:.3g}" for m in final["method"]], fontsize="small",
                       rotation=30, ha="right")
    axes[1].set(ylabel="final test accuracy (2 SE)", title="Accuracy and central epsilon")
    _legend_outside(axes[0], "framework")
    fig.tight_layout()
    return fig


def apes_sweep(rows: pd.DataFrame, x: str, label: str, logx: bool) -> plt.Figure:
    """Final test accuracy (2 pooled SE) vs a swept parameter, one line per method (or
    sparsification)."""
    by = [x, "sparsify"] if "sparsify" in rows.columns and rows["sparsify"].nunique() > 1 \
        else [x]
    table = pooled(rows, "accuracy", by)
    hue = "sparsify" if len(by) == 2 else "method"
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, g in table.groupby(hue):
        g = g.sort_values(x)
        ax.errorbar(g[x], g["accuracy"], yerr=2 * g["accuracy_se"], marker="o", capsize=2,
                    label=str(name))
    ax.set(xlabel=label, ylabel="final test accuracy (2 SE)", xscale="log" if logx else "linear")
    _legend_outside(ax, hue)
    fig.tight_layout()
    return fig


def apes_bounds(rows: pd.DataFrame) -> plt.Figure:
    """Fig 2(a): central epsilon vs n, one panel per budget distribution; solid: numerical
    (the clone reduction evaluated exactly), dashed: the printed closed forms."""
    eps = rows[rows["metric"] == "eps_central"]
    dists = sorted(eps["distribution"].unique())
    fig, axes = plt.subplots(1, len(dists), figsize=(4.4 * len(dists), 4.2), squeeze=False,
                             sharey=True)
    colours = {"baseline": "C0", "eon": "C1", "erlingsson19": "C2"}
    for ax, dist in zip(axes[0], dists, strict=True):
        sel = eps[eps["distribution"] == dist]
        for method, g in sel.groupby("method"):
            bound, form = method.split("/")
            g = g.groupby("n")["value"].mean()
            ax.plot(g.index, g.to_numpy(), "-" if form == "numerical" else "--", marker="o",
                    color=colours[bound], label=method)
        ax.set(xscale="log", yscale="log", xlabel="users n", title=dist)
    axes[0][0].set_ylabel("central epsilon (dimension level)")
    _legend_outside(axes[0][-1], "bound/form")
    fig.tight_layout()
    return fig


def apes_audit(rows: pd.DataFrame) -> plt.Figure:
    """The audit's interval (Clopper-Pearson) beside the upper bounds, per n."""
    wide = rows.pivot_table(index="n", columns="metric", values="value").sort_index()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    x = np.arange(len(wide))
    lo, hi = wide["audit_eps_lower"], wide["audit_eps_upper"].clip(upper=10)
    ax.bar(x, hi - lo, bottom=lo, width=0.35, color="C0", alpha=0.6,
           label="audit: Clopper-Pearson interval")
    ax.scatter(x, wide["audit_eps_estimate"], color="C0", marker="o", label="audit estimate")
    for key, style, label in (("eon_numerical", "C1_", "EoN (numerical)"),
                              ("eon_closed", "C1x", "EoN (closed)"),
                              ("baseline_numerical", "C2_", "baseline (numerical)")):
        ax.plot(x, wide[key], style, markersize=25 if style.endswith("_") else 8,
                linestyle="none", label=label)
    ax.set_xticks(x, [f"n = {int(n)}" for n in wide.index])
    ax.set(ylim=(0, None), ylabel="central epsilon (dimension level)",
           title="Empirical lower vs upper bounds")
    _legend_outside(ax)
    fig.tight_layout()
    return fig


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
