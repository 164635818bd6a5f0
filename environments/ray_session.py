"""One Ray session for the process: local on loopback by default, or a cluster by address."""

from __future__ import annotations

import os


def ensure_ray(workers: int | None = None, address: str | None = None):
    """The Ray module with a session: reuse one, join ``address``, or start a local one.

    ``address`` (or ``RAY_ADDRESS``) joins a cluster. Otherwise a local Ray with ``workers``
    CPUs starts without a dashboard and with every server on loopback: Ray binds to the node's
    IP unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its single-machine mode) is set before
    ``ray`` is imported, which this function does.
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
    return ray
