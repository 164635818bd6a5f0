"""The experiment registry: named, parameterised sweeps of an environment.

An experiment is a grid of parameter points times ``populations`` independent runs ("units").
Each unit gets its own child of ``SeedSequence(seed)`` and returns a tidy frame, so results do
not depend on how units are batched into tasks or on how many workers run them.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import numpy as np

from privgames.environments.config import ConfigError, check_int
from privgames.environments.streams import spawn

if TYPE_CHECKING:  # pandas is imported by the runners, not by ``privgames list``
    import pandas as pd

Unit = tuple[dict[str, Any], np.random.SeedSequence]

#: The built-in experiments: name -> (module of ``privgames.analysis`` that registers it, one
#: line for ``privgames list``). Listing reads this table without importing any environment,
#: and :func:`get` imports only the experiment's own module, so start-up and a Ray worker's
#: first task pay for one system, not six.
CATALOGUE: dict[str, tuple[str, str]] = {
    "bas-chain": ("bas", "BAS chain: users learn their noise by best response; distance to the "
                         "Theorem 1 NE and MSE vs LDP and the centralized optimum"),
    "bas-mse-vs-d": ("bas", "Fig 3: MSE and privacy budget vs dimension d (K=10, beta ~ U[0, "
                            "1.3])"),
    "bas-mse-vs-beta": ("bas", "Figs 4-5: MSE and average cost vs the preference range beta_max "
                               "(d=50)"),
    "bas-split": ("bas", "Fig 6: MSE vs number of sub-sequences, random vs sorted split (K=100)"),
    "bas-mse-vs-K": ("bas", "Fig 7: MSE vs number of users K (d=50, beta ~ U[0, 1.3])"),
    "bas-properties": ("bas", "E1-E4 measured: truthfulness grid, fairness (Theorem 3), voluntary"
                              " participation (Theorem 4), PoA vs the Theorem 5 bound"),
    "sar-attack": ("sar", "SAR: weak/strong colluders attack a victim's slices on the simulated "
                          "messages; success vs eq (31) and the corrected eq (32)"),
    "sar-success-vs-p": ("sar", "Attack success vs p and K, weak and strong attackers, against "
                                "theory"),
    "sar-exposure-vs-N": ("sar", "Exposed fraction and whole-vector exposure vs the number of "
                                 "slices N"),
    "sar-thresholds": ("sar", "Fig 8: p_k thresholds (eq 33, strong numerically) and the failure "
                              "rate measured at them vs 1/K^2"),
    "sar-participation": ("sar", "Users estimate p from their neighbours and opt out past the "
                                 "threshold: participation and attack success over rounds"),
    "ppsp-ring": ("ppsp", "PPSP ring (SI or AI): estimator error vs the exact formula and "
                          "Theorems 1-2, sum invariance, epsilon (Theorem 3); join/leave; "
                          "vectorized or Ray backend"),
    "ppsp-example2": ("ppsp", "Example 2 (Figs 2-3): 10 nodes summing to 500, v=1000/(k+1), node "
                              "10 leaves at k=2000 and joins back at k=4000"),
    "ppsp-epsilon": ("ppsp", "Theorem 3: epsilon vs K (harmonic, geometric) beside the privacy "
                             "loss and the eavesdropper's accuracy measured on Laplace "
                             "transcripts"),
    "ppsp-attack": ("ppsp", "Attack success vs noise scale c: eavesdropper / curious-neighbour "
                            "estimation error and distinguishing accuracy against the epsilon-DP "
                            "bound"),
    "ppsp-tradeoff": ("ppsp", "Theorem 4: the optimal c from the cubic vs numerical minimisation"),
    "ppsp-learning": ("ppsp", "Nodes learn their noise scale c_i by best response (privacy "
                              "depends on the smallest c): learned profile vs Theorem 4's "
                              "optimum, equal and unequal weights"),
    "pricing-fl": ("pricing", "Pricing FL game: clients learn their noise by global best "
                              "response, with or without Definition 4's prices; end point vs eq "
                              "(10), eq (11), the true optimum"),
    "pricing-fig1": ("pricing", "Fig 1: social cost vs the variance of the types (normal, mean "
                                "0.5), with and without prices, MLE and mean rules, against the "
                                "true optimum"),
    "pricing-poa": ("pricing", "Proposition 3: PoA of the learned equilibrium vs N with equal "
                               "types, beside the closed-form family"),
    "pricing-bne": ("pricing", "Incomplete information (binary types): clients learn reports and "
                               "noise; truthful reporting checked by enumeration with the derived"
                               " mechanism, with penalties only, and without prices"),
    "pricing-fig2": ("pricing", "Fig 2: expected social cost vs eta with and without the "
                                "mechanism (alpha_L=0.25, alpha_H=0.75)"),
    "pricing-training": ("pricing", "Federated squared-SVM on digits (even vs odd): clients add "
                                    "heterogeneous noise, mean vs MLE aggregation; loss, accuracy"
                                    " and eq (9)'s bound"),
    "budget-noise": ("budget", "Table 2: total noise MSE of N sum queries per strategy (eps = 1, "
                               "l = 100 rounds) against sum_i 2/eps_i^2 and the printed values"),
    "budget-us-bounds": ("budget", "Tables 3-5: the U_s interval of Lemma 3 per N for the "
                                   "geometric (eps 0.3, 0.5) and Taylor (bl-Ty, eps 0.3) "
                                   "strategies, beside the printed values"),
    "dp-kmeans": ("budget", "DP k-means (Algorithm 1) per budget strategy and total iterations: "
                            "weighted F1 on an Unbalance-like set or NIVC on a 100,000-point "
                            "Birch3-like set"),
    "budget-collusion": ("budget", "Section 6.1: m colluders pool w queries' noisy answers; the "
                                   "attack's error per strategy with and without each protection,"
                                   " against the budgets"),
    "budget-analysts": ("budget", "Analysts learn their budget strategy by Thompson sampling from"
                                  " the utility they observe (sum queries vs DP k-means); regret "
                                  "against the offline best"),
    "learning-dynamics": ("learning", "Users who learn from what they experience: fictitious "
                                      "play, Hedge, regret matching (full information), EXP3, "
                                      "SPSA (bandit) and best response in every game; distance "
                                      "to the NE, regret vs its bound, CCE gap"),
    "apes": ("apes", "Personalized-LDP federated logistic regression (digits, d = 650): Non-"
                     "Private, LDP-Min, PLDP, UniS, APES, S-APES; accuracy and every epsilon (the"
                     " Table 3 analogue)"),
    "apes-clip": ("apes", "Fig 3(a): accuracy vs the clip bound C, Clip-Laplace (APES) vs Laplace"
                          " (UniS)"),
    "apes-sparsify": ("apes", "Fig 3(b): S-APES accuracy vs the sparsification ratio b/d, post- "
                              "(top-b after perturbation) vs random sparsification"),
    "apes-bounds": ("apes", "Fig 2(a): central epsilon vs n per budget distribution, the baseline"
                            " (eq 2) and EoN (Theorem 4) bounds closed and numerical, "
                            "Erlingsson'19"),
    "apes-audit": ("apes", "Empirical audit: a distinguishing attack on one user's datum from the"
                           " shuffled Clip-Laplace reports, a Clopper-Pearson lower bound on the "
                           "central epsilon beside the EoN and baseline upper bounds"),
}


@dataclass(frozen=True)
class Experiment:
    """A registered experiment.

    Attributes:
        name: CLI name.
        config_type: the environment's validated config dataclass.
        run_unit: ``(config, seed) -> tidy DataFrame`` for one population at one grid point.
        summarize: ``(rows, params) -> dict`` of predicted vs measured numbers.
        defaults: overrides of the config defaults at quick scale.
        grid: parameters swept (name -> values); the product of their values is the grid.
        exclude: grid points left out of the product, each given by some of its values (e.g.
            a learner a game refuses), where one of those values comes from a list swept over;
            a combination the user sets outright is run (and refused by the config).
        paper: overrides for ``--scale paper`` (the paper's sizes).
        populations: independent populations per grid point.
        plot: ``rows -> matplotlib Figure`` showing the measurement beside the theory.
        source: the paper (file stem in ``papers/``) whose claims the experiment tests.
        claims: ``summary -> list[Claim]``: the paper's claims beside our measurements, with
            verdicts (``privgames.analysis.claims``).
        table_caption: what the summary's ``table`` holds, for the report.
        description: one line for ``privgames list`` (a built-in experiment's comes from
            :data:`CATALOGUE`).
    """

    name: str
    config_type: type
    run_unit: Callable[[Any, np.random.SeedSequence], pd.DataFrame]
    summarize: Callable[[pd.DataFrame, Mapping[str, Any]], dict]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, list] = field(default_factory=dict)
    exclude: tuple[Mapping[str, Any], ...] = ()
    paper: Mapping[str, Any] = field(default_factory=dict)
    populations: int = 4
    plot: Callable[[pd.DataFrame], Any] | None = None
    source: str = ""
    claims: Callable[[Mapping[str, Any]], list] | None = None
    table_caption: str = ""
    description: str = ""

    def parameters(self) -> dict[str, Any]:
        """Every settable parameter with its default value."""
        base = {f.name: f.default for f in dataclasses.fields(self.config_type)}
        return {**base, **self.grid, "populations": self.populations, **self.defaults}

    def resolve(self, overrides: Mapping[str, Any] | None = None,
                scale: str = "quick") -> dict[str, Any]:
        """Defaults, then the scale's overrides, then the user's, validated."""
        params = self.parameters()
        if scale == "paper":
            params.update(self.paper)
        for key, value in (overrides or {}).items():
            if key not in params:
                raise ConfigError(f"unknown parameter {key!r} for experiment {self.name!r}: "
                                  f"known parameters are {', '.join(sorted(params))}")
            params[key] = value
        check_int("populations", params["populations"], 1)
        points = self.points(params)
        for point in points:
            self.config(params, point)  # validate every grid point before anything runs
        self._check_used(overrides or {}, params, points)
        return params

    def _check_used(self, overrides: Mapping[str, Any], params: Mapping[str, Any],
                    points: list[dict[str, Any]]) -> None:
        """Refuse a parameter the user set that no grid point uses (a config names its
        owners as ``OWNERS = (field, {parameter: values of field that use it})``)."""
        field_name, owners = getattr(self.config_type, "OWNERS", (None, {}))
        chosen = {point.get(field_name, params.get(field_name)) for point in points}
        for key in overrides:
            if key in owners and not chosen & set(owners[key]):
                using = ", ".join(owners[key])
                raise ConfigError(f"{key}={overrides[key]!r} is not used by {field_name}="
                                  f"{'/'.join(map(str, sorted(chosen)))}: it is a parameter of "
                                  f"{field_name}={using}", key)

    def points(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The grid points: dicts over the swept parameters (one empty dict if no grid)."""
        names = list(self.grid)
        values = [v if isinstance(v, list | tuple) else [v] for v in (params[n] for n in names)]
        for name, v in zip(names, values, strict=True):
            if len(v) == 0:
                raise ConfigError(f"{name}=[] is empty: give at least one value")
            seen = [json.dumps(x, sort_keys=True, default=str) for x in v]
            if len(set(seen)) < len(seen):  # two populations would be pooled under one key
                raise ConfigError(f"{name}={list(v)!r} repeats a value: give each value once "
                                  "(more populations: --set populations=N)")
        swept = {n for n, v in zip(names, values, strict=True) if len(v) > 1}
        points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
        return [p for p in points if not any(
            all(p.get(k) == v for k, v in rule.items()) and swept & set(rule)
            for rule in self.exclude)]

    def config(self, params: Mapping[str, Any], point: Mapping[str, Any]) -> Any:
        """The environment config for one grid point."""
        fields = {f.name for f in dataclasses.fields(self.config_type)}
        return self.config_type(**{k: v for k, v in {**params, **point}.items() if k in fields})

    def units(self, params: Mapping[str, Any], seed: int) -> list[Unit]:
        """Every (grid point, population) with its own seed, in a fixed order."""
        pairs = [({**point, "population": p}, point)
                 for point in self.points(params) for p in range(params["populations"])]
        seeds = spawn(seed, len(pairs))
        return [(label, s) for (label, _), s in zip(pairs, seeds, strict=True)]

    def run_one(self, params: Mapping[str, Any], label: Mapping[str, Any],
                seed: np.random.SeedSequence) -> pd.DataFrame:
        """Run one unit and label its rows with the grid point and population."""
        point = {k: v for k, v in label.items() if k != "population"}
        rows = self.run_unit(self.config(params, point), seed)
        return rows.assign(**{k: v for k, v in label.items()})


def figure(name: str, *args: Any, **kwargs: Any) -> Callable[[pd.DataFrame], Any]:
    """``rows -> Figure`` drawing ``privgames.analysis.plots.<name>(rows, *args, **kwargs)``;
    the plotting libraries are imported when a figure is first drawn, not at start-up."""

    def draw(rows: pd.DataFrame) -> Any:
        from privgames.analysis import plots

        return getattr(plots, name)(rows, *args, **kwargs)

    return draw


REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add an experiment to the registry (names are unique; a built-in one's module is the one
    :data:`CATALOGUE` names, and its description is the catalogue's)."""
    name = experiment.name
    if name in CATALOGUE:
        module = f"privgames.analysis.{CATALOGUE[name][0]}"
        if experiment.run_unit.__module__ != module:
            raise ValueError(f"experiment {name!r} is a built-in experiment of {module}")
        experiment = dataclasses.replace(experiment, description=CATALOGUE[name][1])
    if name in REGISTRY:
        raise ValueError(f"experiment {name!r} is registered twice")
    REGISTRY[name] = experiment
    return experiment


def get(name: str) -> Experiment:
    """Look an experiment up by name, importing only the module that registers it (a
    plug-in's entry point of that name; all plug-ins when none is named so)."""
    if name in CATALOGUE:
        importlib.import_module(f"privgames.analysis.{CATALOGUE[name][0]}")
    elif name not in REGISTRY:
        point = next((p for p in entry_points(group=ENTRY_POINTS) if p.name == name), None)
        if point is not None:
            _load(point)
        if name not in REGISTRY:
            _load_plugins()
    if name not in REGISTRY:
        raise ConfigError(f"unknown experiment {name!r}: known experiments are "
                          + ", ".join(sorted({*CATALOGUE, *REGISTRY})))
    return REGISTRY[name]


def all_experiments() -> list[Experiment]:
    """Every experiment: the built-in ones in catalogue order, then the plug-ins'."""
    _load_plugins()
    return ([get(name) for name in CATALOGUE]
            + [e for e in REGISTRY.values() if e.name not in CATALOGUE])


def listing() -> list[tuple[str, str]]:
    """``(name, description)`` of every experiment without importing any: the built-in ones
    from :data:`CATALOGUE`, a plug-in's from its entry points' names and its distribution's
    one-line summary (its metadata), and those registered in this process."""
    out = {name: description for name, (_, description) in CATALOGUE.items()}
    for point in entry_points(group=ENTRY_POINTS):
        if point.name not in out:
            summary = point.dist.metadata["Summary"] if point.dist is not None else None
            out[point.name] = summary or f"(plug-in {point.value})"
    for e in REGISTRY.values():
        out.setdefault(e.name, e.description)
    return list(out.items())


#: Entry-point group through which other packages add experiments (``docs/extending.md``).
ENTRY_POINTS = "privgames.experiments"
_plugins_loaded = False
_loaded_points: set[str] = set()


def _load_plugins() -> None:
    """Register every installed plug-in's experiments, once: an entry point in
    ``privgames.experiments`` names a module (importing it registers its experiments) or an
    ``Experiment``. A plug-in that fails to load is reported on one line and skipped."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for point in entry_points(group=ENTRY_POINTS):
        _load(point)


def _load(point: Any) -> None:
    """Load one plug-in entry point (once), registering what it names."""
    if point.value in _loaded_points:
        return
    _loaded_points.add(point.value)
    try:
        loaded = point.load()
    except Exception as err:  # noqa: BLE001 - a broken plug-in must not break privgames
        print(f"privgames: warning: plug-in {point.name!r} ({point.value}) failed to load: "
              f"{type(err).__name__}: {err}", file=sys.stderr)
        return
    if isinstance(loaded, Experiment) and loaded.name not in REGISTRY:
        register(loaded)
