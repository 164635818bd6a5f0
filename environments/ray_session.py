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

from privgames.environments import ray_reaper
from privgames.environments.ray_reaper import children


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
            address = check_address(address)
            print(f"privgames: joining the Ray cluster at {address}", file=sys.stderr,
                  flush=True)
            with _own_signal_handlers():
                ray.init(address=address, log_to_driver=False)
        else:
            temp_dir = tempfile.mkdtemp(prefix="privgames-ray-", dir=_short_temp_root())
            os.environ[SCRATCH] = temp_dir  # inherited by the local Ray's workers
            os.environ.setdefault("RAY_task_oom_retries", str(OOM_RETRIES))
            _session_token()
            _start_reaper(temp_dir)
            try:
                with _lean_local_start(), _own_signal_handlers():
                    ray.init(address="local", num_cpus=workers, include_dashboard=False,
                             log_to_driver=False, configure_logging=False, _temp_dir=temp_dir)
            except BaseException:  # stopped while starting: leave no folder behind
                _shutdown_at_once(ray, temp_dir)
                raise
            atexit.unregister(_shutdown_at_once)  # once, however often Ray is restarted
            atexit.register(_shutdown_at_once, ray, temp_dir)  # before Ray's own exit hook
    return ray


#: The environment variable naming a scratch folder that goes with the local Ray: its workers
#: inherit it, and it is removed with the Ray's folder when the driver exits, even when the
#: workers are killed (a stopped run): a sharded population's checkpoints go there.
SCRATCH = "PRIVGAMES_SCRATCH"


#: How often the local Ray retries a task its memory monitor killed (Ray's default: without
#: end); after that the run is refused on one line (``guard.killed_for_memory``).
OOM_RETRIES = 1

#: Ray's token settings: a user who sets any of them keeps Ray's own handling.
AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
#: Whether :func:`_session_token` set them (for the local Ray's lifetime).
_SESSION_TOKEN = [False]


def _session_token() -> None:
    """Token authentication for the local Ray with a fresh token of this session, passed to
    its processes in the environment: Ray's default writes a lasting token to
    ``~/.ray/auth_token`` (and fails with a traceback where ``HOME`` is not writable). Where the
    user set Ray's token variables, Ray's own handling stands."""
    import secrets

    if not any(v in os.environ for v in AUTH_VARIABLES):
        from ray._raylet import Config

        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
        _SESSION_TOKEN[0] = True
        Config.initialize("")  # Ray read its settings at import: again, as Ray itself does


def _short_temp_root() -> str | None:
    """Where the local Ray's folder goes: the usual temporary folder, unless its path is too
    long for Ray's sockets (a Unix socket's path holds at most 107 bytes, and Ray appends
    about 86: ``privgames-ray-XXXXXXXX/session_DATE_TIME_PID/sockets/plasma_store``), then
    ``/tmp``."""
    root = tempfile.gettempdir()
    return root if len(root) <= 20 or not os.access("/tmp", os.W_OK) else "/tmp"


#: Ray's switch, read when the driver's C++ core is made, that leaves out its failure handler.
FAILURE_HANDLER_SWITCH = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"


@contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """Keep the driver's SIGINT and SIGTERM handlers through ``ray.init``: Ray installs its
    own (its SIGTERM handler exits with status 15 during ``ray.init`` and with a C++ stack
    dump, status 134, after), so while it starts, ``signal.signal`` leaves those two signals
    alone (every other signal passes through). Ctrl-C and SIGTERM then stop a run as privgames
    does at any moment (``cli.main``: one line, status 130 or 143, the local Ray torn down).
    Ray's C++ core also installs a failure handler for SIGTERM while it connects (a stack dump
    and status -6, or the signal lost, during the last half second of ``ray.init``): the
    driver's core is made without it (:data:`FAILURE_HANDLER_SWITCH`; its workers keep it)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    install = signal.signal

    def keep_ours(signum, handler):
        if signum in (signal.SIGINT, signal.SIGTERM):
            return signal.getsignal(signum)
        return install(signum, handler)

    from ray._private import ray_constants

    signal.signal = keep_ours
    failure_handler = getattr(ray_constants, FAILURE_HANDLER_SWITCH, None)
    if failure_handler is None:
        _announce(f"ray_constants.{FAILURE_HANDLER_SWITCH}", "a signal at the end of its "
                  "start may stop the driver with a stack dump")
    else:
        setattr(ray_constants, FAILURE_HANDLER_SWITCH, True)
    try:
        yield
    finally:
        if failure_handler is not None:
            setattr(ray_constants, FAILURE_HANDLER_SWITCH, failure_handler)
        signal.signal = install
        for signum in (signal.SIGINT, signal.SIGTERM):  # Ray's C++ core sets its own with
            install(signum, signal.getsignal(signum))  # sigaction: Python's again, in the OS


def check_address(address: str, timeout: float = 5.0) -> str:
    """The cluster address to join: ``auto`` is the cluster this machine's last ``ray start``
    wrote to ``ray_current_cluster`` (Ray's own ``auto`` also joins any Ray process it finds
    running: another user's private one, or another privgames process's local Ray). Refused
    at once, on one line, where none was started or nothing listens (Ray itself raises a
    traceback, or retries for minutes)."""
    from privgames.environments.config import ConfigError

    if address == "auto":
        from ray._private.services import find_bootstrap_address

        found = find_bootstrap_address(None)
        if not found:
            raise ConfigError("--address auto: no Ray cluster was started on this machine "
                              "(start one with `ray start --head`, or give its address)")
        try:
            return check_address(found, timeout)
        except ConfigError as err:
            raise ConfigError(f"--address auto: this machine's last Ray cluster, {found} "
                              f"(ray_current_cluster), does not answer: "
                              f"{str(err).split(': ', 1)[1]}") from None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not port.isdigit():
        return address
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                 timeout=timeout).close()
    except OSError as err:
        raise ConfigError(f"--address {address}: no Ray cluster answers there "
                          f"({err.strerror or err})") from None
    return address


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
            _forget_local_ray(temp_dir)
            return
        worker = ray._private.worker
        node = worker._global_node
        node.kill_all_processes  # noqa: B018 (checked before the driver lets go of the node)
        worker._global_node = None  # so that shutdown() disconnects but kills nothing
        ray.shutdown()
        node.destroy_external_storage()  # objects spilled to disk, as Ray's shutdown does
        node.kill_all_processes(check_alive=False, allow_graceful=False, wait=False)
        _forget_local_ray(temp_dir)
    except Exception as err:  # an exit hook must not fail the driver's exit
        warnings.warn(f"privgames: fast Ray teardown unavailable ({type(err).__name__}: "
                      f"{err}); Ray's own exit hook stops the local Ray", stacklevel=1)


def _forget_local_ray(temp_dir: str | None) -> None:
    """Remove the local Ray's folder, and the settings this process set for it (the scratch
    folder, the session token: a cluster joined later uses its own)."""
    if temp_dir is None:
        return
    shutil.rmtree(temp_dir, ignore_errors=True)
    if os.environ.get(SCRATCH) == temp_dir:
        del os.environ[SCRATCH]
        for variable in AUTH_VARIABLES if _SESSION_TOKEN[0] else ():
            os.environ.pop(variable, None)
        _SESSION_TOKEN[0] = False


def _announce(what: str, so: str = "the local Ray starts as Ray's default does (slower)"
              ) -> None:
    warnings.warn(f"privgames: this Ray has no {what}; {so}. "
                  "tests/analysis/test_ray_internals.py names what moved",
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
      by a wrapper of ``Node.__init__``. Measured: ``ray.init`` 3.05-3.14 s -> 2.06-2.97 s;
    * Ray's processes (the GCS, the raylet and, below it, the workers) in a session of their
      own (``services.ConsolePopen`` with ``start_new_session``): Ctrl-C, or a SIGTERM sent to
      the driver's process group, reaches the driver alone, which stops them itself
      (:func:`_shutdown_at_once`; the watchdog if it is killed). In the driver's group, a
      signal killed the GCS while ``ray.init`` or a first call waited on it: the driver then
      waited 10-30 s for it, or Ray's client exited with status 1.

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
    popen = getattr(services, "ConsolePopen", None)
    if popen is None:
        _announce("services.ConsolePopen", "Ctrl-C also stops the local Ray's processes, and "
                  "a stop while Ray starts may wait for them")
    else:
        class OwnSession(popen):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **{**kwargs, "start_new_session": True})

        services.ConsolePopen = OwnSession
    try:
        yield
    finally:
        if popen is not None:
            services.ConsolePopen = popen
        node.Node.__init__ = node_init
        if api_server is not None:
            services.start_api_server = api_server


def _parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


def _start_reaper(temp_dir: str) -> None:
    """Watch this driver (Linux): when it exits, kill the processes its local Ray started and
    remove ``temp_dir`` (:mod:`~privgames.environments.ray_reaper`; the driver's children
    that exist now, and any that do not run Ray's code, are not the watchdog's)."""
    if not sys.platform.startswith("linux"):
        return
    now = children().get(os.getpid(), [])
    subprocess.Popen([sys.executable, "-I", ray_reaper.__file__, str(os.getpid()), temp_dir,
                      *map(str, now)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


