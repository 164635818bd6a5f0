"""The Ray internals privgames relies on (``environments/ray_session.py``): each test fails when
Ray renames one or changes its signature, so an upgrade cannot turn a patch silently off; the
patches are undone after ``ray.init`` and the exit hook never raises."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types

import pytest

from privgames.environments import ray_session

# Ray is imported inside the tests, as privgames imports it: only when a test needs it.


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_api_server_start_takes_include_dashboard_first():
    import ray._private.services as services

    assert parameters(services.start_api_server)[0] == "include_dashboard"


def test_the_head_node_takes_the_monitor_switches():
    import ray._private.node as node
    from ray._private.parameter import RayParams

    assert {"no_monitor", "include_log_monitor"} <= set(parameters(RayParams.__init__))
    assert parameters(node.Node.__init__)[:3] == ["self", "ray_params", "head"]


def test_ray_starts_its_processes_with_console_popen_and_reads_the_failure_handler_switch():
    import ray._private.services as services
    from ray._private import ray_constants

    assert issubclass(services.ConsolePopen, subprocess.Popen)
    assert "ConsolePopen(" in inspect.getsource(services.start_ray_process)
    assert isinstance(getattr(ray_constants, ray_session.FAILURE_HANDLER_SWITCH), bool)


def test_the_exit_hook_s_internals_are_where_it_looks():
    import ray._private.node as node
    import ray._private.worker as worker

    assert hasattr(worker, "_global_node")
    assert {"check_alive", "allow_graceful", "wait"} <= set(
        parameters(node.Node.kill_all_processes))
    assert callable(node.Node.destroy_external_storage)


@pytest.mark.ray
def test_the_patches_are_undone_and_nothing_warns_on_this_ray():
    """In a fresh process: a local Ray starts with warnings as errors, and afterwards Ray's own
    functions and switches are back in place; its processes (the GCS, the raylet) are in a
    session of their own."""
    code = ("import warnings; warnings.simplefilter('error')\n"
            "import ray._private.node as n, ray._private.services as s\n"
            "from ray._private import ray_constants as c\n"
            "init, start, popen = n.Node.__init__, s.start_api_server, s.ConsolePopen\n"
            "from privgames.environments.ray_session import ensure_ray\n"
            "ensure_ray(1)\n"
            "assert n.Node.__init__ is init and s.start_api_server is start\n"
            "assert s.ConsolePopen is popen and c.RAY_DISABLE_FAILURE_SIGNAL_HANDLER is False\n"
            "import os; from privgames.environments.ray_reaper import children, is_ray\n"
            "kids = [p for p in children().get(os.getpid(), []) if is_ray(p)]\n"
            "assert len(kids) >= 2 and all(os.getsid(p) != os.getsid(0) for p in kids), kids\n"
            "print('ok')\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_exit_hook_never_raises_when_ray_s_internals_moved():
    moved = types.SimpleNamespace(is_initialized=lambda: True,
                                  _private=types.SimpleNamespace(worker=types.SimpleNamespace()))
    with pytest.warns(UserWarning, match="fast Ray teardown unavailable"):
        ray_session._shutdown_at_once(moved)


def test_a_missing_internal_is_announced(monkeypatch):
    import ray._private.services as services

    monkeypatch.delattr(services, "start_api_server")
    with pytest.warns(RuntimeWarning, match="start_api_server"), ray_session._lean_local_start():
        pass
    assert not hasattr(services, "start_api_server")
