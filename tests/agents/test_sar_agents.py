"""The SAR user's confidence bound on the colluder probability."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, binom

from privgames.agents.sar_agents import SARUser
from privgames.environments.sar import SARConfig, SARModel


def user_after(seen: int, colluders: int) -> SARUser:
    # Mesa's AgentSet holds its agents weakly: keep the model referenced until the user is,
    # or a garbage collection between ``.users`` and ``[0]`` empties the set.
    model = SARModel(SARConfig(K=3, d=1), seed=0)
    user = model.users[0]
    user.observe(seen, colluders)
    return user


@pytest.mark.parametrize(("seen", "colluders", "confidence"),
                         [(20, 1, 0.9), (100, 5, 0.5), (31, 30, 0.99), (400, 7, 0.95)])
def test_lower_bound_is_the_clopper_pearson_bound(seen, colluders, confidence):
    """The Beta(x, n - x + 1) quantile at 1 - confidence (scipy.stats as the reference)."""
    bound = user_after(seen, colluders).p_lower_bound(confidence)
    assert bound == pytest.approx(beta.ppf(1 - confidence, colluders, seen - colluders + 1),
                                  rel=1e-12)


def test_lower_bound_covers_p_at_its_confidence():
    """Exact coverage over every count x of Binomial(n, p): P(bound(x) <= p) >= confidence."""
    n, p, confidence = 60, 0.12, 0.9
    counts = np.arange(n + 1)
    covered = np.array([user_after(n, x).p_lower_bound(confidence) <= p for x in counts])
    assert binom.pmf(counts, n, p)[covered].sum() >= confidence
