"""The results store: Parquet rows and JSON summaries, written atomically, queried with DuckDB."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_with(path: Path, write: Callable[[str], Any]) -> None:
    """Write ``path`` atomically with ``write(tmp)``: through a temporary file in the same
    folder, fsynced, given the permissions of any new file (``0666 & ~umask``; ``mkstemp``
    makes them private), then renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


#: The reason given for an infinity that its experiment does not explain.
UNEXPLAINED = "not explained by the experiment (Experiment.infinite)"
#: The Parquet schema metadata key holding the file's infinities and their reasons.
PARQUET_KEY = b"privgames.non_finite"


def reason_for(where: str, reasons: Mapping[str, str]) -> str:
    """Why ``where`` (a metric, a column, or a summary path such as ``table[2].eps_central``)
    holds an infinity: the reason declared for its innermost named part."""
    parts = [p for p in re.split(r"[.\[\]]", where) if p and not p.isdigit()]
    return next((reasons[p] for p in reversed(parts) if p in reasons), UNEXPLAINED)


def infinities(frame: pd.DataFrame, reasons: Mapping[str, str] | None = None) -> dict:
    """Where ``frame`` holds an infinity, by column (by metric in a tidy frame's ``value``):
    ``{where: {"count": n, "reason": why}}``. A missing number (NaN) is no infinity: Parquet
    stores it as null."""
    out: dict[str, dict[str, Any]] = {}
    for column in frame.select_dtypes("number"):
        infinite = np.isinf(frame[column].to_numpy(dtype=float))
        if not infinite.any():
            continue
        if column == "value" and "metric" in frame:
            counts = frame.loc[infinite, "metric"].value_counts(sort=False)
            found = {str(metric): int(n) for metric, n in counts.items()}
        else:
            found = {column: int(infinite.sum())}
        for where, n in found.items():
            out[where] = {"count": n, "reason": reason_for(where, reasons or {})}
    return out


def write_parquet(frame: pd.DataFrame, path: Path,
                  reasons: Mapping[str, str] | None = None,
                  metadata: Mapping[bytes, bytes] | None = None) -> None:
    """Write ``frame`` to ``path`` via a temporary file and an atomic rename; its infinities
    and why (``reasons``: name -> reason) go into the schema's metadata (:func:`infinities`,
    read back by :func:`parquet_infinities`), with ``metadata``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    found = infinities(frame, reasons)
    extra = {**({PARQUET_KEY: json.dumps(found).encode()} if found else {}),
             **(metadata or {})}
    if extra:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    write_with(path, lambda tmp: pq.write_table(table, tmp))


def content_digest(frame: pd.DataFrame) -> str:
    """A SHA-256 of ``frame``'s columns, dtypes and values as Parquet stores them (the frame
    through Arrow and back: an object column of missing values reads back as float), by
    pandas' per-row hashes: a frame and its Parquet file's rows give the same digest, one
    flipped bit another."""
    import pyarrow as pa

    frame = pa.Table.from_pandas(frame, preserve_index=False).to_pandas()
    digest = hashlib.sha256(json.dumps([[str(c), str(t)] for c, t in frame.dtypes.items()])
                            .encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def parquet_metadata(path: Path) -> dict[bytes, bytes]:
    """The schema metadata of the Parquet file at ``path``."""
    import pyarrow.parquet as pq

    return dict(pq.read_schema(path).metadata or {})


def parquet_infinities(path: Path) -> dict:
    """The infinities a Parquet file written by :func:`write_parquet` holds, with reasons."""
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[PARQUET_KEY]) if PARQUET_KEY in metadata else {}


def read_parquet(path: Path) -> pd.DataFrame:
    """Read a Parquet file written by :func:`write_parquet`."""
    return pd.read_parquet(path)


def to_json_value(value: Any) -> Any:
    """Plain JSON: numpy scalars and arrays become Python numbers and lists, NaN becomes null
    (infinities stay: Python's ``json`` writes and reads them as ``Infinity``)."""
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [to_json_value(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


#: Where a JSON file names the values it wrote as ``null`` because they were not finite.
NON_FINITE = "non_finite"


def json_text(data: dict, indent: int | None = 2,
              reasons: Mapping[str, str] | None = None) -> str:
    """Standard JSON (no ``Infinity``, which is not JSON): an infinite value is written as
    ``null``, and ``data["non_finite"]`` says which and why (``{"a.b": {"value": "inf",
    "reason": ...}}``, the reason declared for its innermost named part in ``reasons``; NaN is
    ``null`` already, the absence of a number). :func:`read_json` puts them back."""
    found: dict[str, dict[str, str]] = {}

    def finite(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {k: finite(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        if isinstance(value, list):
            return [finite(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, float) and math.isinf(value):
            found[path] = {"value": "inf" if value > 0 else "-inf",
                           "reason": reason_for(path, reasons or {})}
            return None
        return value

    plain = finite(to_json_value(data), "")
    if found:
        plain[NON_FINITE] = found
    return json.dumps(plain, indent=indent, allow_nan=False)


def read_json(path: Path) -> dict:
    """A JSON file written by :func:`write_json`, with its infinite values restored."""
    data = json.loads(Path(path).read_text())
    for where, entry in data.pop(NON_FINITE, {}).items():
        kind = entry["value"] if isinstance(entry, dict) else entry  # older files: the kind
        keys = where.replace("]", "").replace("[", ".").split(".")
        node = data
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        node[int(last) if isinstance(node, list) else last] = float(kind)
    return data


def write_json(data: dict, path: Path, reasons: Mapping[str, str] | None = None) -> None:
    """Write ``data`` as indented standard JSON (:func:`json_text`), atomically."""
    write_text(json_text(data, reasons=reasons) + "\n", path)


def write_text(text: str, path: Path) -> None:
    """Write ``text`` to ``path``, atomically."""
    write_with(path, lambda tmp: Path(tmp).write_text(text))


def regular_file(path: Path, folder: Path, max_bytes: float) -> bool:
    """Whether ``path`` is a regular file of at most ``max_bytes`` that lies in ``folder`` once
    its symlinks are followed: a results folder is untrusted input (a FIFO named ``x.png``
    would hang its reader, a symlink to ``/dev/zero`` fill its memory, one to ``/etc/passwd``
    show it)."""
    try:
        target = Path(path).resolve(strict=True)
        target.relative_to(Path(folder).resolve(strict=True))
        info = target.stat()
    except (OSError, ValueError, RuntimeError):  # gone, outside the folder, a symlink loop
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= max_bytes


def read_capped(path: Path, folder: Path, max_bytes: float) -> bytes | None:
    """The bytes of ``path`` if it is a :func:`regular_file` of ``folder`` (checked again on
    the open file, so that a file swapped in meanwhile is not read past ``max_bytes``), else
    ``None``."""
    if not regular_file(path, folder, max_bytes):
        return None
    try:
        fd = os.open(Path(path).resolve(), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(int(max_bytes) + 1)
    return data if len(data) <= max_bytes else None


#: The largest Parquet file a query reads (a results folder's rows are far below it).
MAX_PARQUET_BYTES = 2.0 * 2**30


def parquet_files(results_dir: Path) -> list[Path]:
    """The results folder's ``*.parquet`` files that are :func:`regular_file` s of it."""
    folder = Path(results_dir)
    if not folder.is_dir():
        return []
    return sorted(f for f in folder.glob("*.parquet")
                  if regular_file(f, folder, MAX_PARQUET_BYTES))


def query(results_dir: Path, sql: str, *, max_rows: int | None = None,
          max_columns: int | None = None, max_cells: int | None = None,
          timeout: float | None = None, memory: float | None = None) -> pd.DataFrame:
    """Run one read-only ``SELECT`` (or ``WITH ... SELECT``) over every ``*.parquet`` of a
    results folder (:func:`parquet_files`), exposed as the view ``results`` (its
    ``experiment`` and ``file`` columns name the experiment and the file a row came from) and
    as one view per experiment, named as it (``SELECT * FROM "bas-chain"``).

    The SQL may come from an untrusted page, so it runs on a connection that reaches nothing
    but those Parquet files: after the view is made, DuckDB's ``allowed_paths`` lists them
    alone, ``enable_external_access=false`` closes every other file and the network (no
    ``read_csv('/etc/passwd')``, ``glob``, ``ATTACH``, extension downloads), no spill folder,
    ``lock_configuration=true`` keeps it so; any statement but a single ``SELECT`` (``COPY``,
    ``CREATE``, a second statement) is refused before it runs. ``max_rows`` and
    ``max_columns`` keep the first rows and columns, and ``max_cells`` fewer rows where the
    columns kept need it (``frame.attrs["truncated"]`` says whether more rows were there,
    ``frame.attrs["columns"]`` how many columns the result has); after ``timeout``
    seconds the query is interrupted (where DuckDB checks: a page runs it under
    :func:`privgames.analysis.sandbox.run_limited`, which stops it anywhere); ``memory`` sets
    DuckDB's ``memory_limit`` and one thread.
    """
    import threading

    import duckdb

    from privgames.environments.config import ConfigError

    folder = Path(results_dir)
    files = [str(f.resolve()) for f in parquet_files(folder)]
    if not files:
        raise ConfigError(f"--out {folder}: no results there (a folder with NAME.parquet files "
                          "written by privgames run is needed)")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise ConfigError(f"query failed: {_first_line(err)}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(s.type.name for s in statements) or "none"
        raise ConfigError(f"query refused: give one SELECT statement (got {kinds}); the "
                          "results are read-only")
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    limits = {} if memory is None else {"memory_limit": f"{max(memory / 2**20, 1):.0f}MB",
                                        "threads": 1}
    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False, "threads": 2, **limits})
    timer = None if timeout is None else threading.Timer(timeout, con.interrupt)
    try:
        con.execute("CREATE VIEW results AS SELECT regexp_extract(file, '([^/]+)[.]parquet$', "
                    "1) AS experiment, * FROM "
                    f"read_parquet([{quoted}], filename = 'file', union_by_name = true)")
        for path in files:  # one view per experiment, named as it (``"bas-chain"``)
            name = Path(path).stem.replace('"', '""')
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet(\''
                        + path.replace("'", "''") + "')")
        for setting in (f"allowed_paths = [{quoted}]", "temp_directory = ''",
                        "enable_external_access = false", "lock_configuration = true"):
            con.execute(f"SET {setting}")
        if timer is not None:
            timer.start()
        relation = con.sql(sql)
        columns = len(relation.columns)
        if max_columns is not None and columns > max_columns:
            relation = relation.project(", ".join('"' + c.replace('"', '""') + '"'
                                                  for c in relation.columns[:max_columns]))
        if max_cells is not None:
            fit = max(1, max_cells // len(relation.columns))
            max_rows = fit if max_rows is None else min(max_rows, fit)
        frame = (relation if max_rows is None else relation.limit(max_rows + 1)).df()
    except duckdb.InterruptException:
        raise ConfigError(f"query failed: stopped after {timeout:g} s") from None
    except duckdb.Error as err:
        raise ConfigError(f"query failed: {_first_line(err)}") from None
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
    truncated = max_rows is not None and len(frame) > max_rows
    frame = frame.head(max_rows) if truncated else frame
    frame.attrs["truncated"], frame.attrs["columns"] = truncated, columns
    return frame


@dataclass(frozen=True)
class QueryTable:
    """A query's result as a page shows it: at most a page's cells, each as text.

    Attributes:
        header, rows: the column names and the rows' cells, as strings.
        note: what was left out (``""``: nothing).
    """

    header: list[str]
    rows: list[list[str]]
    note: str


def query_table(results_dir: Path, sql: str, max_rows: int, max_columns: int, max_cells: int,
                max_chars: int, memory: float) -> QueryTable:
    """:func:`query`'s result cut to at most ``max_rows`` rows, ``max_columns`` columns and
    ``max_cells`` cells (the columns first), each cell's text to ``max_chars`` characters."""
    frame = query(results_dir, sql, max_rows=max_rows, max_columns=max_columns,
                  max_cells=max_cells, memory=memory)

    def text(value: Any) -> str:
        value = "" if value is None or (isinstance(value, float) and math.isnan(value)) \
            else str(value)
        return value if len(value) <= max_chars else value[:max_chars - 1] + "…"

    left, columns = [], frame.attrs["columns"]
    if frame.attrs["truncated"]:
        left.append(f"the first {len(frame)} rows")
    if columns > frame.shape[1]:
        left.append(f"the first {frame.shape[1]} of {columns} columns")
    return QueryTable([text(c) for c in frame.columns],
                      [[text(v) for v in row] for row in frame.astype(object).itertuples(
                          index=False, name=None)],
                      f"{' and '.join(left)} are shown" if left else "")


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
