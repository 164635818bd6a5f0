"""One interactive page per environment: its inputs, its agents drawn, its live measurement
beside the theory, and the numbers it shows.

The page server (:mod:`privgames.analysis.viz`) wraps each :class:`Page` in Mesa's SolaraViz;
this module needs neither Solara nor a browser, so every drawing and reading is tested and
timed in-process. The inputs are generated from the config's validators
(:func:`privgames.analysis.parameters.allowed_values`), so a page accepts exactly what
``--set`` accepts; a value the config refuses gives a model that shows the config's one-line
message instead of a drawing (:class:`PageModel`).
"""

from __future__ import annotations

import collections
import contextvars
import dataclasses
import functools
import gc
import importlib
import io
import itertools
import json
import logging
import math
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib
import mesa
import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from privgames.analysis.cli import UsageError, parse_value
from privgames.analysis.experiments import GAMES
from privgames.analysis.guard import (
    DEFAULT_SHARE,
    available_memory,
    duration,
    human_bytes,
    page_seconds,
)
from privgames.analysis.parameters import allowed_values, meanings
from privgames.environments.config import ConfigError, check_int, footprint_of

#: A page's figure size (inches) and resolution: shown in a half-width card (about 440 px
#: on a 1400 px screen), where 10 pt text is about 12 px and the 120 dpi image stays sharp.
FIGSIZE, DPI = (5.0, 3.2), 120
THEORY = dict(color="black", linestyle="--", linewidth=1.2)
#: The axes' place in a page's figure (fractions of it), and the room a legend's row below
#: takes.
MARGINS = {"left": 0.16, "right": 0.96, "top": 0.9, "bottom": 0.15, "wspace": 0.6}
LEGEND_ROOM = 0.08
#: Above this many agents a figure draws them as edgeless points and the theory as lines (a
#: disc and a tick per agent turn into a black band); each agent stays readable in the table
#: through the page's ``agent`` input (:attr:`Page.detail`).
MANY = 60
#: How each figure of a page reaches the browser: the agents (up to thousands of points) as
#: a PNG, compressed lightly (level 1: a third less time than the default 6, a few kB more);
#: the measurement (a few lines) as SVG whose text stays text (no glyphs rendered: half a
#: PNG's time, and sharp at any zoom). Both are shown as images, so an SVG runs no script.
RENDER = {"agents": ("png", {"pil_kwargs": {"compress_level": 1}}),
          "measures": ("svg", {})}


@dataclass(frozen=True)
class Page:
    """An environment as a page.

    Attributes:
        route: its address (``/route``) and the name ``privgames viz`` takes.
        title: the page's heading.
        model_type, config_type: the environment and its validated config.
        inputs: the config fields the page lets the user set, in order.
        fixed: the page's starting values where they differ from the config's defaults
            (sizes that step quickly and show the dynamics).
        display_max: a slider's right end where the validator sets none (``--set`` still
            takes larger values).
        agents: the model -> a figure of its agents.
        measures: the model -> a figure of its measurement beside the theory.
        readings: the model -> the numbers the page prints (label -> value).
        size: the input that counts the agents (``None``: nothing to count, as k-means).
        detail: ``(model, k) ->`` the numbers of agent ``k`` (1-based; past the population,
            its last agent), which the page prints below the readings for the agent its
            ``agent`` input selects, so that every agent stays inspectable when the figure
            shows a thousand.
        steps: the config field that counts the run's steps (its work is spread over them).
    """

    route: str
    title: str
    model_type: type
    config_type: type
    inputs: tuple[str, ...]
    agents: Callable[[Any], Figure]
    measures: Callable[[Any], Figure]
    readings: Callable[[Any], dict[str, float]]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    display_max: Mapping[str, float] = field(default_factory=dict)
    choices: Mapping[str, Callable[[], tuple[str, ...]]] = field(default_factory=dict)
    size: str | None = None
    detail: Callable[[Any, int], dict[str, float]] | None = None
    steps: str = "rounds"

    def step_seconds(self, config: Any, fp: Any) -> float:
        """The estimated seconds of one step (or reset) of ``config`` on this page: its
        population's work (``footprint().work``) over its steps, at this page's measured
        rate (``work_rates.json``, ``benchmarks/calibrate_work.py --pages``)."""
        return page_seconds(self.route, fp.work / max(float(getattr(config, self.steps)), 1.0))

    def values(self) -> dict[str, Any]:
        """Every config field's starting value: the config's default, or the page's."""
        return {**{f.name: f.default for f in dataclasses.fields(self.config_type)},
                **self.fixed}

    def defaults(self) -> dict[str, Any]:
        """Every input's starting value."""
        values = self.values()
        return {name: values[name] for name in self.inputs}

    def draw_measures(self, env: Any) -> Figure:
        """The measurement figure; before the first step each of its axes says so (an empty
        plot would show a range around 0 that means nothing)."""
        fig = self.measures(env)
        if env.steps == 0:
            for ax in fig.axes:
                ax.set_xlim(0, 1)
                ax.text(0.5, 0.5, "no round yet: press Step", transform=ax.transAxes,
                        ha="center", va="center", color="grey")
        return fig

    def model_params(self) -> dict[str, dict[str, Any]]:
        """Mesa's ``model_params``: a slider for a bounded number, a select for a choice, a
        checkbox for a flag, a text box (JSON) for anything else; each with its range from
        the config's validator and its meaning as the label's tooltip-free suffix."""
        values = self.values()
        meaning = meanings(self.config_type)
        optional = {f.name for f in dataclasses.fields(self.config_type)
                    if "None" in str(f.type)}
        out: dict[str, dict[str, Any]] = {"seed": {"type": "SliderInt", "value": 0, "min": 0,
                                                   "max": 99, "step": 1, "label": "seed"}}
        for name, value in self.defaults().items():
            allowed = allowed_values(self.config_type, name, values)
            text = meaning[name].replace("``", "")
            label = f"{name}: {text}" if len(text) <= 40 else name
            kind = allowed.kind if allowed is not None and value is not None else "text"
            if name in optional and kind in ("int", "real"):  # a slider cannot say "none"
                kind, label = "text", f"{label} (null: none)"
            if name in self.choices:
                out[name] = {"type": "Select", "value": value,
                             "values": list(self.choices[name]()), "label": label}
            elif kind == "choice":
                out[name] = {"type": "Select", "value": value, "values": list(allowed.choices),
                             "label": label}
            elif kind == "bool":
                out[name] = {"type": "Checkbox", "value": value, "label": label}
            elif kind in ("int", "real") and not isinstance(value, str):
                out[name] = self._slider(name, value, self._widest(name, allowed, values),
                                         label)
            else:
                out[name] = {"type": "InputText", "value": json.dumps(value), "label": label}
        if self.detail is not None:
            most = self.display_max.get(self.size, values[self.size])
            out["agent"] = {"type": "SliderInt", "value": 1, "min": 1, "max": int(most),
                            "step": 1, "label": "agent: whose numbers the table shows"}
        return out

    def _widest(self, name: str, allowed: Any, values: Mapping[str, Any]) -> Any:
        """``name``'s range where it depends on other inputs (SAR's slices ``N <= d``, BAS's
        sub-sequences ``<= K``): the widest over those inputs at their page ends, since a
        slider's range is fixed when the page is made; a value that the other inputs then
        refuse gets the config's one-line message naming it."""
        if allowed.high is None:
            return allowed
        ends = {other: self.display_max[other] for other in self.inputs
                if other != name and other in self.display_max}
        wide = allowed_values(self.config_type, name, {**values, **ends})
        if wide is None or wide.high is None or wide.high <= allowed.high:
            return allowed
        return dataclasses.replace(allowed, high=wide.high, high_open=wide.high_open)

    def _slider(self, name: str, value: float, allowed: Any, label: str) -> dict[str, Any]:
        integer = allowed.kind == "int"
        low = allowed.low if allowed.low is not None else 0.0
        high = allowed.high if allowed.high is not None else self.display_max.get(
            name, max(4.0 * value, low + 1.0))
        if integer:
            low, high = int(low) + allowed.low_open, int(high) - allowed.high_open
            return {"type": "SliderInt", "value": int(value), "min": low, "max": high,
                    "step": 1, "label": label}
        step = (high - low) / 100.0
        low += step * allowed.low_open
        high -= step * allowed.high_open
        return {"type": "SliderFloat", "value": float(value), "min": low, "max": high,
                "step": step, "label": label}


class PageModel(mesa.Model):
    """The Mesa model a page drives: the page's environment built from the inputs, or, when the
    config refuses them, no environment and the config's message (``error``).

    Attributes:
        page: the :class:`Page` (set on each page's subclass).
        env: the environment (``None`` on an error); ``error``: the message or ``None``.
    """

    page: Page

    def __init__(self, seed: int = 0, agent: int = 1, **kwargs: Any) -> None:
        self.error: str | None = None
        self.env = None
        self._figures: dict[str, Figure] = {}
        try:  # a page's browser is untrusted: every value is checked, every failure one line
            check_int("seed", seed, 0, 2**63 - 1)
            check_int("agent", agent, 1)
        except ConfigError as err:
            self.error, seed = str(err), 0
        super().__init__(seed=seed)  # Mesa checks these names against the page's inputs
        self.seed, self.agent = seed, agent
        if self.error is None:
            self.error = _one_line(self._build, kwargs)
        if self.error is not None:
            self.running = False

    def _build(self, kwargs: Mapping[str, Any]) -> None:
        for name, choices in self.page.choices.items():
            if name in kwargs and kwargs[name] not in choices():
                raise ConfigError(f"{name}={kwargs[name]!r} is not offered on this page: "
                                  f"{name} must be one of {', '.join(choices())}")
        values = {**self.page.fixed, **{k: parse_value(k, v) if isinstance(v, str) else v
                                        for k, v in kwargs.items()}}
        config = self.page.config_type(**values)
        LIVE.admit(self, config, self.page)  # a browser may send more than a slider offers
        self.env = self.page.model_type(config, self.seed)

    def step(self) -> None:
        """One round of the environment (nothing while the inputs are refused); the page stops
        when the environment settles or ends, or with one line when a step fails or takes
        more than :data:`STOP_SECONDS`."""
        if self.env is None or not self.running:
            return
        started = time.perf_counter()
        self.error = _one_line(self.env.step)
        took = time.perf_counter() - started
        if self.error is None and took > STOP_SECONDS:
            self.error = (f"a step took {took:.0f} s, above this page's limit of "
                          f"{STOP_SECONDS:g} s: the run is stopped; lower "
                          f"{self.page.size or 'the sizes'} and press Reset")
        self.running = (self.error is None and self.env.running
                        and self.env.rounds_left() > 0 and not getattr(self.env, "ended", False))

    def end(self) -> None:
        """Drop the environment (its session closed, or it made a new model): the page says
        so if it is still shown."""
        self.env, self.running = None, False
        self._figures.clear()
        self.error = "this model has ended (its session made a new one or closed): press Reset"

    def readings(self) -> dict[str, float]:
        """The numbers the page prints: its readings, then the selected agent's."""
        found = self.page.readings(self.env)
        if self.page.detail is not None:
            found.update(self.page.detail(self.env, self.agent))
        return found

    def figure(self, kind: str) -> Figure:
        """The page's figure of ``kind`` (``agents`` or ``measures``) as the model stands,
        drawn into the one drawn last time (:func:`new_figure`): its axes and their ticks are
        kept, which saves about 40 % of a step's drawing (benchmarks/bench_pages.py)."""
        draw = self.page.agents if kind == "agents" else self.page.draw_measures
        token = _RECYCLED.set(self._figures.get(kind))
        try:
            self._figures[kind] = draw(self.env)
        finally:
            _RECYCLED.reset(token)
        return self._figures[kind]

    @classmethod
    def of(cls, page: Page) -> type[PageModel]:
        """The model class of ``page`` (what SolaraViz instantiates on reset)."""
        return type(f"{page.title.replace(' ', '')}Model", (cls,), {"page": page})


def _one_line(work: Callable[..., Any], *args: Any) -> str | None:
    """``work(*args)``; its failure as the one line a page shows (the configs' and limits'
    own messages; anything else by its kind and first line, its traceback on the server's
    log only), or ``None``."""
    try:
        work(*args)
    except (ConfigError, UsageError) as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a browser's input must not break its session
        logging.getLogger("privgames.pages").exception("a page's model failed")
        first = (str(err).strip().splitlines() or [""])[0][:200]
        return f"{type(err).__name__}: {first} (not a value this page can run)"
    return None


#: A page's reset or step may be estimated to take this many seconds of one core (refused
#: beyond, naming the input to lower); a step measured past :data:`STOP_SECONDS` stops its run.
PAGE_SECONDS, STOP_SECONDS = 10.0, 30.0
#: Pages' models alive at once in one server (each browser tab holds one until it closes or
#: Solara culls it, a minute after its browser left).
MAX_MODELS = 12


@dataclass
class _Hold:
    """A live model's reservation: its bytes, the browser session (Solara kernel) that holds
    it, and the model."""

    bytes: float
    session: str | None
    model: weakref.ref


class Admissions:
    """The pages' live models and the memory they hold, admitted against one budget: the
    memory guard's share of what this server may take (:func:`guard.available_memory`: the
    least of ``MemAvailable``, the cgroup's room and ``RLIMIT_AS``), fixed at the first
    admission, so that seven pages that each fit cannot together pass it.

    A browser session holds one model: its previous one (a Reset, another page in the same
    tab) is ended when it is admitted a new one, and a session's model is ended when Solara
    closes the session (its tab closed, or a minute after its connection dropped). Ending a
    model drops its environment at once: Mesa 3.3's controls leave a closure per session in
    Solara's kernel-start callbacks, so the model object itself is never collected.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, _Hold] = {}
        # A model collected hands its key here without the lock: the collector may run its
        # finalizer in a thread that holds the lock already (inside admit).
        self._collected: collections.deque[int] = collections.deque()
        self._keys = itertools.count()  # a model's key (an id may be reused once it is freed)
        self.budget: float | None = None

    def held(self) -> tuple[int, float]:
        """``(models, bytes)`` held now."""
        with self._lock:
            self._end_closed(None)
            return len(self._held), sum(h.bytes for h in self._held.values())

    def admit(self, model: Any, config: Any, page: Page) -> None:
        """Hold ``config``'s estimated peak memory for ``model`` until it ends or is
        collected, or raise ``ConfigError`` naming the input to lower and by how much."""
        fp = footprint_of(config)
        with self._lock:
            if self.budget is None:
                self.budget = DEFAULT_SHARE * available_memory()
        if fp.peak_bytes > self.budget:
            raise self._too_big(config, fp, self.budget)
        seconds = page.step_seconds(config, fp)
        if seconds > PAGE_SECONDS:
            name = page.size or fp.driver
            fits = _largest(config, name, lambda c: page.step_seconds(
                c, footprint_of(c)) <= PAGE_SECONDS)
            raise ConfigError(f"{name}={getattr(config, name)} would take about "
                              f"{duration(seconds)} a step on this page, above its limit of "
                              f"{PAGE_SECONDS:g} s: lower {name} to {fits} or less", name)
        session = _session()
        for collected in (False, True):
            if collected:  # models made outside a session wait for the cycle collector
                gc.collect()
            with self._lock:
                self._end_closed(session)
                room = min(self.budget - sum(h.bytes for h in self._held.values()),
                           DEFAULT_SHARE * available_memory())
                if len(self._held) < MAX_MODELS and fp.peak_bytes <= room:
                    key = next(self._keys)
                    self._held[key] = _Hold(fp.peak_bytes, session, weakref.ref(model))
                    weakref.finalize(model, self._release, key)
                    return
        if len(self._held) >= MAX_MODELS:
            raise ConfigError(f"this server already runs {MAX_MODELS} pages' models (its "
                              "limit): close a page, or wait a minute after closing one")
        raise self._too_big(config, fp, room)

    def _end_closed(self, session: str | None) -> None:
        """Forget (under the lock) the collected models, and end those of ``session`` and of
        every closed session."""
        while self._collected:
            self._held.pop(self._collected.popleft(), None)
        live = _live_sessions()
        for key, hold in list(self._held.items()):
            if hold.session is not None and (hold.session == session or hold.session not in live):
                del self._held[key]
                model = hold.model()
                if model is not None:
                    model.end()

    def _too_big(self, config: Any, fp: Any, room: float) -> ConfigError:
        fits = _largest(config, fp.driver, lambda c: footprint_of(c).peak_bytes <= room)
        lower = f"lower {fp.driver} to {fits} or less" if fits is not None else \
            f"no {fp.driver} fits"
        return ConfigError(f"{fp.driver}={getattr(config, fp.driver)} needs about "
                           f"{human_bytes(fp.peak_bytes)} of memory; this server's pages may "
                           f"still take {human_bytes(max(room, 0.0))} (of "
                           f"{human_bytes(self.budget)}): {lower}, or close another page",
                           fp.driver)

    def _release(self, key: int) -> None:
        self._collected.append(key)  # atomic: no lock (see __init__)


def _session() -> str | None:
    """The Solara kernel (browser session) this thread renders for, or ``None`` outside the
    server."""
    contexts = sys.modules.get("solara.server.kernel_context")
    if contexts is None:
        return None
    try:
        return contexts.get_current_context().id
    except Exception:  # noqa: BLE001 - no current kernel: not in a session
        return None


def _live_sessions() -> set[str]:
    """The ids of Solara's open kernels (none outside the server)."""
    contexts = sys.modules.get("solara.server.kernel_context")
    if contexts is None:
        return set()
    return {key for key, context in list(contexts.contexts.items())
            if not context.closed_event.is_set()}


#: The one ledger of this process's pages.
LIVE = Admissions()


def _largest(config: Any, name: str, fits: Callable[[Any], bool]) -> Any:
    """The largest value of ``config``'s ``name`` below its own that ``fits`` (the config
    made anew with it: its own validation, its own footprint), two significant digits, or
    ``None``: what a refusal tells the user to lower it to."""
    value = getattr(config, name)
    integer = isinstance(value, int)

    def ok(v: float) -> bool:
        try:
            return fits(dataclasses.replace(config, **{name: int(v) if integer else v}))
        except (ConfigError, ValueError, TypeError):
            return False

    high = float(value)  # does not fit; halve down to a value that does, then bisect
    low = high / 2.0
    while not ok(low):
        high, low = low, low / 2.0
        if low < 1e-12:
            return None
    for _ in range(40):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if ok(middle) else (low, middle)
    scale = 10.0 ** (math.floor(math.log10(low)) - 1)
    rounded = math.floor(low / scale) * scale
    found = int(rounded) if integer else float(f"{rounded:.2g}")
    return found if ok(found) else (int(low) if integer else low)


def format_reading(value: float) -> str:
    """A number as the page prints it (six significant digits; counts as integers)."""
    if isinstance(value, int | np.integer):
        return str(int(value))
    return f"{float(value):.6g}"


def rendered(fig: Figure, kind: str) -> tuple[bytes, str]:
    """A page's figure of ``kind`` (``agents`` or ``measures``) as the bytes and MIME
    subtype the browser gets (:data:`RENDER`)."""
    fmt, kwargs = RENDER[kind]
    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buffer, format=fmt, **kwargs)
    return buffer.getvalue(), "svg+xml" if fmt == "svg" else fmt


#: The figure :meth:`PageModel.figure` hands to the drawing in progress for reuse.
_RECYCLED: contextvars.ContextVar[Figure | None] = contextvars.ContextVar("recycled",
                                                                          default=None)


def new_figure(ncols: int = 1) -> tuple[Figure, Any]:
    """A page's figure with ``ncols`` axes in fixed margins: a layout engine would solve the
    layout again at every step, which doubles the time to draw (0.18 s against 0.08 s for
    BAS's measurement, benchmarks/bench_pages.py). Inside :meth:`PageModel.figure`, last
    step's figure emptied (:func:`emptied`) instead of a new one: the same picture
    (``test_a_redrawn_figure_is_the_figure_drawn_anew``) without making axes and ticks again."""
    fig = _RECYCLED.get()
    if fig is not None and np.size(fig.page_axes) == ncols:
        _RECYCLED.set(None)  # a drawing's first figure only
        return fig, emptied(fig)
    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    fig.subplots_adjust(**MARGINS)
    with matplotlib.rc_context({"axes.titley": 1.0}):  # a fixed title: no tick-label bboxes
        fig.page_axes = fig.subplots(1, ncols)
    return fig, fig.page_axes


def emptied(fig: Figure) -> Any:
    """``fig`` (made by :func:`new_figure`) back to its new state, its axes (and their tick
    objects) kept: every artist, legend, colour bar and title removed, scales linear, limits
    automatic, the colour cycle from its start (what the pages change; a page that changes
    more makes ``test_a_redrawn_figure_is_the_figure_drawn_anew`` fail)."""
    axes = list(np.ravel(fig.page_axes))
    for ax in fig.axes:
        if ax not in axes:  # colour bars
            ax.remove()
    for item in (*fig.legends, *fig.texts):
        item.remove()
    for ax in axes:
        for artist in (*ax.lines, *ax.collections, *ax.patches, *ax.texts, *ax.images):
            artist.remove()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        for loc in ("left", "center", "right"):
            ax.set_title("", loc=loc)
        ax.set(xlabel="", ylabel="", xscale="linear", yscale="linear", aspect="auto")
        ax.set_prop_cycle(None)
        ax.ignore_existing_data_limits = True
        ax.dataLim.set_points(matplotlib.transforms.Bbox.null().get_points())
        ax.set_autoscale_on(True)
    fig.subplots_adjust(**MARGINS)
    return fig.page_axes


class ReadableLog(matplotlib.ticker.Locator):
    """A log axis's ticks, every one labelled: over less than about a decade and a half,
    evenly spaced values (decades alone would leave it without a label); up to three decades,
    1, 2 and 5 times each; beyond, every decade or every few, five or six ticks in all."""

    def __init__(self) -> None:
        self.linear = matplotlib.ticker.MaxNLocator(3)

    def __call__(self) -> Sequence[float]:
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        lo, hi = sorted((vmin, vmax))
        if not (lo > 0 and np.isfinite(hi)):
            return []
        if hi / lo < 30:
            ticks = self.linear.tick_values(lo, hi)
            return ticks[ticks > 0]
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        if last - first <= 3:
            return [m * 10.0**d for d in range(first, last + 1) for m in (1.0, 2.0, 5.0)]
        stride = -(-(last - first) // 5)
        return [10.0**d for d in range(first - first % stride, last + 1, stride)]


def log_y(ax: Any) -> None:
    """A log y axis whose ticks all carry plain-text labels (``0.01``, ``1000``, ``1e6``:
    the default mathtext labels take a third of a page's drawing time; :class:`ReadableLog`),
    without minor ticks (eight a decade, each a tick object made at every step: a quarter of
    the pricing page's drawing)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ReadableLog())
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: short(v)))
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def short(value: float) -> str:
    """A tick label in at most four significant digits and a short exponent (``0.01``,
    ``1000``, ``4.885e7``): a long one would not fit the fixed margin."""
    text = f"{value:.4g}"
    return text.replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def dots(n: int) -> dict[str, Any]:
    """A scatter's style for ``n`` agents: outlined discs while each one shows, small
    edgeless points above :data:`MANY` (their colours then read as a density)."""
    if n <= MANY:
        return {"s": 60, "edgecolors": "black", "linewidths": 0.4}
    return {"s": float(np.clip(4000.0 / n, 2.0, 20.0)), "linewidths": 0}


def legend_below(fig: Figure, *axes: Any, handles: Sequence[Any] = ()) -> None:
    """One legend for ``axes`` (and ``handles`` drawn nowhere else) under them, where it
    covers no point."""
    found = {handle.get_label(): handle for handle in handles}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    if found:
        rows = -(-len(found) // 3)
        fig.subplots_adjust(bottom=MARGINS["bottom"] + LEGEND_ROOM * rows)
        legend = fig.legend(found.values(), found.keys(), loc="lower center",
                            ncols=min(3, len(found)), fontsize="small", frameon=False)
        for handle in legend.legend_handles:  # a point per agent: a visible key
            if isinstance(handle, PathCollection):
                handle.set_sizes([30.0])


def integer_x(*axes: Any) -> None:
    for ax in axes:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))


def series(env: Any, column: str) -> np.ndarray:
    frame = env.datacollector.get_model_vars_dataframe()
    return frame[column].to_numpy(dtype=float) if column in frame else np.zeros(0)


@functools.cache
def all_pages() -> dict[str, Page]:
    """Every game's page by route, in the games' order (each game package's ``page.PAGE``,
    :data:`privgames.analysis.experiments.GAMES`)."""
    pages = (importlib.import_module(f"privgames.analysis.{game}.page").PAGE for game in GAMES)
    return {page.route: page for page in pages}
