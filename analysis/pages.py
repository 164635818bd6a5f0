"""One interactive page per environment: its inputs, its agents drawn, its live measurement
beside the theory, and the numbers it shows.

The page server (:mod:`privgames.analysis.viz`) wraps each :class:`Page` in Mesa's SolaraViz;
this module needs neither Solara nor a browser, so every drawing and reading is tested and
timed in-process. The inputs are generated from the config's validators
(:func:`privgames.analysis.parameters.allowed_values`), so a page accepts exactly what
``--set`` accepts; a value the config refuses gives a model that shows the config's one-line
message instead of a drawing (:class:`PageModel`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
import mesa
import numpy as np
from matplotlib.figure import Figure

from privgames.analysis.cli import UsageError, parse_value
from privgames.analysis.page_server import DATA_ENV
from privgames.analysis.parameters import allowed_values, meanings
from privgames.environments.apes import APESConfig, APESModel
from privgames.environments.bas_chain import BASChainConfig, BASChainModel
from privgames.environments.config import ConfigError
from privgames.environments.dp_kmeans import DPKMeansModel, KMeansConfig
from privgames.environments.kmeans_data import BUILT_IN
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.ppsp_ring import PPSPConfig, PPSPModel
from privgames.environments.pricing_fl import PricingConfig, PricingFLModel
from privgames.environments.sar import SARConfig, SARModel
from privgames.mechanisms.pricing import social_cost

#: A page's figure size (inches) and resolution: readable in a half-width panel.
FIGSIZE, DPI = (6.4, 3.6), 80
THEORY = dict(color="black", linestyle="--", linewidth=1.2)
#: At most this many CSV files of ``--data DIR`` are offered on the kmeans page.
MAX_DATA_FILES = 200


@dataclass(frozen=True)
class Page:
    """An environment as a page.

    Attributes:
        route: its address (``/route``) and the name ``privgames viz`` takes.
        title: the page's heading.
        model_type, config_type: the environment and its validated config.
        inputs: the config fields the page lets the user set, in order.
        fixed: the page's starting values where they differ from the config's defaults
            (sizes that step quickly and show the dynamics).
        display_max: a slider's right end where the validator sets none (``--set`` still
            takes larger values).
        agents: the model -> a figure of its agents.
        measures: the model -> a figure of its measurement beside the theory.
        readings: the model -> the numbers the page prints (label -> value).
    """

    route: str
    title: str
    model_type: type
    config_type: type
    inputs: tuple[str, ...]
    agents: Callable[[Any], Figure]
    measures: Callable[[Any], Figure]
    readings: Callable[[Any], dict[str, float]]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    display_max: Mapping[str, float] = field(default_factory=dict)
    choices: Mapping[str, Callable[[], tuple[str, ...]]] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """Every config field's starting value: the config's default, or the page's."""
        return {**{f.name: f.default for f in dataclasses.fields(self.config_type)},
                **self.fixed}

    def defaults(self) -> dict[str, Any]:
        """Every input's starting value."""
        values = self.values()
        return {name: values[name] for name in self.inputs}

    def model_params(self) -> dict[str, dict[str, Any]]:
        """Mesa's ``model_params``: a slider for a bounded number, a select for a choice, a
        checkbox for a flag, a text box (JSON) for anything else; each with its range from
        the config's validator and its meaning as the label's tooltip-free suffix."""
        values = self.values()
        meaning = meanings(self.config_type)
        optional = {f.name for f in dataclasses.fields(self.config_type)
                    if "None" in str(f.type)}
        out: dict[str, dict[str, Any]] = {"seed": {"type": "SliderInt", "value": 0, "min": 0,
                                                   "max": 99, "step": 1, "label": "seed"}}
        for name, value in self.defaults().items():
            allowed = allowed_values(self.config_type, name, values)
            text = meaning[name].replace("``", "")
            label = f"{name}: {text}" if len(text) <= 40 else name
            kind = allowed.kind if allowed is not None and value is not None else "text"
            if name in optional and kind in ("int", "real"):  # a slider cannot say "none"
                kind, label = "text", f"{label} (null: none)"
            if name in self.choices:
                out[name] = {"type": "Select", "value": value,
                             "values": list(self.choices[name]()), "label": label}
            elif kind == "choice":
                out[name] = {"type": "Select", "value": value, "values": list(allowed.choices),
                             "label": label}
            elif kind == "bool":
                out[name] = {"type": "Checkbox", "value": value, "label": label}
            elif kind in ("int", "real") and not isinstance(value, str):
                out[name] = self._slider(name, value, allowed, label)
            else:
                out[name] = {"type": "InputText", "value": json.dumps(value), "label": label}
        return out

    def _slider(self, name: str, value: float, allowed: Any, label: str) -> dict[str, Any]:
        integer = allowed.kind == "int"
        low = allowed.low if allowed.low is not None else 0.0
        high = allowed.high if allowed.high is not None else self.display_max.get(
            name, max(4.0 * value, low + 1.0))
        if integer:
            low, high = int(low) + allowed.low_open, int(high) - allowed.high_open
            return {"type": "SliderInt", "value": int(value), "min": low, "max": high,
                    "step": 1, "label": label}
        step = (high - low) / 100.0
        low += step * allowed.low_open
        high -= step * allowed.high_open
        return {"type": "SliderFloat", "value": float(value), "min": low, "max": high,
                "step": step, "label": label}


class PageModel(mesa.Model):
    """The Mesa model a page drives: the page's environment built from the inputs, or, when the
    config refuses them, no environment and the config's message (``error``).

    Attributes:
        page: the :class:`Page` (set on each page's subclass).
        env: the environment (``None`` on an error); ``error``: the message or ``None``.
    """

    page: Page

    def __init__(self, seed: int = 0, **kwargs: Any) -> None:  # Mesa checks the name kwargs
        super().__init__(seed=seed)
        self.seed = seed
        self.error: str | None = None
        self.env = None
        try:
            for name, choices in self.page.choices.items():  # a page's browser is untrusted
                if name in kwargs and kwargs[name] not in choices():
                    raise ConfigError(f"{name}={kwargs[name]!r} is not offered on this page: "
                                      f"{name} must be one of {', '.join(choices())}")
            values = {**self.page.fixed, **{k: parse_value(k, v) if isinstance(v, str) else v
                                            for k, v in kwargs.items()}}
            self.env = self.page.model_type(self.page.config_type(**values), seed)
        except (ConfigError, UsageError) as err:
            self.error = str(err)
            self.running = False

    def step(self) -> None:
        """One round of the environment (nothing while the inputs are refused); the page stops
        when the environment settles or ends."""
        if self.env is None or not self.running:
            return
        self.env.step()
        self.running = (self.env.running and self.env.rounds_left() > 0
                        and not getattr(self.env, "ended", False))

    @classmethod
    def of(cls, page: Page) -> type[PageModel]:
        """The model class of ``page`` (what SolaraViz instantiates on reset)."""
        return type(f"{page.title.replace(' ', '')}Model", (cls,), {"page": page})


def page_data_sets() -> tuple[str, ...]:
    """The data sets the kmeans page may load: the shipped ones, and the CSV files under the
    folder ``privgames viz --data DIR`` names (no other path ever reaches the server)."""
    folder = os.environ.get(DATA_ENV)
    found = sorted(str(p) for p in Path(folder).rglob("*.csv")) if folder else []
    return (*BUILT_IN, *found[:MAX_DATA_FILES])


def format_reading(value: float) -> str:
    """A number as the page prints it (six significant digits; counts as integers)."""
    if isinstance(value, int | np.integer):
        return str(int(value))
    return f"{float(value):.6g}"


def _figure(ncols: int = 1) -> tuple[Figure, Any]:
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    return fig, fig.subplots(1, ncols)


def _integer_x(*axes: Any) -> None:
    for ax in axes:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def _series(env: Any, column: str) -> np.ndarray:
    frame = env.datacollector.get_model_vars_dataframe()
    return frame[column].to_numpy(dtype=float) if column in frame else np.zeros(0)


# --- BAS chain (chained-dp-bas-sar.txt, Theorem 1) --------------------------------------------
def bas_agents(env: BASChainModel) -> Figure:
    """Users in sequence order, each a disc coloured by its learned noise sigma^2, the NE's
    sigma^2 of the same position as a black tick."""
    fig, ax = _figure()
    learned, nash = env.learned(), env.predicted()["nash"]
    x = np.arange(1, learned.size + 1)
    scale = max(float(nash.max()), float(learned.max()), 1e-12)
    dots = ax.scatter(x, learned, c=learned, cmap="viridis", vmin=0, vmax=scale, s=60,
                      edgecolors="black", linewidths=0.4, zorder=3, label="learned σ²")
    ax.scatter(x, nash, marker="_", s=200, color="black", zorder=4, label="NE σ² (Theorem 1)")
    if len(env.sequences) > 1:
        for end in np.cumsum([s.size for s in env.sequences])[:-1]:
            ax.axvline(end + 0.5, color="grey", linewidth=0.8)
    fig.colorbar(dots, ax=ax, label="σ²")
    ax.set(xlabel="position in the chain (BAS order)", ylabel="noise variance σ²",
           title=f"{learned.size} users after round {env.steps}")
    ax.legend(loc="upper right", fontsize="small")
    _integer_x(ax)
    return fig


def bas_measures(env: BASChainModel) -> Figure:
    fig, ax = _figure()
    distance = _series(env, "distance")
    ax.plot(np.arange(1, distance.size + 1), distance, marker="o", markersize=3,
            label="learned profile")
    ax.axhline(0.0, **THEORY, label="NE (Theorem 1)")
    ax.axhline(env.config.tolerance, color="grey", linewidth=0.8, label="tolerance")
    ax.set(xlabel="round", ylabel="distance to the NE (relative)",
           title="distance to the Nash equilibrium")
    _integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def bas_readings(env: BASChainModel) -> dict[str, float]:
    leader = int(env.order[0])
    return {"rounds": env.steps, "σ² of the first user": env.users[leader].sigma2,
            "NE σ² of the first user": float(env.predicted()["nash"][0]),
            "total σ²": float(env.learned().sum()),
            "distance to the NE": env.distance()}


# --- SAR (chained-dp-bas-sar.txt, section VI, eq 31-33) -----------------------------------------
def sar_agents(env: SARModel) -> Figure:
    """Each slice's chain (rows) of the last round: colluders red, honest users whose slice the
    coalition reconstructed orange, the others green; users who opted out are listed."""
    fig, ax = _figure()
    attack = env.attack
    if attack is None:  # before the first round, or after the last: nobody is attacked
        taking_part = np.array([u.participating for u in env.users], dtype=float)[None]
        cmap = matplotlib.colors.ListedColormap(["#bdbdbd", "#4daf4a"])
        ax.imshow(taking_part, cmap=cmap, vmin=0, vmax=1, aspect="auto",
                  interpolation="nearest")
        title = (f"round {env.steps}: fewer than 3 participants left, the run has ended"
                 if env.ended else f"{env.config.K} users before round 1: press Step")
        ax.set(xlabel="user", yticks=[], title=title)
        ax.legend(handles=[matplotlib.patches.Patch(color=cmap(i), label=text) for i, text in
                           enumerate(("opted out", "taking part"))],
                  loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize="small")
        return fig
    order, colluding, success = attack["order"], attack["colluding"], attack["success"]
    broken = np.zeros(colluding.size, dtype=bool)[None].repeat(order.shape[0], axis=0)
    broken[:, attack["victims"]] = success.T
    state = np.where(colluding[order], 2, np.take_along_axis(broken, order, axis=1))
    cmap = matplotlib.colors.ListedColormap(["#4daf4a", "#ff7f00", "#e41a1c"])
    ax.imshow(state, cmap=cmap, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
    ax.set(xlabel="position in the slice's chain", ylabel="slice",
           title=f"round {env.steps}: {int(colluding.sum())} colluders of {colluding.size} "
                 f"participants; opted out: {env.config.K - colluding.size}")
    handles = [matplotlib.patches.Patch(color=cmap(i), label=text) for i, text in
               enumerate(("honest, safe", "honest, slice reconstructed", "colluder"))]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3,
              fontsize="small")
    return fig


def sar_predicted(env: SARModel, participants: float) -> float:
    """Eq (31)/(32) (corrected) at ``participants`` users."""
    if not participants >= 3:
        return math.nan
    return dataclasses.replace(env.config, K=int(participants)).predicted()["failure_probability"]


def sar_measures(env: SARModel) -> Figure:
    fig, ax = _figure()
    rate, k = _series(env, "success_rate"), _series(env, "participants")
    rounds = np.arange(1, rate.size + 1)
    ax.plot(rounds, rate, marker="o", markersize=3, label="measured success per slice")
    ax.plot(rounds, [sar_predicted(env, n) for n in k], **THEORY,
            label=f"eq ({'31' if env.config.attacker == 'weak' else '32'}) at the participants")
    ax.set(xlabel="round", ylabel="attack success", title="attack success against the theory",
           ylim=(-0.02, 1.02))
    _integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def sar_readings(env: SARModel) -> dict[str, float]:
    stats = env.round_stats
    return {"rounds": env.steps, "participants": stats.get("participants", env.config.K),
            "attack success": stats.get("success_rate", math.nan),
            "eq (31)/(32)": sar_predicted(env, stats.get("participants", env.config.K))}


# --- PPSP ring (ppsp-ring-summation.txt, Theorems 1-2) -----------------------------------------
def ppsp_agents(env: PPSPModel) -> Figure:
    """Nodes on a circle in ring order with their state (colour) and estimate of the sum
    (label); a node that left is drawn hollow outside the ring."""
    fig, ax = _figure()
    ids = env.ids
    angle = 2 * np.pi * np.arange(ids.size) / ids.size
    state = env.state[0]
    estimates = env.window.estimates[-1] if env.window.estimates else np.full(
        env.config.capacity, np.nan)
    dots = ax.scatter(np.cos(angle), np.sin(angle), c=state, cmap="coolwarm", s=220,
                      edgecolors="black", zorder=3)
    ax.plot(np.cos(np.append(angle, 0)), np.sin(np.append(angle, 0)), color="grey",
            linewidth=0.8, zorder=1)
    show = ids.size <= 24
    for i, (node, a) in enumerate(zip(ids, angle, strict=True)):
        if show or i == 0:
            ax.annotate(f"{node}: y={estimates[node]:.4g}", (1.28 * np.cos(a), 1.28 * np.sin(a)),
                        ha="center", va="center", fontsize=7)
    gone = sorted(set(range(env.config.capacity)) - set(ids.tolist()))
    for j, node in enumerate(gone):
        ax.scatter([1.75], [1.2 - 0.3 * j], s=220, facecolors="none", edgecolors="black")
        ax.annotate(f"node {node} left", (1.75, 1.2 - 0.3 * j - 0.22), ha="center", fontsize=7)
    fig.colorbar(dots, ax=ax, label="state x_i")
    target = float(env.secrets[ids].sum())
    ax.set(xlim=(-2, 2.1), ylim=(-1.6, 1.6), aspect="equal",
           title=f"step {env.steps}: {ids.size} nodes, sum of secrets {target:.5g}")
    ax.set_axis_off()
    return fig


def ppsp_measures(env: PPSPModel) -> Figure:
    fig, ax = _figure()
    error = env.record().error.mean(axis=1) if env.steps else np.zeros(0)
    steps = np.arange(1, error.size + 1)
    ax.plot(steps, error, label=f"measured (mean of {env.config.replications} rings)")
    exact = [env.exact_error(k) for k in steps]
    c = env.config
    full = np.isfinite(exact).any()  # the formula needs full windows: from step n - 1
    ax.plot(steps, exact, **THEORY, label="exact formula (static Gaussian ring)" if full
            else f"exact formula: from step {c.n - 1} (full windows)")
    for at, what in ((c.leave_at, f"node {c.leave_node} leaves"),
                     (c.join_at, f"node {c.join_node} joins")):
        if at is not None and at < env.steps:
            ax.axvline(at + 1, color="#d95f02", linewidth=0.8, linestyle=":", label=what)
    ax.set(xlabel="step", ylabel="Σ_i |y_i − Σ secrets|", yscale="log",
           title="estimator error against the exact formula")
    ax.legend(fontsize="small")
    return fig


def ppsp_readings(env: PPSPModel) -> dict[str, float]:
    error = env.record().error if env.steps else None
    return {"steps": env.steps, "nodes": env.ids.size,
            "estimator error": math.nan if error is None else float(error[-1].mean()),
            "exact error": env.exact_error(env.steps) if env.steps else math.nan}


# --- pricing FL (pricing-fl-noise.txt, eq 10-11, Definition 4) ----------------------------------
def pricing_agents(env: PricingFLModel) -> Figure:
    """Clients by sensitivity alpha: their noise sigma (bars coloured by alpha), eq (10)'s NE
    and the social optimum as ticks (a triangle at the top where infinite); a client who opted
    out (sigma infinite) is a dotted grey bar to the top."""
    fig, ax = _figure()
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
    _integer_x(ax)
    return fig


def pricing_cost(env: PricingFLModel, sigma: np.ndarray) -> float:
    """Eq (6)'s social cost of the profile ``sigma`` in this population."""
    return social_cost(sigma, env.alpha, *env.game, env.config.aggregation)


def pricing_measures(env: PricingFLModel) -> Figure:
    fig, ax = _figure()
    cost = _series(env, "social_cost")
    ax.plot(np.arange(1, cost.size + 1), cost, marker="o", markersize=3, label="learned")
    theory = env.predicted()
    ax.axhline(pricing_cost(env, theory["optimum"]), **THEORY, label="social optimum")
    if np.all(np.isfinite(theory["eq10"])):
        ax.axhline(pricing_cost(env, theory["eq10"]), color="grey", linewidth=1,
                   label="eq (10) NE")
    ax.set(xlabel="round", ylabel="social cost", title="social cost against the optimum")
    _integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def pricing_readings(env: PricingFLModel) -> dict[str, float]:
    return {"rounds": env.steps, "σ of client 1": float(env.sigma[0]),
            "social cost": env.social_cost(),
            "optimum cost": pricing_cost(env, env.predicted()["optimum"]),
            "participants": int(np.isfinite(env.sigma).sum())}


# --- DP k-means (budget-allocation-series.txt, Algorithm 1) -------------------------------------
def kmeans_agents(env: DPKMeansModel) -> Figure:
    """The data (grey), the first repetition's centroids (red crosses) and the budget each
    iteration spends (right), the current one marked."""
    fig, (ax, bx) = _figure(2)
    points = env.points[:: max(1, env.points.shape[0] // 4000)]
    ax.scatter(points[:, 0], points[:, 1], s=2, color="grey", alpha=0.4)
    c = env.centroids[0]
    ax.scatter(c[:, 0], c[:, 1], marker="x", s=90, color="red", linewidths=2.5,
               label="centroids (repetition 1)")
    ax.set(title=f"iteration {env.steps} of {env.config.iterations}", xlabel="x₁", ylabel="x₂")
    ax.legend(fontsize="small", loc="lower left")
    budgets = env.budgets[0]
    colours = ["#d95f02" if i == env.steps - 1 else "#1b9e77" for i in range(budgets.size)]
    bx.bar(np.arange(1, budgets.size + 1), budgets, color=colours)
    bx.set(xlabel="iteration", ylabel="ε of the iteration",
           title=f"{env.config.method}: total ε {budgets.sum():.3g}")
    return fig


def kmeans_measures(env: DPKMeansModel) -> Figure:
    fig, ax = _figure()
    spent = _series(env, "epsilon_spent")
    total = env.budgets.sum(axis=1).mean()
    ax.plot(np.arange(1, spent.size + 1), spent, marker="o", label="ε spent (mean)")
    ax.axhline(total, **THEORY, label="total budget")
    ax.set(xlabel="iteration", ylabel="ε", title="budget spent against the total",
           xlim=(0.5, env.config.iterations + 0.5))
    _integer_x(ax)
    ax.legend(fontsize="small")
    return fig


def kmeans_readings(env: DPKMeansModel) -> dict[str, float]:
    scores = env.scores()
    return {"iterations": env.steps, env.score_name: float(scores.mean()),
            "ε spent": float(env.budgets[:, : env.steps].sum(axis=1).mean()),
            "last count noise var (predicted)": env.predicted()["last_count_noise_var"]}


# --- APES (apes-shuffle-clip-laplace.txt) -------------------------------------------------------
def apes_agents(env: APESModel) -> Figure:
    """The users' budgets (left) and the last round's reports of one dimension as the analyzer
    receives them, shuffled (right: report against the position it arrived in)."""
    fig, (ax, bx) = _figure(2)
    ax.hist(env.budgets, bins=30, color="#7570b3")
    ax.set(xlabel="local ε", ylabel="users", title=f"{env.budgets.size} users' budgets")
    reports = env.shuffled_reports()[:, 0]
    bx.scatter(np.arange(reports.size), reports, s=4, color="#1b9e77")
    bx.set(xlabel="arrival position (after the shuffle)", ylabel="report (dimension 1)",
           title=f"round {env.steps}: {env.config.framework}")
    return fig


def apes_measures(env: APESModel) -> Figure:
    fig, (ax, bx) = _figure(2)
    accuracy, error = _series(env, "test_accuracy"), _series(env, "gradient_error")
    rounds = np.arange(1, accuracy.size + 1)
    ax.plot(rounds, accuracy, marker="o", markersize=3)
    ax.axhline(0.1, **THEORY, label="chance (10 classes)")
    ax.set(xlabel="round", ylabel="test accuracy", title="accuracy", ylim=(0, 1))
    ax.legend(fontsize="small")
    bx.plot(rounds, error, marker="o", markersize=3, color="#d95f02")
    bx.set(xlabel="round", ylabel="gradient RMS error", title="analyzer's estimate")
    _integer_x(ax, bx)
    return fig


def apes_readings(env: APESModel) -> dict[str, float]:
    theory = env.predicted()
    return {"rounds": env.steps, "test accuracy": env.test_accuracy(),
            "central ε": float(theory["eps_central"]),
            "smallest local ε": float(env.budgets.min())}


# --- learning dynamics (the learners of issue 21) -----------------------------------------------
def learning_agents(env: LearningModel) -> Figure:
    """Each agent's current strategy (its most likely grid action) against the predicted
    equilibrium's action, agents sorted by their type (under incomplete information: each
    client's L row, then its H row; an action is a report and a noise)."""
    fig, ax = _figure()
    g = env.game
    mode, nash = env.last_iterate(), env.references[env.predicted_name]
    if env.config.game == "bas-sequential":  # the users on the path, at the states they get
        rows = g.path(mode)[0]
        mode, nash = mode[rows], nash[rows]
    index = lambda v: np.searchsorted(g.grid, v)  # noqa: E731 - the grid position of a value
    x = np.arange(1, mode.size + 1)
    ax.scatter(x, index(mode), c=index(mode), cmap="viridis", vmin=0, vmax=g.grid.size - 1,
               s=50, edgecolors="black", linewidths=0.4, label=f"{env.config.learner}")
    ax.scatter(x, index(nash), marker="_", s=200, color="black", label=env.predicted_name)
    ticks = np.linspace(0, g.grid.size - 1, min(6, g.grid.size)).astype(int)
    ax.set_yticks(ticks, [g.label(g.grid[t]) for t in ticks])
    who, xlabel = f"{mode.size} agents", "agent"
    if env.config.game == "pricing-bayes":  # rows: every client's L row, then its H row
        ax.axvline(mode.size / 2 + 0.5, color="grey", linewidth=0.8)
        who, xlabel = (f"{mode.size // 2} clients x 2 types",
                       "client's row: type L (left), type H (right)")
    elif env.config.game == "bas-sequential":
        who, xlabel = (f"{mode.size} users", "user in chain order (leader first), its reply "
                       "at the level it receives")
    ax.set(xlabel=xlabel, ylabel="action (grid)",
           title=f"{env.config.game}: {who}, round {env.steps}")
    ax.legend(fontsize="small")
    return fig


def learning_measures(env: LearningModel) -> Figure:
    fig, (ax, bx) = _figure(2)
    distance, regret = _series(env, "distance"), _series(env, "max_average_regret")
    rounds = np.arange(1, distance.size + 1)
    ax.plot(rounds, distance)
    ax.axhline(0.0, **THEORY, label="NE")
    ax.set(xlabel="round", ylabel="distance to the NE", title="last iterate")
    ax.legend(fontsize="small")
    bx.plot(rounds, regret, label="largest average regret")
    bound = env.learner.regret_bound(env.config.rounds)
    if bound is not None:
        bx.plot(rounds, [env.learner.regret_bound(t) / t for t in rounds], **THEORY,
                label="the learner's bound")
    bx.set(xlabel="round", ylabel="average regret", title="regret against its bound")
    bx.legend(fontsize="small")
    _integer_x(ax, bx)
    return fig


def learning_readings(env: LearningModel) -> dict[str, float]:
    return {"rounds": env.steps, "distance to the NE": env.distance(),
            "largest deviation gain (of own cost)": env.nash_gap_relative(),
            "largest average regret": env.max_average_regret() if env.steps else math.nan,
            "CCE gap": env.cce_gap() if env.steps else math.nan}


PAGES: dict[str, Page] = {page.route: page for page in (
    Page("bas", "BAS chain", BASChainModel, BASChainConfig,
         ("K", "d", "beta_max", "learner", "feedback", "damping", "observation", "prior",
          "subsequences", "split", "rounds"),
         bas_agents, bas_measures, bas_readings, fixed={"rounds": 100},
         display_max={"K": 1000, "d": 500, "beta_max": 5.0, "rounds": 500}),
    Page("sar", "SAR slicing", SARModel, SARConfig,
         ("K", "d", "N", "p", "attacker", "mitigation_p", "min_observations", "rounds"),
         sar_agents, sar_measures, sar_readings, fixed={"K": 30, "d": 20, "N": 10},
         display_max={"K": 300, "d": 200, "min_observations": 200, "rounds": 400}),
    Page("ppsp", "PPSP ring", PPSPModel, PPSPConfig,
         ("n", "K", "schedule", "noise", "protocol", "leave_at", "leave_node", "join_at",
          "replications"),
         ppsp_agents, ppsp_measures, ppsp_readings,
         fixed={"n": 10, "K": 400, "c": 100.0, "leave_at": 150, "leave_node": 3,
                "join_at": 250, "replications": 20},
         display_max={"n": 1000, "K": 10000, "replications": 200}),
    Page("pricing", "Pricing FL", PricingFLModel, PricingConfig,
         ("N", "alpha_mean", "alpha_std", "pricing", "aggregation", "update", "damping",
          "rounds"),
         pricing_agents, pricing_measures, pricing_readings, fixed={"N": 20},
         display_max={"N": 1000, "alpha_std": 0.5, "rounds": 500}),
    Page("kmeans", "DP k-means", DPKMeansModel, KMeansConfig,
         ("data", "method", "iterations", "epsilon", "repetitions"),
         kmeans_agents, kmeans_measures, kmeans_readings,
         fixed={"iterations": 10, "repetitions": 4, "epsilon": 0.3},
         choices={"data": page_data_sets},
         display_max={"epsilon": 5.0, "repetitions": 100}),
    Page("apes", "APES shuffle", APESModel, APESConfig,
         ("n", "distribution", "framework", "C", "rounds", "samples"),
         apes_agents, apes_measures, apes_readings, fixed={"n": 1000, "rounds": 30},
         display_max={"n": 20000, "C": 5.0, "rounds": 200, "samples": 100}),
    Page("learning", "Learning dynamics", LearningModel, LearningConfig,
         ("game", "learner", "feedback", "start", "agents", "rounds", "grid_points",
          "aggregation", "pricing"),
         learning_agents, learning_measures, learning_readings,
         fixed={"agents": 12, "rounds": 300},
         display_max={"agents": 1000, "rounds": 5000, "grid_points": 101}),
)}
