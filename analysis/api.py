"""The Python API: run a registered experiment and get its rows, summary, claims and figure.

``privgames.run("bas-chain", seed=0, workers=0, K=20)`` is what ``privgames run bas-chain --set
K=20 --seed 0 --workers 0`` does, returning a :class:`Result` instead of printing; the CLI and
``privgames reproduce`` are thin layers over :func:`run`.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privgames.analysis import experiments as registry
from privgames.analysis import guard
from privgames.analysis.results import (
    content_digest,
    parquet_metadata,
    read_parquet,
    to_json_value,
    write_json,
    write_parquet,
    write_with,
)
from privgames.environments.config import ConfigError


@dataclass
class Result:
    """One experiment's output.

    Attributes:
        experiment: the registered experiment.
        rows: tidy long rows (``metric``, ``value``, grid columns, ``population``).
        summary: predicted vs measured numbers, JSON-ready (what ``NAME.summary.json`` holds).
    """

    experiment: registry.Experiment
    rows: pd.DataFrame
    summary: dict

    def claims(self) -> pd.DataFrame:
        """The paper's claims beside our measurements, with a verdict each."""
        found = self.experiment.claims(self.summary) if self.experiment.claims else []
        return pd.DataFrame([c.row() for c in found],
                            columns=["claim", "paper", "measured", "± SE", "verdict", "detail"])

    def plot(self):
        """The experiment's figure (measurement beside theory) as a matplotlib Figure."""
        if self.experiment.plot is None:
            raise ValueError(f"experiment {self.experiment.name!r} has no figure")
        return self.experiment.plot(self.rows)

    def save_figure(self, folder: str | Path) -> Path | None:
        """Draw the figure into ``folder/NAME.png`` (atomically); ``None`` when the experiment
        has none."""
        if self.experiment.plot is None:
            return None
        import matplotlib.pyplot as plt

        path = Path(folder) / f"{self.experiment.name}.png"
        fig = self.plot()
        write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
        plt.close(fig)
        return path


def _arguments(seed: Any, workers: Any, scale: Any, out: Any, max_memory: Any,
               max_work: Any) -> tuple:
    """:func:`run`'s own arguments, checked as the command line checks its options."""
    from privgames.analysis.cli import MAX_WORKERS, _output_folder
    def integer(value: Any) -> bool:
        return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)

    if not integer(seed) or seed < 0:
        raise ConfigError(f"seed={seed!r} is out of range: seed must be an integer >= 0")
    if workers not in ("auto", None) and not (integer(workers) and 0 <= workers <= MAX_WORKERS):
        raise ConfigError(f"workers={workers!r} is out of range: workers must be 'auto', None "
                          f"or an integer in [0, {MAX_WORKERS}]")
    if scale not in ("quick", "paper"):
        raise ConfigError(f"scale={scale!r} is not allowed: scale must be one of quick, paper")
    if isinstance(max_memory, str):
        max_memory = guard.parse_size(max_memory, "max_memory")
    budgets = []
    for label, value in (("max_memory", max_memory), ("max_work", max_work)):
        try:
            value = None if value is None else float(value)
        except (TypeError, ValueError):
            value = math.nan
        unbounded = label == "max_work" and value == math.inf  # documented: no limit
        if value is not None and not (value > 0 and (math.isfinite(value) or unbounded)):
            raise ConfigError(f"{label}={value!r} is out of range: {label} must be > 0"
                              + (" (inf: no limit)" if label == "max_work" else ""))
        budgets.append(value)
    if out is not None and not str(out).strip():
        raise ConfigError(f"out={out!r} is empty: out must name a folder ('.' for the current "
                          "one) or be None")
    folder = None if out is None else _output_folder(Path(out), "out")
    return int(seed), workers if workers in ("auto", None) else int(workers), folder, *budgets


def _plain(value: Any) -> Any:
    """A parameter as the command line would give it: numpy arrays and numbers become lists
    and numbers, paths strings."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def experiments() -> list[str]:
    """Names of every registered experiment (including third-party ones)."""
    return [e.name for e in registry.all_experiments()]


def run(name: str, *, seed: int = 0, workers: int | str | None = "auto",
        address: str | None = None,
        out: str | Path | None = None, scale: str = "quick", progress: bool = False,
        params: Mapping[str, Any] | None = None, max_memory: float | str | None = None,
        max_work: float | None = None, keep_finished: bool = False,
        **overrides: Any) -> Result:
    """Run experiment ``name`` with parameter overrides ``params``.

    Args:
        name: a registered experiment (:func:`experiments`).
        seed: root seed; the same seed gives bit-identical results on any backend.
        workers: ``"auto"`` runs serially unless the work would outlast Ray's start-up, then
            on every core of a local Ray; 0 runs serially; ``None`` uses every core of a
            local Ray; N uses N workers.
        address: a Ray cluster to join instead.
        out: a folder for ``NAME.parquet`` and ``NAME.summary.json`` (and for resuming an
            interrupted run); ``None`` keeps the results in memory only.
        scale: ``quick`` or ``paper`` (the paper's sizes).
        progress: show a progress bar on stderr.
        params: overrides of the experiment's parameters as a mapping (as ``--set`` on the
            CLI; needed for a parameter whose name is one of this function's arguments).
        max_memory, max_work: budgets in bytes (or a size such as ``"4G"``) and operations
            (``privgames.analysis.guard``); a run estimated to pass one is refused before it
            starts. Every bad argument raises ``ConfigError`` naming it, before anything runs.
        keep_finished: reuse ``out/NAME.parquet`` when it was written by a run with the same
            key (experiment, parameters, seed, code) and its rows match their checksum (the
            summary is computed again from them); what ``reproduce`` does after an
            interruption.
        **overrides: the same, as keywords.
    """
    from privgames.analysis.sweep import discard_parts, remove_if_empty, sweep, sweep_key

    seed, workers, out, max_memory, max_work = _arguments(seed, workers, scale, out,
                                                          max_memory, max_work)
    experiment = registry.get(name)
    given = {k: _plain(v) for k, v in {**(params or {}), **overrides}.items()}
    resolved = experiment.resolve(given, scale)
    guard.check(experiment, resolved, workers, max_memory, max_work)
    if out is not None:
        check_outputs(Path(out), name)
    cluster = address or os.environ.get("RAY_ADDRESS")
    if cluster and workers != 0:  # a cluster that does not answer: one line, before the run
        from privgames.environments.ray_session import check_address

        check_address(cluster)
    key = sweep_key(experiment, resolved, seed)
    rows = _finished(Path(out) / f"{name}.parquet", key) if keep_finished and out else None
    if rows is not None and progress:
        print(f"privgames: {name}: already finished in {out} (same parameters, seed and "
              "code): kept", file=sys.stderr)
    parts = None if out is None else Path(out) / ".parts" / name
    if rows is None:
        rows = sweep(experiment, resolved, seed, workers, address, parts, progress)
    summary = to_json_value({"experiment": name, "seed": seed, "scale": scale,
                             "parameters": resolved, **experiment.summarize(rows, resolved)})
    if out is not None:
        identity = json.dumps({"key": key, "sha256": content_digest(rows)}).encode()
        try:
            write_parquet(rows, Path(out) / f"{name}.parquet", experiment.infinite,
                          metadata={RUN_KEY: identity})
            write_json(summary, Path(out) / f"{name}.summary.json", experiment.infinite)
        except OSError as err:
            why = err.strerror or str(err)
            raise ConfigError(f"out={out}: the results could not be written ({why}); every "
                              f"finished task is kept in {parts}, and the same command "
                              "resumes from them") from None
        discard_parts(parts, key)
        remove_if_empty(parts.parent)  # OUT/.parts, once no run has parts left
    return Result(experiment, rows, summary)


def check_outputs(out: Path, name: str) -> None:
    """Refuse, before anything runs, an output folder where the results cannot go: a folder
    named like a result file (``NAME.parquet``, ``NAME.summary.json``, ``NAME.png``), a file
    where the parts' folder goes (``.parts``, ``.parts/NAME``)."""
    for file in (f"{name}.parquet", f"{name}.summary.json", f"{name}.png"):
        if (out / file).is_dir():
            raise ConfigError(f"out={out}: {out / file} is a folder where the result file "
                              "goes: move it, or give another out")
    for folder in (out / ".parts", out / ".parts" / name):
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"out={out}: {folder} is a file where the parts' folder goes "
                              "(finished tasks, for resuming): move it, or give another out")


#: The schema metadata key of a finished run's identity: its sweep key and its rows' digest.
RUN_KEY = b"privgames.run"


def _finished(path: Path, key: str) -> pd.DataFrame | None:
    """The rows of a finished run at ``path`` if it carries ``key`` and its rows match their
    digest; ``None`` otherwise (absent, another run's, damaged: it is run again)."""
    try:
        identity = json.loads(parquet_metadata(path).get(RUN_KEY, b"{}"))
        rows = read_parquet(path)
    except (OSError, ValueError, RecursionError):  # absent, damaged, nested past the stack
        return None
    if not isinstance(identity, dict) or identity.get("key") != key or identity.get(
            "sha256") != content_digest(rows):
        return None
    return rows
