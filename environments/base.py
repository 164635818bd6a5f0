"""The surface every environment shares (the Gymnasium habit, in Mesa's idiom).

``Model(config, seed)``; ``step()`` is one round (Mesa counts them in ``steps``);
``run(rounds=None)`` runs the configured number of rounds and returns the model;
``results()`` gives the per-round tidy frame its ``DataCollector`` gathered (``round`` is
1-based); ``predicted()`` gives the theory's numbers for the same config.
"""

from __future__ import annotations

import collections
import itertools
import warnings
import weakref
from typing import Any, Self

import mesa
import pandas as pd

from privgames.environments import progress
from privgames.environments.streams import Seed, generator


class _AgentIdCounters(weakref.WeakKeyDictionary):
    """Mesa's per-model agent-id counters (``mesa.Agent._ids``) keyed weakly: Mesa 3.3 keys a
    class-level ``defaultdict`` by the model itself, so every model ever built (with all its
    arrays) stayed alive for the life of the process (+15 MiB per ``ppsp-ring`` population at
    n = 300, found by walking ``gc.get_referrers`` from a finished model to ``mesa.agent``)."""

    def __getitem__(self, model: mesa.Model) -> itertools.count:
        try:
            return super().__getitem__(model)
        except KeyError:
            counter = self[model] = itertools.count(1)
            return counter


def _weakly_keyed_agent_ids() -> None:
    """Install :class:`_AgentIdCounters` where Mesa keeps its counters; a Mesa that keeps them
    otherwise is left alone, with a warning (``tests/environments/test_mesa_internals.py``
    fails on it, so an upgrade cannot drop the fix silently)."""
    if isinstance(getattr(mesa.Agent, "_ids", None), collections.defaultdict):
        mesa.Agent._ids = _AgentIdCounters()
    elif not isinstance(getattr(mesa.Agent, "_ids", None), _AgentIdCounters):
        warnings.warn("privgames: this Mesa keeps no mesa.Agent._ids defaultdict; finished "
                      "models may stay in memory", RuntimeWarning, stacklevel=2)


_weakly_keyed_agent_ids()


class Environment(mesa.Model):
    """Base of every privgames environment.

    Attributes:
        config: the validated configuration (a frozen dataclass).
    """

    def __init__(self, config: Any, seed: Seed = None) -> None:
        super().__init__(rng=generator(seed))
        self.config = config

    def rounds_left(self) -> int:
        """Rounds :meth:`run` makes by default: the configured ``rounds``."""
        return self.config.rounds

    def run(self, rounds: int | None = None) -> Self:
        """Run ``rounds`` rounds (default :meth:`rounds_left`), or until the model sets
        Mesa's ``running`` to False (its dynamics settled), and return the model. Each round
        is reported to a listening sweep's progress bar (:mod:`privgames.environments.progress`)."""
        count = self.rounds_left() if rounds is None else rounds
        for _ in range(count):
            if not self.running:
                break
            self.step()
            progress.advance(1.0 / count)
        return self

    def results(self) -> pd.DataFrame:
        """Per round: the ``DataCollector``'s model reporters, with a 1-based ``round``."""
        df = self.datacollector.get_model_vars_dataframe()
        return df.rename_axis("round").reset_index().assign(round=lambda f: f["round"] + 1)

    def predicted(self) -> dict:
        """The theory's numbers for this configuration."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the model holds outside this process (Ray actors; none by default)."""
