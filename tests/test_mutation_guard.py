"""The mutation guard (``tests/mutation``): every curated mutant is killed by the tests named
with it. The list's integrity is checked fast; the mutants themselves run in the slow test."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.mutation import guard

MUTANTS = guard.load()


def test_the_list_is_large_and_each_mutant_applies_once(tmp_path):
    assert len(MUTANTS) >= 40 and len({m.id for m in MUTANTS}) == len(MUTANTS)
    package = guard.copy_package(tmp_path)
    for mutant in MUTANTS:
        source = (package / guard.LAYOUT[mutant.file.split("/")[0]]
                  / mutant.file.split("/", 1)[1]).read_text()
        assert source.count(mutant.old) == 1, mutant.id
        assert mutant.new != mutant.old and mutant.why, mutant.id


def test_every_named_test_exists():
    for mutant in MUTANTS:
        assert mutant.tests, mutant.id
        for node in mutant.tests:
            path, _, name = node.partition("::")
            assert (guard.ROOT / path).is_file(), (mutant.id, path)
            if name:
                defined = {n.name for n in ast.walk(ast.parse((guard.ROOT / path).read_text()))
                           if isinstance(n, ast.FunctionDef)}
                assert name.split("[")[0] in defined, (mutant.id, name)


def test_the_copy_is_what_the_tests_import():
    with tempfile.TemporaryDirectory() as tmp:
        package = guard.copy_package(Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(package)}
        where = subprocess.run([sys.executable, "-c", "import privgames.mechanisms.chain as c;"
                                " print(c.__file__)"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
    assert where.startswith(tmp)


@pytest.mark.slow
def test_every_mutant_is_killed_and_the_unmutated_copy_passes():
    """The named tests pass on an unmutated copy (so a kill is the mutant's doing), then each
    mutant makes at least one of them fail (pytest exit 1, not a collection error)."""
    done = subprocess.run([sys.executable, str(guard.ROOT / "tests/mutation/guard.py"), "--json"],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    print(report["score"])
    assert report["unmutated"] == 0
    assert [r["id"] for r in report["results"] if not r["killed"]] == []
