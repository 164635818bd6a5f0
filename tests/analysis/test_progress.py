"""Issue 44, part 2: the bar moves with every round and every ring step, in this process and
from Ray, and it shows one estimate of the time left, in seconds."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from privgames.analysis import experiments, guard, sweep


def reports(name: str, params: dict) -> tuple[list[float], float]:
    """What one unit reports while it runs, and its estimated work."""
    e = experiments.get(name)
    resolved = e.resolve({**params, "populations": 1})
    batch = sweep.batches(e.units(resolved, 3))
    assert len(batch) == 1 and len(batch[0]) == 1
    got: list[float] = []
    sweep.run_batch(name, resolved, batch[0], got.append)
    return got, sweep._task_work(e, resolved, batch)[0]


def test_each_round_of_a_learning_population_moves_the_bar():
    got, work = reports("learning-dynamics", {"game": "pricing", "learner": "hedge",
                                              "agents": 300, "rounds": 7})
    assert len(got) == 7
    assert sum(got) == pytest.approx(work) and min(got) > 0


def test_each_step_of_the_ring_moves_the_bar():
    got, work = reports("ppsp-ring", {"n": 12, "K": 9, "replications": 3})
    assert len(got) == 9
    assert sum(got) == pytest.approx(work)


def test_a_unit_running_several_models_reports_each_as_its_part():
    """learning-dynamics' starts run one model each: each model's rounds are a third of the
    unit's, so the bar moves evenly to the unit's work and no further."""
    got, work = reports("learning-dynamics", {"game": "ppsp", "learner": "hedge",
                                              "agents": 50, "rounds": 4, "starts": 3})
    assert len(got) == 12
    assert got == pytest.approx([work / 12] * 12)


def test_reports_past_a_units_work_are_dropped():
    got = []
    send = sweep._capped(got.append, 10.0)
    for share in (0.5, 0.4, 0.3, 0.2):
        send(share)
    assert got == pytest.approx([5.0, 4.0, 1.0])


@pytest.mark.ray
def test_each_block_of_the_ring_on_ray_shards_moves_the_bar(ray_session):
    """Blocks of steps end on the shards: each is reported once it has run there (one block
    stays queued ahead), none twice."""
    got, work = reports("ppsp-ring", {"n": 10, "K": 20, "replications": 2, "backend": "ray",
                                      "shards": 2})
    assert len(got) == 4  # blocks of the smallest shard's 5 nodes
    assert sum(got) == pytest.approx(work)


def estimate_of(name: str, params: dict, workers) -> float:
    e = experiments.get(name)
    return sweep.estimate(e, e.resolve(params), 0, workers)


def test_the_estimate_is_the_work_at_the_calibrated_rate_plus_what_ray_costs():
    """One formula, written out: serial, the work at the experiment's measured rate (and its
    first run's warm-up); on Ray, that over the tasks side by side after Ray's start-up."""
    e = experiments.get("bas-mse-vs-K")
    params = e.resolve({})
    work = sum(sweep._task_work(e, params, sweep.batches(e.units(params, 0))))
    serial = guard.cpu_seconds(e.name, work) + (
        0.0 if e.name in sweep.WARM else guard.warmup_seconds(e.name))
    assert estimate_of(e.name, {}, 0) == pytest.approx(serial)
    tasks = len(sweep.batches(e.units(params, 0)))
    on_two = sweep.RAY_START_S + serial / min(2, tasks)
    if "ray" not in sys.modules or not sys.modules["ray"].is_initialized():
        assert estimate_of(e.name, {}, 2) == pytest.approx(on_two)


@pytest.mark.parametrize("workers", [0, 1, 2, None, "auto"])
def test_every_plan_gives_an_estimate(workers):
    """Serial, on Ray (one task or several), and auto: a finite estimate, serial never counting
    Ray's start-up (bas-split's quick run outlasts it serially)."""
    seconds = estimate_of("bas-split", {}, workers)
    assert 0 < seconds < 3600
    if workers == 0:
        assert seconds == pytest.approx(estimate_of("bas-split", {}, 0))
        assert seconds < sweep.RAY_START_S + estimate_of("bas-split", {}, 0)
    if workers == 1:  # one at a time: Ray's start-up (or a running Ray's) and the serial work
        up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
        start = sweep.RAY_WARM_S if up else sweep.RAY_START_S
        assert seconds == pytest.approx(start + estimate_of("bas-split", {}, 0))


def test_a_sharded_population_on_ray_adds_its_actors_and_exchanges():
    """The same work over two Ray shards (on two cores: side by side), plus the shards'
    start and two exchanges a round."""
    import os

    local = {"game": "pricing", "learner": "hedge", "agents": 3000, "rounds": 50,
             "populations": 1, "shards": 2}
    on_ray = {**local, "backend": "ray"}
    e = experiments.get("learning-dynamics")
    work = sum(sweep._task_work(e, e.resolve(local), sweep.batches(e.units(e.resolve(local), 0))))
    compute = guard.cpu_seconds(e.name, work)
    added = estimate_of(e.name, on_ray, 1) - estimate_of(e.name, local, 1)
    side_by_side = min(2, os.cpu_count() or 1)
    assert added == pytest.approx(compute / side_by_side - compute + guard.SHARD_START_S
                                  + 2 * 50 * guard.EXCHANGE_S, rel=1e-6)


@pytest.mark.slow
@pytest.mark.ray
def test_a_sharded_run_shows_its_rounds_and_one_estimate(tmp_path):
    """Through the command line: one population on two Ray shards in one task. The bar passes
    through intermediate percentages while the task runs, every line carries the sweep's
    estimate in seconds ("about ... left"), and tqdm's own remaining time is not shown."""
    done = subprocess.run(
        [sys.executable, "-m", "privgames.analysis", "run", "learning-dynamics",
         "--set", "game=pricing", "--set", "learner=hedge", "--set", "agents=20000",
         "--set", "rounds=60", "--set", "populations=1", "--set", "backend=ray",
         "--set", "shards=2", "--workers", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-800:]
    lines = [x for x in re.split(r"[\r\n]", done.stderr) if x.startswith("learning-dynamics:")]
    shown = {int(m[1]) for x in lines if (m := re.search(r"(\d+)%\|", x))}
    assert any(0 < p < 100 for p in shown), lines
    assert all(re.search(r"about [0-9.e+]+ (s|min|h|days) left\]$", x.strip()) for x in lines)
    assert not any("<" in x for x in lines), lines
