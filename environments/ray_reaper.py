"""Tear an embedded Ray down with its driver (``python -I ray_reaper.py DRIVER FOLDER PID...``).

Ray's head processes die with a SIGKILLed driver (kernel fate-sharing), but the raylet's
agents (``DashboardAgent``, ``RuntimeEnvAgent``) linger for 20-40 s: once they notice their
raylet is gone they try to report it to the GCS, which is gone too. A driver stopped while
``ray.init`` runs leaves whatever had started. This watchdog, started by
:func:`~privgames.environments.ray_session.ensure_ray` just before ``ray.init``, adopts every
Ray process the driver starts (a child of the driver that was not one before, the listed
``PID``s, and runs Ray's code, with everything below it; twice a second), and when the driver
has exited it SIGKILLs those that are still the same processes (same pid and start time), with
every Ray process whose environment names this Ray's ``FOLDER`` (one started just before the
driver died, already handed to init), then removes the ``FOLDER``. The driver's other children
(a notebook's kernel helpers, a server's workers) are never its. It ignores SIGINT, SIGTERM and
SIGHUP: Ctrl-C reaches the driver's whole process group, and the watchdog must outlive the
driver to do its work. Standard library only, so it starts in milliseconds.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time


def stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (``[0]`` state, ``[1]`` parent
    pid, ``[19]`` start time in clock ticks since boot), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    fields = stat(pid)
    return fields[19] if fields else None


def is_ray(pid: int) -> bool:
    """Whether ``pid`` runs Ray's code (a ``ray::`` worker or agent, or a program or module
    from Ray's package: the raylet, the GCS server, ``ray/_private/...``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ")
    except OSError:
        return False
    return command.startswith(b"ray::") or b"/ray/" in command


def children() -> dict[int, list[int]]:
    """Each process's children, from ``/proc`` (Linux)."""
    tree: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = stat(int(entry))
        if fields:
            tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def descendants(root: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below ``root`` (in ``tree``, by default the processes now)."""
    tree = children() if tree is None else tree
    found, stack = [], [root]
    while stack:
        for pid in tree.get(stack.pop(), []):
            found.append(pid)
            stack.append(pid)
    return found


def adopt(driver: int, excluded: set[int], watched: dict[int, str]) -> None:
    """Add to ``watched`` (pid -> start time) the driver's new Ray children and every process
    now below a watched one."""
    tree = children()
    for pid in tree.get(driver, []):
        if pid not in excluded and pid not in watched and is_ray(pid):
            if (started := start_time(pid)) is not None:
                watched[pid] = started
    for pid in list(watched):
        for child in descendants(pid, tree):
            if child not in watched and (started := start_time(child)) is not None:
                watched[child] = started


def ray_processes_of(folder: str) -> dict[int, str]:
    """Ray's processes that belong to the local Ray of ``folder``: every process that Ray
    starts inherits ``PRIVGAMES_SCRATCH=folder`` (``ray_session.SCRATCH``) in its environment,
    which ``/proc`` keeps however Ray renames the process. An agent started just before the
    driver died, and handed to init before the watchdog saw it, is found this way; another
    driver's Ray (a test session's, a notebook's) has another folder and is not touched."""
    mark = f"PRIVGAMES_SCRATCH={folder}".encode()
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        pid = int(entry)
        if pid == os.getpid() or not is_ray(pid):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        if (started := start_time(pid)) is not None:
            found[pid] = started
    return found


def main(driver: int, folder: str, excluded: set[int]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    excluded = excluded | {os.getpid()}
    watched: dict[int, str] = {}
    while os.getppid() == driver:
        adopt(driver, excluded, watched)
        time.sleep(0.5)
    adopt(driver, excluded, watched)
    watched.update(ray_processes_of(folder))
    for pid, started in watched.items():
        if start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for _ in range(10):  # a process killed a moment ago may still write into its folder
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.exists(folder):
            break
        time.sleep(0.2)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], {int(p) for p in sys.argv[3:]})
