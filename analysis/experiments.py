"""The experiment registry: named, parameterised sweeps of an environment.

An experiment is a grid of parameter points times ``populations`` independent runs ("units").
Each unit gets its own child of ``SeedSequence(seed)`` and returns a tidy frame, so results do
not depend on how units are batched into tasks or on how many workers run them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import itertools
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from privgames.environments.config import ConfigError, check_int

if TYPE_CHECKING:  # numpy and pandas are imported by the runners, not by ``privgames list``
    import numpy as np
    import pandas as pd

Unit = tuple[dict[str, Any], "np.random.SeedSequence"]

#: The game families. Each is a package ``privgames.analysis.<game>`` whose ``__init__`` names
#: its experiments (``EXPERIMENTS``: name -> one line) and imports nothing, whose ``experiments``
#: module registers them, ``figures`` draws them and ``page`` is its page. A new game is one
#: package and its name here; the catalogue, ``privgames list``, the report's order and the
#: pages' menu are derived from these packages.
GAMES = ("bas", "sar", "ppsp", "pricing", "budget", "learning", "apes")


#: The papers whose claims the experiments test (an experiment's ``source``), by title.
PAPERS = {
    "chained-dp-bas-sar": "Chained-DP: Can We Recycle Privacy Budget? (Li, Huang, Zeng, Chen "
                          "and Chen)",
    "pricing-fl-noise": "Regulating Clients' Noise Adding in Federated Learning without "
                        "Verification (Hong and Duan)",
    "ppsp-ring-summation": "Distributed Privacy-Preserving Iterative Summation Protocols (Liu, "
                           "Liu et al.)",
    "budget-allocation-series": "Generalized and Multiple-Queries-Oriented Privacy Budget "
                                "Strategies in Differential Privacy via Convergent Series (Bai, "
                                "Yang, Xiang and Wang)",
    "apes-shuffle-clip-laplace": "Echo of Neighbors: Privacy Amplification for Personalized "
                                 "Private Federated Learning with Shuffle Model (Liu, Zhao, "
                                 "Xiong, Liu and Chen)",
}


def paper_title(source: str) -> str:
    """The title (and authors) of the paper an experiment tests; a plug-in's own ``source``
    as given; for an experiment of no single paper, what it draws on."""
    if not source:
        return "no single paper: the games of all five, played by learners"
    return PAPERS.get(source, source)


@functools.cache
def catalogue() -> dict[str, tuple[str, str]]:
    """The built-in experiments: name -> (its game, its one line), read from the games'
    packages without importing their experiments, so start-up and a Ray worker's first task
    pay for one system, not seven."""
    out: dict[str, tuple[str, str]] = {}
    for game in GAMES:
        for name, description in importlib.import_module(
                f"privgames.analysis.{game}").EXPERIMENTS.items():
            if name in out:
                raise ValueError(f"experiment {name!r} is named by games {out[name][0]!r} and "
                                 f"{game!r}")
            out[name] = (game, description)
    return out


def page_routes() -> tuple[str, ...]:
    """The routes of the games' pages (``privgames viz``), read without importing them."""
    return tuple(importlib.import_module(f"privgames.analysis.{game}").PAGE for game in GAMES)


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
            :func:`catalogue`).
        infinite: why a value can be infinite, by metric or summary key (the innermost named
            part of its path); written beside each infinity in the Parquet file's metadata and
            the summary's ``non_finite`` (:mod:`privgames.analysis.results`).
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
    infinite: Mapping[str, str] = field(default_factory=dict)

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
                raise ConfigError(f"unknown parameter {key!r} for experiment {self.name!r}"
                                  f"{did_you_mean(key, params)}: known parameters are "
                                  f"{', '.join(sorted(params))}")
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
        from privgames.environments.streams import spawn

        seeds = spawn(seed, len(pairs))
        return [(label, s) for (label, _), s in zip(pairs, seeds, strict=True)]

    def run_one(self, params: Mapping[str, Any], label: Mapping[str, Any],
                seed: np.random.SeedSequence) -> pd.DataFrame:
        """Run one unit and label its rows with the grid point and population."""
        point = {k: v for k, v in label.items() if k != "population"}
        rows = self.run_unit(self.config(params, point), seed)
        return rows.assign(**{k: v for k, v in label.items()})


def figure(module: str, name: str, *args: Any, **kwargs: Any) -> Callable[[pd.DataFrame], Any]:
    """``rows -> Figure`` drawing ``<module>.<name>(rows, *args, **kwargs)`` (a game's
    ``figures`` module); the plotting libraries are imported when a figure is first drawn,
    not at start-up."""

    def draw(rows: pd.DataFrame) -> Any:
        return getattr(importlib.import_module(module), name)(rows, *args, **kwargs)

    return draw


REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add an experiment to the registry (names are unique; a built-in one is registered by
    the ``experiments`` module of the game that names it, and its description is the
    catalogue's)."""
    name = experiment.name
    if name in catalogue():
        game, description = catalogue()[name]
        module = f"privgames.analysis.{game}.experiments"
        if experiment.run_unit.__module__ != module:
            raise ValueError(f"experiment {name!r} is a built-in experiment of {module}")
        experiment = dataclasses.replace(experiment, description=description)
    if name in REGISTRY:
        raise ValueError(f"experiment {name!r} is registered twice")
    REGISTRY[name] = experiment
    return experiment


def did_you_mean(given: str, known: Any) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``known`` names, or ``""``."""
    close = difflib.get_close_matches(str(given), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get(name: str) -> Experiment:
    """Look an experiment up by name, importing only the module that registers it (a
    plug-in's entry point of that name; all plug-ins when none is named so)."""
    if name in catalogue():
        importlib.import_module(f"privgames.analysis.{catalogue()[name][0]}.experiments")
    elif name not in REGISTRY:
        point = next((p for p in entry_points(group=ENTRY_POINTS) if p.name == name), None)
        if point is not None:
            _load(point)
        if name not in REGISTRY:
            _load_plugins()
    if name not in REGISTRY:
        known = sorted({*catalogue(), *REGISTRY})
        raise ConfigError(f"unknown experiment {name!r}{did_you_mean(name, known)}: known "
                          "experiments are " + ", ".join(known))
    return REGISTRY[name]


def all_experiments() -> list[Experiment]:
    """Every experiment: the built-in ones in catalogue order, then the plug-ins'."""
    _load_plugins()
    return ([get(name) for name in catalogue()]
            + [e for e in REGISTRY.values() if e.name not in catalogue()])


def listing() -> list[tuple[str, str]]:
    """``(name, description)`` of every experiment without importing any: the built-in ones
    from :func:`catalogue`, a plug-in's from its entry points' names and its distribution's
    one-line summary (its metadata), and those registered in this process."""
    out = {name: description for name, (_, description) in catalogue().items()}
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
