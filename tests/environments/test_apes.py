"""The APES environment: users, shuffler and analyzer; frameworks; Ray; the audit."""

from __future__ import annotations

import numpy as np
import pytest

from privgames.environments.apes import APESConfig, APESModel, perturb
from privgames.environments.apes_audit import AuditConfig, audit, clopper_pearson, released_sums
from privgames.environments.config import ConfigError
from privgames.mechanisms.noise import clip_laplace_mean, clip_laplace_var
from privgames.mechanisms.shuffle import eon_bound


def test_shuffler_permutes_within_dimensions_and_the_budgets_separately():
    model = APESModel(APESConfig(n=40, rounds=1), 1)
    model.collect_reports(0)
    before = model.reports.copy()
    model.shuffler.shuffle()
    np.testing.assert_array_equal(np.sort(before, axis=1), np.sort(model.reports, axis=1))
    assert not np.array_equal(before, model.reports)
    np.testing.assert_array_equal(np.sort(model.shuffled_budgets), np.sort(model.budgets))
    assert len(model.users) == 40 and model.users[3].epsilon == model.budgets[3]


def test_analyzer_estimate_is_unbiased_for_the_mean_gradient():
    """APES's calibrated estimate and UniS's plain mean both track the true mean clipped
    gradient; with many users the error shrinks like 1/sqrt(n)."""
    errors = {}
    for n in (200, 3200):
        model = APESModel(APESConfig(n=n, rounds=1), 2).run()
        errors[n] = model.gradient_error
    assert errors[3200] < 0.4 * errors[200]


def test_training_reaches_the_non_private_accuracy_with_a_large_budget():
    big = APESModel(APESConfig(n=300, budgets=tuple([50.0] * 300), rounds=20), 3).run()
    free = APESModel(APESConfig(n=300, framework="non-private", rounds=20), 3).run()
    assert big.test_accuracy() > free.test_accuracy() - 0.03 > 0.8


def test_the_analyzer_builds_its_calibration_once_per_budget_multiset():
    """The same users send the same budgets every round (shuffled): one curve serves every
    round, whatever the order; other budgets get a new one."""
    model = APESModel(APESConfig(n=40, rounds=3), 2)
    model.step()
    first = model.analyzer.calibration()
    model.step()
    assert model.analyzer.calibration() is first
    model.shuffled_budgets = model.shuffled_budgets[::-1].copy()
    assert model.analyzer.calibration() is first
    model.shuffled_budgets = model.shuffled_budgets * 2.0
    assert model.analyzer.calibration() is not first


def test_s_apes_sends_b_real_values_and_pads_the_rest():
    cfg = APESConfig(n=5, framework="s-apes", b_ratio=0.1)
    g = np.zeros((5, cfg.d))
    g[:, :3] = cfg.C  # three informative coordinates
    rng = np.random.default_rng(0)
    out = perturb(g, np.full(5, 50.0), cfg, rng)  # a large budget: outputs near the inputs
    assert out.shape == (5, cfg.d) and np.all(np.abs(out) <= cfg.C)
    assert np.all(out[:, :3] > 0.5 * cfg.C)  # the top-b keep the informative ones
    assert cfg.b == round(0.1 * cfg.d)


def test_ray_groups_give_the_same_numbers(ray_session):
    cfg = dict(n=60, rounds=3, groups=3, framework="s-apes")
    a = APESModel(APESConfig(**cfg), 7).run()
    b = APESModel(APESConfig(**cfg, backend="ray"), 7).run()
    np.testing.assert_array_equal(a.w, b.w)


def test_user_budgets_from_a_file(tmp_path):
    path = tmp_path / "eps.txt"
    path.write_text("\n".join(["0.5"] * 10))
    model = APESModel(APESConfig(n=10, budgets=str(path), rounds=1), 0)
    assert np.all(model.budgets == 0.5)
    (tmp_path / "bad.txt").write_text("0.5\nabc\n")
    with pytest.raises(ConfigError, match="budgets="):
        APESConfig(n=2, budgets=str(tmp_path / "bad.txt"))


@pytest.mark.parametrize("kwargs,needle", [
    ({"C": 0.0}, "C=0.0"), ({"b_ratio": 1.5}, "b_ratio=1.5"), ({"delta_s": 1.0}, "delta_s=1.0"),
    ({"framework": "dp-sgd"}, "framework='dp-sgd'"), ({"distribution": "x"}, "distribution="),
    ({"budgets": [0.5, -1.0], "n": 2}, "budgets[1]=-1.0"), ({"data": "/no/such.npz"}, "data="),
])
def test_bad_input(kwargs, needle):
    with pytest.raises(ConfigError) as err:
        APESConfig(**kwargs)
    assert needle in str(err.value)


def test_audit_lower_bound_stays_below_the_upper_bound():
    """The certified lower bound (95% Clopper-Pearson on both rates) is below the EoN bound for
    the same budgets; at n = 5 the attack finds a clearly positive epsilon."""
    cfg = AuditConfig(n=5, trials=20_000)
    result = audit(cfg, 3)
    upper = eon_bound(result["budgets"], cfg.delta_s)
    lo, hi = result["audit_eps_lower_ci"]
    assert 0 < result["audit_eps_lower"] == lo <= result["audit_eps_estimate"] <= hi
    assert lo <= upper


def test_released_sums_have_the_law_of_the_users_reports():
    """The audit's sums on D (target at +C) and D' (-C), the others at 0: each has mean eq (1)
    at its target and variance the sum of the users' closed-form variances, within 3 SE over
    200,000 trials (the variance's SE from the sample's fourth central moment). The two share
    the others' sum: their difference is the difference of the targets' reports alone."""
    budgets, C = np.array([2.0, 0.3, 1.0, 5.0]), 1.0
    on_d, on_d2 = released_sums(budgets, 200_000, C, (8, 9, 10))
    for sums, value in ((on_d, C), (on_d2, -C)):
        mean = float(clip_laplace_mean(value, budgets[0], C))
        var = float(np.sum(clip_laplace_var(np.array([value, 0.0, 0.0, 0.0]), budgets, C)))
        assert abs(sums.mean() - mean) < 3 * np.sqrt(var / sums.size)
        m4 = np.mean((sums - sums.mean()) ** 4)
        assert abs(sums.var() - var) < 3 * np.sqrt((m4 - var**2) / sums.size)
    gap = on_d - on_d2  # in [-2C, 2C] exactly when only the targets' reports differ
    assert np.all(np.abs(gap) <= 2 * C + 1e-12)
    var_gap = 2 * float(clip_laplace_var(C, budgets[0], C))
    m4 = np.mean((gap - gap.mean()) ** 4)
    assert abs(gap.var() - var_gap) < 3 * np.sqrt((m4 - var_gap**2) / gap.size)


def test_clopper_pearson_covers():
    lo, hi = clopper_pearson(np.array([0, 5, 100]), 100, 0.95)
    assert lo[0] == 0 and hi[2] == 1 and lo[1] < 0.05 < hi[1]


def test_an_mnist_file_gives_the_papers_dimension(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=rng.integers(0, 256, (300, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 300))
    model = APESModel(APESConfig(n=20, rounds=1, data=str(path)), 0).run()
    assert model.config.d == 7850 and model.reports.shape == (7850, 20)
    assert model.w.shape == (10, 785)
    (tmp_path / "bad.npz").write_text("not an archive")
    with pytest.raises(ConfigError, match="is not an MNIST file"):
        APESModel(APESConfig(n=20, data=str(tmp_path / "bad.npz")), 0)
