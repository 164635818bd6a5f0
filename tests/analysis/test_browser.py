"""The pages in a real browser: ``privgames viz`` served, Debian's Chromium driven by Playwright.

Each page is loaded, one parameter changed (the seed, by keyboard on its slider), the model
reset and stepped N times; every number the page shows must equal the same environment's own
reading after N steps, built here from the page's inputs. Screenshots are kept in
``PRIVGAMES_SCREENSHOTS`` (default: the test's temporary folder) and must not be blank.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from privgames.analysis.pages import PageModel, all_pages, format_reading
from tests.analysis.page_answers import live_sql_box

pytestmark = pytest.mark.browser
TOKEN = ""  # the running server's (set by the server fixture)
STEPS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory) -> Path:
    from privgames.analysis import api

    folder = tmp_path_factory.mktemp("results")
    result = api.run("budget-us-bounds", workers=0, out=folder)
    result.plot().savefig(folder / "budget-us-bounds.png", dpi=60)
    # What a hostile results folder can hold: HTML, a handler, a javascript: link in its report
    (folder / "report.md").write_text(
        "# Report\n\n<img src=x onerror=\"document.title='pwned-report'\">\n\n"
        "[a link](javascript:document.title='pwned-link')\n\n"
        "| claim | verdict |\n|---|---|\n| <b onmouseover=alert(1)>bold</b> | holds |\n\n"
        "![budget-us-bounds](budget-us-bounds.png)\n")
    return folder


@pytest.fixture(scope="module")
def server(results_folder):
    """The server's port; its first line printed the address with the per-start token, which
    :func:`page` opens once so that the browser holds the cookie."""
    global TOKEN
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", "viz", "--port",
                             str(port), "--results", str(results_folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = proc.stdout.readline()
    found = re.fullmatch(rf"privgames: serving http://127\.0\.0\.1:{port}/results"
                         r"\?token=([\w-]{40,}) \(Ctrl-C stops\)\n", printed)
    assert found, printed
    TOKEN = found.group(1)
    deadline = started + 60
    while time.perf_counter() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("privgames viz did not listen within 60 s")
    print(f"page server listening after {time.perf_counter() - started:.2f} s")
    yield port
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err, err


@pytest.fixture
def page(browser, server):
    tab = browser.new_page(viewport={"width": 1400, "height": 1000})
    tab.goto(f"http://127.0.0.1:{server}/?token={TOKEN}")  # the cookie, then the index
    yield tab
    tab.close()


def _open(tab, port: int, route: str) -> None:
    tab.goto(f"http://127.0.0.1:{port}/{route}")
    tab.get_by_role("button", name="Step").wait_for(timeout=60_000)


def _slider(tab, label: str):
    return tab.get_by_role("slider", name=re.compile(rf"^{re.escape(label)}\b"))


def _press(tab, label: str, key: str) -> None:
    slider = _slider(tab, label)
    slider.focus()
    slider.press(key)


def _reset_and_step(tab, steps: int) -> None:
    tab.get_by_role("button", name="Reset").click()
    tab.get_by_text("Step: 0", exact=True).wait_for()
    for k in range(1, steps + 1):
        tab.get_by_role("button", name="Step").click()
        tab.get_by_text(f"Step: {k}", exact=True).wait_for(timeout=60_000)


def _shown(tab, label: str) -> str:
    row = tab.locator("tr", has=tab.get_by_text(label, exact=True))
    return row.locator("td").nth(1).inner_text().strip()


def _not_blank(path: Path) -> None:
    pixels = matplotlib.image.imread(path)[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert colours.shape[0] > 50 and pixels.std() > 0.05, f"{path} looks blank"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("PRIVGAMES_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


@pytest.mark.parametrize("route", list(all_pages()))
def test_a_page_shows_the_models_own_numbers_after_n_steps(server, page, route, shots):
    spec = all_pages()[route]
    _open(page, server, route)
    _press(page, "seed", "ArrowRight")  # seed 0 -> 1
    _reset_and_step(page, STEPS)
    page.wait_for_timeout(300)  # the figures follow the numbers in the same render
    model = PageModel.of(spec)(seed=1, **spec.defaults())
    for _ in range(STEPS):
        model.step()
    for label, value in model.readings().items():
        assert _shown(page, label) == format_reading(value), label
    assert page.locator("img").count() >= 2  # the agents and the measurement
    path = shots / f"page-{route}.png"
    page.screenshot(path=path, full_page=True)
    _not_blank(path)


def test_one_of_a_thousand_learners_is_inspected_as_its_mesa_agent(server, page, shots):
    """Issue 41: the learning page at 1,000 agents (the agents input's end) with the agent
    input at its end (past the population: the last agent) shows that agent's view, read
    from its shard (its type, the action it played, its iterate, the predicted action and its
    cost), as the same model in this process reads it."""
    spec = all_pages()["learning"]
    _open(page, server, "learning")
    _press(page, "agents", "End")
    _press(page, "agent", "End")
    _reset_and_step(page, 2)
    page.wait_for_timeout(300)
    params = spec.model_params()
    model = PageModel.of(spec)(**{**spec.defaults(), "agents": params["agents"]["max"],
                                  "agent": params["agent"]["max"]})
    for _ in range(2):
        model.step()
    readings = {k: v for k, v in model.readings().items() if k.startswith("agent 1000:")}
    assert {"agent 1000: beta", "agent 1000: action played", "agent 1000: its cost"} <= set(
        readings)
    for label, value in readings.items():
        assert _shown(page, label) == format_reading(value), label
    page.screenshot(path=shots / "page-learning-1000.png", full_page=True)


def test_a_bad_value_shows_the_configs_message_and_nothing_crashes(server, page):
    _open(page, server, "bas")
    _press(page, "K", "Home")  # K = 2
    _press(page, "subsequences", "End")  # 1,000 sub-sequences (K's end) of 2 users
    page.get_by_role("button", name="Reset").click()
    message = page.get_by_text(re.compile(r"privgames: error: subsequences=1000 is out of "
                                          "range"))
    message.wait_for()
    assert "[1, 2]" in message.inner_text()
    assert page.get_by_text(re.compile("subsequences=1000 is out of range")).count() == 1
    page.get_by_role("button", name="Step").click()  # stepping a refused model changes nothing
    page.get_by_text("Step: 1", exact=True).wait_for()
    assert message.is_visible()
    _press(page, "subsequences", "Home")  # a good value again: the page recovers
    _reset_and_step(page, 1)
    assert _shown(page, "rounds") == "1"


def test_the_server_listens_on_loopback_only(server):
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if state == "0A" and int(port, 16) == server:  # 0A: LISTEN
                listening.append(address)
    assert listening and set(listening) <= {"0100007F"}, listening  # 127.0.0.1


def test_the_results_page_shows_a_figure_and_answers_a_query(server, page, results_folder,
                                                             shots):
    page.goto(f"http://127.0.0.1:{server}/results")
    page.get_by_text("Results in").wait_for(timeout=60_000)
    figure = page.locator("img").first
    figure.wait_for()
    assert figure.evaluate("img => img.naturalWidth") > 100
    box = live_sql_box(page)
    box.fill("SELECT COUNT(*) AS n_rows, MAX(N) AS largest_n FROM results")
    box.press("Enter")
    rows = pd.read_parquet(results_folder / "budget-us-bounds.parquet")
    table = page.locator("table", has_text="n_rows")
    table.wait_for()
    assert table.locator("td").nth(0).inner_text().strip() == str(len(rows))
    assert table.locator("td").nth(1).inner_text().strip() == str(rows["N"].max())
    path = shots / "page-results.png"
    page.screenshot(path=path, full_page=True)
    _not_blank(path)


def test_without_the_token_the_page_is_refused(server, browser):
    tab = browser.new_page()
    response = tab.goto(f"http://127.0.0.1:{server}/results")
    assert response.status == 403 and "token" in tab.content()
    tab.close()


def test_no_value_or_report_line_runs_as_html(server, page):
    """A query's values and a results folder's report are text: no handler, no script, no
    ``javascript:`` link reaches the page."""
    page.goto(f"http://127.0.0.1:{server}/results")
    page.get_by_text("Results in").wait_for(timeout=60_000)
    title = page.title()
    box = live_sql_box(page)
    attack = "<img src=x onerror=\"document.title='pwned-query'\">"
    literal = attack.replace("'", "''")
    box.fill(f"SELECT '{literal}' AS \"<b>name</b>\"")
    box.press("Enter")
    cell = page.locator("td", has_text="onerror")
    cell.wait_for()
    assert cell.inner_text().strip() == attack  # shown as the text it is
    assert page.locator("th", has_text="<b>name</b>").count() == 1
    page.wait_for_timeout(500)
    assert page.title() == title and "pwned" not in page.title()
    assert page.locator("img[onerror], b[onmouseover], [href^='javascript']").count() == 0
    assert page.get_by_text("a link").count() == 1  # the link's text, without its target
    figure = page.locator("img").first  # the report's figure, inline, from the folder
    assert figure.evaluate("img => img.naturalWidth") > 100


@pytest.mark.parametrize("sql", ["COPY (SELECT 42) TO '{folder}/evil.parquet'",
                                 "SELECT * FROM read_csv('/etc/passwd')"])
def test_the_query_box_reaches_no_file(server, page, results_folder, sql):
    page.goto(f"http://127.0.0.1:{server}/results")
    box = live_sql_box(page)
    box.fill(sql.format(folder=results_folder))
    box.press("Enter")
    page.get_by_text(re.compile(r"^query (refused|failed): ")).wait_for()
    assert page.get_by_text(re.compile("query failed: query failed")).count() == 0
    assert not (results_folder / "evil.parquet").exists()
    assert page.get_by_text("root:x:0:0").count() == 0
