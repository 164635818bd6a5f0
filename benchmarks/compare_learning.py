"""Issue 41's table: a round of ``learning-dynamics`` over the floor of its work (one ``exp``
plus ten ``multiply`` passes over the game's ``rows x actions``, each timed in its own run)
before and after, from two ``bench_learning.py`` reports, with the targets: Hedge and EXP3 at
least 0.4 of the floor in bas, sar, ppsp and pricing; pricing-bayes and bas-sequential at least
10x faster per agent-action; 10^6 pricing learners under 0.5 s a round in process.

Run ``python benchmarks/compare_learning.py BEFORE.json AFTER.json`` (``--out`` a results file
whose section of this table it replaces, e.g. ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from run import replace_section

HEADING = "## bench_learning: before and after the one engine (issue 41)"
MAIN = ("bas", "sar", "ppsp", "pricing")


def rows(before: dict, after: dict) -> list[str]:
    """One line per (agents, learner, game) measured after."""
    out = []
    for size, agents in (("", before.get("agents", 10_000)), ("million", 1_000_000)):
        b_all, a_all = (before.get(size, {}), after.get(size, {})) if size else (before, after)
        for learner in ("hedge", "exp3"):
            for game, a in a_all.get(learner, {}).items():
                b = b_all.get(learner, {}).get(game)
                speedup = None if b is None else b["round_s"] / a["round_s"]
                if game in MAIN:
                    target, met = ">= 0.4 of the floor", a["ratio_to_floor"] >= 0.4
                else:
                    target = ">= 10x faster"
                    met = speedup is not None and speedup >= 10.0
                if size and game == "pricing" and learner == "hedge":
                    target += "; < 0.5 s a round"
                    met = met and a["round_s"] < 0.5
                out.append(f"| {agents:,} | {game} | {learner} | "
                           + (f"{b['ratio_to_floor']:.3g} | {b['round_s']:.3g}" if b
                              else "not measured | –")
                           + f" | {a['ratio_to_floor']:.3g} | {a['round_s']:.3g} | "
                           + ("–" if speedup is None else f"{speedup:.2g}x")
                           + f" | {target} | {'yes' if met else 'no'} |")
    return out


#: The in-process engine of the morning of 2026-11-26, before pricing-bayes' first kernels
#: (the shard engine's page, "Every game over 2 shards"): Hedge, seconds a round at 10,240
#: agents. ``98ef0b8``, the "before" of the table, is the end of that day.
MORNING = {"pricing-bayes": 2.06, "bas-sequential": 1.33}


def morning(after: dict) -> str:
    """The 10x games' speed-up per agent-action against :data:`MORNING`."""
    agents = after.get("agents", 10_000)
    said = ", ".join(f"{game} {seconds / 10_240 / (after['hedge'][game]['round_s'] / agents):.0f}x"
                     for game, seconds in MORNING.items() if game in after.get("hedge", {}))
    return ("Against the engine of the morning of 2026-11-26 (the shard engine's page: Hedge at "
            f"10,240 agents, pricing-bayes 2.06 s and bas-sequential 1.33 s a round), per "
            f"agent-action: {said}.")


def section(before: dict, after: dict) -> list[str]:
    return [HEADING, "",
            "A round over the floor of its work (one exp + ten multiply passes over the game's "
            "rows x actions, timed in the same run as the round); before: the in-process engine "
            "of `98ef0b8`, after: one shard in process. `python benchmarks/compare_learning.py "
            "BEFORE.json AFTER.json` from two runs of `bench_learning.py`.", "",
            "| agents | game | learner | before: round / floor | before: s a round | "
            "after: round / floor | after: s a round | speed-up | target | met |",
            "|---|---|---|---|---|---|---|---|---|---|", *rows(before, after), "",
            morning(after)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="a results file to replace the section in")
    args = parser.parse_args()
    lines = section(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    if args.out:
        args.out.write_text(replace_section(args.out.read_text(), lines))
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
