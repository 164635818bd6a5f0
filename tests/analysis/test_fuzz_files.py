"""Issue 44, part 4: the neighbours of every input a run reads. Each file format privgames reads
(a CSV of points, a text or ``.npy`` file of budgets, an MNIST ``.npz`` and its IDX files,
a finished run's Parquet, a summary) is given empty, truncated, bit-flipped and random-byte
versions of a valid file, and valid files of the wrong shape or with values at the ends of the
float range; ``--set`` values are nested to every depth and set near the float range. The
answer is exit 0 with results or exit 2 with one line, within a time limit, and a finished
result is never replaced by a damaged one."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privgames.analysis import experiments
from tests.analysis.test_fuzz import NAMES, answer

#: Each case runs an experiment (about 45 s in all): not in the fast selection.
pytestmark = pytest.mark.slow

TINY = ["--workers", "0", "--max-work", "1e11", "--max-memory", "2G"]
#: One population, and three rounds where a run has rounds.
SHORT = {name: ["--set", "populations=1", *(["--set", "rounds=3"] if name != "dp-kmeans" else [])]
         for name in ("dp-kmeans", "apes", "pricing-training")}
#: Finite numbers at the ends of the float range, and the smallest ones.
EDGES = [1.7976931348623157e308, -1.7976931348623157e308, 1e308, 5e-324, -5e-324,
         2.2250738585072014e-308, 1e-308, 9.9e307]


def damaged(valid: bytes, data: st.DataObject) -> bytes:
    """An empty, truncated, bit-flipped or random version of ``valid``."""
    how = data.draw(st.sampled_from(["empty", "truncated", "flipped", "random"]))
    if how == "empty":
        return b""
    if how == "truncated":
        return valid[:data.draw(st.integers(1, len(valid) - 1))]
    if how == "flipped":
        at = data.draw(st.integers(0, 8 * len(valid) - 1))
        out = bytearray(valid)
        out[at // 8] ^= 1 << (at % 8)
        return bytes(out)
    return data.draw(st.binary(min_size=1, max_size=400))


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=array.dtype == object)
    return buffer.getvalue()


def npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


POINTS = b"x,y,label\n" + b"".join(f"{i % 7}.5,{i * 0.3:.2f},{i % 3}\n".encode()
                                  for i in range(40))
BUDGETS = np.linspace(0.5, 3.0, 500)
rng = np.random.default_rng(0)
IMAGES, LABELS = rng.integers(0, 256, (60, 8, 8)), rng.integers(0, 10, 60)
#: (experiment, parameter, file suffix, a valid file, valid files of the wrong shape or with
#: extreme values)
FORMATS = [
    ("dp-kmeans", "data", ".csv", POINTS, [
        b"x,y\n", b"x\n1\n", b"x,y\n1e308,-1.7976931348623157e308\n5e-324,nan\ninf,1\n",
        b"x,label\n1,0.5\n2,-1\n3,2\n", b'x,y\n"a",1\n"b",2\n', b"\n\n\n", b"label\n1\n2\n",
        b"x," * 3000 + b"\n" + b"1," * 3000 + b"\n"]),
    ("apes", "budgets", ".npy", npy(BUDGETS), [
        npy(BUDGETS.reshape(20, 25)), npy(np.float64(1.0)), npy(np.array(["a"] * 500)),
        npy(BUDGETS.astype(complex)), npy(np.full(500, 1.7976931348623157e308)),
        npy(np.full(500, 5e-324)), npy(np.full(500, np.nan)), npy(np.array([{}] * 500)),
        npy(BUDGETS[:499]), npy(np.zeros(0))]),
    ("apes", "budgets", ".txt", "\n".join(map(str, BUDGETS)).encode(), [
        b"1e308 " * 500, b"5e-324\n" * 500, b"nan\n" * 500, b"-1\n" * 500, b"1 2\n3\n",
        b"abc\n" * 500]),
    ("pricing-training", "data", ".npz", npz(x_train=IMAGES, y_train=LABELS), [
        npz(x_train=IMAGES), npz(x_train=IMAGES, y_train=LABELS[:10]),
        npz(x_train=IMAGES.reshape(-1), y_train=LABELS),
        npz(x_train=IMAGES, y_train=LABELS + 300), npz(x_train=IMAGES, y_train=-LABELS - 1),
        npz(x_train=np.full(IMAGES.shape, 1e308), y_train=LABELS),
        npz(x_train=IMAGES[:0], y_train=LABELS[:0]), npz(y_train=LABELS),
        npz(x_train=np.full(IMAGES.shape, np.inf), y_train=LABELS)]),
]


def run_with(name: str, key: str, suffix: str, content: bytes, tmp_path, capsys) -> None:
    path = tmp_path / f"input{suffix}"
    path.write_bytes(content)
    answer(["run", name, "--set", f"{key}={json.dumps(str(path))}", *SHORT[name], *TINY, "--out",
            str(tmp_path / "out")], capsys)


@pytest.mark.parametrize("name, key, suffix, valid, shapes", FORMATS,
                         ids=[f"{f[0]}-{f[1]}{f[2]}" for f in FORMATS])
def test_valid_files_of_the_wrong_shape_or_at_the_float_range(name, key, suffix, valid, shapes,
                                                              tmp_path, capsys):
    run_with(name, key, suffix, valid, tmp_path, capsys)  # the valid one runs
    for content in shapes:
        run_with(name, key, suffix, content, tmp_path, capsys)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_files_of_every_format(data, tmp_path, capsys):
    name, key, suffix, valid, _ = FORMATS[data.draw(st.integers(0, len(FORMATS) - 1))]
    run_with(name, key, suffix, damaged(valid, data), tmp_path, capsys)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_idx_files_of_an_mnist_folder(data, tmp_path, capsys):
    """A folder of the four IDX files, gzipped or not, one of them damaged."""
    folder = tmp_path / "mnist"
    folder.mkdir(exist_ok=True)
    files = {"train-images-idx3-ubyte": idx(IMAGES), "train-labels-idx1-ubyte": idx(LABELS)}
    victim = data.draw(st.sampled_from(sorted(files)))
    files[victim] = damaged(files[victim], data)
    zipped = data.draw(st.booleans())
    for old in folder.iterdir():
        old.unlink()
    for file, content in files.items():
        if zipped:
            (folder / f"{file}.gz").write_bytes(
                damaged(gzip.compress(content), data) if file == victim and data.draw(
                    st.booleans()) else gzip.compress(content))
        else:
            (folder / file).write_bytes(content)
    answer(["run", "pricing-training", "--set", f"data={json.dumps(str(folder))}",
            *SHORT["pricing-training"],
            *TINY, "--out", str(tmp_path / "out")], capsys)


REAL_PARAMETERS = [(name, key) for name in NAMES
                   for key, default in experiments.get(name).resolve({}).items()
                   if isinstance(default, float)]


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(REAL_PARAMETERS), value=st.sampled_from(EDGES))
def test_real_parameters_near_the_float_range(case, value, tmp_path, capsys):
    """A finite value at the end of the float range (or its smallest) where a real number
    goes: a solver that stops converging, an overflow or an underflow is one line."""
    name, key = case
    answer(["run", name, "--set", f"{key}={value!r}", "--set", "populations=1", *TINY,
            "--max-work", "1e8", "--out", str(tmp_path / "out")], capsys)


@pytest.mark.parametrize("depth", [10, 100, 1000, 10_000, 100_000])
@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}"), ('[{"a":', "}]")])
def test_set_values_nested_to_any_depth(depth, opening, closing, tmp_path, capsys):
    """Nested lists, objects and both, balanced or cut short: one line, never a
    RecursionError."""
    for text in (opening * depth + "1" + closing * depth, opening * depth):
        answer(["run", "bas-chain", "--set", f"K={text}", *TINY, "--out", str(tmp_path)],
               capsys)


@pytest.mark.parametrize("content", [
    b"", b"PAR1", b"PAR1" + bytes(100) + b"PAR1", b"not parquet at all", b"\x00" * 4096])
def test_a_damaged_finished_result_is_run_again_not_trusted(content, tmp_path, capsys):
    """``reproduce`` keeps a finished experiment only when its file matches its key and rows:
    an empty, truncated or foreign ``NAME.parquet`` is run again and replaced."""
    from privgames.analysis import api

    out = tmp_path / "out"
    first = api.run("bas-chain", seed=1, workers=0, out=out)
    (out / "bas-chain.parquet").write_bytes(content)
    again = api.run("bas-chain", seed=1, workers=0, out=out, keep_finished=True)
    assert again.rows.equals(first.rows)
    kept = api.run("bas-chain", seed=1, workers=0, out=out, keep_finished=True)
    assert kept.rows.equals(first.rows)


@pytest.mark.parametrize("identity", [b"[]", b"null", b"42", b'"x"', b"{bad", b'{"key": []}',
                                      b"[" * 20000])
def test_a_finished_result_whose_identity_has_another_shape_is_run_again(identity, tmp_path):
    import pyarrow.parquet as pq

    from privgames.analysis import api

    out = tmp_path / "out"
    first = api.run("bas-chain", seed=1, workers=0, out=out)
    table = pq.read_table(out / "bas-chain.parquet")
    pq.write_table(table.replace_schema_metadata(
        {**table.schema.metadata, api.RUN_KEY: identity}), out / "bas-chain.parquet")
    again = api.run("bas-chain", seed=1, workers=0, out=out, keep_finished=True)
    assert again.rows.equals(first.rows)
    assert json.loads(pq.read_schema(out / "bas-chain.parquet").metadata[api.RUN_KEY])["key"]
