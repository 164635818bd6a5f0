"""Speed and memory of the BAS chain kernel, as ratios measured in one run.

    python benchmarks/bench_chain.py            # the issue's sizes
    python benchmarks/bench_chain.py --quick    # tiny sizes (a smoke run)

Reports: (1) kernel throughput (users x dimensions x replications per second) over numpy's
raw standard-normal rate for the same number of draws, target >= 0.6 at K=100, d=1000, R=100;
(2) speedup over a per-agent Mesa loop of the same chain, target >= 50x at K=10,000; (3) peak
traced memory of a run whose whole noise tensor would exceed 2 GiB; (4) a Ray sweep vs serial.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

import mesa
import numpy as np

from privgames.mechanisms.chain import chain_squared_errors


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def kernel_vs_raw(K: int, d: int, R: int) -> dict:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (K, d))
    sigma2 = rng.uniform(0, 1, K)
    buf = np.empty(K * d * R)
    raw = best_of(lambda: rng.standard_normal(out=buf))
    kernel = best_of(lambda: chain_squared_errors(x, sigma2, R, rng))
    draws = K * d * R
    return {"K": K, "d": d, "R": R, "raw_draws_per_s": draws / raw,
            "kernel_draws_per_s": draws / kernel, "ratio_to_raw": raw / kernel}


class MesaChainUser(mesa.Agent):
    """The per-agent baseline: each user adds its own noise to the running sum in Python."""

    def __init__(self, model: mesa.Model, x: float, sigma: float) -> None:
        super().__init__(model)
        self.x, self.sigma = x, sigma

    def step(self) -> None:
        self.model.running += self.x + self.sigma * self.model.rng.standard_normal()


class MesaChain(mesa.Model):
    def __init__(self, x: np.ndarray, sigma: np.ndarray, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.running = 0.0
        MesaChainUser.create_agents(self, x.size, x=list(x), sigma=list(sigma))

    def step(self) -> None:
        self.running = 0.0
        self.agents.do("step")


def mesa_speedup(K: int, R: int) -> dict:
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, K)
    sigma2 = rng.uniform(0, 1, K)
    model = MesaChain(x, np.sqrt(sigma2))

    def per_agent():
        for _ in range(R):
            model.step()

    slow = best_of(per_agent, repeat=1)
    fast = best_of(lambda: chain_squared_errors(x[:, None], sigma2, R, rng))
    return {"K": K, "d": 1, "R": R, "mesa_node_steps_per_s": K * R / slow,
            "vectorized_node_steps_per_s": K * R / fast, "speedup": slow / fast}


def peak_memory(K: int, d: int, R: int) -> dict:
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (K, d))
    sigma2 = rng.uniform(0, 1, K)
    tracemalloc.start()
    t = time.perf_counter()
    chain_squared_errors(x, sigma2, R, rng)
    seconds = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"K": K, "d": d, "R": R, "noise_tensor_GiB": 8 * K * d * R / 2**30,
            "peak_traced_MiB": peak / 2**20, "seconds": seconds}


def ray_vs_serial(replications: int, repetitions: int = 3) -> dict:
    """Median of interleaved serial and Ray sweeps on warm workers; the first Ray sweep, whose
    workers import privgames, apart."""
    from privgames.analysis import experiments
    from privgames.analysis.sweep import sweep
    from privgames.environments.ray_session import ensure_ray

    e = experiments.get("bas-mse-vs-K")
    params = e.resolve({"K": [10, 50, 100, 200], "populations": 4,
                        "replications": replications})
    init = best_of(lambda: ensure_ray(2), 1)
    cold = best_of(lambda: sweep(e, params, 0, workers=2, progress=False), 1)  # imports
    serial, ray = [], []
    for _ in range(repetitions):  # interleaved, so a noisy moment hits both sides
        serial.append(best_of(lambda: sweep(e, params, 0, workers=0, progress=False), 1))
        ray.append(best_of(lambda: sweep(e, params, 0, workers=2, progress=False), 1))
    serial, ray = float(np.median(serial)), float(np.median(ray))
    return {"tasks": 16, "ray_init_s": init, "cold_first_ray_sweep_s": cold,
            "serial_s": serial, "ray_2_workers_s": ray, "speedup": serial / ray,
            "fixed_cost_s": init + cold - ray}


def cold_sweep(replications: int, repetitions: int = 3) -> dict:
    """The user's cold command, ``privgames run bas-mse-vs-K --replications R`` with
    ``--workers 0`` and ``--workers 2``, each in a fresh process (its own ``ray.init`` and cold
    workers), interleaved; medians of the wall times."""
    import subprocess
    import sys
    import tempfile
    import time

    def once(workers: int) -> float:
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "privgames.analysis", "run", "bas-mse-vs-K",
                            "--replications", str(replications), "--workers", str(workers),
                            "--out", out], check=True, capture_output=True)
            return time.perf_counter() - start

    serial, ray = [], []
    for _ in range(repetitions):
        serial.append(once(0))
        ray.append(once(2))
    serial_s, ray_s = float(np.median(serial)), float(np.median(ray))
    return {"replications": replications, "serial_s": serial_s, "ray_2_workers_s": ray_s,
            "speedup": serial_s / ray_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke run")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray comparison")
    args = parser.parse_args()
    q = args.quick
    report = {
        "kernel": kernel_vs_raw(100, 100 if q else 1000, 10 if q else 100),
        "mesa": mesa_speedup(1000 if q else 10_000, 2 if q else 20),
        "memory": peak_memory(*((100, 100, 2000) if q else (1000, 1000, 300))),
    }
    if not args.no_ray:
        report["ray"] = ray_vs_serial(200 if q else 5_000)
        report["cold"] = cold_sweep(200 if q else 8_000, 1 if q else 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
