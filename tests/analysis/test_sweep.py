"""Sweeps: seeds per unit, identical rows serial or on Ray, resuming after an interruption."""

from __future__ import annotations

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

    def flaky(name, params, batch):
        calls.append(len(batch))
        if len(calls) == 4:
            raise KeyboardInterrupt  # the sweep dies after three finished tasks
        return real(name, params, batch)

    monkeypatch.setattr(sweep, "run_batch", flaky)
    with pytest.raises(KeyboardInterrupt):
        rows_for(0, parts=tmp_path)
    assert len(list(tmp_path.glob("*.parquet"))) == 3
    resumed_calls = []

    def counting(name, params, batch):
        resumed_calls.append(len(batch))
        return real(name, params, batch)

    monkeypatch.setattr(sweep, "run_batch", counting)
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    assert len(resumed_calls) == 9 - 3  # 9 units in 9 tasks: only the unfinished ones ran
    assert not list(tmp_path.glob("*.parquet"))  # parts are removed once the result is whole


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_a_corrupt_part_is_recomputed(tmp_path, damage, capsys):
    """A 0-byte or truncated part (a power loss) is reported on one line, deleted and its
    task recomputed; the rows equal an undisturbed sweep's."""
    clean = rows_for(0)
    e = experiments.get("bas-mse-vs-K")
    params = e.resolve(PARAMS)
    key = sweep._sweep_key(e.name, params, 11)
    good = sweep.run_batch(e.name, params, sweep.batches(e.units(params, 11))[0])
    part = sweep._part_path(tmp_path, key, 0)
    sweep.write_parquet(good, part)
    data = part.read_bytes()
    part.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    resumed = rows_for(0, parts=tmp_path)
    pd.testing.assert_frame_equal(clean, resumed)
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "recomputing that task" in err


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
