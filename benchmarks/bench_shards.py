"""One population over Ray shards (``learning-dynamics``, pricing, Hedge): time per round, the
driver's and each shard's memory, and the bytes that cross Ray per round, against the
in-process engine at the same size; then the long run, 10^6 agents x 200 rounds on 2 shards
(``--quick``: 3,000 x 30), with the shards' memory after a tenth of the rounds and at the end
(it must not grow with the rounds), each round also against one numpy multiply over the
round's ``agents x actions`` costs; and every game over 2 shards at 10^5 agents (pricing-bayes
and bas-sequential at 10,240; ``--quick``: bas and pricing at 2,048, two blocks) against one
shard in process
(``--games``: only that part); and the PPSP ring of 10^7 nodes (``--quick``: 20,000), 20
steps, 20 replications, on 4 Ray shards (``--ring``: only that part): time, the driver's and
each shard's peak memory, against the vectorized ring's estimate.

Run ``python benchmarks/bench_shards.py`` (``--quick`` for a smoke run). Each configuration runs
in a fresh process, so that each peak resident size is its own (``--quick``: all in this one,
sharing one Ray session: a smoke run's memory figures are not measurements).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from _common import arguments

SIZES = (10_000, 100_000, 1_000_000)
SHARDS = (1, 2, 4)
GAMES = ("bas", "sar", "ppsp", "pricing", "pricing-bayes", "bas-sequential")
#: Games measured at fewer agents (a round of pricing-bayes measures 128 type profiles; the
#: sequential chain has a learner row per user and state).
GAME_AGENTS = {"pricing-bayes": 10_240, "bas-sequential": 10_240}
#: The games of a smoke run (``--quick``; every game in process against 1-3 Ray shards is
#: ``tests/environments/test_shards.py``'s).
QUICK_GAMES = ("bas", "pricing")


def one(agents: int, shards: int, rounds: int, probe: int, game: str = "pricing") -> dict:
    """One population: ``shards`` = 0 runs it as one shard in this process
    (``backend=vectorized``)."""
    from privgames.environments.learning_dynamics import LearningConfig, LearningModel

    ray = {"backend": "ray", "shards": shards, "checkpoint_every": 0} if shards else {}
    config = LearningConfig(game=game, learner="hedge", agents=agents, rounds=rounds,
                            **ray)
    started = time.perf_counter()
    model = LearningModel(config, 1)
    setup = time.perf_counter() - started
    model.run(probe)
    early = model.run_.rss() if shards else None
    exchanged = model.run_.exchanged if shards else 0
    started = time.perf_counter()
    model.run(rounds - probe)
    per_round = (time.perf_counter() - started) / (rounds - probe)
    out = {"game": game, "agents": agents, "shards": shards, "rounds": rounds, "setup_s": setup,
           "round_s": per_round,
           "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if shards:
        late = model.run_.rss()
        out.update({"shard_rss_mb": [r / 2**20 for r in late],
                    "shard_rss_mb_early": [r / 2**20 for r in early],
                    "shard_growth": max(b / a for a, b in zip(early, late, strict=True)),
                    "bytes_per_round": (model.run_.exchanged - exchanged) / (rounds - probe)})
    model.close()
    primitive = _primitive_s(agents, config.grid_points)  # after the peak memory is read
    return {**out, "primitive_s": primitive, "round_over_primitive": per_round / primitive}


def _primitive_s(agents: int, actions: int) -> float:
    """The cheapest numpy pass over a round's ``agents x actions`` costs: one multiply into a
    preallocated array (median of 5)."""
    import numpy as np

    a, b = np.random.default_rng(0).random((2, agents, actions))
    out = np.empty_like(a)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        np.multiply(a, b, out=out)
        times.append(time.perf_counter() - started)
    return sorted(times)[2]


def ring(n: int, shards: int) -> dict:
    """The SI-PPSP ring of ``n`` nodes on ``shards`` Ray shards."""
    from privgames.environments import ppsp_ray
    from privgames.environments.ppsp_ring import PPSPConfig, PPSPModel

    config = PPSPConfig(n=n, K=20, replications=20, backend="ray", shards=shards)
    vectorized = PPSPConfig(n=n, K=20, replications=20).footprint().peak_bytes
    started = time.perf_counter()
    run = PPSPModel(config, 0).run().record()
    seconds = time.perf_counter() - started
    ray = ppsp_ray.ensure_ray()
    peaks = ray.get([sh.peak_rss.remote() for sh in ppsp_ray._pool["shards"][:shards]])
    return {"n": n, "shards": shards, "K": 20, "replications": 20, "seconds": seconds,
            "node_steps_per_s": 20 * 20 * n / seconds,
            "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "shard_peak_rss_mb": [p / 2**20 for p in peaks],
            "vectorized_estimate_gb": vectorized / 2**30,
            "sum_preserved": bool(abs(run.sums[-1] - run.targets[-1]).max()
                                  <= 1e-6 * abs(run.targets[-1]))}


def _in_fresh_process(agents: int, shards: int, rounds: int, probe: int,
                      game: str = "pricing", fresh: bool = True) -> dict:
    if not fresh:
        return one(agents, shards, rounds, probe, game)
    done = subprocess.run([sys.executable, __file__, "--one", f"{agents},{shards},{rounds},"
                           f"{probe},{game}"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if "--ring-one" in sys.argv:
        n, shards = map(int, sys.argv[sys.argv.index("--ring-one") + 1].split(","))
        print(json.dumps(ring(n, shards)))
        return
    if "--one" in sys.argv:
        *numbers, game = sys.argv[sys.argv.index("--one") + 1].split(",")
        print(json.dumps(one(*map(int, numbers), game)))
        return
    args = arguments(__doc__, ("--games", "only every game over 2 shards"),
                     ("--ring", "only the PPSP ring"))
    sizes, shards, rounds = ((3000,), (1, 2), 4) if args.quick else (SIZES, SHARDS, 6)
    agents = 3000 if args.quick else 100_000
    out = {}
    if not args.games:
        done = subprocess.run([sys.executable, __file__, "--ring-one",
                               "20000,2" if args.quick else "10000000,4"],
                              capture_output=True, text=True, check=True)
        out["ring"] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.ring:
        print(json.dumps(out))
        return
    fresh = not args.quick
    games = QUICK_GAMES if args.quick else GAMES  # every game's shards: tests/environments
    out["games"] = [_in_fresh_process(2048 if args.quick else GAME_AGENTS.get(game, agents),
                                      k, rounds, 2, game, fresh) for game in games
                    for k in (0, 2)]
    if not args.games:
        out["table"] = [_in_fresh_process(n, k, rounds, 2, fresh=fresh) for n in sizes
                        for k in (0, *shards) if k <= -(-n // 1024)]
        out["long"] = (_in_fresh_process(3000, 2, 30, 3, fresh=False) if args.quick else
                       _in_fresh_process(1_000_000, 2, 200, 20))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
