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
