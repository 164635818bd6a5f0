"""Shared fixtures: one Ray session for the whole test run (``ray.init`` costs seconds)."""

from __future__ import annotations

import pytest


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
