"""The attacks on ``privgames viz`` of issue 30, each one refused: SQL that reaches files, writes or
runs two statements; a foreign Host, Origin or a missing token (HTTP and websocket); a path typed
into the kmeans page. The browser-side ones (a value or a report rendered as HTML) are in
``test_browser.py``."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from privgames.analysis.page_server import Guard, new_token
from privgames.analysis.results import query, write_parquet
from privgames.environments.config import ConfigError


@pytest.fixture
def folder(tmp_path) -> Path:
    write_parquet(pd.DataFrame({"metric": ["a", "b", "c"], "value": [1.0, 2.0, 3.0]}),
                  tmp_path / "exp.parquet")
    (tmp_path / "secret.txt").write_text("not for the page\n")
    return tmp_path


def test_a_select_over_the_results_works_and_is_capped(folder):
    frame = query(folder, "SELECT metric, value FROM results ORDER BY value DESC", max_rows=2)
    assert frame["value"].tolist() == [3.0, 2.0] and frame.attrs["truncated"]
    whole = query(folder, "WITH t AS (SELECT SUM(value) AS s FROM results) SELECT s FROM t")
    assert whole["s"].tolist() == [6.0] and not whole.attrs["truncated"]


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 42) TO '{folder}/evil.parquet'",
    "SELECT 1; COPY (SELECT 42) TO '{folder}/evil.parquet'",
    "ATTACH '{folder}/evil.db'; CREATE TABLE evil.t AS SELECT 1",
    "CREATE TABLE evil AS SELECT 1",
    "INSTALL httpfs",
    "SET enable_external_access = true",
])
def test_anything_but_one_select_is_refused_and_writes_nothing(folder, sql):
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(ConfigError, match="query refused: give one SELECT statement"):
        query(folder, sql.format(folder=folder))
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_text('{folder}/secret.txt')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM glob('{folder}/*')",
    "SELECT * FROM read_blob('{folder}/../../../etc/hostname')",
    "SELECT * FROM read_parquet('https://example.org/x.parquet')",
])
def test_no_file_or_network_beyond_the_parquet_files(folder, sql):
    with pytest.raises(ConfigError, match="Permission Error"):
        query(folder, sql.format(folder=folder))


def test_a_query_that_runs_too_long_is_stopped(folder):
    with pytest.raises(ConfigError, match=r"stopped after 0.5 s"):
        query(folder, "SELECT COUNT(*) FROM range(1000000000000) a, results", timeout=0.5)


def test_an_empty_query_is_one_line(folder):
    with pytest.raises(ConfigError, match=r"got none"):
        query(folder, "")


# The server's guard, driven as uvicorn drives it (an ASGI scope; the app behind it records
# whether it was reached).

PORT = 8123


def _call(guard: Guard | str | None, kind: str = "http", host: str = f"127.0.0.1:{PORT}",
          origin: str | None = None, cookie: str | None = None, query_string: str = "",
          path: str = "/results", method: str = "GET"):
    """Drive ``guard`` (or a new one with that token) with one request; return the paths the
    app behind it saw and what was sent back."""
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message):
        sent.append(message)

    if not isinstance(guard, Guard):
        guard = Guard(None, PORT, guard)
    guard.app = app
    headers = [(b"host", host.encode())]
    headers += [(b"origin", origin.encode())] if origin else []
    headers += [(b"cookie", cookie.encode())] if cookie else []
    scope = {"type": kind, "path": path, "root_path": "", "headers": headers,
             "query_string": query_string.encode(), "method": method}
    asyncio.run(guard(scope, None, send))
    return reached, sent


def _cookie(guard: Guard) -> str:
    """The cookie a browser gets for opening the token's address."""
    _, sent = _call(guard, query_string=f"token={guard.token}")
    return dict(sent[0]["headers"])[b"set-cookie"].decode().split(";")[0]


def _status(sent) -> int | str:
    return sent[0].get("status", sent[0]["type"])


def test_the_guard_lets_the_token_in_once_and_its_cookie_after():
    token = new_token()
    guard = Guard(None, PORT, token)
    reached, sent = _call(guard, query_string=f"token={token}&x=1")
    assert not reached and _status(sent) == 303
    headers = dict(sent[0]["headers"])
    assert headers[b"location"] == b"/results?x=1"  # the token leaves the address bar
    cookie = headers[b"set-cookie"].decode()
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    pair = cookie.split(";")[0]
    assert token not in pair  # another port's page may read the cookie: not the token
    for kind in ("http", "websocket"):
        assert _call(guard, kind, cookie=pair)[0] == ["/results"]
        assert _call(guard, kind, cookie=pair, origin=f"http://localhost:{PORT}")[0]
    # a page on another port may have set one more cookie of the same name: still let in
    assert _call(guard, cookie=f"privgames-{PORT}=junk; {pair}")[0] == ["/results"]
    # the cookie of another server start, or another port's, is refused
    assert not _call(Guard(None, PORT, token), cookie=pair)[0]
    assert not _call(Guard(None, PORT + 1, token), host=f"127.0.0.1:{PORT + 1}",
                     cookie=pair.replace(str(PORT), str(PORT + 1)))[0]


@pytest.mark.parametrize("kind", ["http", "websocket"])
@pytest.mark.parametrize("attack", [
    {},  # no token
    {"query_string": "token=wrong"},
    {"cookie": f"privgames-{PORT}=wrong"},
    {"good_cookie": True, "method": "POST"},  # a state change without this server's Origin
    {"good_cookie": True, "method": "POST", "origin": "http://127.0.0.1:9999"},
    {"host": f"evil.example:{PORT}", "good_cookie": True},  # DNS rebinding
    {"host": "127.0.0.1:9999", "good_cookie": True},
    {"origin": "http://evil.example", "good_cookie": True},  # another site's page
    {"origin": f"http://127.0.0.1:{PORT}.evil.example", "good_cookie": True},
])
def test_the_guard_refuses(kind, attack):
    guard = Guard(None, PORT, new_token())
    attack = dict(attack)
    if kind == "websocket" and "method" in attack:
        pytest.skip("a websocket has no method: its Origin is checked in the other cases")
    if attack.pop("good_cookie", False):
        attack["cookie"] = _cookie(guard)
    reached, sent = _call(guard, kind, **attack)
    assert not reached
    assert _status(sent) == (403 if kind == "http" else "websocket.close")


def test_every_response_forbids_framing_and_sniffing():
    """A page on another local port must not frame the pages (clickjacking): every response,
    the app's, the redirect and a refusal, says so."""
    guard = Guard(None, PORT, new_token())
    for sent in (_call(guard, cookie=_cookie(guard))[1],
                 _call(guard, query_string=f"token={guard.token}")[1], _call(guard)[1]):
        headers = dict(sent[0]["headers"])
        assert headers[b"x-frame-options"] == b"DENY"
        assert headers[b"content-security-policy"] == b"frame-ancestors 'none'"
        assert headers[b"x-content-type-options"] == b"nosniff"


@pytest.mark.parametrize("path", ["//evil.example/x", "///evil.example/x", "/\\evil.example"])
def test_the_token_redirect_stays_on_this_server(path):
    guard = Guard(None, PORT, new_token())
    _, sent = _call(guard, path=path, query_string=f"token={guard.token}")
    location = dict(sent[0]["headers"])[b"location"].decode()
    assert location.startswith("/") and not location.startswith("//")
    assert "\\" not in location


def test_a_path_beyond_latin_1_is_redirected_not_a_500():
    guard = Guard(None, PORT, new_token())
    _, sent = _call(guard, path="/€", query_string=f"token={guard.token}")
    assert _status(sent) == 303
    assert dict(sent[0]["headers"])[b"location"] == b"/%E2%82%AC"


def test_the_peer_of_a_loopback_connection_is_its_owner():
    """The guard's first check: the owner of the client's socket, which the kernel reports;
    a connection made here is this user's."""
    import os
    import socket

    from privgames.analysis.page_server import peer_uid

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            assert peer_uid(client.getsockname(), port) == os.getuid()
            assert peer_uid(("127.0.0.1", 1), port) is None
            server.accept()[0].close()
        if os.getuid() != 0 or not Path("/usr/bin/python3").exists():
            return  # becoming another user needs root
        other = subprocess.Popen(["/usr/bin/python3", "-I", "-c", "import socket, time; s = "
                                  f"socket.create_connection(('127.0.0.1', {port})); "
                                  "time.sleep(30)"], user=65534, group=65534, cwd="/")
        try:
            accepted, address = server.accept()
            assert peer_uid(address, port) == 65534  # the client's end: not the server's
            accepted.close()
        finally:
            other.kill()
            other.wait()


def test_no_token_still_checks_host_and_origin():
    assert _call(None)[0] == ["/results"]
    assert not _call(None, host=f"evil.example:{PORT}")[0]
    assert not _call(None, "websocket", origin="http://evil.example")[0]


def test_the_kmeans_page_opens_no_path_it_does_not_offer(tmp_path, monkeypatch):
    from privgames.analysis.page_server import DATA_ENV
    from privgames.analysis.pages import PageModel, all_pages

    page = all_pages()["kmeans"]
    offered = page.model_params()["data"]
    assert offered["type"] == "Select" and offered["values"] == ["unbalance", "birch3"]
    refused = PageModel.of(page)(**{**page.defaults(), "data": "/etc/passwd"})
    assert refused.env is None and "not offered on this page" in refused.error
    (tmp_path / "sub").mkdir()
    points = tmp_path / "sub" / "points.csv"
    points.write_text("x,y\n" + "\n".join(f"{i % 7},{i % 5}" for i in range(60)) + "\n")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert page.model_params()["data"]["values"] == ["unbalance", "birch3", str(points)]
    model = PageModel.of(page)(**{**page.defaults(), "data": str(points)})
    assert model.error is None and model.env.points.shape == (60, 2)


def test_a_page_refuses_a_model_larger_than_memory_whatever_the_browser_sends():
    """A slider offers SAR's K up to 300, but the browser can send any K: at 10^4 one round's
    attack would hold about 13 GiB (K^2 chains). The page refuses it by the memory guard,
    naming K, before building anything."""
    from privgames.analysis.pages import PageModel, all_pages

    page = all_pages()["sar"]
    model = PageModel.of(page)(**{**page.defaults(), "K": 10_000})
    assert model.env is None and model.error.startswith("K=10000 needs about")
    assert "lower K" in model.error
    assert PageModel.of(page)(**page.defaults()).error is None


def test_a_page_refuses_an_agent_that_is_not_a_positive_integer():
    """The ``agent`` input comes from the browser: anything but an integer >= 1 is the
    page's one-line message, not a traceback when the table is drawn."""
    from privgames.analysis.pages import PageModel, all_pages

    page = all_pages()["bas"]
    for bad in ("x", 0, 2.5):
        model = PageModel.of(page)(agent=bad, **page.defaults())
        assert model.env is None and model.error.startswith(f"agent={bad!r}")


# Hard limits (issue 43): the sandbox, the capped table, the pages' admissions, the folder.

def test_a_query_past_its_memory_or_time_is_stopped_by_the_operating_system(folder):
    """``list_sort`` never checks DuckDB's interrupt and ``unnest(range(3e8))`` allocates past
    DuckDB's own ``memory_limit``: in the child process both end at its limits, one line each,
    and the next query runs."""
    from privgames.analysis.results import query_table
    from privgames.analysis.sandbox import LimitExceeded, run_limited

    def run(sql: str, seconds: float = 10.0):
        return run_limited(query_table, folder, sql, 500, 50, 5000, 200, 2**27,
                           seconds=seconds, memory=2**27)

    with pytest.raises(LimitExceeded, match=r"^the query needs more than 128 MB of memory"):
        run("SELECT len(repeat('x', 2000000000)) AS n")  # 2 GB: past the whole address cap
    started = time.perf_counter()
    with pytest.raises(LimitExceeded, match=r"^the query stopped at 1 s \(its time limit\)$"):
        run("SELECT sum(a.range) FROM range(100000000000) a", seconds=1.0)
    assert time.perf_counter() - started < 5.0
    with pytest.raises(ConfigError, match=r"^query refused: give one SELECT"):
        run("COPY (SELECT 1) TO 'x.csv'")
    assert run("SELECT sum(value) AS s FROM results").rows == [["6.0"]]


def test_a_wide_or_long_result_is_cut_to_a_page_of_text_cells(folder):
    from privgames.analysis.results import query_table

    wide = ("SELECT " + ", ".join(f'range AS "c{i}""<b>"' for i in range(200))
            + ", repeat('x', 1000) AS long FROM range(500)")
    table = query_table(folder, wide, 500, 50, 5000, 200, 2**28)
    assert len(table.header) == 50 and len(table.rows) == 100  # 5,000 cells
    assert table.header[0] == 'c0"<b>'  # a name is text, quoted back as DuckDB needs
    assert table.note == "the first 100 rows and the first 50 of 201 columns are shown"
    cut = query_table(folder, "SELECT repeat('x', 1000) AS long", 500, 50, 5000, 200, 2**28)
    assert len(cut.rows[0][0]) == 200 and cut.rows[0][0].endswith("…")
    assert query_table(folder, "SELECT NULL AS n", 500, 50, 5000, 200, 2**28).rows == [[""]]


def test_a_results_folder_yields_only_its_regular_files_under_the_cap(tmp_path):
    import os

    from privgames.analysis.results import parquet_files, read_capped, write_parquet

    write_parquet(pd.DataFrame({"v": [1.0]}), tmp_path / "real.parquet")
    (tmp_path / "fig.png").write_bytes(b"\x89PNG")
    os.mkfifo(tmp_path / "fifo.png")
    os.mkfifo(tmp_path / "fifo.parquet")
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    (tmp_path / "passwd.parquet").symlink_to("/etc/passwd")
    (tmp_path / "inside.png").symlink_to(tmp_path / "fig.png")
    (tmp_path / "loop.png").symlink_to(tmp_path / "loop.png")
    (tmp_path / "big.png").write_bytes(b"x" * 101)
    assert [p.name for p in parquet_files(tmp_path)] == ["real.parquet"]
    read = {p.name: read_capped(p, tmp_path, 100) for p in sorted(tmp_path.glob("*.png"))}
    assert read == {"big.png": None, "fifo.png": None, "fig.png": b"\x89PNG",
                    "inside.png": b"\x89PNG", "loop.png": None, "zero.png": None}


def test_the_kmeans_page_offers_no_csv_that_leaves_its_folder_and_names_it_as_given(
        tmp_path, monkeypatch):
    import os

    from privgames.analysis.page_server import DATA_ENV
    from privgames.analysis.pages import all_pages
    from privgames.environments.kmeans_data import load_points

    good = tmp_path / "good.csv"
    good.write_text("x,y\n" + "\n".join(f"{i % 7},{i % 5}" for i in range(20)) + "\n")
    (tmp_path / "passwd.csv").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "fifo.csv")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    offered = all_pages()["kmeans"].model_params()["data"]["values"]
    assert offered == ["unbalance", "birch3", str(good)]
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "broken.txt")
    (tmp_path / "broken.txt").write_text("not, a\ncsv\n")
    with pytest.raises(ConfigError, match=rf"^data='{link}'"):  # not where it resolves
        load_points(str(link))


def test_every_bad_page_input_is_one_line_and_the_seed_is_checked():
    from privgames.analysis.pages import PageModel, all_pages

    page = all_pages()["pricing"]
    cases = [({"seed": -1}, r"^seed=-1 is out of range"),
             ({"seed": "abc"}, r"^seed='abc' is not an integer"),
             ({"N": "abc"}, r"^N='abc' is not an integer"),
             ({"alpha_mean": "[" * 20000}, r"^--set alpha_mean: JSON nested too deeply"),
             ({"alpha_mean": "[1, 2"}, r"^--set alpha_mean: bad JSON")]
    for change, message in cases:
        seed = change.pop("seed", 0)
        model = PageModel.of(page)(seed=seed, **{**page.defaults(), **change})
        assert model.env is None and re.match(message, model.error), model.error
        assert "\n" not in model.error and "Traceback" not in model.error
        model.step()  # a refused model steps as nothing
        assert not model.running


def test_a_step_that_raises_ends_the_run_with_one_line(monkeypatch):
    from privgames.analysis.pages import PageModel, all_pages

    page = all_pages()["ppsp"]
    model = PageModel.of(page)(**page.defaults())

    def broken() -> None:
        raise FloatingPointError("a solver stopped converging\nwith a second line")

    monkeypatch.setattr(model.env, "step", broken)
    model.step()
    assert model.error == ("FloatingPointError: a solver stopped converging (not a value this "
                           "page can run)")
    assert not model.running


def test_pages_together_cannot_pass_the_budget_and_the_refusal_says_by_how_much(monkeypatch):
    """Seven pages of ``bas K=10000 d=10000`` each fit the memory guard (1.6 GiB) and together
    killed the server: the ledger admits pages while their sum fits the budget, then refuses
    naming K and a value that fits; a page collected gives its room back (here at a tenth of
    the sizes: K = d = 3000, about 0.26 GiB a page, against 0.6 GiB)."""
    import gc

    from privgames.analysis import pages
    from privgames.analysis.pages import Admissions, PageModel, all_pages

    monkeypatch.setattr(pages, "LIVE", Admissions())
    pages.LIVE.budget = 0.6 * 2**30
    page = all_pages()["bas"]
    big = {**page.defaults(), "K": 3000, "d": 3000}
    admitted = [PageModel.of(page)(**big) for _ in range(2)]
    assert all(m.error is None for m in admitted)
    refused = PageModel.of(page)(**big)
    found = re.fullmatch(r"K=3000 needs about 2\d\d MiB of memory; this server's pages may "
                         r"still take (\S+) MiB \(of 614 MiB\): lower K to (\d+) or less, or "
                         r"close another page", refused.error)
    assert found and refused.env is None, refused.error
    smaller = PageModel.of(page)(**{**big, "K": int(found.group(2))})
    assert smaller.error is None  # the suggested value fits
    del admitted, smaller
    gc.collect()
    assert pages.LIVE.held() == (0, 0.0)
    assert PageModel.of(page)(**big).error is None


def test_live_models_are_capped(monkeypatch):
    from privgames.analysis import pages
    from privgames.analysis.pages import MAX_MODELS, Admissions, PageModel, all_pages

    monkeypatch.setattr(pages, "LIVE", Admissions())
    page = all_pages()["ppsp"]
    held = [PageModel.of(page)(**page.defaults()) for _ in range(MAX_MODELS)]
    assert all(m.error is None for m in held)
    assert PageModel.of(page)(**page.defaults()).error == (
        f"this server already runs {MAX_MODELS} pages' models (its limit): close a page, or "
        "wait a minute after closing one")
    held.pop()
    assert PageModel.of(page)(**page.defaults()).error is None


def test_a_page_whose_step_would_pass_the_work_limit_is_refused_with_a_value_that_fits(
        monkeypatch):
    from privgames.analysis import pages
    from privgames.analysis.pages import PAGE_SECONDS, Admissions, PageModel, all_pages
    from privgames.environments.config import footprint_of

    monkeypatch.setattr(pages, "LIVE", Admissions())
    pages.LIVE.budget = float("inf")  # the work limit alone
    page = all_pages()["apes"]
    model = PageModel.of(page)(**{**page.defaults(), "n": 10**6})
    found = re.fullmatch(r"n=1000000 would take about (\S+) s a step on this page, above its "
                         rf"limit of {PAGE_SECONDS:g} s: lower n to (\d+) or less", model.error)
    assert found and model.env is None, model.error
    assert float(found.group(1)) > PAGE_SECONDS
    fits = page.config_type(**{**page.values(), "n": int(found.group(2))})
    assert page.step_seconds(fits, footprint_of(fits)) <= PAGE_SECONDS


def test_a_refusal_names_the_parameter_that_drives_the_memory():
    """BAS at ``rounds=1e12`` was refused naming ``replications=1000``: the per-round records
    (``rounds x K``) drive it."""
    from privgames.environments.bas_chain import BASChainConfig

    assert BASChainConfig(rounds=10**12).footprint().driver == "rounds"
    assert BASChainConfig(replications=10**9).footprint().driver == "replications"
    assert BASChainConfig(K=10_000, d=10_000).footprint().driver == "K"


def test_the_memory_budget_is_the_least_of_the_machine_the_cgroup_and_the_address_space():
    """Under ``RLIMIT_AS`` (set in a child, as a test or a service manager would) the budget
    follows the cap, not the host's ``MemAvailable``."""
    import subprocess
    import sys

    code = ("import resource; from privgames.analysis.guard import available_memory, "
            "address_space; held = address_space(); resource.setrlimit("
            "resource.RLIMIT_AS, (int(held) + 2**30, resource.RLIM_INFINITY)); "
            "print(available_memory() / 2**30)")
    room = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)
    assert 0.9 < room <= 1.0


def test_a_model_collected_during_an_admission_does_not_deadlock(monkeypatch):
    """The collector may free an old model (Mesa's models are cycles) inside an admission,
    which holds the ledger's lock: its release must not wait for that lock (it did, and hung
    the suite). Here the collector runs exactly there, where reading the memory allocates."""
    import gc
    import threading

    from privgames.analysis import pages
    from privgames.analysis.pages import Admissions, PageModel, all_pages

    monkeypatch.setattr(pages, "LIVE", Admissions())
    monkeypatch.setattr(pages, "available_memory", lambda: (gc.collect(), 2.0**40)[1])
    page = all_pages()["ppsp"]
    errors = []

    def admit_many() -> None:
        try:
            for _ in range(5):  # each drops the last, a cycle left to the collector
                assert PageModel.of(page)(**page.defaults()).error is None
        except AssertionError as err:
            errors.append(err)

    worker = threading.Thread(target=admit_many, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "an admission waited for itself"
    assert not errors and pages.LIVE.held()[0] <= 1
