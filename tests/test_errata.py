"""Every row of ``docs/errata.md`` names a test that exists (and, as each row's test was
written, fails when the printed formula, constant or reading is put back; the mutation guard
puts several of them back: ``tests/mutation/mutants.toml``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tests() -> dict[str, set[str]]:
    """Each test function's name, with the files that define it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.setdefault(node.name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def _rows() -> list[tuple[str, str]]:
    """``(where, test cell)`` of every table row."""
    rows = []
    for line in (ROOT / "docs" / "errata.md").read_text().splitlines():
        if line.startswith("| ") and not line.startswith(("| where", "|---")):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            assert len(cells) == 5, line[:80]
            rows.append((cells[0], cells[-1]))
    return rows


TESTS = _tests()
ROWS = _rows()


def cited(cell: str) -> list[tuple[str | None, str]]:
    """``(file or None, test name)`` of every test a cell names."""
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"(?:(tests/[\w/]+\.py)::)?(?<![\w/])(test_\w+)\b(?!\.py)", cell)]


def test_the_table_is_read():
    assert len(ROWS) >= 60


@pytest.mark.parametrize("where,cell", ROWS, ids=[w[:40] for w, _ in ROWS])
def test_every_erratum_names_a_test_that_exists(where, cell):
    names = cited(cell)
    assert names, f"{where}: no test named"
    for path, name in names:
        assert name in TESTS, f"{where}: {name} does not exist"
        if path is not None:
            assert path in TESTS[name], f"{where}: {name} is not in {path}"


def test_the_checker_catches_a_missing_test():
    assert cited("`tests/a.py::test_nothing_here`, `eon_closed`, `tests/test_b.py`") == [
        ("tests/a.py", "test_nothing_here")]
    assert "test_nothing_here" not in TESTS
