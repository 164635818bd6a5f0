"""The ``privgames`` command: list, run and reproduce experiments, query results.

Bad input prints one line naming the problem and exits with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from privgames.analysis import experiments
from privgames.environments.config import ConfigError

#: Most local Ray workers one call may ask for.
MAX_WORKERS = 4096


class UsageError(ConfigError):
    """A command line that cannot be run."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        raise UsageError(message)


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs, each value read by :func:`parse_value`."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {_clip(item)!r} is not of the form key=value")
        if key in out:
            raise UsageError(f"--set {key} is given twice: give each parameter once (a list "
                             "is one value, e.g. --set K=[3,30])")
        out[key] = parse_value(key, raw)
    return out


def parse_value(key: str, raw: str) -> Any:
    """A value as ``--set`` and the pages' text boxes read it: JSON where it parses (numbers,
    lists, ``null``), else the string; what looks like JSON but is not is refused."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        if raw[:1] in "[{\"":
            raise UsageError(f"--set {key}: bad JSON {_clip(raw)!r} ({err.msg})") from None
        return raw
    except RecursionError:
        raise UsageError(f"--set {key}: JSON nested too deeply ({_clip(raw)!r}): no parameter "
                         "takes more than a few levels") from None


def _clip(text: str, most: int = 60) -> str:
    """``text`` cut to ``most`` characters for a message."""
    return text if len(text) <= most else text[:most - 1] + "…"


def _count(text: str) -> int:
    """A non-negative integer option value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is out of range: it must be >= 0")
    return value


def _workers(text: str) -> int | str:
    """``--workers``: ``auto``, or 0 (serial) up to ``MAX_WORKERS``."""
    if text == "auto":
        return text
    try:
        value = _count(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{err}; --workers takes auto or an integer in "
                                         f"[0, {MAX_WORKERS}]") from None
    if value > MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{value} is out of range: it must be in "
                                         f"[0, {MAX_WORKERS}]")
    return value


def _output_folder(out: Path, name: str = "--out") -> Path:
    """``--out`` (``out=`` in the API, ``name``): a folder that exists or can be made, and can
    be written to."""
    said = f"{name} {out}" if name.startswith("--") else f"{name}={str(out)!r}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"{said}: it is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"{said}: the folder cannot be created ({err.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"{said}: the folder is not writable")
    return out


def _folder(text: str) -> Path:
    """``--out``/``--results``/``--data``: a path that is not empty (``''`` would silently
    mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty: name a folder (. for the current "
                                         "one)")
    return Path(text)


def _address(address: str | None) -> str | None:
    """``--address``: Ray Client addresses (``ray://``) need the ``ray[client]`` extra."""
    if address and address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise UsageError(f"--address {address}: Ray Client (ray://) needs the extra "
                         "`pip install 'ray[client]'`; or give the cluster's GCS address "
                         "HOST:6379 (or 'auto' on a cluster node)")
    return address


def _port(text: str) -> int:
    """``--port``: 1 to 65535."""
    value = _count(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is out of range: it must be in [1, 65535]")
    return value


def _serve(args: argparse.Namespace) -> None:
    routes = experiments.page_routes()
    if args.name is not None and args.name not in routes:
        raise UsageError(f"viz {args.name!r}: unknown page; pages are " + ", ".join(routes))
    from privgames.analysis.results import parquet_files

    if args.results is not None and not parquet_files(args.results):
        raise UsageError(f"--results {args.results}: no results there (a folder with "
                         "NAME.parquet files written by privgames run is needed)")
    if importlib.util.find_spec("solara") is None:
        raise UsageError("privgames viz needs the pages' extra: pip install 'privgames[viz]'")
    with socket.socket() as probe:  # a port in use: one line now, not the server's traceback
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(("127.0.0.1", args.port))
        except OSError as err:
            raise UsageError(f"--port {args.port}: 127.0.0.1:{args.port} cannot be used "
                             f"({err.strerror})") from None
    if args.data is not None and not args.data.is_dir():
        raise UsageError(f"--data {args.data}: not a folder")
    from privgames.analysis.page_server import new_token, serve, url

    token = None if args.no_token else new_token()
    page = "results" if args.name is None and args.results else (args.name or "")
    print(f"privgames: serving {url(args.port, page, token)} (Ctrl-C stops)", flush=True)
    serve(args.port, token, args.results, args.data)


def _one_line(message: str) -> str:
    """The message with control characters (a newline in a user's value) escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in message)


def _budgets(args: argparse.Namespace) -> dict[str, float | None]:
    from privgames.analysis.guard import parse_size

    if args.max_work is not None and not args.max_work > 0:
        raise UsageError(f"--max-work {args.max_work!r} is out of range: it must be > 0 "
                         "(inf: no limit)")
    return {"max_memory": None if args.max_memory is None else parse_size(args.max_memory),
            "max_work": args.max_work}


class _RunHelp(argparse.Action):
    """``privgames run NAME --help``: the options, then NAME's parameters (as ``show``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show this help and, after NAME, "
                         "the experiment's parameters; then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.print_help()
        if getattr(namespace, "name", None):
            from privgames.analysis.parameters import show

            print("\n" + show(experiments.get(namespace.name)))
        parser.exit()


def parser() -> argparse.ArgumentParser:
    """The command line's argument parser (also the source of the documentation's CLI page)."""
    top = _Parser(prog="privgames", description=__doc__.splitlines()[0])
    top.add_argument("--version", action="version",
                        version=f"privgames {importlib.metadata.version('privgames')}")
    sub = top.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("list", help="registered experiments")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed", type=_count, default=0, help="root seed (>= 0, default 0)")
        p.add_argument("--workers", type=_workers, default="auto",
                       help="Ray workers: auto (the default: serially unless the work would "
                       "outlast Ray's start-up), 0 (serially, no Ray) or N")
        p.add_argument("--address", default=None, help="Ray cluster address (or RAY_ADDRESS)")
        p.add_argument("--out", type=_folder, default=Path("results"), help="output folder")
        p.add_argument("--scale", choices=("quick", "paper"), default="quick")
        p.add_argument("--max-memory", default=None, metavar="SIZE",
                       help="memory budget, e.g. 4G (default: half the available memory)")
        p.add_argument("--max-work", type=float, default=None, metavar="OPS",
                       help="refuse runs estimated to need more operations (default: a "
                            "day of one core's work at the experiment's measured rate)")

    run = sub.add_parser("run", help="run one experiment", add_help=False)
    run.add_argument("-h", "--help", action=_RunHelp)
    run.add_argument("name")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--replications", type=_count, default=None,
                     help="Monte-Carlo draws per population")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    common(run)
    show = sub.add_parser("show", help="an experiment's parameters (type, default, allowed "
                          "values, meaning), its grid at both scales and the claims it judges")
    show.add_argument("name")
    show.add_argument("--out", type=_folder, default=None,
                      help="a results folder: the claims with the verdicts of its run "
                           "(default: ./results; a folder without a run of NAME lists the "
                           "claims and how to judge them)")
    viz = sub.add_parser("viz", help="serve the interactive pages (Mesa SolaraViz) on "
                         "127.0.0.1: one per environment, and a results browser")
    viz.add_argument("name", nargs="?", default=None,
                     help="the page to open first: " + ", ".join(experiments.page_routes()))
    viz.add_argument("--port", type=_port, default=8765, help="port (default 8765)")
    viz.add_argument("--results", type=_folder, default=None, metavar="DIR",
                     help="a reproduce/run folder to browse on /results")
    viz.add_argument("--data", type=_folder, default=None, metavar="DIR",
                     help="a folder whose CSV files the kmeans page may load (default: only "
                          "the shipped data sets)")
    viz.add_argument("--no-token", action="store_true",
                     help="serve without the secret token in the URL (any local user can "
                          "then open the pages)")
    rep = sub.add_parser("reproduce", help="every experiment, figures and a Markdown report")
    common(rep)
    q = sub.add_parser("query", help="SQL over a results folder (the view is 'results')")
    q.add_argument("sql")
    q.add_argument("--out", type=_folder, default=Path("results"))
    return top


@contextlib.contextmanager
def _stdout_for_ours_alone() -> Iterator[None]:
    """While a run runs, what anything else prints to standard output (Ray's driver prints the
    cluster's errors there: a worker killed for memory, 60 kB) goes to standard error, so that
    standard output holds only what the command says (``--json``: one JSON object)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopped as Ctrl-C stops a run (status 143 instead of 130)."""


#: Whether this command received SIGTERM (Ray's ``get`` re-raises a plain KeyboardInterrupt
#: in place of :class:`Terminated`, so the signal is remembered, not read off the exception).
_TERMINATED: list[bool] = [False]


def _terminate(signum: int, frame: object) -> None:
    _TERMINATED[0] = True
    raise Terminated


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated`, and a stop is never lost: a signal's exception
    raised inside a callback from C (numba's compiler calls Python through ctypes while it
    caches, in the first seconds of a command) is printed as "ignored" and dropped there, so
    the hook for such exceptions has the signal delivered again, from a thread once the
    callback has returned (in the hook itself it would be dropped again), to be raised in the
    next Python code that can raise it. Previous handler and hook restored after."""
    import _thread
    import signal
    import threading
    import time

    def again(signum: int) -> None:
        time.sleep(0.05)
        _thread.interrupt_main(signum)

    def redeliver(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            terminated = isinstance(unraisable.exc_value, Terminated)
            signum = signal.SIGTERM if terminated else signal.SIGINT
            threading.Thread(target=again, args=(signum,), daemon=True).start()
        else:
            previous_hook(unraisable)

    _TERMINATED[0] = False
    previous = signal.signal(signal.SIGTERM, _terminate)
    previous_hook, sys.unraisablehook = sys.unraisablehook, redeliver
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGTERM, previous)


def _stopped(args: argparse.Namespace | None, err: KeyboardInterrupt) -> int:
    """One line saying what a stopped run kept and how to resume it; the exit status. What the
    stop left half-built is let go first, quietly (:func:`_let_go`)."""
    _let_go(err)
    terminated = isinstance(err, Terminated) or _TERMINATED[0]
    how = "terminated" if terminated else "interrupted"
    command = getattr(args, "command", None)
    if command == "run":
        parts = args.out / ".parts" / args.name
        kept = len(list(parts.glob("*.parquet"))) if parts.is_dir() else 0
        said = (f"{kept} finished task{'s' if kept != 1 else ''} kept in {parts}; the same "
                "command resumes them" if kept else "no task had finished; the same command "
                "starts again")
    elif command == "reproduce":
        said = (f"the finished experiments are kept in {args.out} (and the interrupted one's "
                f"finished tasks in {args.out / '.parts'}); the same command resumes")
    else:
        said = "nothing was being written"
    print(f"\nprivgames: {how}: {said}", file=sys.stderr)
    return 143 if terminated else 130


def _let_go(err: BaseException) -> None:
    """Free what the frames of a stop's traceback hold, with finalizers' errors not said: an
    object whose constructor the signal interrupted can fail in its finalizer (llvmlite's
    ``PipelineTuningOptions``, stopped while numba compiled, printed "Exception ignored ...
    AttributeError" after the stop's line in a clean-clone CI). That error is the stop's doing,
    not the user's; freed here, before the line, it is not printed after it."""
    import gc
    import traceback

    hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: None
    try:
        seen: set[int] = set()
        while err is not None and id(err) not in seen:
            seen.add(id(err))
            traceback.clear_frames(err.__traceback__)  # a frame still running is kept
            err = err.__context__
        gc.collect()
    finally:
        sys.unraisablehook = hook


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status. A deprecated name (a ``FutureWarning``) is said
    once, on one line, after a run that went through (a refusal stays one line). SIGTERM
    stops a run as Ctrl-C does, with status 143 (in the main thread, where Python takes
    signals: :func:`_stop_signals`)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _warned(argv)
    with _stop_signals():
        return _warned(argv)


def command() -> None:
    """The ``privgames`` command (and ``python -m privgames.analysis``): :func:`main`, then
    exit with its status. Once the command has said what it says, standard output takes
    nothing more (Ray's teardown prints there), and after a refusal or a stop (status 2, 130,
    143: its one line said) standard error neither (Ray's driver goes on printing the cluster's
    reports, and its C++ core the tasks it could not report to a driver that has gone). A run
    stopped by a signal has kept its parts; it runs the exit hooks (the local Ray's teardown
    among them) and leaves at once, without the rest of Python's finalization, where Ray's
    core worker, interrupted in a ``get``, crashed the interpreter (status 139 instead of 130
    in 3 runs of 4)."""
    status = main()
    sys.stdout.flush()  # what the command says is said: anything later (Ray's teardown) is not
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # for standard output
    if status in (2, 130, 143):  # its one line is said: Ray's later reports are not for the user
        sys.stderr.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
    if status in (130, 143):
        import atexit

        atexit._run_exitfuncs()  # the local Ray's teardown, multiprocessing's clean-up, ...
        os._exit(status)
    raise SystemExit(status)


def _warned(argv: Sequence[str] | None) -> int:
    """:func:`_main`, with each deprecation note said once after a run that went through."""
    import warnings

    notes: list[str] = []
    shown = warnings.showwarning

    def show(message, category, *args, **kwargs) -> None:
        if issubclass(category, FutureWarning):
            notes.append(str(message))
        else:
            shown(message, category, *args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("always", FutureWarning)
        warnings.showwarning = show
        status = _main(argv)
    for note in dict.fromkeys(notes if status == 0 else []):
        print(f"privgames: note: {note}", file=sys.stderr)
    return status


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # ``privgames`` alone: what it can do
        print(parser().format_help(), end="")
        return 0
    args = None
    try:
        args = parser().parse_args(argv)
        if args.command == "list":
            for name, description in experiments.listing():
                print(f"{name:18s} {description}")
        elif args.command == "run":
            overrides = parse_set(args.sets)
            if args.replications is not None:
                overrides["replications"] = args.replications
            experiments.get(args.name)  # an unknown name fails before any folder is made
            from privgames.analysis import api  # pandas and the runners: not for `list`

            with _stdout_for_ours_alone():
                result = api.run(args.name, seed=args.seed, workers=args.workers,
                                 address=_address(args.address), out=_output_folder(args.out),
                                 scale=args.scale, progress=True, params=overrides,
                                 **_budgets(args))
                drawn = result.save_figure(args.out)
            if args.json:
                from privgames.analysis.results import json_text

                print(json_text(result.summary, indent=None,
                                reasons=result.experiment.infinite))
            else:
                print(f"wrote {args.out / (args.name + '.parquet')}, the summary"
                      + ("" if drawn is None else f" and the figure {drawn.name}") + " beside it")
        elif args.command == "show":
            from privgames.analysis.parameters import show

            if args.out is not None and args.out.exists() and not args.out.is_dir():
                raise UsageError(f"--out {args.out}: it is a file, not a results folder")
            print(show(experiments.get(args.name), args.out or Path("results")))
        elif args.command == "viz":
            _serve(args)
        elif args.command == "reproduce":
            from privgames.analysis.report import reproduce

            with _stdout_for_ours_alone():
                path = reproduce(_output_folder(args.out), args.scale, args.seed, args.workers,
                                 _address(args.address), **_budgets(args))
            print(f"wrote {path}")
        elif args.command == "query":
            from privgames.analysis.results import query

            print(query(args.out, args.sql).to_string(index=False))
    except (UsageError, ConfigError) as err:
        print(f"privgames: error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (Terminated)
        return _stopped(args, err)
    except BrokenPipeError:  # the reader left (``privgames list | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0
