"""Run an experiment's units serially or as Ray tasks, resumably.

Units are batched into at most ``MAX_TASKS`` tasks of consecutive units; each finished task is
written atomically to a part file, so an interrupted sweep resumes where it stopped without
losing or duplicating rows. Rows are concatenated in unit order, so serial and Ray runs with the
same seed are bit-identical whatever the worker count.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from privgames.analysis import guard
from privgames.analysis.experiments import Experiment, Unit, get
from privgames.analysis.results import content_digest, parquet_metadata, read_parquet, write_parquet
from privgames.environments.config import footprint_of
from privgames.environments.ray_session import ensure_ray

#: Upper bound on tasks per sweep: enough to balance 2-16 workers, few enough that each task
#: carries several units (Ray pays about 1 ms per task).
MAX_TASKS = 32
#: ``workers="auto"``: run serially, or start a local Ray when the rest of the work would take
#: longer serially than Ray costs to start: ``ray.init`` and the first tasks' cold workers,
#: 3.5-4.0 s on 2 cores (``benchmarks/bench_chain.py``, ``ray.fixed_cost_s``), or a sweep's
#: round trips when this process already runs Ray.
AUTO = "auto"
RAY_START_S = 4.0
RAY_WARM_S = 0.3


def batches(units: Sequence[Unit]) -> list[list[Unit]]:
    """Consecutive batches of units; depends only on the number of units."""
    n_tasks = min(len(units), MAX_TASKS)
    return [[units[i] for i in b] for b in np.array_split(np.arange(len(units)), n_tasks)]


def run_batch(name: str, params: Mapping[str, Any], batch: Sequence[Unit]) -> pd.DataFrame:
    """Run a batch of units of experiment ``name`` (also the body of a Ray task)."""
    experiment = get(name)
    return pd.concat([experiment.run_one(params, label, seed) for label, seed in batch],
                     ignore_index=True)


def _run_batch_on_node(name: str, params: Mapping[str, Any],
                       batch: Sequence[Unit]) -> tuple[pd.DataFrame, str]:
    """A Ray task: the batch's rows and the id of the node that computed them."""
    import ray

    return run_batch(name, params, batch), ray.get_runtime_context().get_node_id()


def sweep(experiment: Experiment, params: Mapping[str, Any], seed: int,
          workers: int | str | None,
          address: str | None = None, parts_dir: Path | None = None,
          progress: bool = True) -> pd.DataFrame:
    """All rows of an experiment; ``workers=0`` runs serially, otherwise on Ray.

    ``workers=None`` uses every core of an embedded local Ray; ``address`` (or ``RAY_ADDRESS``)
    joins an existing cluster instead. ``workers="auto"`` (without an address) runs the first
    unfinished task serially, times it, and runs the rest serially when that is estimated to
    take less than Ray's start-up (:data:`RAY_START_S`), else on every core of a local Ray;
    the rows are the same either way. ``parts_dir`` keeps finished tasks for resuming, until
    the caller has written the results (:func:`discard_parts`).
    """
    tasks = batches(experiment.units(params, seed))
    key = sweep_key(experiment, params, seed)
    parts = {i: _part_path(parts_dir, key, i) for i in range(len(tasks))}
    done = {i: frame for i, p in parts.items() if p is not None and p.exists()
            and (frame := _read_part(p, key, i)) is not None}
    todo = [i for i in range(len(tasks)) if i not in done]
    if address:  # join the cluster up front: environments with a Ray backend use it too
        ensure_ray(None if workers == AUTO else workers, address)
    work = _task_work(experiment, params, tasks)
    def left_now() -> str:  # at the experiment's measured rate, before Ray measures one
        left = sum(w for i, w in enumerate(work) if i not in done)
        return f"about {guard.duration(guard.cpu_seconds(experiment.name, left))} of work left"

    bar = tqdm(total=sum(work), desc=experiment.name, unit="op", unit_scale=True,
               file=sys.stderr, disable=not progress, postfix=left_now())
    try:  # the bar ends its line whatever happens: an error starts on its own
        bar.update(sum(work[i] for i in done))
        if done and progress:
            print(f"privgames: {experiment.name}: resuming, {len(done)} of {len(tasks)} tasks "
                  "already done", file=sys.stderr)

        def finish(i: int, frame: pd.DataFrame) -> None:
            if parts[i] is not None:
                _write_part(frame, parts[i], key, i)
            done[i] = frame
            bar.set_postfix_str(left_now(), refresh=False)
            bar.update(work[i])

        if workers == AUTO:
            workers = None if address else _auto_workers(experiment, params, tasks, todo, work,
                                                         finish, progress)
            todo = [i for i in todo if i not in done]
        if workers == 0 or not todo:
            for i in todo:
                finish(i, run_batch(experiment.name, params, tasks[i]))
        else:
            ray = ensure_ray(workers, address)
            remote = ray.remote(_run_batch_on_node).options(
                memory=_task_memory(ray, experiment, params))
            pending = {remote.remote(experiment.name, dict(params), tasks[i]): i for i in todo}
            nodes = set()
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                try:
                    frame, node = ray.get(ready[0])
                except ray.exceptions.OutOfMemoryError:
                    raise guard.killed_for_memory(experiment, params) from None
                nodes.add(node)
                finish(pending.pop(ready[0]), frame)
            bar.close()  # before the line below
            if progress:
                print(f"privgames: {experiment.name}: ran {len(todo)} tasks on {len(nodes)} Ray "
                      f"node{'s' if len(nodes) != 1 else ''}", file=sys.stderr)
    finally:
        bar.close()
    return pd.concat([done[i] for i in range(len(tasks))], ignore_index=True)


def _task_memory(ray: Any, experiment: Experiment, params: Mapping[str, Any]) -> int:
    """The memory a task reserves on its node (Ray's ``memory`` resource): its largest
    population, shards included, so that Ray starts a task only where that fits beside the
    tasks running there (a sweep of sharded populations never meets the OOM killer); at most
    a node's whole resource, so that a task every node can hold alone always starts."""
    need = max(guard.population_bytes(experiment.config(params, point))
               for point in experiment.points(params))
    nodes = [n["Resources"].get("memory", 0.0) for n in ray.nodes() if n["Alive"]]
    return int(min(need, max(nodes, default=0.0)))


def discard_parts(parts_dir: Path, key: str) -> None:
    """Remove a finished sweep's parts (once its results are written: a failure before keeps
    them for the rerun), its cut-short temporary files, and the folder once empty."""
    for part in Path(parts_dir).glob(f"{key}-*.parquet"):
        part.unlink(missing_ok=True)
    for stale in Path(parts_dir).glob(f".{key}-*.tmp"):
        stale.unlink(missing_ok=True)
    remove_if_empty(Path(parts_dir))


def _auto_workers(experiment: Experiment, params: Mapping[str, Any],
                  tasks: Sequence[Sequence[Unit]], todo: Sequence[int], work: Sequence[float],
                  finish: Any, progress: bool) -> int | None:
    """``workers="auto"``: run the first unfinished task here, timed, and choose serial (0) or a
    local Ray on every core (None) for the rest from its measured rate."""
    if len(todo) < 2:
        if progress:
            tqdm.write(f"privgames: {experiment.name}: {len(todo)} task to run: running "
                       "serially", file=sys.stderr)
        return 0
    first = todo[0]
    start = time.perf_counter()
    finish(first, run_batch(experiment.name, params, tasks[first]))
    seconds = time.perf_counter() - start
    rest = sum(work[i] for i in todo[1:])
    estimate = seconds * rest / work[first] if work[first] > 0 else seconds * (len(todo) - 1)
    ray = sys.modules.get("ray")
    cost = RAY_WARM_S if ray is not None and ray.is_initialized() else RAY_START_S
    use_ray = estimate > cost
    if progress:
        tqdm.write(f"privgames: {experiment.name}: the rest would take about {estimate:.2g} s "
                   f"serially; {'running on Ray' if use_ray else 'running serially'} (Ray "
                   f"costs about {cost:g} s to start; --workers N forces it)", file=sys.stderr)
    return None if use_ray else 0


def remove_if_empty(folder: Path) -> bool:
    """Remove ``folder`` if nothing is left in it; True if it is gone."""
    try:
        folder.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:  # not empty: another run's parts
        return False


def _task_work(experiment: Experiment, params: Mapping[str, Any],
               tasks: Sequence[Sequence[Unit]]) -> list[float]:
    """Each task's estimated work (its configs' ``footprint().work``, or the assumed one),
    so the progress bar counts operations, not units."""
    cache: dict[str, float] = {}

    def unit_work(label: Mapping[str, Any]) -> float:
        point = {k: v for k, v in label.items() if k != "population"}
        key = json.dumps(point, sort_keys=True, default=str)
        if key not in cache:
            config = experiment.config(params, point)
            cache[key] = float(footprint_of(config).work)
        return cache[key]

    return [sum(unit_work(label) for label, _ in task) for task in tasks]


#: The schema metadata key of a part's identity: its sweep's key, its task and its digest.
PART_KEY = b"privgames.part"


def _write_part(frame: pd.DataFrame, path: Path, key: str, task: int) -> None:
    """A finished task's rows, with the sweep key, the task's index and the rows' digest
    (:func:`~privgames.analysis.results.content_digest`) in the file's metadata."""
    identity = {"key": key, "task": task, "sha256": content_digest(frame)}
    write_parquet(frame, path, metadata={PART_KEY: json.dumps(identity).encode()})


def _read_part(path: Path, key: str, task: int) -> pd.DataFrame | None:
    """A finished task's rows, or None (with a one-line warning, the file deleted, the task to
    be recomputed) when the part is empty or truncated (a power loss), belongs to another
    sweep or task (copied over), or its rows no longer match their digest (a flipped bit)."""
    try:
        frame = read_parquet(path)
        identity = json.loads(parquet_metadata(path).get(PART_KEY, b"{}"))
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        why = f"unreadable ({type(err).__name__})"
    else:
        if not isinstance(identity, dict) or (identity.get("key"), identity.get("task")) != (
                key, task):
            why = "another task's part"
        elif identity.get("sha256") != content_digest(frame):
            why = "its rows do not match their checksum"
        else:
            return frame
    print(f"privgames: warning: {path} is {why}; deleting it and recomputing that task",
          file=sys.stderr)
    path.unlink(missing_ok=True)
    return None


def sweep_key(experiment: Experiment, params: Mapping[str, Any], seed: int) -> str:
    """The part files' key: the experiment, its parameters, the seed and the code that computes
    it (:func:`code_fingerprint`), so parts written by other code are never reused."""
    blob = json.dumps({"name": experiment.name, "params": params, "seed": seed,
                       "code": code_fingerprint(experiment.run_unit.__module__)},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@functools.cache
def code_fingerprint(module: str) -> str:
    """privgames' version and a hash of the source of ``module`` and of every module it imports,
    transitively, from privgames or from its own top-level package (a plugin's)."""
    own = {"privgames", module.split(".")[0]}
    sources: dict[str, bytes] = {}
    stack = [module]
    while stack:
        name = stack.pop()
        if name in sources:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # ``from package import attribute``
            spec = None
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        sources[name] = Path(origin).read_bytes()
        for node in ast.walk(ast.parse(sources[name])):
            if isinstance(node, ast.Import):
                stack += [a.name for a in node.names if a.name.split(".")[0] in own]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level and (
                    node.module.split(".")[0] in own):
                stack += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    digest = hashlib.sha256(metadata.version("privgames").encode())
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name])
    return digest.hexdigest()[:16]


def _part_path(parts_dir: Path | None, key: str, i: int) -> Path | None:
    return None if parts_dir is None else Path(parts_dir) / f"{key}-{i:04d}.parquet"
