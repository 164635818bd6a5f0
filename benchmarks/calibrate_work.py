"""Each built-in experiment's rate of work: its estimated operations (the configs'
``footprint().work``, what the work budget and the progress bar count) per second of one core,
measured by running it at quick scale serially (the median of ``--repeats`` runs, 3 by
default, interleaved); and its warm-up, what a fresh process's first run takes beyond the
next (modules and kernels loaded on first use), which a command's estimate adds. Writes
``analysis/work_rates.json``, which the work guard reads to say how long a run would take and
to refuse one past a day of work by default, and the progress bar to estimate the time left.

Each page's rate too: its step's work (the population's work over its steps) per second of a
reset and the steps that follow, drawn as the server draws them, at a size where the
computation outweighs the drawing (:data:`PAGE_SIZES`); the pages' work limit reads it
(:meth:`privgames.analysis.pages.Page.step_seconds`).

Run ``python benchmarks/calibrate_work.py`` on a quiet machine (``--quick``: two experiments,
one run each, printed and not written; ``--pages``: the pages' rates alone, written;
``--only A,B``: those experiments' rates alone, written beside the others').
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import arguments

OUT = Path(__file__).resolve().parent.parent / "analysis" / "work_rates.json"


def measure(name: str) -> tuple[float, float]:
    """``(operations, seconds)`` of one quick serial run of ``name``."""
    from privgames.analysis import api, guard
    from privgames.analysis import experiments as registry

    experiment = registry.get(name)
    params = experiment.resolve({}, "quick")
    work = guard.check(experiment, params, 0)
    start = time.perf_counter()
    api.run(name, workers=0)
    return work, time.perf_counter() - start


#: One experiment run twice in a fresh process, as ``privgames run`` would: (first, second)
#: seconds after the imports a command makes before its progress bar.
WARMUP = """
import json, sys, time
from privgames.analysis import api, sweep
times = []
for _ in range(2):
    start = time.perf_counter()
    api.run(sys.argv[1], workers=0)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def measure_warmup(name: str) -> float:
    """Seconds a fresh process's first quick run of ``name`` takes beyond its second (modules
    imported and kernels loaded on first use): what a command's estimate adds."""
    done = subprocess.run([sys.executable, "-c", WARMUP, name], capture_output=True,
                          text=True, check=True)
    first, second = json.loads(done.stdout.splitlines()[-1])
    return max(0.0, first - second)


#: Each page's inputs where it is timed (its size well above the page's start).
PAGE_SIZES = {"bas": {"K": 1000, "d": 5000}, "sar": {"K": 300, "d": 200}, "ppsp": {"n": 10000},
              "pricing": {"N": 20000}, "kmeans": {"repetitions": 100},
              "learning": {"agents": 100000}, "apes": {"n": 20000}}
#: Steps timed after a page's reset (the reset counts as one more).
PAGE_STEPS = 2


def measure_page(route: str) -> tuple[float, float]:
    """``(work of a step, seconds of a step)`` of page ``route`` at :data:`PAGE_SIZES`: its
    reset and :data:`PAGE_STEPS` steps, each drawn and read as the server does, averaged."""
    from privgames.analysis.pages import LIVE, PageModel, all_pages, rendered
    from privgames.environments.config import footprint_of

    page = all_pages()[route]
    LIVE.budget = float("inf")  # time the page, not the server's ledger
    start = time.perf_counter()
    model = PageModel.of(page)(**{**page.defaults(), **PAGE_SIZES[route]})
    assert model.error is None, model.error
    for _ in range(PAGE_STEPS):
        model.step()
        for kind in ("agents", "measures"):
            rendered(model.figure(kind), kind)
        model.readings()
    seconds = (time.perf_counter() - start) / (PAGE_STEPS + 1)
    config = model.env.config
    return footprint_of(config).work / getattr(config, page.steps), seconds


def main() -> None:
    args = arguments(__doc__, ("--pages", "the pages' rates alone"),
                     options=(("--only", "comma-separated experiments: their rates alone"),))
    from privgames.analysis import experiments as registry

    out = json.loads(OUT.read_text())
    repeats = 1 if args.quick else 3
    if not args.pages:
        names = (str(args.only).split(",") if args.only else list(registry.catalogue())[:2]
                 if args.quick else list(registry.catalogue()))
        seconds: dict[str, list[float]] = {name: [] for name in names}
        work: dict[str, float] = {}
        for _ in range(repeats):
            for name in names:
                work[name], s = measure(name)
                seconds[name].append(s)
        rates = {name: work[name] / statistics.median(seconds[name]) for name in names}
        out["rates"].update({k: float(f"{v:.3g}") for k, v in rates.items()})
        warmups = {name: statistics.median(measure_warmup(name) for _ in range(repeats))
                   for name in names}
        out.setdefault("warmups", {}).update({k: round(v, 2) for k, v in warmups.items()})
    routes = [] if args.only else list(PAGE_SIZES)[:1] if args.quick else list(PAGE_SIZES)
    page_work: dict[str, float] = {}
    page_seconds: dict[str, list[float]] = {route: [] for route in routes}
    for _ in range(repeats):
        for route in routes:
            page_work[route], s = measure_page(route)
            page_seconds[route].append(s)
    out["pages"] |= {r: float(f"{page_work[r] / statistics.median(page_seconds[r]):.3g}")
                     for r in routes}
    out.update({"pages_measured" if args.pages else "measured": time.strftime("%Y-%m-%d"),
                "repeats": repeats})
    if not args.quick:
        OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
