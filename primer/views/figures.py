"""The course's eight figures, each drawn by one function from primer code.

Nothing here is drawn from numbers typed by hand: the loop diagrams read the loop's own check
order and stop causes from the tuples the loop runs (:mod:`primer.loop.checks`:
:func:`check_order`, :func:`loop_turn`), the round trip and fan-out diagrams come from real
scripted runs of the course's scenarios, the parallel-latency chart from a measurement of
threads that really wait (stored in ``primer/data/parallel_latency.json`` by
``python -m primer figures --measure``, so the SVG is byte-stable), and the other charts from
:mod:`primer.loop.cost` and the budget-burner scenario.

``python -m primer figures`` (``make figures``) writes every figure as SVG into ``figures/``
with :func:`write_all`. The SVGs are byte-stable: a fixed ``svg.hashsalt``, no date, a
fixed creator string and text kept as text (``svg.fonttype: none``), so regenerating them
leaves ``git status`` clean and a test can compare the committed files with what the code
draws. Lessons show the same figures inline as PNG (:func:`png`).

This is the only module of the package that imports matplotlib.
"""

from __future__ import annotations

import inspect
import io
import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from primer.course.estimates import end_to_end_success
from primer.loop import checks as exits
from primer.loop.cost import cumulative_input_tokens
from primer.loop.state import StopCause
from primer.scenarios.parallel import SEED, latency_model, seeded_latencies, sweep

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType  # for the checker only (not in every matplotlib)

#: Settings that make SVG output byte-stable and independent of the machine's fonts.
STABLE_RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "agent-loop-primer", "svg.fonttype": "none", "font.family": "DejaVu Sans",
    "font.size": 10, "axes.spines.top": False, "axes.spines.right": False}
SVG_METADATA = {"Date": None, "Creator": "primer.views.figures"}

BLUE, ORANGE, GREEN, RED, GREY = "#2b6cb0", "#dd6b20", "#2f855a", "#c53030", "#718096"


# ---------------------------------------------------------------- the loop, from its own data

@dataclass(frozen=True)
class CheckRow:
    """One check of the loop: its function ``name``, the ``phase`` it runs in, the first line
    of its docstring (``doc``), the :class:`StopCause` values it can return, and ``when``:
    empty for a check made on every pass of its phase, else the condition it runs under."""

    name: str
    phase: str
    doc: str
    causes: tuple[str, ...]
    when: str = ""


@dataclass(frozen=True)
class LoopStep:
    """A step of one turn that is not a check: its ``name`` (a few words), what it does
    (``label``) and the function of the loop that does it (``function``, as it appears in
    the loop's source)."""

    name: str
    label: str
    function: str


#: Phases of one turn of the loop, in order (the phases of :data:`primer.loop.checks.ORDER`).
PHASES = tuple(phase for phase, _ in exits.ORDER)


def _check(fn: exits.Marked[Any], phase: str, when: str = "") -> CheckRow:
    doc = (inspect.getdoc(fn) or fn.__name__).splitlines()[0].replace("``", "")
    return CheckRow(fn.__name__, phase, doc, tuple(c.value for c in fn.causes), when)


def check_order() -> list[CheckRow]:
    """The loop's checks in the order they can fire, from the tuples the loop runs
    (:data:`~primer.loop.checks.BEFORE_CALL`, ``BEFORE_SEND``, ``AFTER_REPLY``,
    ``AFTER_TOOLS``). A check the loop makes in two phases (the step limit) is listed in both.

    The output check (:func:`~primer.loop.checks.check_output`) runs only when the
    reply's checks stop with ``end_turn`` and the run asked for a shape; the first
    after-reply check that can say ``end_turn`` (the model's stop reason) then stops that
    phase, so the output check sits right after it, marked with its condition.
    """
    before, after_reply, after_tools = PHASES
    out = [_check(fn, before) for fn in (*exits.BEFORE_CALL, *exits.BEFORE_SEND)]
    for fn in exits.AFTER_REPLY:
        out.append(_check(fn, after_reply))
        if StopCause.END_TURN in fn.causes and not any(c.when for c in out):
            out.append(_check(exits.check_output, after_reply,
                              f"only when {fn.__name__} says end_turn and the run asked "
                              f"for an answer shape"))
    return out + [_check(fn, after_tools) for fn in exits.AFTER_TOOLS]


def loop_turn() -> list[CheckRow | LoopStep]:
    """One turn of :func:`~primer.loop.loop.continue_run`, in the order it runs:
    the checks of :func:`check_order` with the loop's own steps between them (compaction,
    the model call, running the tools). A test checks these appear in the loop's source in
    this order."""
    checks = check_order()
    first_send = exits.BEFORE_SEND[0].__name__
    first_reply = exits.AFTER_REPLY[0].__name__
    first_tools = exits.AFTER_TOOLS[0].__name__
    steps = {first_send: LoopStep("compact older turns", "summarise older turns when the "
                                  "prompt passed compact_share of the window (lesson 12)",
                                  "compact_if_needed"),
             first_reply: LoopStep("call the model", "system + the whole message list + the "
                                   "tool definitions; the reply's usage is added to the run",
                                   "call_model"),
             first_tools: LoopStep("run the tools", "all of the reply's tool_use blocks, "
                                   "concurrently; all results in one user message, in "
                                   "request order", "ToolCalls")}
    out: list[CheckRow | LoopStep] = []
    for c in checks:
        if c.name in steps and not c.when:
            out.append(steps.pop(c.name))
        out.append(c)
    return out


def _box(ax, x, y, w, h, text, color, size=9, weight="normal", fill=None):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02",
                                fc=fill or "white", ec=color, lw=1.5))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color="black",
            fontweight=weight, wrap=True)


def _arrow(ax, start, end, color="black", style="-|>", rad=0.0, lw=1.4, ls="-"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12,
                                 color=color, lw=lw, ls=ls,
                                 connectionstyle=f"arc3,rad={rad}"))


def _blank(fig: Figure, xlim=(0, 10), ylim=(0, 10)):
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    return ax


def _wrapped(items: Sequence[str], width: int) -> str:
    return "\n".join(textwrap.wrap(" · ".join(items), width, break_on_hyphens=False))


def fig_loop_cycle() -> Figure:
    """Figure 1: the loop as a cycle (task → model decides → tools run → observation → back),
    with the one good exit (``end_turn``), the pause for a person, and the other exits of
    each phase where the loop checks them (from :func:`check_order`)."""
    fig = Figure(figsize=(11, 6))
    ax = _blank(fig, (0, 13), (0, 10))
    nodes = {"goal": (1.6, 5.0, "the task\n(user message)"),
             "model": (5.0, 8.0, "model decides\n(one call: whole history in)"),
             "tools": (8.4, 5.0, "harness runs the\nrequested tools"),
             "obs": (5.0, 2.0, "observation\n(tool_result blocks\nin one user message)")}
    for key, (x, y, text) in nodes.items():
        _box(ax, x, y, 2.8, 1.2, text, BLUE, weight="bold" if key == "model" else "normal")
    _arrow(ax, (2.4, 5.7), (3.8, 7.5), rad=-0.2)
    _arrow(ax, (6.2, 7.5), (7.6, 5.7), rad=-0.2)
    ax.text(7.3, 6.9, "stop_reason:\ntool_use", color=BLUE, fontsize=9)
    _arrow(ax, (7.6, 4.3), (6.2, 2.5), rad=-0.2)
    _arrow(ax, (3.8, 2.6), (4.4, 7.3), rad=0.35, color=GREY)
    ax.text(3.15, 4.0, "next call", color=GREY, fontsize=9, rotation=80)
    # the good exit and the pause, apart from the failures
    _box(ax, 5.0, 9.55, 3.6, 0.6, "end_turn: the answer, the run is done", GREEN,
         weight="bold", fill="#f0fff4")
    _arrow(ax, (5.0, 8.6), (5.0, 9.25), color=GREEN)
    _box(ax, 10.9, 6.5, 3.0, 0.8, "awaiting_approval: pause\nfor a person (lesson 08)",
         ORANGE, size=8.5, fill="#fffaf0")
    _arrow(ax, (7.25, 6.55), (9.35, 6.5), color=ORANGE, ls="--", lw=1)
    skip = {StopCause.END_TURN.value, StopCause.AWAITING_APPROVAL.value}
    checks = check_order()
    spots = {PHASES[0]: (1.8, 8.4, 1.4, (3.6, 8.1)), PHASES[1]: (10.9, 8.55, 1.75, (6.4, 8.2)),
             PHASES[2]: (10.3, 1.6, 1.1, (6.4, 1.9))}
    for phase, (x, y, h, source) in spots.items():
        causes = list(dict.fromkeys(c for ch in checks if ch.phase == phase
                                    for c in ch.causes if c not in skip))
        _box(ax, x, y, 3.3, h, f"stops {phase}:\n" + _wrapped(causes, 36), RED, size=8,
             fill="#fff5f5")
        _arrow(ax, source, (x - 1.65 if x > 5 else x + 1.65, y), color=RED, ls="--", lw=1)
    return fig


def fig_round_trip() -> Figure:
    """Figure 2: one round trip, message by message, from a real run of the PTO question
    (two tool calls in one reply, run concurrently, then the answer).

    The lanes are the harness, the model and the tools; the arrows are the events of the run
    (``on_event``) in order; the harness's checks (from :func:`check_order`) sit where they
    run: before each call, after each reply, after the tools.
    """
    from primer.loop.loop import run_agent
    from primer.scenarios import hr

    events: list[tuple[str, dict]] = []
    result = run_agent(hr.make_llm(), hr.TASK, hr.make_tools(), system=hr.SYSTEM,
                       on_event=lambda k, d: events.append((k, d)))
    checks = check_order()

    def names(phase: str) -> str:
        return ", ".join(dict.fromkeys(c.name.removeprefix("check_") for c in checks
                                       if c.phase == phase and not c.when))

    lanes = {"harness": 1.2, "model": 6.0, "tools": 9.6}
    rows: list[tuple[str, str, str, str]] = []
    turn: list[dict] = []

    def fan_in() -> None:
        for d in turn:
            args = ", ".join(f"{k}={v!r}" for k, v in d["input"].items())
            rows.append(("harness", "tools", f"validate input, run {d['name']}({args})",
                         GREEN))
        for d in turn:
            rows.append(("tools", "harness", f"tool_result for {d['tool_use_id']}: "
                         + textwrap.shorten(d["content"], 40, placeholder=" …"), GREEN))
        rows.append(("harness", "harness", f"append the {len(turn)} results in one user "
                     f"message (tool_result blocks, in request order)", GREEN))
        rows.append(("harness", "harness", "checks: " + names(PHASES[2]), RED))
        turn.clear()

    for kind, data in events:
        if kind == "model_call":
            if turn:
                fan_in()
            reply = data["reply"]
            rows.append(("harness", "harness", "checks: " + names(PHASES[0]), RED))
            rows.append(("harness", "model", f"call {data['step']}: system + "
                         f"{'the task' if data['step'] == 1 else 'all messages'} + tool "
                         f"definitions", BLUE))
            blocks = ", ".join(b["type"] for b in reply["content"])
            rows.append(("model", "harness", f"reply [{blocks}]  stop_reason="
                         f"{reply['stop_reason']}", BLUE))
            if reply["stop_reason"] == "tool_use":
                rows.append(("harness", "harness", "checks: " + names(PHASES[1]), RED))
        elif kind == "tool_execution":
            turn.append(data)
        elif kind == "stop":
            rows.append(("harness", "harness", f"check stop_reason: {data['cause']}, the run "
                         f"is done ({len(result.messages)} messages in the list)", RED))
    fig = Figure(figsize=(11, 0.5 * len(rows) + 1.4))
    top = len(rows) + 1
    ax = _blank(fig, (0, 11), (0, top + 0.5))
    for name, x in lanes.items():
        ax.text(x, top, name, ha="center", fontsize=11, fontweight="bold")
        ax.plot([x, x], [0.3, top - 0.4], color=GREY, lw=1, ls=":")
    for i, (src, dst, label, color) in enumerate(rows):
        y = top - 1 - i
        x0, x1 = lanes[src], lanes[dst]
        if src == dst:
            ax.text(x0 + 0.15, y, label, fontsize=8.5, color=color, va="center")
            ax.plot([x0], [y], marker="s", color=color, ms=5)
        else:
            _arrow(ax, (x0, y), (x1, y), color=color)
            ax.text(min(x0, x1) + 0.1, y + 0.12, label, fontsize=8, color=color)
    return fig


def fig_exit_order() -> Figure:
    """Figure 3: one turn of the loop in the order it runs, from the loop's own check tuples
    (:func:`loop_turn`): each check with its stop causes and what it does, the loop's steps
    between them (compaction, the model call, running the tools), and the output check on
    the branch where it runs."""
    items = loop_turn()
    fig = Figure(figsize=(10, 0.62 * len(items) + 1.0))
    top = len(items) + 0.6
    ax = _blank(fig, (0, 10), (0, top + 0.4))
    last_phase, number = None, 0
    for i, item in enumerate(items):
        y = top - 0.5 - i
        if isinstance(item, LoopStep):
            _box(ax, 1.9, y, 3.2, 0.5, item.name, GREY, size=8.5, weight="bold",
                 fill="#edf2f7")
            ax.text(3.7, y, textwrap.shorten(item.label, 115), fontsize=7.5, color=GREY,
                    va="center")
        else:
            if item.phase != last_phase:
                ax.text(0.1, y + 0.4, item.phase, fontsize=9, color=GREY, fontstyle="italic")
                last_phase = item.phase
            number += 1
            x = 2.3 if item.when else 1.9
            _box(ax, x, y, 3.2 if not item.when else 2.4, 0.5, f"{number}. {item.name}",
                 ORANGE if item.when else BLUE, size=8.5)
            ax.text(3.7, y + 0.06, " · ".join(item.causes), fontsize=8.5, color=RED,
                    va="bottom")
            note = f"{item.when}: {item.doc}" if item.when else item.doc
            ax.text(3.7, y - 0.04, "\n".join(textwrap.wrap(note, 115)[:2]), fontsize=7.2,
                    color="black", va="top")
        if i + 1 < len(items):
            _arrow(ax, (1.9, y - 0.26), (1.9, y - 0.74), color=GREY, lw=1)
    _arrow(ax, (0.3, 0.4), (0.3, top - 0.5), color=GREY, lw=1, rad=0.0)
    ax.text(0.15, top / 2, "next turn", rotation=90, fontsize=8, color=GREY, va="center")
    return fig


def fig_fan_out(n: int = 4, seed: int = SEED) -> Figure:
    """Figure 4: fan-out / fan-in. One reply asks for ``n`` calls; they run at the same time
    (bar lengths: the seeded latencies of :func:`~primer.scenarios.parallel.seeded_latencies`,
    rounded to 0.01 s so the footer's sum and maximum are those of the labels); all results
    return in one user message in the order they were asked for."""
    from primer.scenarios.parallel import fan_out_calls

    latencies = [round(t, 2) for t in seeded_latencies(n, seed=seed)]
    calls = fan_out_calls(n)
    total, slowest = latency_model(latencies)
    fig = Figure(figsize=(10, 4.5))
    ax = _blank(fig, (0, 10), (0, n + 2))
    mid = (n + 1) / 2
    _box(ax, 1.2, mid, 2.0, 1.4, "assistant reply\n" + f"{n} tool_use blocks", BLUE)
    _box(ax, 8.8, mid, 2.0, 1.4, "one user message\n" + f"{n} tool_result blocks\nin request "
         "order", GREEN)
    scale = 3.6 / slowest
    for k, (block, t) in enumerate(zip(calls, latencies, strict=True)):
        y = n - k + 0.5
        _arrow(ax, (2.2, mid), (3.0, y), color=GREY, lw=1)
        ax.barh(y, t * scale, left=3.1, height=0.5, color=ORANGE, alpha=0.8)
        ax.text(3.1, y + 0.3, f"{block['name']}(k={k}) {block['id']}: {t:.2f} s",
                va="bottom", fontsize=8)
        _arrow(ax, (3.1 + t * scale, y), (7.8, mid), color=GREY, lw=1)
    ax.text(5.0, 0.25, f"fan-in waits for the slowest call: {slowest:.2f} s "
            f"(one after another: {' + '.join(f'{t:.2f}' for t in latencies)} = "
            f"{total:.2f} s)", ha="center", fontsize=9)
    return fig


def fig_budget_burner(rows: Sequence | None = None, budget: int | None = None) -> Figure:
    """Figure 5: a runaway agent. Tokens sent per call as bars, the running total as a line,
    the token budget dashed, the stopping call marked. Default data: a run of the
    ``burner`` demo (:func:`primer.scenarios.burner.per_call_tokens`)."""
    from primer.scenarios import burner

    rows = burner.per_call_tokens() if rows is None else rows
    budget = burner.TOKEN_BUDGET if budget is None else budget
    stop = burner.stop_call(list(rows), budget)
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    calls = [r.call for r in rows]
    ax.bar(calls, [r.sent for r in rows], color=BLUE, alpha=0.75, label="tokens sent this call")
    ax.plot(calls, [r.running_total for r in rows], color=ORANGE, marker="o", lw=2,
            label="running total (in + out)")
    ax.axhline(budget, color=RED, ls="--", lw=1.5, label=f"budget {budget:,} tokens")
    if stop is not None:
        ax.annotate(f"stops after call {stop},\nthe first past the budget",
                    xy=(stop, rows[stop - 1].running_total),
                    xytext=(max(1, stop - 4.5), budget * 1.2), color=RED,
                    arrowprops={"arrowstyle": "->", "color": RED})
    ax.set_ylim(0, budget * 1.4)
    ax.set_xlabel("model call")
    ax.set_ylabel("tokens")
    ax.set_xticks(calls)
    ax.set_title("A model that never stops, and the budget that stops it")
    ax.legend(loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


def fig_quadratic_tokens(per_step: int = 500, max_steps: int = 30) -> Figure:
    """Figure 6: cumulative input tokens, the flat expectation (``per_step × n``) against
    what a run re-sending its history sends
    (:func:`~primer.loop.cost.cumulative_input_tokens`, each call counting its own step)."""
    steps = list(range(0, max_steps + 1))
    real = [cumulative_input_tokens(n, 0, per_step, history_on_first_call=True) for n in steps]
    flat = [per_step * n for n in steps]
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    ax.plot(steps, flat, color=GREY, ls="--", lw=2, label=f"expected: {per_step} a step")
    ax.plot(steps, real, color=BLUE, lw=2.5, label="sent: the whole history every call")
    for n in (10, 20):
        ax.plot([n], [real[n]], "o", color=ORANGE)
        ax.annotate(f"{real[n]:,}", (n, real[n]), textcoords="offset points", xytext=(-40, 8))
    ax.set_xlabel("steps (model calls)")
    ax.set_ylabel("cumulative input tokens")
    ax.set_title("Linear expectation, quadratic reality")
    ax.legend(loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


#: The stored measurement figure 7 draws (written by :func:`write_latency_measurement`).
LATENCY_DATA = Path(__file__).resolve().parents[1] / "data" / "parallel_latency.json"


def measure_latency(time_scale: float = 0.25, max_tools: int = 8) -> dict[str, Any]:
    """Measure lesson 06's experiment once: 1..``max_tools`` waiting tools run one after
    another and concurrently (:func:`~primer.scenarios.parallel.sweep`, threads that really
    sleep ``latency × time_scale`` seconds).

    Returns ``{"time_scale", "seed", "tools", "sequential_s", "concurrent_s"}`` with the
    times divided by ``time_scale`` (seconds at full scale), rounded to 1 ms. Takes about
    ``time_scale × 25`` seconds of real time for 8 tools.
    """
    runs = sweep(max_tools, time_scale=time_scale)
    return {"time_scale": time_scale, "seed": SEED, "tools": [r.n for r in runs],
            "sequential_s": [round(r.sequential_s / time_scale, 3) for r in runs],
            "concurrent_s": [round(r.concurrent_s / time_scale, 3) for r in runs]}


def write_latency_measurement(path: str | Path = LATENCY_DATA,
                              time_scale: float = 0.25) -> dict[str, Any]:
    """Measure (:func:`measure_latency`) and store the result as JSON at ``path``; returns it.

    ``python -m primer figures --measure`` calls this before drawing, so figure 7 shows a
    fresh measurement; plain ``make figures`` redraws the stored one byte for byte.
    """
    data = measure_latency(time_scale)
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def read_latency_measurement(path: str | Path = LATENCY_DATA) -> dict[str, Any]:
    """The stored measurement (see :func:`measure_latency`); ``FileNotFoundError`` says how
    to make one."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: run python -m primer figures --measure "
                                f"to measure the parallel latency once") from None


def fig_parallel_latency(n_tools: Sequence[int] | None = None,
                         sequential_s: Sequence[float] | None = None,
                         concurrent_s: Sequence[float] | None = None,
                         measured: bool = True) -> Figure:
    """Figure 7: wall time of 1..8 tool calls, one after another vs concurrently, measured
    (points), against the model of the experiment (wide pale lines): the sum and the max of
    the first ``n`` seeded latencies (:func:`~primer.scenarios.parallel.seeded_latencies`,
    0.2–1.2 s).

    Lesson 06 passes its live measurement (seconds at full scale). Without data it draws the
    stored measurement (:func:`read_latency_measurement`), so the committed SVG is
    byte-stable. ``measured=False`` labels the points as a model instead.
    """
    note = ""
    if n_tools is None or sequential_s is None or concurrent_s is None:
        data = read_latency_measurement()
        n_tools, sequential_s, concurrent_s = (data["tools"], data["sequential_s"],
                                               data["concurrent_s"])
        note = f" (stored run, time scale {data['time_scale']:g})"
    latencies = seeded_latencies(max(n_tools))
    models = [latency_model(latencies[:n]) for n in n_tools]
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    what = "measured" if measured else "model"
    ax.plot(n_tools, [m[0] for m in models], color=RED, lw=7, alpha=0.2,
            label="model: the sum of the latencies")
    ax.plot(n_tools, [m[1] for m in models], color=GREEN, lw=7, alpha=0.2,
            label="model: the slowest latency")
    ax.plot(n_tools, sequential_s, color=RED, marker="o", lw=2,
            label=f"one after another ({what})")
    ax.plot(n_tools, concurrent_s, color=GREEN, marker="o", lw=2,
            label=f"concurrently ({what})")
    ax.set_xlabel("tool calls in one reply")
    ax.set_ylabel("wall time (s at full scale)")
    ax.set_title("Parallel tool calls: the turn waits only for its slowest call" + note,
                 fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False, fontsize=8.5)
    fig.tight_layout()
    return fig


def fig_compounding(accuracies: Sequence[float] = (0.99, 0.95, 0.90, 0.85),
                    max_steps: int = 30) -> Figure:
    """Figure 8: end-to-end success against the number of steps for several per-step
    accuracies (:func:`~primer.course.estimates.end_to_end_success`, ``p ** steps``)."""
    steps = list(range(1, max_steps + 1))
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for p, color in zip(accuracies, (GREEN, BLUE, ORANGE, RED, GREY), strict=False):
        ax.plot(steps, [end_to_end_success(p, n) for n in steps], lw=2, color=color,
                label=f"{p:.0%} a step")
    ax.axvline(10, color=GREY, ls=":", lw=1)
    ax.set_xlabel("steps in the chain")
    ax.set_ylabel("end-to-end success")
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.set_title("A run succeeds only if every step does")
    ax.legend(loc="lower left", frameon=False)
    fig.tight_layout()
    return fig


#: File stem in ``figures/`` → the function that draws it, in syllabus order.
FIGURES: dict[str, Callable[[], Figure]] = {
    "01_loop_cycle": fig_loop_cycle,
    "02_round_trip": fig_round_trip,
    "03_exit_order": fig_exit_order,
    "04_fan_out_fan_in": fig_fan_out,
    "05_budget_burner": fig_budget_burner,
    "06_quadratic_tokens": fig_quadratic_tokens,
    "07_parallel_latency": fig_parallel_latency,
    "08_compounding": fig_compounding,
}


def draw(name: str) -> Figure:
    """Draw figure ``name`` (a key of :data:`FIGURES`) with the stable style.

    ``KeyError`` lists the known names.
    """
    if name not in FIGURES:
        raise KeyError(f"no figure named {name!r}; known figures: {', '.join(FIGURES)}")
    with matplotlib.rc_context(STABLE_RC):
        return FIGURES[name]()


def svg_bytes(fig: Figure) -> bytes:
    """``fig`` as byte-stable SVG (fixed hash salt, no date, fixed creator)."""
    buf = io.BytesIO()
    with matplotlib.rc_context(STABLE_RC):
        fig.savefig(buf, format="svg", metadata=SVG_METADATA)
    return buf.getvalue()


def png(fig: Figure, dpi: int = 100):  # -> IPython.display.Image
    """``fig`` as an inline PNG for a notebook (``IPython.display.Image``)."""
    from IPython.display import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return Image(data=buf.getvalue(), format="png")


def show(name_or_fig: str | Figure, dpi: int = 100):
    """A committed figure (by name) or any figure, as inline PNG for a lesson."""
    fig = draw(name_or_fig) if isinstance(name_or_fig, str) else name_or_fig
    return png(fig, dpi)


def write_all(out_dir: str | Path = "figures",
              names: Sequence[str] | None = None) -> list[tuple[Path, bool]]:
    """Write every figure (or ``names``) as ``out_dir/<name>.svg``.

    Returns ``(path, changed)`` pairs; a file whose bytes are already right is not rewritten.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or list(FIGURES):
        data = svg_bytes(draw(name))
        path = out / f"{name}.svg"
        changed = not path.exists() or path.read_bytes() != data
        if changed:
            path.write_bytes(data)
        written.append((path, changed))
    return written
