"""The ``privgames`` command: list, run and reproduce experiments, query results.

Bad input prints one line naming the problem and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privgames.analysis import api, experiments
from privgames.analysis.results import query
from privgames.environments.config import ConfigError


class UsageError(Exception):
    """A command line that cannot be run."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(message)


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs; values are JSON where they parse (numbers, lists), else strings."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r} is not of the form key=value")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError as err:
            if raw[:1] in "[{\"":
                raise UsageError(f"--set {key}: bad JSON {raw!r} ({err.msg})") from None
            out[key] = raw
    return out


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="privgames", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", help="registered experiments")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
        p.add_argument("--workers", type=int, default=None,
                       help="Ray workers (default: all cores; 0 runs serially without Ray)")
        p.add_argument("--address", default=None, help="Ray cluster address (or RAY_ADDRESS)")
        p.add_argument("--out", type=Path, default=Path("results"), help="output folder")
        p.add_argument("--scale", choices=("quick", "paper"), default="quick")

    run = sub.add_parser("run", help="run one experiment")
    run.add_argument("name")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--replications", type=int, default=None,
                     help="Monte-Carlo draws per population")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    common(run)
    rep = sub.add_parser("reproduce", help="every experiment, figures and a Markdown report")
    common(rep)
    q = sub.add_parser("query", help="SQL over a results folder (the view is 'results')")
    q.add_argument("sql")
    q.add_argument("--out", type=Path, default=Path("results"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        if args.command == "list":
            for e in experiments.all_experiments():
                print(f"{e.name:18s} {e.description}")
        elif args.command == "run":
            overrides = parse_set(args.sets)
            if args.replications is not None:
                overrides["replications"] = args.replications
            summary = api.run(args.name, seed=args.seed, workers=args.workers,
                              address=args.address, out=args.out, scale=args.scale,
                              progress=True, params=overrides).summary
            if args.json:
                print(json.dumps(summary))
            else:
                print(f"wrote {args.out / (args.name + '.parquet')} and the summary beside it")
        elif args.command == "reproduce":
            from privgames.analysis.report import reproduce

            path = reproduce(args.out, args.scale, args.seed, args.workers, args.address)
            print(f"wrote {path}")
        elif args.command == "query":
            print(query(args.out, args.sql).to_string(index=False))
    except (UsageError, ConfigError) as err:
        print(f"privgames: error: {err}", file=sys.stderr)
        return 2
    return 0
