"""What a run carries between steps: its inputs, its progress, its ``Step`` records, its stop.

Every run ends with one :class:`StopCause`; a check that fires returns a :class:`Stop`. A
run is :class:`RunInputs`, what it was given and never changes (config, tools, model and the
seams the harness plugs into), and :class:`RunState`, what changes step by step, kept
incrementally so the loop's own work per step stays flat as the history grows.
:meth:`RunState.to_dict` / :meth:`RunState.from_dict` are the JSON form a checkpoint journal
stores and resume reads back.
"""

from __future__ import annotations

import functools
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from .config import AgentConfig
from .messages import Message, ToolUseBlock, compact_sorted, tool_use_ids
from .model import LLM, EventSink, Reply, Usage, cost_usd, estimate_tokens
from .tools import (
    Refusal,
    Tool,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    call_approval_reason,
)

if TYPE_CHECKING:
    import pydantic


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

    ``index`` counts model calls from 1. ``usage`` is this call's, ``total_usage`` and
    ``cost_usd`` the run's totals after it (tokens; USD); ``prompt_estimate`` the prompt it
    sent (tokens, characters/4). ``executions``: the reply's tool calls in request order,
    unrun ones (``not_run``) included. ``model_latency_s``: wall seconds in the model call;
    ``model_retries``: its retried failed attempts (their usage is in the totals only).
    What the harness decided, kept off the :class:`Reply`: ``refused`` maps each ``tool_use``
    id it will not run to ``{"error_kind", "problem"}``; ``received`` is the content as it
    arrived when :func:`~primer.loop.replies.accept_reply` repaired it; else both ``None``.
    ``gate``: the approval gate's answer for each call it asked about, by ``tool_use`` id
    (a reason the call waits for a person, ``""`` for none given, or ``None``: it need not);
    asked once (:meth:`approval_reason`), kept with a pause, read by a resume.
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
    refused: dict[str, Refusal] | None = None
    received: list[Any] | str | None = None
    gate: dict[str, str | None] | None = None

    def approval_reason(self, registry: ToolRegistry, block: ToolUseBlock) -> str | None:
        """Why the reply's call ``block`` waits for a person, or ``None``
        (:func:`~primer.loop.tools.call_approval_reason`), asked once per call: the first
        ask records the answer in :attr:`gate`, later ones (the pause, the journal, a resume)
        read it, so a predicate whose answer would change cannot change the decision."""
        call_id = str(block.get("id"))
        if self.gate is None:
            self.gate = {}
        elif call_id in self.gate:
            return self.gate[call_id]
        reason = self.gate[call_id] = call_approval_reason(registry, block, self.refused)
        return reason

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``refused`` and ``received`` only when set)."""
        d = {"index": self.index, "reply": self.reply.to_dict(),
             "usage": self.usage.to_dict(), "total_usage": self.total_usage.to_dict(),
             "cost_usd": self.cost_usd, "prompt_estimate": self.prompt_estimate,
             "model_latency_s": self.model_latency_s,
             "executions": [e.to_dict() for e in self.executions],
             "model_retries": self.model_retries}
        if self.refused:
            d["refused"] = self.refused
        if self.received is not None:
            d["received"] = self.received
        if self.gate is not None:
            d["gate"] = self.gate
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        """Inverse of :meth:`to_dict`; ``KeyError`` / ``TypeError`` for a malformed dict."""
        refused = d.get("refused")
        if refused is not None and not isinstance(refused, dict):
            raise TypeError("step.refused must be an object")
        gate = d.get("gate")
        if gate is not None and not (isinstance(gate, dict) and all(
                v is None or isinstance(v, str) for v in gate.values())):
            raise TypeError("step.gate must map tool_use ids to a reason or null")
        return cls(d["index"], Reply.from_dict(d["reply"]), Usage.from_dict(d["usage"]),
                   Usage.from_dict(d["total_usage"]), d["cost_usd"], d["prompt_estimate"],
                   d.get("model_latency_s", 0.0),
                   [ToolExecution(**e) for e in d.get("executions", [])],
                   d.get("model_retries", []), refused, d.get("received"), gate)


class CancelSignal(Protocol):
    """What ``run_agent(..., cancel=...)`` takes: anything with ``is_set() -> bool``, such as
    a ``threading.Event`` (or an ``asyncio.Event`` for the async loop). The loop reads it
    before each model call and before each tool call starts, every
    :data:`~primer.loop.steps.CANCEL_POLL_S` while a tool runs, and at each delta of a
    streaming call; it never clears it."""

    def is_set(self) -> bool: ...


class Recorder(Protocol):
    """Where a run's progress becomes durable; the loop calls it at fixed points, with the
    state as it is then. It only records: it never runs a tool, calls the model or ends the
    run (:class:`primer.harness.durable.recorder.JournalRecorder` writes a checkpoint journal)."""

    def call_started(self, state: RunState, call: ToolUseBlock) -> None:
        """A side-effecting call is about to run (durable before it runs)."""

    def call_done(self, state: RunState, execution: ToolExecution) -> None:
        """A recorded call finished with ``execution`` (durable)."""

    def results_added(self, state: RunState) -> None:
        """A reply's results were appended to the messages in one user message."""

    def paused(self, state: RunState, calls: list[ToolUseBlock]) -> None:
        """The approval gate paused the run on the last reply's ``calls`` (durable)."""

    def stopped(self, state: RunState, stop: Stop, summary: str,
                final_text: str | None) -> str | None:
        """The run ended with ``stop``; returns where it was recorded, or ``None``."""

    def close(self) -> None:
        """Release what the recorder holds (files, locks); safe to call twice."""


#: How one call runs: ``runner(call) -> ToolExecution``.
CallRunner = Callable[[ToolUseBlock], ToolExecution]
#: ``block_check(block, role) -> problem or None``: may a reply's block (not text or
#: ``tool_use``) be sent back? (``primer.harness.request_check`` checks the API's types.)
BlockCheck = Callable[[dict[str, Any], str], "str | None"]


@dataclass(frozen=True)
class RunInputs:
    """What a run is given, fixed for its whole length: ``config``, ``system``, ``registry``
    (the tools: the allow-list), ``tool_defs`` (their definitions as sent) and ``llm``. The
    seams: ``runner`` (how one call runs; default :meth:`~primer.loop.tools.ToolRegistry.run`,
    the harness's adds time limits and retries), ``recorder`` (or ``None``), ``on_event``
    (where events go: a trace writer), ``on_delta`` (a streaming model's deltas: the caller's
    listener, never a trace file), ``output_model`` (the pydantic model a final answer must
    satisfy), ``cancel`` (:class:`CancelSignal`) and ``block_check`` (:data:`BlockCheck`)."""

    config: AgentConfig
    system: str
    registry: ToolRegistry
    tool_defs: list[ToolDefinition]
    llm: LLM
    runner: CallRunner
    recorder: Recorder | None = None
    on_event: EventSink | None = None
    on_delta: EventSink | None = None
    output_model: type[pydantic.BaseModel] | None = None
    cancel: CancelSignal | None = None
    block_check: BlockCheck | None = None


# ---------------------------------------------------------------- the hand-off tool

HANDOFF_TOOL_NAME = "handoff_to_human"

#: The hand-off tool's definition. It is a tool so that the hand-off is a logged request
#: with a reason; the harness intercepts it and ends the run with ``StopCause.HANDOFF``.
HANDOFF_TOOL_DEF: ToolDefinition = {
    "name": HANDOFF_TOOL_NAME,
    "description": ("Hand the task to a person. Use it when the request is outside what you "
                    "may do (for example an amount above your authority), when the user asks "
                    "for a person, or when you cannot make progress. Give the reason."),
    "input_schema": {"type": "object",
                     "properties": {"reason": {"type": "string",
                                               "description": "Why a person must take over."}},
                     "required": ["reason"], "additionalProperties": False},
}


def _handoff_never_runs(**_: Any) -> str:
    raise RuntimeError("the harness intercepts handoff_to_human; it never runs")


@functools.lru_cache(maxsize=1)
def handoff_tool() -> Tool:
    """A :class:`Tool` for :data:`HANDOFF_TOOL_DEF` (the loop intercepts it; it never runs),
    built once: checking its schema costs milliseconds, too much to repeat per run."""
    return Tool(HANDOFF_TOOL_DEF["name"], HANDOFF_TOOL_DEF["description"],
                HANDOFF_TOOL_DEF["input_schema"], _handoff_never_runs)


def registry_for_run(tools: ToolRegistry | Iterable[Tool], offer_handoff: bool) -> ToolRegistry:
    """The run's allow-list: ``tools``, plus the hand-off tool when ``offer_handoff`` is on and
    no tool has its name. ``ValueError`` for two tools of one name."""
    if isinstance(tools, ToolRegistry) and (not offer_handoff or HANDOFF_TOOL_NAME in tools):
        return tools  # (already the run's allow-list)
    base = list(tools)
    if offer_handoff and all(t.name != HANDOFF_TOOL_NAME for t in base):
        base.append(handoff_tool())
    return ToolRegistry(base)


_PLAIN = (str, int, bool, type(None))


def _canonical_value(value: Any) -> Any:
    """JSON-equal values made identical: 1.0 becomes 1 (JSON Schema treats them as equal)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical_value(v) for v in value]
    return value


def canonical_call(block: ToolUseBlock) -> str:
    """The key loop detection counts: tool name + input as JSON with sorted keys (1.0 as 1)."""
    args: Any = block.get("input")
    try:
        if not (isinstance(args, dict) and all(type(v) in _PLAIN for v in args.values())):
            args = _canonical_value(args)  # only floats and containers need the walk
        text = compact_sorted(args)
    except (TypeError, ValueError):
        text = repr(block.get("input"))
    return f"{block.get('name')}:{text}"


def repeat_key(block: ToolUseBlock, refused: dict[str, Refusal] | None) -> str:
    """The key loop detection counts for a call of a step with ``refused`` calls: its
    :func:`canonical_call`, plus, for a refused call (its broken input sent on as ``{}``), why:
    the same broken request counts as a repeat, different ones do not."""
    if refused and block.get("id") in refused:
        return f"{canonical_call(block)}:refused:{refused[block['id']].get('problem')}"
    return canonical_call(block)


@dataclass
class RunState:
    """A run's progress, kept incrementally; ``inputs`` holds what it was given.

    ``usage`` and ``cost_usd`` are totals (tokens; USD); ``prompt_estimate`` the running
    characters/4 estimate of system prompt + tool definitions + messages (never re-scanned);
    ``repeat_counts`` requests per :func:`canonical_call` key; ``recent_errors`` the
    no-progress window; ``started_at`` the config clock at the start (seconds);
    ``output_fixes`` corrective turns used; ``output`` the validated answer; ``tool_use_ids``
    every id of the run; ``tool_calls`` calls let through while ``max_tool_calls_per_run`` is on;
    ``partial_text`` what a streaming call closed by a cancel had shown.
    """

    inputs: RunInputs
    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    prompt_estimate: int = 0
    repeat_counts: Counter[str] = field(default_factory=Counter)
    recent_errors: deque[bool] = field(default_factory=deque)
    started_at: float = 0.0
    output_fixes: int = 0
    output: pydantic.BaseModel | None = None
    compactions: int = 0
    tool_use_ids: set[str] = field(default_factory=set)
    tool_calls: int = 0
    partial_text: str | None = None

    def __post_init__(self) -> None:
        window = self.inputs.config.no_progress_window or 1
        if self.recent_errors.maxlen != window:
            self.recent_errors = deque(self.recent_errors, maxlen=window)

    @property
    def config(self) -> AgentConfig:
        """The run's config (``inputs.config``): the checks read it at every step."""
        return self.inputs.config

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
        self.prompt_estimate = (estimate_tokens(self.inputs.system)
                                + estimate_tokens(self.inputs.tool_defs)
                                + sum(estimate_tokens(m) for m in self.messages))

    def add_usage(self, usage: Usage, cost: float | None = None) -> None:
        """Add ``usage`` (tokens) to the run's totals, and ``cost`` (USD; by default its
        price at the run's ``prices``)."""
        self.usage = self.usage + usage
        self.cost_usd += cost_usd(usage, self.config.prices) if cost is None else cost

    def emit(self, kind: str, **data: Any) -> None:
        """Send one event to ``on_event`` (if any)."""
        if self.inputs.on_event is not None:
            self.inputs.on_event(kind, data)

    # -- the JSON form (checkpoint journals, resume)

    def totals(self) -> dict[str, Any]:
        """The running totals, JSON-ready: what changes on every step besides the lists."""
        return {"usage": self.usage.to_dict(), "cost_usd": self.cost_usd,
                "prompt_estimate": self.prompt_estimate,
                "recent_errors": list(self.recent_errors), "output_fixes": self.output_fixes,
                "compactions": self.compactions}

    def to_dict(self) -> dict[str, Any]:
        """The progress of the run, JSON-ready: ``system``, ``messages``, ``steps`` and
        :meth:`totals`. The inputs (config, tools, model) travel separately."""
        return {"system": self.inputs.system, "messages": self.messages,
                "steps": [s.to_dict() for s in self.steps], **self.totals()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], inputs: RunInputs) -> RunState:
        """A state rebuilt from :meth:`to_dict` with the run's live ``inputs``; the repeat
        counts, ``tool_use`` ids and calls let through are counted again from the messages
        and steps. ``KeyError``, ``TypeError`` or ``ValueError`` for a malformed dict."""
        steps = [Step.from_dict(s) for s in d["steps"]]
        state = cls(inputs, list(d["messages"]), steps, Usage.from_dict(d["usage"]),
                    float(d["cost_usd"]), int(d["prompt_estimate"]),
                    recent_errors=deque(map(bool, d["recent_errors"])),
                    output_fixes=int(d.get("output_fixes", 0)),
                    compactions=int(d.get("compactions", 0)))
        state.tool_use_ids = tool_use_ids(state.messages)
        for s in steps:
            for block in s.reply.tool_uses:
                if inputs.config.repeat_threshold is not None:
                    state.repeat_counts[repeat_key(block, s.refused)] += 1
                if isinstance(block.get("id"), str):
                    state.tool_use_ids.add(block["id"])
            state.tool_calls += len(s.reply.tool_uses) - len(s.refused or ())
        return state


# ---------------------------------------------------------------- the prompt's size


def prompt_tokens(state: RunState) -> int:
    """The size of the next request's prompt (tokens), as the context checks read it.

    The prompt the last call reported (:attr:`Usage.prompt_tokens
    <primer.loop.model.Usage.prompt_tokens>`) plus the characters/4 estimate of what was added
    since, not an estimate of everything (which drifts from the real tokenizer: code, JSON and
    non-English text run well above characters/4). After a compaction shrank the list, the
    estimate scaled by that call's reported/estimated ratio; with no reported prompt yet, the
    estimate alone. O(1): no re-count of the list.
    """
    if not state.steps:
        return state.prompt_estimate
    last = state.steps[-1]
    reported = last.usage.prompt_tokens
    if reported <= 0 or last.prompt_estimate <= 0:
        return state.prompt_estimate
    if state.prompt_estimate >= last.prompt_estimate:
        return reported + state.prompt_estimate - last.prompt_estimate
    return round(state.prompt_estimate * reported / last.prompt_estimate)


def prompt_size_text(state: RunState) -> str:
    """How :func:`prompt_tokens` got its figure, for a stop's detail: ``"12,345 tokens
    (call 3 reported 11,000; about 1,345 added since)"``, or ``"about 12,345 tokens"``."""
    tokens = prompt_tokens(state)
    last = state.steps[-1] if state.steps else None
    if last is None or last.usage.prompt_tokens <= 0 or last.prompt_estimate <= 0:
        return f"about {tokens:,} tokens"
    added = state.prompt_estimate - last.prompt_estimate
    if added < 0:
        return (f"{tokens:,} tokens (after compaction; call {last.index} reported "
                f"{last.usage.prompt_tokens:,})")
    return (f"{tokens:,} tokens (call {last.index} reported {last.usage.prompt_tokens:,}; "
            f"about {added:,} added since)")
