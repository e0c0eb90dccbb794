"""Explorers: move a control, see the run change. Logic in plain objects; widgets only wire.

Each explorer is a plain object whose attributes are its controls and whose ``run()``
recomputes everything from them; the ipywidgets panel built by the matching function only
copies control values onto the object and renders what ``run()`` returns. Tests and notebook
cells can drive either one.

- :class:`ExitExplorer` / :func:`exit_explorer` (lesson 05): a scripted behaviour
  (:data:`BEHAVIOURS`) and every limit of :class:`~primer.loop.config.AgentConfig`; shows the stop
  cause, the run's summary, its trace table and the running token total against the budget.
  :data:`EXIT_RECIPES` lists, for every stop cause but ``awaiting_approval``, settings that
  make it fire.
- :class:`LatencyExplorer` / :func:`latency_explorer` (lesson 06): tools that really wait,
  run one after another or concurrently.
- :class:`CostExplorer` / :func:`cost_explorer` (lesson 07): tokens and dollars of a run that
  re-sends its history, with caching and trimmed tool results.
- :class:`CompoundingExplorer` / :func:`compounding_explorer` (lesson 07): per-step success
  to the power of the number of steps.

Time in the exit explorer is simulated on a :class:`~primer.harness.retry.ManualClock` (each model
call takes :data:`MODEL_CALL_S`, each slow tool call :data:`SLOW_TOOL_S`, backoff waits
their length), so a re-run takes milliseconds and always gives the same result.

Charts are small inline SVGs built from the numbers (they render the same in JupyterLab, in
a static notebook and in a test). The stop cause is shown in an element with CSS class
``primer-stop-cause`` and a ``data-stop-cause`` attribute, which the browser check reads.
This module and :mod:`primer.views.quiz_widget` import ipywidgets; ``import primer`` never does.
"""

from __future__ import annotations

import functools
import html
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

from primer.course.estimates import end_to_end_success, per_step_success_needed
from primer.harness.production import run_production
from primer.harness.retry import ManualClock, TransientToolError
from primer.loop.config import AgentConfig
from primer.loop.cost import run_cost_usd, run_usages
from primer.loop.messages import Message
from primer.loop.model import (
    LLM,
    Prices,
    Reply,
    ScriptedLLM,
    TransientModelError,
    Usage,
    text_reply,
    tool_reply,
)
from primer.loop.result import AgentResult
from primer.loop.state import HANDOFF_TOOL_NAME, StopCause
from primer.loop.text import one_line
from primer.loop.tools import Tool
from primer.scenarios import burner, orders
from primer.scenarios.parallel import SEED, LatencyRun, latency_model, measure, seeded_latencies
from primer.scenarios.policy import all_observations

# ================================================================ the exit explorer

#: Simulated seconds one model call takes in the exit explorer.
MODEL_CALL_S = 2.0
#: Simulated seconds one call of the "slow tool" behaviour's tools takes.
SLOW_TOOL_S = 30.0


class OrderTotal(pydantic.BaseModel):
    """The answer shape the exit explorer's answer check asks for: ``{"total_inr": 5900.0}``."""

    total_inr: float


@dataclass(frozen=True)
class World:
    """What one run of a behaviour needs: a model, its tools, the task and a system prompt,
    and the run's cancel signal (``None``: nobody can press stop)."""

    llm: LLM
    tools: list[Tool]
    task: str = orders.TASK
    system: str = orders.SYSTEM
    cancel: threading.Event | None = None


@dataclass(frozen=True)
class ScriptedBehaviour:
    """A scripted behaviour of the exit explorer: ``label`` (shown in the dropdown), what it
    does (``description``) and ``build(clock) -> World`` (fresh model and tools per run)."""

    label: str
    description: str
    build: Callable[[ManualClock], World]


def _order_world(kind: str) -> Callable[[ManualClock], World]:
    return lambda clock: World(orders.make_llm(kind), orders.make_tools())


def _scripted(policy: Callable[[list[Message]], Any], name: str) -> Callable[[ManualClock], World]:
    return lambda clock: World(ScriptedLLM(policy, name=name), orders.make_tools())


def _recovers_and_fixes_its_answer(messages: list[Message]) -> Any:
    """The recovering order model; after a corrective turn it answers in the asked JSON."""
    last = messages[-1]
    if len(messages) > 1 and last.get("role") == "user" and isinstance(last.get("content"), str):
        totals = [o.content for o in all_observations(messages)
                  if o.name == "calculator" and not o.is_error]
        return text_reply(json.dumps({"total_inr": float(totals[-1]) if totals else None}))
    return orders.policy("recover")(messages)


_LOOKUP = ("get_order", {"order_id": "A123"})


def _cut_off(messages: list[Message]) -> Reply:
    """Looks the order up, then its second reply is cut off in the middle of a tool call."""
    if len(messages) == 1:
        return tool_reply(_LOOKUP, text="I need the order first.")
    return tool_reply(("calculator", {"expression": "2500 * 2 *"}),
                      text="Now the total with GST: unit price times quantity",
                      stop_reason="max_tokens")


def _refuses(messages: list[Message]) -> Reply:
    return text_reply("I can't help with questions about orders.", stop_reason="refusal")


def _hands_off(messages: list[Message]) -> Reply:
    """Looks the order up, then hands the task to a person with a reason."""
    if len(messages) == 1:
        return tool_reply(_LOOKUP, text="I need the order first.")
    return tool_reply((HANDOFF_TOOL_NAME, {"reason": "the customer disputes the GST rate on "
                                                     "this order; a person must decide"}))


def _keeps_asking(messages: list[Message]) -> Reply:
    """Asks for the order again after every failure, never changing the call."""
    return tool_reply(_LOOKUP, text="The order service failed; trying again.")


def _failing_world(clock: ManualClock) -> World:
    @functools.wraps(orders.get_order.fn)
    def down(order_id: str) -> Any:
        raise TransientToolError("503 Service Unavailable: the order service is down")

    tool = Tool("get_order", orders.get_order.description, orders.get_order.input_schema, down)
    return World(ScriptedLLM(_keeps_asking, name="model whose tool always fails"),
                 [tool, orders.calculator])


def _slow(t: Tool, clock: ManualClock) -> Tool:
    @functools.wraps(t.fn)
    def slow(**kwargs: Any) -> Any:
        clock.advance(SLOW_TOOL_S)
        return t.fn(**kwargs)

    return Tool(t.name, t.description, t.input_schema, slow)


def _slow_world(clock: ManualClock) -> World:
    return World(orders.make_llm("recover"), [_slow(t, clock) for t in orders.make_tools()])


def _stopped_world(clock: ManualClock) -> World:
    """The recovering model, and a person who presses stop while the order lookup runs."""
    cancel = threading.Event()
    lookup = orders.get_order

    @functools.wraps(lookup.fn)
    def get_order(order_id: str) -> Any:
        cancel.set()
        return lookup.fn(order_id=order_id)

    tool = Tool(lookup.name, lookup.description, lookup.input_schema, get_order)
    return World(orders.make_llm("recover"), [tool, orders.calculator], cancel=cancel)


def _model_down(**request: Any) -> Reply:
    raise TransientModelError("529 Overloaded: the model service is not answering")


def _burner_world(clock: ManualClock) -> World:
    return World(burner.make_llm(), burner.make_tools(), burner.TASK, burner.SYSTEM)


#: The exit explorer's behaviours, keyed by label. The order-A123 task unless noted.
BEHAVIOURS: dict[str, ScriptedBehaviour] = {b.label: b for b in [
    ScriptedBehaviour("recovers", "fixes a wrong argument name from the error, then answers",
                      _scripted(_recovers_and_fixes_its_answer, "order model (recover)")),
    ScriptedBehaviour("repeats itself", "sends the same failing call again after every error",
                      _order_world("repeat")),
    ScriptedBehaviour("wanders", "guesses a new wrong order id after every error",
                      _order_world("wander")),
    ScriptedBehaviour("budget burner", "never answers: one more search each call, results "
                      "pile up (its own research task)", _burner_world),
    ScriptedBehaviour("cut-off reply", "its second reply is cut off at max_tokens mid tool call",
                      _scripted(_cut_off, "model cut off")),
    ScriptedBehaviour("refusal", "refuses on its first call",
                      _scripted(_refuses, "refusing model")),
    ScriptedBehaviour("asks for a hand-off", "looks the order up, then hands the task to a "
                      "person", _scripted(_hands_off, "model that hands off")),
    ScriptedBehaviour("tool always fails", "the order service answers 503 every time; the model "
                      "keeps asking", _failing_world),
    ScriptedBehaviour("slow tool", f"recovers, but each tool call takes {SLOW_TOOL_S:g} s",
                      _slow_world),
    ScriptedBehaviour("model service down", "every model call fails with 529 Overloaded",
                      lambda clock: World(_model_down, orders.make_tools())),
    ScriptedBehaviour("stopped by a person", "recovers, but a person presses stop while the "
                      "order lookup runs", _stopped_world),
]}


def _paced(llm: LLM, clock: ManualClock) -> LLM:
    """``llm`` whose every call first advances ``clock`` by :data:`MODEL_CALL_S`."""

    def call(**request: Any) -> Reply:
        clock.advance(MODEL_CALL_S)
        return llm(**request)

    return call


@dataclass
class ExitExplorer:
    """The exit explorer's logic: its attributes are the controls, ``run()`` runs them.

    Controls: ``behaviour`` (a key of :data:`BEHAVIOURS`); ``max_steps`` (model calls);
    ``token_budget`` (tokens, ``None`` = off) and ``budget_check`` (``"after"`` or
    ``"before"`` each call); ``cost_budget_usd`` (USD, ``None`` = off); ``repeat_threshold``
    (identical calls, ``None`` = off); ``wall_clock_s`` (simulated seconds, ``None`` = off);
    ``no_progress_window`` (error results in a row, ``None`` = off); ``context_window``
    (tokens); ``check_answer`` (the final answer must be JSON matching :class:`OrderTotal`)
    with ``corrective_turns`` (turns the model gets to fix a failing answer). Prices are the
    production lesson's (``Prices()``: 5 / 25 USD per million tokens).

    After ``run()``: ``result`` (the :class:`~primer.loop.result.AgentResult`) and ``elapsed_s``
    (simulated seconds the run took).
    """

    behaviour: str = "recovers"
    max_steps: int = 6
    token_budget: int | None = 3_000
    budget_check: Literal["after", "before"] = "after"
    cost_budget_usd: float | None = None
    repeat_threshold: int | None = 3
    wall_clock_s: float | None = None
    no_progress_window: int | None = None
    context_window: int = 200_000
    check_answer: bool = False
    corrective_turns: int = 1
    result: AgentResult | None = field(default=None, init=False, repr=False)
    elapsed_s: float = field(default=0.0, init=False, repr=False)

    def config(self, clock: ManualClock | None = None) -> AgentConfig:
        """The :class:`~primer.loop.config.AgentConfig` the controls describe.

        Raises ``ValueError`` naming the control that cannot work (e.g. ``max_steps`` 0).
        """
        clock = clock or ManualClock()
        return AgentConfig(max_steps=self.max_steps, token_budget=self.token_budget,
                           budget_check=self.budget_check, cost_budget_usd=self.cost_budget_usd,
                           repeat_threshold=self.repeat_threshold,
                           wall_clock_s=self.wall_clock_s,
                           no_progress_window=self.no_progress_window,
                           context_window=self.context_window,
                           output_retries=self.corrective_turns, clock=clock, sleep=clock.sleep)

    def run(self) -> AgentResult:
        """Run the behaviour under the controls; store and return the result.

        Raises ``ValueError`` for an unknown behaviour (listing the known ones) or a control
        value :class:`~primer.loop.config.AgentConfig` refuses.
        """
        if self.behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {self.behaviour!r}; choose one of "
                             f"{', '.join(map(repr, BEHAVIOURS))}")
        clock = ManualClock()
        config = self.config(clock)
        world = BEHAVIOURS[self.behaviour].build(clock)
        self.result = run_production(_paced(world.llm, clock), world.task, world.tools,
                                     system=world.system, config=config,
                                     output_model=OrderTotal if self.check_answer else None,
                                     cancel=world.cancel)
        self.elapsed_s = clock()
        return self.result

    @property
    def stop_cause(self) -> StopCause:
        """The stop cause of the last run (runs first if there is none yet)."""
        return (self.result or self.run()).stop_cause

    def running_totals(self) -> list[int]:
        """Tokens used by the run after each model call (prompt + output, running total)."""
        result = self.result or self.run()
        return [s.total_usage.total_tokens for s in result.steps]


#: For every stop cause but ``awaiting_approval``: exit-explorer settings that make it fire
#: (changes from the defaults of :class:`ExitExplorer`). Lesson 05's table runs each one.
EXIT_RECIPES: dict[str, dict[str, Any]] = {
    "end_turn": {"behaviour": "recovers"},
    "max_tokens": {"behaviour": "cut-off reply"},
    "refusal": {"behaviour": "refusal"},
    "token_budget": {"behaviour": "budget burner"},
    "cost_budget": {"behaviour": "budget burner", "token_budget": None,
                    "cost_budget_usd": 0.02},
    "handoff": {"behaviour": "asks for a hand-off"},
    "loop_detected": {"behaviour": "repeats itself"},
    "max_steps": {"behaviour": "wanders", "max_steps": 4},
    "wall_clock": {"behaviour": "slow tool", "wall_clock_s": 60},
    "no_progress": {"behaviour": "tool always fails", "no_progress_window": 2},
    "context_window": {"behaviour": "budget burner", "token_budget": None,
                       "context_window": 1_000},
    "model_error": {"behaviour": "model service down"},
    "invalid_output": {"behaviour": "recovers", "check_answer": True, "corrective_turns": 0},
    "cancelled": {"behaviour": "stopped by a person"},
}


def recipe_table() -> list[dict[str, Any]]:
    """Run every :data:`EXIT_RECIPES` entry; one row per recipe with the cause that fired.

    Row keys: ``"stop cause"`` (what fired), ``"settings"`` (the recipe's changes from the
    defaults), ``"calls"`` (model calls), ``"tokens"`` and ``"what fired"`` (the detail).
    """
    rows = []
    for settings in EXIT_RECIPES.values():
        result = ExitExplorer(**settings).run()
        rows.append({"stop cause": result.stop_cause.value,
                     "settings": ", ".join(f"{k}={_show(v)}" for k, v in settings.items()),
                     "calls": len(result.steps), "tokens": result.usage.total_tokens,
                     "what fired": result.stop_detail})
    return rows


def _show(value: Any) -> str:
    return "off" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(
        value, bool) else str(value)


# ================================================================ the other explorers

@dataclass
class LatencyExplorer:
    """Parallel tool calls, measured: ``n_tools`` calls of tools that really wait.

    Controls: ``n_tools`` (1..8), ``time_scale`` (each latency is multiplied by it: 1.0 is
    real seconds), ``mode`` (``"sequential"`` or ``"concurrent"``: which one the panel
    draws). Latencies are :func:`~primer.scenarios.parallel.seeded_latencies` (0.2–1.2 s).

    ``run()`` times both ways with :func:`~primer.scenarios.parallel.measure` and returns the
    :class:`~primer.scenarios.parallel.LatencyRun` (real, scaled seconds). :meth:`model_s` is
    what the chosen mode should take at full scale with no overhead: the sum of the
    latencies (sequential) or the slowest (concurrent).
    """

    n_tools: int = 4
    time_scale: float = 0.05
    mode: Literal["sequential", "concurrent"] = "concurrent"
    seed: int = SEED
    result: LatencyRun | None = field(default=None, init=False, repr=False)

    @property
    def latencies(self) -> list[float]:
        """The ``n_tools`` latencies at full scale (seconds)."""
        return seeded_latencies(self.n_tools, seed=self.seed)

    def model_s(self, mode: str | None = None) -> float:
        """Seconds the turn takes at full scale in ``mode`` (default: ``self.mode``)."""
        mode = mode or self.mode
        total, slowest = latency_model(self.latencies)
        if mode not in ("sequential", "concurrent"):
            raise ValueError(f"mode must be 'sequential' or 'concurrent' (got {mode!r})")
        return total if mode == "sequential" else slowest

    def run(self) -> LatencyRun:
        """Measure both modes; ``ValueError`` for ``n_tools`` outside 1..16 or a bad scale."""
        if not 1 <= self.n_tools <= 16:
            raise ValueError(f"n_tools must be between 1 and 16 (got {self.n_tools})")
        self.model_s()  # validates mode
        self.result = measure(self.latencies, self.time_scale)[0]
        return self.result


@dataclass
class CostExplorer:
    """Tokens and dollars of a run that re-sends its whole history on every call.

    Controls (tokens unless noted): ``base`` (system prompt, tools and task), ``model_per_step``
    and ``tool_per_step`` (what each step adds to the history), ``steps`` (model calls),
    ``output_per_call``, ``input_price`` / ``output_price`` (USD per million tokens),
    ``cache`` (``"none"``, ``"prefix"`` or ``"history"``, see
    :func:`~primer.loop.cost.run_usages`), ``trim_results`` with ``trim_to`` (each tool
    result cut to that many tokens). Formulas: :mod:`primer.loop.cost`.
    """

    base: int = 1_600
    model_per_step: int = 150
    tool_per_step: int = 600
    steps: int = 10
    output_per_call: int = 150
    input_price: float = 3.0
    output_price: float = 15.0
    cache: Literal["none", "prefix", "history"] = "none"
    trim_results: bool = False
    trim_to: int = 200
    usages: list[Usage] = field(default_factory=list, init=False, repr=False)

    @property
    def per_step(self) -> int:
        """Tokens each step adds to the history, after trimming (tokens)."""
        tool = min(self.tool_per_step, self.trim_to) if self.trim_results else self.tool_per_step
        return self.model_per_step + tool

    @property
    def prices(self) -> Prices:
        """The :class:`~primer.loop.model.Prices` of the controls."""
        return Prices(self.input_price, self.output_price)

    def run(self) -> list[Usage]:
        """The usage of each call (:func:`~primer.loop.cost.run_usages`); ``ValueError``
        for negative sizes or prices."""
        if self.input_price < 0 or self.output_price < 0:
            raise ValueError("prices must be >= 0 USD per million tokens")
        self.usages = run_usages(self.steps, self.base, self.per_step, self.output_per_call,
                                 cache=self.cache)
        return self.usages

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over the run, cached or not (tokens)."""
        return sum(u.prompt_tokens for u in self.usages or self.run())

    @property
    def cost_usd(self) -> float:
        """Dollars of the run at the controls' prices (USD)."""
        return run_cost_usd(self.usages or self.run(), self.prices)


@dataclass
class CompoundingExplorer:
    """A run succeeds only if every step does: ``per_step ** steps``.

    Controls: ``per_step`` (probability a step succeeds, 0..1) and ``steps``.
    Formula: :func:`~primer.course.estimates.end_to_end_success`.
    """

    per_step: float = 0.95
    steps: int = 10

    def run(self) -> float:
        """End-to-end success (0..1); ``ValueError`` for a probability outside 0..1."""
        return end_to_end_success(self.per_step, self.steps)

    def curve(self) -> list[float]:
        """End-to-end success after 1..``steps`` steps."""
        return [end_to_end_success(self.per_step, k) for k in range(1, self.steps + 1)]


# ================================================================ rendering (HTML + SVG)

_FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif"
_CAUSE_COLOURS = {"end_turn": "#2f855a", "awaiting_approval": "#2b6cb0"}


def bars_svg(values: Sequence[float], *, limit: float | None = None, limit_label: str = "",
             over_colour: str = "#c53030", colour: str = "#2b6cb0", width: int = 420,
             height: int = 150, title: str = "", axis: bool = False, show_values: bool = False,
             x_label: str = "") -> str:
    """A small bar chart as an SVG string: one bar per value, an optional dashed ``limit``.

    Bars above ``limit`` take ``over_colour``. Used for the running token total against the
    budget, tokens per call and success by steps. ``axis`` adds a y-axis with three to five
    round ticks (matplotlib's ``MaxNLocator``), their values and light grid lines;
    ``show_values`` writes each bar's value above it (``1,234``) when the bars are wide
    enough, else above the first and the last bar only; ``x_label`` names the bars' axis.
    """
    ticks: list[float] = []
    top = max([*values, limit or 0, 1e-9])
    if axis:
        from matplotlib.ticker import MaxNLocator

        ticks = [float(t) for t in MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
                 .tick_values(0, top) if t >= 0]
        top = max(top, ticks[-1])
    pad_l = 8 + (6 * len(f"{ticks[-1]:,.0f}") + 6 if ticks else 0)
    pad_r, pad_t = 8, 20 + (12 if show_values else 0)
    pad_b = 18 + (14 if x_label else 0)
    plot_w, plot_h = width - pad_l - pad_r, height - pad_b - pad_t
    n = max(len(values), 1)
    bw = plot_w / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" style="{_FONT};font-size:11px">',
             f'<text x="8" y="13" fill="#4a5568">{html.escape(title)}</text>']
    for t in ticks:
        y = pad_t + plot_h - plot_h * t / top
        parts.append(f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#e2e8f0"/>')
        parts.append(f'<text class="primer-axis-tick" x="{pad_l - 4}" y="{y + 4:.1f}" '
                     f'text-anchor="end" fill="#718096">{t:,.0f}</text>')
    if ticks:
        parts.append(f'<line x1="{pad_l}" x2="{pad_l}" y1="{pad_t}" y2="{pad_t + plot_h}" '
                     f'stroke="#a0aec0"/>')
    labelled = (set(range(len(values))) if bw >= 6.5 * len(f"{top:,.0f}")
                else {0, len(values) - 1})
    for i, v in enumerate(values):
        h = plot_h * v / top
        fill = over_colour if limit is not None and v > limit else colour
        parts.append(f'<rect x="{pad_l + i * bw + 1:.1f}" y="{pad_t + plot_h - h:.1f}" '
                     f'width="{max(bw - 2, 1):.1f}" height="{h:.1f}" fill="{fill}"/>')
        if show_values and i in labelled:
            parts.append(f'<text class="primer-bar-value" x="{pad_l + (i + 0.5) * bw:.1f}" '
                         f'y="{pad_t + plot_h - h - 3:.1f}" text-anchor="middle" '
                         f'font-size="10" fill="#2d3748">{v:,.0f}</text>')
        if n <= 20:
            parts.append(f'<text x="{pad_l + (i + 0.5) * bw:.1f}" y="{pad_t + plot_h + 13}" '
                         f'text-anchor="middle" fill="#718096">{i + 1}</text>')
    if x_label:
        parts.append(f'<text x="{pad_l + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle" '
                     f'fill="#4a5568">{html.escape(x_label)}</text>')
    if limit is not None:
        y = pad_t + plot_h - plot_h * limit / top
        parts.append(f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y:.1f}" y2="{y:.1f}" '
                     f'stroke="#1a202c" stroke-dasharray="5,4"/>')
        parts.append(f'<text x="{width - pad_r}" y="{y - 3:.1f}" text-anchor="end" '
                     f'fill="#1a202c">{html.escape(limit_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def spans_svg(spans: Sequence[tuple[float, float]], *, width: int = 420, title: str = "") -> str:
    """Horizontal bars, one per call, from its start to its end (seconds), as an SVG string."""
    end = max([e for _, e in spans] + [1e-9])
    row, pad_l, pad_t = 16, 50, 20
    height = pad_t + row * len(spans) + 6
    plot_w = width - pad_l - 8
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" style="{_FONT};font-size:11px">',
             f'<text x="4" y="13" fill="#4a5568">{html.escape(title)}</text>']
    for k, (s, e) in enumerate(spans):
        y = pad_t + k * row
        parts.append(f'<text x="4" y="{y + 11}" fill="#718096">wait({k})</text>')
        parts.append(f'<rect x="{pad_l + plot_w * s / end:.1f}" y="{y + 2}" '
                     f'width="{max(plot_w * (e - s) / end, 1):.1f}" height="{row - 4}" '
                     f'fill="#dd6b20"/>')
    parts.append("</svg>")
    return "".join(parts)


def _table_html(rows: list[dict[str, Any]], max_chars: int = 70) -> str:
    if not rows:
        return "<p>(no model calls)</p>"

    def cell(v: Any) -> str:
        return html.escape(one_line(v, max_chars))

    head = "".join(f"<th style='text-align:left;padding:2px 6px'>{html.escape(k)}</th>"
                   for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 6px;vertical-align:top'>"
                                    f"{cell(v)}</td>" for v in r.values()) + "</tr>"
                   for r in rows)
    return (f"<table class='primer-trace' style='border-collapse:collapse;font-size:12px'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _error_html(message: str) -> str:
    return (f"<div class='primer-error' style='{_FONT};color:#c53030;font-weight:600'>"
            f"Cannot run with these settings: {html.escape(message)}</div>")


def render_exit(explorer: ExitExplorer) -> str:
    """HTML for the exit explorer's last run: the stop cause (large, labelled, with CSS class
    ``primer-stop-cause`` and ``data-stop-cause``), the summary, tokens and cost, the running
    token total against the budget, and the trace table."""
    r = explorer.result or explorer.run()
    cause = r.stop_cause.value
    colour = _CAUSE_COLOURS.get(cause, "#c05621")
    budget = explorer.token_budget
    tokens = f"{r.usage.total_tokens:,} tokens" + (f" of a {budget:,}-token budget"
                                                   if budget is not None else "")
    chart = bars_svg(explorer.running_totals(), limit=budget,
                     limit_label=f"budget {budget:,}" if budget is not None else "",
                     title="running token total after each model call")
    return (f"<div style='{_FONT}'>"
            f"<div class='primer-stop-cause' data-stop-cause='{cause}' style='border-left:6px "
            f"solid {colour};padding:4px 10px;margin:4px 0'>"
            f"<div style='font-size:12px;color:#4a5568;text-transform:uppercase'>stop cause</div>"
            f"<div class='primer-stop-cause-value' style='font-size:26px;font-weight:700;"
            f"color:{colour};font-family:monospace'>{cause}</div></div>"
            f"<p class='primer-summary' style='margin:4px 0'>{html.escape(r.summary)}</p>"
            f"<p style='margin:4px 0;color:#4a5568'>{len(r.steps)} model calls · {tokens} · "
            f"{r.cost_usd:.4f} USD · {explorer.elapsed_s:g} s simulated · answer: "
            f"{html.escape(r.final_text or '(none)')}</p>"
            f"{chart}{_table_html(r.rows())}</div>")


def render_latency(explorer: LatencyExplorer) -> str:
    """HTML for the latency explorer: both times (ratios to the model) and the chosen mode's
    calls drawn as spans at full scale."""
    run = explorer.result or explorer.run()
    lat = explorer.latencies
    if explorer.mode == "sequential":
        starts = [sum(lat[:k]) for k in range(len(lat))]
        spans = [(s, s + t) for s, t in zip(starts, lat, strict=True)]
    else:
        spans = [(0.0, t) for t in lat]
    return (f"<div style='{_FONT}'><p><b>{explorer.mode}</b>: the turn takes "
            f"<b>{explorer.model_s():.2f} s</b> at full scale "
            f"(sequential {explorer.model_s('sequential'):.2f} s, concurrent "
            f"{explorer.model_s('concurrent'):.2f} s). Measured: concurrent was "
            f"{run.speedup:.1f}× faster than sequential.</p>"
            f"{spans_svg(spans, title=f'{explorer.mode} calls, seconds at full scale')}</div>")


def render_cost(explorer: CostExplorer) -> str:
    """HTML for the cost explorer: totals, dollars, and the prompt tokens of each call as bars
    with a token axis and each bar's value."""
    usages = explorer.usages or explorer.run()
    out = sum(u.output_tokens for u in usages)
    read = sum(u.cache_read_input_tokens for u in usages)
    chart = bars_svg([u.prompt_tokens for u in usages], title="prompt tokens per call",
                     axis=True, show_values=True, x_label="model call", width=480, height=200)
    return (f"<div style='{_FONT}'><p>{explorer.steps} calls send "
            f"<b>{explorer.prompt_tokens:,}</b> prompt tokens ({read:,} read from the cache) "
            f"and write {out:,} output tokens: <b>{explorer.cost_usd:.4f} USD</b>.</p>"
            f"{chart}</div>")


def render_compounding(explorer: CompoundingExplorer) -> str:
    """HTML for the compounding explorer: end-to-end success and its curve."""
    need = per_step_success_needed(0.9, explorer.steps)
    chart = bars_svg(explorer.curve(), limit=0.9, limit_label="90%", colour="#2f855a",
                     over_colour="#2f855a", title="end-to-end success after each step")
    return (f"<div style='{_FONT}'><p>{explorer.per_step:.0%} a step over {explorer.steps} "
            f"steps: <b>{explorer.run():.1%}</b> end to end. For 90% end to end you would need "
            f"{need:.2%} a step.</p>"
            f"{chart}</div>")


# ================================================================ widget wiring

class Panel:
    """An explorer's controls wired to its plain object; ``panel.widget`` is what a cell shows.

    ``controls`` maps attribute names to ipywidgets; changing one copies its value onto
    ``explorer`` (through ``convert`` when given) and re-renders ``output`` (an
    ``ipywidgets.HTML``). :meth:`set` changes several controls and re-runs once. A setting
    the explorer refuses is shown as a message in the output, never as a traceback.
    ``initial`` holds the controls' first values (:meth:`reset` restores them).
    """

    def __init__(self, explorer: Any, controls: dict[str, Any],
                 render: Callable[[Any], str],
                 convert: dict[str, Callable[[Any], Any]] | None = None,
                 columns: int = 2) -> None:
        import ipywidgets as widgets

        self.explorer = explorer
        self.controls = controls
        self.render = render
        self.convert = convert or {}
        self.output = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.output.add_class("primer-explorer-output")
        self._holding = False
        self.initial = {name: control.value for name, control in controls.items()}
        names = list(controls)
        per_col = -(-len(names) // columns)
        cols = [widgets.VBox([controls[n] for n in names[i:i + per_col]])
                for i in range(0, len(names), per_col)]
        for name, control in controls.items():
            control.add_class(f"primer-control-{name.replace('_', '-')}")
            control.observe(self._changed, names="value")
        self.widget = widgets.VBox([widgets.HBox(cols), self.output])
        self.widget.add_class("primer-explorer")
        self.refresh()

    def _changed(self, _change: Any) -> None:
        if not self._holding:
            self.refresh()

    def refresh(self) -> None:
        """Copy every control onto the explorer, run it and re-render the output."""
        for name, control in self.controls.items():
            value = control.value
            setattr(self.explorer, name, self.convert.get(name, lambda v: v)(value))
        try:
            self.explorer.run()
            self.output.value = self.render(self.explorer)
        except ValueError as e:
            self.output.value = _error_html(str(e))

    def set(self, **values: Any) -> Any:
        """Set several controls by attribute name, re-run once; returns the explorer.

        Raises ``KeyError`` naming the known controls for an unknown name.
        """
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"no control named {sorted(unknown)}; controls: "
                           f"{', '.join(self.controls)}")
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self.refresh()
        return self.explorer

    def reset(self) -> None:
        """Put every control back to the value it had when the panel was built; re-run once."""
        self.set(**self.initial)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _style() -> dict[str, Any]:
    import ipywidgets as widgets

    return {"style": {"description_width": "150px"}, "layout": widgets.Layout(width="360px")}


def _off_or(values: Sequence[Any], current: Any, unit: str = "") -> list[tuple[str, Any]]:
    # "off" is 0, not None: a Dropdown whose value is None shows no selection at all.
    choices = sorted({*values, *([current] if current else [])})
    return [("off", 0)] + [(f"{v:,}{unit}", v) for v in choices]


def _zero_is_off(v: Any) -> Any:
    return None if not v else v


def exit_explorer(explorer: ExitExplorer | None = None) -> Panel:
    """The exit explorer panel (lesson 05): controls for every limit, re-run on each change.

    ``panel.controls`` names: behaviour, max_steps, token_budget (slider, 0 = off),
    budget_check, cost_budget_usd (0 = off), repeat_threshold, wall_clock_s and
    no_progress_window (0 = off), context_window, check_answer, corrective_turns.
    """
    import ipywidgets as w

    e = explorer or ExitExplorer()
    s = _style()
    controls = {
        "behaviour": w.Dropdown(options=list(BEHAVIOURS), value=e.behaviour,
                                description="behaviour", **s),
        "max_steps": w.IntSlider(value=e.max_steps, min=1, max=20, description="max_steps",
                                 **s),
        "token_budget": w.IntSlider(value=e.token_budget or 0, min=0, max=20_000, step=100,
                                    description="token budget (0 off)", **s),
        "budget_check": w.ToggleButtons(options=["after", "before"], value=e.budget_check,
                                        description="budget check", **s),
        "cost_budget_usd": w.FloatSlider(value=e.cost_budget_usd or 0.0, min=0.0, max=0.1,
                                         step=0.005, readout_format=".3f",
                                         description="USD budget (0 off)", **s),
        "repeat_threshold": w.Dropdown(options=_off_or([2, 3, 4, 5], e.repeat_threshold),
                                       value=e.repeat_threshold or 0,
                                       description="repeat threshold", **s),
        "wall_clock_s": w.Dropdown(options=_off_or([30, 60, 120, 300], e.wall_clock_s, " s"),
                                   value=e.wall_clock_s or 0, description="wall clock", **s),
        "no_progress_window": w.Dropdown(options=_off_or([1, 2, 3, 4, 5], e.no_progress_window),
                                         value=e.no_progress_window or 0,
                                         description="no-progress window", **s),
        "context_window": w.Dropdown(options=[(f"{v:,} tokens", v) for v in sorted(
                                         {200_000, 8_000, 2_000, 1_000, e.context_window},
                                         reverse=True)],
                                     value=e.context_window, description="context window", **s),
        "check_answer": w.Checkbox(value=e.check_answer, description="answer must be JSON",
                                   **s),
        "corrective_turns": w.IntSlider(value=e.corrective_turns, min=0, max=3,
                                        description="corrective turns", **s),
    }
    return Panel(e, controls, render_exit,
                 convert={name: _zero_is_off for name in ("token_budget", "cost_budget_usd",
                                                          "repeat_threshold", "wall_clock_s",
                                                          "no_progress_window")})


def latency_explorer(explorer: LatencyExplorer | None = None) -> Panel:
    """The latency explorer panel (lesson 06): number of tools, time scale, mode."""
    import ipywidgets as w

    e = explorer or LatencyExplorer()
    s = _style()
    controls = {
        "n_tools": w.IntSlider(value=e.n_tools, min=1, max=8, description="tools", **s),
        "time_scale": w.FloatSlider(value=e.time_scale, min=0.01, max=0.2, step=0.01,
                                    description="time scale", **s),
        "mode": w.ToggleButtons(options=["sequential", "concurrent"], value=e.mode,
                                description="run the calls", **s),
    }
    return Panel(e, controls, render_latency, columns=1)


def cost_explorer(explorer: CostExplorer | None = None) -> Panel:
    """The cost explorer panel (lesson 07): sizes, steps, prices, caching, trimming."""
    import ipywidgets as w

    e = explorer or CostExplorer()
    s = _style()
    controls = {
        "base": w.IntSlider(value=e.base, min=0, max=10_000, step=100,
                            description="base tokens", **s),
        "model_per_step": w.IntSlider(value=e.model_per_step, min=0, max=2_000, step=50,
                                      description="model tokens a step", **s),
        "tool_per_step": w.IntSlider(value=e.tool_per_step, min=0, max=4_000, step=50,
                                     description="tool tokens a step", **s),
        "steps": w.IntSlider(value=e.steps, min=1, max=40, description="steps", **s),
        "output_per_call": w.IntSlider(value=e.output_per_call, min=0, max=2_000, step=50,
                                       description="output a call", **s),
        "input_price": w.FloatSlider(value=e.input_price, min=0.0, max=20.0, step=0.5,
                                     description="USD / M input", **s),
        "output_price": w.FloatSlider(value=e.output_price, min=0.0, max=80.0, step=1.0,
                                      description="USD / M output", **s),
        # ipywidgets lays toggle buttons out as a block under their label; a flex row with
        # narrower buttons keeps the three beside the label, in line with the other controls
        "cache": w.ToggleButtons(options=["none", "prefix", "history"], value=e.cache,
                                 description="prompt caching",
                                 layout=w.Layout(width="380px", display="flex"),
                                 style={**s["style"], "button_width": "68px"}),
        "trim_results": w.Checkbox(value=e.trim_results, description="trim tool results",
                                   **s),
        "trim_to": w.IntSlider(value=e.trim_to, min=0, max=1_000, step=50,
                               description="trim to (tokens)", **s),
    }
    return Panel(e, controls, render_cost)


def compounding_explorer(explorer: CompoundingExplorer | None = None) -> Panel:
    """The compounding explorer panel (lesson 07): per-step success and steps."""
    import ipywidgets as w

    e = explorer or CompoundingExplorer()
    s = _style()
    controls = {
        "per_step": w.FloatSlider(value=e.per_step, min=0.5, max=1.0, step=0.005,
                                  readout_format=".3f", description="per-step success", **s),
        "steps": w.IntSlider(value=e.steps, min=1, max=40, description="steps", **s),
    }
    return Panel(e, controls, render_compounding, columns=1)


__all__ = ["BEHAVIOURS", "EXIT_RECIPES", "ScriptedBehaviour", "CompoundingExplorer", "CostExplorer",
           "ExitExplorer", "LatencyExplorer", "OrderTotal", "Panel", "World", "bars_svg",
           "compounding_explorer", "cost_explorer", "exit_explorer", "latency_explorer",
           "recipe_table", "render_compounding", "render_cost",
           "render_exit", "render_latency", "spans_svg"]


# ================================================================ approval buttons (lesson 08)


def approval_buttons(desk: Any) -> Any:
    """Approve / Reject buttons and a note box for an
    :class:`~primer.harness.durable.checkpoint.ApprovalDesk`; the buttons only call its methods.

    Returns an ``ipywidgets.VBox``: the call as the person sees it, the note, the two buttons
    and a status line.
    """
    import ipywidgets as w

    call = w.HTML(f"<code>{html.escape(desk.describe())}</code>")
    note = w.Text(value=desk.note, description="note", placeholder="why (optional)")
    yes = w.Button(description="Approve", button_style="success")
    no = w.Button(description="Reject", button_style="danger")
    status = w.HTML()

    def on(decide: Callable[[], str]) -> Callable[[Any], None]:
        def click(_: Any) -> None:
            desk.note = note.value
            status.value = html.escape(decide())
            call.value = f"<code>{html.escape(desk.describe())}</code>"
        return click

    yes.on_click(on(desk.approve))
    no.on_click(on(desk.reject))
    return w.VBox([call, note, w.HBox([yes, no]), status])
