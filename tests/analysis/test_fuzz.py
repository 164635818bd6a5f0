"""Malformed and extreme input never gets a traceback, a hang or an OOM: every experiment's
every parameter and every CLI option is thrown random values (types, NaN, +-inf, huge,
negative, empty, nested, unknown and repeated keys); the answer is exit 0 with valid output or
exit 2 with one line, within a time limit. The budgets (--max-memory, --max-work) turn runs
that would be huge into one-line refusals."""

from __future__ import annotations

import json
import re
import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import privgames
from privgames.analysis import experiments
from privgames.analysis.cli import main, parse_set
from privgames.analysis.results import UNEXPLAINED
from privgames.environments.config import ConfigError

TIME_LIMIT = 60
BUDGETS = ["--max-work", "1e6", "--max-memory", "2G", "--workers", "0"]

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**15, 10**15),
    st.sampled_from([0, 1, 2, 3, -1, 10**9, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.lists(st.integers(-3, 5), max_size=3), st.lists(st.lists(st.integers(0, 2), max_size=2),
                                                       max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(-2, 2), max_size=2))


@contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def answer(args: list[str], capsys) -> None:
    with time_limit(TIME_LIMIT):
        rc = main(args)
    out = capsys.readouterr()
    assert rc in (0, 2), (args, rc, out.err[-2000:])
    if rc == 2:
        lines = out.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("privgames: error:"), (args, out.err)


NAMES = privgames.experiments()


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_parameter_values(data, tmp_path, capsys):
    name = data.draw(st.sampled_from(NAMES))
    known = sorted(experiments.get(name).parameters())
    sets = []
    for _ in range(data.draw(st.integers(1, 3))):  # repeated keys: the last one counts
        key = data.draw(st.one_of(st.sampled_from(known),
                                  st.text(alphabet="abcKNxyz_", min_size=1, max_size=6)))
        sets += ["--set", f"{key}={json.dumps(data.draw(VALUES))}"]
    answer(["run", name, *sets, *BUDGETS, "--out", str(tmp_path / "out")], capsys)


OPTION_VALUES = st.one_of(st.sampled_from(["-1", "0", "1", "nan", "inf", "1e300", "", "x",
                                           "2G", "-5M", "[1]", "99999999999999999999"]),
                          st.text(max_size=4))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--seed", "--workers", "--replications", "--max-memory",
                               "--max-work", "--scale", "--set", "--address"]),
       value=OPTION_VALUES, name=st.sampled_from(["ppsp-tradeoff", "nope", "pricing-fl"]))
def test_random_cli_options(option, value, name, tmp_path, capsys):
    if option == "--address" and value:
        value = "ray://" + value  # a real address would try to connect
    args = ["run", name, option, value, "--out", str(tmp_path / "o"), "--max-work", "1e6"]
    if option != "--workers":
        args += ["--workers", "0"]
    if option == "--replications" and name == "ppsp-tradeoff":
        args[1] = "ppsp-ring"
    answer(args, capsys)


EVERY_PARAMETER = [(name, key) for name in NAMES
                   for key in sorted(experiments.get(name).parameters())]


@pytest.mark.parametrize("name,key", EVERY_PARAMETER)
def test_every_parameter_of_every_experiment(name, key, tmp_path, capsys):
    """Deterministic coverage: a nested list with a null, then NaN, for every parameter."""
    for raw in ("[[null]]", "NaN"):
        answer(["run", name, "--set", f"{key}={raw}", *BUDGETS, "--out", str(tmp_path)],
               capsys)


@pytest.mark.parametrize("args", [
    ["reproduce", "--max-work", "1", "--workers", "0"],
    ["reproduce", "--seed", "-1"],
    ["reproduce", "--max-memory", "1K", "--workers", "0"],
    ["query", "select * from nowhere"],
    ["query", ";;;"],
    ["query", "select 1", "--out", "/proc/nothing"],
])
def test_reproduce_and_query(args, tmp_path, capsys):
    if "--out" not in args:
        args = [*args, "--out", str(tmp_path / "r")]
    answer(args, capsys)


@pytest.mark.parametrize("sets", [
    ["K=1000000000"], ["d=1000000000"], ["populations=1000000000"],
    ["replications=1000000000000"],
])
def test_the_reported_size_inputs_are_refused(sets, tmp_path, capsys):
    args = ["run", "bas-chain"]
    for s in sets:
        args += ["--set", s]
    answer([*args, "--workers", "0", "--out", str(tmp_path)], capsys)


def test_every_experiment_gets_malformed_input():
    """Order-independent: the deterministic cases alone run every experiment with malformed
    values of every parameter; the module tries this many command lines in all."""
    assert {name for name, _ in EVERY_PARAMETER} == set(NAMES)
    for name in NAMES:
        assert {key for n, key in EVERY_PARAMETER if n == name} == set(
            experiments.get(name).parameters())
    lines = 120 + 60 + 2 * len(EVERY_PARAMETER) + 6 + 4 + 9 + 1 + 1 + 5 + 1
    print(f"fuzz: {lines} command lines")


@pytest.mark.parametrize("args", [
    ["run", "pricing-fl", "--set", "N=3", "--set", "alpha=[0,0,0]"],
    ["run", "pricing-fl", "--set", "N=2", "--set", "alpha=[1,1]"],
    ["run", "learning-dynamics", "--set", 'grid=["a","b"]'],
    ["run", "apes", "--set", "backend=ray", "--set", "rounds=2"],
    ["query", ""],
    ["run", "budget-analysts", "--set", "rounds=1000000000"],
    ["run", "bas-mse-vs-K", "--set", "K=[5,5]"],  # two populations pooled under one key
    ["run", "learning-dynamics", "--set", "game=pricing", "--set", "grid=[1]"],
    ["run", "pricing-fl", "--set", "information=incomplete", "--set", "N=2", "--set",
     "alpha=[0.3,0.6]"],  # alpha would be ignored
])
def test_the_reported_tracebacks_are_one_line(args, tmp_path, capsys):
    """Issue 32's inputs that raised a traceback (or started Ray with --workers 0)."""
    with time_limit(TIME_LIMIT):
        rc = main([*args, "--out", str(tmp_path), *(["--workers", "0"] if args[0] == "run"
                                                    else [])])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("privgames: error:"), err


def test_show_with_an_out_that_is_a_file_is_one_line(tmp_path, capsys):
    """A missing folder lists the claims with how to judge them (test_show.py); a file is
    refused."""
    out = tmp_path / "a-file"
    out.write_text("x")
    assert main(["show", "apes", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it is a file, not a results folder" in err[0]


@pytest.mark.parametrize("text", [
    "{bad", "", "[]", "null", "42", '{"experiment": "apes"}', '{"table": [1, 2]}',
    '{"non_finite": {"a.b": "inf"}}', '{"non_finite": 3}', '{"claims": {"x": null}}',
    "[" * 20000,
])
def test_show_with_a_summary_of_any_shape_is_one_line(tmp_path, capsys, text):
    """Unreadable, empty, valid JSON of another shape, deep nesting: one line naming the file
    and how to make it again (wrong shapes were a KeyError/TypeError traceback)."""
    (tmp_path / "apes.summary.json").write_text(text)
    assert main(["show", "apes", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "apes.summary.json cannot be read as apes's summary" in err[0], err


def test_summaries_are_standard_json_and_keep_their_infinities(tmp_path):
    from privgames.analysis.results import read_json, write_json

    data = {"a": float("inf"), "b": {"c": [1.0, float("-inf")]}, "d": float("nan"), "e": 2}
    write_json(data, tmp_path / "s.json")
    text = (tmp_path / "s.json").read_text()

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    strict = json.loads(text, parse_constant=refuse)
    assert strict["a"] is None and strict["non_finite"] == {
        "a": {"value": "inf", "reason": UNEXPLAINED},
        "b.c[1]": {"value": "-inf", "reason": UNEXPLAINED}}
    back = read_json(tmp_path / "s.json")
    assert back == {"a": float("inf"), "b": {"c": [1.0, float("-inf")]}, "d": None, "e": 2}
    write_json(data, tmp_path / "r.json", reasons={"c": "why c", "e": "why e"})
    strict = json.loads((tmp_path / "r.json").read_text(), parse_constant=refuse)
    assert strict["non_finite"]["b.c[1]"]["reason"] == "why c"  # the innermost named part
    assert strict["non_finite"]["a"]["reason"] == UNEXPLAINED


def test_parquet_infinities_are_named_with_their_reasons(tmp_path):
    """Issue 32: an infinity in a Parquet file comes with its reason (schema metadata), by
    metric in a tidy frame's ``value`` column, by column elsewhere; a NaN is stored as null."""
    import pandas as pd
    import pyarrow.parquet as pq

    from privgames.analysis.results import parquet_infinities, read_parquet, write_parquet

    inf = float("inf")
    frame = pd.DataFrame({"metric": ["sigma", "sigma", "mse", "mse"],
                          "value": [inf, 1.0, -inf, float("nan")],
                          "round": [1.0, inf, float("nan"), 2.0]})
    write_parquet(frame, tmp_path / "r.parquet", {"sigma": "opted out"})
    assert parquet_infinities(tmp_path / "r.parquet") == {
        "sigma": {"count": 1, "reason": "opted out"},
        "mse": {"count": 1, "reason": UNEXPLAINED},
        "round": {"count": 1, "reason": UNEXPLAINED}}
    assert pq.read_table(tmp_path / "r.parquet").column("value").null_count == 1
    pd.testing.assert_frame_equal(read_parquet(tmp_path / "r.parquet"), frame)
    write_parquet(frame.iloc[[3]], tmp_path / "f.parquet")  # a NaN is no infinity
    assert parquet_infinities(tmp_path / "f.parquet") == {}


def test_a_rare_type_gets_its_cost_scale(tmp_path, capsys):
    """``p_low=0.02``: a client row whose type never came up while the scales were read got an
    infinite span; its span now comes from its interim costs, and the run finishes."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning reaches the terminal
        rc = main(["run", "learning-dynamics", "--set", "game=pricing-bayes", "--set",
                   "p_low=0.02", "--set", "learner=hedge", "--set", "rounds=30", "--set",
                   "populations=1", "--workers", "0", "--out", str(tmp_path), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-500:]
    assert json.loads(out.out)["rounds"] == 30


def test_learning_memory_grows_with_rounds_only_with_history(tmp_path, capsys):
    """In process the driver keeps O(rounds) numbers: 10^9 rounds are refused for their work,
    not their memory; with ``history=true`` (every round's actions) for their memory, naming
    rounds."""
    base = ["run", "learning-dynamics", "--set", "rounds=1000000000", "--workers", "0",
            "--out", str(tmp_path)]
    assert main(base) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "estimated work" in err[0] and "memory" not in err[0]
    assert main([*base, "--set", "history=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privgames: error: rounds=1000000000 needs about")


@pytest.mark.parametrize("name, raised", [
    ("learning-dynamics", "grid_points=100000000"),
    ("learning-dynamics", "agents=100000000"), ("pricing-fl", "rounds=1000000000"),
    ("pricing-fl", "N=100000000"), ("budget-collusion", "users=1000000000"),
])
def test_the_memory_guard_names_the_parameter_the_user_raised(name, raised, tmp_path, capsys):
    assert main(["run", name, "--set", raised, "--workers", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    key = raised.split("=")[0]
    assert len(err) == 1 and err[0].startswith(f"privgames: error: {raised} needs about")
    assert err[0].endswith(f"lower {key}")


@pytest.mark.parametrize("name, sets, lead, names", [
    ("dp-kmeans", ["iterations=1000000"], "iterations=1000000", "lower iterations"),
    ("budget-collusion", ["queries=1000000", "method=bisection"], "queries=1000000",
     "lower queries"),
    ("budget-noise", ["epsilon=1e-90"], "U_s=30.0 is out of range for epsilon=1e-90",
     "change epsilon"),
    ("budget-noise", ["epsilon=1e-300"], "epsilon=1e-300 is beyond the numbers the models "
     "compute with", "between 1e-100 and 1e+100"),
    ("learning-dynamics", ["beta_max=1e308"], "beta_max=1e+308 is out of range", "beta_max"),
])
def test_a_failure_names_the_parameter_that_drives_it(name, sets, lead, names, tmp_path,
                                                      capsys):
    """Issue 32, part 5: the series' length is the parameter the user calls it, not the
    strategy; Lemma 3's interval moves with epsilon, and the message says so; BAS's
    preferences have a range, not the learners' internal cost span."""
    args = ["run", name, "--workers", "0", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"privgames: error: {lead}"), err
    assert names in err[0] and "span" not in err[0] and "strategy=" not in err[0].split(":")[1]


def test_a_fixed_alpha_with_the_drawn_ones_spread_is_refused(tmp_path, capsys):
    """Issue 32, part 6: pricing-fig1 sweeps alpha_std, which a fixed alpha makes unused (the
    sweep would be flat): one line naming alpha."""
    alpha = "[" + ", ".join(["0.3", "0.6"] * 10) + "]"
    assert main(["run", "pricing-fig1", "--set", f"alpha={alpha}", "--workers", "0", "--out",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("privgames: error: alpha=[0.3, 0.6")
    assert "alpha_std=0.0 (of the drawn ones) is not used" in err[0]


@pytest.mark.parametrize("name, sets", [
    ("pricing-training", ["rounds=1000000000"]), ("apes", ["rounds=1000000000"]),
    ("learning-dynamics", ["game=ppsp", "rounds=100000000"]),
])
def test_a_run_past_a_day_of_work_is_refused_by_default(name, sets, tmp_path, capsys):
    """Issue 32, part 4: the work guard times the estimate at the experiment's measured rate
    and refuses past the default limit, saying how long and how to raise it; the suggested
    --max-work lets the same run through the guard. (``bas-chain K=10^6`` and ``apes-audit
    n=10^6``, estimated at 8.6 h and 45 min, run, their progress bar saying so.)"""
    from privgames.analysis import guard

    args = ["run", name, "--workers", "0", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "of one core (at this experiment's measured" in err[0], err
    assert f"above the default limit of {guard.DEFAULT_CPU_HOURS:g} h: lower rounds, or" in err[0]
    suggested = float(re.search(r"give --max-work (\S+) \(or more\)", err[0])[1])
    e = experiments.get(name)
    params = e.resolve(parse_set(sets))
    work = guard.check(e, params, 0, max_memory=1e15, max_work=suggested)
    assert work <= suggested < 1.1 * work
    assert guard.cpu_seconds(name, work) > guard.DEFAULT_CPU_HOURS * 3600


def test_a_configuration_without_a_footprint_gets_a_conservative_one():
    """Issue 32, part 4: the example plug-in's config has no footprint(): its counts size the
    assumed arrays, so n=10^8 with --max-memory 1G is refused naming n (it started before)."""
    import dataclasses

    from privgames.analysis import guard
    from privgames.environments.config import Footprint

    @dataclasses.dataclass(frozen=True)
    class Poll:  # the example plug-in's parameters
        n: int = 20
        a_max: float = 1.0
        rounds: int = 60
        replications: int = 2000
        verbose: bool = False

    fp = Footprint.assumed(Poll(n=10**8))
    assert fp.driver == "n" and fp.peak_bytes == 8.0 * 1e8 * 2000
    assert fp.work == 1e8 * 60 * 2000

    class Experiment:
        name = "poll"

        def points(self, params):
            return [{}]

        def config(self, params, point):
            return Poll(n=params["n"])

    with pytest.raises(ConfigError, match=r"^n=100000000 needs about .* \(--max-memory\): "
                                          r"lower n$"):
        guard.check(Experiment(), {"populations": 1, "n": 10**8}, 0, max_memory=2**30)
    assert guard.check(Experiment(), {"populations": 1, "n": 20}, 0) == 20 * 60 * 2000


def test_the_progress_bar_starts_with_the_work_left(tmp_path):
    """Issue 32, part 4: before the first task ends, the bar says how long the work takes at
    the experiment's measured rate."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "privgames.analysis", "run", "bas-chain",
                           "--workers", "0", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-500:]
    first = done.stderr.split("\r")[0]
    assert re.search(r"bas-chain:\s+0%.*about [0-9.]+ s left", first), first
