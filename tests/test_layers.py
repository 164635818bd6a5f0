"""The layers point one way down (DESIGN.md): mechanisms < agents < environments < analysis, and
bad input raises one error type everywhere."""

import ast
import pathlib

import pytest

import privgames.mechanisms.gaussian as gaussian
import privgames.mechanisms.sar as sar
from privgames.agents.learners import make_learner
from privgames.environments.config import ConfigError

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORDER = ["mechanisms", "agents", "environments", "analysis"]


def _privgames_imports(path: pathlib.Path) -> set[str]:
    """The ``privgames.X`` layers a module imports, wherever the import stands."""
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "privgames" and len(parts) > 1:
                layers.add(parts[1])
    return layers


@pytest.mark.parametrize("layer", ORDER)
def test_imports_point_down_only(layer):
    above = set(ORDER[ORDER.index(layer) + 1:])
    offenders = {str(p.relative_to(ROOT)): sorted(_privgames_imports(p) & above)
                 for p in (ROOT / layer).glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from privgames.environments.config import Footprint\n")
    assert _privgames_imports(bad) == {"environments"}


@pytest.mark.parametrize("call", [
    lambda: gaussian.analytic_epsilon(1.0, 2.0, 1.0),
    lambda: sar.failure_probability(2, 0.1, "weak"),
    lambda: make_learner("nope"),
])
def test_bad_input_raises_config_error_in_every_layer(call):
    with pytest.raises(ConfigError):
        call()
    assert issubclass(ConfigError, ValueError)
