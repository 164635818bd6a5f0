"""Screenshots of every page of ``privgames viz`` at 10 and at 1,000 agents, after 10 steps.

Run ``python docs/screenshots.py`` (needs the ``viz`` and ``test`` extras and Debian's
``chromium``); it writes ``docs/screenshots/page-<route>-<agents>.png``. A page is opened, its
agent count set on its slider (``End`` reaches 1,000 where that is the slider's end; SAR's
page stops at K = 300, APES starts at 1,000 users; k-means has no agents to count), Reset,
then Step ten times.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from privgames.analysis.pages import all_pages

OUT = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = "/usr/bin/chromium"
STEPS = 10


def _serve() -> tuple[subprocess.Popen, int, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "privgames.analysis", "viz", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    token = re.search(r"token=([\w-]+)", proc.stdout.readline()).group(1)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port, token
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("privgames viz did not listen")


def _set(tab, label: str, target: int, low: int) -> None:
    """Move the slider named ``label`` (whose lowest value is ``low``) to ``target`` by
    keyboard."""
    slider = tab.get_by_role("slider", name=re.compile(rf"^{re.escape(label)}\b"))
    slider.focus()
    if target >= 1000:
        slider.press("End")
        return
    slider.press("Home")
    for _ in range(target - low):
        slider.press("ArrowRight")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    proc, port, token = _serve()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=["--no-sandbox", "--disable-gpu"])
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.goto(f"http://127.0.0.1:{port}/?token={token}")
            for route, page in all_pages().items():
                for agents in (10, 1000) if page.size else (None,):
                    tab.goto(f"http://127.0.0.1:{port}/{route}")
                    tab.get_by_role("button", name="Step").wait_for(timeout=60_000)
                    if agents is not None:
                        slider = page.model_params()[page.size]
                        if agents != slider["value"]:
                            _set(tab, page.size, agents, slider["min"])
                    tab.get_by_role("button", name="Reset").click()
                    tab.get_by_text("Step: 0", exact=True).wait_for()
                    for k in range(1, STEPS + 1):
                        tab.get_by_role("button", name="Step").click()
                        tab.get_by_text(f"Step: {k}", exact=True).wait_for(timeout=120_000)
                    tab.wait_for_timeout(1500)
                    name = f"page-{route}" + ("" if agents is None else f"-{agents}")
                    tab.screenshot(path=OUT / f"{name}.png", full_page=True)
                    print(f"wrote {OUT / name}.png")
            browser.close()
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
