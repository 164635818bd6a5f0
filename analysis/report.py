"""``privgames reproduce``: every experiment, its figure, and a report that judges each claim.

``report.md`` opens with a one-screen summary (per paper: claims that hold, are bounds, or
fail), then per experiment the claims table with its verdicts, the summary's numbers, its
table under a caption saying what it holds, and the figure.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pandas as pd

from privgames.analysis import api
from privgames.analysis import experiments as registry
from privgames.analysis.claims import VERDICTS
from privgames.analysis.results import write_json, write_text

LEGEND = ("**holds**: equal within 3 standard errors (Monte-Carlo figures; the largest of m "
          "z-scores is held to the family-wise 3-sigma threshold, Bonferroni) or within the "
          "stated tolerance (deterministic figures). **bound**: an inequality that the "
          "measurement satisfies (by more than 3 standard errors, when it has one), with its "
          "slack. **fails**: the measurement contradicts the printed claim (an inequality: by "
          "more than 3 standard errors); the erratum in `docs/errata.md` explains it, or it is "
          "marked unexplained. **not resolved**: an inequality within 3 standard errors of its "
          "bound, which the data do not decide. **too few runs**: the same, for a claim on "
          "runs, with about how many would decide it. **not applicable**: the paper's reference "
          "does not apply to the run, or nothing was measured, with the reason.")


def reproduce(out: Path, scale: str = "quick", seed: int = 0, workers: int | str | None = "auto",
              address: str | None = None, max_memory: float | None = None,
              max_work: float | None = None, progress: bool = True) -> Path:
    """Run all registered experiments into ``out``; write figures, ``report.md`` and
    ``timings.json`` (each experiment's wall time in seconds, run and figure, and the total).
    An experiment already finished in ``out`` by the same parameters, seed and code (after an
    interruption) is kept, not run again."""
    out = Path(out)
    sections, tally, seconds = [], [], {}
    for e in registry.all_experiments():
        start = time.perf_counter()
        result = api.run(e.name, seed=seed, workers=workers, address=address, out=out,
                         scale=scale, progress=progress, max_memory=max_memory,
                         max_work=max_work, keep_finished=True)
        claims = result.claims()
        drawn = result.save_figure(out)
        figure = None if drawn is None else drawn.name
        seconds[e.name] = time.perf_counter() - start
        tally.append((e.source or "learners in all five games", e.name, claims, seconds[e.name]))
        sections.append(_section(e, result.summary, claims, figure))
    head = [f"# privgames reproduction ({scale} scale, seed {seed})\n", "## Summary\n",
            _summary(tally), "", LEGEND, ""]
    path = out / "report.md"
    write_text("\n".join(head + sections), path)
    write_json({"scale": scale, "workers": workers, "seconds": seconds,
                "total": sum(seconds.values())}, out / "timings.json")
    return path


def _counts(claims: pd.DataFrame) -> dict[str, int]:
    found = Counter(claims["verdict"])
    return {v: found.get(v, 0) for v in VERDICTS}


def _summary(tally: list[tuple[str, str, pd.DataFrame, float]]) -> str:
    """Counts per paper, then every failing claim on a line of its own with its experiment."""
    per_paper: dict[str, Counter] = {}
    failing = []
    for paper, name, claims, _ in tally:
        per_paper.setdefault(paper, Counter()).update(_counts(claims))
        for claim, detail in claims.loc[claims["verdict"] == "fails", ["claim", "detail"]].values:
            why = detail.split("; see errata: ", 1)
            reason = f"erratum: {why[1]}" if len(why) > 1 else "unexplained"
            failing.append(f"- **{name}**: {claim} ({reason})")
    used = [v for v in VERDICTS if any(c[v] for c in per_paper.values())]
    papers = pd.DataFrame([{"paper": p, **{v: c[v] for v in used}}
                           for p, c in per_paper.items()])
    return "\n".join([papers.to_markdown(index=False), "",
                      f"Failing claims ({len(failing)}):" if failing else "No claim fails.", "",
                      *failing])


def _section(e: registry.Experiment, summary: dict, claims: pd.DataFrame,
             figure: str | None) -> str:
    lines = [f"## {e.name}\n",
             f"{e.description} (paper: {registry.paper_title(e.source)})\n",
             "### Claims\n", _verdict_line(claims), "", claims_markdown(claims), "",
             "### Numbers\n",
             numbers_markdown(e, summary)]
    if figure:
        lines.append(f"\n![{e.name}]({figure})\n")
    return "\n".join(lines) + "\n"


def _verdict_line(claims: pd.DataFrame) -> str:
    counts = _counts(claims)
    return "Verdicts: " + (", ".join(f"{n} {v}" for v, n in counts.items() if n) or "none") + "."


def claims_markdown(claims: pd.DataFrame) -> str:
    """The claims table of :meth:`privgames.analysis.api.Result.claims`, verdicts in bold."""
    if claims.empty:
        return "No printed claim is tested here: the experiment explores the model."
    return claims.assign(verdict="**" + claims["verdict"] + "**").to_markdown(index=False)


def numbers_markdown(e: registry.Experiment, summary: dict) -> str:
    """A summary's scalars, its nested blocks and its ``table`` (under the experiment's
    caption), as Markdown tables."""
    scalars = {k: v for k, v in summary.items()
               if k not in ("table", "parameters", "experiment") and not isinstance(v, dict)}
    lines = [pd.DataFrame({"value": [_short(v) for v in scalars.values()]},
                          index=list(scalars)).to_markdown()]
    for key, value in summary.items():  # nested results (e.g. one block per weighting)
        if isinstance(value, dict) and key != "parameters":
            lines += ["", f"**{key}**\n", pd.DataFrame([value]).T.rename(
                columns={0: "value"}).to_markdown(floatfmt=".4g")]
    if summary.get("table"):
        lines += ["", e.table_caption or "Per grid point:", "",
                  pd.DataFrame(summary["table"]).to_markdown(index=False, floatfmt=".4g")]
    return "\n".join(lines)


def _short(value: object) -> str:
    if isinstance(value, list):
        shown = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value[:8])
        return f"[{shown}{', ...' if len(value) > 8 else ''}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
