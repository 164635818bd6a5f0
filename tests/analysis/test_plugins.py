"""A third-party package adds an experiment through the ``privgames.experiments`` entry points:
the example of ``docs/extending.md`` is installed and run through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "example_plugin"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    target = tmp_path_factory.mktemp("plugin")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(target), str(EXAMPLE)], check=True)
    return target


def _cli(args, pythonpath, cwd):
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-m", "privgames.analysis", *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_installed_plugin_runs_through_the_cli(plugin_path, tmp_path):
    listed = _cli(["list"], plugin_path, tmp_path)
    assert listed.returncode == 0 and "poll" in listed.stdout.split()
    run = _cli(["run", "poll", "--workers", "0", "--json", "--out", str(tmp_path / "out")],
               plugin_path, tmp_path)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    # the learned scales are the closed-form equilibrium, the MSE its prediction (3 SE)
    assert summary["max_relative_distance"] < 1e-3
    assert abs(summary["mse"] - summary["mse_predicted"]) < 3 * summary["mse_se"]
    bad = _cli(["run", "poll", "--set", "n=1"], plugin_path, tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "n=1" in bad.stderr


def test_listing_reads_a_plugins_metadata_without_importing_it(plugin_path, tmp_path):
    """Issue 33: ``privgames list`` names a plug-in's experiments from its entry points and
    its distribution's summary; the plug-in (and the mesa, pandas, scipy it imports) is not
    imported until one of its experiments is asked for."""
    code = ("import sys; from privgames.analysis.cli import main; main(['list']); "
            "print(sorted(m for m in ('privgames_poll', 'mesa', 'pandas', 'scipy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(plugin_path)}, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "[]"
    assert any(line.split(maxsplit=1) == ["poll", "A privgames plug-in: a noisy poll whose "
                                          "respondents choose their Laplace noise"]
               for line in lines)


def test_plugin_claims_hold_through_the_python_api(plugin_path, tmp_path):
    code = ("import privgames; r = privgames.run('poll', seed=3, workers=0); "
            "print(list(r.claims()['verdict']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(plugin_path)}, cwd=tmp_path,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['holds', 'holds']"
