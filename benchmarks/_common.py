"""What the benchmark scripts share: a stopwatch and the ``--quick`` command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn()`` takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def arguments(doc: str, *flags: tuple[str, str]) -> argparse.Namespace:
    """``--quick`` (a smoke run) and any ``(flag, help)`` switches, described by ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the test suite")
    for flag, text in flags:
        parser.add_argument(flag, action="store_true", help=text)
    return parser.parse_args()
