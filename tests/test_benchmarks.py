"""The benchmark scripts run (tiny sizes) and report their ratios; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[1] / "benchmarks"


def test_chain_benchmark_reports_ratios():
    proc = subprocess.run([sys.executable, str(BENCH / "bench_chain.py"), "--quick", "--no-ray"],
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout)
    assert report["kernel"]["ratio_to_raw"] > 0
    assert report["mesa"]["speedup"] > 0
    # bounded memory: the traced peak stays far below the noise tensor it simulates
    assert report["memory"]["peak_traced_MiB"] < 0.5 * 1024 * report["memory"]["noise_tensor_GiB"]


def test_sar_benchmark_reports_ratios():
    proc = subprocess.run([sys.executable, str(BENCH / "bench_sar.py"), "--quick"],
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout)
    assert {r["attacker"] for r in report} == {"weak", "strong"}
    assert all(r["trials_per_s"] > 0 and r["ratio_to_raw"] > 0 for r in report)


def test_ppsp_benchmark_reports_ratios():
    proc = subprocess.run([sys.executable, str(BENCH / "bench_ppsp.py"), "--quick", "--no-ray"],
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout)
    assert report["vectorized"]["ratio_to_raw"] > 0 and report["mesa"]["speedup"] > 0
    memory = report["memory"]
    assert memory["peak_traced_MiB"] < memory["all_steps_would_be_MiB"]
