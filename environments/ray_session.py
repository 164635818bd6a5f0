"""One Ray session for the process: local on loopback by default, or a cluster by address."""

from __future__ import annotations

import atexit
import inspect
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


def ensure_ray(workers: int | None = None, address: str | None = None):
    """The Ray module with a session: reuse one, join ``address``, or start a local one.

    ``address`` (or ``RAY_ADDRESS``) joins that cluster, and says so on stderr in one line;
    nothing else ever joins one. Otherwise a private local Ray with ``workers`` CPUs starts:
    ``address="local"`` (Ray's own default would join whatever cluster
    ``/tmp/ray/ray_current_cluster`` names, another user's ``ray start`` included) in a temp
    folder of its own (removed at exit), without a dashboard process and with every server on
    loopback: Ray binds to the node's IP unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its
    single-machine mode) is set before ``ray`` is imported, which this function does. A local
    Ray is torn down with its driver, even a SIGKILLed one
    (:mod:`~privgames.environments.ray_reaper`, which kills only the processes Ray started,
    never the driver's others), and at once when the driver exits normally
    (:func:`_shutdown_at_once`).
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if not ray.is_initialized():
        if address:
            _check_reachable(address)
            print(f"privgames: joining the Ray cluster at {address}", file=sys.stderr,
                  flush=True)
            ray.init(address=address, log_to_driver=False)
        else:
            before = set(descendants(os.getpid()))
            temp_dir = tempfile.mkdtemp(prefix="privgames-ray-")
            with _lean_local_start():
                ray.init(address="local", num_cpus=workers, include_dashboard=False,
                         log_to_driver=False, configure_logging=False, _temp_dir=temp_dir)
            _start_reaper(before)
            atexit.unregister(_shutdown_at_once)  # once, however often Ray is restarted
            atexit.register(_shutdown_at_once, ray, temp_dir)  # before Ray's own exit hook
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse at once an address where nothing listens (Ray itself retries for minutes)."""
    from privgames.environments.config import ConfigError

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                 timeout=timeout).close()
    except OSError as err:
        raise ConfigError(f"--address {address}: no Ray cluster answers there "
                          f"({err.strerror or err})") from None


def _shutdown_at_once(ray, temp_dir: str | None = None) -> None:
    """Tear the local Ray down without Ray's exit-time waits: its exit hook sleeps 0.5 s so
    that workers' log lines reach the driver (``log_to_driver=False``: none do), then sends
    SIGTERM and gives the raylet up to 1 s to stop its workers and agents. A local privgames
    session has nothing to save (results are written before exit), so this hook disconnects
    the driver and SIGKILLs the processes; the agents the raylet leaves behind are the
    watchdog's. Measured: a script's exit after a Ray sweep 1.9 s -> 0.4 s. Ray's hook then
    finds nothing to do. It never raises: if Ray's private ``_global_node`` or
    ``kill_all_processes`` moved (``tests/analysis/test_ray_internals.py`` fails then), it
    warns and leaves the teardown to Ray's own hook."""
    try:
        if not ray.is_initialized():
            return
        worker = ray._private.worker
        node = worker._global_node
        node.kill_all_processes  # noqa: B018 (checked before the driver lets go of the node)
        worker._global_node = None  # so that shutdown() disconnects but kills nothing
        ray.shutdown()
        node.destroy_external_storage()  # objects spilled to disk, as Ray's shutdown does
        node.kill_all_processes(check_alive=False, allow_graceful=False, wait=False)
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    except Exception as err:  # an exit hook must not fail the driver's exit
        warnings.warn(f"privgames: fast Ray teardown unavailable ({type(err).__name__}: "
                      f"{err}); Ray's own exit hook stops the local Ray", stacklevel=1)


def _announce(what: str) -> None:
    warnings.warn(f"privgames: this Ray has no {what}; the local Ray starts as Ray's default "
                  "does (slower). tests/analysis/test_ray_internals.py names what moved",
                  RuntimeWarning, stacklevel=3)


@contextmanager
def _lean_local_start() -> Iterator[None]:
    """While a local Ray starts (and only then: both are restored after ``ray.init``):

    * no dashboard process. With ``include_dashboard=False`` Ray 2.x still starts its API
      server (``dashboard.py --minimal``, for usage statistics, the job and state APIs, none
      of which privgames uses), with no public switch: ``services.start_api_server`` is
      replaced by one that starts nothing (0.5-0.6 s of ``ray.init`` on 2 cores);
    * neither the autoscaler's monitor nor the log monitor: two Python processes a fixed local
      node with ``log_to_driver=False`` does not use, which start on the same 2 cores as the
      raylet's agents and workers. Ray's own ``no_monitor`` and ``include_log_monitor``
      parameters, which ``ray.init`` does not expose, are set on the head node's parameters
      by a wrapper of ``Node.__init__``. Measured: ``ray.init`` 3.05-3.14 s -> 2.06-2.97 s.

    A Ray that names any of these otherwise gets a warning and its default start; the tests of
    ``test_ray_internals.py`` fail on it, so an upgrade cannot drop them silently."""
    import ray._private.node as node
    import ray._private.services as services
    from ray._private.parameter import RayParams

    api_server = getattr(services, "start_api_server", None)
    node_init = node.Node.__init__
    if api_server is None or "include_dashboard" not in _parameters(api_server):
        _announce("services.start_api_server(include_dashboard, ...)")
    else:
        def start_unless_asked_not_to(include_dashboard, *args, **kwargs):
            if include_dashboard is False:
                return None, None  # (no dashboard URL, no process)
            return api_server(include_dashboard, *args, **kwargs)

        services.start_api_server = start_unless_asked_not_to
    if not {"no_monitor", "include_log_monitor"} <= _parameters(RayParams.__init__) or not {
            "ray_params", "head"} <= _parameters(node_init):
        _announce("RayParams(no_monitor, include_log_monitor) or Node(ray_params, head)")
    else:
        def lean(self, ray_params, *args, **kwargs) -> None:
            if kwargs.get("head"):
                ray_params.no_monitor, ray_params.include_log_monitor = True, False
            node_init(self, ray_params, *args, **kwargs)

        node.Node.__init__ = lean
    try:
        yield
    finally:
        node.Node.__init__ = node_init
        if api_server is not None:
            services.start_api_server = api_server


def _parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


def _start_reaper(before: set[int]) -> None:
    """Watch this driver: when it exits, kill the processes its local Ray started (Linux):
    the driver's children that ``ray.init`` started (not in ``before``), with everything below
    them. The driver's other children (a notebook's kernel helpers, a server's workers, a
    ``sleep`` it started) and their descendants are not the watchdog's."""
    from privgames.environments import ray_reaper

    if not sys.platform.startswith("linux"):
        return
    tree = children()
    ray_roots = [pid for pid in tree.get(os.getpid(), []) if pid not in before]
    started = [f"{pid}:{ray_reaper.start_time(pid)}" for root in ray_roots
               for pid in (root, *descendants(root, tree))]
    subprocess.Popen([sys.executable, "-I", ray_reaper.__file__, str(os.getpid()), *started],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def children() -> dict[int, list[int]]:
    """Each process's children, from ``/proc`` (Linux)."""
    from privgames.environments.ray_reaper import stat

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
