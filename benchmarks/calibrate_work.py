"""Each built-in experiment's rate of work: its estimated operations (the configs'
``footprint().work``, what the work budget and the progress bar count) per second of one core,
measured by running it at quick scale serially (the median of ``--repeats`` runs, 3 by
default, interleaved). Writes ``analysis/work_rates.json``, which the work guard reads to say
how long a run would take and to refuse one past a day of work by default.

Run ``python benchmarks/calibrate_work.py`` on a quiet machine (``--quick``: two experiments,
one run each, printed and not written).
"""

from __future__ import annotations

import json
import statistics
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


def main() -> None:
    args = arguments(__doc__)
    from privgames.analysis import experiments as registry

    names = list(registry.catalogue())[:2] if args.quick else list(registry.catalogue())
    repeats = 1 if args.quick else 3
    seconds: dict[str, list[float]] = {name: [] for name in names}
    work: dict[str, float] = {}
    for _ in range(repeats):
        for name in names:
            work[name], s = measure(name)
            seconds[name].append(s)
    rates = {name: work[name] / statistics.median(seconds[name]) for name in names}
    out = {"rates": {k: float(f"{v:.3g}") for k, v in rates.items()},
           "measured": time.strftime("%Y-%m-%d"), "repeats": repeats}
    if not args.quick:
        OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
