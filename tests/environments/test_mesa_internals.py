"""The one Mesa internal privgames replaces (``environments/base.py``): Mesa's per-model agent
id counters. These tests fail when Mesa renames or reshapes it, so an upgrade cannot make the
patch silently do nothing."""

from __future__ import annotations

import gc
import inspect
import subprocess
import sys
import weakref

import mesa

from privgames.environments.base import _AgentIdCounters


def test_mesa_keeps_agent_ids_in_a_class_level_defaultdict_keyed_by_model():
    fresh = subprocess.run([sys.executable, "-c", "import mesa; print(type(mesa.Agent._ids))"],
                           capture_output=True, text=True, check=True).stdout
    assert "collections.defaultdict" in fresh
    assert "_ids[model]" in inspect.getsource(mesa.Agent.__init__)


def test_the_patch_is_installed_and_a_finished_model_is_freed():
    assert isinstance(mesa.Agent._ids, _AgentIdCounters)
    model = mesa.Model(rng=1)
    agents = mesa.Agent.create_agents(model, 3)
    assert [a.unique_id for a in agents] == [1, 2, 3]
    ref = weakref.ref(model)
    del model, agents
    gc.collect()
    assert ref() is None
