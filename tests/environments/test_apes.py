"""The APES environment: users, shuffler and analyzer; frameworks; Ray; the audit."""

from __future__ import annotations

import numpy as np
import pytest

from privgames.environments.apes import APESConfig, APESModel, perturb
from privgames.environments.apes_audit import AuditConfig, audit, clopper_pearson, released_sums
from privgames.environments.config import ConfigError
from privgames.mechanisms.noise import (
    clip_laplace_mean,
    clip_laplace_sample,
    clip_laplace_var,
    clip_laplace_zero,
)
from privgames.mechanisms.shuffle import eon_bound


def test_shuffler_permutes_within_dimensions_and_the_budgets_separately():
    model = APESModel(APESConfig(n=40, rounds=1), 1)
    model.collect_reports(0)
    before = model.reports.copy()
    model.shuffler.shuffle()
    shuffled = model.shuffled_reports()
    np.testing.assert_array_equal(np.sort(before, axis=0), np.sort(shuffled, axis=0))
    assert not np.array_equal(before, shuffled)
    np.testing.assert_array_equal(shuffled, model.shuffled_reports())  # one order per round
    # each dimension in its own order: the permutations taking a row to its shuffle differ
    perms = {tuple(np.argsort(b)[np.searchsorted(np.sort(b), s)])
             for b, s in zip(before.T[:50], shuffled.T[:50], strict=True)}
    assert len(perms) > 1
    np.testing.assert_array_equal(np.sort(model.shuffled_budgets), np.sort(model.budgets))
    np.testing.assert_array_equal(model.reports, before)  # what the users sent is kept
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


def test_softmax_gradients_are_the_cross_entropy_gradient():
    """Each user's gradient equals a central finite difference of its mean cross-entropy over
    its samples (step 1e-6: truncation and rounding error below 1e-8)."""
    from privgames.environments.apes import softmax_gradients

    rng = np.random.default_rng(8)
    users, samples, classes, features = 3, 4, 5, 6
    X = rng.normal(size=(users, samples, features))
    y = rng.integers(0, classes, (users, samples))
    w = rng.normal(size=(classes, features))

    def loss(u: int, weights: np.ndarray) -> float:
        logits = X[u] @ weights.T
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(-log_p[np.arange(samples), y[u]].mean())

    grads = softmax_gradients(w, X, y).reshape(users, classes, features)
    h = 1e-6
    for u in range(users):
        for c, f in np.ndindex(classes, features):
            step = np.zeros_like(w)
            step[c, f] = h
            numeric = (loss(u, w + step) - loss(u, w - step)) / (2 * h)
            assert grads[u, c, f] == pytest.approx(numeric, abs=1e-8)


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


def test_budgets_outside_the_formulas_range_of_validity_are_refused():
    """Below MIN_BUDGET eq (1)'s closed form loses its digits (pinned against 50-digit
    arithmetic: within 1e-8 at the bound, worse than 1e-6 a decade below); above MAX_BUDGET
    the amplification bounds' e^eps overflows."""
    import mpmath

    from privgames.environments.apes import MAX_BUDGET, MIN_BUDGET
    from privgames.mechanisms.noise import clip_laplace_mean

    mpmath.mp.dps = 50

    def worst(eps: float) -> float:
        errors = []
        for x in np.linspace(-1, 1, 41)[1:-1]:
            lam, xm = mpmath.mpf(2) / eps, mpmath.mpf(x)
            e1, e2 = mpmath.exp((-1 - xm) / lam), mpmath.exp((-1 + xm) / lam)
            exact = float(((1 + lam) * (e1 - e2) + 2 * xm) / (2 - e1 - e2))
            got = float(clip_laplace_mean(np.array(x), np.array(eps), 1.0))
            errors.append(abs(got - exact) / max(abs(exact), 1e-300) if exact else abs(got))
        return max(errors)

    assert worst(MIN_BUDGET) < 1e-8 < 1e-6 < worst(MIN_BUDGET / 10)
    for bad in (MIN_BUDGET / 2, MAX_BUDGET * 1.5, 5e-324, 1.7e308):
        with pytest.raises(ConfigError, match=r"budgets\[0\]="):
            APESConfig(n=2, budgets=(bad, 1.0))
    APESConfig(n=2, budgets=(MIN_BUDGET, MAX_BUDGET))


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
    assert model.config.d == 7850 and model.reports.shape == (20, 7850)
    assert model.w.shape == (10, 785)
    (tmp_path / "bad.npz").write_text("not an archive")
    with pytest.raises(ConfigError, match="is not an MNIST file"):
        APESModel(APESConfig(n=20, data=str(tmp_path / "bad.npz")), 0)


def test_s_apes_perturbs_each_dimension_at_its_own_budget():
    """Erratum (Algorithm 2's ``d Delta f / eps_i``): every coordinate is perturbed at scale
    ``2C / eps_i``, as in APES. With b = d every report is ``CLap(g, 2C/eps, C)``: its mean and
    variance per coordinate match eq (1) and the closed-form variance within 3 SE (a scale
    ``d`` times larger would leave the variance near the uniform's ``C^2/3``)."""
    cfg = APESConfig(n=4, framework="s-apes", b_ratio=1.0)
    users, eps = 20_000, 2.0
    g = np.full((users, cfg.d), 0.3 * cfg.C)
    out = perturb(g, np.full(users, eps), cfg, np.random.default_rng(4))[:, :5]
    mean, var = clip_laplace_mean(0.3 * cfg.C, eps, cfg.C), clip_laplace_var(0.3 * cfg.C, eps,
                                                                              cfg.C)
    assert np.all(np.abs(out.mean(axis=0) - mean) < 3 * np.sqrt(var / users))
    squared = (out - out.mean(axis=0)) ** 2  # the variance's SE from its own draws
    assert np.all(np.abs(squared.mean(axis=0) - var)
                  < 3 * squared.std(axis=0, ddof=1) / np.sqrt(users))


def test_random_sparsification_perturbs_only_the_chosen_values_in_the_same_law():
    """Random sparsification draws the ``b`` kept values only; the reports' law is that of
    perturbing all ``d`` and choosing ``b`` at random afterwards (written out here). Per
    coordinate (a gradient ramp over ``[-C, C]``) the mean is ``b/d`` of eq (1)'s: the 650
    standardised errors' sum of squares stays below chi-square(650)'s 0.999 quantile; two-sample
    KS against the written-out procedure on the extreme and middle coordinates (p > 1e-3)."""
    from scipy.stats import chi2, ks_2samp

    cfg = APESConfig(n=4, framework="s-apes", sparsify="random", b_ratio=0.1)
    users, eps = 20_000, 20.0  # little noise: the means follow the gradients closely
    g = np.broadcast_to(np.linspace(-cfg.C, cfg.C, cfg.d), (users, cfg.d))
    budgets = np.full(users, eps)
    stream = np.random.default_rng(5)
    new = perturb(g, budgets, cfg, stream)
    spent = np.random.default_rng(5)
    spent.random(users * (2 * cfg.d + cfg.b))  # scores, the b kept, the padding: no more
    assert stream.random() == spent.random()
    rng = np.random.default_rng(6)  # the procedure as first written: perturb all, then choose
    perturbed = clip_laplace_sample(g, eps, cfg.C, rng)
    keep = np.argpartition(rng.random(g.shape), cfg.d - cfg.b, axis=1)[:, cfg.d - cfg.b:]
    old = clip_laplace_zero(eps, cfg.C, g.shape, rng)
    np.put_along_axis(old, keep, np.take_along_axis(perturbed, keep, axis=1), axis=1)
    share = cfg.b / cfg.d
    mean = share * clip_laplace_mean(g[0], eps, cfg.C)
    z = (new.mean(axis=0) - mean) / (new.std(axis=0, ddof=1) / np.sqrt(users))
    assert np.sum(z**2) < chi2.ppf(0.999, cfg.d)
    for j in (0, cfg.d // 2, cfg.d - 1):
        assert ks_2samp(new[:, j], old[:, j]).pvalue > 1e-3


def test_s_apes_local_user_epsilon_is_d_times_the_budget():
    """Erratum (S-APES's local user-level epsilon): the top-b choice reads every perturbed
    value, so the release is ``d eps_i``-LDP; the paper's ``b eps_i`` is reported beside it."""
    cfg = APESConfig(n=50, framework="s-apes", b_ratio=0.2)
    acc = APESModel(cfg, 1).predicted()
    budgets = APESModel(cfg, 1).budgets
    assert acc["eps_user_local_max"] == pytest.approx(cfg.d * budgets.max())
    assert acc["eps_user_local_paper_max"] == pytest.approx(cfg.b * budgets.max())


@pytest.mark.parametrize("sparsify,budget", [("post", 5.0), ("random", 20.0)])
def test_s_apes_analyzer_uses_the_more_accurate_rescale(sparsify, budget):
    """Erratum (S-APES analyzer), decided by measurement: dividing the mean by ``b/d`` makes
    random sparsification unbiased and is kept there; under top-b (``post``) it made the
    gradient's RMS error 3-4 times larger and is not applied. The analyzer's error is the
    smaller of the two estimates' at each setting (the other is at least 1.5 times larger;
    seed-to-seed spread 2%)."""
    cfg = APESConfig(n=3000, framework="s-apes", sparsify=sparsify, rounds=1,
                     budgets=tuple([budget] * 3000))
    model = APESModel(cfg, 0)
    model.step()
    mean = model.reports.mean(axis=0)
    errors = [np.sqrt(np.mean((model.analyzer.calibration()(mean * s) - model.true_mean) ** 2))
              for s in (1.0, cfg.d / cfg.b)]
    assert model.gradient_error == pytest.approx(min(errors), rel=1e-12)
    assert max(errors) > 1.5 * min(errors)


def test_two_users_need_no_groups_setting_and_too_many_groups_are_named():
    """n = 2 (the page's smallest) runs with the default groups (min(4, n)); groups above n
    is refused by its own name."""
    assert APESConfig(n=2).groups == 2 and APESConfig(n=500).groups == 4
    with pytest.raises(ConfigError, match=r"groups=5 is out of range"):
        APESConfig(n=2, groups=5)
