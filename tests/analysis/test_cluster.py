"""A real two-node Ray cluster on this machine (Ray's own ``ray.cluster_utils.Cluster``: a head
and a second node with their own resources): a sweep through ``privgames run --address`` runs on
both nodes and its rows equal a serial run's bit for bit; the Ray-actor ring runs on the
cluster (its two shard actors need a CPU each to be scheduled: one per node here) with the
vectorised ring's rows."""

from __future__ import annotations

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


def test_a_sweep_runs_on_both_nodes_with_the_serial_rows(cluster, tmp_path):
    sets = ["--set", "K=[3,5,8]", "--set", "populations=4", "--set", "replications=300"]
    on_cluster = cli(["run", "bas-mse-vs-K", *sets, "--address", cluster, "--out",
                      str(tmp_path / "c")], tmp_path)
    assert on_cluster.returncode == 0, on_cluster.stderr[-2000:]
    assert "on 2 Ray nodes" in on_cluster.stderr
    serial = cli(["run", "bas-mse-vs-K", *sets, "--workers", "0", "--out",
                  str(tmp_path / "s")], tmp_path)
    assert serial.returncode == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "c" / "bas-mse-vs-K.parquet"),
                                  pd.read_parquet(tmp_path / "s" / "bas-mse-vs-K.parquet"),
                                  check_exact=True)


def test_the_ray_ring_runs_on_the_cluster(cluster, tmp_path):
    sets = ["--set", "n=8", "--set", "K=60", "--set", "replications=3", "--set", "shards=2",
            "--set", "populations=1"]
    ray_ring = cli(["run", "ppsp-ring", *sets, "--set", "backend=ray", "--address", cluster,
                    "--out", str(tmp_path / "r")], tmp_path)
    assert ray_ring.returncode == 0, ray_ring.stderr[-2000:]
    vectorised = cli(["run", "ppsp-ring", *sets, "--workers", "0", "--out",
                      str(tmp_path / "v")], tmp_path)
    assert vectorised.returncode == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "r" / "ppsp-ring.parquet"),
                                  pd.read_parquet(tmp_path / "v" / "ppsp-ring.parquet"),
                                  check_exact=True)
