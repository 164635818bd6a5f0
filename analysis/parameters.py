"""What an experiment's parameters are: name, type, default, allowed values and meaning.

One source for ``privgames show``, ``privgames run NAME --help`` and the pages' inputs
(:mod:`privgames.analysis.pages`): the allowed values are read from the config dataclass's own
validators (each is handed a probe value and the :class:`~privgames.environments.config.Allowed`
its :class:`~privgames.environments.config.ConfigError` carries is kept), the meaning from the
dataclass's ``Attributes:`` docstring. Nothing is written twice, so the command line, the pages
and ``--set`` cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privgames.analysis.experiments import Experiment, paper_title
from privgames.environments.config import Allowed, ConfigError

#: A field's head in an ``Attributes:`` block: one or more names (in double backticks or
#: not), an optional parenthesis, a colon; at an entry's start (an unindented line of the
#: dedented block, not a continuation line) or after a sentence or a ``;``.
_HEAD = re.compile(r"(?:(?<=\n)|(?<=\. )|(?<=; ))((?:``)?[A-Za-z_]\w*(?:``)?"
                   r"(?:,\s+(?:``)?[A-Za-z_]\w*(?:``)?)*)(?: \([^)]*\))?:\s")


class _Probe:
    """A value no validator accepts, so each one reports what it does accept."""

    def __repr__(self) -> str:
        return "<probe>"


@dataclass(frozen=True)
class Parameter:
    """One settable parameter of an experiment.

    Attributes:
        name: as given to ``--set``.
        type: the config field's annotation (``int`` for ``populations``).
        default: the value at quick scale; ``paper``: at paper scale (the same if unchanged).
        allowed: what the config's validator accepts (``None``: no single range, e.g. an
            optional list; the meaning says what is expected).
        meaning: one line from the config's docstring.
        swept: whether it is one of the experiment's grid axes (a list runs each value).
    """

    name: str
    type: str
    default: Any
    paper: Any
    allowed: Allowed | None
    meaning: str
    swept: bool


def meanings(config_type: type) -> dict[str, str]:
    """Each field's first sentence in the dataclass's ``Attributes:`` docstring (a field
    described only inside another's entry gets that sentence)."""
    doc = (config_type.__doc__ or "").split("Attributes:", 1)[-1]
    doc = "\n" + textwrap.dedent(doc)
    heads = list(_HEAD.finditer(doc))
    ends = [h.start() for h in heads[1:]] + [len(doc)]
    entries: dict[str, str] = {}
    sentences: list[str] = []
    for head, end in zip(heads, ends, strict=False):  # no heads: no entries
        text = _sentences(doc[head.end(): end])
        sentences += text
        for name in head.group(1).split(","):
            entries.setdefault(name.strip().strip("`"), next(iter(text), ""))
    out = {}
    for f in dataclasses.fields(config_type):
        mentions = [s for s in sentences if f"``{f.name}``" in s]
        out[f.name] = entries.get(f.name) or (mentions[0] if mentions else "")
    return out


def _sentences(text: str) -> list[str]:
    """``text`` cut at each ``.`` or ``;`` that ends a clause outside parentheses."""
    flat = " ".join(text.split())
    out, depth, start = [], 0, 0
    for i, ch in enumerate(flat):
        depth += (ch in "([") - (ch in ")]")
        if ch in ".;" and depth == 0 and flat[i + 1: i + 2] in (" ", ""):
            out.append(flat[start:i].strip())
            start = i + 1
    return [s for s in [*out, flat[start:].strip()] if s]


def allowed_values(config_type: type, name: str, values: Mapping[str, Any]) -> Allowed | None:
    """What ``config_type``'s validator accepts for ``name``, the other fields at ``values``:
    the config is built with a probe in ``name`` and the validator's error says."""
    try:
        config_type(**{**values, name: _Probe()})
    except ConfigError as err:
        if err.parameter is not None and err.parameter.split("[")[0] == name:
            return err.allowed
    except Exception:  # noqa: BLE001 - a field used before it is checked: no single range
        return None
    return None


def describe(experiment: Experiment) -> list[Parameter]:
    """Every parameter ``--set`` accepts for ``experiment``, in the config's field order."""
    quick = experiment.resolve()
    paper = experiment.resolve(scale="paper")
    point = {**quick, **experiment.points(quick)[0]}
    values = {f.name: point[f.name] for f in dataclasses.fields(experiment.config_type)}
    meaning = meanings(experiment.config_type)
    out = []
    for f in dataclasses.fields(experiment.config_type):
        out.append(Parameter(f.name, _type_name(f.type), quick[f.name], paper[f.name],
                             allowed_values(experiment.config_type, f.name, values),
                             meaning[f.name], f.name in experiment.grid))
    out.append(Parameter("populations", "int", quick["populations"], paper["populations"],
                         Allowed("int", 1), "independent populations per grid point", False))
    return out


def _type_name(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__",
                                                                  str(annotation))


def _value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list | tuple | bool | None) else str(value)


def show(experiment: Experiment, results: Path | None = None) -> str:
    """The text of ``privgames show``: the parameters, the grid at both scales and the claims
    judged (with their verdicts when ``results`` holds a run of the experiment)."""
    params = describe(experiment)
    lines = [f"{experiment.name}: {experiment.description}"]
    lines.append(f"paper: {paper_title(experiment.source)}")
    lines += ["", "parameters (--set NAME=VALUE; JSON values, a list on a swept parameter runs "
                  "each value):"]
    rows = [("name", "type", "default", "allowed", "meaning")]
    rows += [(p.name, p.type, "swept, below" if p.swept else _value(p.default),
              str(p.allowed) if p.allowed else "see meaning", p.meaning) for p in params]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
              for r in rows]
    swept = [p for p in params if p.swept or p.default != p.paper]
    lines += ["", "grid and scales (quick -> --scale paper):"]
    lines += [f"  {p.name}{' (swept)' if p.swept else ''}: {_value(p.default)} -> "
              f"{_value(p.paper)}" for p in swept]
    lines += ["", "claims judged:"]
    lines += _claims(experiment, results)
    return "\n".join(lines)


def _claims(experiment: Experiment, results: Path | None) -> list[str]:
    if experiment.claims is None:
        return ["  none: a measurement without a printed claim"]
    summary_path = None if results is None else results / f"{experiment.name}.summary.json"
    if summary_path is None or not summary_path.exists():
        return [f"  stated with their verdicts after a run: privgames run {experiment.name}, then"
                f" privgames show {experiment.name} --out RESULTS"]
    from privgames.analysis.results import read_json

    try:
        summary = read_json(summary_path)
        judged = [claim.verdict() + (claim.claim,) for claim in experiment.claims(summary)]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError,
            AttributeError, RecursionError) as err:  # unreadable, or JSON of another shape
        raise ConfigError(f"--out {results}: {summary_path.name} cannot be read as "
                          f"{experiment.name}'s summary ({type(err).__name__}: "
                          f"{str(err)[:80]}); run the experiment again: privgames run "
                          f"{experiment.name} --out {results}") from None
    out = []
    for verdict, detail, claim in judged:
        out.append(f"  [{verdict}] {claim} ({detail})")
    return out
