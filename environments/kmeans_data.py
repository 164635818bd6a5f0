"""Point sets for DP k-means (``papers/budget-allocation-series.txt``, section 7.2.1), scaled to
``[-1, 1]^d`` (sensitivity normalisation).

``unbalance`` is the real benchmark set, shipped with privgames. "Birch3" (Franti & Sieranoja)
has no published labels and is not redistributed with them, so ``birch3`` is made with its
structure from a fixed seed (every run sees the same points). Any CSV of points can be given.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from privgames.environments.config import ConfigError
from privgames.environments.streams import child, generator
from privgames.mechanisms.dp_kmeans import Points, prepare

BUILT_IN = ("unbalance", "birch3")
#: The clusters to find and the total budget the paper uses on each set (section 7.2).
#: The generated Birch3 is made from this fixed seed (the same points in every run).
DATA_SEED = 20211208
DEFAULTS = {"unbalance": {"k": 8, "epsilon": 0.3}, "birch3": {"k": 20, "epsilon": 0.5}}


def scale(points: NDArray) -> NDArray:
    """Each coordinate mapped linearly onto ``[-1, 1]`` (a constant one to 0)."""
    low, high = points.min(axis=0), points.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return np.where(high > low, 2.0 * (points - low) / span - 1.0, 0.0)


def unbalance() -> tuple[NDArray, NDArray]:
    """The real "Unbalance" set (Rezaei & Fränti, IEEE TKDE 28(8), 2016), shipped with the
    package (``environments/data/unbalance.csv``, provenance in the README beside it): 6,500
    2-D points in 8 labelled clusters, three of 2,000 points and five of 100."""
    return _csv(str(files("privgames.environments").joinpath("data", "unbalance.csv")))


@lru_cache(maxsize=4)
def birch3() -> tuple[NDArray, None]:
    """Like "Birch3": 100,000 unlabelled 2-D points in 100 Gaussian blobs of random sizes,
    positions and spreads (clustered with k = 20, so the clusters are not explicit)."""
    rng = generator(child(DATA_SEED, 2))
    blobs = 100
    sizes = rng.multinomial(100_000, rng.dirichlet(np.full(blobs, 2.0)))
    centres = rng.uniform(-0.9, 0.9, (blobs, 2))
    spread = rng.uniform(0.01, 0.08, blobs)
    which = np.repeat(np.arange(blobs), sizes)
    points = centres[which] + spread[which, None] * rng.standard_normal((which.size, 2))
    return scale(points), None


def check_data(data: object) -> str:
    """``data`` names a built-in set or a file (a non-empty string)."""
    if not isinstance(data, str) or not data:
        raise ConfigError(f"data={data!r} is not allowed: data must be one of "
                          f"{', '.join(BUILT_IN)} or the path of a CSV file")
    return data


def load_points(data: str) -> tuple[NDArray, NDArray | None]:
    """A built-in set by name, or a CSV file of points: numeric columns with a header; a
    column named ``label`` (integers) makes the set labelled (scored by F1)."""
    if data in BUILT_IN:
        return unbalance() if data == "unbalance" else birch3()
    return _csv(str(Path(data).expanduser().resolve()), data)


@lru_cache(maxsize=4)
def assignment_points(data: str) -> Points:
    """``data``'s points prepared for DP k-means' assignment step (a k-d tree in low
    dimension), built once per process."""
    return prepare(load_points(data)[0])


@lru_cache(maxsize=4)
def _csv(path: str, given: str | None = None) -> tuple[NDArray, NDArray | None]:
    """The points of the CSV file at ``path``; a message names it as ``given`` (the path the
    user gave, not where it resolves)."""
    where = f"data={given or path!r}"
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ConfigError(f"{where} is not a readable CSV of points ({type(err).__name__}): "
                          f"data must be one of {', '.join(BUILT_IN)} or a CSV file with a "
                          "header and numeric columns") from None
    labels = None
    if "label" in frame.columns:
        raw = frame.pop("label")
        if not pd.api.types.is_integer_dtype(raw) or (raw < 0).any():
            raise ConfigError(f"{where}: the label column must hold integers >= 0")
        labels = pd.factorize(raw, sort=True)[0]
    if frame.shape[1] == 0 or len(frame) < 2:
        raise ConfigError(f"{where} has {len(frame)} rows and {frame.shape[1]} coordinate "
                          "columns: it needs at least 2 points with at least 1 coordinate")
    values = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ConfigError(f"{where}: row {row + 2}, column {frame.columns[col]!r} is not a "
                          "finite number: every coordinate must be one")
    return scale(values), labels
