"""``privgames viz``: Mesa's SolaraViz pages of the environments and a results browser.

Solara serves this module (``SOLARA_APP``): ``routes`` holds an index, one page per
environment (:data:`privgames.analysis.pages.PAGES`: controls, inputs from the config's
validators, the agents, the measurement beside the theory, the numbers) and, when
``privgames viz --results DIR`` started it, the results page (the report's verdict tables,
every figure, a DuckDB query box over the Parquet files). The server listens on 127.0.0.1
only. Solara's own JavaScript comes from the ``solara-assets`` package, so no page needs the
internet.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import solara

from privgames.analysis.pages import PAGES, Page, PageModel, format_reading

# Mesa 3.3's ComponentsView calls a hook after an early return (harmless: that return is for an
# empty component list, never ours), which Solara reports when Mesa's module is imported; on
# 127.0.0.1 Solara falls back to samesite=lax cookies, what a loopback page wants. Neither is
# the user's to act on.
warnings.filterwarnings("ignore", message="Cookies with samesite=none require https")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*ComponentsView: `use_state` found despite")
    from mesa.visualization import SolaraViz

#: Where ``--results`` points (set by :func:`serve` for the server process).
RESULTS_ENV = "PRIVGAMES_RESULTS"
HOST = "127.0.0.1"


def _agents(model: PageModel) -> Any:
    return _figure(model, model.page.agents)


def _measures(model: PageModel) -> Any:
    return _figure(model, model.page.measures)


def _figure(model: PageModel, draw: Any) -> Any:
    if model.error is not None:
        return solara.Error(model.error)
    return solara.FigureMatplotlib(draw(model.env), format="png")


def _readings(model: PageModel) -> Any:
    """The numbers the page shows, or the config's message when it refused the inputs."""
    if model.error is not None:
        return solara.Error(f"privgames: error: {model.error}")
    rows = "\n".join(f"| {label} | {format_reading(value)} |"
                     for label, value in model.page.readings(model.env).items())
    config = model.env.config
    inputs = ", ".join(f"{name}={getattr(config, name)}" for name in model.page.inputs)
    return solara.Markdown(f"| {model.page.title} | value |\n|---|---|\n{rows}\n\n"
                           f"This run: seed={model.seed}, {inputs}")


def environment_page(page: Page) -> Any:
    """The SolaraViz component of ``page``: one model per browser session."""
    model_class = PageModel.of(page)
    params = page.model_params()

    @solara.component
    def View() -> Any:
        model = solara.use_memo(
            lambda: model_class(**{k: v["value"] for k, v in params.items()}), [])
        return SolaraViz(model, components=[_readings, _agents, _measures],
                         model_params=params, name=f"privgames: {page.title}")

    return View


@solara.component
def Index() -> Any:
    with solara.Column(style={"padding": "24px"}):
        solara.Markdown("# privgames pages\nEach page runs one environment: set its "
                        "parameters, press Reset, then Step or ▶.")
        for route, page in PAGES.items():
            summary = page.model_type.__doc__.splitlines()[0]
            solara.Markdown(f"- [{page.title}](/{route}): {summary}")
        if os.environ.get(RESULTS_ENV):
            solara.Markdown(f"- [Results](/results): {os.environ[RESULTS_ENV]}")


@solara.component
def Results() -> Any:
    """The report's verdict tables, every figure, and SQL over the results."""
    sql, set_sql = solara.use_state("SELECT file, COUNT(*) AS rows FROM results "
                                    "GROUP BY file ORDER BY file")
    if not os.environ.get(RESULTS_ENV):
        return solara.Warning("no results folder: start the server with privgames viz "
                              "--results DIR")
    folder = Path(os.environ[RESULTS_ENV])
    with solara.Column(style={"padding": "24px"}):
        solara.Markdown(f"# Results in {folder}")
        solara.InputText("SQL over the Parquet files (the view is 'results')", value=sql,
                         on_value=set_sql, continuous_update=False)
        _query(folder, sql)
        report = folder / "report.md"
        if report.exists():
            solara.Markdown(report.read_text())
        for png in sorted(folder.glob("*.png")):
            solara.Markdown(f"### {png.stem}")
            solara.Image(str(png), width="90%")


def _query(folder: Path, sql: str) -> Any:
    from privgames.analysis.results import query

    try:
        frame = query(folder, sql)
    except Exception as err:  # noqa: BLE001 - a user's SQL: show DuckDB's message
        return solara.Error(f"query failed: {err}")
    return solara.Markdown(frame.head(200).to_markdown(index=False))


routes = [solara.Route(path="/", component=Index, label="privgames"),
          *[solara.Route(path=route, component=environment_page(page), label=page.title)
            for route, page in PAGES.items()],
          solara.Route(path="results", component=Results, label="Results")]


def serve(port: int, results: Path | None = None) -> None:
    """Serve the pages on ``HOST:port`` until interrupted."""
    import uvicorn

    os.environ["SOLARA_APP"] = __name__
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = HOST, str(port)
    os.environ.setdefault("SOLARA_TELEMETRY_MIXPANEL_ENABLE", "False")
    if results is not None:
        os.environ[RESULTS_ENV] = str(results.resolve())
    uvicorn.run("solara.server.starlette:app", host=HOST, port=port, log_level="warning")
