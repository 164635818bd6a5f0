"""The pages without a browser: their inputs are what the configs accept, their models step and
draw from the first round, a refused value leaves a message and no model."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from privgames.analysis.pages import PageModel, all_pages, format_reading
from privgames.environments.config import ConfigError
from privgames.environments.sar import SARConfig

ROUTES = list(all_pages())


def _values(page, **changes):
    base = {f.name: f.default for f in dataclasses.fields(page.config_type)}
    return {**base, **page.fixed, **changes}


@pytest.mark.parametrize("route", ROUTES)
def test_every_input_s_ends_are_accepted_by_the_config(route):
    """A slider's ends, every select's choices and a checkbox's two values build a config
    (nothing the page offers is refused for that parameter's own range)."""
    page = all_pages()[route]
    for name, spec in page.model_params().items():
        if name in ("seed", "agent"):  # the page's own inputs, not the config's
            continue
        if spec["type"] in ("SliderInt", "SliderFloat"):
            offered = [spec["min"], spec["max"]]
        elif spec["type"] == "Select":
            offered = spec["values"]
        elif spec["type"] == "Checkbox":
            offered = [True, False]
        else:
            continue
        ends = {other: page.display_max[other] for other in page.inputs
                if other != name and other in page.display_max}
        for value in offered:
            try:
                page.config_type(**_values(page, **{name: value}))
            except ConfigError as err:
                if err.parameter != name:
                    continue
                try:  # a range that depends on other inputs: their ends admit it
                    page.config_type(**_values(page, **ends, **{name: value}))
                except ConfigError as wide:
                    assert wide.parameter != name, f"{route}: {name}={value!r} never accepted"


@pytest.mark.parametrize("route,name,depends,most", [("sar", "N", "d", 200),
                                                     ("bas", "subsequences", "K", 1000)])
def test_a_range_follows_the_input_it_depends_on(route, name, depends, most):
    """Issue 30: SAR's slices (N <= d) and BAS's sub-sequences (<= K) reach as far as their
    dependency's page end, not only as far as its starting value allows."""
    page = all_pages()[route]
    assert page.display_max[depends] == most
    assert page.model_params()[name]["max"] == most
    model = PageModel.of(page)(**{**page.defaults(), depends: most, name: most})
    assert model.error is None
    refused = PageModel.of(page)(**{**page.defaults(), name: most})  # at the starting value
    assert refused.error is not None and f"{name}={most}" in refused.error


@pytest.mark.parametrize("route", ROUTES)
def test_a_page_model_steps_and_draws_from_its_first_round(route):
    page = all_pages()[route]
    model = PageModel.of(page)(seed=3, **page.defaults())
    assert model.error is None
    for steps in (0, 2):
        while model.env.steps < steps:
            model.step()
        for draw in (page.agents, page.measures):
            figure = draw(model.env)
            assert any(ax.has_data() for ax in figure.axes), (route, steps, draw.__name__)
        first = next(iter(page.readings(model.env).values()))
        assert first == steps  # the rounds (or steps) done come first


@pytest.mark.parametrize("route", ROUTES)
def test_the_same_seed_gives_the_same_page_and_another_seed_another(route):
    page = all_pages()[route]

    def shown(seed):
        model = PageModel.of(page)(seed=seed, **page.defaults())
        for _ in range(2):
            model.step()
        png = io.BytesIO()
        page.agents(model.env).savefig(png, format="png", metadata={"Software": None})
        return [format_reading(v) for v in page.readings(model.env).values()], png.getvalue()

    assert shown(5) == shown(5)
    assert shown(5) != shown(6)


def _png(fig):
    png = io.BytesIO()
    fig.savefig(png, format="png", metadata={"Software": None})
    return png.getvalue()


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("many", [False, True])
def test_a_redrawn_figure_is_the_figure_drawn_anew(route, many):
    """A step draws into the figure of the step before (its axes and ticks kept): pixel for
    pixel what a new figure shows, before the first round, after it and after two, with a few
    agents (discs, ticks, colour bars) and with more than ``MANY`` (points and lines)."""
    page = all_pages()[route]
    if many and page.size is None:
        pytest.skip("k-means has no agents to count")
    model = PageModel.of(page)(seed=3, **{**page.defaults(), **({page.size: 100} if many else {})})
    assert model.error is None, model.error
    for steps in range(3):
        for kind, draw in (("agents", page.agents), ("measures", page.draw_measures)):
            assert _png(model.figure(kind)) == _png(draw(model.env)), (kind, steps)
        model.step()


def test_a_refused_value_leaves_the_config_s_message_and_stepping_does_nothing():
    page = all_pages()["bas"]
    model = PageModel.of(page)(**{**page.defaults(), "K": 2, "subsequences": 5})
    assert model.env is None and not model.running
    assert model.error.startswith("subsequences=5 is out of range")
    model.step()
    assert model.env is None


def test_text_inputs_take_json():
    page = all_pages()["ppsp"]
    model = PageModel.of(page)(**{**page.defaults(), "leave_node": "4", "join_at": "null"})
    assert model.env.config.leave_node == 4 and model.env.config.join_at is None


def test_every_page_builds_at_its_inputs_lower_ends():
    """At each slider's lowest value the page builds its environment, or its message names an
    input the page shows (not a parameter it does not show: APES at n = 2 once named groups).
    The upper ends build the largest models; the browser tests and bench_pages step them."""
    import re

    for page in all_pages().values():
        for name, spec in page.model_params().items():
            if name == "seed" or spec["type"] not in ("SliderInt", "SliderFloat"):
                continue
            for value in (spec["min"],):
                model = PageModel.of(page)(**{**page.defaults(), name: value})
                named = re.match(r"[\w/]+", model.error or "")
                assert model.error is None or set(named.group().split("/")) <= set(
                    page.inputs), (page.route, name, value, model.error)


def test_the_asynchronous_ring_is_reachable_from_the_page():
    """leave_at and join_at may be none (the config's default): the page offers them as text
    that takes null, so protocol=async (which refuses events) can be chosen and runs."""
    page = all_pages()["ppsp"]
    params = page.model_params()
    for name in ("leave_at", "join_at"):
        assert params[name]["type"] == "InputText" and "null" in params[name]["label"]
    model = PageModel.of(page)(**{**page.defaults(), "protocol": "async", "leave_at": "null",
                                  "join_at": "null"})
    assert model.error is None and model.env.config.protocol == "async"
    model.step()
    assert model.env.steps == 1


def test_the_pricing_page_draws_clients_who_opt_out():
    """Under the MLE rule without prices clients free-ride: the page keeps them visible."""
    page = all_pages()["pricing"]
    model = PageModel.of(page)(**{**page.defaults(), "N": 6, "rounds": 300})
    while model.running:
        model.step()
    out = int(np.isinf(model.env.sigma).sum())
    assert out > 0
    assert page.readings(model.env)["participants"] == 6 - out
    figure = page.agents(model.env)
    marked = [c for c in figure.axes[0].collections if c.get_label().startswith("opts out")]
    assert len(marked[0].get_offsets()) == out


def test_the_learning_page_draws_each_client_row_under_incomplete_information():
    """pricing-bayes on the learning page: a client's two rows (2N agents), each action drawn
    as its report and noise on the axis."""
    page = all_pages()["learning"]
    model = PageModel.of(page)(**{**page.defaults(), "game": "pricing-bayes", "agents": 4,
                                  "learner": "regret_matching"})
    assert model.error is None
    for _ in range(3):
        model.step()
    figure = page.agents(model.env)
    assert len(figure.axes[0].collections[0].get_offsets()) == 8
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert labels[0].startswith("L ") and labels[-1].startswith("H ")


def test_the_learning_page_draws_the_sequential_chain_on_its_path():
    """bas-sequential: one point per user in chain order (not per follower and state), each
    the reply on the path of the last iterate, beside Theorem 1's reply at the same state."""
    page = all_pages()["learning"]
    model = PageModel.of(page)(**{**page.defaults(), "game": "bas-sequential", "agents": 5,
                                  "learner": "best_response", "grid_points": 9})
    for _ in range(3):
        model.step()
    env = model.env
    figure = page.agents(env)
    learned, theory = (c.get_offsets()[:, 1] for c in figure.axes[0].collections[:2])
    from privgames.mechanisms.bas_sequential import BASSequentialGame

    c = env.config
    rows = BASSequentialGame(env.types()["beta"], c.d, c.grid_points).path(
        env.last_iterate())[0]
    np.testing.assert_array_equal(learned, np.searchsorted(env.grid, env.last_iterate()[rows]))
    np.testing.assert_array_equal(theory, np.searchsorted(env.grid,
                                                          env.reference("theorem1")[rows]))
    assert page.readings(env)["largest deviation gain (of own cost)"] == env.nash_gap_relative()


def test_the_sar_page_judges_attacks_at_the_users_still_taking_part():
    """Eq (31)/(32) depend on the participants' count: once users opt out, the page's theory
    is the config's prediction at that count, not at the configured K."""
    page = all_pages()["sar"]
    model = PageModel.of(page)(**{**page.defaults(), "p": 0.2, "min_observations": 5})
    while model.running and model.env.round_stats.get("participants", 30) == 30:
        model.step()
    k = int(model.env.round_stats["participants"])
    assert 3 <= k < 30
    expected = SARConfig(**{**_values(page), "p": 0.2, "K": k}).predicted()
    assert page.readings(model.env)["eq (31)/(32)"] == expected["failure_probability"]


def test_a_sar_run_whose_users_left_says_it_ended_and_stops():
    """Issue 30: with the strong attacker everyone but a few users leaves within rounds; the
    page must not keep showing the last attacked round's chains, nor keep stepping."""
    page = all_pages()["sar"]
    model = PageModel.of(page)(**{**page.defaults(), "attacker": "strong"})
    for _ in range(page.fixed.get("rounds", 100)):
        if not model.running:
            break
        model.step()
    assert not model.running and model.env.ended
    assert model.env.round_stats["participants"] < 3 and model.env.attack is None
    steps = model.env.steps
    model.step()  # stepping an ended run changes nothing
    assert model.env.steps == steps
    title = page.agents(model.env).axes[0].get_title()
    assert title == f"round {steps}: fewer than 3 participants left, the run has ended"


def test_the_command_line_knows_every_page():
    """``privgames viz`` lists the pages without importing them: the lists must agree."""
    from privgames.analysis.experiments import page_routes

    assert page_routes() == tuple(all_pages())


@pytest.mark.parametrize("route,size", [("bas", "K"), ("ppsp", "n"), ("pricing", "N"),
                                        ("learning", "agents")])
def test_at_a_thousand_agents_each_agent_stays_inspectable(route, size):
    """Issue 30: above ``MANY`` agents the figure draws points, and the ``agent`` input puts
    any one agent's numbers in the table; past the population it shows the last agent."""
    page = all_pages()[route]
    assert page.model_params()["agent"]["max"] >= 1000
    model = PageModel.of(page)(seed=2, agent=700, **{**page.defaults(), size: 1000})
    assert model.error is None
    for _ in range(3):
        model.step()
    env = model.env
    shown = model.readings()
    if route == "bas":
        user = int(env.order[699])
        assert shown["user at position 700: σ²"] == env.users[user].sigma2
        assert shown["user at position 700: β"] == env.beta[user]
    elif route == "ppsp":
        node = int(env.ids[699])
        assert shown["node at position 700: id"] == node
        assert shown["node at position 700: secret"] == env.secrets[node]
    elif route == "pricing":
        client = int(np.argsort(env.alpha)[699])
        assert shown["client 700 by α: σ"] == env.sigma[client]
        assert shown["client 700 by α: α"] == np.sort(env.alpha)[699]
    else:  # a Mesa agent, read from its shard
        assert shown["agent 700: action"] == env.last_iterate()[699]
        player = list(env.agents)[699]
        assert shown["agent 700: action played"] == player.action
        for name, value in player.private.items():
            assert shown[f"agent 700: {name}"] == value == env.types()[name][699]
        assert shown["agent 700: its cost"] == player.costs[
            int(np.searchsorted(env.grid, player.action))]
    past = PageModel.of(page)(seed=2, agent=5000, **{**page.defaults(), size: 1000})
    assert any(label.startswith(("user at position 1000", "node at position 1000",
                                 "client 1000", "agent 1000"))
               for label in past.readings())
    fig = page.agents(env)  # points, not one outlined disc per agent
    sizes = np.concatenate([c.get_sizes() for c in fig.axes[0].collections
                            if len(c.get_offsets()) >= 900])
    assert sizes.size and sizes.max() <= 20.0


@pytest.mark.parametrize("route", ROUTES)
def test_before_the_first_step_the_measurement_says_there_is_nothing_yet(route):
    page = all_pages()[route]
    model = PageModel.of(page)(seed=0, **page.defaults())
    texts = [t.get_text() for ax in page.draw_measures(model.env).axes for t in ax.texts]
    assert "no round yet: press Step" in texts
    model.step()
    texts = [t.get_text() for ax in page.draw_measures(model.env).axes for t in ax.texts]
    assert "no round yet: press Step" not in texts


def test_the_kmeans_page_offers_data_and_method_as_choices():
    """Issue 30: no JSON text box for a choice; every method offered builds a model."""
    from privgames.mechanisms.budget import parse_method

    page = all_pages()["kmeans"]
    params = page.model_params()
    assert params["data"]["type"] == params["method"]["type"] == "Select"
    assert "avg" in params["method"]["values"] and "flip-geo/perturb" in params["method"]["values"]
    for method in params["method"]["values"]:
        parse_method(method)


@pytest.mark.parametrize("lo, hi", [(4.88e7, 4.93e7), (770.0, 4806.0), (3.0, 17977.0),
                                    (0.08, 64306.0), (0.0015, 751486.0), (1e-9, 1e12)])
def test_a_log_axis_reads_at_any_range(lo, hi):
    """Between 2 and 7 ticks in view, each labelled in a few characters, whether the axis
    spans 1 % of a decade or 21 decades (decades alone left a narrow one without a label)."""
    from privgames.analysis.pages import log_y, new_figure

    fig, ax = new_figure()
    ax.plot([1, 2], [lo, hi])
    log_y(ax)
    ax.set_ylim(lo, hi)
    fig.savefig(io.BytesIO())
    shown = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    assert 2 <= len(shown) <= 7, shown
    assert all(0 < len(label) <= 7 for label in shown), shown
    assert len(set(shown)) == len(shown)
