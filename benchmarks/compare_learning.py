"""Issue 41's table: a round of ``learning-dynamics`` over the floor of its work (one ``exp``
plus ten ``multiply`` passes over the game's ``rows x actions``, each timed in its own run)
before and after, from two ``bench_learning.py`` reports, with the targets: Hedge and EXP3 at
least 0.4 of the floor in bas, sar, ppsp and pricing; pricing-bayes and bas-sequential at least
10x faster per agent-action; 10^6 pricing learners under 0.5 s a round in process.

Run ``python benchmarks/compare_learning.py BEFORE.json AFTER.json`` (``--out`` a results file
whose section of this table it replaces, e.g. ``benchmarks/RESULTS.md``; ``--scale`` the lines
of ``bench_shards.py --one`` runs at 10^6 agents, in process and on 2 shards). The section also
counts the learning code's lines at ``98ef0b8`` and now (git).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
from pathlib import Path

from run import replace_section

HEADING = "## bench_learning: before and after the one engine (issue 41)"
MAIN = ("bas", "sar", "ppsp", "pricing")


#: A population's mean round: its timed rounds' total over their number (what a run costs
#: per agent-action, where rounds differ in kind: pricing-bayes' analyst measures again in
#: the rounds where the last iterate moved).
MEAN = "mean_round_s"


def seconds(x: dict) -> str:
    """A population's median round, and its mean where measured."""
    return f"{x['round_s']:.3g}" + (f"; {x[MEAN]:.3g}" if MEAN in x else "")


def rows(before: dict, after: dict) -> list[str]:
    """One line per (agents, learner, game) measured after."""
    out = []
    for size, agents in (("", before.get("agents", 10_000)), ("million", 1_000_000)):
        b_all, a_all = (before.get(size, {}), after.get(size, {})) if size else (before, after)
        for learner in ("hedge", "exp3"):
            for game, a in a_all.get(learner, {}).items():
                b = b_all.get(learner, {}).get(game)
                speedup = None if b is None else b[MEAN] / a[MEAN] if MEAN in a and MEAN in b \
                    else b["round_s"] / a["round_s"]
                if game in MAIN:
                    target, met = ">= 0.4 of the floor", a["ratio_to_floor"] >= 0.4
                else:
                    target = ">= 10x faster"
                    met = speedup is not None and speedup >= 10.0
                if size and game == "pricing" and learner == "hedge":
                    target += "; < 0.5 s a round"
                    met = met and a["round_s"] < 0.5
                out.append(f"| {agents:,} | {game} | {learner} | "
                           + (f"{b['ratio_to_floor']:.3g} | {seconds(b)}" if b
                              else "not measured | –")
                           + f" | {a['ratio_to_floor']:.3g} | {seconds(a)} | "
                           + (f"{a['floor_ns_per_cell']:.2g}" if "floor_ns_per_cell" in a
                              else "–") + " | "
                           + ("–" if speedup is None else f"{speedup:.2g}x")
                           + f" | {target} | {'yes' if met else 'no'} |")
    return out


def whole_rows(after: dict) -> list[str]:
    """Whole default runs at 10^4 agents (``bench_learning``'s ``whole``): a run's mean round
    over the floor, after only (the engine before took 22-750 s a run)."""
    whole = after.get("whole")
    if not whole:
        return []
    out = []
    for learner in ("hedge", "exp3"):
        for game, a in whole[learner].items():
            target = ">= 0.4 of the floor" if game in MAIN else "–"
            met = ("yes" if a["ratio_to_floor"] >= 0.4 else "no") if game in MAIN else "–"
            kinds = " / ".join("–" if math.isnan(a.get(f"{kind}_round_s", math.nan))
                               else f"{a[f'{kind}_round_s'] * 1e3:.3g}"
                               for kind in ("moved", "still"))
            out.append(f"| {game} | {learner} | {a['ratio_to_floor']:.3g} | "
                       f"{a[MEAN]:.3g} | {a['iterate_moved']:.2f} | {kinds} | {target} | "
                       f"{met} |")
    rounds = next(iter(whole["hedge"].values()))["rounds"]
    return [f"Whole runs as a user runs them (`bench_learning.py --whole`): the {rounds} rounds "
            f"of the default horizon at {after.get('agents', 10_000):,} agents, each round "
            "after a floor pass; the run's mean round (what it costs a round) over the floor's "
            "median, the share of its rounds where the last iterate moved (the analyst then "
            "measures it again), and the median round of each kind. The table above times "
            "seven rounds early in a 70-round run, where Hedge's step is 2.7 times a default "
            "run's: for bas Hedge, whose iterate moves there in most rounds, a run's costliest "
            "stretch.", "",
            "| game | learner | round / floor | s a round (mean) | iterate moved | ms a round "
            "where it moved / stayed (medians) | target | met |",
            "|---|---|---|---|---|---|---|---|", *out, ""]


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


#: Before the one engine, pricing, Hedge, 10^6 agents (the issue's own figures): seconds a
#: round by shards (0: in process), and the driver's memory on 2 shards.
BEFORE_SCALE = {0: 3.0, 2: 1.4}
BEFORE_DRIVER_MB = 418
BEFORE_REV = "98ef0b8"
#: The learning engine's modules: the learners, the analyst, the games' rounds and theory's
#: grid games, the shards and the driver.
LEARNING_CODE = ("agents/learners.py", "environments/learning_", "environments/shards.py",
                 "mechanisms/learning_games.py", "mechanisms/bas_sequential.py")


def scale_rows(runs: list[dict]) -> list[str]:
    """The 10^6 rows: seconds a round before and after, and the memory after."""
    out = ["| agents | engine | before: s a round | after: s a round | after: driver peak MB "
           "| after: each shard MB |", "|---|---|---|---|---|---|"]
    for run in sorted(runs, key=lambda r: r["shards"]):
        engine = "one shard in process" if run["shards"] == 0 else f"{run['shards']} Ray shards"
        shards = ", ".join(f"{mb:,.0f}" for mb in run.get("shard_rss_mb", [])) or "–"
        out.append(f"| {run['agents']:,} | {engine} | {BEFORE_SCALE.get(run['shards'], '–')} | "
                   f"{run['round_s']:.3g} | {run['driver_peak_rss_mb']:,.0f} | {shards} |")
    return out


def source_lines(rev: str) -> dict[str, int]:
    """Lines of each learning module at ``rev`` (git)."""
    root = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    return {f: subprocess.run(["git", "show", f"{rev}:{f}"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.count("\n")
            for f in files if f.endswith(".py") and f.startswith(LEARNING_CODE)}


def lines_table() -> list[str]:
    before, after = source_lines(BEFORE_REV), source_lines("HEAD")
    out = [f"Source lines of the learning code (`git show REV:FILE`), `{BEFORE_REV}` and now:",
           "", "| module | before | after |", "|---|---|---|"]
    out += [f"| `{f}` | {before.get(f, '–')} | {after.get(f, '–')} |"
            for f in sorted(set(before) | set(after))]
    return out + [f"| total | {sum(before.values()):,} | {sum(after.values()):,} |"]


def bayes_bound(before: dict, after: dict) -> list[str]:
    """pricing-bayes' 10x: the mean rounds it asks for, what a round where the last iterate
    moved must compute by itself (``bench_learning``'s ``bayes_bound``), and where a round
    where it stayed spends its time (a profile)."""
    bound = after.get("bayes_bound")
    if not bound or "pricing-bayes" not in before.get("hedge", {}):
        return []
    rounds = {learner: (before[learner]["pricing-bayes"], after[learner]["pricing-bayes"])
              for learner in ("hedge", "exp3")}
    key = {learner: MEAN if MEAN in b and MEAN in a else "round_s"
           for learner, (b, a) in rounds.items()}
    target = {learner: b[key[learner]] / 10.0 for learner, (b, _) in rounds.items()}
    got = {learner: a[key[learner]] for learner, (_, a) in rounds.items()}
    moved = {learner: a.get("iterate_moved", math.nan) for learner, (_, a) in rounds.items()}
    return [f"pricing-bayes' 10x asks for a round of {target['hedge'] * 1e3:.1f} ms (Hedge) "
            f"and {target['exp3'] * 1e3:.1f} ms (EXP3) at {after['agents']:,} clients (the "
            f"mean of the timed rounds before, over 10); this run's are {got['hedge'] * 1e3:.1f} "
            f"and {got['exp3'] * 1e3:.1f} ms. In {moved['hedge']:.0%} and {moved['exp3']:.0%} of "
            "the timed rounds the last iterate moved and the analyst took every row's interim "
            f"cost over {bound['profiles']} type profiles: those parts by themselves "
            f"(`bench_learning.py`'s `bayes_bound`) take {bound['round_s'] * 1e3:.1f} ms, the "
            f"interim sums' additions {bound['interim_adds_s'] * 1e3:.1f} ms (128 rows of 42 "
            "candidates a client, padded to 48, every row kept in L1) and the learners' and the "
            f"analyst's arithmetic over the rows that play {bound['learning_s'] * 1e3:.1f} ms. "
            "The median EXP3 round is one where the iterate stayed. Profiled at 10^4 clients on "
            "2026-11-29 (7.6 ms a round, no floor between rounds), its compiled passes take "
            "5.8 ms: the learners' 2.5 (EXP3's estimates, then the weights and the rank of the "
            "rows that played, in place), the analyst's sums 1.8, the draw of every row 0.7, "
            "the costs of the rows that play 0.4 and the clients per type profile 0.3; the "
            "round's Python and its small numpy calls the other 1.8 ms. Five runs of EXP3 "
            "interleaved with `98ef0b8`'s (2026-11-29, after the learners took their next "
            "strategies in place) gave 9.8-11.4x, 10.4x their median: met by the median, in "
            "four of the five.", ""]


def floor_parts(after: dict) -> list[str]:
    """What the floor is made of on the machine of the run (``bench_learning``'s
    ``floor_parts``), so that a ratio can be read on another CPU."""
    parts = [after[key] for key in ("floor_parts", "million_floor_parts") if key in after]
    if not parts:
        return []
    said = "; ".join(f"at {p['agents']:,} x {p['actions']} cells, `exp` "
                     f"{p['exp_ns_per_cell']:.2g} ns a cell and `multiply` "
                     f"{p['multiply_ns_per_cell']:.2g}" for p in parts)
    return ["The floor on this run's machine, a pass by itself (`bench_learning.py`'s "
            f"`floor_parts`): {said}. The floor is one of the first and ten of the second; "
            "numpy's float64 `exp` is vectorized only with AVX-512, so its share of the floor "
            "depends on the CPU. A round's ns a cell is its ratio's inverse times the "
            "floor's ns a cell (the column above), which compares across machines.", ""]


def section(before: dict, after: dict, scale: list[dict] | None = None) -> list[str]:
    return [HEADING, "",
            "A round over the floor of its work (one exp + ten multiply passes over the game's "
            "rows x actions, timed in the same run as the round); before: the in-process engine "
            "of `98ef0b8`, after: one shard in process, both measured on the same machine "
            "(bench_learning's protocol: two untimed rounds, then seven (five at 10^6) timed "
            "between floor passes). The speed-up is the ratio of the mean rounds (per "
            "agent-action, what a run costs) where both runs report them, else of the medians. "
            "`python benchmarks/compare_learning.py BEFORE.json AFTER.json` from two runs of "
            "`bench_learning.py`.", "",
            "| agents | game | learner | before: round / floor | before: s a round (median; "
            "mean) | after: round / floor | after: s a round (median; mean) | after: floor, ns "
            "a cell | speed-up | target | met |",
            "|---|---|---|---|---|---|---|---|---|---|---|", *rows(before, after), "",
            *whole_rows(after), *floor_parts(after),
            morning(after), "", *bayes_bound(before, after),
            *(["pricing, Hedge, at 10^6 agents (`bench_shards.py --one 1000000,SHARDS,6,2,"
               f"pricing`); before: the issue's figures (the driver of 2 shards then "
               f"{BEFORE_DRIVER_MB} MB):", "", *scale_rows(scale), ""] if scale else []),
            *lines_table()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="a results file to replace the section in")
    parser.add_argument("--scale", type=Path, nargs="*", default=[],
                        help="files of bench_shards.py --one lines")
    args = parser.parse_args()
    scale = [json.loads(line) for path in args.scale
             for line in path.read_text().splitlines() if line.startswith("{")]
    lines = section(json.loads(args.before.read_text()), json.loads(args.after.read_text()),
                    scale)
    if args.out:
        args.out.write_text(replace_section(args.out.read_text(), lines))
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
