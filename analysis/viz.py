"""``privgames viz``: Mesa's SolaraViz pages of the environments and a results browser.

Solara serves this module (``SOLARA_APP``, behind :mod:`privgames.analysis.page_server`):
``routes`` holds an index, one page per environment (:func:`privgames.analysis.pages.all_pages`:
controls, inputs from the config's validators, the agents, the measurement beside the theory,
the numbers) and, when ``privgames viz --results DIR`` started it, the results page (the
report's verdict tables with their figures, a DuckDB query box over the Parquet files). Solara's
own JavaScript comes from the ``solara-assets`` package, so no page needs the internet.

The pages (Mesa, the environments, matplotlib: about 2.5 s of imports) are loaded by a thread
started with the server and, at the latest, by the first visit to one; the index reads the
games' packages alone, so the server answers before they are loaded.

The browser is untrusted and so is a results folder (file and column names, report text): no
value reaches the page as HTML. Tables are components whose cells are text nodes
(:func:`Table`), Markdown is rendered and then sanitised by ``nh3`` (Ammonia: no script, no
event handler, no ``javascript:`` link, no image) in :func:`SafeMarkdown`, and user SQL runs
read-only on the results' Parquet files alone (:func:`privgames.analysis.results.query`).
"""

from __future__ import annotations

import functools
import html
import importlib
import os
import re
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import markdown
import nh3
import reacton.ipywidgets as rw
import solara

from privgames.analysis.experiments import GAMES
from privgames.analysis.page_server import RESULTS_ENV

# On 127.0.0.1 Solara falls back to samesite=lax cookies, what a loopback page wants: not the
# user's to act on.
warnings.filterwarnings("ignore", message="Cookies with samesite=none require https")


def _showing_value(slider: Any) -> Any:
    """``slider`` with its value always shown on its thumb: Mesa's inputs pass no
    ``thumb_label``, and Solara's default shows the value only while the thumb is dragged."""
    def shown(*args: Any, **kwargs: Any) -> Any:
        return slider(*args, **{"thumb_label": "always", **kwargs})

    return shown


# The pages are this server's only Solara app, so its sliders are Mesa's inputs alone.
solara.SliderInt = _showing_value(solara.SliderInt)
solara.SliderFloat = _showing_value(solara.SliderFloat)

#: What a query on the results page may show: rows, columns, cells, characters a cell.
QUERY_ROWS, QUERY_COLUMNS, QUERY_CELLS, QUERY_CHARS = 500, 50, 5000, 200
#: What a query may take (enforced by the operating system, :mod:`privgames.analysis.sandbox`):
#: seconds, and memory (DuckDB's ``memory_limit`` too).
QUERY_SECONDS, QUERY_MEMORY = 10.0, 256 * 2**20
#: The largest figure or report the results page reads from its folder, and how many figures.
MAX_FILE_BYTES, MAX_FIGURES = 20 * 2**20, 100
#: Markdown's tags a page keeps (nh3 drops every other tag, attribute and URL scheme).
MARKDOWN_TAGS = {"h1", "h2", "h3", "h4", "p", "a", "ul", "ol", "li", "em", "strong", "code",
                 "pre", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "br", "hr"}
TABLE_STYLE = "border-collapse: collapse; margin: 8px 0; font-size: 15px"
CELL_STYLE = "border: 1px solid #ccc; padding: 3px 10px; text-align: left"
_FIGURE_LINE = re.compile(r"^!\[[^\]]*\]\(([\w.-]+\.png)\)$")


@solara.component
def SafeMarkdown(text: str) -> Any:
    """``text`` rendered as Markdown, then sanitised (:data:`MARKDOWN_TAGS`, http(s) links)."""
    rendered = markdown.markdown(text, extensions=["tables"])
    clean = nh3.clean(rendered, tags=MARKDOWN_TAGS, url_schemes={"http", "https"},
                      attributes={"a": {"href"}})
    return solara.HTML(tag="div", unsafe_innerHTML=clean.replace(
        "<table>", f'<table style="{TABLE_STYLE}">').replace(
        "<td>", f'<td style="{CELL_STYLE}">').replace("<th>", f'<th style="{CELL_STYLE}">'))


@solara.component
def Table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> Any:
    """A table whose every cell is text (``html.escape``: a value is never read as HTML),
    sent as one element: with a widget per cell, a wide result of 100,000 cells held a server
    thread for half an hour (issue 43)."""
    def row(tag: str, cells: Sequence[Any]) -> str:
        return "<tr>" + "".join(f'<{tag} style="{CELL_STYLE}">{html.escape(str(cell))}</{tag}>'
                                for cell in cells) + "</tr>"

    body = "".join(row("td", cells) for cells in rows)
    return solara.HTML(tag="div", style="overflow-x: auto; max-width: 100%",
                       unsafe_innerHTML=f'<table style="{TABLE_STYLE}"><thead>'
                       f"{row('th', header)}</thead><tbody>{body}</tbody></table>")


def _agents(model: Any) -> Any:
    return _figure(model, "agents")


def _measures(model: Any) -> Any:
    return _figure(model, "measures")


def _figure(model: Any, kind: str) -> Any:
    from privgames.analysis.pages import rendered

    if model.error is not None:  # the numbers' card says why, once
        return solara.Text("")
    value, mime = rendered(model.figure(kind), kind)
    return rw.Image(value=value, format=mime)


def _readings(model: Any) -> Any:
    """The numbers the page shows, or the config's message when it refused the inputs."""
    if model.error is not None:
        return solara.Error(f"privgames: error: {model.error}")
    config = model.env.config
    inputs = ", ".join(f"{name}={getattr(config, name)}" for name in model.page.inputs)
    with solara.Column() as column:
        if not model.running:
            solara.Warning("This run has ended: nothing changes any more. Reset starts again.")
        from privgames.analysis.pages import format_reading

        Table([model.page.title, "value"],
              [(label, format_reading(value))
               for label, value in model.readings().items()])
        solara.Text(f"This run: seed={model.seed}, {inputs}")
    return column


@functools.cache
def _pages() -> dict[str, Any]:
    """Every game's :class:`~privgames.analysis.pages.Page` (Mesa 3.3's ComponentsView calls a
    hook after an early return, for an empty component list, never ours, which Solara reports
    when Mesa's module is imported: not the user's to act on)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ComponentsView: `use_state` found despite")
        import mesa.visualization  # noqa: F401

        from privgames.analysis.pages import all_pages

        return all_pages()


@functools.cache
def _view(route: str) -> Any:
    return environment_page(_pages()[route])


def lazy_page(route: str) -> Any:
    """The page at ``route``, built on its first visit."""
    @solara.component
    def Lazy() -> Any:
        return _view(route)()

    return Lazy


def environment_page(page: Any) -> Any:
    """The SolaraViz component of ``page``: one model per browser session."""
    from mesa.visualization import SolaraViz

    from privgames.analysis.pages import PageModel

    model_class = PageModel.of(page)
    params = page.model_params()

    @solara.component
    def View() -> Any:
        model = solara.use_memo(
            lambda: model_class(**{k: v["value"] for k, v in params.items()}), [])
        return SolaraViz(model, components=[_readings, _agents, _measures],
                         model_params=params, name=f"privgames: {page.title}")

    return View


def _games() -> list[tuple[str, str]]:
    """Each game's page route and its package's first paragraph (no game is imported)."""
    out = []
    for game in GAMES:
        package = importlib.import_module(f"privgames.analysis.{game}")
        out.append((package.PAGE, " ".join(package.__doc__.split("\n\n")[0].split())))
    return out


@solara.component
def Index() -> Any:
    with solara.Column(style={"padding": "24px"}):
        lines = ["# privgames pages", "Each page runs one environment: set its parameters, "
                 "press Reset, then Step or ▶.", ""]
        for route, summary in _games():
            lines.append(f"- [{route}](/{route}): {summary}")
        SafeMarkdown("\n".join(lines))
        if os.environ.get(RESULTS_ENV):
            solara.Button("Results", href="/results", text=True)
            solara.Text(os.environ[RESULTS_ENV])


@solara.component
def Results() -> Any:
    """The report's verdict tables with their figures, and SQL over the results."""
    sql, set_sql = solara.use_state("SELECT file, COUNT(*) AS rows FROM results "
                                    "GROUP BY file ORDER BY file")
    if not os.environ.get(RESULTS_ENV):
        return solara.Warning("no results folder: start the server with privgames viz "
                              "--results DIR")
    from privgames.analysis.results import read_capped

    folder = Path(os.environ[RESULTS_ENV])
    with solara.Column(style={"padding": "24px"}):
        solara.Text(f"Results in {folder}", style={"font-size": "24px"})
        solara.InputText("SQL over the Parquet files (the view is 'results')", value=sql,
                         on_value=set_sql, continuous_update=False)
        _query(folder, sql)
        shown = _report(folder)
        for png in sorted(folder.glob("*.png"))[:MAX_FIGURES]:
            image = None if png.name in shown else read_capped(png, folder, MAX_FILE_BYTES)
            if image is not None:
                solara.Text(png.stem, style={"font-size": "18px"})
                solara.Image(image, width="90%")


def _report(folder: Path) -> set[str]:
    """Render ``report.md`` with each figure where the report names it (a plain file name of
    the folder; nothing else is loaded); return the figures shown."""
    from privgames.analysis.results import read_capped

    report = read_capped(folder / "report.md", folder, MAX_FILE_BYTES)
    if report is None:
        return set()
    shown, chunk = set(), []
    for line in report.decode("utf-8", "replace").splitlines():
        figure = _FIGURE_LINE.match(line.strip())
        if figure is None:
            chunk.append(line)
            continue
        SafeMarkdown("\n".join(chunk))
        chunk, path = [], folder / figure.group(1)
        image = read_capped(path, folder, MAX_FILE_BYTES)
        if image is not None:
            solara.Image(image, width="90%")
            shown.add(path.name)
    SafeMarkdown("\n".join(chunk))
    return shown


def _query(folder: Path, sql: str) -> Any:
    """``sql``'s result as one table, run under the operating system's limits
    (:func:`privgames.analysis.sandbox.run_limited`): one line if it fails or passes them."""
    from privgames.analysis.results import query_table
    from privgames.analysis.sandbox import run_limited
    from privgames.environments.config import ConfigError

    try:
        table = run_limited(query_table, folder, sql, QUERY_ROWS, QUERY_COLUMNS, QUERY_CELLS,
                            QUERY_CHARS, QUERY_MEMORY, seconds=QUERY_SECONDS,
                            memory=QUERY_MEMORY)
    except ConfigError as err:  # a user's SQL: show DuckDB's message or the limit, as text
        return solara.Error(str(err))
    with solara.Column() as column:
        if table.note:
            solara.Text(table.note)
        Table(table.header, table.rows)
    return column


routes = [solara.Route(path="/", component=Index, label="privgames"),
          *[solara.Route(path=route, component=lazy_page(route), label=route)
            for route, _ in _games()],
          solara.Route(path="results", component=Results, label="Results")]
threading.Thread(target=_pages, name="privgames-pages", daemon=True).start()
