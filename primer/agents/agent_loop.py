"""The production agent loop: ``run_agent`` and every exit it owns.

The model is stateless and cannot stop itself; the harness owns every exit. One step is one
model call. After each reply the loop checks, in this order, each check a small named
function below:

1. the model's own ``stop_reason`` (:func:`check_stop_reason`): ``end_turn`` is done;
   ``max_tokens`` means the reply was cut off and its tool call may be half-written, so
   nothing in it runs; ``refusal`` means the content is not an answer;
   ``model_context_window_exceeded`` stops on the context window; ``pause_turn`` continues;
2. the budgets (:func:`check_budgets`): tokens, then dollars, on the usage reported so far;
3. a hand-off to a person (:func:`check_handoff`): the ``handoff_to_human`` tool;
4. loop detection (:func:`check_repeats`): the same tool with the same canonical input
   requested ``repeat_threshold`` times;
5. the step limit (:func:`check_step_limit`): when this was the last model call allowed,
   the requested tools are *not* run, since no model call would ever read their results
   (checked before the approval gate, so a run never pauses for a call it could not follow);
6. the approval gate (:func:`check_approval`): a tool marked ``needs_approval`` pauses;
7. then the tools run concurrently and all results go back in one user message, in the order
   they were requested; then :func:`check_no_progress` (the last N results all errors).

Before each model call the loop checks the wall clock, the context window, and (in
``budget_check="before"`` mode) whether the call could overspend a budget.

Every run ends with a :class:`StopCause` and a summary saying what it finished and why it
stopped. The harness's own work per step does not grow with the history: the prompt-size
estimate, usage and cost totals and the repeat counts are all kept incrementally.
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from .context import compact_if_needed
from .cost import Prices, cost_usd
from .hooks import as_hook_list, run_after_reply, with_hooks
from .llm import LLM, STOP_REASONS, Reply, ScriptExhausted, Usage, estimate_tokens
from .messages import Block, Message, assistant_message, text_block, tool_use_block, user_message
from .production import (
    ModelRetriesExhausted,
    RetryPolicy,
    ToolRunner,
    call_model_with_retries,
    failed_usage,
)
from .tools import Tool, ToolExecution, ToolRegistry, compact_json, execute_tools, safe_str


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

    def __str__(self) -> str:
        return self.value


HANDOFF_TOOL_NAME = "handoff_to_human"

#: The hand-off tool's definition. It is a tool so that the hand-off is a logged request
#: with a reason; the harness intercepts it and ends the run with ``StopCause.HANDOFF``.
HANDOFF_TOOL_DEF: dict[str, Any] = {
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
    """A :class:`Tool` for :data:`HANDOFF_TOOL_DEF` (the loop intercepts it; it never runs).

    Built once and shared: checking its schema costs milliseconds, too much to repeat per run.
    """
    return Tool(HANDOFF_TOOL_DEF["name"], HANDOFF_TOOL_DEF["description"],
                HANDOFF_TOOL_DEF["input_schema"], _handoff_never_runs)


#: AgentConfig fields that hold functions: not part of its JSON form.
_CALLABLES = frozenset({"clock", "sleep", "summarizer"})


@dataclass
class AgentConfig:
    """Every limit and price of a run.

    - ``max_steps``: model calls allowed (default 10).
    - ``token_budget``: tokens (prompt + output, cache reads and writes included) the run may
      use; ``None`` for no limit (default 50,000).
    - ``budget_check``: ``"after"`` stops at the first call whose reported usage takes the
      running total past a budget (it can overshoot by one call); ``"before"`` stops before a
      call that could cross it, counting the prompt's estimated size plus ``max_tokens`` of
      output, so a budget is never overspent by the model calls the loop makes (the prompt
      priced as a cache write when that costs more). Usage that arrives another way is
      counted when it arrives and can take the run past the budget by that much: failed
      attempts that are retried (lesson 09), sub-agents inside tools and summaries
      (lesson 12); the next call is then refused.
    - ``cost_budget_usd``: dollars the run may spend at ``prices``; ``None`` for no limit.
    - ``prices``: USD per million tokens (default 5 input / 25 output).
    - ``repeat_threshold``: stop when the same tool with the same input (key order ignored)
      has been requested this many times (default 3); ``None`` turns it off.
    - ``wall_clock_s``: seconds the run may take, checked before each model call.
    - ``no_progress_window``: stop when this many tool results in a row were errors.
    - ``context_window``: the model's window in tokens; ``context_stop_share``: stop before a
      call whose prompt would pass this share of it (default 0.8).
    - ``max_tokens``: output tokens allowed per reply (default 1,024).
    - ``max_parallel_tools``: cap on the threads running one reply's calls (default 16).
    - ``offer_handoff``: offer the model the ``handoff_to_human`` tool (default on).
    - ``checkpoint_dir``: a directory for checkpoints (see :mod:`primer.agents.checkpoint`):
      a pause for approval, and every reply with a side-effecting call, is saved there so
      the run can resume in another process; ``None`` (default): a pause keeps ``pending``
      in the result and writes no file, and nothing in the paused reply runs.
    - ``clock``: the clock for the wall-clock limit (seconds; injectable for tests).
    - ``tool_timeout_s``: seconds one tool attempt may take (a tool's ``timeout_s`` wins;
      ``None``: no limit, calls run in the loop's thread); default 30.
    - ``tool_retries`` / ``model_retries``: retries of a transient tool error / model error
      after the first attempt (default 2 each); ``retry``: the backoff between them
      (:class:`~primer.agents.production.RetryPolicy`: 1 s, 2 s, 4 s ... with seeded jitter);
      ``sleep``: how the run waits (seconds; injectable, e.g. ``ManualClock().sleep``).
      See :mod:`primer.agents.production`.
    - ``compact_share``: once the prompt passes this share of ``context_window`` (default
      0.6), summarise older turns with ``summarizer`` before the next call, keeping the task
      and the last ``compact_keep_turns`` replies with their results (default 2); compaction
      is off while ``summarizer`` is ``None``. See :mod:`primer.agents.context`.
    - ``output_retries``: corrective turns a final answer that fails ``run_agent``'s
      ``output_model`` gets before the run stops with ``invalid_output`` (default 1).

    Raises ``ValueError`` for a limit that cannot work (e.g. ``max_steps < 1``).
    """

    max_steps: int = 10
    token_budget: int | None = 50_000
    budget_check: Literal["after", "before"] = "after"
    cost_budget_usd: float | None = None
    prices: Prices = field(default_factory=Prices)
    repeat_threshold: int | None = 3
    wall_clock_s: float | None = None
    no_progress_window: int | None = None
    context_window: int = 200_000
    context_stop_share: float = 0.8
    max_tokens: int = 1024
    max_parallel_tools: int = 16
    offer_handoff: bool = True
    checkpoint_dir: str | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    tool_timeout_s: float | None = 30.0
    tool_retries: int = 2
    model_retries: int = 2
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    compact_share: float | None = 0.6
    compact_keep_turns: int = 2
    summarizer: Callable[[list[Message]], Any] | None = field(default=None, repr=False,
                                                              compare=False)
    output_retries: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.prices, dict):
            self.prices = Prices(**self.prices)
        if isinstance(self.retry, dict):
            self.retry = RetryPolicy(**self.retry)
        problems = []

        def need(name: str, value: Any, *, integer: bool, low: float, above: bool = False,
                 optional: bool = False, high: float = math.inf, unit: str = "") -> None:
            """Check one setting: a real number (an int if ``integer``), finite, in range."""
            if value is None and optional:
                return
            kind = "an integer" if integer else "a number"
            ok_type = (isinstance(value, int) if integer else isinstance(value, int | float)
                       ) and not isinstance(value, bool)
            in_range = ok_type and math.isfinite(value) and (
                value > low if above else value >= low) and value <= high
            if not in_range:
                bound = f"> {low:g}" if above else f">= {low:g}"
                if high < math.inf:
                    bound += f" and <= {high:g}"
                problems.append(f"{name} must be {kind} {bound}{unit}"
                                f"{' or None' if optional else ''} (got {value!r})")

        need("max_steps", self.max_steps, integer=True, low=1)
        need("token_budget", self.token_budget, integer=True, low=0, above=True,
             optional=True, unit=" tokens")
        need("cost_budget_usd", self.cost_budget_usd, integer=False, low=0, above=True,
             optional=True, unit=" USD")
        need("repeat_threshold", self.repeat_threshold, integer=True, low=2, optional=True)
        need("wall_clock_s", self.wall_clock_s, integer=False, low=0, above=True,
             optional=True, unit=" seconds")
        need("no_progress_window", self.no_progress_window, integer=True, low=1, optional=True)
        need("context_window", self.context_window, integer=True, low=1, unit=" tokens")
        need("context_stop_share", self.context_stop_share, integer=False, low=0, above=True,
             high=1)
        need("max_tokens", self.max_tokens, integer=True, low=1, unit=" tokens")
        need("max_parallel_tools", self.max_parallel_tools, integer=True, low=1)
        need("tool_timeout_s", self.tool_timeout_s, integer=False, low=0, above=True,
             optional=True, high=86_400 * 365, unit=" seconds")
        need("tool_retries", self.tool_retries, integer=True, low=0)
        need("model_retries", self.model_retries, integer=True, low=0)
        need("compact_share", self.compact_share, integer=False, low=0, above=True,
             optional=True, high=0.999999)
        need("compact_keep_turns", self.compact_keep_turns, integer=True, low=1)
        need("output_retries", self.output_retries, integer=True, low=0)
        for name in ("input_per_mtok", "output_per_mtok", "cache_write_multiplier",
                     "cache_read_multiplier"):
            need(f"prices.{name}", getattr(self.prices, name), integer=False, low=0,
                 unit=" (USD per million tokens)" if name.endswith("mtok") else "")
        if self.budget_check not in ("after", "before"):
            problems.append(f"budget_check must be 'after' or 'before' "
                            f"(got {self.budget_check!r})")
        if problems:
            raise ValueError("AgentConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """Every setting but the clock and sleep, JSON-ready (for traces and checkpoints)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in _CALLABLES}
        d["prices"] = asdict(self.prices)
        d["retry"] = asdict(self.retry)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentConfig:
        """Inverse of :meth:`to_dict`; ``ValueError`` names an unknown setting."""
        known = set(cls.__dataclass_fields__) - _CALLABLES
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"AgentConfig: unknown settings {sorted(unknown)}")
        return cls(**d)


@dataclass
class Step:
    """One model call and what followed it.

    ``index`` counts model calls from 1. ``usage`` is this call's usage, ``total_usage``
    and ``cost_usd`` the run's running totals after it (tokens; USD). ``prompt_estimate`` is
    the harness's estimate of the prompt it sent (tokens, characters/4). ``executions`` are
    the tool calls of this reply in request order, including any the run did not run
    (``error_kind == "not_run"``). ``model_latency_s`` is wall seconds in the model call.
    ``model_retries`` records the failed attempts of this model call that were retried
    (see :func:`~primer.agents.production.call_model_with_retries`); their reported usage is
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


@dataclass
class Stop:
    """A check's verdict: the cause and a one-sentence detail of what fired."""

    cause: StopCause
    detail: str


@dataclass
class AgentResult:
    """The outcome of a run.

    ``final_text`` is the model's answer only when the run ended with ``end_turn``; on any
    other stop it is ``None``, so a limit is never passed off as an answer. ``stop_cause``
    names the exit, ``stop_detail`` says what fired, ``summary`` says what the run finished
    and why it stopped. ``usage`` and ``cost_usd`` are totals (tokens; USD). ``messages``
    is the full message list; on every stop but ``awaiting_approval`` each ``tool_use`` in
    it has exactly one ``tool_result``. ``pending`` holds tool calls awaiting approval.
    ``checkpoint`` is the path of the run's checkpoint file, or ``None`` if none was written.
    """

    final_text: str | None
    stop_cause: StopCause
    steps: list[Step]
    usage: Usage
    cost_usd: float
    messages: list[Message]
    summary: str
    stop_detail: str = ""
    pending: list[Block] = field(default_factory=list)
    checkpoint: str | None = None
    output: Any = None  #: the validated ``output_model`` instance, when one was asked for

    @property
    def executions(self) -> list[ToolExecution]:
        """Every tool call of the run, in order."""
        return [e for s in self.steps for e in s.executions]

    def rows(self) -> list[dict[str, Any]]:
        """The trace as one dict per step (for tables and tests)."""
        return [_step_row(s) for s in self.steps]

    def table(self, width: int = 60) -> str:
        """The trace as a fixed-width text table, one row per step, then the stop cause."""
        return format_trace_table(self.rows(), width=width) + (
            f"\nstop cause: {self.stop_cause.value}\n{self.summary}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"final_text": self.final_text, "stop_cause": self.stop_cause.value,
                "stop_detail": self.stop_detail, "summary": self.summary,
                "usage": self.usage.to_dict(), "cost_usd": self.cost_usd,
                "steps": [s.to_dict() for s in self.steps], "messages": self.messages,
                "pending": self.pending, "checkpoint": self.checkpoint}


EventSink = Callable[[str, dict[str, Any]], None]


@dataclass
class RunState:
    """Everything a run carries between steps, kept incrementally.

    ``prompt_estimate`` is the running characters/4 estimate of system prompt + tool
    definitions + messages (updated per appended message, never re-scanned).
    """

    config: AgentConfig
    system: str
    messages: list[Message]
    tool_defs: list[dict[str, Any]]
    prompt_estimate: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    steps: list[Step] = field(default_factory=list)
    repeat_counts: Counter[str] = field(default_factory=Counter)
    recent_errors: deque[bool] = field(default_factory=deque)
    started_at: float = 0.0
    on_event: EventSink | None = None
    checkpoint: Any = None  #: a :class:`~primer.agents.checkpoint.Checkpoint`, or None
    hooks: list[Any] = field(default_factory=list)  #: :class:`~primer.agents.hooks.Hooks`
    output_model: Any = None  #: a pydantic model class the final answer must satisfy
    output_fixes: int = 0  #: corrective turns used so far
    output: Any = None  #: the validated final answer
    compactions: int = 0  #: times older turns were summarised
    tool_use_ids: set[str] = field(default_factory=set)  #: every tool_use id of the run

    @property
    def model_calls(self) -> int:
        return len(self.steps)

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
        if self.on_event is not None:
            self.on_event(kind, data)


# ---------------------------------------------------------------- checks before a call

def check_wall_clock(state: RunState) -> Stop | None:
    """Stop when the run has used its ``wall_clock_s`` seconds (checked before each call)."""
    limit = state.config.wall_clock_s
    if limit is not None and state.config.clock() - state.started_at >= limit:
        return Stop(StopCause.WALL_CLOCK, f"the wall-clock limit of {limit:g} s passed "
                                          f"before model call {state.model_calls + 1}")
    return None


def check_context(state: RunState) -> Stop | None:
    """Stop before a call whose prompt passes ``context_stop_share`` of the window."""
    c = state.config
    limit = int(c.context_window * c.context_stop_share)
    if state.prompt_estimate > limit:
        return Stop(StopCause.CONTEXT_WINDOW,
                    f"the prompt for model call {state.model_calls + 1} is about "
                    f"{state.prompt_estimate:,} tokens, past {c.context_stop_share:.0%} of "
                    f"the {c.context_window:,}-token window ({limit:,})")
    return None


def check_budgets_before_call(state: RunState, llm: LLM | None = None) -> Stop | None:
    """In ``"before"`` mode, stop before a call that could take a budget past its limit.

    The worst case of the next call is the prompt's size plus ``max_tokens`` of output; if
    the running total plus that would cross the budget, the call is not made. The prompt's
    size is the running characters/4 estimate, or its exact count when ``llm`` offers one
    (an ``exact_count`` attribute that is true and a ``count_tokens(*, system, messages,
    tools)`` method, as :class:`~primer.agents.claude.ClaudeLLM` does); if counting fails
    the estimate is used.
    """
    c = state.config
    if c.budget_check != "before" or (c.token_budget is None and c.cost_budget_usd is None):
        return None
    prompt, how = state.prompt_estimate, "about"
    if llm is not None and getattr(llm, "exact_count", False):
        try:
            prompt = int(llm.count_tokens(system=state.system,  # type: ignore[attr-defined]
                                          messages=state.messages, tools=state.tool_defs))
            how = "exactly"
        except Exception:  # noqa: BLE001 - counting is an optimisation; fall back
            prompt = state.prompt_estimate
    worst = Usage(prompt, c.max_tokens)
    n = state.model_calls + 1
    worst_total = state.usage.total_tokens + worst.total_tokens
    if c.token_budget is not None and worst_total > c.token_budget:
        return Stop(StopCause.TOKEN_BUDGET,
                    f"model call {n} could take the run to {worst_total:,} "
                    f"tokens (prompt {how} {worst.input_tokens:,} + up to {c.max_tokens:,} "
                    f"output), past the {c.token_budget:,}-token budget; "
                    f"{state.usage.total_tokens:,} used")
    if c.cost_budget_usd is not None:
        # the prompt may be billed as a cache write, at a premium over the plain input price
        as_cache_write = Usage(0, c.max_tokens, cache_creation_input_tokens=prompt)
        worst_cost = state.cost_usd + max(cost_usd(worst, c.prices),
                                          cost_usd(as_cache_write, c.prices))
        if worst_cost > c.cost_budget_usd:
            return Stop(StopCause.COST_BUDGET,
                        f"model call {n} could take the run to {worst_cost:.4f} USD, past "
                        f"the {c.cost_budget_usd:.4f} USD budget; {state.cost_usd:.4f} spent")
    return None


# ---------------------------------------------------------------- checks after a reply

_CUT_OFF = {"max_tokens": StopCause.MAX_TOKENS, "refusal": StopCause.REFUSAL,
            "model_context_window_exceeded": StopCause.CONTEXT_WINDOW}


def check_stop_reason(state: RunState, reply: Reply) -> Stop | None:
    """The model's own stop reason, checked first.

    ``end_turn`` (or ``stop_sequence``, or a ``tool_use`` reply without a tool call) with no
    tool call ends the run with the answer. ``max_tokens`` ends it without running anything
    in the cut-off reply. ``refusal`` ends it without treating the content as an answer.
    ``pause_turn`` and replies with tool calls continue.
    """
    n = state.model_calls
    if reply.stop_reason not in STOP_REASONS:
        calls = len(reply.tool_uses)
        return Stop(StopCause.MODEL_ERROR,
                    f"reply {n} has an unknown stop_reason {safe_str(reply.stop_reason)!r}; a "
                    f"model adapter must map it to one of {', '.join(STOP_REASONS)}"
                    + (f"; its {calls} tool call{'s' if calls > 1 else ''} did not run"
                       if calls else ""))
    if reply.stop_reason in _CUT_OFF:
        cause = _CUT_OFF[reply.stop_reason]
        calls = len(reply.tool_uses)
        detail = {
            StopCause.MAX_TOKENS: f"reply {n} was cut off at max_tokens "
                                  f"({state.config.max_tokens:,})",
            StopCause.REFUSAL: f"the model refused on call {n}",
            StopCause.CONTEXT_WINDOW: f"the model reported its context window exceeded "
                                      f"on call {n}",
        }[cause]
        if calls:
            detail += f"; its {calls} tool call{'s' if calls > 1 else ''} did not run"
        return Stop(cause, detail)
    if reply.stop_reason == "pause_turn" or reply.tool_uses:
        return None
    return Stop(StopCause.END_TURN, f"the model answered on call {n}")


def check_budgets(state: RunState, reply: Reply) -> Stop | None:
    """Stop at the first call whose reported usage takes a running total past its budget."""
    c = state.config
    n = state.model_calls
    if c.token_budget is not None and state.usage.total_tokens > c.token_budget:
        return Stop(StopCause.TOKEN_BUDGET,
                    f"call {n} took the run to {state.usage.total_tokens:,} tokens, past the "
                    f"{c.token_budget:,}-token budget")
    if c.cost_budget_usd is not None and state.cost_usd > c.cost_budget_usd:
        return Stop(StopCause.COST_BUDGET,
                    f"call {n} took the run to {state.cost_usd:.4f} USD, past the "
                    f"{c.cost_budget_usd:.4f} USD budget")
    return None


def check_handoff(state: RunState, reply: Reply,
                  registry: ToolRegistry | None = None) -> Stop | None:
    """Stop with ``handoff`` when the model called ``handoff_to_human``; log its reason.

    With ``registry``, only the built-in hand-off tool counts: when it was not offered
    (``offer_handoff=False``), or a user's own tool has that name, the call is an ordinary
    tool call (an unknown tool, or the user's tool).
    """
    if registry is not None and registry.get(HANDOFF_TOOL_NAME) is not handoff_tool():
        return None
    for block in reply.tool_uses:
        if block.get("name") == HANDOFF_TOOL_NAME:
            args = block.get("input")
            reason = args.get("reason") if isinstance(args, dict) else None
            return Stop(StopCause.HANDOFF,
                        f"the model handed the task to a person on call {state.model_calls}: "
                        f"{reason or '(no reason given)'}")
    return None


def _canonical_value(value: Any) -> Any:
    """JSON-equal values made identical: 1.0 becomes 1 (JSON Schema treats them as equal)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical_value(v) for v in value]
    return value


def canonical_call(block: Block) -> str:
    """A key for loop detection: tool name + input as JSON with sorted keys (1.0 as 1)."""
    try:
        args = json.dumps(_canonical_value(block.get("input")), sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        args = repr(block.get("input"))
    return f"{block.get('name')}:{args}"


def check_repeats(state: RunState, reply: Reply) -> Stop | None:
    """Count each requested call; stop when one reaches ``repeat_threshold`` identical requests."""
    threshold = state.config.repeat_threshold
    if threshold is None:
        return None
    for block in reply.tool_uses:
        key = canonical_call(block)
        state.repeat_counts[key] += 1
        if state.repeat_counts[key] >= threshold:
            return Stop(StopCause.LOOP_DETECTED,
                        f"{block.get('name')} was requested with the same input "
                        f"{state.repeat_counts[key]} times (threshold {threshold})")
    return None


def check_approval(state: RunState, reply: Reply, registry: ToolRegistry) -> Stop | None:
    """Pause with ``awaiting_approval`` when a requested tool is marked ``needs_approval``."""
    waiting = [b for b in reply.tool_uses
               if (t := registry.get(b.get("name"))) is not None and t.needs_approval]
    if waiting:
        names = ", ".join(sorted({str(b.get("name")) for b in waiting}))
        return Stop(StopCause.AWAITING_APPROVAL,
                    f"call {state.model_calls} asks for {names}, which needs a person's "
                    f"approval")
    return None


def check_step_limit(state: RunState, reply: Reply | None = None) -> Stop | None:
    """Stop when the model has used its last allowed call and still asks for tools.

    Tools requested on the last step are not run: no model call would read their results.
    """
    if state.model_calls >= state.config.max_steps:
        return Stop(StopCause.MAX_STEPS,
                    f"the step limit of {state.config.max_steps} model calls was reached")
    return None


def _no_call_left(state: RunState) -> Stop | None:
    """The step limit before a call: :func:`check_step_limit` when no model call is left.

    (Not named ``check_*``: the figures place each check where it first fires after a reply.)
    """
    return check_step_limit(state)


def check_no_progress(state: RunState) -> Stop | None:
    """Stop when the last ``no_progress_window`` tool results were all errors."""
    n = state.config.no_progress_window
    if n is not None and len(state.recent_errors) == n and all(state.recent_errors):
        return Stop(StopCause.NO_PROGRESS, f"the last {n} tool results were all errors")
    return None


def check_budgets_after_tools(state: RunState) -> Stop | None:
    """Stop when models run inside the last reply's tools (sub-agents) crossed a budget.

    A sub-agent's usage joins the run's totals when its result is recorded, so a child can
    spend the parent's budget; this check stops the parent before its next call.
    """
    spent = [e.name for e in state.steps[-1].executions if e.usage is not None]
    if not spent:
        return None
    stop = check_budgets(state, state.steps[-1].reply)
    if stop is not None and stop.cause in (StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET):
        names = ", ".join(sorted(set(spent)))
        n = state.model_calls
        stop.detail = stop.detail.replace(f"call {n} took", f"the tools of call {n} ({names}) "
                                                            f"took", 1)
    return stop


def check_output(state: RunState, reply: Reply) -> Stop | None:
    """Validate a final answer against ``state.output_model`` (a pydantic model class).

    Returns the ``end_turn`` stop (and sets ``state.output``) when the reply's text is JSON
    the model accepts. Otherwise, while ``config.output_retries`` corrective turns remain and
    a model call is left, appends a user message naming every failing field with the expected
    JSON Schema and returns ``None`` (the loop asks again); else returns an
    ``invalid_output`` stop, so a failing answer never becomes ``final_text``.
    """
    import pydantic

    n = state.model_calls
    try:  # strict: a "1" where the model says int is a failure, not a silent conversion
        state.output = state.output_model.model_validate_json(_json_text(reply.text),
                                                              strict=True)
        return Stop(StopCause.END_TURN, f"the model answered on call {n}; the answer passed "
                                        f"{state.output_model.__name__}")
    except pydantic.ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(answer)'}: {err['msg']}"
                             for err in e.errors(include_url=False))
    except Exception as e:  # noqa: BLE001 - a validator that raises is a failed check
        problems = f"the check raised {type(e).__name__}: {safe_str(e)}"
    name = state.output_model.__name__
    over = check_budgets(state, reply)  # no corrective turn once a budget is spent
    if over is not None:
        state.emit("output_invalid", step=n, problems=problems, corrective_turn=False)
        over.detail += f"; the answer had also failed {name}: {problems}"
        return over
    if state.output_fixes < state.config.output_retries and n < state.config.max_steps:
        state.output_fixes += 1
        schema = json.dumps(state.output_model.model_json_schema(), separators=(",", ":"))
        state.append(user_message(
            f"Your final answer does not match {name}: {problems}. Reply with only a JSON "
            f"object matching this JSON Schema: {schema}"))
        state.emit("output_invalid", step=n, problems=problems, corrective_turn=True)
        return None
    state.emit("output_invalid", step=n, problems=problems, corrective_turn=False)
    return Stop(StopCause.INVALID_OUTPUT,
                f"the answer on call {n} failed {name} after {state.output_fixes} corrective "
                f"turn{'s' if state.output_fixes != 1 else ''}: {problems}")


def _json_text(text: str) -> str:
    """The JSON of an answer: the text itself, or the body of one ```json fenced block."""
    t = text.strip()
    if t.startswith("```") and t.endswith("```"):
        t = t[3:-3]
        t = t[4:] if t.startswith("json") else t
    return t.strip()


# ---------------------------------------------------------------- the loop

def run_agent(llm: LLM, task: str, tools: ToolRegistry | Iterable[Tool] = (), *,
              system: str = "", config: AgentConfig | None = None,
              on_event: EventSink | None = None, trace: str | os.PathLike[str] | None = None,
              hooks: Any = None, output_model: Any = None,
              scenario: str | None = None) -> AgentResult:
    """Run the agent loop on ``task`` until one of its exits fires.

    ``llm`` is any :class:`~primer.agents.llm.LLM`; ``tools`` a registry or a list of tools
    (the allow-list); ``system`` the system prompt; ``config`` every limit and price.
    ``on_event(kind, data)``, if given, is called as the run goes (``run_start``,
    ``model_call``, ``tool_execution``, ``stop``). ``trace``, a file path, records every
    event there as JSON Lines while the run goes (see :mod:`primer.agents.trace`).
    ``hooks``, a :class:`~primer.agents.hooks.Hooks` or a list of them, run before and after
    each tool call and after each model reply (see :mod:`primer.agents.hooks`).
    ``output_model``, a pydantic model class, is the shape the final answer must have (JSON
    text); an answer that fails gets ``config.output_retries`` corrective turns, then the run
    stops with ``invalid_output`` and ``final_text`` is ``None``; on success
    ``AgentResult.output`` holds the validated instance. ``scenario``, the name of the demo
    the run belongs to, is recorded in its checkpoint (if one is written).

    Returns an :class:`AgentResult`; never raises for bad model output or failing tools.
    Exceptions from the model call end the run with ``model_error`` (work so far kept),
    except :class:`~primer.agents.llm.ScriptExhausted`, a bug in a script, which propagates.
    """
    config = config or AgentConfig()
    if trace is not None:
        from .trace import TraceWriter
        on_event = TraceWriter(trace, forward=on_event)
    registry = _registry_for_run(tools, config)
    state = RunState(config=config, system=system, messages=[], tool_defs=registry.definitions(),
                     recent_errors=deque(maxlen=config.no_progress_window or 1),
                     started_at=config.clock(), on_event=on_event,
                     hooks=as_hook_list(hooks), output_model=output_model)
    state.recount_prompt_estimate()
    if config.checkpoint_dir is not None:
        from .checkpoint import Checkpoint
        state.checkpoint = Checkpoint(Path(config.checkpoint_dir), scenario=scenario)
    state.emit("run_start", task=task, system=system, config=config.to_dict(),
               tools=state.tool_defs)
    state.append(user_message(task))
    return continue_run(llm, registry, state)


def continue_run(llm: LLM, registry: ToolRegistry, state: RunState) -> AgentResult:
    """The loop body from any state: call, check, run tools, repeat (see module docstring)."""
    while True:
        stop = _no_call_left(state)  # a pause_turn on the last call, or a resumed run
        if stop:
            return finish(state, stop, None)
        stop = check_wall_clock(state)
        if stop is None:
            compact_if_needed(state)  # summarise older turns past compact_share
            stop = check_context(state) or check_budgets_before_call(state, llm)
        if stop:
            return finish(state, stop, None)
        reply, stop = call_model(llm, state)
        if stop:
            return finish(state, stop, None)
        assert reply is not None
        run_after_reply(state, reply)
        stop = (check_stop_reason(state, reply) or check_budgets(state, reply)
                or check_handoff(state, reply, registry) or check_repeats(state, reply)
                or (check_step_limit(state, reply) if reply.tool_uses else None)
                or check_approval(state, reply, registry))
        if stop and stop.cause is StopCause.END_TURN and state.output_model is not None:
            stop = check_output(state, reply)
            if stop is None:  # a corrective turn was added; ask again
                continue
        if stop:
            if stop.cause is StopCause.AWAITING_APPROVAL and state.checkpoint is not None:
                return state.checkpoint.pause(registry, state, stop, reply)
            return finish(state, stop, reply)
        if reply.tool_uses:
            run_tools(registry, state, reply.tool_uses)
            stop = check_budgets_after_tools(state) or check_no_progress(state)
            if stop:
                return finish(state, stop, None)


def call_model(llm: LLM, state: RunState) -> tuple[Reply | None, Stop | None]:
    """Make one model call, record its reply and usage, and append it to the messages."""
    c = state.config
    prompt_estimate = state.prompt_estimate
    start = time.perf_counter()
    failed: list[dict[str, Any]] = []  # transient failures of this call, retried
    try:
        reply = call_model_with_retries(
            lambda: llm(system=state.system, messages=state.messages, tools=state.tool_defs,
                        max_tokens=c.max_tokens),
            retries=c.model_retries, policy=c.retry, sleep=c.sleep,
            key=f"model-call-{state.model_calls + 1}", failed=failed)
    except ScriptExhausted:
        raise
    except Exception as e:  # noqa: BLE001 - a failed call ends the run with its cause
        _count_failed_attempts(state, failed)
        what = (safe_str(e) if isinstance(e, ModelRetriesExhausted)
                else f"{type(e).__name__}: {safe_str(e)}")
        return None, Stop(StopCause.MODEL_ERROR, f"model call {state.model_calls + 1} failed: "
                                                 f"{what}")
    latency = time.perf_counter() - start
    _count_failed_attempts(state, failed)
    problem = reply_problem(reply)
    if problem:
        return None, Stop(StopCause.MODEL_ERROR,
                          f"model call {state.model_calls + 1} returned {problem}; nothing in "
                          f"it was acted on")
    usage = reply.usage if isinstance(reply.usage, Usage) else Usage.from_dict(reply.usage)
    content = reply.content if isinstance(reply.content, list | str) else [reply.content]
    reply = Reply(normalize_content(content, state.model_calls + 1, state.tool_use_ids),
                  reply.stop_reason, usage, reply.model)
    state.add_usage(reply.usage)
    step = Step(state.model_calls + 1, reply, reply.usage, state.usage, state.cost_usd,
                prompt_estimate, latency, model_retries=failed)
    state.steps.append(step)
    state.append(assistant_message(reply.content))
    if state.on_event is not None:  # building the event costs a dict per step: skip unread
        state.emit("model_call", step=step.index, prompt_estimate=prompt_estimate,
                   reply=reply.to_dict(), latency_s=latency)
    return reply, None


def reply_problem(reply: Any) -> str | None:
    """Why a model's return value cannot be acted on, or ``None`` when it can.

    A reply must be a :class:`Reply` whose ``content`` is a list of blocks, a string or one
    block (a dict), and whose ``usage`` is a :class:`Usage` or a usage dict: without usage
    the budgets could not be enforced.
    """
    if not isinstance(reply, Reply):
        return f"a {type(reply).__name__}, not a Reply (a model adapter must return one)"
    if not isinstance(reply.content, list | str | dict):
        return f"content of type {type(reply.content).__name__}, not a list of blocks"
    if isinstance(reply.usage, dict):
        try:
            Usage.from_dict(reply.usage)
        except (TypeError, ValueError):
            return f"an unreadable usage {safe_str(reply.usage)}"
    elif not isinstance(reply.usage, Usage):
        return (f"no usage (got {type(reply.usage).__name__}), so the run's budgets could not "
                f"be enforced")
    return None


def normalize_content(content: Any, call_no: int,
                      taken: set[str] | None = None) -> list[Block]:
    """Make a reply's content safe to act on without changing what the model said.

    A string becomes a text block; a non-dict block becomes a text block describing it; a
    ``tool_use`` without a string id, or with an id already used in this reply or (when
    ``taken``, the run's ids so far, is given) earlier in the run, gets a fresh id that
    collides with none of them, so every call is answered by exactly one ``tool_result`` and
    gets an idempotency key of its own. ``taken`` is updated with this reply's ids.
    """
    if isinstance(content, str):
        return [text_block(content)] if content else []
    taken = taken if taken is not None else set()
    present = {b.get("id") for b in content if isinstance(b, dict)
               and b.get("type") == "tool_use" and isinstance(b.get("id"), str)}
    out: list[Block] = []
    for k, block in enumerate(content, start=1):
        if not isinstance(block, dict):
            out.append(text_block(f"(unreadable content block: {safe_str(block)})"))
            continue
        if block.get("type") == "tool_use":
            call_id = block.get("id")
            if not isinstance(call_id, str) or not call_id or call_id in taken:
                call_id, j = f"toolu_fixed_{call_no:02d}_{k}", 1
                while call_id in taken or call_id in present:
                    call_id, j = f"toolu_fixed_{call_no:02d}_{k}_{j}", j + 1
            taken.add(call_id)
            block = tool_use_block(call_id, block.get("name"), block.get("input"))
        out.append(block)
    return out


def _count_failed_attempts(state: RunState, failed: list[dict[str, Any]]) -> None:
    """Add the reported usage of failed model attempts to the run's totals; emit each retry."""
    if failed:
        extra = failed_usage(failed)
        state.add_usage(extra)
        for record in failed:
            state.emit("model_retry", step=state.model_calls + 1, **record)


def run_tools(registry: ToolRegistry, state: RunState, tool_uses: list[Block]) -> None:
    """Run one reply's calls concurrently and append all results in one user message.

    Each call runs through a :class:`~primer.agents.production.ToolRunner` built from the
    config: a timeout per attempt and retries of transient errors. With a checkpoint, a reply
    holding a side-effecting call runs through it, so each such call is recorded as started
    (with its idempotency key) before it runs.
    """
    if state.checkpoint is not None and any(
            (t := registry.get(b.get("name"))) is not None and t.side_effecting
            for b in tool_uses):
        executions = state.checkpoint.run_reply(registry, state, tool_uses)
    else:
        executions = execute_tools(registry, tool_uses,
                                   max_workers=state.config.max_parallel_tools,
                                   run=tool_runner(registry, state))
    record_executions(state, executions)


def tool_runner(registry: ToolRegistry, state: RunState) -> Callable[[Block], ToolExecution]:
    """How one call of this run is executed: timeouts and retries from its config
    (:class:`~primer.agents.production.ToolRunner`), wrapped by its hooks, which may not
    turn a call into one of a tool that needs approval. Used by the loop and by checkpoints."""
    runner = ToolRunner.from_config(registry, state.config)
    return with_hooks(state.hooks, runner, registry) if state.hooks else runner


def record_executions(state: RunState, executions: list[ToolExecution]) -> None:
    """Add one reply's results to its step and the error window; append them as one message."""
    state.steps[-1].executions.extend(executions)
    account_executions(state, executions)
    state.append(user_message([e.result_block() for e in executions]))


def account_executions(state: RunState, executions: Iterable[ToolExecution]) -> None:
    """Count calls that just ran: usage of models inside them, the error window, and one
    ``tool_execution`` event each for the trace.

    Every path that runs a tool calls this exactly once per execution (the loop, and the
    checkpoint's pause and resume), so a trace lists every call that ran.
    """
    index = state.steps[-1].index
    for e in executions:
        if e.usage is not None:  # models that ran inside the tool (a sub-agent)
            state.add_usage(e.usage, e.cost_usd)
        state.recent_errors.append(e.is_error)
        if state.on_event is not None:
            state.emit("tool_execution", step=index, **e.to_dict())


def finish(state: RunState, stop: Stop, reply: Reply | None) -> AgentResult:
    """End the run: answer unrun tool calls (except when awaiting approval) and summarise."""
    pending: list[Block] = []
    if reply is not None and reply.tool_uses:
        if stop.cause is StopCause.AWAITING_APPROVAL:
            pending = (state.checkpoint.pending_blocks() if state.checkpoint is not None
                       else list(reply.tool_uses))
        else:
            not_run = [_not_run(b, stop) for b in reply.tool_uses]
            state.steps[-1].executions.extend(not_run)
            state.append(user_message([e.result_block() for e in not_run]))
    final = None
    if stop.cause is StopCause.END_TURN and reply is not None:
        final = reply.text
    result = AgentResult(final, stop.cause, state.steps, state.usage, state.cost_usd,
                         state.messages, summarize(state.steps, stop), stop.detail, pending,
                         output=state.output)
    if state.checkpoint is not None:
        result.checkpoint = state.checkpoint.record_stop(state, result)
    state.emit("stop", cause=stop.cause.value, detail=stop.detail, summary=result.summary,
               usage=state.usage.to_dict(), cost_usd=state.cost_usd, steps=state.model_calls)
    return result


def _not_run(block: Block, stop: Stop) -> ToolExecution:
    if stop.cause is StopCause.HANDOFF and block.get("name") == HANDOFF_TOOL_NAME:
        text = "Handed off to a person; the run has ended."
    else:
        text = f"Not run: the run stopped ({stop.cause.value}: {stop.detail})."
    return ToolExecution(str(block.get("id")), str(block.get("name")), block.get("input"),
                         text, True, "not_run")


_HEADLINES = {
    StopCause.END_TURN: "Finished: {detail}",
    StopCause.MAX_TOKENS: "Stopped at max_tokens: {detail}",
    StopCause.REFUSAL: "Stopped on a refusal: {detail}",
    StopCause.TOKEN_BUDGET: "Stopped at the token budget: {detail}",
    StopCause.COST_BUDGET: "Stopped at the dollar budget: {detail}",
    StopCause.HANDOFF: "Handed off: {detail}",
    StopCause.LOOP_DETECTED: "Stopped on a loop: {detail}",
    StopCause.MAX_STEPS: "Stopped at the step limit after {steps} model calls",
    StopCause.WALL_CLOCK: "Stopped at the wall clock: {detail}",
    StopCause.NO_PROGRESS: "Stopped for lack of progress: {detail}",
    StopCause.CONTEXT_WINDOW: "Stopped at the context window: {detail}",
    StopCause.AWAITING_APPROVAL: "Paused for approval: {detail}",
    StopCause.MODEL_ERROR: "Stopped on a model error: {detail}",
    StopCause.INVALID_OUTPUT: "Stopped on an invalid final answer: {detail}",
}


def summarize(steps: list[Step], stop: Stop) -> str:
    """One or two sentences: why the run stopped, and which tool calls succeeded or not.

    For example: "Stopped at the step limit after 4 model calls. Succeeded: none. Failed:
    get_order ×4."
    """
    ok: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    not_run: Counter[str] = Counter()
    for s in steps:
        for e in s.executions:
            (not_run if e.error_kind == "not_run" else failed if e.is_error else ok)[e.name] += 1
    head = _HEADLINES[stop.cause].format(detail=stop.detail, steps=len(steps))

    def names(c: Counter[str]) -> str:
        return ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in c.items()) or "none"

    parts = [f"Tool calls succeeded: {names(ok)}"]
    if failed:
        parts.append(f"failed: {names(failed)}")
    if not_run:
        parts.append(f"not run: {names(not_run)}")
    return f"{head.rstrip('.')}. {'; '.join(parts)}."


def call_cells(tool_uses: list[Block], ran: list[dict[str, Any]],
               unrun: str = "awaiting approval") -> tuple[str, str]:
    """The "tool calls" and "results" cells of one table row (see :func:`format_trace_table`).

    ``tool_uses`` are the reply's calls; ``ran`` the results it got, as dicts with
    ``tool_use_id``, ``name``, ``input``, ``content`` and ``is_error`` (a
    :class:`ToolExecution`'s ``to_dict()``, or a trace's ``tool_execution`` event). A
    requested call with no result is listed in request order as ``[unrun] name(input)`` (the
    mark first, so a cut cell still shows it), with ``unrun`` as its result: only a pause
    for approval leaves calls unanswered (every other stop answers them with ``not_run``
    results, see :func:`finish`).
    """
    def result(x: dict[str, Any]) -> str:
        return ("error: " if x["is_error"] else "") + str(x["content"])

    by_id = {x["tool_use_id"]: x for x in ran}
    if all(b.get("id") in by_id for b in tool_uses):
        return ("; ".join(f"{x['name']}({compact_json(x['input'])})" for x in ran) or "-",
                "; ".join(map(result, ran)))
    calls = "; ".join(("" if b.get("id") in by_id else f"[{unrun}] ")
                      + f"{b.get('name')}({compact_json(b.get('input'))})" for b in tool_uses)
    results = "; ".join(result(by_id[b.get("id")]) if b.get("id") in by_id else unrun
                        for b in tool_uses)
    return calls, results


def _step_row(s: Step) -> dict[str, Any]:
    calls, results = call_cells(s.reply.tool_uses, [e.to_dict() for e in s.executions])
    if not s.executions:
        results = s.reply.text or "-"
    return {"step": s.index, "stop_reason": s.reply.stop_reason, "tool calls": calls,
            "results / answer": results, "in": s.usage.prompt_tokens,
            "out": s.usage.output_tokens, "total": s.total_usage.total_tokens,
            "cost USD": f"{s.cost_usd:.4f}"}


def format_trace_table(rows: list[dict[str, Any]], width: int = 60) -> str:
    """Rows of equal keys as a fixed-width text table; long cells are cut at ``width``."""
    if not rows:
        return "(no steps)"
    headers = list(rows[0])

    def cell(v: Any) -> str:
        text = " ".join(str(v).split())
        return text if len(text) <= width else text[: width - 1] + "…"

    cells = [[cell(r[h]) for h in headers] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in cells]
    return "\n".join([line.rstrip(), "  ".join("-" * w for w in widths), *body])


def _registry_for_run(tools: ToolRegistry | Iterable[Tool], config: AgentConfig) -> ToolRegistry:
    base = list(tools)
    if config.offer_handoff and all(t.name != HANDOFF_TOOL_NAME for t in base):
        base.append(handoff_tool())
    return ToolRegistry(base)
