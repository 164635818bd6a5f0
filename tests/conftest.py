"""Shared fixtures: one Ray session for the whole test run (``ray.init`` costs seconds), and
Debian's Chromium driven by Playwright for the browser tests (pages and the docs site)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# What ensure_ray does before it imports Ray, done before any test module does: Ray reads its
# single-machine (loopback-only) switch once, at import, so the order of tests must not matter.
if not os.environ.get("RAY_ADDRESS"):
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="session")
def ray_session():
    from privgames.environments.ray_session import ensure_ray

    ray = ensure_ray(workers=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def quick_reproduction(tmp_path_factory, ray_session) -> Path:
    """``privgames reproduce --workers 2`` into a folder, once a session: the report's test
    reads it, and the documentation site's build reuses its runs (``keep_finished``)."""
    from privgames.analysis.cli import main

    out = tmp_path_factory.mktemp("reproduction")
    assert main(["reproduce", "--workers", "2", "--out", str(out)]) == 0
    return out


#: Debian's Chromium (Playwright's own browser download cannot work here; .ci/run installs it).
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for one test module; the test is skipped, saying why, where
    Playwright or Chromium is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra installs it")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield b
        b.close()


#: Markers of the tests that need the machine to themselves: they start Ray, a two-node cluster
#: or a browser and its server, and use both cores.
ALONE_MARKERS = {"ray", "cluster", "browser"}
#: Modules whose tests also need it: they send signals to process groups, kill processes, count
#: processes or memory, time queries under hard limits, or fork two test runs at a time.
ALONE_MODULES = {"test_stop.py", "test_faults.py", "test_memory.py", "test_page_attacks.py",
                 "test_mutation_guard.py"}
#: Fixtures whose tests run together on one worker, beside the machine's group, so that each is
#: made once: the session's quick reproduction (the report's test, and the site built from it
#: with its browser test) and the benchmarks' quick run (which starts its own Ray: a test of
#: it marked ``ray`` made it a second time in the machine's group, 75 s).
SHARED_FIXTURES = {"quick_reproduction": "reproduction", "quick_benchmarks": "benchmarks"}


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Every test that uses the Ray session carries the ``ray`` marker, so ``-m "not ray"``
    never starts Ray (tests that start their own Ray in a subprocess are marked by hand).

    Under pytest-xdist (the README's ``-n auto --dist loadgroup``), the tests that need the
    machine alone run one after another on one worker, the users of each shared fixture on
    one worker (:data:`SHARED_FIXTURES`), and every other module runs whole on a worker (its
    module fixtures made once) beside them."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
        alone = (ALONE_MARKERS & {m.name for m in item.iter_markers()}
                 or item.path.name in ALONE_MODULES)
        shared = [SHARED_FIXTURES[f] for f in getattr(item, "fixturenames", ())
                  if f in SHARED_FIXTURES]
        group = shared[0] if shared else "machine" if alone else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
        if config.getoption("loadgroup", False) and "@" not in item.nodeid:
            _in_group(item, group)


def _in_group(item: pytest.Item, group: str) -> None:
    """Give ``item`` the ``@group`` suffix that xdist's scheduler reads off its id: xdist 3.8
    sets ``item._nodeid``, which pytest 9.2 no longer reads (its id is ``item._id``)."""
    from _pytest.nodes import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{group}")
