"""The experiment registry: named, parameterised sweeps of an environment.

An experiment is a grid of parameter points times ``populations`` independent runs ("units").
Each unit gets its own child of ``SeedSequence(seed)`` and returns a tidy frame, so results do
not depend on how units are batched into tasks or on how many workers run them.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import numpy as np
import pandas as pd

from privgames.environments.config import ConfigError, check_int
from privgames.environments.streams import spawn

Unit = tuple[dict[str, Any], np.random.SeedSequence]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment.

    Attributes:
        name: CLI name.
        description: one line for ``privgames list``.
        config_type: the environment's validated config dataclass.
        run_unit: ``(config, seed) -> tidy DataFrame`` for one population at one grid point.
        summarize: ``(rows, params) -> dict`` of predicted vs measured numbers.
        defaults: overrides of the config defaults at quick scale.
        grid: parameters swept (name -> values); the product of their values is the grid.
        paper: overrides for ``--scale paper`` (the paper's sizes).
        populations: independent populations per grid point.
        plot: ``rows -> matplotlib Figure`` showing the measurement beside the theory.
        source: the paper (file stem in ``papers/``) whose claims the experiment tests.
        claims: ``summary -> list[Claim]``: the paper's claims beside our measurements, with
            verdicts (``privgames.analysis.claims``).
        table_caption: what the summary's ``table`` holds, for the report.
    """

    name: str
    description: str
    config_type: type
    run_unit: Callable[[Any, np.random.SeedSequence], pd.DataFrame]
    summarize: Callable[[pd.DataFrame, Mapping[str, Any]], dict]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, list] = field(default_factory=dict)
    paper: Mapping[str, Any] = field(default_factory=dict)
    populations: int = 4
    plot: Callable[[pd.DataFrame], Any] | None = None
    source: str = ""
    claims: Callable[[Mapping[str, Any]], list] | None = None
    table_caption: str = ""

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
        for point in self.points(params):
            self.config(params, point)  # validate every grid point before anything runs
        return params

    def points(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The grid points: dicts over the swept parameters (one empty dict if no grid)."""
        names = list(self.grid)
        values = [v if isinstance(v, list | tuple) else [v] for v in (params[n] for n in names)]
        for name, v in zip(names, values, strict=True):
            if len(v) == 0:
                raise ConfigError(f"{name}=[] is empty: give at least one value")
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]

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
    """Add an experiment to the registry (names are unique)."""
    if experiment.name in REGISTRY:
        raise ValueError(f"experiment {experiment.name!r} is registered twice")
    REGISTRY[experiment.name] = experiment
    return experiment


def get(name: str) -> Experiment:
    """Look an experiment up by name."""
    _load()
    if name not in REGISTRY:
        raise ConfigError(f"unknown experiment {name!r}: known experiments are "
                          + ", ".join(sorted(REGISTRY)))
    return REGISTRY[name]


def all_experiments() -> list[Experiment]:
    """Every registered experiment, in registration order."""
    _load()
    return list(REGISTRY.values())


#: Entry-point group through which other packages add experiments (``docs/extending.md``).
ENTRY_POINTS = "privgames.experiments"
_loaded = False


def _load() -> None:
    """Register the built-in experiments, then every installed plug-in's: an entry point in
    ``privgames.experiments`` names a module (importing it registers its experiments) or an
    ``Experiment``. A plug-in that fails to load is reported on one line and skipped."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from privgames.analysis import apes, bas, budget, ppsp, pricing, sar  # noqa: F401  (importing registers)

    for point in entry_points(group=ENTRY_POINTS):
        try:
            loaded = point.load()
        except Exception as err:  # noqa: BLE001 - a broken plug-in must not break privgames
            print(f"privgames: warning: plug-in {point.name!r} ({point.value}) failed to load: "
                  f"{type(err).__name__}: {err}", file=sys.stderr)
            continue
        if isinstance(loaded, Experiment) and loaded.name not in REGISTRY:
            register(loaded)
