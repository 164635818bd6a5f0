"""The ``privgames`` command through its public entry points."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest

from privgames.analysis.cli import main


def test_list_names_every_experiment(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("bas-chain", "bas-mse-vs-d", "bas-mse-vs-beta", "bas-split", "bas-mse-vs-K"):
        assert name in out


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code``."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(*sys.modules)"],
                          capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_list_into_a_reader_that_left_is_quiet():
    """``privgames list | head -1``: the reader has closed the pipe; no traceback."""
    import os

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    done = subprocess.run([sys.executable, "-m", "privgames.analysis", "list"], stdout=write,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(write)
    assert done.returncode == 141 and done.stderr == ""


def test_list_imports_no_environment_and_no_pandas():
    """Start-up: `privgames list` reads the catalogue; nothing heavy is imported (not even
    numpy: issue 33 asks for a list under 0.3 s)."""
    loaded = _modules_after("from privgames.analysis.cli import main; main(['list'])")
    assert not {"numpy", "pandas", "mesa", "scipy", "matplotlib", "ray"} & loaded
    assert not [m for m in loaded if m.startswith("privgames.environments.")
                and m not in ("privgames.environments.config", "privgames.environments.streams")]


def test_get_imports_only_the_experiments_own_system():
    loaded = _modules_after("from privgames.analysis import experiments as e; e.get('sar-attack')")
    assert "privgames.analysis.sar.experiments" in loaded
    others = {f"privgames.analysis.{game}.{part}" for game in ("bas", "apes", "budget", "ppsp",
                                                              "pricing", "learning")
              for part in ("experiments", "figures", "page")}
    assert not others & loaded


def test_catalogue_matches_what_the_modules_register():
    from privgames.analysis import experiments

    registered = experiments.all_experiments()
    assert [e.name for e in registered] == list(experiments.catalogue())
    assert [e.description for e in registered] == [d for _, d in experiments.catalogue().values()]


def test_a_built_in_name_cannot_be_registered_from_elsewhere():
    from privgames.analysis import experiments

    impostor = dataclasses.replace(experiments.get("bas-chain"), name="sar-attack",
                                   run_unit=lambda config, seed: None)
    with pytest.raises(ValueError,
                       match="built-in experiment of privgames.analysis.sar.experiments"):
        experiments.register(impostor)


def test_run_writes_rows_and_summary(tmp_path, capsys):
    args = ["run", "bas-chain", "--workers", "0", "--out", str(tmp_path), "--json", "--seed", "3",
            "--replications", "400", "--set", "K=6", "--set", "beta=[0.1,0.5,1.2,0.3,0.9,0.7]",
            "--set", "prior=none"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("predicted_sigma2", "learned_sigma2", "rounds_to_converge", "mse_chained",
                "mse_chained_se", "mse_ldp", "mse_ldp_se", "mse_optimum", "mse_optimum_se"):
        assert key in summary
    assert summary["predicted_sigma2"] == pytest.approx([0.5**(2/3) * 1.2, 0, 0, 0, 0, 0])
    assert summary["learned_sigma2"] == pytest.approx(summary["predicted_sigma2"], rel=1e-6)
    for m in ("chained", "ldp", "optimum"):  # within 3 standard errors of eq (9)
        assert abs(summary[f"mse_{m}"] - summary[f"mse_{m}_predicted"]) < 3 * summary[f"mse_{m}_se"]
    rows = pd.read_parquet(tmp_path / "bas-chain.parquet")
    assert {"round", "method", "metric", "value", "population"} <= set(rows.columns)
    on_disk = json.loads((tmp_path / "bas-chain.summary.json").read_text())
    assert on_disk["mse_chained"] == summary["mse_chained"]
    figure = (tmp_path / "bas-chain.png").read_bytes()  # issue 32: run writes its figure too
    assert figure.startswith(b"\x89PNG") and len(figure) > 10_000
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("args,needle", [
    (["run", "no-such"], "unknown experiment 'no-such'"),
    (["run", "bas-chain", "--set", "colour=red"], "unknown parameter 'colour'"),
    (["run", "bas-chain", "--set", "K=1"], "K=1 is out of range"),
    (["run", "bas-chain", "--set", "beta=[1,2"], "bad JSON"),
    (["run", "bas-chain", "--set", "delta=2"], "delta=2 is out of range"),
    (["run", "bas-chain", "--set", "d=many"], "d='many' is not an integer"),
    (["run", "bas-chain", "--set", "K"], "not of the form key=value"),
    (["run", "bas-split", "--set", "subsequences=[1,500]"], "subsequences=500 is out of range"),
    (["frobnicate"], "invalid choice"),
    # issue 44: each of these was a traceback, a silent choice or a bare list
    (["run", "bas-chian"], "unknown experiment 'bas-chian' (did you mean 'bas-chain'?)"),
    (["run", "bas-chain", "--set", "beta_mx=2"], "(did you mean 'beta_max'?)"),
    (["run", "bas-chain", "--set", "K=3", "--set", "K=30"], "--set K is given twice"),
    (["run", "bas-chain", "--set", "K=" + "[" * 20000], "JSON nested too deeply"),
    (["run", "bas-chain", "--max-memory", "1.2.3G"], "--max-memory '1.2.3G' is not a size"),
    (["run", "bas-chain", "--max-memory", "1e999"], "is out of range: it must be > 0 and finite"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys, tmp_path):
    assert main([*args, "--out", str(tmp_path)] if args[0] == "run" else args) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert "\n" not in err and "Traceback" not in err


def test_module_entry_point_reports_errors_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "privgames.analysis", "run", "bas-chain",
                           "--set", "Delta=0"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("privgames: error: Delta=0 is out of range: "
                                   "Delta must be > 0.0")


def test_query_over_results(tmp_path, capsys):
    main(["run", "bas-mse-vs-K", "--workers", "0", "--out", str(tmp_path), "--set", "K=[3,5]",
          "--set", "populations=2", "--replications", "50"])
    capsys.readouterr()
    sql = "select count(distinct K) as n from results where metric = 'mse'"
    assert main(["query", sql, "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split()[-1] == "2"


@pytest.mark.parametrize("args,message", [
    (["run", "bas-chain", "--seed", "-1"], "argument --seed: -1 is out of range"),
    (["reproduce", "--seed", "-1"], "argument --seed: -1 is out of range"),
    (["run", "bas-chain", "--workers", "-1"], "argument --workers: -1 is out of range"),
    (["run", "bas-chain", "--out", "/proc/x"], "--out /proc/x: the folder cannot be created"),
    (["run", "bas-chain", "--address", "ray://127.0.0.1:1", "--workers", "0"],
     "needs the extra"),
    (["query", "select 1", "--out", "/nonexistent-privgames"], "no results there"),
])
def test_bad_command_lines_get_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_an_empty_out_is_refused_not_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "bas-chain", "--out", ""]) == 2
    assert "argument --out: '' is empty" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("where", ["bas-chain.parquet", "bas-chain.png",
                                   "bas-chain.summary.json"])
def test_a_folder_where_a_result_goes_is_refused_before_the_run(tmp_path, capsys, where):
    """It was a traceback after the whole run, with the parts already deleted."""
    (tmp_path / where).mkdir()
    assert main(["run", "bas-chain", "--workers", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / where} is a folder where the result file goes" in err
    assert err.count("\n") == 1 and not (tmp_path / ".parts").exists()


def test_a_file_where_the_parts_go_is_refused_before_the_run(tmp_path, capsys):
    (tmp_path / ".parts").write_text("")
    assert main(["run", "bas-chain", "--workers", "0", "--out", str(tmp_path)]) == 2
    assert "is a file where the parts' folder goes" in capsys.readouterr().err


def test_a_failure_while_writing_keeps_the_parts_and_says_how_to_resume(tmp_path, capsys,
                                                                          monkeypatch):
    from privgames.analysis import api

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(api, "write_json", full)
    args = ["run", "bas-mse-vs-K", "--workers", "0", "--out", str(tmp_path), "--set",
            "K=[3,5]", "--set", "populations=2", "--replications", "50"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "the same command resumes" in err
    assert len(list((tmp_path / ".parts" / "bas-mse-vs-K").glob("*.parquet"))) == 4
    monkeypatch.undo()
    assert main(args) == 0
    assert "resuming, 4 of 4 tasks already done" in capsys.readouterr().err
    assert not (tmp_path / ".parts").exists()


def test_max_work_inf_means_no_limit_as_documented(tmp_path, capsys):
    assert main(["run", "budget-us-bounds", "--workers", "0", "--max-work", "inf", "--out",
                 str(tmp_path)]) == 0


def test_privgames_alone_lists_its_commands_and_has_a_version(capsys):
    from importlib import metadata

    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(command in out for command in ("list", "run", "show", "viz", "reproduce",
                                              "query"))
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"privgames {metadata.version('privgames')}\n"


def test_out_naming_a_file_and_bad_sql(tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert main(["run", "bas-chain", "--out", str(a_file)]) == 2
    assert "it is a file, not a folder" in capsys.readouterr().err
    assert main(["run", "ppsp-tradeoff", "--workers", "0", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["query", "selec nothing", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "query failed" in err


def test_an_interruption_after_the_progress_bar_starts_on_its_own_line(tmp_path, capsys,
                                                                        monkeypatch):
    """The bar ends its line when a run stops, so the one line saying what was kept is not
    glued to the end of the bar's."""
    from privgames.analysis import sweep

    real, calls = sweep.run_batch, []

    def stopped(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(sweep, "run_batch", stopped)
    assert main(["run", "bas-mse-vs-K", "--workers", "0", "--out", str(tmp_path), "--set",
                 "K=[3,5]", "--set", "populations=2", "--replications", "50"]) == 130
    lines = capsys.readouterr().err.split("\n")
    said = [line for line in lines if "interrupted" in line]
    assert said and said[0].startswith("privgames: interrupted"), lines


def test_query_names_the_experiment_and_has_a_view_per_experiment(tmp_path, capsys):
    for name in ("budget-us-bounds", "ppsp-example2"):
        assert main(["run", name, "--workers", "0", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    sql = "SELECT experiment, count(*) AS n FROM results GROUP BY experiment ORDER BY 1"
    assert main(["query", sql, "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.split("\n")
    rows = {line.split()[0]: int(line.split()[1]) for line in lines[1:] if line.strip()}
    assert set(rows) == {"budget-us-bounds", "ppsp-example2"}
    assert main(["query", 'SELECT count(*) AS n FROM "ppsp-example2"', "--out",
                 str(tmp_path)]) == 0
    assert int(capsys.readouterr().out.split()[-1]) == rows["ppsp-example2"]
