"""``privgames show`` and ``run NAME --help``: the parameters as the validators accept them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from privgames.analysis import experiments
from privgames.analysis.cli import main
from privgames.analysis.parameters import describe, meanings
from privgames.environments.config import ConfigError
from privgames.environments.pricing_fl import PricingConfig

EXPERIMENTS = list(experiments.catalogue())


def _row(out: str, name: str) -> str:
    rows = [line for line in out.splitlines() if line.split()[:1] == [name]]
    assert rows, f"no row for {name}"
    return rows[0]


def test_show_pricing_fl_lists_every_parameter_with_its_range(capsys):
    assert main(["show", "pricing-fl"]) == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(PricingConfig):
        assert _row(out, f.name)
    assert "a number > 0.0" in _row(out, "kappa")
    assert "in [0.0, 1.0]" in _row(out, "alpha_mean")
    assert "an integer >= 2" in _row(out, "N")
    assert "one of mle, mean" in _row(out, "aggregation")
    assert "true or false" in _row(out, "pricing")
    assert "N: 10 -> 100" in out  # the quick and the paper scale


def test_run_help_prints_the_options_then_the_parameters(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "bas-chain", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--workers" in out and "beta_max" in out and "one of best_response, damped" in out


def test_show_of_an_unknown_experiment_is_a_one_line_error(capsys):
    assert main(["show", "no-such"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_parameter_has_a_meaning_and_the_range_is_what_set_accepts(name):
    """The range shown is the validator's: a value just past each end is refused by ``--set``
    (naming the parameter), and the ends that are allowed are accepted."""
    experiment = experiments.get(name)
    for p in describe(experiment):
        assert p.meaning, f"{name}: {p.name} has no meaning in the config's docstring"
        a = p.allowed
        if a is None or a.kind not in ("int", "real") or p.swept:
            continue
        step = 1 if a.kind == "int" else 1e-9 * max(1.0, abs(a.low or 0), abs(a.high or 0))
        for end, outside in ((a.low, -step), (a.high, step)):
            if end is None:
                continue
            value = int(end) + outside if a.kind == "int" else end + outside
            with pytest.raises(ConfigError) as err:
                experiment.resolve({p.name: value})
            assert err.value.parameter.split("[")[0] == p.name
            at_end = int(end) if a.kind == "int" else end
            if a.low_open if outside < 0 else a.high_open:  # an open end is refused itself
                with pytest.raises(ConfigError) as err:
                    experiment.resolve({p.name: at_end})
                assert err.value.parameter.split("[")[0] == p.name
            elif math.isfinite(end):
                try:
                    experiment.resolve({p.name: at_end})
                except ConfigError as refused:  # another parameter's constraint, not this range
                    assert refused.parameter != p.name, str(refused)


def test_meanings_read_grouped_and_inline_entries():
    @dataclasses.dataclass
    class Config:
        """Attributes:
            a, b: the two ends (a < b). c: a count; ``d``: a flag (one of x, y).
            e: a long entry whose continuation line begins with a word and a colon, as
                round: still e's.
        """

        a: int = 0
        b: int = 1
        c: int = 2
        d: str = "x"
        e: int = 3

    assert meanings(Config) == {"a": "the two ends (a < b)", "b": "the two ends (a < b)",
                                "c": "a count", "d": "a flag (one of x, y)",
                                "e": "a long entry whose continuation line begins with a word "
                                     "and a colon, as round: still e's"}


def test_show_states_the_claims_with_the_verdicts_of_a_run(tmp_path, capsys):
    assert main(["run", "budget-us-bounds", "--workers", "0", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["show", "budget-us-bounds", "--out", str(tmp_path)]) == 0
    claims = capsys.readouterr().out.split("claims judged:")[1].strip().splitlines()
    assert claims and all(line.strip().startswith(("[holds]", "[bound]", "[fails]"))
                          for line in claims)
    assert main(["show", "budget-us-bounds", "--out", str(tmp_path / "empty")]) == 0
    assert "privgames run budget-us-bounds" in capsys.readouterr().out


def test_viz_refuses_a_port_in_use_and_an_unknown_page_on_one_line(capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["viz", "--port", str(port)]) == 2
    assert f"--port {port}: 127.0.0.1:{port} cannot be used" in capsys.readouterr().err
    assert main(["viz", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pages are bas, sar, ppsp" in err
