"""Run an experiment's units serially or as Ray tasks, resumably.

Units are batched into at most ``MAX_TASKS`` tasks of consecutive units; each finished task is
written atomically to a part file, so an interrupted sweep resumes where it stopped without
losing or duplicating rows. Rows are concatenated in unit order, so serial and Ray runs with the
same seed are bit-identical whatever the worker count.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
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
from privgames.environments.progress import Tally, reporting, to_tally
from privgames.environments.ray_session import ensure_ray

#: Upper bound on tasks per sweep: enough to balance 2-16 workers, few enough that each task
#: carries several units (Ray pays about 1 ms per task).
MAX_TASKS = 32
#: Experiments this process has run (their first run loaded what they use).
WARM: set[str] = set()
#: How often a Ray sweep reads its tasks' reported rounds for the bar.
RAY_POLL_S = 0.5
#: A Ray sweep's bar counts its tasks' rounds (through a :class:`Tally` actor, about 0.5 s
#: of a cold 2-core run) when each worker has at most one task or the run is estimated past
#: this; otherwise it moves as tasks end.
TALLY_AFTER_S = 30.0
#: The bar's estimate weighs the rate measured since the tasks began against the estimated
#: one as if that had been measured for this long.
PRIOR_S = 5.0
#: tqdm's bar without its own estimate of the time left (the postfix has the sweep's).
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
#: ``workers="auto"``: run serially, or start a local Ray when the rest of the work would take
#: longer serially than Ray costs to start: ``ray.init`` and the first tasks' cold workers,
#: 3.5-4.0 s on 2 cores (``benchmarks/bench_chain.py``, ``ray.fixed_cost_s``), or a sweep's
#: round trips when this process already runs Ray.
AUTO = "auto"
RAY_START_S = 4.0
RAY_WARM_S = 0.3
#: The part of :data:`RAY_START_S` after ``ray.init`` returns, the first tasks' workers
#: importing privgames (0.7 s of a core each).
COLD_WORKERS_S = 2.0


def batches(units: Sequence[Unit]) -> list[list[Unit]]:
    """Consecutive batches of units; depends only on the number of units."""
    n_tasks = min(len(units), MAX_TASKS)
    return [[units[i] for i in b] for b in np.array_split(np.arange(len(units)), n_tasks)]


def run_batch(name: str, params: Mapping[str, Any], batch: Sequence[Unit],
              report: Callable[[float], None] | None = None) -> pd.DataFrame:
    """Run a batch of units of experiment ``name`` (also the body of a Ray task); ``report``
    gets the operations done as each unit's rounds end (at most each unit's estimate)."""
    experiment = get(name)
    rows = []
    for label, seed in batch:
        with (reporting(_capped(report, _unit_work(experiment, params, label))) if report
              else contextlib.nullcontext()):
            rows.append(experiment.run_one(params, label, seed))
    return pd.concat(rows, ignore_index=True)


def _capped(report: Callable[[float], None], work: float) -> Callable[[float], None]:
    """``share`` of a unit's rounds as ``work`` operations, at most ``work`` in all (a unit
    may run several models, each reporting its rounds)."""
    left = [work]

    def send(share: float) -> None:
        amount = min(share * work, left[0])
        if amount > 0:
            left[0] -= amount
            report(amount)

    return send


def _run_batch_on_node(name: str, params: Mapping[str, Any], batch: Sequence[Unit],
                       task: int, tally: Any) -> tuple[pd.DataFrame, str]:
    """A Ray task: the batch's rows and the id of the node that computed them; its rounds
    are reported to ``tally`` (a :class:`~privgames.environments.progress.Tally`, or None)."""
    import ray

    report = None if tally is None else to_tally(tally, task)
    return run_batch(name, params, batch, report), ray.get_runtime_context().get_node_id()


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
    bar = Progress(experiment, params, work, done, progress, workers)
    try:  # the bar ends its line whatever happens: an error starts on its own
        if done and progress:
            bar.write(f"privgames: {experiment.name}: resuming, {len(done)} of {len(tasks)} "
                      "tasks already done")

        def finish(i: int, frame: pd.DataFrame) -> None:
            if parts[i] is not None:
                _write_part(frame, parts[i], key, i)
            done[i] = frame
            bar.finished(i)

        if workers == AUTO:
            workers = None if address else _auto_workers(experiment, params, tasks, todo, bar,
                                                         finish, progress)
            todo = [i for i in todo if i not in done]
        if workers == 0 or not todo:
            bar.began_now()
            for i in todo:
                finish(i, run_batch(experiment.name, params, tasks[i], bar.sink(i)))
        else:
            cold = bar.ahead >= RAY_START_S  # the estimate counted Ray's start-up
            ray = ensure_ray(workers, address)
            bar.running(min(len(todo), int(ray.cluster_resources().get("CPU", 1))))
            bar.began_now(COLD_WORKERS_S if cold else 0.0)
            remote = ray.remote(_run_batch_on_node).options(
                memory=_task_memory(ray, experiment, params))
            rounds_matter = len(todo) <= bar.parallel or bar.seconds_left() > TALLY_AFTER_S
            tally = (ray.remote(Tally).options(num_cpus=0).remote() if progress and
                     rounds_matter else None)
            pending = {remote.remote(experiment.name, dict(params), tasks[i], i, tally): i
                       for i in todo}
            nodes = set()
            try:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=RAY_POLL_S)
                    if tally is not None:
                        try:
                            bar.tallied(ray.get(tally.take.remote()))
                        except ray.exceptions.RayError:  # it died (killed for memory): the
                            ray.kill(tally)  # bar moves as tasks end
                            tally = None
                    if not ready:
                        continue
                    try:
                        frame, node = ray.get(ready[0])
                    except ray.exceptions.OutOfMemoryError:
                        raise guard.killed_for_memory(experiment, params) from None
                    nodes.add(node)
                    finish(pending.pop(ready[0]), frame)
            finally:
                if tally is not None:
                    ray.kill(tally)
            bar.close()  # before the line below
            if progress:
                print(f"privgames: {experiment.name}: ran {len(todo)} tasks on {len(nodes)} Ray "
                      f"node{'s' if len(nodes) != 1 else ''}", file=sys.stderr)
    finally:
        bar.close()
    WARM.add(experiment.name)
    return pd.concat([done[i] for i in range(len(tasks))], ignore_index=True)


class Progress:
    """The sweep's bar and its one estimate of the time left, in seconds of the clock.

    The bar counts operations and moves with every round a population reports
    (:mod:`privgames.environments.progress`), in this process or from a Ray task. The
    estimate is the work left at a rate: before the tasks begin, the experiment's calibrated
    rate with its sharded populations' actors and exchanges
    (:func:`~privgames.analysis.guard.seconds_per_operation`) times the tasks running side by
    side, plus Ray's start-up while it is ahead (:data:`RAY_START_S`); then the rate measured
    since they began, with the estimated one counted as :data:`PRIOR_S` seconds of it. tqdm's
    own remaining time is not shown: one estimate, never two."""

    def __init__(self, experiment: Experiment, params: Mapping[str, Any],
                 work: Sequence[float], done: Mapping[int, Any], show: bool,
                 workers: int | str | None) -> None:
        self.work = list(work)
        self.credit = [w if i in done else 0.0 for i, w in enumerate(work)]
        self.per_op = guard.seconds_per_operation(experiment, params)
        self.began: tuple[float, float] | None = None  # (clock, work done) as tasks began
        # the plan: serial, or side by side on Ray after its start-up (auto: as it would choose)
        todo, cores = len(work) - len(done), os.cpu_count() or 1
        ray = sys.modules.get("ray")
        start = RAY_WARM_S if ray is not None and ray.is_initialized() else RAY_START_S
        self.parallel, self.ahead = 1, 0.0
        if experiment.name not in WARM:  # its first run in this process loads what it uses
            self.per_op += guard.warmup_seconds(experiment.name) / max(sum(work), 1.0)
        if todo and (workers not in (0, AUTO) or (  # Ray starts even for one task
                workers == AUTO and todo > 1 and cores > 1 and self.seconds_left() > start)):
            self.parallel = min(todo, cores if workers in (AUTO, None) else int(workers))
            self.ahead = start
        self.bar = tqdm(total=sum(work), desc=experiment.name, unit="op", unit_scale=True,
                        file=sys.stderr, disable=not show, initial=sum(self.credit),
                        postfix=self.left(), bar_format=BAR_FORMAT)

    def seconds_left(self) -> float:
        """The one estimate: seconds of the clock until the last task ends."""
        left = sum(self.work) - sum(self.credit)
        prior = self.parallel / self.per_op  # operations a second, as estimated
        if self.began is None:
            return self.ahead + left / prior
        elapsed = time.perf_counter() - self.began[0]
        since = sum(self.credit) - self.began[1]
        working = max(0.0, elapsed - self.ahead)  # after the start-up still ahead at began
        rate = (since + prior * PRIOR_S) / (working + PRIOR_S)
        return max(0.0, self.ahead - elapsed) + left / rate

    def left(self) -> str:
        return f"about {guard.duration(self.seconds_left())} left"

    def add(self, i: int, work: float) -> None:
        """Task ``i`` did ``work`` more operations (never past its own)."""
        work = min(work, self.work[i] - self.credit[i])
        if work > 0:
            self.credit[i] += work
            self.bar.set_postfix_str(self.left(), refresh=False)
            self.bar.update(work)

    def finished(self, i: int) -> None:
        self.add(i, self.work[i])

    def tallied(self, done: Mapping[int, float]) -> None:
        """What the Ray tasks reported (:class:`~privgames.environments.progress.Tally`)."""
        for i, work in done.items():
            self.add(i, work)

    def sink(self, i: int) -> Any:
        """Where task ``i``, run here, reports its work."""
        return functools.partial(self.add, i)

    def running(self, parallel: int, ahead: float = 0.0) -> None:
        """Tasks will run ``parallel`` side by side after ``ahead`` seconds (Ray's start-up);
        nothing measured counts until they begin."""
        self.parallel, self.ahead, self.began = max(1, parallel), ahead, None
        self.bar.set_postfix_str(self.left(), refresh=False)

    def began_now(self, ahead: float = 0.0) -> None:
        """The tasks begin, ``ahead`` seconds of start-up still to come (Ray's cold workers):
        the rate is measured from here."""
        self.ahead, self.began = ahead, (time.perf_counter(), sum(self.credit))
        self.bar.set_postfix_str(self.left(), refresh=True)

    def write(self, line: str) -> None:
        tqdm.write(line, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


def estimate(experiment: Experiment, params: Mapping[str, Any], seed: int,
             workers: int | str | None) -> float:
    """The seconds a sweep's bar first says it will take (:class:`Progress`), nothing done."""
    work = _task_work(experiment, params, batches(experiment.units(params, seed)))
    return Progress(experiment, params, work, {}, False, workers).seconds_left()


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
                  tasks: Sequence[Sequence[Unit]], todo: Sequence[int], bar: Progress,
                  finish: Any, show: bool) -> int | None:
    """``workers="auto"``: run the first unfinished task here, timed, and choose serial (0) or a
    local Ray on every core (None) for the rest from its measured rate, which the bar's
    estimate takes from then on."""
    if len(todo) < 2:
        if show:
            bar.write(f"privgames: {experiment.name}: {len(todo)} task to run: running "
                      "serially")
        return 0
    first = todo[0]
    bar.running(1)
    bar.began_now()
    finish(first, run_batch(experiment.name, params, tasks[first], bar.sink(first)))
    serial = bar.seconds_left()  # the measured task weighed with the calibrated rate
    rest = sum(bar.work[i] for i in todo[1:])
    if rest > 0:
        bar.per_op = serial / rest
    ray = sys.modules.get("ray")
    cost = RAY_WARM_S if ray is not None and ray.is_initialized() else RAY_START_S
    side_by_side = min(len(todo) - 1, os.cpu_count() or 1)
    use_ray = serial > cost and side_by_side > 1
    bar.running(side_by_side if use_ray else 1, cost if use_ray else 0.0)
    if show:
        how = (f"running on Ray ({side_by_side} at a time: about {bar.left()[6:]} with Ray's "
               f"start-up)" if use_ray else f"running serially (Ray costs about {cost:g} s "
               "to start)")
        bar.write(f"privgames: {experiment.name}: the rest would take about "
                  f"{guard.duration(serial)} serially; {how}; --workers N forces a choice")
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
    return [sum(_unit_work(experiment, params, label) for label, _ in task) for task in tasks]


def _unit_work(experiment: Experiment, params: Mapping[str, Any],
               label: Mapping[str, Any]) -> float:
    """One unit's estimated work (its config's ``footprint().work``)."""
    point = {k: v for k, v in label.items() if k != "population"}
    return _point_work(experiment.name, json.dumps(params, sort_keys=True, default=str),
                       json.dumps(point, sort_keys=True, default=str))


@functools.lru_cache(maxsize=256)
def _point_work(name: str, params: str, point: str) -> float:
    return float(footprint_of(get(name).config(json.loads(params), json.loads(point))).work)


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
    except (OSError, ValueError, RecursionError) as err:  # ArrowInvalid is a ValueError
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
