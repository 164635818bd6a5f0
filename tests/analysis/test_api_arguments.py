"""``privgames.run``'s own arguments are checked at the boundary: each bad one raises
``ConfigError`` naming it before anything runs (no Ray, numpy or OS error); numpy values and
paths are taken as the command line's lists, numbers and strings; verdicts are plain values."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import privgames
from privgames.environments.config import ConfigError


@pytest.mark.parametrize("kw, message", [
    ({"workers": -1}, "workers=-1 is out of range"),
    ({"workers": 1.5}, "workers=1.5 is out of range"),
    ({"workers": True}, "workers=True is out of range"),
    ({"seed": -1}, "seed=-1 is out of range"),
    ({"seed": "a"}, "seed='a' is out of range"),
    ({"seed": True}, "seed=True is out of range"),
    ({"scale": "huge"}, "scale='huge' is not allowed"),
    ({"scale": None}, "scale=None is not allowed"),
    ({"out": "/proc/x"}, "out='/proc/x': the folder cannot be created"),
    ({"out": ""}, "out='' is empty"),
    ({"max_memory": "lots"}, "max_memory='lots' is not a size"),
    ({"max_memory": "1.2.3G"}, "max_memory='1.2.3G' is not a size"),
    ({"max_work": -3}, "max_work=-3.0 is out of range"),
])
def test_a_bad_argument_is_named(kw, message):
    with pytest.raises(ConfigError, match=message):
        privgames.run("bas-chain", **{"workers": 0, **kw})


def test_numpy_values_paths_and_a_size_string_are_taken(tmp_path):
    out = tmp_path / "r"
    result = privgames.run("bas-mse-vs-K", workers=0, out=pathlib.Path(out), max_memory="2G",
                           K=np.array([3, 5]), replications=np.int64(200))
    assert sorted(result.rows["K"].unique()) == [3, 5]
    assert (out / "bas-mse-vs-K.summary.json").exists()
    verdicts = result.claims()["verdict"]
    assert set(verdicts) <= {"holds", "bound", "fails"} and len(verdicts) > 0
