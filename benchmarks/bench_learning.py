"""Learning from experience: one round of ``learning-dynamics`` (every agent acts, gets its
feedback, updates; the analyst records regret, CCE gap and distance) on the one engine (one
shard in this process), per game and learner (Hedge: full feedback; EXP3: bandit), at 10^4
agents (every game) and 10^6 (bas, sar, ppsp, pricing), against the floor of a round's work
(issue 41): one ``exp`` pass plus ten ``multiply`` passes over the game's ``rows x actions``
array, timed in the same process. numpy's float64 ``exp`` is vectorized only with AVX-512,
so the floor, not ``exp`` alone, means the same on any CPU. ``pricing-bayes`` has twice the
rows (a client per type) and twice the actions (a report per level), and its analyst takes
interim expectations over 128 type profiles whenever the last iterate moves;
``bas-sequential`` has a row per user and observed state.

The bound (``bound``): what a round's exact arithmetic costs when nothing else does. A bas
Hedge round (full feedback) written as one compiled pass a row, nothing stored but what the
engine keeps (eq 14's cost of each cell, the capped units, the losses, the analyst's two sums,
their smallest and the expected costs, the next weights by the learners' own ``exp``, the last
iterate and the draw): no Python, no table, no random numbers, no hashes. It is timed whole and
with each of its exact operations made a multiply (eq 14's square root and division; the units'
division; the weights' normalising division; ``exp``), to say what each costs.

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run at 1,000 agents).
Times are medians of interleaved repetitions in one process (a fresh one per population);
the ratio is what to compare across machines.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import numpy as np
from _common import arguments, timed
from numba import njit

from privgames.agents import learners
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.shards import BlockStreams

GAMES = ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes")
#: The games measured at 10^6 agents too (the sequential chain would hold 21 rows a user, and
#: pricing-bayes' theory costs minutes at that size).
LARGE = ("bas", "sar", "ppsp", "pricing")


def floor_pass(cells: np.ndarray, out: np.ndarray) -> None:
    """One ``exp`` and ten ``multiply`` passes over ``cells``, into a preallocated array."""
    np.exp(cells, out=out)
    for _ in range(10):
        np.multiply(out, cells, out=out)


def population(game: str, learner: str, agents: int, reps: int) -> dict[str, float]:
    """One population's median round and its ratio to the floor of the game's own ``rows x
    actions``, the two interleaved."""
    model = LearningModel(LearningConfig(game=game, learner=learner, agents=agents,
                                         rounds=10 * reps), seed=0)
    model.step()  # compiled kernels and the first measurements out of the timing
    cells = np.random.default_rng(0).random((model.slice_.row_count(model.config),
                                             model.grid.size))
    out = np.empty_like(cells)
    floor, rounds = [], []
    for _ in range(reps):  # interleaved repetitions
        floor.append(timed(lambda: floor_pass(cells, out)))
        rounds.append(timed(model.step))
    model.close()
    median, base = statistics.median(rounds), statistics.median(floor)
    return {"round_s": median, "floor_s": base, "ratio_to_floor": base / median}


def measure(agents: int, games: tuple[str, ...], reps: int,
            fresh: bool = True) -> dict[str, dict]:
    """:func:`population` per learner and game, each in a fresh process (``fresh``), as a
    user runs one (one population alive at a time: at 10^6 agents several would compete for
    memory, and one measured after another freed gigabytes ran SAR's rounds 1.2-1.4x
    slower); the smoke run's in this one."""
    report: dict[str, dict] = {}
    for learner in ("hedge", "exp3"):
        report[learner] = {}
        for game in games:
            if not fresh:
                report[learner][game] = population(game, learner, agents, reps)
                continue
            done = subprocess.run([sys.executable, __file__, "--one",
                                   f"{game},{learner},{agents},{reps}"],
                                  capture_output=True, text=True, check=True)
            report[learner][game] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@njit(error_model="numpy")
def fused_round(base, upstream, alpha, grid, span, eta, losses, drawn, weights, sums, played,
                mixed, uniform, last, exact):
    """One bas Hedge round's arithmetic, row by row (see the module's docstring); ``exact``:
    eq 14's square root and division, the units' division, the normalising division and
    ``exp`` each, or a multiply in its place. Returns the largest regret or CCE gain."""
    n, m = losses.shape
    costs, units, x = np.empty(m), np.empty(m), np.empty(m)
    lanes = 1 + 4 * ((m - 1) // 4)
    largest = -np.inf
    for i in range(n):
        b, up, a, s = base[i], upstream[i], alpha[i], span[i]
        for j in range(m):  # eq 14
            costs[j] = b + grid[j] + (a / np.sqrt(up + grid[j]) if exact[0]
                                      else a * (up + grid[j]))
        low = smallest(costs, lanes)
        for j in range(m):  # the units (the learner's and the analyst's) and the sums
            u = (costs[j] - low) / s if exact[1] else (costs[j] - low) * s
            units[j] = 1.0 if u > 1.0 else u
            losses[i, j] += units[j]
            sums[0, i, j] += units[j]
            sums[1, i, j] += costs[j]
        expected, expected_game = 0.0, 0.0
        for j in range(m):
            expected += drawn[i, j] * units[j]
            expected_game += drawn[i, j] * costs[j]
        played[0, i] += units[last[i]]
        played[1, i] += costs[last[i]]
        mixed[0, i] += expected
        mixed[1, i] += expected_game
        for k in range(2):
            low_sum = smallest(sums[k, i], lanes)
            largest = max(largest, mixed[k, i] - low_sum, played[k, i] - low_sum)
        least = smallest(losses[i], lanes)
        for j in range(m):
            x[j] = max(-eta * (losses[i, j] - least), learners._EXP_FLOOR)
        for j in range(m):  # the learners' exp (fdlibm's)
            v = x[j]
            if exact[3]:
                k = np.rint(v * learners._INV_LN2)
                hi = v - k * learners._LN2_HI
                lo = k * learners._LN2_LO
                r = hi - lo
                t = r * r
                c = r - t * (learners._P1 + t * (learners._P2 + t * (
                    learners._P3 + t * (learners._P4 + t * learners._P5))))
                x[j] = (1.0 - ((lo - (r * c) / (2.0 - c)) - hi)) * learners._TWO_TO[
                    int(k) + 1077]
            else:
                x[j] = v * v
        s0 = s1 = s2 = s3 = 0.0
        for j in range(0, 4 * (m // 4), 4):
            s0, s1, s2, s3 = s0 + x[j], s1 + x[j + 1], s2 + x[j + 2], s3 + x[j + 3]
        for j in range(4 * (m // 4), m):
            s0 += x[j]
        total = (s0 + s1) + (s2 + s3)
        for j in range(m):
            weights[i, j] = x[j] / total if exact[2] else x[j] * total
        # the next action from the next weights, as the learners' _draw does (fused here into
        # the row's pass: a compiled kernel cannot call the project's lazily compiled ones)
        cumulative, drawn_action = 0.0, 0
        for j in range(m):
            cumulative += weights[i, j]
            if not cumulative < uniform[i]:
                break
            drawn_action += 1
        last[i] = min(drawn_action, m - 1)
    return largest


@njit(error_model="numpy")
def smallest(row, lanes):
    """A row's smallest entry, in four lanes."""
    l0 = l1 = l2 = l3 = row[0]
    for j in range(1, lanes, 4):
        l0, l1 = min(l0, row[j]), min(l1, row[j + 1])
        l2, l3 = min(l2, row[j + 2]), min(l3, row[j + 3])
    for j in range(lanes, row.size):
        l0 = min(l0, row[j])
    return min(min(l0, l1), min(l2, l3))


#: The bound's variants: which exact operations are kept (eq 14's square root and division,
#: the units' division, the normalising division, ``exp``); ``reciprocals``: both divisions
#: by a row's constant made multiplications by its reciprocal (an ulp off, the same on every
#: CPU), eq 14's being the model's own.
VARIANTS = {"exact": (True, True, True, True), "eq14_multiply": (False, True, True, True),
            "units_multiply": (True, False, True, True),
            "normalise_multiply": (True, True, False, True),
            "exp_multiply": (True, True, True, False),
            "reciprocals": (True, False, False, True)}


def bound(agents: int, reps: int) -> dict[str, dict]:
    """:func:`fused_round` over ``agents x 21`` (each variant at 10^4; the exact one at 10^6)
    against the floor, interleaved."""
    m, rng = 21, np.random.default_rng(0)
    grid = np.linspace(0.0, 3.0, m)
    state = (rng.random(agents), 5.0 * rng.random(agents), rng.random(agents), grid,
             np.ones(agents), 0.3, np.zeros((agents, m)), np.full((agents, m), 1.0 / m),
             np.empty((agents, m)), np.zeros((2, agents, m)), np.zeros((2, agents)),
             np.zeros((2, agents)))
    last = rng.integers(0, m, agents)
    cells = rng.random((agents, m))
    out = np.empty_like(cells)
    variants = VARIANTS if agents <= 10_000 else {"exact": VARIANTS["exact"]}
    times: dict[str, list[float]] = {name: [] for name in ("floor", *variants)}
    for exact in variants.values():
        fused_round(*state, rng.random(agents), last, exact)
    for _ in range(reps):
        times["floor"].append(timed(lambda: floor_pass(cells, out)))
        for name, exact in variants.items():
            u = rng.random(agents)
            times[name].append(timed(lambda e=exact, u=u: fused_round(*state, u, last, e)))
    floor = statistics.median(times.pop("floor"))
    return {name: {"round_s": statistics.median(t), "ns_per_cell": statistics.median(t)
                   / (agents * m) * 1e9, "ratio_to_floor": floor / statistics.median(t)}
            for name, t in times.items()}


def sar_draws(agents: int, reps: int) -> dict[str, float]:
    """The random numbers a SAR EXP3 round draws at ``agents`` users, from the per-block
    streams as the slice does (each user's action; its place among the participants and two
    uniforms for the colluders), against the floor of its ``agents x 2`` cells."""
    streams = BlockStreams(np.random.SeedSequence(0), 0, 0, agents, agents)
    cells = np.random.default_rng(0).random((agents, 2))
    out = np.empty_like(cells)
    floor, draws = [], []
    for _ in range(reps):
        floor.append(timed(lambda: floor_pass(cells, out)))
        draws.append(timed(lambda: (streams.uniform(), streams.integers(agents // 2),
                                    streams.uniform(2))))
    median, base = statistics.median(draws), statistics.median(floor)
    return {"agents": agents, "draws_s": median, "floor_s": base,
            "draws_over_floor": median / base}


def main() -> None:
    if "--one" in sys.argv:
        game, learner, agents, reps = sys.argv[sys.argv.index("--one") + 1].split(",")
        print(json.dumps(population(game, learner, int(agents), int(reps))))
        return
    args = arguments(__doc__)
    if args.quick:
        report = {"agents": 1000, **measure(1000, GAMES, 3, fresh=False),
                  "bound": bound(1000, 3),
                  "sar_draws": sar_draws(1000, 3)}
    else:
        report = {"agents": 10_000, **measure(10_000, GAMES, 7),
                  "million": measure(1_000_000, LARGE, 5),
                  "bound": bound(10_000, 31), "million_bound": bound(1_000_000, 5),
                  "sar_draws": sar_draws(1_000_000, 9)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
