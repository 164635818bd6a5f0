"""Sphinx configuration of the privgames documentation site.

Build it with ``sphinx-build -W --keep-going -n docs docs/_build/html`` (``pip install
".[docs]"``). Before Sphinx reads the sources, :mod:`generate` writes the pages that restate
code (experiments, CLI, glossary) and copies the notebooks, which MyST-NB executes.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # noqa: E402 - needs the path above

generate.write_all()

project = "privgames"
author = "the privgames developers"
release = importlib.metadata.version("privgames")
version = release
copyright = "2026, the privgames developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
exclude_patterns = ["_build", "example_plugin", "screenshots", "**/.ipynb_checkpoints",
                    ".gitignore"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# Notebooks and executable Markdown pages run during the build; a cell that raises fails it.
nb_execution_mode = "cache"
nb_execution_cache_path = str(Path(__file__).resolve().parent / "_build" / "jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True
nb_merge_streams = True

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# privgames' ``Attributes:`` entries may name several fields at once (``low, high: ...``),
# as parameters.meanings reads them: rendered as a list, not as one attribute each.
napoleon_custom_sections = [("Attributes", "params_style")]

# Names of other libraries that a docstring or type hint mentions: there is no network for
# intersphinx here, so they are not links, and not warnings either. privgames' own names must
# resolve (``-n``).
nitpick_ignore = [("py:class", "Unit")]  # a type-checking-only name in a signature
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|pd|pandas|mesa|ray|matplotlib|plt|scipy|duckdb|pyarrow|"
               r"collections|typing|pathlib|argparse|concurrent|threading|os)(\..*)?"),
    (r"py:.*", r"(Any|Path|Mapping|Sequence|Callable|Iterable|Iterator|Figure|DataFrame|"
               r"Series|SeedSequence|Generator|ndarray|ArrayLike|optional|callable)"),
]

html_theme = "furo"
html_title = f"privgames {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
