"""Exercise traces: one failure mode each, and two healthy runs, recorded from scripted models.

The files in ``primer/data/traces/`` are written by :func:`write_gallery` and never by hand
(``tests/test_gallery.py`` fails when a committed file differs from what the code records).
Each :class:`GalleryEntry` runs a scripted model through ``run_agent`` with a trace, with
the guard for its failure mode switched off so the failure shows; timings in the record
are set to 0 so the files are the same on every machine. One entry is saved the way a
framework or a hand-written loop saves a run, as a Messages-API conversation (JSON).

Regenerate after changing a scenario: ``python -c "from primer.scenarios.gallery import
write_gallery; write_gallery()"``. Read one: ``python -m primer diagnose --gallery NAME``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primer.harness.files import read_text
from primer.harness.production import run_production
from primer.harness.tracing.conversation import to_conversation
from primer.harness.tracing.trace import load_trace
from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.text import parse_json
from primer.loop.tools import Tool, ToolError, tool

from . import burner, orders
from .policy import call_number

#: Where the gallery files live inside the package.
GALLERY_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"


@dataclass(frozen=True)
class GalleryEntry:
    """One exercise trace: its file ``name`` (``.jsonl`` trace or ``.json`` conversation),
    a one-line ``description``, the failure ``mode`` it shows (``None`` for a healthy run)
    and ``record(path)``, which runs the scripted model and writes the file."""

    name: str
    description: str
    mode: str | None
    record: Callable[[Path], None]

    @property
    def filename(self) -> str:
        """The file's name in :data:`GALLERY_DIR`."""
        return self.name + (".json" if self.name.endswith("conversation") else ".jsonl")


# ---------------------------------------------------------------- the scripted models

def _double_checker(messages: list[Message]) -> Any:
    """Never trusts what it read: looks the order up, computes, looks it up again, ..."""
    if call_number(messages) % 2 == 1:
        return tool_reply(("get_order", {"order_id": "A123"}),
                          text="Let me look the order up again to be sure.")
    return tool_reply(("calculator", {"expression": "2500 * 2 * 1.18"}),
                      text="And recompute the total once more.")


def _hallucinator(messages: list[Message]) -> Any:
    """Asks for a tool nobody offered, reads the error, then does the task properly."""
    if call_number(messages) == 1:
        return tool_reply(("get_order_total", {"order_id": "A123", "tax_percent": 18}),
                          text="There is probably a tool that gives the total directly.")
    return orders.policy("recover")(messages)


def _guesser(messages: list[Message]) -> Any:
    """Reads the order, then states a total it never computed."""
    if call_number(messages) == 1:
        return tool_reply(("get_order", {"order_id": "A123"}), text="Looking up the order.")
    return "Order A123 costs 5,450 rupees in total with 18% GST."


_LONG_THOUGHT = ("Total = unit price × quantity × (1 + GST). " * 12).strip()


def _long_winded(messages: list[Message]) -> Any:
    """Explains at length before its calculator call, past the run's max_tokens."""
    if call_number(messages) == 1:
        return tool_reply(("get_order", {"order_id": "A123"}), text="Looking up the order.")
    return tool_reply(("calculator", {"expression": "2500 * 2 * 1.18"}), text=_LONG_THOUGHT)


PAGES = 6
PAGE_CHARS = 2_000


@tool
def read_page(page: int) -> str:
    """Read one page of the incident report (pages 1 to 6). Use it to read the report.

    Args:
        page: the page number, from 1.
    """
    if not 1 <= page <= PAGES:
        raise ToolError(f"page must be from 1 to {PAGES} (got {page})")
    line = f"Page {page} of the incident report: timeline, logs and notes. "
    return (line * (PAGE_CHARS // len(line) + 1))[:PAGE_CHARS]


def _reader(messages: list[Message]) -> Any:
    """Reads every page of the report into its context, then answers."""
    n = call_number(messages)
    if n <= PAGES:
        return tool_reply(("read_page", {"page": n}), text="Reading the next page.")
    return "The report covers the timeline, the logs and the notes of the incident."


def _interrupted_calculator(expression: str) -> float:
    """Do arithmetic on numbers: + - * / ** and parentheses. Use it for every computation.

    Args:
        expression: the arithmetic, e.g. "2500 * 2 * 1.18".
    """
    raise KeyboardInterrupt  # the person running the agent pressed Ctrl-C during this call


# ---------------------------------------------------------------- recording

def _run(path: Path, llm: ScriptedLLM, task: str, tools: list[Tool], system: str,
         config: AgentConfig) -> None:
    run_production(llm, task, tools, system=system, config=config, trace=path)
    _zero_timings(path)


def _zero_timings(path: Path) -> None:
    """Set every wall-clock figure of a trace to 0, so the file is the same on any machine."""
    events = [parse_json(line) for line in read_text(path).splitlines()]
    for e in events:
        e["t"] = 0.0
        if "latency_s" in e:
            e["latency_s"] = 0.0
    path.write_text("".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n"
                            for e in events), encoding="utf-8")


def _orders_run(policy: Callable[[list[Message]], Any], **limits: Any) -> Callable[[Path], None]:
    def record(path: Path) -> None:
        _run(path, ScriptedLLM(policy), orders.TASK, orders.make_tools(), orders.SYSTEM,
             AgentConfig(**{"max_steps": 6, "token_budget": 3000, **limits}))
    return record


def _demo(name: str) -> Callable[[Path], None]:
    def record(path: Path) -> None:
        from . import get_demo

        get_demo(name).run(trace=path)
        _zero_timings(path)
    return record


def _wanderer(path: Path) -> None:
    _run(path, orders.make_llm("wander"), orders.TASK, orders.make_tools(), orders.SYSTEM,
         AgentConfig(max_steps=8, token_budget=None))


def _burner(path: Path) -> None:
    _run(path, burner.make_llm(), burner.TASK, burner.make_tools(), burner.SYSTEM,
         AgentConfig(max_steps=30, token_budget=None))


def _context(path: Path) -> None:
    _run(path, ScriptedLLM(_reader), "Summarise the incident report.", [read_page],
         "You read reports page by page with read_page and summarise them.",
         AgentConfig(max_steps=10, token_budget=None, context_window=4_000,
                     context_stop_share=1.0))


def _unanswered(path: Path) -> None:
    calculator = tool(_interrupted_calculator, name="calculator")
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch) / "run.jsonl"
        try:
            run_production(ScriptedLLM(orders.policy("recover")), orders.TASK,
                           [orders.get_order, calculator], system=orders.SYSTEM,
                           config=AgentConfig(max_steps=6, token_budget=3000, tool_timeout_s=None),
                           trace=trace)
        except KeyboardInterrupt:
            pass
        saved = to_conversation(load_trace(trace))
    path.write_text(json.dumps(saved, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


#: The gallery, by name (file name without its extension).
GALLERY: dict[str, GalleryEntry] = {e.name: e for e in [
    GalleryEntry("healthy-orders", "recovers from a bad argument, computes, answers 5900.0",
                 None, _demo("orders")),
    GalleryEntry("healthy-pto", "two tools in one turn, answers citing [hr-001]",
                 None, _demo("pto")),
    GalleryEntry("repeats", "looks the order up and recomputes, again and again",
                 "repeats", _orders_run(_double_checker, max_steps=8, token_budget=None,
                                        repeat_threshold=None)),
    GalleryEntry("no-progress", "guesses a new wrong order id after every error",
                 "no_progress", _wanderer),
    GalleryEntry("runaway-cost", "searches its notes forever, each result re-sent every call",
                 "runaway_cost", _burner),
    GalleryEntry("context-rot", "reads a long report into a 4,000-token window",
                 "context_rot", _context),
    GalleryEntry("tool-hallucination", "asks for a tool that was never offered",
                 "tool_hallucination", _orders_run(_hallucinator)),
    GalleryEntry("silent-wrong-answer", "states a total it never computed",
                 "silent_wrong_answer", _orders_run(_guesser)),
    GalleryEntry("cut-off", "explains at length and is cut off inside its tool call",
                 "cut_off", _orders_run(_long_winded, max_tokens=64)),
    GalleryEntry("unanswered-tool-use-conversation",
                 "interrupted during a tool call, saved as a conversation",
                 "unanswered_tool_use", _unanswered),
]}


def gallery_path(name: str) -> Path:
    """The file of the gallery entry ``name``; ``KeyError`` listing the names otherwise."""
    if name not in GALLERY:
        raise KeyError(f"no gallery trace named {name!r}; known: {', '.join(GALLERY)}")
    return GALLERY_DIR / GALLERY[name].filename


def write_gallery(directory: str | Path | None = None) -> list[Path]:
    """Record every gallery entry into ``directory`` (default :data:`GALLERY_DIR`).

    Returns the paths written. Each file is recorded from its scripted model, so running
    this again gives the same bytes (with the same primer version).
    """
    out = Path(directory) if directory is not None else GALLERY_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in GALLERY.values():
        path = out / entry.filename
        entry.record(path)
        written.append(path)
    return written
