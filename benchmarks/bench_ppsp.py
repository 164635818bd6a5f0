"""Speed and memory of the PPSP ring, as ratios measured in one run.

    python benchmarks/bench_ppsp.py [--quick] [--no-ray]

Reports: (1) the vectorized SI-PPSP ring's node-steps per second over numpy's raw normal rate
for the same draws at n=10^5 (target >= 0.7); (2) its speedup over a per-agent Mesa ring at
n=10^4 (target >= 50x); (3) the peak traced memory of 10^6 nodes x 1,000 steps (bounded: it
does not grow with the steps); (4) the Ray-actor backend's throughput with 2 shards over
the vectorized ring's (target >= 1.0).
"""

from __future__ import annotations

import dataclasses
import json
import tracemalloc

import mesa
import numpy as np
from _common import arguments, timed

from privgames.environments.ppsp_ring import PPSPConfig, PPSPModel


def vectorized_vs_raw(n: int, K: int) -> dict:
    model = PPSPModel(PPSPConfig(n=n, K=K, replications=1, c=1.0), seed=0)
    run = timed(model.run)
    buf = np.zeros(n * K)
    rng = np.random.default_rng(0)
    raw = min(timed(lambda: rng.standard_normal(out=buf)) for _ in range(3))
    return {"n": n, "K": K, "node_steps_per_s": n * K / run,
            "raw_draws_per_s": n * K / raw, "ratio_to_raw": raw / run}


class MesaNode(mesa.Agent):
    """Per-agent baseline: each node draws, sends and updates in Python."""

    def __init__(self, model: mesa.Model, secret: float) -> None:
        super().__init__(model)
        self.x, self.beta, self.d = secret, 0.0, 0.0

    def send(self) -> None:
        self.beta = self.model.std * self.model.rng.standard_normal()
        self.d = self.x - self.beta

    def receive(self) -> None:
        self.x = self.beta + self.pred.d


class MesaRing(mesa.Model):
    def __init__(self, n: int) -> None:
        super().__init__(seed=0)
        nodes = list(MesaNode.create_agents(self, n, secret=list(self.rng.uniform(0, 100, n))))
        for i, node in enumerate(nodes):
            node.pred = nodes[i - 1]
        self.std, self.k = 1.0, 0

    def step(self) -> None:
        self.std = 1.0 / (self.k + 1.0)
        self.agents.do("send")
        self.agents.do("receive")
        self.k += 1


def mesa_speedup(n: int, K: int) -> dict:
    mesa_ring = MesaRing(n)
    slow = timed(lambda: [mesa_ring.step() for _ in range(K)])
    model = PPSPModel(PPSPConfig(n=n, K=K, replications=1, c=1.0), seed=0)
    fast = timed(model.run)
    return {"n": n, "K": K, "mesa_node_steps_per_s": n * K / slow,
            "vectorized_node_steps_per_s": n * K / fast, "speedup": slow / fast}


def bounded_memory(n: int, K: int) -> dict:
    model = PPSPModel(PPSPConfig(n=n, K=K, replications=1, c=1.0), seed=0)
    tracemalloc.start()
    seconds = timed(model.run)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"n": n, "K": K, "seconds": seconds, "peak_traced_MiB": peak / 2**20,
            "state_MiB": 8 * n / 2**20, "all_steps_would_be_MiB": 8 * n * K / 2**20}


def ray_throughput(n: int, K: int, repetitions: int = 5) -> dict:
    """Median of interleaved runs on warm shard actors; the first (cold) run, which starts the
    actors and their imports, is reported apart."""
    from privgames.environments.ray_session import ensure_ray

    ensure_ray(2)
    cfg = PPSPConfig(n=n, K=K, replications=1, c=1.0, shards=2)
    on_ray = dataclasses.replace(cfg, backend="ray")
    cold = timed(PPSPModel(on_ray, seed=0).run)
    vec, ray = [], []
    for _ in range(repetitions):
        vec.append(timed(PPSPModel(cfg, seed=0).run))
        ray.append(timed(PPSPModel(on_ray, seed=0).run))
    vec, ray = float(np.median(vec)), float(np.median(ray))
    return {"n": n, "K": K, "shards": 2, "cold_first_run_s": cold,
            "ray_node_steps_per_s": n * K / ray, "vectorized_node_steps_per_s": n * K / vec,
            "ray_over_vectorized": vec / ray}


def main() -> None:
    args = arguments(__doc__, ("--no-ray", "skip the Ray backend"))
    q = args.quick
    report = {"vectorized": vectorized_vs_raw(10_000 if q else 100_000, 20 if q else 200),
              "mesa": mesa_speedup(1000 if q else 10_000, 5 if q else 100),
              "memory": bounded_memory(*((10_000, 50) if q else (1_000_000, 1000)))}
    if not args.no_ray:
        report["ray"] = ray_throughput(*((1000, 50) if q else (100_000, 200)))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
