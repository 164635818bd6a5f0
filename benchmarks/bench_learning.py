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

Two more bounds, for the targets the first does not cover. ``pair_bound``: SAR's Hedge and
EXP3 rounds at their 2 actions written straight (no loop over the actions; the engine's
numbers bit for bit) and the action draws from the per-block streams, and ``sar_draws``:
everything EXP3's round draws, at 10^6 and 10^4 users (``small_``). ``bayes_bound``: what a
pricing-bayes round where the last iterate moved must compute at 10^4 clients, each part by
itself: the interim sums' additions alone, and the learners' and the analyst's arithmetic over
the rows that play.

At 10^4 agents each population also runs whole (``whole_run``): the 500 rounds of a default
run, its mean round over the floor. The seven rounds of ``population`` are early in a short
run, where bas Hedge's iterate moves in most rounds: a run's costliest stretch.

Run ``python benchmarks/bench_learning.py`` (``--quick`` for a smoke run at 1,000 agents;
``--one GAME,LEARNER,AGENTS,REPS`` or ``--whole GAME,LEARNER,AGENTS,ROUNDS`` for one population).
Times are medians of interleaved repetitions in one process (a fresh one per population);
the ratio is what to compare across machines.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import numpy as np
from _common import arguments, timed
from numba import njit

from privgames.agents import learners
from privgames.environments.learning_dynamics import LearningConfig, LearningModel
from privgames.environments.shards import BlockStreams
from privgames.mechanisms.learning_games import TYPE_PROFILES

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
    actions``, the two interleaved; the mean round (the timed rounds' total over their
    number: what a run costs per agent-action, where rounds differ in kind); and the share
    of the timed rounds where the last iterate moved (the analyst then measures it again).
    Two rounds go untimed: the first measures the start, and the second is the first to
    load the kernels of a round after learning (numba's cache, 5-7 ms)."""
    model = LearningModel(LearningConfig(game=game, learner=learner, agents=agents,
                                         rounds=10 * reps), seed=0)
    for _ in range(2):
        model.step()
    cells = np.random.default_rng(0).random((model.slice_.row_count(model.config),
                                             model.grid.size))
    out = np.empty_like(cells)
    floor, rounds, moved = [], [], 0
    for _ in range(reps):  # interleaved repetitions
        floor.append(timed(lambda: floor_pass(cells, out)))
        rounds.append(timed(model.step))
        moved += model.state.last_change == model.steps
    model.close()
    median, base = statistics.median(rounds), statistics.median(floor)
    return {"round_s": median, "mean_round_s": statistics.fmean(rounds), "floor_s": base,
            "ratio_to_floor": base / median, "iterate_moved": moved / reps,
            "cells": cells.size, "floor_ns_per_cell": base / cells.size * 1e9}


def whole_run(game: str, learner: str, agents: int, rounds: int) -> dict[str, float]:
    """A whole run of ``rounds`` (a user's run: ``LearningConfig``'s default horizon, 500),
    each round timed after a floor pass: the floor's median over the mean round (what the run
    costs a round), the share of the rounds where the last iterate moved, and the median
    round where it moved and where it stayed. The first two rounds go untimed, as in
    :func:`population`, whose rounds 3-9 of a 70-round run are a run's costliest stretch:
    Hedge's step ``sqrt(8 ln m / T)`` is ``sqrt(500 / 70) = 2.7`` times a default run's
    there, so its iterates move more often, and a round where the last iterate moved
    measures it again."""
    model = LearningModel(LearningConfig(game=game, learner=learner, agents=agents,
                                         rounds=rounds), seed=0)
    for _ in range(2):
        model.step()
    cells = np.random.default_rng(0).random((model.slice_.row_count(model.config),
                                             model.grid.size))
    out = np.empty_like(cells)
    floor, times = [], {True: [], False: []}  # by whether the last iterate moved
    for _ in range(rounds - 2):
        floor.append(timed(lambda: floor_pass(cells, out)))
        took = timed(model.step)
        times[model.state.last_change == model.steps].append(took)
    model.close()
    mean = statistics.fmean(times[True] + times[False])
    base = statistics.median(floor)
    return {"rounds": rounds, "mean_round_s": mean, "floor_s": base,
            "ratio_to_floor": base / mean, "iterate_moved": len(times[True]) / (rounds - 2),
            **{f"{name}_round_s": statistics.median(times[key]) if times[key] else math.nan
               for name, key in (("moved", True), ("still", False))}}


def floor_parts(agents: int, m: int, reps: int) -> dict[str, float]:
    """What the floor is made of on this machine, ns a cell of ``agents x m``: one ``exp``
    pass and one ``multiply`` pass, interleaved (the floor is one of the first and ten of the
    second). numpy's float64 ``exp`` is vectorized only with AVX-512, so the first differs
    most between CPUs: with both, a round's ratio on one machine can be read on another."""
    cells = np.random.default_rng(0).random((agents, m))
    out = np.empty_like(cells)
    exp, multiply = [], []
    for _ in range(reps):
        exp.append(timed(lambda: np.exp(cells, out=out)))
        multiply.append(timed(lambda: np.multiply(out, cells, out=out)))
    return {"agents": agents, "actions": m,
            "exp_ns_per_cell": statistics.median(exp) / cells.size * 1e9,
            "multiply_ns_per_cell": statistics.median(multiply) / cells.size * 1e9}


def measure(agents: int, games: tuple[str, ...], reps: int, fresh: bool = True,
            how: str = "one") -> dict[str, dict]:
    """:func:`population` (``how="one"``; ``"whole"``: :func:`whole_run` of ``reps`` rounds)
    per learner and game, each in a fresh process (``fresh``), as a user runs one (one
    population alive at a time: at 10^6 agents several would compete for memory, and one
    measured after another freed gigabytes ran SAR's rounds 1.2-1.4x slower); the smoke
    run's in this one."""
    report: dict[str, dict] = {}
    for learner in ("hedge", "exp3"):
        report[learner] = {}
        for game in games:
            if not fresh:
                report[learner][game] = MEASURES[how](game, learner, agents, reps)
                continue
            done = subprocess.run([sys.executable, __file__, f"--{how}",
                                   f"{game},{learner},{agents},{reps}"],
                                  capture_output=True, text=True, check=True)
            report[learner][game] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


MEASURES = {"one": population, "whole": whole_run}


@njit(error_model="numpy")
def fdlibm_exp(v):
    """The learners' ``exp`` (fdlibm's, as :func:`~privgames.agents.learners._learn_rows`
    writes it out)."""
    k = np.rint(v * learners._INV_LN2)
    hi = v - k * learners._LN2_HI
    lo = k * learners._LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (learners._P1 + t * (learners._P2 + t * (learners._P3 + t * (
        learners._P4 + t * learners._P5))))
    return (1.0 - ((lo - (r * c) / (2.0 - c)) - hi)) * learners._TWO_TO[int(k) + 1077]


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
            x[j] = fdlibm_exp(x[j]) if exact[3] else x[j] * x[j]
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


def fused_state(rows: int, m: int, rng: np.random.Generator) -> tuple[tuple, np.ndarray]:
    """:func:`fused_round`'s arguments before ``uniform`` (a row's base, upstream noise,
    weight, the grid, the spans, the step size, losses, the weights drawn from, the next
    weights and the analyst's sums) and each row's last action, for ``rows x m`` cells."""
    state = (rng.random(rows), 5.0 * rng.random(rows), rng.random(rows),
             np.linspace(0.0, 3.0, m), np.ones(rows), 0.3, np.zeros((rows, m)),
             np.full((rows, m), 1.0 / m), np.empty((rows, m)), np.zeros((2, rows, m)),
             np.zeros((2, rows)), np.zeros((2, rows)))
    return state, rng.integers(0, m, rows)


def bound(agents: int, reps: int) -> dict[str, dict]:
    """:func:`fused_round` over ``agents x 21`` (each variant at 10^4; the exact one at 10^6)
    against the floor, interleaved."""
    m, rng = 21, np.random.default_rng(0)
    state, last = fused_state(agents, m, rng)
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


@njit(error_model="numpy")
def pair_round(table, span, eta, losses, drawn, weights, sums, played, mixed, lows, uniform,
               last, bounds):
    """One SAR Hedge round's arithmetic at its 2 actions, written straight (no loop over the
    actions), row by row: a row's costs are its last action's row of ``table`` (as
    ``SARGame.costs_given`` gathers them), then the learner's capped units, losses, last
    iterate and next weights (:func:`~privgames.agents.learners._learn_rows`), the analyst's
    sums and largest gains (``learning_measures._add_round``) and the draw, in the engine's
    operations and order. ``bounds`` given (``(2, n)``: each row's realized range, low and
    high): EXP3's round under bandit feedback, the played cell's cost standing for the
    realized one (its draws are timed apart, :func:`sar_draws`): the learner raises its
    played action's estimate by the cost's units over its probability
    (``learners._importance_weighted``), and the analyst's units are over the range. Returns
    the largest regret or CCE gain."""
    largest = -np.inf
    bandit = bounds.shape[1] == losses.shape[0]
    for i in range(losses.shape[0]):
        a, s = last[i], span[i]
        c0, c1 = table[a, 0], table[a, 1]
        own = c0 if a == 0 else c1
        if bandit:  # observe's clip((c - low) / (high - low), 0, 1), then the estimate
            shift, s = bounds[0, i], bounds[1, i] - bounds[0, i]
            x = (own - shift) / s
            x = 0.0 if x < 0.0 else 1.0 if x > 1.0 else x
            losses[i, a] += x / drawn[i, a]
        else:
            low = c0 if c0 < np.inf else np.inf
            low = c1 if c1 < low else low
            u0, u1 = (c0 - low) / s, (c1 - low) / s
            u0, u1 = 1.0 if u0 > 1.0 else u0, 1.0 if u1 > 1.0 else u1
            losses[i, 0] += u0
            losses[i, 1] += u1
            shift = c1 if c1 < c0 else c0  # the analyst's units (its own pass: the same)
        v0, v1 = (c0 - shift) / s, (c1 - shift) / s
        v0, v1 = 0.0 if v0 < 0.0 else 1.0 if v0 > 1.0 else v0, 0.0 if v1 < 0.0 else (
            1.0 if v1 > 1.0 else v1)
        own_units = v0 if a == 0 else v1
        played[0, i] += own_units
        played[1, i] += own
        sums[0, i, 0] += v0
        sums[0, i, 1] += v1
        sums[1, i, 0] += c0
        sums[1, i, 1] += c1
        p0, p1 = drawn[i, 0], drawn[i, 1]
        expected, expected_game = 0.0, 0.0
        if p0 > 0.0:
            expected += p0 * v0
            expected_game += p0 * c0
        if p1 > 0.0:
            expected += p1 * v1
            expected_game += p1 * c1
        mixed[0, i] += expected
        mixed[1, i] += expected_game
        for k in range(2):
            g0, g1 = sums[k, i, 0], sums[k, i, 1]
            lows[k, i] = g1 if g1 < g0 else g0
            largest = max(largest, mixed[k, i] - lows[k, i], played[k, i] - lows[k, i])
        l0, l1 = losses[i, 0], losses[i, 1]
        least = min(l0, l1)
        x0 = fdlibm_exp(max(-eta * (l0 - least), learners._EXP_FLOOR))
        x1 = fdlibm_exp(max(-eta * (l1 - least), learners._EXP_FLOOR))
        total = (0.0 + x0) + x1
        w0 = weights[i, 0] = x0 / total
        weights[i, 1] = x1 / total
        # the next action, as the learners' _draw takes it (a compiled kernel cannot call
        # the project's lazily compiled ones)
        last[i] = 0 if not w0 < uniform[i] else 1
    return largest


def pair_bound(agents: int, reps: int) -> dict[str, float]:
    """:func:`pair_round` at ``agents`` rows, Hedge's (full feedback) and EXP3's (bandit),
    and the round's action draws from the per-block streams (one uniform a user, as the
    slice draws them), against the floor of ``agents x 2``, interleaved. The ratio is
    Hedge's round with its draws; EXP3's draws are more (:func:`sar_draws`)."""
    rng = np.random.default_rng(0)
    table = np.array([[0.0, 0.7], [0.0, 0.6]])  # abstain, or take part at a gain of 0.6-0.7
    states = {kind: (table, np.ones(agents), 0.3, np.zeros((agents, 2)),
                     np.full((agents, 2), 0.5), np.empty((agents, 2)),
                     np.zeros((2, agents, 2)), np.zeros((2, agents)), np.zeros((2, agents)),
                     np.zeros((2, agents))) for kind in ("hedge", "exp3")}
    bounds = {"hedge": np.zeros((2, 0)), "exp3": np.stack([np.full(agents, -0.5),
                                                           np.full(agents, 1.5)])}
    last = rng.integers(0, 2, agents)
    streams = BlockStreams(np.random.SeedSequence(0), 0, 0, agents, agents)
    cells = rng.random((agents, 2))
    out = np.empty_like(cells)
    for kind, state in states.items():
        pair_round(*state, rng.random(agents), last.copy(), bounds[kind])
    floor, draws, rounds = [], [], {kind: [] for kind in states}
    for _ in range(reps):
        floor.append(timed(lambda: floor_pass(cells, out)))
        draws.append(timed(streams.uniform))
        for kind, state in states.items():
            u, b = rng.random(agents), bounds[kind]
            rounds[kind].append(timed(lambda s=state, u=u, b=b: pair_round(*s, u, last, b)))
    base, drawn = statistics.median(floor), statistics.median(draws)
    arithmetic = statistics.median(rounds["hedge"])
    return {"agents": agents, "arithmetic_s": arithmetic, "draws_s": drawn, "floor_s": base,
            "exp3_arithmetic_s": statistics.median(rounds["exp3"]),
            "ratio_to_floor": base / (arithmetic + drawn)}


@njit(error_model="numpy")
def interim_adds(row, clients, profiles):
    """The additions of pricing-bayes' interim sums and nothing else: each client's
    ``profiles`` rows of candidates added into its own, every row the same one (kept in
    L1: no table to gather from, no index to read)."""
    out = np.zeros((clients, row.size))
    for c in range(clients):
        acc = out[c]
        for _ in range(profiles):
            for j in range(row.size):
                acc[j] += row[j]
    return out


def bayes_bound(clients: int, reps: int) -> dict[str, float]:
    """What a pricing-bayes round where the last iterate moved must compute at ``clients``
    clients, each part by itself: the analyst's interim sums' additions over
    :data:`~privgames.mechanisms.learning_games.TYPE_PROFILES` profiles (:func:`interim_adds`,
    42 candidates padded to 48: whole vectors, faster), and the learners' and the analyst's
    arithmetic over the rows that play (a client each) at 42 actions (:func:`fused_round`
    with its cost one multiply), interleaved."""
    m, profiles, rng = 42, TYPE_PROFILES, np.random.default_rng(0)
    row = rng.random(48)
    state, last = fused_state(clients, m, rng)
    interim_adds(row, 1, profiles)
    fused_round(*state, rng.random(clients), last, VARIANTS["eq14_multiply"])
    adds, learning = [], []
    for _ in range(reps):
        adds.append(timed(lambda: interim_adds(row, clients, profiles)))
        u = rng.random(clients)
        learning.append(timed(lambda u=u: fused_round(*state, u, last,
                                                      VARIANTS["eq14_multiply"])))
    a, b = statistics.median(adds), statistics.median(learning)
    return {"clients": clients, "profiles": profiles, "interim_adds_s": a, "learning_s": b,
            "round_s": a + b}


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
    for how, run in MEASURES.items():
        if f"--{how}" in sys.argv:
            game, learner, agents, reps = sys.argv[sys.argv.index(f"--{how}") + 1].split(",")
            print(json.dumps(run(game, learner, int(agents), int(reps))))
            return
    args = arguments(__doc__)
    if args.quick:
        report = {"agents": 1000, **measure(1000, GAMES, 3, fresh=False),
                  "whole": measure(1000, GAMES, 6, fresh=False, how="whole"),
                  "bound": bound(1000, 3),
                  "sar_draws": sar_draws(1000, 3), "pair_bound": pair_bound(1000, 3),
                  "small_sar_draws": sar_draws(1000, 3),
                  "small_pair_bound": pair_bound(1000, 3),
                  "floor_parts": floor_parts(1000, 21, 3),
                  "bayes_bound": bayes_bound(1000, 3)}
    else:
        report = {"agents": 10_000, **measure(10_000, GAMES, 7),
                  "whole": measure(10_000, GAMES, LearningConfig.rounds, how="whole"),
                  "million": measure(1_000_000, LARGE, 5),
                  "bound": bound(10_000, 31), "million_bound": bound(1_000_000, 5),
                  "sar_draws": sar_draws(1_000_000, 9),
                  "pair_bound": pair_bound(1_000_000, 9),
                  "small_sar_draws": sar_draws(10_000, 31),
                  "small_pair_bound": pair_bound(10_000, 31),
                  "floor_parts": floor_parts(10_000, 21, 31),
                  "million_floor_parts": floor_parts(1_000_000, 21, 9),
                  "bayes_bound": bayes_bound(10_000, 9)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
