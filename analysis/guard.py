"""Refuse a run before it starts when it would not fit: a memory budget and a work budget.

Every config estimates one population's largest allocation and its work (``footprint()``);
a run whose estimated peak (times the local workers running populations side by side, plus
the bookkeeping of its units) passes the memory budget — by default half of the machine's
available memory, ``--max-memory`` to change it — is refused with one line naming the
parameter that drives it, its value, the estimate and the budget. ``--max-work`` bounds the
estimated total work the same way; by default a run is refused past a day of one core's work
(:data:`DEFAULT_CPU_HOURS`), timed at the experiment's measured rate of operations per second
(``work_rates.json``, written by ``benchmarks/calibrate_work.py``; an experiment without a
measured rate, a plug-in's, is timed at the built-in experiments' median rate). A
configuration without ``footprint()`` gets a conservative one (:meth:`Footprint.assumed`).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import resource
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privgames.environments.config import ConfigError, footprint_of

#: Bookkeeping per unit (its label, seed and rows in flight).
UNIT_BYTES = 4096
#: Share of the available memory a run may plan to use by default.
DEFAULT_SHARE = 0.5
#: Work a run may plan without ``--max-work``: this many hours of one core.
DEFAULT_CPU_HOURS = 24.0


@functools.cache
def _calibration() -> dict[str, Any]:
    """``work_rates.json``: the experiments' and pages' measured rates, and the warm-ups."""
    return json.loads(Path(__file__).with_name("work_rates.json").read_text())


def _rates() -> dict[str, float]:
    """Operations per second of one core, per built-in experiment (measured)."""
    return _calibration()["rates"]


def cpu_seconds(name: str, work: float) -> float:
    """Seconds of one core that ``work`` operations of experiment ``name`` take, at its
    measured rate (the built-in experiments' median rate for one without a measured rate)."""
    rates = _rates()
    return work / rates.get(name, statistics.median(rates.values()))


#: A Ray-sharded population's actors starting (their workers' imports), and one exchange of
#: its driver with its shards (an actor call's round trip), for the estimate of a run's time.
SHARD_START_S = 1.0
EXCHANGE_S = 0.002


def seconds_per_operation(experiment: Any, params: Mapping[str, Any]) -> float:
    """Seconds per operation of this run, one population at a time: the experiment's measured
    rate; a Ray-sharded population's work spread over its shards (at most one a core), beside
    its actors' start (:data:`SHARD_START_S`) and its driver's exchanges with them
    (:data:`EXCHANGE_S` each)."""
    per_op = cpu_seconds(experiment.name, 1.0)
    seconds = work = 0.0
    for point in experiment.points(params):
        config = experiment.config(params, point)
        fp = footprint_of(config)
        side_by_side = 1
        if fp.exchanges:
            side_by_side = min(shard_count(config), os.cpu_count() or 1)
            seconds += SHARD_START_S + fp.exchanges * EXCHANGE_S
        seconds += fp.work * per_op / side_by_side
        work += fp.work
    return seconds / work if work > 0 else per_op


def warmup_seconds(name: str) -> float:
    """Seconds a fresh process's first run of experiment ``name`` spends loading what it uses
    (measured; the built-in experiments' median for one without)."""
    warmups = _calibration().get("warmups", {})
    return warmups.get(name, statistics.median(warmups.values()) if warmups else 0.0)


def duration(seconds: float) -> str:
    """``seconds`` as a reader says it (``3.2 s``, ``41 min``, ``2.5 h``, ``12 days``)."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.2g} {unit}"
    return f"{seconds:.2g} s"


def available_memory() -> float:
    """Bytes of memory this process may still take: the least of the machine's
    ``MemAvailable`` (``/proc/meminfo``), its cgroup's limit less its use (v2 ``memory.max``,
    v1 ``memory.limit_in_bytes``: a container's 6 GB on a 24 GB machine) and its address-space
    limit (``RLIMIT_AS``) less what it holds; all the memory where none of them is readable."""
    found = [_field("/proc/meminfo", "MemAvailable:"), _cgroup_room()]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        found.append(max(0.0, soft - address_space()))
    known = [f for f in found if f is not None]
    return min(known) if known else float(os.sysconf("SC_PAGE_SIZE")
                                          * os.sysconf("SC_PHYS_PAGES"))


def address_space() -> float:
    """Bytes of address space this process holds now (``VmSize``; 0 where unknown)."""
    return _field("/proc/self/status", "VmSize:") or 0.0


def _field(path: str, key: str) -> float | None:
    """A ``key: N kB`` line's bytes in ``path``."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_room() -> float | None:
    """The memory this process's cgroup may still take (its limit less its use), or ``None``
    without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if controllers == "":  # v2
            folder, files = root / where.lstrip("/"), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):  # v1
            folder = root / "memory" / where.lstrip("/")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for candidate in (folder, folder.parent if controllers == "" else root / "memory"):
            try:
                limit, used = ((candidate / f).read_text().strip() for f in files)
            except OSError:
                continue
            if limit != "max" and float(limit) < 2.0**60:
                return max(0.0, float(limit) - float(used))
            break
    return None


def parse_size(text: str, name: str = "--max-memory") -> float:
    """``"4G"``, ``"512M"``, ``"1.5e9"`` -> bytes; a message names the option or argument
    ``name``."""
    m = re.fullmatch(r"\s*((?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([kKmMgGtT]?)[iI]?[bB]?\s*",
                     str(text))
    said = f"{name} {text!r}" if name.startswith("--") else f"{name}={text!r}"
    if not m:
        raise ConfigError(f"{said} is not a size: give e.g. 4G, 512M or 2e9")
    value = float(m.group(1)) * 1024 ** "_KMGT".index(m.group(2).upper() or "_")
    if not 0 < value < math.inf:
        raise ConfigError(f"{said} is out of range: it must be > 0 and finite")
    return value


def page_seconds(route: str, work: float) -> float:
    """Seconds of one core that ``work`` operations of a step of page ``route`` take, with its
    drawing, at the page's measured rate (the pages' median rate for one without)."""
    rates = _page_rates()
    return work / rates.get(route, statistics.median(rates.values()))


def _page_rates() -> dict[str, float]:
    return _calibration()["pages"]


def human_bytes(n: float) -> str:
    """``n`` bytes as a reader says it (``1.8 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"


def check(experiment: Any, params: Mapping[str, Any], workers: int | str | None = None,
          max_memory: float | None = None, max_work: float | None = None) -> float:
    """Raise ``ConfigError`` if the run would pass a budget; return its estimated work."""
    budget = _budget(max_memory)
    populations = int(params["populations"])
    points = experiment.points(params)
    cores = os.cpu_count() or 1
    side_by_side = 1 if workers == 0 else max(1, cores if workers in (None, "auto") else workers)
    units = len(points) * populations
    if units * UNIT_BYTES > budget:
        raise ConfigError(f"populations={populations} makes {units} units whose bookkeeping "
                          f"alone needs about {human_bytes(units * UNIT_BYTES)}, above the "
                          f"memory budget of {human_bytes(budget)} (--max-memory)")
    total = 0.0
    for point in points:
        config = experiment.config(params, point)
        if workers == 0 and getattr(config, "backend", None) == "ray":
            raise ConfigError("backend='ray' runs Ray actors, but workers=0 (--workers 0) asks "
                              "for no Ray: drop one of the two")
        fp = footprint_of(config)
        population = population_bytes(config)  # its shards' actors included
        need = population * min(side_by_side, units) + units * UNIT_BYTES
        if need > budget:
            value = point.get(fp.driver, params.get(fp.driver))
            raise _too_big(fp.driver, value, need, budget,
                           f" ({human_bytes(population)} per population, "
                           f"{min(side_by_side, units)} at a time)")
        total += fp.work * populations
    seconds = cpu_seconds(experiment.name, total)
    if max_work is not None and total > max_work:
        raise ConfigError(f"the run's estimated work, {total:.3g} operations (about "
                          f"{duration(seconds)} of one core), is above --max-work "
                          f"{max_work:.3g}")
    if max_work is None and seconds > DEFAULT_CPU_HOURS * 3600.0:
        driver = work_driver(experiment, params)
        raise ConfigError(f"the run's estimated work, {total:.3g} operations, would take "
                          f"about {duration(seconds)} of one core (at this experiment's "
                          f"measured {total / seconds:.2g} operations/s), above the default "
                          f"limit of {DEFAULT_CPU_HOURS:g} h: lower {driver}, or give "
                          f"--max-work {_round_up(total)} (or more) to run it anyway", driver)
    return total


def work_driver(experiment: Any, params: Mapping[str, Any]) -> str:
    """The parameter to lower for less work: the number raised most above its quick-scale
    default (of a swept list, its largest value), ``populations`` when none was raised."""
    defaults = experiment.resolve({}, "quick")

    def size(value: Any) -> float | None:
        if isinstance(value, list | tuple):
            sizes = [x for x in map(size, value) if x is not None]
            return max(sizes) if sizes else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return abs(float(value))
        return None

    pairs = {name: (size(value), size(defaults[name])) for name, value in params.items()
             if name in defaults}
    raised = {name: given / default for name, (given, default) in pairs.items()
              if given is not None and default}
    name = max(raised, key=raised.get, default="populations")
    return name if raised.get(name, 0.0) > 1.0 else "populations"


def population_bytes(config: Any) -> float:
    """What one population holds at once in all its processes: its footprint's peak, times its
    shards where it runs as Ray actors (whose footprint is the largest shard's)."""
    fp = footprint_of(config)
    if getattr(config, "backend", None) != "ray":
        return fp.peak_bytes
    return fp.peak_bytes * shard_count(config)


def shard_count(config: Any) -> int:
    """A Ray-backed population's shards (``auto``: as many as this machine's cores)."""
    shards = getattr(config, "segments", None) or getattr(config, "shards", 1)
    return shards if isinstance(shards, int) else os.cpu_count() or 1


def killed_for_memory(experiment: Any, params: Mapping[str, Any]) -> ConfigError:
    """The refusal for a run whose task Ray's memory monitor killed, and again on its one
    retry (``ray_session.OOM_RETRIES``): the machine had less free memory than the estimate
    allowed for (other programs, or an estimate too low); it names the parameter that drives
    the largest population's memory."""
    prints = [(footprint_of(experiment.config(params, point)), point)
              for point in experiment.points(params)]
    fp, point = max(prints, key=lambda x: x[0].peak_bytes)
    value = point.get(fp.driver, params.get(fp.driver))
    return ConfigError(f"{experiment.name}: a task was killed for memory by Ray's memory "
                       f"monitor, twice (a population needs about {human_bytes(fp.peak_bytes)} "
                       f"with {fp.driver}={value}, and the machine had less free while the "
                       f"run's tasks ran side by side): lower {fp.driver}, or --workers",
                       fp.driver)


def _budget(max_memory: float | None) -> float:
    """The memory a run may use: ``max_memory``, else :data:`DEFAULT_SHARE` of what is free."""
    return DEFAULT_SHARE * available_memory() if max_memory is None else float(max_memory)


def _too_big(driver: str, value: Any, need: float, budget: float, how: str) -> ConfigError:
    return ConfigError(f"{driver}={value} needs about {human_bytes(need)} of memory{how}, "
                       f"above the budget of {human_bytes(budget)} (--max-memory): lower "
                       f"{driver}", driver)


def _round_up(x: float) -> str:
    """``x`` rounded up to two significant digits, as a number to type."""
    scale = 10.0 ** (math.floor(math.log10(x)) - 1)
    return f"{math.ceil(x / scale) * scale:.2g}"
