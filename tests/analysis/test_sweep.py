"""Sweeps: seeds per unit, identical rows serial or on Ray, resuming after an interruption."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from privgames.analysis import experiments, sweep

PARAMS = {"K": [3, 5, 8], "populations": 3, "replications": 200, "rounds": 4}


def rows_for(workers, monkeypatch=None, max_tasks=None, parts=None):
    e = experiments.get("bas-mse-vs-K")
    if max_tasks is not None:
        monkeypatch.setattr(sweep, "MAX_TASKS", max_tasks)
    return sweep.sweep(e, e.resolve(PARAMS), seed=11, workers=workers, parts_dir=parts,
                       progress=False)


def test_batching_does_not_change_rows(monkeypatch):
    a = rows_for(0)
    b = rows_for(0, monkeypatch, max_tasks=2)
    pd.testing.assert_frame_equal(a, b)
    assert sorted(a["K"].unique()) == [3, 5, 8]
    assert a["population"].nunique() == 3


@pytest.mark.ray
def test_ray_and_serial_rows_are_identical(ray_session, monkeypatch):
    serial = rows_for(0)
    pd.testing.assert_frame_equal(serial, rows_for(2))
    pd.testing.assert_frame_equal(serial, rows_for(1, monkeypatch, max_tasks=5))


def test_interrupted_sweep_resumes_without_loss_or_duplicates(tmp_path, monkeypatch):
    clean = rows_for(0)
    calls = []
    real = sweep.run_batch

    def flaky(name, params, batch, report=None):
        calls.append(len(batch))
        if len(calls) == 4:
            raise KeyboardInterrupt  # the sweep dies after three finished tasks
        return real(name, params, batch, report)

    monkeypatch.setattr(sweep, "run_batch", flaky)
    with pytest.raises(KeyboardInterrupt):
        rows_for(0, parts=tmp_path)
    assert len(list(tmp_path.glob("*.parquet"))) == 3
    resumed_calls = []

    def counting(name, params, batch, report=None):
        resumed_calls.append(len(batch))
        return real(name, params, batch, report)

    monkeypatch.setattr(sweep, "run_batch", counting)
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    assert len(resumed_calls) == 9 - 3  # 9 units in 9 tasks: only the unfinished ones ran
    assert len(list(tmp_path.glob("*.parquet"))) == 9  # kept until the results are written
    e = experiments.get("bas-mse-vs-K")
    sweep.discard_parts(tmp_path, sweep.sweep_key(e, e.resolve(PARAMS), 11))
    assert not tmp_path.exists()  # and then removed, the emptied folder too


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_a_corrupt_part_is_recomputed(tmp_path, damage, capsys):
    """A 0-byte or truncated part (a power loss) is reported on one line, deleted and its
    task recomputed; the rows equal an undisturbed sweep's."""
    clean = rows_for(0)
    e = experiments.get("bas-mse-vs-K")
    params = e.resolve(PARAMS)
    key = sweep.sweep_key(e, params, 11)
    good = sweep.run_batch(e.name, params, sweep.batches(e.units(params, 11))[0])
    part = sweep._part_path(tmp_path, key, 0)
    sweep._write_part(good, part, key, 0)
    data = part.read_bytes()
    part.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "recomputing that task" in err


def _finished_parts(tmp_path) -> tuple[pd.DataFrame, list]:
    """An uninterrupted sweep's rows, and every task's part as a sweep interrupted at its end
    would have left them."""
    clean = rows_for(0)
    e = experiments.get("bas-mse-vs-K")
    params = e.resolve(PARAMS)
    key = sweep.sweep_key(e, params, 11)
    paths = []
    for i, task in enumerate(sweep.batches(e.units(params, 11))):
        paths.append(sweep._part_path(tmp_path, key, i))
        sweep._write_part(sweep.run_batch(e.name, params, task), paths[-1], key, i)
    return clean, paths


def test_a_part_that_parses_but_was_changed_or_moved_is_recomputed(tmp_path, capsys):
    """A part whose values changed under its metadata (what a flipped bit in an uncompressed
    page does: it still parses), and a part copied over another task's, are each reported on
    one line and recomputed; the rows equal an uninterrupted run's."""
    import pyarrow.parquet as pq

    clean, paths = _finished_parts(tmp_path)
    table = pq.read_table(paths[0])  # the case: one value changed, the file valid
    frame = table.to_pandas()
    frame.loc[3, "value"] = -61.6
    sweep.write_parquet(frame, paths[0], metadata=table.schema.metadata)
    paths[1].write_bytes(paths[2].read_bytes())  # another task's part in its place
    assert len(sweep.read_parquet(paths[0])) == len(clean[clean["K"] == 3]) // 3
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    err = capsys.readouterr().err.splitlines()
    assert sum("do not match their checksum" in line for line in err) == 1, err
    assert sum("another task's part" in line for line in err) == 1, err


@pytest.mark.parametrize("seed", [0, 1])
def test_random_bit_flips_in_parts_never_reach_the_rows(tmp_path, capsys, seed):
    """Flip bits at random places in every part, then resume: whatever each flip hit (a
    value, a page header, the footer, the metadata, padding), the rows equal an uninterrupted
    run's; every part that changed what it reads is recomputed."""
    import numpy as np

    clean, paths = _finished_parts(tmp_path)
    rng = np.random.default_rng(seed)
    for path in paths:
        data = bytearray(path.read_bytes())
        for position in rng.integers(0, len(data), size=3):
            data[position] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(data))
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warned) <= len(paths)
    assert all("recomputing that task" in line for line in warned)


def test_units_get_distinct_seeds():
    e = experiments.get("bas-chain")
    units = e.units(e.resolve({"populations": 5}), seed=1)
    states = {tuple(s.generate_state(2)) for _, s in units}
    assert len(states) == 5


@pytest.mark.ray
def test_local_ray_listens_on_loopback_only(ray_session):
    nodes = [k for k in ray_session.cluster_resources() if k.startswith("node:")
             and k != "node:__internal_head__"]
    assert nodes == ["node:127.0.0.1"]


def _plant_part(tmp_path, fingerprint: str | None, monkeypatch) -> None:
    """A finished first task written under ``fingerprint`` (None: this code's), with its
    values shifted, so reusing it would change the rows."""
    e = experiments.get("bas-mse-vs-K")
    params = e.resolve(PARAMS)
    if fingerprint is not None:
        monkeypatch.setattr(sweep, "code_fingerprint", lambda module: fingerprint)
    key = sweep.sweep_key(e, params, 11)
    monkeypatch.undo()
    rows = sweep.run_batch(e.name, params, sweep.batches(e.units(params, 11))[0])
    sweep._write_part(rows.assign(value=rows["value"] + 1.0), sweep._part_path(tmp_path, key, 0),
                      key, 0)


@pytest.mark.parametrize("writer", ["this code", "other code"])
def test_only_parts_this_code_wrote_are_resumed(tmp_path, monkeypatch, writer):
    clean = rows_for(0)
    _plant_part(tmp_path, None if writer == "this code" else "older-code", monkeypatch)
    rows = rows_for(0, parts=tmp_path)
    resumed = not rows.equals(clean)
    assert resumed == (writer == "this code")


def test_the_code_fingerprint_follows_the_imported_source_and_the_version(
        tmp_path, monkeypatch):
    package = tmp_path / "fpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "unit.py").write_text("from fpkg.kernel import f\nimport numpy\n")
    (package / "kernel.py").write_text("def f():\n    return 1\n")
    (package / "other.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fingerprint() -> str:
        sweep.code_fingerprint.cache_clear()
        return sweep.code_fingerprint("fpkg.unit")

    first = fingerprint()
    (package / "other.py").write_text("x = 2\n")  # not imported by the unit
    assert fingerprint() == first
    (package / "kernel.py").write_text("def f():\n    return 2\n")
    second = fingerprint()
    assert second != first
    monkeypatch.setattr(sweep.metadata, "version", lambda name: "9.9.9")
    assert fingerprint() != second
    sweep.code_fingerprint.cache_clear()


def test_cleanup_removes_only_this_run_s_temporaries(tmp_path):
    e = experiments.get("bas-mse-vs-K")
    key = sweep.sweep_key(e, e.resolve(PARAMS), 11)
    mine = tmp_path / f".{key}-0003.parquet.x1y2.tmp"
    theirs = tmp_path / ".0123456789abcdef-0000.parquet.a1b2.tmp"  # a concurrent run's write
    for path in (mine, theirs):
        path.write_bytes(b"partial")
    rows_for(0, parts=tmp_path)
    sweep.discard_parts(tmp_path, key)  # what api.run does once the results are written
    assert not mine.exists() and theirs.exists()


def test_auto_runs_a_tiny_sweep_serially_without_importing_ray(tmp_path):
    """The default (``--workers auto``): a run whose work is far below Ray's start-up runs
    serially, never imports Ray, and says so on one line."""
    code = ("import sys\nfrom privgames.analysis.cli import main\n"
            f"assert main(['run', 'ppsp-tradeoff', '--out', {str(tmp_path)!r}]) == 0\n"
            "print('ray' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True)
    assert proc.stdout.split()[-1] == "False"
    assert "running serially" in proc.stderr


class ChoseRay(Exception):
    """Raised by a stand-in for ``ensure_ray``: the sweep chose Ray (with these arguments)."""


def test_auto_chooses_by_the_measured_first_task(monkeypatch):
    """Tiny: the rows of a serial run. When Ray would cost nothing to start, any remaining
    work outlasts it: the sweep asks for a local Ray on every core (workers None)."""
    pd.testing.assert_frame_equal(rows_for(0), rows_for("auto"))

    def chose_ray(workers, address=None):
        raise ChoseRay(workers, address)

    monkeypatch.setattr(sweep, "ensure_ray", chose_ray)
    monkeypatch.setattr(sweep, "RAY_START_S", 0.0)
    monkeypatch.setattr(sweep, "RAY_WARM_S", 0.0)
    with pytest.raises(ChoseRay) as chosen:
        rows_for("auto")
    assert chosen.value.args == (None, None)


@pytest.mark.ray
def test_auto_on_ray_gives_the_serial_rows(ray_session, monkeypatch):
    monkeypatch.setattr(sweep, "RAY_WARM_S", 0.0)
    pd.testing.assert_frame_equal(rows_for(0), rows_for("auto"))


def test_a_finished_run_is_kept_only_when_its_key_and_rows_match(tmp_path, monkeypatch,
                                                                  capsys):
    """``keep_finished`` (what ``reproduce`` uses) reuses ``OUT/NAME.parquet`` when the same
    parameters, seed and code wrote it and its rows match their checksum; a changed value, or
    another seed, runs again."""
    import pyarrow.parquet as pq

    from privgames.analysis import api

    first = api.run("bas-mse-vs-K", seed=11, workers=0, out=tmp_path, params=PARAMS)
    real, calls = sweep.sweep, []

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "sweep", counting)
    kept = api.run("bas-mse-vs-K", seed=11, workers=0, out=tmp_path, params=PARAMS,
                   keep_finished=True, progress=True)
    assert not calls and "already finished" in capsys.readouterr().err
    pd.testing.assert_frame_equal(first.rows, kept.rows)
    assert kept.summary == first.summary
    path = tmp_path / "bas-mse-vs-K.parquet"
    table = pq.read_table(path)
    frame = table.to_pandas()
    frame.loc[0, "value"] += 1.0  # a flipped bit that still parses
    sweep.write_parquet(frame, path, metadata=table.schema.metadata)
    again = api.run("bas-mse-vs-K", seed=11, workers=0, out=tmp_path, params=PARAMS,
                    keep_finished=True)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first.rows, again.rows)
    api.run("bas-mse-vs-K", seed=12, workers=0, out=tmp_path, params=PARAMS, keep_finished=True)
    assert len(calls) == 2


def test_reproduce_after_an_interruption_keeps_what_finished(tmp_path, monkeypatch, capsys):
    from privgames.analysis import experiments as registry
    from privgames.analysis import report

    chosen = [registry.get("budget-us-bounds"), registry.get("ppsp-example2")]
    monkeypatch.setattr(registry, "all_experiments", lambda: chosen)
    report.reproduce(tmp_path, workers=0)
    summaries = {p.name: p.read_bytes() for p in tmp_path.glob("*.summary.json")}
    capsys.readouterr()
    report.reproduce(tmp_path, workers=0)
    err = capsys.readouterr().err
    assert err.count("already finished") == 2, err
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.summary.json")} == summaries
    assert len(summaries) == 2


def test_a_sharded_population_is_admitted_by_all_its_shards_memory():
    """A ring over Ray actors: its footprint is the largest shard's; the population holds that
    in every shard, and the memory guard and a Ray task's reservation count them all."""
    from privgames.analysis import guard
    from privgames.environments.config import ConfigError

    e = experiments.get("ppsp-ring")
    ray_params = e.resolve({"n": 1_000_000, "K": 20, "backend": "ray", "shards": 4})
    config = e.config(ray_params, e.points(ray_params)[0])
    shard = guard.footprint_of(config).peak_bytes
    assert guard.population_bytes(config) == 4 * shard
    local = e.resolve({"n": 1_000_000, "K": 20})
    in_process = e.config(local, e.points(local)[0])
    assert guard.population_bytes(in_process) == guard.footprint_of(in_process).peak_bytes
    # refused when all the shards do not fit, though one shard would
    with pytest.raises(ConfigError, match="per population, 1 at a time"):
        guard.check(e, ray_params, workers=1, max_memory=2.5 * shard)
    guard.check(e, ray_params, workers=1, max_memory=4.5 * shard)
