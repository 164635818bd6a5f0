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


def _modules(path: pathlib.Path) -> set[str]:
    """The ``privgames`` modules a module imports, wherever the import stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        found |= {name for name in names if name.startswith("privgames.")}
    return found


def _privgames_imports(path: pathlib.Path) -> set[str]:
    """The ``privgames.X`` layers a module imports."""
    return {name.split(".")[1] for name in _modules(path)}


@pytest.mark.parametrize("layer", ORDER)
def test_imports_point_down_only(layer):
    above = set(ORDER[ORDER.index(layer) + 1:])
    offenders = {str(p.relative_to(ROOT)): sorted(_privgames_imports(p) & above)
                 for p in (ROOT / layer).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from privgames.environments.config import Footprint\n")
    assert _privgames_imports(bad) == {"environments"}


def test_a_game_lives_in_one_package():
    """Issue 33: the shared modules of ``analysis/`` reach no game (no game package, no game's
    environment or mechanism), and no game's package reaches another game's."""
    from privgames.analysis.experiments import GAMES

    machinery = {"privgames.environments.config", "privgames.environments.streams",
                 "privgames.environments.ray_session", "privgames.environments.progress"}
    shared = {p.name: sorted(m for m in _modules(p) if m.startswith(
        ("privgames.environments", "privgames.mechanisms")) and m not in machinery
        or m.split(".")[2:3] and m.split(".")[2] in GAMES)
        for p in (ROOT / "analysis").glob("*.py")}
    assert {k: v for k, v in shared.items() if v} == {}
    for game in GAMES:
        others = {f"privgames.analysis.{g}" for g in GAMES} - {f"privgames.analysis.{game}"}
        crossing = {p.name: sorted(m for m in _modules(p) if ".".join(m.split(".")[:3]) in others)
                    for p in (ROOT / "analysis" / game).glob("*.py")}
        assert {k: v for k, v in crossing.items() if v} == {}, game
        assert {p.stem for p in (ROOT / "analysis" / game).glob("*.py")} == {
            "__init__", "experiments", "figures", "page"}


@pytest.mark.parametrize("call", [
    lambda: gaussian.analytic_epsilon(1.0, 2.0, 1.0),
    lambda: sar.failure_probability(2, 0.1, "weak"),
    lambda: make_learner("nope"),
])
def test_bad_input_raises_config_error_in_every_layer(call):
    with pytest.raises(ConfigError):
        call()
    assert issubclass(ConfigError, ValueError)
