"""What a run carries between steps: ``RunState``, its ``Step`` records, and how a run stops.

Every run ends with one :class:`StopCause`; a check that fires returns a :class:`Stop` (the
cause and one sentence of detail). :class:`RunState` holds the run's inputs (config, system
prompt, the tool registry, the model) and everything that changes step by step (messages,
steps, usage and cost, loop-detection counts, the no-progress window), all kept
incrementally so the harness's own work per step stays flat as the history grows.

:meth:`RunState.to_dict` / :meth:`RunState.from_dict` are the JSON form a checkpoint journal
stores and resume reads back. :class:`Recorder` is what the loop calls at fixed points to make
progress durable (:class:`primer.harness.durable.journal.JournalRecorder` is the one the library
has); a recorder records, it never runs a step of the loop.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import pydantic

from primer.harness.hooks import Hooks
from primer.harness.runner import ToolRunner

from .config import AgentConfig
from .cost import cost_usd
from .history import tool_use_ids
from .jsontext import compact_sorted
from .messages import Block, Message
from .model import LLM, Reply, Usage, estimate_tokens
from .tools import ToolExecution, ToolRegistry


class StopCause(str, Enum):
    """Why a run ended. Every run ends with exactly one."""

    END_TURN = "end_turn"                  #: the model finished with an answer
    MAX_TOKENS = "max_tokens"              #: the reply was cut off; nothing in it ran
    REFUSAL = "refusal"                    #: the model refused; the content is not an answer
    TOKEN_BUDGET = "token_budget"          #: the run's token budget was reached
    COST_BUDGET = "cost_budget"            #: the run's dollar budget was reached
    HANDOFF = "handoff"                    #: the model handed the task to a person
    LOOP_DETECTED = "loop_detected"        #: the same call was requested too many times
    MAX_STEPS = "max_steps"                #: the step limit (model calls) was used up
    WALL_CLOCK = "wall_clock"              #: the run's time limit passed
    NO_PROGRESS = "no_progress"            #: the last N tool results were all errors
    CONTEXT_WINDOW = "context_window"      #: the prompt outgrew its share of the window
    AWAITING_APPROVAL = "awaiting_approval"  #: paused until a person approves a call
    MODEL_ERROR = "model_error"            #: the model call raised; work so far is kept
    INVALID_OUTPUT = "invalid_output"      #: the final answer failed its output_model check
    CANCELLED = "cancelled"                #: the caller's cancel signal was set; resumable

    def __str__(self) -> str:
        return self.value


@dataclass
class Stop:
    """A check's verdict: the cause and a one-sentence detail of what fired."""

    cause: StopCause
    detail: str


@dataclass
class Step:
    """One model call and what followed it.

    ``index`` counts model calls from 1. ``usage`` is this call's usage, ``total_usage``
    and ``cost_usd`` the run's running totals after it (tokens; USD). ``prompt_estimate`` is
    the harness's estimate of the prompt it sent (tokens, characters/4). ``executions`` are
    the tool calls of this reply in request order, including any the run did not run
    (``error_kind == "not_run"``). ``model_latency_s`` is wall seconds in the model call.
    ``model_retries`` records the failed attempts of this model call that were retried
    (see :func:`~primer.harness.runner.call_model_with_retries`); their reported usage is
    in ``total_usage`` and ``cost_usd`` but not in ``usage``.
    """

    index: int
    reply: Reply
    usage: Usage
    total_usage: Usage
    cost_usd: float
    prompt_estimate: int
    model_latency_s: float = 0.0
    executions: list[ToolExecution] = field(default_factory=list)
    model_retries: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"index": self.index, "reply": self.reply.to_dict(),
                "usage": self.usage.to_dict(), "total_usage": self.total_usage.to_dict(),
                "cost_usd": self.cost_usd, "prompt_estimate": self.prompt_estimate,
                "model_latency_s": self.model_latency_s,
                "executions": [e.to_dict() for e in self.executions],
                "model_retries": self.model_retries}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        """Inverse of :meth:`to_dict`; ``KeyError`` / ``TypeError`` for a malformed dict."""
        return cls(d["index"], Reply.from_dict(d["reply"]), Usage.from_dict(d["usage"]),
                   Usage.from_dict(d["total_usage"]), d["cost_usd"], d["prompt_estimate"],
                   d.get("model_latency_s", 0.0),
                   [ToolExecution(**e) for e in d.get("executions", [])],
                   model_retries=d.get("model_retries", []))


#: ``on_event(kind, data)``: called as the run goes (``run_start``, ``model_call``,
#: ``tool_execution``, ``stop``, ...), e.g. a :class:`~primer.harness.tracing.trace.TraceWriter`.
EventSink = Callable[[str, dict[str, Any]], None]


class CancelSignal(Protocol):
    """What ``run_agent(..., cancel=...)`` takes: anything with ``is_set() -> bool``, such as
    a ``threading.Event`` (or an ``asyncio.Event`` for the async loop). The loop reads it
    before each model call and before each tool call starts; it never clears it."""

    def is_set(self) -> bool: ...


class Recorder(Protocol):
    """Where a run's progress becomes durable; the loop calls it at fixed points.

    A recorder only records: it never runs a tool, calls the model or ends the run. Each
    method receives the state as it is at that point; what the state gained since the last
    call (the reply, its step, results, totals) is the recorder's to write.
    """

    def call_started(self, state: RunState, call: Block) -> None:
        """A side-effecting call is about to run (durable before it runs)."""

    def call_done(self, state: RunState, execution: ToolExecution) -> None:
        """A recorded call finished with ``execution`` (durable)."""

    def results_added(self, state: RunState) -> None:
        """A reply's results were appended to the messages in one user message."""

    def paused(self, state: RunState, calls: list[Block]) -> None:
        """The approval gate paused the run on the last reply's ``calls`` (durable)."""

    def stopped(self, state: RunState, stop: Stop, summary: str,
                final_text: str | None) -> str | None:
        """The run ended with ``stop``; returns where it was recorded, or ``None``."""

    def close(self) -> None:
        """Release what the recorder holds (files, locks); safe to call twice."""


def _canonical_value(value: Any) -> Any:
    """JSON-equal values made identical: 1.0 becomes 1 (JSON Schema treats them as equal)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical_value(v) for v in value]
    return value


_PLAIN = (str, int, bool, type(None))


def repeat_key(block: Block, refused: dict[str, dict[str, str]] | None) -> str:
    """The key loop detection counts for a call of a reply with ``refused`` calls: its
    :func:`canonical_call`, with, for a refused call (whose broken input is sent on as
    ``{}``), why it was refused: the same broken request counts as a repeat, different
    ones do not."""
    if refused and block.get("id") in refused:
        return f"{canonical_call(block)}:refused:{refused[block['id']].get('problem')}"
    return canonical_call(block)


def canonical_call(block: Block) -> str:
    """The key loop detection counts: tool name + input as JSON with sorted keys (1.0 as 1)."""
    args = block.get("input")
    try:
        if not (isinstance(args, dict) and all(type(v) in _PLAIN for v in args.values())):
            args = _canonical_value(args)  # only floats and containers need the walk
        text = compact_sorted(args)
    except (TypeError, ValueError):
        text = repr(block.get("input"))
    return f"{block.get('name')}:{text}"


@dataclass
class RunState:
    """Everything a run carries between steps, kept incrementally.

    Inputs: ``config``, ``system`` (the system prompt), ``registry`` (the tools: the
    allow-list), ``tool_defs`` (their definitions as sent), ``llm`` (the model), ``runner``
    (how one call runs: timeouts and retries; by default built from the config), ``hooks``,
    ``output_model`` (the pydantic model the final answer must satisfy, or ``None``),
    ``recorder`` (where progress becomes durable, or ``None``), ``on_event``, ``on_delta``
    (where a streaming model's deltas go: the caller's ``on_event``, never a trace file) and
    ``cancel`` (the caller's :class:`CancelSignal`, or ``None``).

    Progress: ``messages``, ``steps``, ``usage`` and ``cost_usd`` (totals: tokens; USD),
    ``prompt_estimate`` (the running characters/4 estimate of system prompt + tool
    definitions + messages, updated per appended message, never re-scanned),
    ``repeat_counts`` (requests per :func:`canonical_call` key), ``recent_errors`` (the
    no-progress window), ``output_fixes`` (corrective turns used), ``compactions``,
    ``tool_use_ids`` (every id of the run) and ``tool_calls`` (the calls let through to run,
    for ``max_tool_calls_per_run``).
    """

    config: AgentConfig
    system: str
    messages: list[Message]
    registry: ToolRegistry
    tool_defs: list[dict[str, Any]]
    llm: LLM | None = None
    runner: ToolRunner | None = None
    prompt_estimate: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    steps: list[Step] = field(default_factory=list)
    repeat_counts: Counter[str] = field(default_factory=Counter)
    recent_errors: deque[bool] = field(default_factory=deque)
    started_at: float = 0.0
    on_event: EventSink | None = None
    recorder: Recorder | None = None
    hooks: list[Hooks] = field(default_factory=list)
    output_model: type[pydantic.BaseModel] | None = None
    output_fixes: int = 0
    output: pydantic.BaseModel | None = None  #: the validated final answer
    compactions: int = 0
    tool_use_ids: set[str] = field(default_factory=set)
    on_delta: EventSink | None = None
    cancel: CancelSignal | None = None
    tool_calls: int = 0  #: calls let through to run (counted while max_tool_calls_per_run is on)

    def __post_init__(self) -> None:
        if self.runner is None:
            self.runner = ToolRunner.from_config(self.registry, self.config)

    @property
    def model_calls(self) -> int:
        """Model calls made so far (one per step)."""
        return len(self.steps)

    @property
    def last_reply(self) -> Reply:
        """The reply of the latest model call (``IndexError`` before the first)."""
        return self.steps[-1].reply

    def append(self, message: Message) -> None:
        """Append a message and add its size to the running prompt estimate."""
        self.messages.append(message)
        self.prompt_estimate += estimate_tokens(message)

    def recount_prompt_estimate(self) -> None:
        """Estimate the whole prompt afresh (system + tool definitions + messages), once:
        at the start of a run and after the message list was rewritten (compaction)."""
        self.prompt_estimate = (estimate_tokens(self.system) + estimate_tokens(self.tool_defs)
                                + sum(estimate_tokens(m) for m in self.messages))

    def add_usage(self, usage: Usage, cost: float | None = None) -> None:
        """Add ``usage`` (tokens) to the run's totals, and ``cost`` (USD; by default its
        price at the run's ``prices``)."""
        self.usage = self.usage + usage
        self.cost_usd += cost_usd(usage, self.config.prices) if cost is None else cost

    def emit(self, kind: str, **data: Any) -> None:
        """Send one event to ``on_event`` (if any)."""
        if self.on_event is not None:
            self.on_event(kind, data)

    # -- the JSON form (checkpoint journals, resume)

    def totals(self) -> dict[str, Any]:
        """The running totals, JSON-ready: what changes on every step besides the lists."""
        return {"usage": self.usage.to_dict(), "cost_usd": self.cost_usd,
                "prompt_estimate": self.prompt_estimate,
                "recent_errors": list(self.recent_errors), "output_fixes": self.output_fixes,
                "compactions": self.compactions}

    def to_dict(self) -> dict[str, Any]:
        """The progress of the run, JSON-ready: ``system``, ``messages``, ``steps`` and
        :meth:`totals`. The inputs (config, tools, model, hooks) travel separately."""
        return {"system": self.system, "messages": self.messages,
                "steps": [s.to_dict() for s in self.steps], **self.totals()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, config: AgentConfig, registry: ToolRegistry,
                  **inputs: Any) -> RunState:
        """A state rebuilt from :meth:`to_dict`, with the run's live inputs (``config``,
        ``registry`` and any other field given as a keyword, e.g. ``llm``, ``hooks``).

        The loop-detection counts, the run's ``tool_use`` ids and its count of calls let
        through are counted again from the steps' replies (every call of a run that goes on
        was counted once); the ids of an earlier conversation in ``messages`` are taken too.
        Raises
        ``KeyError``, ``TypeError`` or ``ValueError`` for a malformed dict.
        """
        steps = [Step.from_dict(s) for s in d["steps"]]
        state = cls(config=config, system=d["system"], messages=list(d["messages"]),
                    registry=registry, tool_defs=registry.definitions(),
                    prompt_estimate=int(d["prompt_estimate"]),
                    usage=Usage.from_dict(d["usage"]), cost_usd=float(d["cost_usd"]),
                    steps=steps, output_fixes=int(d.get("output_fixes", 0)),
                    compactions=int(d.get("compactions", 0)),
                    recent_errors=deque(map(bool, d["recent_errors"]),
                                        maxlen=config.no_progress_window or 1), **inputs)
        state.tool_use_ids = tool_use_ids(state.messages)
        for s in steps:
            for block in s.reply.tool_uses:
                if config.repeat_threshold is not None:
                    state.repeat_counts[repeat_key(block, s.reply.refused)] += 1
                if isinstance(block.get("id"), str):
                    state.tool_use_ids.add(block["id"])
            state.tool_calls += len(s.reply.tool_uses) - len(s.reply.refused or ())
        return state
