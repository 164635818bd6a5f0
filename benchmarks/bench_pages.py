"""The pages: how long ``privgames viz`` takes to listen, and how long one step of a 1,000- and
a 10,000-agent model takes to redraw (the step, the numbers and both figures rendered to PNG,
what the server does per Step click before the browser shows it).

Run ``python benchmarks/bench_pages.py`` (``--quick`` for a smoke run). Times are medians of
interleaved repetitions in one process. Targets (issue 30): listening within 3 s, a step
redrawn within 0.3 s at 1,000 agents and within 1 s at 10,000.
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

#: The pages timed at 10,000 agents: not SAR (its page stops at K = 300: a round's attack
#: holds K^2 chains, 13 GiB at 10^4) nor k-means (no agents to count).
TEN_THOUSAND = ("bas", "ppsp", "pricing", "apes", "learning")


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
    model.readings()
    for draw in (model.page.agents, model.page.draw_measures):
        draw(model.env).savefig(io.BytesIO(), format="png")


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
    starts = []
    for _ in range(reps):  # interleaved repetitions
        starts.append(_start_seconds())
        for key, model in models.items():
            times[key].append(timed(lambda model=model: _redraw(model)))
    out: dict = {"start_s": statistics.median(starts), "agents": 0 if args.quick else sizes}
    for (key, route), seen in times.items():
        out.setdefault(key, {})[route] = statistics.median(seen)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
