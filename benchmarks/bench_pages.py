"""The pages: how long ``privgames viz`` takes to listen, and how long one step of a 1,000-agent
model takes to redraw (the step, the numbers and both figures rendered to PNG, what the server
does per Step click before the browser shows it).

Run ``python benchmarks/bench_pages.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process. Targets (issue 22): start-up under 5 s, redraw under
0.5 s.
"""

from __future__ import annotations

import io
import json
import socket
import statistics
import subprocess
import sys
import time

from _common import arguments, timed

from privgames.analysis.pages import PageModel, all_pages

#: Each page's agent count set to 1,000 (APES: users; k-means draws its data set).
THOUSAND = {"bas": {"K": 1000}, "sar": {"K": 1000}, "ppsp": {"n": 1000},
            "pricing": {"N": 1000}, "apes": {"n": 1000}, "learning": {"agents": 1000},
            "kmeans": {}}


def _start_seconds() -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", "viz", "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        while time.perf_counter() - started < 60:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                return time.perf_counter() - started
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"privgames viz exited: {proc.stderr.read()}") from None
                time.sleep(0.02)
        raise RuntimeError("privgames viz did not listen within 60 s")
    finally:
        proc.terminate()
        proc.wait()


def _redraw(model: PageModel) -> None:
    model.step()
    model.page.readings(model.env)
    for draw in (model.page.agents, model.page.measures):
        draw(model.env).savefig(io.BytesIO(), format="png")


def main() -> None:
    args = arguments(__doc__)
    reps = 2 if args.quick else 5
    models = {}
    for route, page in all_pages().items():
        size = {} if args.quick else THOUSAND[route]
        models[route] = PageModel.of(page)(**{**page.defaults(), **size})
        assert models[route].error is None, models[route].error
    times: dict[str, list[float]] = {route: [] for route in models}
    starts = []
    for _ in range(reps):  # interleaved repetitions
        starts.append(_start_seconds())
        for route, model in models.items():
            times[route].append(timed(lambda model=model: _redraw(model)))
    print(json.dumps({"start_s": statistics.median(starts),
                      "redraw_s": {r: statistics.median(t) for r, t in times.items()},
                      "agents": 0 if args.quick else 1000}, indent=2))


if __name__ == "__main__":
    main()
