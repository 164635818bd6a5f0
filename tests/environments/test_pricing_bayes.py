"""Clients with binary private types learning reports and noise."""

from __future__ import annotations

import numpy as np
import pytest

from privgames.environments.config import ConfigError
from privgames.environments.pricing_bayes import BayesConfig, BayesianPricingModel


def test_clients_stay_truthful_at_the_optimum_with_the_mechanism():
    m = BayesianPricingModel(BayesConfig(N=15, eta=0.3), seed=2).run()
    assert m.truthful()
    np.testing.assert_allclose(m.strategy[1], m.design["target"], rtol=1e-6)
    assert m.expected_social_cost() == pytest.approx(m.predicted()["optimal_social_cost"],
                                                     rel=1e-9)
    assert len(m.clients) == 15


def test_without_rewards_the_low_type_learns_to_misreport():
    m = BayesianPricingModel(BayesConfig(N=15, eta=0.3, mechanism="penalties"), seed=2).run()
    assert m.strategy[0][0] == 1  # the low type reports high
    assert not m.truthful()


@pytest.mark.parametrize("kwargs,message", [
    ({"eta": 0.0}, r"eta=0.0 is out of range: eta must be in \(0.0, 1.0\)"),
    ({"alpha_L": 0.8, "alpha_H": 0.5}, r"alpha_L=0.8 is out of range: alpha_L must be below"),
    ({"mechanism": "some"}, r"mechanism='some' is not allowed"),
    ({"N": 1}, r"N=1 is out of range"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BayesConfig(**kwargs)
