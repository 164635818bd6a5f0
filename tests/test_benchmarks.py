"""The benchmark scripts run at tiny sizes and report what they promise.

Speed is reported by the scripts (ratios measured in one run), never asserted here: a timing
assertion on a shared machine either flakes or cannot fail. What is asserted can fail: the
scripts finish, report every documented figure as a finite number, and keep memory bounded.
Every script runs once, through ``run.py --quick`` (the table's own run, whose reports it also
writes as JSON); each test reads its script's report from that run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The quick run of every script takes minutes (its set-up starts Ray): not in the fast selection.
pytestmark = pytest.mark.slow

BENCH = Path(__file__).parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def quick_benchmarks(tmp_path_factory) -> dict:
    """``run.py --quick`` once: its table (with paper timings given) and every report."""
    folder = tmp_path_factory.mktemp("bench")
    timings = folder / "timings.json"
    timings.write_text(json.dumps({"seconds": {"fast": 5.0, "slow": 61.0, "apes-clip": 200.0},
                                   "total": 266.0}))
    subprocess.run([sys.executable, str(BENCH / "run.py"), "--quick", "--paper-timings",
                    str(timings), "--out", str(folder / "RESULTS.md"), "--json",
                    str(folder / "results.json")], capture_output=True, check=True)
    return {"timings": timings, "table": (folder / "RESULTS.md").read_text(),
            "reports": json.loads((folder / "results.json").read_text())}


def _finite(*values: float) -> bool:
    return all(isinstance(v, float | int) and math.isfinite(v) for v in values)


def test_chain_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_chain"]
    assert _finite(report["kernel"]["ratio_to_raw"], report["mesa"]["speedup"])
    # bounded memory: the traced peak stays far below the noise tensor it simulates
    assert report["memory"]["peak_traced_MiB"] < 0.5 * 1024 * report["memory"]["noise_tensor_GiB"]


def test_sar_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_sar"]
    assert {r["attacker"] for r in report} == {"weak", "strong"}
    assert all(_finite(r["trials_per_s"], r["ratio_to_raw"]) for r in report)


def test_ppsp_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_ppsp"]
    assert _finite(report["vectorized"]["ratio_to_raw"], report["mesa"]["speedup"])
    memory = report["memory"]
    assert memory["peak_traced_MiB"] < 0.25 * memory["all_steps_would_be_MiB"]


def test_pricing_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_pricing"]
    assert _finite(report["solve_eq10_eq11_s"], report["best_response_round_s"],
                   report["vectorised_over_loop"])


def test_budget_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_budget"]
    assert _finite(report["dp_kmeans_point_iterations_per_s"],
                   report["sklearn_lloyd_point_iterations_per_s"],
                   report["ratio_to_sklearn_lloyd"], report["paper_scale_estimated_s_one_core"])


def test_apes_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_apes"]
    r, k = report["round"], report["kernel"]
    assert _finite(report["eon_numerical_s"], report["baseline_numerical_s"],
                   r["ratio_to_exponential"], k["ratio_to_exponential"], k["ratio_to_uniform"])
    # the true floor: numpy's exponential and uniform are faster than any exact sampler
    assert k["ratio_to_exponential"] < 1.0 and k["ratio_to_uniform"] < 1.0
    assert r["peak_traced_MiB"] < 4 * r["reports_MiB"] + 200  # bounded: a few reports matrices


def _cells(markdown: str, start: str) -> list[list[str]]:
    """The stripped cells of the table rows that begin with ``start``."""
    return [[cell.strip() for cell in line.strip("|").split("|")]
            for line in markdown.splitlines() if line.startswith(start)]


def test_results_table_judges_every_target(quick_benchmarks):
    """``run.py --quick --paper-timings`` runs every benchmark, and judges each paper-scale
    wall time from the given ``timings.json`` against its target (an experiment under a
    minute, an APES one under 90 s, the total under ten) and names the file it took them
    from; a target not met gets its floor (an APES experiment's draws at the sampler's rate
    the same run measured, beside numpy's standard_exponential rate) or reason."""
    timings, table = quick_benchmarks["timings"], quick_benchmarks["table"]
    assert f"--paper-timings {timings}" in table
    assert "| `fast` at paper scale (s) | 5 | < 60.0 | yes |" in table
    assert "| `slow` at paper scale (s) | 61 | < 60.0 | no |" in table
    assert "| `total` at paper scale (s) | 266 | < 600.0 | yes |" in table
    assert "| `apes-clip` at paper scale (s) | 200 | < 90.0 | no |" in table
    assert "| start-up: `privgames list` (s) |" in table and "not measured" not in table
    why = dict(_cells(table.split("## Not met: why")[1].split("\n## ")[0], "| `"))
    assert set(why) >= {"`slow` at paper scale (s)", "`apes-clip` at paper scale (s)"}
    assert "`fast` at paper scale (s)" not in why and "`total` at paper scale (s)" not in why
    figures = dict(_cells(table, "| kernel."))
    rate = float(figures["kernel.clip_laplace_per_s"])
    floor = float(why["`apes-clip` at paper scale (s)"].split(" s on ")[0].split(": ")[-1])
    # printed in whole seconds: within half a second of the rate's floor
    assert floor == pytest.approx(8.19e9 / rate / os.cpu_count(), rel=0.01, abs=0.5)


def test_learning_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_learning"]
    for learner in ("hedge", "exp3"):
        for game in ("bas", "bas-sequential", "sar", "ppsp", "pricing", "pricing-bayes"):
            figures = report[learner][game]
            assert _finite(figures["round_s"], figures["floor_s"], figures["ratio_to_floor"])
            assert figures["ratio_to_floor"] == pytest.approx(
                figures["floor_s"] / figures["round_s"], rel=1e-12)
            assert _finite(figures["mean_round_s"]) and figures["mean_round_s"] > 0
            assert figures["floor_ns_per_cell"] == pytest.approx(
                figures["floor_s"] / figures["cells"] * 1e9, rel=1e-12)
    for learner, games in report["whole"].items():  # whole runs: a run's mean round
        assert set(games) == set(report[learner])
        for figures in games.values():
            assert _finite(figures["mean_round_s"], figures["floor_s"])
            assert figures["mean_round_s"] > 0
            assert figures["ratio_to_floor"] == pytest.approx(
                figures["floor_s"] / figures["mean_round_s"], rel=1e-12)
            assert 0.0 <= figures["iterate_moved"] <= 1.0
            for kind, some in (("moved", figures["iterate_moved"] > 0),  # NaN where none
                               ("still", figures["iterate_moved"] < 1)):
                assert figures[f"{kind}_round_s"] > 0 if some else math.isnan(
                    figures[f"{kind}_round_s"])
    parts = report["floor_parts"]  # what the floor is made of on this machine
    assert parts["exp_ns_per_cell"] > 0 and parts["multiply_ns_per_cell"] > 0
    bound = report["bound"]  # the fused round's arithmetic, whole and less each exact part
    assert set(bound) == {"exact", "eq14_multiply", "units_multiply", "normalise_multiply",
                          "exp_multiply", "reciprocals"}
    assert all(_finite(*figures.values()) for figures in bound.values())
    for figures in report["hedge"].values():  # rounds where the analyst measured again
        assert 0.0 <= figures["iterate_moved"] <= 1.0
    for name in ("pair_bound", "small_pair_bound"):  # SAR's rounds written straight
        pair = report[name]
        assert _finite(*pair.values()) and pair["exp3_arithmetic_s"] > 0
        assert pair["ratio_to_floor"] == pytest.approx(
            pair["floor_s"] / (pair["arithmetic_s"] + pair["draws_s"]), rel=1e-12)
    bayes = report["bayes_bound"]  # a pricing-bayes round's sums and learning, by themselves
    assert _finite(*bayes.values())
    assert bayes["round_s"] == pytest.approx(bayes["interim_adds_s"] + bayes["learning_s"],
                                             rel=1e-12)
    for name in ("sar_draws", "small_sar_draws"):  # SAR EXP3's draws, against its floor
        draws = report[name]
        assert _finite(*draws.values())
        assert draws["draws_over_floor"] == pytest.approx(draws["draws_s"] / draws["floor_s"],
                                                          rel=1e-12)


def test_the_learning_bound_does_the_engines_arithmetic(monkeypatch):
    """The bound's fused bas Hedge round (bench_learning) does the engine's arithmetic: eq 14
    and the capped units written out here, the learners' own exponential weights bit for bit,
    the analyst's sums and the draw from the new weights."""
    import numpy as np

    from privgames.agents.learners import _softmin

    monkeypatch.syspath_prepend(str(BENCH))
    import bench_learning

    rng = np.random.default_rng(5)
    n, m, eta = 9, 21, 0.3
    grid = np.linspace(0.0, 3.0, m)
    base, upstream, alpha, span = (rng.random(n), 5.0 * rng.random(n), rng.random(n),
                                   0.5 + rng.random(n))
    losses, drawn = rng.random((n, m)), rng.dirichlet(np.ones(m), n)
    before, last, uniform = losses.copy(), rng.integers(0, m, n), rng.random(n)
    played_before = last.copy()
    weights, sums = np.empty((n, m)), np.zeros((2, n, m))
    played, mixed = np.zeros((2, n)), np.zeros((2, n))
    largest = bench_learning.fused_round(base, upstream, alpha, grid, span, eta, losses, drawn,
                                         weights, sums, played, mixed, uniform, last,
                                         (True, True, True, True))
    costs = base[:, None] + grid + alpha[:, None] / np.sqrt(upstream[:, None] + grid)  # eq 14
    units = np.minimum((costs - costs.min(axis=1, keepdims=True)) / span[:, None], 1.0)
    assert np.array_equal(losses, before + units)
    assert np.array_equal(sums, np.stack([units, costs]))
    assert np.array_equal(weights, _softmin(losses, eta))
    rows = np.arange(n)
    assert np.array_equal(played, np.stack([units[rows, played_before],
                                            costs[rows, played_before]]))
    np.testing.assert_allclose(mixed, np.stack([(drawn * units).sum(1), (drawn * costs).sum(1)]),
                               rtol=1e-13)
    lows = np.stack([units.min(1), costs.min(1)])  # the regret and CCE gains' largest
    assert largest == pytest.approx(max((mixed - lows).max(), (played - lows).max()), rel=1e-13)
    assert np.array_equal(last, np.minimum((np.cumsum(weights, 1) < uniform[:, None]).sum(1),
                                           m - 1))


@pytest.mark.parametrize("bandit", [False, True])
def test_the_pair_bound_does_the_engines_arithmetic(monkeypatch, bandit):
    """The bound's SAR round at 2 actions (bench_learning's ``pair_round``), Hedge's and
    EXP3's, gives the engine's numbers bit for bit over two rounds: the learners' pass
    (``_learn_rows``; EXP3: its units of the played cost and ``_importance_weighted``
    first), the analyst's sums (``RegretSums``) and the draw (``_draw``), on the costs
    gathered here from the table by each row's action."""
    import numpy as np

    from privgames.agents.learners import _draw, _importance_weighted, _learn_rows
    from privgames.environments.learning_measures import RegretSums

    monkeypatch.syspath_prepend(str(BENCH))
    import bench_learning

    rng = np.random.default_rng(8)
    n, eta, rows = 64, 0.3, np.arange(64)
    table = np.array([[0.0, 0.7], [0.0, -0.4]])
    span = 0.5 + rng.random(n)
    low, high = -0.6 - rng.random(n), 0.5 + rng.random(n)  # some costs clipped to the range
    bounds = np.stack([low, high]) if bandit else np.zeros((2, 0))
    losses, drawn = 3.0 * rng.random((n, 2)), rng.dirichlet(np.ones(2), n)
    drawn[:5] = [1.0, 0.0]  # a zero weight is left out of the expected cost
    last = rng.integers(0, 2, n)
    every = np.ones(n, np.bool_)
    engine_losses, engine_last = losses.copy(), last.copy()
    weights, lowest = np.empty((n, 2)), np.zeros(n, np.int64)
    sums = RegretSums(n, 2, not bandit, span, low, high)
    bench = (losses.copy(), drawn, np.empty((n, 2)), np.zeros((2, n, 2)), np.zeros((2, n)),
             np.zeros((2, n)), np.zeros((2, n)))
    for _ in range(2):
        uniform = rng.random(n)
        costs = table[engine_last]
        own = costs[rows, engine_last]
        out = sums.add(costs, own, drawn, every)
        if bandit:
            _importance_weighted(engine_losses, engine_last,
                                 np.clip((own - low) / (high - low), 0.0, 1.0), drawn, every)
        _learn_rows(engine_losses, eta, weights, lowest, every,
                    np.zeros((0, 0)) if bandit else costs, span, True, True, True)
        engine_last = _draw(weights, uniform, np.zeros(n, np.int64), np.arange(2.0),
                            np.empty(n))
        largest = bench_learning.pair_round(table, span, eta, *bench, uniform, last, bounds)
        assert np.array_equal(bench[0], engine_losses) and np.array_equal(bench[2], weights)
        assert np.array_equal(last, engine_last)
    _, _, _, grid, played, mixed, lows = bench
    assert np.array_equal(grid, sums.grid) and np.array_equal(played, sums.played)
    assert np.array_equal(mixed, sums.mixed) and np.array_equal(lows, sums.lows)
    assert largest == max(out["regret"], out["cce"], out["regret_game"], out["cce_game"])
    assert 0 < last.sum() < n  # both actions drawn


def test_the_interim_adds_are_the_sums_in_profile_order(monkeypatch):
    """The bound's interim additions (bench_learning's ``interim_adds``) add each profile's
    row into each client's in order, as the engine's interim sums do."""
    import numpy as np

    monkeypatch.syspath_prepend(str(BENCH))
    import bench_learning

    row = np.random.default_rng(2).random(48)
    out = bench_learning.interim_adds(row, 3, 7)
    expected = np.zeros(48)
    for _ in range(7):
        expected = expected + row
    assert out.shape == (3, 48) and all(np.array_equal(x, expected) for x in out)


def test_pages_benchmark(quick_benchmarks):
    report = quick_benchmarks["reports"]["bench_pages"]
    assert _finite(report["start_s"], report["index_s"], report["pages_load_s"],
                   *report["redraw_s"].values())
    assert report["start_s"] <= report["index_s"]
    assert set(report["redraw_s"]) == {"bas", "sar", "ppsp", "pricing", "kmeans", "apes",
                                       "learning"}


@pytest.mark.ray
def test_shards_benchmark(quick_benchmarks):
    """One population over Ray shards reports its time, memory and bytes per round; the
    shards' memory does not grow with the rounds."""
    report = quick_benchmarks["reports"]["bench_shards"]
    rows = report["table"]
    assert {(r["agents"], r["shards"]) for r in rows} == {(3000, 0), (3000, 1), (3000, 2)}
    for r in rows:
        assert _finite(r["round_s"], r["driver_peak_rss_mb"])
        if r["shards"]:
            assert len(r["shard_rss_mb"]) == r["shards"] and r["bytes_per_round"] > 0
            assert max(r["shard_rss_mb"]) <= 1.1 * max(r["shard_rss_mb_early"])
    assert report["long"]["shard_growth"] < 1.1 and report["long"]["shards"] == 2
    ring = report["ring"]
    assert (ring["n"], ring["shards"], len(ring["shard_peak_rss_mb"])) == (20000, 2, 2)
    assert ring["sum_preserved"] and _finite(ring["seconds"], ring["driver_peak_rss_mb"])
    games = report["games"]
    assert {(r["game"], r["shards"]) for r in games} == {
        (g, k) for g in ("bas", "pricing") for k in (0, 2)}
    assert all(_finite(r["round_s"]) and (not r["shards"] or r["bytes_per_round"] > 0)
               for r in games)


def test_estimates_benchmark(quick_benchmarks):
    """Each case's estimate, wall time and their factor (the larger over the smaller)."""
    report = quick_benchmarks["reports"]["bench_estimates"]
    assert report["cases"]
    for case in report["cases"].values():
        assert _finite(case["estimate_s"], case["actual_s"]) and case["actual_s"] > 0
        e, a = case["estimate_s"], case["actual_s"]
        assert case["factor"] == pytest.approx(max(e / a, a / e), abs=0.01)
    assert report["worst_factor"] == max(c["factor"] for c in report["cases"].values())
