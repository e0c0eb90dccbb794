"""The course's eight figures, each drawn by one function from primer code.

Nothing here is drawn from numbers typed by hand: the loop diagrams read the loop's own check
order and stop causes from the data the loop runs, :data:`primer.agents.exits.ORDER`
(:func:`check_order`), the
round trip and fan-out diagrams come from real scripted runs, and the charts from
:mod:`primer.agents.cost`, :mod:`primer.agents.parallel` and the budget-burner scenario.

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
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from primer.agents.cost import cumulative_input_tokens, end_to_end_success
from primer.agents.exits import ORDER
from primer.agents.parallel import SEED, latency_model, seeded_latencies

#: Settings that make SVG output byte-stable and independent of the machine's fonts.
STABLE_RC = {"svg.hashsalt": "agent-loop-primer", "svg.fonttype": "none",
             "font.family": "DejaVu Sans", "font.size": 10, "axes.spines.top": False,
             "axes.spines.right": False}
SVG_METADATA = {"Date": None, "Creator": "primer.figures"}

BLUE, ORANGE, GREEN, RED, GREY = "#2b6cb0", "#dd6b20", "#2f855a", "#c53030", "#718096"


# ---------------------------------------------------------------- the loop, from its own data

@dataclass(frozen=True)
class Check:
    """One check of the loop: its function ``name``, the ``phase`` it runs in, the first line
    of its docstring (``doc``) and the :class:`StopCause` values it can return."""

    name: str
    phase: str
    doc: str
    causes: tuple[str, ...]


#: Phases of one turn of the loop, in order (the phases of :data:`primer.agents.exits.ORDER`).
PHASES = tuple(phase for phase, _ in ORDER)


def check_order() -> list[Check]:
    """The loop's checks in the order the loop makes them, from
    :data:`primer.agents.exits.ORDER`: the tuples the loop runs, phase by phase, with the
    output step where it sits. A check the loop makes in two phases (the step limit) is
    listed in both. Each check's stop causes are the ones it is marked with."""
    return [Check(fn.__name__, phase, (inspect.getdoc(fn) or fn.__name__).splitlines()[0]
                  .replace("``", ""), tuple(c.value for c in fn.causes))
            for phase, steps in ORDER for fn in steps]


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


def fig_loop_cycle() -> Figure:
    """Figure 1: the loop as a cycle (task → model decides → tools run → observation → back),
    with each exit marked where the loop checks it (from :func:`check_order`)."""
    fig = Figure(figsize=(11, 6))
    ax = _blank(fig, (0, 13), (0, 10))
    nodes = {"goal": (1.6, 5.0, "the task\n(user message)"),
             "model": (5.0, 8.0, "model decides\n(one call: whole history in)"),
             "tools": (8.4, 5.0, "harness runs the\nrequested tools"),
             "obs": (5.0, 2.0, "observation\n(tool_result blocks\nappended)")}
    for key, (x, y, text) in nodes.items():
        _box(ax, x, y, 2.8, 1.2, text, BLUE, weight="bold" if key == "model" else "normal")
    _arrow(ax, (2.4, 5.7), (3.8, 7.5), rad=-0.2)
    _arrow(ax, (6.2, 7.5), (7.6, 5.7), rad=-0.2)
    ax.text(7.3, 6.9, "tool_use", color=BLUE, fontsize=9)
    _arrow(ax, (7.6, 4.3), (6.2, 2.5), rad=-0.2)
    _arrow(ax, (3.8, 2.6), (4.4, 7.3), rad=0.35, color=GREY)
    ax.text(3.15, 4.0, "next call", color=GREY, fontsize=9, rotation=80)
    checks = check_order()
    spots = {PHASES[0]: (0.2, 9.6, (3.5, 8.3)), PHASES[1]: (10.3, 9.6, (6.45, 8.2)),
             PHASES[2]: (10.3, 3.0, (6.45, 1.9))}
    for phase, (x, y, source) in spots.items():
        causes = list(dict.fromkeys(c for ch in checks if ch.phase == phase
                                    for c in ch.causes))
        ax.text(x, y, f"exits {phase}:", fontsize=9, fontweight="bold", color=RED)
        for k, cause in enumerate(causes):
            ax.text(x + 0.15, y - 0.38 * (k + 1), f"→ {cause}", fontsize=8.5, color=RED)
        if phase != PHASES[0]:
            _arrow(ax, source, (x - 0.1, y - 0.3), color=RED, ls="--", lw=1)
    return fig


def fig_round_trip() -> Figure:
    """Figure 2: one round trip, message by message, from a real two-call scripted run.

    The lanes are the harness, the model and a tool; the arrows are the events of the run
    (``on_event``) in order; the harness's checks (from :func:`check_order`) sit where they
    run.
    """
    from primer.agents import ScriptedLLM, run_agent, text_reply, tool, tool_reply

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up
        """
        return f"value of {key}"

    events: list[tuple[str, dict]] = []
    llm = ScriptedLLM([tool_reply(("lookup", {"key": "A123"})), text_reply("A123 is found.")])
    result = run_agent(llm, "Look up A123.", [lookup], on_event=lambda k, d: events.append((k, d)))
    checks = check_order()
    lanes = {"harness": 2.0, "model": 6.0, "tool": 9.0}
    rows: list[tuple[str, str, str, str]] = []
    for kind, data in events:
        if kind == "model_call":
            reply = data["reply"]
            rows.append(("harness", "model", f"call {data['step']}: system + "
                         f"{'all messages' if data['step'] > 1 else 'task'} + tool definitions",
                         BLUE))
            blocks = ", ".join(b["type"] for b in reply["content"])
            rows.append(("model", "harness", f"reply [{blocks}] stop_reason="
                         f"{reply['stop_reason']}", BLUE))
            rows.append(("harness", "harness", "checks: " + ", ".join(
                c.name.removeprefix("check_") for c in checks if c.phase == PHASES[1]), RED))
        elif kind == "tool_execution":
            rows.append(("harness", "tool", f"validate input, run {data['name']}"
                         f"({', '.join(f'{k}={v}' for k, v in data['input'].items())})", GREEN))
            rows.append(("tool", "harness", f"tool_result: {data['content']!r}", GREEN))
            rows.append(("harness", "harness", "append all results in one user message",
                         GREEN))
        elif kind == "stop":
            rows.append(("harness", "harness", f"stop: {data['cause']} "
                         f"({len(result.messages)} messages in the list)", RED))
    fig = Figure(figsize=(10, 0.55 * len(rows) + 1.4))
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
    """Figure 3: the exits in the order they are checked, from the loop's own order data
    (:func:`check_order`): each check function, its stop causes, and what it does."""
    checks = check_order()
    fig = Figure(figsize=(10, 0.75 * len(checks) + 1.0))
    top = len(checks) + 0.6
    ax = _blank(fig, (0, 10), (0, top + 0.4))
    last_phase = None
    for i, c in enumerate(checks):
        y = top - 0.5 - i
        if c.phase != last_phase:
            ax.text(0.1, y + 0.42, c.phase, fontsize=9, color=GREY, fontstyle="italic")
            last_phase = c.phase
        _box(ax, 1.9, y, 3.2, 0.55, f"{i + 1}. {c.name}", BLUE, size=9)
        ax.text(3.7, y + 0.08, " · ".join(c.causes), fontsize=9, color=RED, va="bottom")
        ax.text(3.7, y - 0.05, textwrap.shorten(c.doc, 95), fontsize=7.5, color="black",
                va="top")
        if i + 1 < len(checks):
            _arrow(ax, (1.9, y - 0.3), (1.9, y - 0.7), color=GREY, lw=1)
    return fig


def fig_fan_out(n: int = 4, seed: int = SEED) -> Figure:
    """Figure 4: fan-out / fan-in. One reply asks for ``n`` calls; they run at the same time
    (bar lengths: the seeded latencies of :func:`~primer.agents.parallel.seeded_latencies`);
    all results return in one user message in the order they were asked for."""
    from primer.agents.parallel import fan_out_calls

    latencies = seeded_latencies(n, seed=seed)
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
            f"(one after another: {total:.2f} s)", ha="center", fontsize=9)
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
    (:func:`~primer.agents.cost.cumulative_input_tokens`, each call counting its own step)."""
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


def fig_parallel_latency(n_tools: Sequence[int] | None = None,
                         sequential_s: Sequence[float] | None = None,
                         concurrent_s: Sequence[float] | None = None,
                         measured: bool = False) -> Figure:
    """Figure 7: wall time of 1..8 tool calls, one after another (sum) vs concurrently (max).

    Lesson 06 passes its live measurements (``measured=True``). Without data it draws the
    deterministic model of the same experiment: the sum and the max of the first ``n`` seeded
    latencies (:func:`~primer.agents.parallel.seeded_latencies`, 0.2–1.2 s), so the
    committed SVG is byte-stable.
    """
    if n_tools is None or sequential_s is None or concurrent_s is None:
        latencies = seeded_latencies(8)
        n_tools = list(range(1, 9))
        models = [latency_model(latencies[:n]) for n in n_tools]
        sequential_s = [m[0] for m in models]
        concurrent_s = [m[1] for m in models]
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    ax.plot(n_tools, sequential_s, color=RED, marker="o", lw=2,
            label="one after another (the sum)")
    ax.plot(n_tools, concurrent_s, color=GREEN, marker="o", lw=2,
            label="concurrently (the slowest call)")
    ax.set_xlabel("tool calls in one reply")
    ax.set_ylabel("wall time (s" + (", measured)" if measured else ", model: sum and max)"))
    ax.set_title("Parallel tool calls: the turn waits only for its slowest call")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False)
    fig.tight_layout()
    return fig


def fig_compounding(accuracies: Sequence[float] = (0.99, 0.95, 0.90, 0.85),
                    max_steps: int = 30) -> Figure:
    """Figure 8: end-to-end success against the number of steps for several per-step
    accuracies (:func:`~primer.agents.cost.end_to_end_success`, ``p ** steps``)."""
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
