"""``privgames reproduce``: every experiment, its figure, and a Markdown report."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from privgames.analysis import experiments
from privgames.analysis.cli import run_experiment
from privgames.analysis.results import read_parquet


def reproduce(out: Path, scale: str = "quick", seed: int = 0, workers: int | None = None,
              address: str | None = None) -> Path:
    """Run all registered experiments into ``out``; return the report's path."""
    out = Path(out)
    sections = [f"# privgames reproduction ({scale} scale, seed {seed})\n"]
    for e in experiments.all_experiments():
        summary = run_experiment(e.name, {}, seed, workers, address, out, scale)
        figure = None
        if e.plot is not None:
            fig = e.plot(read_parquet(out / f"{e.name}.parquet"))
            figure = f"{e.name}.png"
            fig.savefig(out / figure, dpi=110)
            plt.close(fig)
        sections.append(_section(e, summary, figure))
    path = out / "report.md"
    path.write_text("\n".join(sections))
    return path


def _section(e: experiments.Experiment, summary: dict, figure: str | None) -> str:
    lines = [f"## {e.name}\n", f"{e.description}\n"]
    table = summary.get("table")
    scalars = {k: v for k, v in summary.items()
               if k not in ("table", "parameters") and not isinstance(v, list | dict)}
    lines.append(pd.DataFrame([scalars]).T.rename(columns={0: "value"}).to_markdown())
    if table:
        lines += ["", "Predicted (eq 9) vs measured MSE, mean over populations:", "",
                  pd.DataFrame(table).to_markdown(index=False, floatfmt=".4g")]
    if figure:
        lines.append(f"\n![{e.name}]({figure})\n")
    return "\n".join(lines) + "\n"
