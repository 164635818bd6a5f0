"""The pages of the documentation site that restate code, written from the code at build time.

``docs/conf.py`` calls :func:`write_all` before Sphinx reads the sources, so these pages cannot
drift from what they describe:

- ``reference/experiments/NAME.md``: one page per registered experiment: its paper, its
  parameters (what ``privgames show`` prints, from the config's validators and docstring), its
  rows' columns and metrics, its summary's numbers, its claims with their verdicts and its
  figure, from a run at quick scale with seed 0 (kept in the results folder, so a rebuild runs
  only what changed: ``api.run(keep_finished=True)``);
- ``reference/cli.md``: every command's help, from the argument parser;
- ``reference/glossary.md``: the parameter names that several game families share, with each
  family's meaning, from the configs' docstrings;
- ``tutorials/notebooks/*.ipynb``: the notebooks, copied from ``notebooks/`` (MyST-NB executes
  them during the build).

Every generated file is listed in ``docs/.gitignore``; a file is rewritten only when its text
changes, so Sphinx's incremental build reads only what moved.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pandas as pd

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
#: Where the quick-scale runs behind the experiment pages are kept between builds.
RESULTS = Path(os.environ.get("PRIVGAMES_DOCS_RESULTS", DOCS / "_build" / "results"))

#: The columns that several experiments' rows share (the others are grid parameters).
COLUMNS = {
    "metric": "what ``value`` measures (listed below with the methods it is reported for)",
    "value": "the measurement, in the metric's own unit (a variance, a rate, an epsilon, ...)",
    "method": "the profile, rule or attacker measured (e.g. ``chained``, ``nash``, ``ldp``)",
    "population": "index of the independent population (its own types, data and streams)",
    "round": "learning or dynamics round, from 0 (``-1`` or missing: a final measurement)",
    "step": "protocol step of the ring, from 0",
    "position": "place in the sequence (BAS order), from 0",
    "node": "ring node id, from 0 (the paper's node 10 is id 9)",
    "client": "FL client id, from 0",
}


#: A metric's unit, read from its name by the naming conventions every experiment follows:
#: the first rule with a key the name holds wins (a key starting ``^`` must start the name, a
#: key alone in its tuple may also be the whole name); a suffix ``_n``, ``_var``, ``_se``,
#: ``_sd`` or ``_predicted`` qualifies the unit of the metric it is attached to.
UNITS = (
    (("^is_", "_is_", "converged", "feasible", "priced", "preserved", "truthful_learned",
      "event", "positive"), "1 or 0 (yes or no)"),
    (("epsilon", "^eps_", "^audit_eps", "privacy_loss", "^eon_", "^baseline_"),
     "epsilon (privacy loss, in nats)"),
    (("^delta",), "probability"),
    (("rate", "share", "fraction", "exposure", "accuracy", "^f1", "probability", "azuma",
      "p_estimate", "threshold", "^q"), "proportion in [0, 1]"),
    (("mse", "sigma2", "variance"), "squared data units (a variance or a mean squared error)"),
    (("^sigma",), "data units (a standard deviation)"),
    (("error", "drift", "^target", "^y", "^c", "^c_", "optimal_c"), "data units"),
    (("distance", "relative", "ratio", "poa", "total_over", "spread", "margin", "change"),
     "relative (dimensionless)"),
    (("_rounds", "^rounds"), "count"),
    (("utility_bound",), "data units"),
    (("^loss", "final_loss", "loss_gap"), "the trained model's loss (its objective's value)"),
    (("cost", "payment", "reward", "gain", "regret", "gap", "utility"), "the game's cost units"),
    (("round", "participants", "trials", "opted_out", "steps", "_K", "^report_"), "count"),
)


def unit(metric: str) -> str:
    """The unit of ``metric`` by the naming conventions (:data:`UNITS`), or ``""``."""
    for suffix in ("_n", "_var", "_sd", "_se", "_predicted"):
        if metric.endswith(suffix) and metric != suffix:
            if suffix == "_n":
                return "count of independent draws behind the mean"
            base = unit(metric[: -len(suffix)])
            return f"square of: {base}" if suffix == "_var" and base else base
    for keys, name in UNITS:
        for key in keys:
            if key.startswith("^"):
                exact = key[1:]
                if metric == exact or (metric.startswith(exact) and (
                        exact.endswith("_") or metric[len(exact)] == "_")):
                    return name
            elif key in metric:
                return name
    return ""


def write_all(results: Path = RESULTS) -> None:
    """Write every generated page (runs the experiments that ``results`` does not hold)."""
    _write_if_changed(DOCS / "reference" / "cli.md", cli_page())
    _write_if_changed(DOCS / "reference" / "glossary.md", glossary_page())
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        _write_if_changed(DOCS / "tutorials" / "notebooks" / notebook.name,
                          notebook.read_text())
    folder = DOCS / "reference" / "experiments"
    from privgames.analysis import experiments

    names = []
    for experiment in experiments.all_experiments():
        names.append(experiment.name)
        _write_if_changed(folder / f"{experiment.name}.md", experiment_page(experiment, results,
                                                                             folder))
    index = ["# Experiments", "", "One page per registered experiment, generated from its code "
             "and a run at quick scale (seed 0).", "", "| experiment | what it does | paper |",
             "|---|---|---|"]
    for name, description in experiments.listing():
        source = experiments.get(name).source
        index.append(f"| [{name}]({name}.md) | {description} | {source or 'all five'} |")
    index += ["", "```{toctree}", ":hidden:", "", *names, "```", ""]
    _write_if_changed(folder / "index.md", "\n".join(index))


def experiment_page(experiment, results: Path, folder: Path) -> str:
    """One experiment's reference page (runs it at quick scale into ``results`` if needed)."""
    from privgames.analysis import api
    from privgames.analysis.experiments import paper_title
    from privgames.analysis.parameters import describe
    from privgames.analysis.report import claims_markdown, numbers_markdown

    result = api.run(experiment.name, seed=0, workers=0, out=results, keep_finished=True)
    name = experiment.name
    lines = [f"# {name}", "", experiment.description, "",
             f"**Paper:** {paper_title(experiment.source)}.", "",
             "```bash", f"privgames run {name} --out results    # quick scale; --scale paper",
             f"privgames show {name}                 # this page's parameters and claims",
             "```", "", "## Parameters", "",
             "Set with `--set NAME=VALUE` (JSON values; a list on a swept parameter runs each "
             "value) or as keyword arguments of `privgames.run`.", ""]
    table = pd.DataFrame([{"name": f"`{p.name}`", "type": p.type,
                           "quick": "swept" if p.swept else _cell(p.default),
                           "paper scale": _cell(p.paper),
                           "allowed": _cell(p.allowed) if p.allowed else "see meaning",
                           "meaning": _cell(p.meaning)} for p in describe(experiment)])
    lines += [table.to_markdown(index=False), "", "## Rows", "",
              f"`{name}.parquet` holds tidy rows (quick scale: {len(result.rows):,} rows). "
              "Columns:", ""]
    lines += [pd.DataFrame([{"column": f"`{c}`", "type": str(result.rows[c].dtype),
                             "meaning": COLUMNS.get(c, "grid parameter (see Parameters)")}
                            for c in result.rows.columns]).to_markdown(index=False), ""]
    if "metric" in result.rows:
        lines += ["Metrics, each with its unit (read from its name by the naming conventions; "
                  "blank where the name says none: the system's explanation page describes "
                  "it), the methods it is reported for and its range at quick scale:", "",
                  _metrics(result.rows).to_markdown(index=False), ""]
    lines += ["## Summary", "", f"`{name}.summary.json` at quick scale, seed 0:", "",
              numbers_markdown(experiment, result.summary), "", "## Claims", "",
              "The paper's claims beside the measurement, judged as in the "
              "[report](../../explanation/reading-the-report.md):", "",
              claims_markdown(result.claims()), ""]
    figure = result.save_figure(folder / "figures")
    if figure is not None:
        lines += ["## Figure", "", f"![{name} at quick scale](figures/{figure.name})", ""]
    return "\n".join(lines)


def _metrics(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for metric, group in rows.groupby("metric", sort=True):
        values = pd.to_numeric(group["value"], errors="coerce")
        methods = sorted(map(str, group["method"].unique())) if "method" in group else []
        out.append({"metric": f"`{metric}`", "unit": unit(str(metric)),
                    "methods": ", ".join(methods), "rows": len(group),
                    "min": f"{values.min():.4g}", "max": f"{values.max():.4g}"})
    return pd.DataFrame(out)


def cli_page() -> str:
    """Every command's ``--help``, from :func:`privgames.analysis.cli.parser`."""
    import argparse

    from privgames.analysis.cli import parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width
    top = parser()
    lines = ["# Command line", "", "Generated from the argument parser "
             "(`privgames.analysis.cli.parser`). `python -m privgames.analysis` is the same "
             "command. Bad input prints one line naming the problem and exits with status 2.",
             "", "```text", top.format_help().rstrip(), "```", ""]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub_parser in sub.choices.items():
        lines += [f"## `privgames {command}`", "", "```text",
                  sub_parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def glossary_page() -> str:
    """The parameter names that experiments of more than one game family accept, with each
    family's meaning, from the configs' docstrings (:func:`privgames.analysis.parameters.describe`;
    a family's meaning is that of its first experiment that has the name)."""
    from privgames.analysis import experiments
    from privgames.analysis.parameters import describe

    games = {name: game for name, (game, _) in experiments.catalogue().items()}
    uses: dict[str, dict[str, str]] = defaultdict(dict)
    for experiment in experiments.all_experiments():
        game = games.get(experiment.name, experiment.name)
        for p in describe(experiment):
            uses[p.name].setdefault(game, p.meaning or "(no meaning written)")
    lines = ["# Glossary of shared names", "",
             "Most parameters keep their paper's symbol, so that a value can be checked against "
             "the paper's equations; where two papers use one symbol for different things, the "
             "experiments do too. Generated from the configurations' docstrings: every "
             "parameter name that experiments of more than one game family accept, with its "
             "meaning in each family (an experiment's own page lists all of its parameters).",
             "", "| name | meaning, by game family |", "|---|---|"]
    for name in sorted(uses, key=str.lower):
        if len(uses[name]) > 1:
            meanings = "; ".join(f"**{game}**: {_cell(meaning)}"
                                 for game, meaning in uses[name].items())
            lines.append(f"| `{name}` | {meanings} |")
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    """A value as one Markdown table cell (no newline, no bare pipe)."""
    return str(value).replace("\n", " ").replace("|", "\\|")


def _write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)

