"""A real two-node Ray cluster on this machine (Ray's own ``ray.cluster_utils.Cluster``: a head
and a second node with their own resources): a sweep through ``privgames run --address`` runs on
both nodes and its rows equal a serial run's bit for bit; the Ray-actor ring runs on the
cluster (its two shard actors need a CPU each to be scheduled: one per node here) with the
vectorised ring's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.ray]


CLUSTER = """
import sys
from ray.cluster_utils import Cluster
c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
c.add_node(num_cpus=1)
print(c.address, flush=True)
sys.stdin.read()  # until the test closes it
c.shutdown()
"""


@pytest.fixture(scope="module")
def cluster():
    """The cluster lives in its own process, apart from the tests' local Ray session."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    address = proc.stdout.readline().strip()
    assert address, "the cluster did not start"
    yield address
    proc.stdin.close()
    proc.wait(timeout=120)


def cli(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, "-m", "privgames.analysis", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def run_both_ways(name, sets, cluster, tmp_path, on_cluster_only=()):
    """Run ``name`` on the cluster and serially; return the cluster run and both row sets."""
    on_cluster = cli(["run", name, *sets, *on_cluster_only, "--address", cluster, "--out",
                      str(tmp_path / "cluster")], tmp_path)
    assert on_cluster.returncode == 0, on_cluster.stderr[-2000:]
    serial = cli(["run", name, *sets, "--workers", "0", "--out", str(tmp_path / "serial")],
                 tmp_path)
    assert serial.returncode == 0
    return on_cluster, *(pd.read_parquet(tmp_path / where / f"{name}.parquet")
                         for where in ("cluster", "serial"))


def test_a_sweep_runs_on_both_nodes_with_the_serial_rows(cluster, tmp_path):
    sets = ["--set", "K=[3,5,8]", "--set", "populations=4", "--set", "replications=300"]
    on_cluster, rows, serial = run_both_ways("bas-mse-vs-K", sets, cluster, tmp_path)
    assert "on 2 Ray nodes" in on_cluster.stderr
    pd.testing.assert_frame_equal(rows, serial, check_exact=True)


def test_the_ray_ring_runs_on_the_cluster(cluster, tmp_path):
    sets = ["--set", "n=8", "--set", "K=60", "--set", "replications=3", "--set", "shards=2",
            "--set", "populations=1"]
    _, rows, vectorised = run_both_ways("ppsp-ring", sets, cluster, tmp_path,
                                        on_cluster_only=("--set", "backend=ray"))
    pd.testing.assert_frame_equal(rows, vectorised, check_exact=True)


def test_one_sharded_population_spans_the_cluster_with_the_local_rows(cluster, tmp_path):
    """``learning-dynamics`` (pricing, Hedge): one population of 2,100 agents as 3 shard actors
    spread over both nodes, against the same population as 1 shard in process (one engine:
    equal rows; the summary says where the shards ran)."""
    sets = ["--set", "game=pricing", "--set", "learner=hedge", "--set", "agents=2100",
            "--set", "rounds=60", "--set", "populations=1"]
    on_cluster = cli(["run", "learning-dynamics", *sets, "--set", "backend=ray", "--set",
                      "shards=3", "--address", cluster, "--out", str(tmp_path / "cluster")],
                     tmp_path)
    assert on_cluster.returncode == 0, on_cluster.stderr[-2000:]
    assert f"joining the Ray cluster at {cluster}" in on_cluster.stderr
    local = cli(["run", "learning-dynamics", *sets, "--workers", "0",
                 "--out", str(tmp_path / "local")], tmp_path)
    assert local.returncode == 0, local.stderr[-2000:]
    rows, local_rows = (pd.read_parquet(tmp_path / where / "learning-dynamics.parquet")
                        for where in ("cluster", "local"))
    placement = rows.pop("placement")
    assert local_rows.pop("placement").eq('{"local": 1}').all()
    pd.testing.assert_frame_equal(rows, local_rows, check_exact=True)
    summary = json.loads((tmp_path / "cluster" / "learning-dynamics.summary.json").read_text())
    assert sorted(summary["placement"].values()) == [1, 2]  # the summary says where they ran
    assert placement.nunique() == 1


SHARDS_ON_NODES = """
import sys, time
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.ray_session import ensure_ray
ray = ensure_ray(address=sys.argv[1])
started = time.monotonic()  # a loaded machine can miss a node's heartbeats for a moment
while sum(node["Alive"] for node in ray.nodes()) < 2 and time.monotonic() - started < 60:
    time.sleep(0.5)
from privgames.environments import shards
config = LearningConfig(game="sar", agents=2049, rounds=2, backend="ray", shards=2)
for run in range(20):  # 10 with new actors placed by Ray, then 10 with leased idle ones
    shards.MAX_IDLE = 0 if run < 10 else 8
    model = LearningModel(config, 0)
    print(sorted(model.placement().values()))
    model.close()
"""


def test_the_shards_are_spread_over_the_nodes(cluster, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", SHARDS_ON_NODES, cluster], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines() == ["[1, 1]"] * 20  # hard affinity, 20 of 20


def test_a_local_run_beside_a_ray_start_cluster_stays_local(tmp_path):
    """Another user's ``ray start`` writes ``/tmp/ray/ray_current_cluster``; Ray's default
    ``ray.init()`` joins whatever it names. A privgames run without ``--address`` must start
    its own Ray instead: no driver of it may appear in the foreign cluster's session."""
    import socket
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    foreign = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         "--num-cpus", "1", "--port", str(port), "--include-dashboard", "false",
         "--disable-usage-stats"], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    address_file = Path("/tmp/ray/ray_current_cluster")
    try:
        deadline = time.monotonic() + 120
        while not (address_file.exists() and address_file.read_text().endswith(f":{port}")):
            assert foreign.poll() is None and time.monotonic() < deadline, "ray start failed"
            time.sleep(0.2)
        logs = Path("/tmp/ray/session_latest/logs").resolve()
        run = cli(["run", "apes", "--set", "backend=ray", "--set", "rounds=2", "--workers", "1",
                   "--out", str(tmp_path)], tmp_path)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "joining the Ray cluster" not in run.stderr
        drivers = sorted(p.name for p in logs.glob("python-core-driver-*.log"))
        assert drivers == [], f"the run joined the foreign cluster: {drivers}"
        refused = cli(["run", "apes", "--set", "backend=ray", "--workers", "0"], tmp_path)
        assert refused.returncode == 2
        assert refused.stderr.strip().splitlines() == [
            "privgames: error: backend='ray' runs Ray actors, but workers=0 (--workers 0) asks "
            "for no Ray: drop one of the two"]
    finally:
        foreign.terminate()
        foreign.wait(timeout=60)
