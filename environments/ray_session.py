"""One Ray session for the process: local on loopback by default, or a cluster by address."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def ensure_ray(workers: int | None = None, address: str | None = None):
    """The Ray module with a session: reuse one, join ``address``, or start a local one.

    ``address`` (or ``RAY_ADDRESS``) joins a cluster. Otherwise a local Ray with ``workers``
    CPUs starts without a dashboard process and with every server on loopback: Ray binds to
    the node's IP unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its single-machine mode) is
    set before ``ray`` is imported, which this function does. A local Ray is torn down with
    its driver, even a SIGKILLed one (:mod:`~privgames.environments.ray_reaper`), and at once
    when the driver exits normally (:func:`_shutdown_at_once`).
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            _skip_api_server()
            with _without_monitors():
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            _start_reaper()
            atexit.unregister(_shutdown_at_once)  # once, however often Ray is restarted
            atexit.register(_shutdown_at_once, ray)  # runs before Ray's own exit hook
    return ray


def _shutdown_at_once(ray) -> None:
    """Tear the local Ray down without Ray's exit-time waits: its exit hook sleeps 0.5 s so
    that workers' log lines reach the driver (``log_to_driver=False``: none do), then sends
    SIGTERM and gives the raylet up to 1 s to stop its workers and agents. A local privgames
    session has nothing to save (results are written before exit), so this hook disconnects
    the driver and SIGKILLs the processes; the agents the raylet leaves behind are the
    watchdog's. Measured: a script's exit after a Ray sweep 1.9 s -> 0.4 s. Ray's hook then
    finds nothing to do. Falls back to Ray's own hook if its private ``_global_node`` moves."""
    worker = getattr(ray._private, "worker", None)
    node = getattr(worker, "_global_node", None)
    if node is None or not ray.is_initialized():
        return
    worker._global_node = None  # so that shutdown() disconnects but kills nothing
    ray.shutdown()
    node.destroy_external_storage()  # objects spilled to disk, as Ray's shutdown does
    node.kill_all_processes(check_alive=False, allow_graceful=False, wait=False)


def _skip_api_server() -> None:
    """Start no dashboard process in a local Ray. With ``include_dashboard=False`` Ray 2.x
    still starts its API server (``dashboard.py --minimal``, for usage statistics, the job
    and state APIs, none of which privgames uses), with no public switch: its start function
    is replaced by one that starts nothing (0.5-0.6 s of ``ray.init`` on 2 cores). Skipped
    if a Ray version names it otherwise."""
    import ray._private.services as services

    start = getattr(services, "start_api_server", None)
    if start is None or getattr(start, "privgames", False):
        return

    def start_unless_asked_not_to(include_dashboard, *args, **kwargs):
        if include_dashboard is False:
            return None, None  # (no dashboard URL, no process)
        return start(include_dashboard, *args, **kwargs)

    start_unless_asked_not_to.privgames = True
    services.start_api_server = start_unless_asked_not_to


@contextmanager
def _without_monitors() -> Iterator[None]:
    """While a local Ray starts, its head node starts neither the autoscaler's monitor nor the
    log monitor: two Python processes a fixed local node with ``log_to_driver=False`` does not
    use, which start on the same 2 cores as the raylet's agents and workers. Ray's own
    ``no_monitor`` and ``include_log_monitor`` parameters, which ``ray.init`` does not expose,
    are set on the head node's parameters. Measured: ``ray.init`` 3.05-3.14 s -> 2.06-2.97 s
    (three interleaved pairs). Nothing is changed if a Ray version names them otherwise."""
    import ray._private.node as node

    start = node.Node.__init__

    def lean(self, ray_params, *args, **kwargs) -> None:
        if kwargs.get("head") and {"no_monitor", "include_log_monitor"} <= set(vars(ray_params)):
            ray_params.no_monitor, ray_params.include_log_monitor = True, False
        start(self, ray_params, *args, **kwargs)

    node.Node.__init__ = lean
    try:
        yield
    finally:
        node.Node.__init__ = start


def _start_reaper() -> None:
    """Watch this driver: when it exits, kill the processes its local Ray started (Linux)."""
    from privgames.environments import ray_reaper

    if not sys.platform.startswith("linux"):
        return
    started = [f"{pid}:{ray_reaper.start_time(pid)}" for pid in descendants(os.getpid())]
    subprocess.Popen([sys.executable, "-I", ray_reaper.__file__, str(os.getpid()), *started],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from ``/proc`` (Linux)."""
    from privgames.environments.ray_reaper import stat

    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = stat(int(entry))
        if fields:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), []):
            found.append(pid)
            stack.append(pid)
    return found
