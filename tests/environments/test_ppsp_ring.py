"""The PPSP ring: Example 2, sum invariance, backends, attacks, learning nodes, bad input."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privgames.analysis import experiments
from privgames.analysis.claims import z_threshold
from privgames.environments import ppsp_ring as ring
from privgames.environments.config import ConfigError
from privgames.environments.ppsp_ring import (
    EXAMPLE2_SECRETS,
    PPSPConfig,
    PPSPModel,
)
from privgames.mechanisms import ppsp

EXAMPLE2 = PPSPConfig(n=10, K=6000, c=1000.0, d=1.0, secrets=EXAMPLE2_SECRETS, leave_at=2000,
                      join_at=4000, replications=20)


def test_example2_recovers_each_phase_sum():
    """At the end of each phase (static ring of m nodes for far more than m steps) every node's
    y_i - sum s is Gaussian with the exact variance of the last-m-states estimator: the 29
    estimates of replication 0 are held to the family-wise 3-sigma threshold, and the mean error
    over the 20 replications to 3 SE of its exact value m sigma sqrt(2/pi)."""
    model = PPSPModel(EXAMPLE2, seed=0)
    run = model.run().record()
    frame = model.results()
    phases = ((0, 2000, 500.0, 10), (2000, 4000, 400.0, 9), (4000, 6000, 500.0, 10))
    threshold = z_threshold(sum(m for *_, m in phases))
    for start, end, target, m in phases:
        assert run.targets[end - 1] == pytest.approx(target, abs=1e-3)
        std = np.stack([np.full(m, ppsp.noise_std(s, 1000.0, 1.0)) for s in range(end - m + 1,
                                                                                    end)])
        sigma = math.sqrt(ppsp.estimator_error_variance(std)[0])
        estimates = run.estimates[end - 1][~np.isnan(run.estimates[end - 1])]
        assert estimates.size == m
        assert np.all(np.abs(estimates - target) < threshold * sigma)
        last = frame.iloc[end - 1]
        assert abs(last["error"] - m * sigma * math.sqrt(2 / math.pi)) < 3 * last["error_se"]
        assert frame["error"][start:start + 10].max() > 100 * last["error"]  # the disturbance
    assert frame["sum_drift"].max() < 1e-9 * 500


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 9), K=st.integers(2, 30), data=st.data(),
       noise=st.sampled_from(["gaussian", "laplace"]),
       schedule=st.sampled_from(["harmonic", "geometric"]))
def test_network_sum_is_invariant(n, K, data, noise, schedule):
    """Every step, the leave and the join keep sum(x) equal to the active nodes' secrets."""
    leave_at = data.draw(st.one_of(st.none(), st.integers(0, K - 1)))
    kwargs = {}
    if leave_at is not None:
        kwargs["leave_at"] = leave_at
        kwargs["leave_node"] = data.draw(st.integers(0, n - 1))
        if leave_at < K - 1 and data.draw(st.booleans()):
            kwargs["join_at"] = data.draw(st.integers(leave_at + 1, K - 1))
    cfg = PPSPConfig(n=n, K=K, c=50.0, noise=noise, schedule=schedule, replications=3, **kwargs)
    run = PPSPModel(cfg, seed=data.draw(st.integers(0, 2**32 - 1))).run().record()
    scale = 1e3 + np.abs(run.sums).max()
    assert np.all(np.abs(run.sums - run.targets[:, None]) <= 1e-9 * scale)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(3, 8), K=st.integers(1, 20), seed=st.integers(0, 1000))
def test_async_ring_keeps_the_sum_with_mailboxes(n, K, seed):
    model = PPSPModel(PPSPConfig(n=n, K=K, protocol="async", c=10.0, replications=4), seed=seed)
    run = model.run().record()
    assert np.allclose(run.sums, run.targets[:, None], rtol=1e-9, atol=1e-9)


def test_async_estimator_error_falls_like_one_over_sqrt_ticks():
    """AI-PPSP's time-averaged estimator: four times the ticks halve the error (1/sqrt(ticks),
    not SI-PPSP's geometric rate). The ratio of the errors at steps 100 and 400 is within 3 SE
    of 1/2 (delta method over the two errors' SEs; the two are positively correlated, so this
    SE is conservative)."""
    cfg = PPSPConfig(n=6, K=400, protocol="async", c=1.0, d=1.0, replications=200)
    frame = PPSPModel(cfg, seed=3).run().results()
    early, late = frame.iloc[99], frame.iloc[399]
    ratio = late["error"] / early["error"]
    se = ratio * math.hypot(early["error_se"] / early["error"], late["error_se"] / late["error"])
    assert abs(ratio - 0.5) < 3 * se and se < 0.05


def test_final_error_matches_the_exact_formula():
    """Gaussian noise: E sum_i |y_i - s| from the exact variance, within 3 SE of 400 runs."""
    cfg = PPSPConfig(n=8, K=300, c=50.0, d=1.0, replications=400)
    model = PPSPModel(cfg, seed=4)
    frame = model.run().results()
    last = frame.iloc[-1]
    assert abs(last["error"] - model.exact_error(cfg.K)) < 3 * last["error_se"]
    assert last["error"] < model.predicted()["utility_bound"]


@pytest.mark.parametrize("schedule", [
    {"c": (5.0, 80.0, 20.0, 1.0, 40.0, 10.0, 60.0, 3.0), "d": 1.0},
    {"c": 50.0, "d": (0.5, 4.0, 1.0, 9.0, 2.0, 0.2, 6.0, 1.5)},
    {"schedule": "geometric", "c": (5.0, 80.0, 20.0, 1.0, 40.0, 10.0, 60.0, 3.0),
     "phi": (0.9, 0.99, 0.95, 0.8, 0.97, 0.85, 0.93, 0.99)},
], ids=["per-node c", "per-node d", "per-node c and phi"])
def test_final_error_matches_the_exact_formula_with_per_node_schedules(schedule):
    """Nodes with their own noise schedules: each node's estimator variance mixes its own and
    its predecessors' noise levels (the exact formula's neighbour shift), so unequal levels
    test the shift. Within 3 SE of 2,000 runs (a shift off by one reads z = 48 with per-node
    c)."""
    cfg = PPSPConfig(n=8, K=12, replications=2000, **schedule)
    model = PPSPModel(cfg, seed=6)
    last = model.run().results().iloc[-1]
    assert abs(last["error"] - model.exact_error(cfg.K)) < 3 * last["error_se"]


def test_eavesdropper_and_distinguisher():
    """The global eavesdropper's BLUE has the predicted spread; a likelihood-ratio test between
    delta-adjacent secrets is no more accurate than epsilon-DP allows."""
    cfg = PPSPConfig(n=5, K=30, c=300.0, d=1.0, noise="laplace", replications=4000)
    model = PPSPModel(cfg, seed=5, record_messages=True)
    model.run()
    stats, std = model.transcript_statistics()
    est, var = ppsp.best_linear_estimate(stats, std)
    squared = (est - model.secrets[:5]) ** 2
    # each node's mean squared error against its variance: z from the squared errors' own SE
    # (Laplace sums have heavier tails than a Gaussian's 2 var^2), family-wise over 5 nodes
    z = np.abs(squared.mean(axis=0) - var) / (squared.std(axis=0, ddof=1)
                                              / math.sqrt(cfg.replications))
    assert np.all(z < z_threshold(5))
    # world A: node 0's secret is s; world B: s + delta. The test decides A when the loss > 0.
    s0, delta = model.secrets[0], cfg.delta
    loss_a = ppsp.privacy_loss(stats[:, :, :1], std[:, :1], s0, s0 + delta)[:, 0]
    loss_b = ppsp.privacy_loss(stats[:, :, :1] + delta, std[:, :1], s0, s0 + delta)[:, 0]
    accuracy = 0.5 * (np.mean(loss_a > 0) + np.mean(loss_b <= 0))
    eps = model.predicted()["epsilon"]
    bound = ppsp.distinguishing_accuracy_bound(eps)
    assert accuracy <= bound + 3 * math.sqrt(0.25 / cfg.replications)
    assert np.all(loss_a <= eps + 1e-9)


def test_nodes_learn_the_social_optimum_with_equal_weights():
    """Checked without the cubic the nodes use: the learned common c minimises the summed cost
    (bounded scalar minimisation of n times one node's cost), and no node gains by a unilateral
    deviation (brute force over a grid of c)."""
    from scipy.optimize import minimize_scalar

    n, K = 12, 100
    model = PPSPModel(PPSPConfig(n=n, K=K, d=1.0), seed=6)
    path = model.learn_noise(np.ones((n, 3)), rounds=5)
    final = path[path["round"] == 5]["c"].to_numpy()
    assert path[path["round"] == 0]["c"].std() > 0  # they did not start there
    assert np.ptp(final) == 0.0
    social = minimize_scalar(lambda c: n * ppsp.tradeoff_cost(c, c, 1, 1, 1, n, K, 1.0, 1.0),
                             bounds=(1e-3, 1e3), method="bounded",
                             options={"xatol": 1e-10}).x
    assert final[0] == pytest.approx(social, rel=1e-6)
    grid = np.geomspace(1e-3, 1e3, 20001)
    deviate = ppsp.tradeoff_cost(np.maximum(grid, final[0]), np.minimum(grid, final[0]),
                                 1, 1, 1, n, K, 1.0, 1.0)
    stay = ppsp.tradeoff_cost(final[0], final[0], 1, 1, 1, n, K, 1.0, 1.0)
    assert deviate.min() >= stay * (1 - 1e-12)


def test_unequal_weights_end_in_an_equilibrium():
    rng = np.random.default_rng(7)
    model = PPSPModel(PPSPConfig(n=8, K=100, d=1.0), seed=7)
    path = model.learn_noise(rng.uniform(0.2, 5.0, (8, 3)), rounds=10)
    final = path[path["round"] == 10]["c"].to_numpy()
    for i in range(8):  # no node moves when it best-responds again
        others = np.delete(final, i)
        node = model.nodes[i]
        before = node.c
        node.best_respond(others.min(), others.max(), 8, 100, 1.0, 1.0)
        assert node.c == pytest.approx(before)


def test_nodes_are_mesa_agents_over_the_state_array():
    model = PPSPModel(PPSPConfig(n=4, K=3, replications=2), seed=0)
    model.run()
    assert len(model.agents) == 4
    assert model.nodes[2].x == model.state[0, 2]


@pytest.mark.ray
def test_ray_backend_gives_the_same_states(ray_session):
    cfg = PPSPConfig(n=9, K=40, replications=3, shards=3, leave_at=10, leave_node=3,
                     join_at=25, noise="laplace")
    a = PPSPModel(cfg, seed=8).run()
    b = PPSPModel(dataclasses.replace(cfg, backend="ray"), seed=8).run()
    assert a.steps == b.steps == cfg.K
    ra, rb = a.record(), b.record()
    np.testing.assert_array_equal(ra.ids, rb.ids)
    np.testing.assert_array_equal(ra.state, rb.state)
    np.testing.assert_array_equal(ra.estimates, rb.estimates)
    pd.testing.assert_frame_equal(a.results(), b.results(), check_exact=True)


@pytest.mark.ray
@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_ray_shards_across_noise_blocks(ray_session, noise):
    """Two noise streams and a shard whose last nodes (the ones a block's emit steps ahead)
    straddle their boundary: the states, estimates and records are still the vectorized
    ring's, bit for bit (a join and a leave included)."""
    cfg = PPSPConfig(n=16_474, K=60, replications=2, shards=4, leave_at=20, leave_node=5,
                     join_at=30, noise=noise)
    end = int(np.flatnonzero(cfg.segment_of() == 1).max())
    assert (end - 59) // cfg.block != end // cfg.block  # shard 1's tail spans two streams
    a = PPSPModel(cfg, seed=3).run().record()
    b = PPSPModel(dataclasses.replace(cfg, backend="ray"), seed=3).run().record()
    for name in ("ids", "state", "estimates", "error", "sums"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.ray
def test_ray_backend_gives_the_same_rows(ray_session):
    """The experiment's rows (errors, sums, every node's y) are bit-identical on both
    backends, through a leave and a join."""
    e = experiments.get("ppsp-ring")
    params = e.resolve({"n": 7, "K": 60, "replications": 3, "leave_at": 20, "join_at": 40,
                        "shards": 3, "populations": 1})
    label, seed = e.units(params, 0)[0]
    vectorized = e.run_one(params, label, seed)
    on_ray = e.run_one({**params, "backend": "ray"}, label, seed)
    assert (vectorized["metric"] == "y").sum() > 0
    pd.testing.assert_frame_equal(vectorized, on_ray, check_exact=True)


@pytest.mark.ray
@pytest.mark.parametrize("shard,step", [(1, 150), (0, 30)])
def test_a_killed_shard_is_recovered_from_its_checkpoint(ray_session, capfd, shard, step):
    """A shard actor is killed mid-run (before and after the first checkpoint, through a leave
    and a join): a new actor restarts from the last checkpoint, the others roll back to it, and
    the run ends with the undisturbed run's states and records, bit for bit."""
    from privgames.environments.ppsp_ray import run_ray_ring

    cfg = PPSPConfig(n=7, K=250, backend="ray", shards=2, replications=2, leave_at=120,
                     leave_node=3, join_at=180)
    undisturbed = run_ray_ring(PPSPModel(cfg, seed=9))
    recovered = run_ray_ring(PPSPModel(cfg, seed=9), kill_shard=(shard, step))
    checkpoint = step // 100 * 100
    found = re.search(rf"ring shard {shard} lost before step (\d+); restarted from the "
                      rf"checkpoint at step {checkpoint}\n", capfd.readouterr().err)
    assert found and step < int(found[1]) <= checkpoint + 100  # by the next sync point
    for name in ("ids", "state", "error", "sums", "targets", "estimates"):
        np.testing.assert_array_equal(getattr(recovered, name), getattr(undisturbed, name))


@pytest.mark.parametrize("kwargs,message", [
    ({"n": 2}, r"n=2 is out of range: n must be an integer >= 3"),
    ({"c": 0.0}, r"c=0.0 is out of range: c must be > 0.0"),
    ({"c": [1.0, -1.0, 1.0]}, r"c\[1\]=-1.0 is out of range"),
    ({"d": -1.0}, r"d=-1.0 is out of range: d must be >= 0.0"),
    ({"d": 0.0}, r"d=0 gives v\(0\) = c/0"),
    ({"phi": 1.0, "schedule": "geometric"},
     r"phi=1.0 is out of range: phi must be in \(0.0, 1.0\)"),
    ({"leave_at": 5, "leave_node": 7}, r"leave_node=7 is not on the ring"),
    ({"join_at": 5, "join_node": 1, "join_secret": 3.0}, r"join_node=1 is an existing id"),
    ({"join_at": 5, "join_node": 9}, r"join_secret is missing"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PPSPConfig(**{"n": 3, "K": 10, **kwargs})


@pytest.mark.parametrize("others", [(0.5, 3.0), (2.0, 2.5), (0.01, 0.02), (10.0, 20.0)])
def test_ring_node_best_response_minimises_its_cost(others):
    """Brute force over c: the node's choice attains its minimal cost given the others' range."""
    model = PPSPModel(PPSPConfig(n=5, K=50, d=1.0), seed=0)
    node = model.nodes[0]
    node.weights = (0.5, 2.0, 3.0)
    node.best_respond(*others, 5, 50, 1.0, 1.0)
    grid = np.geomspace(1e-4, 1e3, 20001)

    def cost(c):
        return ppsp.tradeoff_cost(np.maximum(c, others[1]), np.minimum(c, others[0]),
                                  *node.weights, 5, 50, 1.0, 1.0)

    assert cost(node.c) <= cost(grid).min() * (1 + 1e-12)


def test_stepping_by_hand_is_the_same_as_run():
    cfg = PPSPConfig(n=6, K=30, replications=4, leave_at=10, join_at=20, noise="laplace")
    by_hand = PPSPModel(cfg, seed=11)
    for _ in range(12):
        by_hand.step()
    assert by_hand.steps == 12 and by_hand.ids.size == 5  # node 5 left at step 10
    whole = PPSPModel(cfg, seed=11).run()
    assert by_hand.run() is by_hand and by_hand.steps == whole.steps == 30
    np.testing.assert_array_equal(by_hand.state, whole.state)
    pd.testing.assert_frame_equal(by_hand.results(), whole.results(), check_exact=True)


class _BruteWindow(ring.Window):
    """The old estimator: every step, the sum over the buffer's last m rows (O(m n R))."""

    def record(self, ids, state, target, m):
        super().record(ids, state, target, m)
        rows = [(self.step - 1 - r) % self.cap for r in range(min(m, self.step))]
        y = np.nansum(self.buffer[rows][:, :, ids], axis=0)
        self.brute.append(np.abs(y - target).sum(axis=1))


def test_running_window_is_the_sum_of_the_last_m_states(monkeypatch):
    """The O(n R)-per-step running sum equals the direct sum over the window at every step,
    through a leave and a join (the window shrinks, then grows back)."""
    made = []

    def window(config):
        w = _BruteWindow(config)
        w.brute = []
        made.append(w)
        return w

    monkeypatch.setattr(ring, "Window", window)
    cfg = ring.PPSPConfig(n=12, K=150, replications=3, leave_at=40, leave_node=5, join_at=90)
    run = ring.PPSPModel(cfg, 4).run().record()
    np.testing.assert_allclose(run.error, np.array(made[0].brute), rtol=1e-9, atol=1e-9)


def test_final_error_without_the_window_matches_with_it_and_the_exact_formula(monkeypatch):
    """A ring too large for the per-step window still reports its final error (the last m
    states summed in O(n R) memory): the same number as the windowed run, and the exact
    formula within 3 SE (40 replications)."""
    cfg = ring.PPSPConfig(n=60, K=300, replications=40)
    full = ring.PPSPModel(cfg, 5).run()
    monkeypatch.setattr(ring, "MAX_WINDOW_BYTES", 1024)
    small = ring.PPSPModel(cfg, 5).run()
    assert not small.window.enabled and small.window.buffer is None
    a, b = full.record().error, small.record().error
    assert np.isnan(b[:-1]).all()
    np.testing.assert_allclose(b[-1], a[-1], rtol=1e-9)
    err = b[-1]
    assert abs(err.mean() - small.exact_error(cfg.K)) < 3 * err.std(ddof=1) / np.sqrt(err.size)


def test_a_ring_shard_holds_only_its_segment():
    """A Ray ring's shard builds its segment from the seeds (the secrets are the whole ring's
    draw, skipped ahead to the segment) and holds arrays of its own nodes only; the driver's
    model holds no node."""
    from privgames.environments.ppsp_ray import RingShard

    cfg = PPSPConfig(n=40_000, K=3, replications=2, backend="ray", shards=4, leave_at=1,
                     leave_node=15_000, join_at=2)
    driver = PPSPModel(cfg, seed=4)
    assert driver.nodes == {} and driver.state is None and len(driver.agents) == 0
    whole = PPSPModel(dataclasses.replace(cfg, backend="vectorized"), seed=4)
    bounds = cfg.segment_bounds()
    assert bounds.tolist() == [0, 10_000, 20_000, 30_000, 40_000]
    for segment in (1, 3):  # the leaver's (and its rejoining's) segment, and the last
        shard = RingShard()
        shard.setup(cfg, driver.secret_state, driver.noise_seed, segment,
                    float(whole.secrets[cfg.join_node]))
        lo, hi = bounds[segment], bounds[segment + 1]
        np.testing.assert_array_equal(shard.state, whole.state[:, lo:hi])
        sizes = [a.size for a in (shard.state, shard.window.running, shard.secrets)]
        assert max(sizes) <= cfg.replications * (hi - lo + 1)
        assert shard.secret_total(None) == pytest.approx(whole.secrets[lo:hi].sum(), rel=1e-12)


@pytest.mark.ray
def test_a_large_ray_ring_keeps_its_final_states_in_the_shards(ray_session, monkeypatch):
    """Above ``GATHER_LIMIT`` numbers the driver gathers no final state: the records are
    complete (and the vectorized ring's), the final ids and states are ``None``."""
    from privgames.environments import ppsp_ray

    cfg = PPSPConfig(n=60, K=12, replications=2, backend="ray", shards=3)
    monkeypatch.setattr(ppsp_ray, "GATHER_LIMIT", 100)
    run = PPSPModel(cfg, seed=2).run().record()
    whole = PPSPModel(dataclasses.replace(cfg, backend="vectorized"), seed=2).run().record()
    assert run.ids is None and run.state is None
    for name in ("error", "sums", "targets"):
        np.testing.assert_array_equal(getattr(run, name), getattr(whole, name))
