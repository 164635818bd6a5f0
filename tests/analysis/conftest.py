"""Fixtures of the pages' browser tests: Debian's Chromium driven by Playwright."""

from __future__ import annotations

from pathlib import Path

import pytest

#: Debian's Chromium (Playwright's own browser download cannot work here; .ci/run installs it).
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for one test module; the test is skipped, saying why, where
    Playwright or Chromium is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra installs it")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield b
        b.close()
