"""Faults injected into real processes: the driver SIGKILLed mid-sweep (serial, and with its
embedded Ray, which must go down with it), a Ray worker SIGKILLed while it runs a task. (A
killed PPSP ring shard actor: ``tests/environments/test_ppsp_ring.py``.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from privgames.environments import ray_reaper
from privgames.environments.ray_reaper import stat

ARGS = ["run", "bas-mse-vs-K", "--set", "K=[3,5,8]", "--set", "populations=4",
        "--set", "replications=20000", "--set", "rounds=3", "--workers", "0"]


def cli(out, **kw):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.Popen([sys.executable, "-m", "privgames.analysis", *ARGS, "--out",
                             str(out)], env=env, stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.slow  # a killed process and its rerun: 15 s
def test_driver_killed_mid_sweep_resumes_with_identical_rows(tmp_path):
    """SIGKILL after at least three finished tasks; the rerun computes only the rest (it says
    how many were done, equal to the parts on disk) and its rows equal an uninterrupted run's
    exactly."""
    parts = tmp_path / "killed" / ".parts" / "bas-mse-vs-K"
    proc = cli(tmp_path / "killed")
    deadline = time.time() + 120
    while time.time() < deadline and len(list(parts.glob("*.parquet"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = len(list(parts.glob("*.parquet")))
    assert 3 <= finished < 12, "the kill came too late to test a resume"
    rerun = cli(tmp_path / "killed")
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err[-2000:]
    assert re.search(rf"resuming, {finished} of 12 tasks already done", err)
    clean = cli(tmp_path / "clean")
    clean.communicate(timeout=300)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "killed" / "bas-mse-vs-K.parquet"),
        pd.read_parquet(tmp_path / "clean" / "bas-mse-vs-K.parquet"), check_exact=True)
    assert not (tmp_path / "killed" / ".parts").exists()


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (its Ray head processes and their workers)."""
    return set(ray_reaper.descendants(root))


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def ray_driver(out) -> tuple[subprocess.Popen, set[int]]:
    """A ``--workers 2`` CLI run, once its local Ray runs tasks; with what it has started."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = [a if a != "0" else "2" for a in ARGS]  # --workers 2
    with open(f"{out}.stderr", "w") as stderr:  # read by the tests: no warning, no traceback
        proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", *args, "--out",
                                 str(out)], env=env, stderr=stderr)
    started: set[int] = set()
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        started |= descendants(proc.pid)
        names = subprocess.run(["ps", "-o", "cmd=", "-p", ",".join(map(str, started)) or "1"],
                               capture_output=True, text=True).stdout
        if "_run_batch_on_node" in names and "DashboardAgent" in names:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the sweep ended before its Ray was seen working"
    return proc, {pid for pid in started | descendants(proc.pid) if alive(pid)}


def assert_all_gone(started: set[int], within: float = 5.0) -> None:
    deadline = time.time() + within
    while time.time() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.1)
    left = subprocess.run(["ps", "-o", "pid=,cmd=", "-p", ",".join(map(str, started))],
                          capture_output=True, text=True).stdout
    assert not [pid for pid in started if alive(pid)], f"left behind:\n{left}"


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_embedded_ray_goes_down_with_a_killed_driver(tmp_path):
    """SIGKILL a driver whose local Ray runs a sweep: within 5 s no process it started (GCS,
    raylet, dashboard head, the raylet's agents, workers) is left (Ray's agents alone took
    20-40 s before the watchdog)."""
    proc, started = ray_driver(tmp_path / "ray")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert_all_gone(started)


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_embedded_ray_goes_down_at_a_normal_exit(tmp_path):
    """The driver's exit hook SIGKILLs its local Ray instead of Ray's graceful waits; the run
    still writes every row, and nothing it started outlives it by more than 5 s."""
    proc, started = ray_driver(tmp_path / "ray")
    assert proc.wait(timeout=300) == 0
    assert_all_gone(started)
    stderr = (tmp_path / "ray.stderr").read_text()
    assert "Warning" not in stderr and "Traceback" not in stderr, stderr[-2000:]
    rows = pd.read_parquet(tmp_path / "ray" / "bas-mse-vs-K.parquet")
    assert sorted(rows["population"].unique()) == [0, 1, 2, 3]
    assert not (tmp_path / "ray" / ".parts").exists()


@pytest.mark.ray
def test_a_killed_ray_worker_loses_no_row(tmp_path):
    """A Ray worker running a task is SIGKILLed; Ray retries the task and the sweep ends with
    every row exactly once, equal to a serial run's."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = [a if a != "0" else "2" for a in ARGS]  # --workers 2
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", *args, "--out",
                             str(tmp_path / "ray")], env=env, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 120
    while killed is None and time.time() < deadline and proc.poll() is None:
        found = [pid for pid in subprocess.run(["pgrep", "-f", "ray::_run_batch_on_node"],
                                               capture_output=True, text=True).stdout.split()
                 if int(pid) in descendants(proc.pid)]  # this run's workers, nobody else's
        if found:
            killed = int(found[0])
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=300)
    assert killed is not None, "no Ray worker was caught running a task"
    assert proc.returncode == 0, err[-2000:]
    serial = cli(tmp_path / "serial")
    serial.communicate(timeout=300)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ray" / "bas-mse-vs-K.parquet"),
                                  pd.read_parquet(tmp_path / "serial" / "bas-mse-vs-K.parquet"),
                                  check_exact=True)


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_embedded_ray_starts_no_monitors():
    """A local Ray starts its GCS, raylet, agents and workers, but neither the autoscaler's
    monitor nor the log monitor (unused by a fixed node that sends no logs to the driver)."""
    code = ("import os, subprocess\n"
            "from privgames.environments.ray_reaper import descendants\n"
            "from privgames.environments.ray_session import ensure_ray\n"
            "ensure_ray(2)\n"
            "pids = ','.join(map(str, descendants(os.getpid())))\n"
            "print(subprocess.run(['ps', '-ww', '-o', 'cmd=', '-p', pids], capture_output=True,"
            " text=True).stdout)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=120, check=True).stdout
    assert "gcs_server" in started and "raylet" in started and "DashboardAgent" in started
    assert "monitor.py" not in started  # the autoscaler's monitor.py and log_monitor.py


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["normal exit", "SIGKILL"])
def test_the_watchdog_spares_the_driver_s_own_children(tmp_path, how):
    """A driver (a notebook, a server) starts its own children before and after its local Ray,
    then exits or is killed: Ray's processes go, the driver's own children keep running."""
    code = ("import os, subprocess, sys, time\n"
            "from privgames.environments.ray_reaper import descendants\n"
            "from privgames.environments.ray_session import ensure_ray\n"
            "own = [subprocess.Popen(['sleep', '120'], start_new_session=True),\n"
            "       subprocess.Popen(['sleep', '121'])]\n"
            "ensure_ray(1)\n"
            "own.append(subprocess.Popen(['sleep', '122']))\n"
            "ray_pids = set(descendants(os.getpid())) - {p.pid for p in own}\n"
            "print(' '.join(str(p.pid) for p in own), flush=True)\n"
            "print(' '.join(map(str, ray_pids)), flush=True)\n"
            "if sys.argv[1] == 'SIGKILL':\n"
            "    time.sleep(300)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-c", code, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    own = [int(p) for p in proc.stdout.readline().split()]
    ray_pids = {int(p) for p in proc.stdout.readline().split()}
    try:
        assert len(own) == 3 and ray_pids, proc.stderr.read()[-2000:]
        if how == "SIGKILL":
            proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=120) == (-9 if how == "SIGKILL" else 0)
        assert_all_gone(ray_pids)
        time.sleep(1.0)  # the watchdog has acted (it polls every 0.2 s)
        assert [pid for pid in own if alive(pid)] == own
    finally:
        for pid in own:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
