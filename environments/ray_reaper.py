"""Tear an embedded Ray down with its driver (run as ``python -I ray_reaper.py DRIVER PID...``).

Ray's head processes die with a SIGKILLed driver (kernel fate-sharing), but the raylet's
agents (``DashboardAgent``, ``RuntimeEnvAgent``) linger for 20-40 s: once they notice their
raylet is gone they try to report it to the GCS, which is gone too. This watchdog, started by
:func:`~privgames.environments.ray_session.ensure_ray` with the processes the local Ray
started, waits for the driver to exit and then SIGKILLs those that are still the same
processes (same pid and start time). Standard library only, so it starts in milliseconds.
"""

from __future__ import annotations

import os
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


def main(driver: int, processes: list[tuple[int, str]]) -> None:
    while os.getppid() == driver:
        time.sleep(0.2)
    for pid, started in processes:
        if start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    main(int(sys.argv[1]), [(int(p), s) for p, s in (a.split(":") for a in sys.argv[2:])])
