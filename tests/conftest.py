"""Shared fixtures: one Ray session for the whole test run (``ray.init`` costs seconds)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    from privgames.environments.ray_session import ensure_ray

    ray = ensure_ray(workers=2)
    yield ray
    ray.shutdown()
