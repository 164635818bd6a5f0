"""What the benchmark scripts share: a stopwatch and the ``--quick`` command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn()`` takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def arguments(doc: str, *flags: tuple[str, str],
              options: tuple[tuple[str, str], ...] = ()) -> argparse.Namespace:
    """``--quick`` (a smoke run), any ``(flag, help)`` switches and ``(option, help)`` options
    taking a path, described by ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the test suite")
    for flag, text in flags:
        parser.add_argument(flag, action="store_true", help=text)
    for option, text in options:
        parser.add_argument(option, type=Path, metavar="PATH", help=text)
    return parser.parse_args()
