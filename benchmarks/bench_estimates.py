"""Estimated against actual time: what a run's progress bar first says it will take
(:func:`privgames.analysis.sweep.estimate`) beside the run's wall time, measured here.

Each run in a fresh process, as a command runs it: every experiment at quick scale serially
(``--workers 0``); a few on a local Ray started cold (``--workers 2``: Ray's start-up is in
both); and sharded populations, in
process and on two Ray shards (learning-dynamics' pricing game, the PPSP ring). The target:
every estimate within a factor of 2 of the actual time (``worst_factor`` < 2). ``--write``
also replaces this benchmark's section of ``benchmarks/RESULTS.md`` with the table.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import arguments

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
#: (label, experiment, parameters, workers) beside the serial quick runs.
CASES = [
    ("ray: bas-chain", "bas-chain", {}, 2),
    ("ray: apes-bounds", "apes-bounds", {}, 2),
    ("ray: sar-success-vs-p", "sar-success-vs-p", {}, 2),
    ("sharded in process: learning pricing 10^5 x 30", "learning-dynamics",
     {"game": "pricing", "learner": "hedge", "agents": 100000, "rounds": 30, "shards": 2,
      "populations": 1}, 0),
    ("2 Ray shards: learning pricing 10^5 x 30", "learning-dynamics",
     {"game": "pricing", "learner": "hedge", "agents": 100000, "rounds": 30,
      "backend": "ray", "shards": 2, "populations": 1}, 1),
    ("in process: ring n = 2 10^5, K = 60", "ppsp-ring",
     {"n": 200000, "K": 60, "replications": 20, "populations": 1}, 0),
    ("2 Ray shards: ring n = 2 10^5, K = 60", "ppsp-ring",
     {"n": 200000, "K": 60, "replications": 20, "backend": "ray", "shards": 2,
      "populations": 1}, 1),
]


#: One run in a fresh process, as ``privgames run`` makes it: its first estimate, made after
#: the imports a command makes before its progress bar, and its seconds from there.
ONE_RUN = """
import json, sys, time
from privgames.analysis import api, sweep
from privgames.analysis import experiments as registry
name, params, workers = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
start = time.perf_counter()
experiment = registry.get(name)
estimate = sweep.estimate(experiment, experiment.resolve(params, "quick"), 0, workers)
api.run(name, workers=workers, params=params)
print(json.dumps([estimate, time.perf_counter() - start]))
"""


def measure(name: str, params: dict, workers: int) -> dict:
    """The first estimate and the wall time of one run in a fresh process (with a cold local
    Ray for a Ray run)."""
    done = subprocess.run([sys.executable, "-c", ONE_RUN, name, json.dumps(params),
                           str(workers)], capture_output=True, text=True, check=True)
    estimate, actual = json.loads(done.stdout.splitlines()[-1])
    return {"estimate_s": round(estimate, 3), "actual_s": round(actual, 3),
            "factor": round(max(estimate / actual, actual / estimate), 2)}


def table(cases: dict[str, dict]) -> list[str]:
    lines = ["## bench_estimates", "", "`python benchmarks/bench_estimates.py --write` on "
             f"{time.strftime('%Y-%m-%d')}: each run's first estimate (what its progress bar "
             "first says) against its wall time; target: within a factor of 2.", "",
             "| run | estimate (s) | actual (s) | factor |", "|---|---|---|---|"]
    for label, c in cases.items():
        mark = "" if c["factor"] < 2 else " **(over 2)**"
        lines.append(f"| {label} | {c['estimate_s']:.3g} | {c['actual_s']:.3g} | "
                     f"{c['factor']:.2f}{mark} |")
    return lines


def main() -> None:
    args = arguments(__doc__, ("--write", "replace this benchmark's section of RESULTS.md"))
    from privgames.analysis import experiments as registry

    names = list(registry.catalogue())[:2] if args.quick else list(registry.catalogue())
    cases = {f"serial: {name}": measure(name, {}, 0) for name in names}
    if not args.quick:
        cases |= {label: measure(name, params, workers)
                  for label, name, params, workers in CASES}
    factors = [c["factor"] for c in cases.values()]
    out = {"worst_factor": max(factors), "median_factor": statistics.median(factors),
           "over_2": sum(f >= 2 for f in factors), "cases": cases}
    if args.write:
        from run import replace_section

        RESULTS.write_text(replace_section(RESULTS.read_text(), table(cases)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
