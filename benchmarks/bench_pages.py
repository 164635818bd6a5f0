"""The pages: how long ``privgames viz`` takes to listen and to answer its index (and how long
the pages then take to load, in a fresh process), and how long one step of a 1,000- and
a 10,000-agent model takes to redraw (the step, the numbers and both figures rendered as the
server sends them, ``pages.rendered``: what it does per Step click before the browser shows
it).

It also times, against a real server driven in Chromium (where it is installed), a query
killed at its time limit, and how long the server took meanwhile to answer another client its
index (``killed_query_s``, ``other_client_s``: the median and the slowest of its answers); and
it sets each page's estimated step time (what its work limit refuses on) beside the measured
one at 10,000 agents (``estimate_ratio``: estimate over measurement, within a factor of 2 is
the aim, above 1 is the safe side).

Run ``python benchmarks/bench_pages.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process. Targets (issues 30, 43): listening within 3 s, a step
redrawn within 0.3 s at 1,000 agents and within 1 s at 10,000, another client answered within
2 s while a query is killed.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _common import arguments, timed

from privgames.analysis.pages import PageModel, all_pages, rendered
from privgames.environments.config import footprint_of

#: A query that runs past the results page's time limit inside one DuckDB call.
SLOW_QUERY = "SELECT sum(a.range) FROM range(100000000000) a"

#: The pages timed at 10,000 agents: not SAR (its page stops at K = 300: a round's attack
#: holds K^2 chains, 13 GiB at 10^4) nor k-means (no agents to count).
TEN_THOUSAND = ("bas", "ppsp", "pricing", "apes", "learning")


def _start_seconds() -> tuple[float, float]:
    """Seconds from ``privgames viz`` to listening, and to the index page's first answer
    (HTTP 200)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", "viz", "--port",
                             str(port), "--no-token"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        listening = _until(lambda: socket.create_connection(("127.0.0.1", port),
                                                            timeout=0.1).close(), proc)
        index = _until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/",
                                                      timeout=10).read(), proc)
        return listening - started, index - started
    finally:
        proc.terminate()
        proc.wait()


def _until(attempt, proc) -> float:
    """When ``attempt()`` first succeeds (within 60 s)."""
    started = time.perf_counter()
    while time.perf_counter() - started < 60:
        try:
            attempt()
            return time.perf_counter()
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"privgames viz exited: {proc.stderr.read()}") from None
            time.sleep(0.02)
    raise RuntimeError("privgames viz did not answer within 60 s")


def _pages_seconds() -> float:
    """Seconds a fresh process takes to load the pages (what the server's thread does after
    it listens, and a first visit waits for at most)."""
    code = ("import time; t = time.perf_counter(); from privgames.analysis import viz; "
            "viz._pages(); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1])


def _redraw(model: PageModel) -> None:
    model.step()
    model.readings()
    rendered(model.figure("agents"), "agents")
    rendered(model.figure("measures"), "measures")


def _killed_query() -> dict[str, float]:
    """Seconds a :data:`SLOW_QUERY` typed into the results page took to be stopped, and the
    median and slowest answers to another client's index meanwhile (empty without
    Chromium and Playwright)."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {}
    if not Path(chromium).exists():
        return {}
    from privgames.analysis import api

    folder = Path(tempfile.mkdtemp())
    api.run("budget-us-bounds", workers=0, out=folder)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", "viz", "--port",
                             str(port), "--results", str(folder)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    token = re.search(r"token=([\w-]+)", proc.stdout.readline()).group(1)
    try:
        _until(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.1).close(),
               proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            tab = browser.new_page()
            tab.goto(f"http://127.0.0.1:{port}/results?token={token}")
            cookie = "; ".join(f"{c['name']}={c['value']}" for c in tab.context.cookies())
            box = tab.get_by_label("SQL over the Parquet files (the view is 'results')")
            box.fill(SLOW_QUERY)
            started = time.perf_counter()
            box.press("Enter")
            answers = []
            stopped = tab.get_by_text("stopped at")
            while not stopped.count() and time.perf_counter() - started < 60:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/",
                                                 headers={"Cookie": cookie})
                answers.append(timed(lambda r=request: urllib.request.urlopen(
                    r, timeout=30).read()))
                time.sleep(0.2)
            killed = time.perf_counter() - started
            browser.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
    return {"killed_query_s": killed, "other_client_s": statistics.median(answers),
            "other_client_max_s": max(answers)}


def main() -> None:
    args = arguments(__doc__)
    reps = 2 if args.quick else 5
    sizes = {"redraw_s": 1000, "redraw_10000_s": 10_000}
    models = {}
    for key, n in sizes.items():
        for route, page in all_pages().items():
            if n > 1000 and route not in TEN_THOUSAND:
                continue
            size = {} if args.quick or page.size is None else {page.size: n}
            model = PageModel.of(page)(**{**page.defaults(), **size})
            assert model.error is None, model.error
            models[key, route] = model
    times: dict[tuple[str, str], list[float]] = {key: [] for key in models}
    starts, indexes, loads = [], [], []
    for _ in range(reps):  # interleaved repetitions
        listening, index = _start_seconds()
        starts.append(listening)
        indexes.append(index)
        loads.append(_pages_seconds())
        for key, model in models.items():
            times[key].append(timed(lambda model=model: _redraw(model)))
    out: dict = {"start_s": statistics.median(starts), "index_s": statistics.median(indexes),
                 "pages_load_s": statistics.median(loads), "agents": 0 if args.quick else sizes}
    for (key, route), seen in times.items():
        out.setdefault(key, {})[route] = statistics.median(seen)
    for (key, route), model in models.items():
        if key == "redraw_10000_s" or args.quick:
            config = model.env.config
            estimate = model.page.step_seconds(config, footprint_of(config))
            out.setdefault("estimate_ratio", {})[route] = estimate / out[key][route]
    if not args.quick:  # a server and a browser: the attack suite checks it in the tests
        out.update(_killed_query())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
