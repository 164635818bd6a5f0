"""The pages: how long ``privgames viz`` takes to listen and to answer its index (and how long
the pages then take to load, in a fresh process), and how long one step of a 1,000- and
a 10,000-agent model takes to redraw (the step, the numbers and both figures rendered as the
server sends them, ``pages.rendered``: what it does per Step click before the browser shows
it).

Run ``python benchmarks/bench_pages.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process. Targets (issue 30): listening within 3 s, a step
redrawn within 0.3 s at 1,000 agents and within 1 s at 10,000.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from _common import arguments, timed

from privgames.analysis.pages import PageModel, all_pages, rendered

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
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
