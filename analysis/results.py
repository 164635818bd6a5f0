"""The results store: Parquet rows and JSON summaries, written atomically, queried with DuckDB."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, write) -> None:
    """Write through a temporary file in the same folder, fsync it, give it the permissions of
    any new file (``0666 & ~umask``; ``mkstemp`` makes them private), then rename it."""
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


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` via a temporary file and an atomic rename."""
    _atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


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


def write_json(data: dict, path: Path) -> None:
    """Write ``data`` as indented JSON, atomically."""
    write_text(json.dumps(to_json_value(data), indent=2, sort_keys=False) + "\n", path)


def write_text(text: str, path: Path) -> None:
    """Write ``text`` to ``path``, atomically."""
    _atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def query(results_dir: Path, sql: str) -> pd.DataFrame:
    """Run SQL over every ``*.parquet`` of a results folder, exposed as the view ``results``.

    The view has a ``file`` column naming the experiment the row came from.
    """
    import duckdb

    from privgames.environments.config import ConfigError

    folder = Path(results_dir)
    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        raise ConfigError(f"--out {folder}: no results there (a folder with NAME.parquet files "
                          "written by privgames run is needed)")
    pattern = str(folder / "*.parquet").replace("'", "''")
    con = duckdb.connect()
    try:
        con.execute("CREATE VIEW results AS SELECT * FROM "
                    f"read_parquet('{pattern}', filename = 'file', union_by_name = true)")
        return con.execute(sql).df()
    except duckdb.Error as err:
        first = str(err).strip().splitlines()[0]
        raise ConfigError(f"query failed: {first}") from None
    finally:
        con.close()
