"""Shared fixtures: one Ray session for the whole test run (``ray.init`` costs seconds)."""

from __future__ import annotations

import os

import pytest

# What ensure_ray does before it imports Ray, done before any test module does: Ray reads its
# single-machine (loopback-only) switch once, at import, so the order of tests must not matter.
if not os.environ.get("RAY_ADDRESS"):
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


@pytest.fixture(scope="session")
def ray_session():
    from privgames.environments.ray_session import ensure_ray

    ray = ensure_ray(workers=2)
    yield ray
    ray.shutdown()


def pytest_collection_modifyitems(config, items):
    """Every test that uses the Ray session carries the ``ray`` marker, so ``-m "not ray"``
    never starts Ray (tests that start their own Ray in a subprocess are marked by hand)."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
