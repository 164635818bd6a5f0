"""The documentation site (issue 42): it builds with warnings as errors, executing every
notebook; each experiment has its generated page with its figure; a browser finds the home
page, an experiment's figure, ``privgames.run``'s API entry and the search; and the README stays
short and true to the code."""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest

from privgames.analysis import experiments

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def site(tmp_path_factory, quick_reproduction) -> Path:
    """The site as the README builds it (``sphinx-build -W --keep-going -n``, a fresh
    environment), its experiment pages from the session's quick reproduction."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PRIVGAMES_DOCS_RESULTS": str(quick_reproduction)}
    done = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n",
                           "-D", "nb_execution_mode=force",
                           "-q", "docs", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.docs
def test_every_experiment_has_its_page_with_parameters_claims_and_figure(site):
    for e in experiments.all_experiments():
        page = (site / "reference" / "experiments" / f"{e.name}.html").read_text()
        assert "Parameters" in page and "Claims" in page and "Summary" in page, e.name
        assert all(f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{c}"
                   in page for c in ("metric", "value", "population")) or e.name in (
                       "learning-dynamics",), e.name
        if e.plot is not None:
            figure = site / "_images" / f"{e.name}.png"
            assert figure.stat().st_size > 10_000, e.name
            assert f"{e.name}.png" in page, e.name


@pytest.mark.slow
@pytest.mark.docs
def test_every_notebook_is_rendered_with_its_figures(site):
    for notebook in NOTEBOOKS:
        page = (site / "tutorials" / "notebooks" / f"{notebook.stem}.html").read_text()
        assert page.count("<img") >= 2, notebook.stem
        assert "Traceback" not in page, notebook.stem
    assert "<img" in (site / "tutorials" / "first-experiment.html").read_text()


@pytest.mark.slow
@pytest.mark.docs
def test_every_section_of_the_site_is_there(site):
    for page in ("index", "tutorials/first-experiment", "tutorials/first-page",
                 "how-to/ray-cluster", "how-to/shards", "how-to/resume", "extending",
                 "how-to/query", "how-to/compare-with-paper", "reference/cli",
                 "reference/api", "reference/glossary", "errata", "explanation/chained-dp",
                 "explanation/pricing", "explanation/ppsp", "explanation/budget",
                 "explanation/apes", "explanation/privacy-accounting",
                 "explanation/reproducibility", "explanation/shard-engine",
                 "explanation/performance"):
        assert (site / f"{page}.html").exists(), page
    assert "Targets" in (site / "explanation" / "performance.html").read_text()


@pytest.mark.slow
@pytest.mark.docs
@pytest.mark.browser
def test_a_browser_reads_the_site(site, browser):
    """The home page with its picture, an experiment's figure, ``privgames.run``'s entry, and
    the search box finding "Clip-Laplace", served over loopback as a host would serve it."""
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    page = browser.new_page()
    loaded = "img => img.complete && img.naturalWidth > 0"
    try:
        page.goto(f"{base}/index.html")
        assert "privgames" in page.title()
        assert page.locator("article img").first.evaluate(loaded)
        page.goto(f"{base}/reference/experiments/bas-mse-vs-d.html")
        figure = page.locator("img[src$='bas-mse-vs-d.png']")
        assert figure.evaluate(loaded)
        page.goto(f"{base}/reference/api.html")
        entry = page.locator("[id='privgames.analysis.api.run']")
        assert entry.is_visible() and "seed" in entry.inner_text()
        page.goto(f"{base}/index.html")
        page.locator("input[name='q']").first.fill("Clip-Laplace")
        page.locator("input[name='q']").first.press("Enter")
        page.wait_for_selector("#search-results ul.search li a", timeout=30_000)
        hits = page.locator("#search-results ul.search li a").all_inner_texts()
        assert any("APES" in h or "Clip-Laplace" in h for h in hits), hits
    finally:
        page.close()
        server.shutdown()


def test_the_generated_pages_restate_the_code():
    """The CLI page holds every command's help, and the glossary every shared name with each
    of its meanings (from the configs' docstrings)."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import generate
    finally:
        sys.path.remove(str(ROOT / "docs"))
    cli = generate.cli_page()
    for command in ("list", "run", "show", "viz", "reproduce", "query"):
        assert f"## `privgames {command}`" in cli
    assert "--max-memory SIZE" in cli
    glossary = generate.glossary_page()
    k_row = next(line for line in glossary.splitlines() if line.startswith("| `K` |"))
    # users in the chain, and protocol steps in the ring: each family's own docstring
    assert "**bas**: number of users" in k_row and "**ppsp**:" in k_row


def test_a_metric_s_unit_is_read_from_its_name():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from generate import unit
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert unit("success_rate") == "proportion in [0, 1]"
    assert unit("success_rate_var") == "square of: proportion in [0, 1]"
    assert unit("success_rate_predicted") == unit("success_rate")
    assert unit("mse_n").startswith("count")
    assert unit("epsilon_paper") == unit("eps_central_eon") == unit("audit_eps_lower")
    assert unit("epsilon").startswith("epsilon")
    assert unit("eq10_is_equilibrium") == unit("converged") == "1 or 0 (yes or no)"
    assert unit("leader_steps_below") == unit("infinite_cost_rounds") == "count"
    assert unit("sigma2").startswith("squared data units")
    assert unit("sigma_H").startswith("data units")
    assert unit("beta_H") == ""  # a preference: no convention names its unit


def test_the_readme_is_short_and_lists_every_experiment():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    table = dict(re.findall(r"^\| `([\w-]+)` \| (.+?) \|$", text, flags=re.M))
    assert table == {name: line for name, (_, line) in experiments.catalogue().items()}
    for link in re.findall(r"\]\(((?:docs|notebooks)/[^)#]+)", text):
        assert (ROOT / link).exists(), link


def test_a_notebook_kernel_keeps_its_own_matplotlib_backend():
    """privgames selects Agg only where nothing chose a backend: in a notebook, whose kernel
    names its inline backend in ``MPLBACKEND``, figures still show."""
    code = "import privgames.analysis.figures, matplotlib; print(matplotlib.get_backend())"
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    inline = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    env.pop("MPLBACKEND")
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert inline == "module://matplotlib_inline.backend_inline"
    assert plain.lower() == "agg"
