"""Mutation guard: curated mutants of the mechanisms, the environment kernels and the verdicts,
each applied to a temporary copy of privgames; the tests named with it must fail.

``tests/mutation/mutants.toml`` lists each mutant: the file, the exact text it replaces (found
exactly once), the replacement, the tests that must fail and why it matters (a sign, a
constant, an exponent, an off-by-one, a sensitivity, a printed formula put back). The copy is
laid out as the installed package (``privgames``, ``privgames.mechanisms``, ...) and put first
on ``PYTHONPATH``, so the repository's tests import the mutant. A mutant is killed when pytest
exits 1 (a test failed), not when it cannot collect or import (exit 2-4): an import error would
"kill" anything.

Each mutant's pytest runs in a child forked from the guard after it has imported what every
test imports (numpy, scipy, pandas, Mesa, matplotlib, numba, pytest: :data:`WARM`): a run in
a fresh interpreter spent about 2.7 s importing them. The guard never imports privgames or the
tests, so each child imports them from its own copy.

The copies live in slots (one per mutant running at a time), each copy laid afresh at the
slot's path with the sources' times, and each slot keeps numba's cache: a compiled kernel is
cached by its file's path and time, so only the mutated file's kernels compile again (every
kernel a mutant's tests used compiled in every fresh copy: up to 4 s a mutant). A kernel
calling one of another file would keep that one's old code; none does (``compiled`` kernels
cannot call each other; ``pricing_kernels``' call only their own module's).

Run ``python tests/mutation/guard.py [--json] [--only ID ...]``: first the named tests on an
unmutated copy (they must pass, so that a kill is the mutant's doing), then the mutants; the
slow test ``tests/test_mutation_guard.py`` runs it in ``.ci/run``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import queue
import shutil
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = Path(__file__).with_name("mutants.toml")
#: Where each source folder lives in the installed package (pyproject's ``package-dir``).
LAYOUT = {"api": "privgames", "agents": "privgames/agents",
          "environments": "privgames/environments", "mechanisms": "privgames/mechanisms",
          "analysis": "privgames/analysis"}


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: ``old`` replaced by ``new`` in ``file`` must fail ``tests``."""

    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


def load(path: Path = MUTANTS) -> list[Mutant]:
    with open(path, "rb") as f:
        return [Mutant(**{**m, "tests": tuple(m["tests"])}) for m in tomllib.load(f)["mutant"]]


def copy_package(dest: Path) -> Path:
    """The source folders laid out as the installed package under ``dest``."""
    for folder, target in LAYOUT.items():
        shutil.copytree(ROOT / folder, dest / target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def apply(mutant: Mutant, package: Path) -> None:
    folder, _, rest = mutant.file.partition("/")
    path = package / LAYOUT[folder] / rest
    text = path.read_text()
    if text.count(mutant.old) != 1:
        raise ValueError(f"{mutant.id}: its text occurs {text.count(mutant.old)} times in "
                         f"{mutant.file}, not once")
    path.write_text(text.replace(mutant.old, mutant.new))


#: pytest plugins a mutant's tests do without (hypothesis' alone is 1.7 s of a 4.6 s start, and
#: a run per mutant pays it; a test that needed one fails on the unmutated copy too), and no
#: xdist workers (the guard runs two mutants at a time itself).
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio", "-p",
         "no:benchmark", "-n", "0")


#: What the tests import, imported once by the guard before it forks (never privgames).
WARM = ("numpy", "scipy.optimize", "scipy.stats", "scipy.special", "pandas", "mesa",
        "matplotlib.figure", "numba", "duckdb", "pyarrow", "seaborn", "hypothesis",
        "hypothesis.strategies", "pytest")


def run_tests(tests: tuple[str, ...], package: Path) -> int:
    """pytest's exit status for ``tests`` against the copy at ``package`` (first failure stops
    it; numba's cache beside it), in a child forked from this process (which must not have
    imported privgames)."""
    assert "privgames" not in sys.modules, "the guard's children would see this privgames"
    pid = os.fork()
    if pid == 0:  # the child: the copy first on the path, here and in what the tests start
        status = 3
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.chdir(ROOT)
            os.environ.pop("RAY_ADDRESS", None)
            import numba.core.config  # read when a kernel is compiled (numba is imported)

            numba.core.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"] = str(
                package.parent / "numba")
            os.environ["PYTHONPATH"] = os.pathsep.join([str(package),
                                                        os.environ.get("PYTHONPATH", "")])
            sys.path.insert(0, str(package))
            import pytest
            from hypothesis import Phase, settings

            # a failing example is not shrunk (a kill needs one, not the smallest: shrinking
            # took 25 s of some mutants' 27) nor saved where the repository's runs replay it
            settings.register_profile("guard", database=None,
                                      phases=(Phase.explicit, Phase.generate))
            settings.load_profile("guard")
            status = int(pytest.main(["-x", "-q", *QUIET, "--no-header", *tests]))
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def lay(slot: Path) -> Path:
    """A fresh copy of the package in ``slot`` (its numba cache kept)."""
    shutil.rmtree(slot / "package", ignore_errors=True)
    return copy_package(slot / "package")


def run_one(mutant: Mutant, slots: queue.Queue) -> dict:
    """Apply ``mutant`` to a fresh copy in a free slot and run its tests: ``killed`` when they
    fail."""
    start = time.perf_counter()
    slot = slots.get()
    try:
        package = lay(slot)
        apply(mutant, package)
        status = run_tests(mutant.tests, package)
    finally:
        slots.put(slot)
    return {"id": mutant.id, "file": mutant.file, "status": status, "killed": status == 1,
            "seconds": round(time.perf_counter() - start, 1)}


def run_all(mutants: list[Mutant], slots: list[Path]) -> list[dict]:
    free: queue.Queue = queue.Queue()
    for slot in slots:
        free.put(slot)
    with ThreadPoolExecutor(len(slots)) as pool:
        return list(pool.map(lambda m: run_one(m, free), mutants))


def score(results: list[dict]) -> str:
    killed = sum(r["killed"] for r in results)
    return f"{killed} of {len(results)} mutants killed ({killed / len(results):.0%})"


def baseline(mutants: list[Mutant], slot: Path) -> int:
    """pytest's exit status for every test the mutants name, on an unmutated copy in ``slot``
    (its kernels compiled into the slot's cache; numba's cache is by path: another slot's
    would not be read)."""
    return run_tests(tuple(sorted({t for m in mutants for t in m.tests})), lay(slot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--only", nargs="*", help="mutant ids to run")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    for name in WARM:
        importlib.import_module(name)
    mutants = [m for m in load() if not args.only or m.id in args.only]
    with tempfile.TemporaryDirectory(prefix="privgames-mutants-") as tmp:
        slots = [Path(tmp) / str(k) for k in range(args.workers)]
        unmutated = baseline(mutants, slots[0])
        results = run_all(mutants, slots)
    if args.json:
        print(json.dumps({"unmutated": unmutated, "score": score(results),
                          "results": results}))
        return
    print(f"unmutated copy: pytest exit {unmutated} ({'passes' if unmutated == 0 else 'FAILS'})")
    for r in results:
        print(f"{'killed' if r['killed'] else 'SURVIVED (exit ' + str(r['status']) + ')':<22}"
              f"{r['seconds']:>6} s  {r['id']}")
    print(score(results))


if __name__ == "__main__":
    main()
