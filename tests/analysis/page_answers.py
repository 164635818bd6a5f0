"""Waiting for a page's answer in a real browser, and typing into its text boxes without
losing the first Enter.

Solara binds a text box's Enter and focus-out in an effect that runs after it first draws the
box (``solara.components.input.use_change``), so on a page just loaded, under load, a value
typed and entered before that effect reaches the browser is dropped: with both cores busy,
2 of 26 runs of the PPSP text box test reset the page with the old ``leave_at`` (the page's
own "This run" line said so), and a CI run waited 30 s for a query that never ran.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

#: The results page's query box.
SQL_BOX = re.compile("SQL over the Parquet files")


def shown(tab, text: str, timeout_ms: int) -> None:
    """Wait for ``text`` on the page; if it never comes, fail with what the page shows."""
    from playwright.sync_api import TimeoutError as PageTimeout

    try:
        tab.get_by_text(text).first.wait_for(timeout=timeout_ms)
    except PageTimeout:
        pytest.fail(f"{text!r} not shown in {timeout_ms / 1000:g} s; the page shows: "
                    f"{tab.inner_text('body')[-800:]!r}")


def live_box(tab, label: str | re.Pattern, probe: str, answer: str,
             then: Callable[[], None] | None = None, seconds: float = 60.0):
    """The text box labelled ``label``, once it is known to take what is typed: ``probe``
    typed and entered (then ``then``, e.g. a Reset click) until the page shows ``answer``.

    The probe must be harmless to enter twice; what the test types next then arrives once.
    Fails with the page's text if ``answer`` never shows within ``seconds``.
    """
    from playwright.sync_api import TimeoutError as PageTimeout

    box = tab.get_by_label(label)
    deadline = time.monotonic() + seconds
    while True:
        box.fill(probe)
        box.press("Enter")
        if then is not None:
            then()
        if time.monotonic() > deadline:
            shown(tab, answer, 3_000)
            return box
        try:
            tab.get_by_text(answer).first.wait_for(timeout=3_000)
            return box
        except PageTimeout:
            continue


def live_sql_box(tab):
    """The results page's query box, once a probe query's answer shows."""
    return live_box(tab, SQL_BOX, "SELECT 'box live' AS probe", "box live")
