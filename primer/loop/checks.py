"""Every exit of the loop: one small check each, and the order the loop makes them, as data.

The model is stateless and cannot stop itself; the harness owns every exit. Each check has
one signature, ``check(state) -> Stop | None``: it reads the run's state (the last reply is
``state.last_reply``) and returns a :class:`~primer.loop.state.Stop` when its exit fires.
Each is marked with the stop causes it can return (``check.causes``), so figures and lessons
can show the exits without reading any source.

The loop makes them in this order (:data:`ORDER` lists the same tuples by phase):

* :data:`BEFORE_CALL` — the step limit, the wall clock, the caller's cancel signal; then
  older turns may be compacted;
* :data:`BEFORE_SEND` — the context window, and in ``budget_check="before"`` mode whether the
  call could overspend a budget;
* the model call;
* :data:`AFTER_REPLY` — the model's own ``stop_reason`` (``end_turn`` is done, ``max_tokens``
  means the reply was cut off so nothing in it runs, ``refusal``, the context window;
  ``pause_turn`` continues); the budgets; a hand-off to a person; loop detection; the step
  limit (tools asked for on the last allowed call never run: no call would read their
  results, so a run never pauses for a call it could not follow up); the approval gate;
* when the reply ended the turn and the run asked for a shape, :func:`validate_output`;
* the tools run, all results in one user message in request order;
* :data:`AFTER_TOOLS` — budgets spent by models inside the tools; no progress.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pydantic

from .config import AgentConfig
from .context import prompt_size_text, prompt_tokens
from .cost import cost_usd
from .messages import Message, user_message
from .model import STOP_REASONS, Usage
from .state import RunState, Stop, StopCause, canonical_call, repeat_key
from .text import safe_str
from .tools import Tool, ToolRegistry, call_needs_approval


class Check(Protocol):
    """One exit: ``check(state) -> Stop | None``; ``causes`` are the stop causes it returns."""

    causes: tuple[StopCause, ...]
    __name__: str

    def __call__(self, state: RunState) -> Stop | None: ...


F = TypeVar("F", bound=Callable[..., Any])


def stops(*causes: StopCause) -> Callable[[F], F]:
    """Mark a check (or the output step) with the stop causes it can return."""
    def mark(fn: F) -> F:
        fn.causes = causes  # type: ignore[attr-defined]
        return fn
    return mark


def first_stop(checks: Iterable[Check], state: RunState) -> Stop | None:
    """The first of ``checks`` (in order) that fires, or ``None`` when none does."""
    for check in checks:
        stop = check(state)
        if stop is not None:
            return stop
    return None


# ---------------------------------------------------------------- before a call


@stops(StopCause.MAX_STEPS)
def check_step_limit(state: RunState) -> Stop | None:
    """Stop when the run has made its last allowed model call.

    Checked before each call, and after a reply that still asks for tools: those tools are
    not run, because no model call would read their results.
    """
    if state.model_calls >= state.config.max_steps:
        n = state.config.max_steps
        return Stop(StopCause.MAX_STEPS,
                    f"the step limit of {n} model call{'s' if n != 1 else ''} was reached")
    return None


@stops(StopCause.WALL_CLOCK)
def check_wall_clock(state: RunState) -> Stop | None:
    """Stop when the run has used its wall_clock_s seconds (checked before each call)."""
    limit = state.config.wall_clock_s
    if limit is not None and state.config.clock() - state.started_at >= limit:
        return Stop(StopCause.WALL_CLOCK, f"the wall-clock limit of {limit:g} s passed "
                                          f"before model call {state.model_calls + 1}")
    return None


@stops(StopCause.CANCELLED)
def check_cancelled(state: RunState) -> Stop | None:
    """Stop when the caller's cancel signal is set (checked before each model call).

    A call of the last reply that had not started when the signal was set did not run: it
    was answered with a ``not_run`` result, so the run stops with every ``tool_use``
    answered and can be continued later.
    """
    cancel = state.cancel
    if cancel is not None and cancel.is_set():
        unrun = sum(e.error_kind == "not_run" for e in state.steps[-1].executions) \
            if state.steps else 0
        return Stop(StopCause.CANCELLED,
                    f"the run was cancelled before model call {state.model_calls + 1}"
                    + (f"; {unrun} tool call{'s' if unrun > 1 else ''} of call "
                       f"{state.model_calls} had not started and did not run" if unrun else ""))
    return None


@stops(StopCause.CONTEXT_WINDOW)
def check_context(state: RunState) -> Stop | None:
    """Stop before a call whose prompt passes context_stop_share of the window.

    The prompt's size is :func:`~primer.loop.context.prompt_tokens`: the last call's
    reported prompt plus the characters/4 estimate of what was added since.
    """
    c = state.config
    limit = int(c.context_window * c.context_stop_share)
    if prompt_tokens(state) > limit:
        return Stop(StopCause.CONTEXT_WINDOW,
                    f"the prompt for model call {state.model_calls + 1} is "
                    f"{prompt_size_text(state)}, past {c.context_stop_share:.0%} of "
                    f"the {c.context_window:,}-token window ({limit:,})")
    return None


@stops(StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET)
def check_budgets_before_call(state: RunState) -> Stop | None:
    """In "before" mode, stop before a call that could take a budget past its limit.

    The worst case of the next call is the prompt's size plus ``max_tokens`` of output; if
    the running total plus that would cross the budget, the call is not made. The prompt's
    size is :func:`~primer.loop.context.prompt_tokens` (the last call's reported prompt
    plus the estimate of what was added since), or its exact count when the model offers one
    (an ``exact_count`` attribute that is true and a ``count_tokens(*, system, messages,
    tools)`` method, as :class:`~primer.providers.claude.ClaudeLLM` does); if counting fails
    the estimate is used.
    """
    c = state.config
    if c.budget_check != "before" or (c.token_budget is None and c.cost_budget_usd is None):
        return None
    prompt, how = prompt_tokens(state), "about"
    if state.llm is not None and getattr(state.llm, "exact_count", False):
        try:
            prompt = int(state.llm.count_tokens(  # type: ignore[attr-defined]
                system=state.system, messages=state.messages, tools=state.tool_defs))
            how = "exactly"
        except Exception:  # noqa: BLE001 - counting is an optimisation; fall back
            prompt = prompt_tokens(state)
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


# ---------------------------------------------------------------- after a reply

_KNOWN_STOP_REASONS = frozenset(STOP_REASONS)
_CUT_OFF = {"max_tokens": StopCause.MAX_TOKENS, "refusal": StopCause.REFUSAL,
            "model_context_window_exceeded": StopCause.CONTEXT_WINDOW}


def _calls_not_run(calls: int) -> str:
    return f"; its {calls} tool call{'s' if calls > 1 else ''} did not run" if calls else ""


@stops(StopCause.END_TURN, StopCause.MAX_TOKENS, StopCause.REFUSAL, StopCause.CONTEXT_WINDOW,
       StopCause.MODEL_ERROR)
def check_stop_reason(state: RunState) -> Stop | None:
    """The model's own stop reason, checked first.

    ``end_turn`` (or ``stop_sequence``, or a ``tool_use`` reply without a tool call) with no
    tool call ends the run with the answer. ``max_tokens`` ends it without running anything
    in the cut-off reply. ``refusal`` ends it without treating the content as an answer. An
    unknown stop reason is a model error. ``pause_turn`` and replies with tool calls continue.
    """
    reply, n = state.last_reply, state.model_calls
    if reply.stop_reason not in _KNOWN_STOP_REASONS:
        return Stop(StopCause.MODEL_ERROR,
                    f"reply {n} has an unknown stop_reason {safe_str(reply.stop_reason)!r}; a "
                    f"model adapter must map it to one of {', '.join(STOP_REASONS)}"
                    + _calls_not_run(len(reply.tool_uses)))
    cause = _CUT_OFF.get(reply.stop_reason)
    if cause is not None:
        detail = {
            StopCause.MAX_TOKENS: f"reply {n} was cut off at max_tokens "
                                  f"({state.config.max_tokens:,})",
            StopCause.REFUSAL: f"the model refused on call {n}",
            StopCause.CONTEXT_WINDOW: f"the model reported its context window exceeded "
                                      f"on call {n}",
        }[cause]
        return Stop(cause, detail + _calls_not_run(len(reply.tool_uses)))
    if reply.stop_reason == "pause_turn" or reply.tool_uses:
        return None
    return Stop(StopCause.END_TURN, f"the model answered on call {n}")


@stops(StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET)
def check_budgets(state: RunState) -> Stop | None:
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


@stops(StopCause.HANDOFF)
def check_handoff(state: RunState) -> Stop | None:
    """Stop with handoff when the model called handoff_to_human; log its reason.

    Only the built-in hand-off tool counts: when it was not offered (``offer_handoff=False``),
    or a user's own tool has that name, the call is an ordinary tool call.
    """
    for block in state.last_reply.tool_uses:
        if block.get("name") == HANDOFF_TOOL_NAME:
            if state.registry.get(HANDOFF_TOOL_NAME) is not handoff_tool():
                return None
            args = block.get("input")
            reason = args.get("reason") if isinstance(args, dict) else None
            return Stop(StopCause.HANDOFF,
                        f"the model handed the task to a person on call {state.model_calls}: "
                        f"{reason or '(no reason given)'}")
    return None


@stops(StopCause.LOOP_DETECTED)
def check_repeats(state: RunState) -> Stop | None:
    """Count each requested call; stop when one reaches repeat_threshold identical requests."""
    threshold = state.config.repeat_threshold
    if threshold is None:
        return None
    reply = state.last_reply
    for block in reply.tool_uses:
        key = repeat_key(block, reply.refused) if reply.refused else canonical_call(block)
        state.repeat_counts[key] += 1
        if state.repeat_counts[key] >= threshold:
            return Stop(StopCause.LOOP_DETECTED,
                        f"{block.get('name')} was requested with the same input "
                        f"{state.repeat_counts[key]} times (threshold {threshold})")
    return None


@stops(StopCause.AWAITING_APPROVAL)
def check_approval(state: RunState) -> Stop | None:
    """Pause with awaiting_approval when a requested call needs a person's approval.

    A call needs it when its tool's ``needs_approval`` is true, or its predicate says so for
    this input; a call refused where the reply entered the loop never runs, so never waits.
    """
    names: set[str] = set()
    reply = state.last_reply
    for b in reply.tool_uses:
        t = state.registry.get(b.get("name"))
        if t is not None and t.needs_approval is not False \
                and call_needs_approval(state.registry, b, reply.refused):
            names.add(t.name)
    if names:
        return Stop(StopCause.AWAITING_APPROVAL,
                    f"call {state.model_calls} asks for {', '.join(sorted(names))}, which "
                    f"needs a person's approval")
    return None


# ---------------------------------------------------------------- after the tools


@stops(StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET)
def check_budgets_after_tools(state: RunState) -> Stop | None:
    """Stop when models run inside the last reply's tools (sub-agents) crossed a budget.

    A sub-agent's usage joins the run's totals when its result is recorded, so a child can
    spend the parent's budget; this check stops the parent before its next call.
    """
    executions = state.steps[-1].executions
    for e in executions:  # (a loop: cheaper than all() over a generator, every step)
        if e.usage is not None:
            break
    else:
        return None
    stop = check_budgets(state)
    if stop is not None:
        names = ", ".join(sorted({e.name for e in executions if e.usage is not None}))
        n = state.model_calls
        stop.detail = stop.detail.replace(f"call {n} took", f"the tools of call {n} ({names}) "
                                                            f"took", 1)
    return stop


@stops(StopCause.NO_PROGRESS)
def check_no_progress(state: RunState) -> Stop | None:
    """Stop when the last no_progress_window tool results were all errors."""
    n = state.config.no_progress_window
    if n is not None and len(state.recent_errors) == n and all(state.recent_errors):
        return Stop(StopCause.NO_PROGRESS, f"the last {n} tool results were all errors")
    return None


# ---------------------------------------------------------------- the final answer's shape


@dataclass
class OutputVerdict:
    """What :func:`validate_output` decided about a final answer.

    Accept: ``stop`` is the ``end_turn`` stop (``state.output`` holds the parsed answer).
    Retry: ``stop`` is ``None`` and ``corrective`` is the user message asking for a fixed
    answer; the loop appends it and calls the model again. Stop: ``stop`` is an
    ``invalid_output`` stop, or a budget's stop when no corrective turn can be paid for.
    """

    stop: Stop | None
    corrective: Message | None = None


@stops(StopCause.END_TURN, StopCause.INVALID_OUTPUT, StopCause.TOKEN_BUDGET,
       StopCause.COST_BUDGET)
def validate_output(state: RunState) -> OutputVerdict:
    """Check a final answer against the run's output_model (a pydantic model class).

    The reply's text must be JSON the model accepts (strict: a ``"1"`` where the model says
    ``int`` fails, nothing is converted; a ```` ```json ```` fence is read). A failing answer
    gets a corrective turn naming every failing field, with the expected JSON Schema, while
    ``config.output_retries`` remain, a model call is left and no budget is spent; else the
    run stops, so a failing answer never becomes ``final_text``. Emits one
    ``output_invalid`` event per failing answer.
    """
    model = state.output_model
    assert model is not None, "validate_output needs state.output_model"
    n = state.model_calls
    try:
        state.output = model.model_validate_json(_json_text(state.last_reply.text),
                                                 strict=True)
        return OutputVerdict(Stop(StopCause.END_TURN, f"the model answered on call {n}; the "
                                                      f"answer passed {model.__name__}"))
    except pydantic.ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(answer)'}: {err['msg']}"
                             for err in e.errors(include_url=False))
    except Exception as e:  # noqa: BLE001 - a validator that raises is a failed check
        problems = f"the check raised {type(e).__name__}: {safe_str(e)}"
    over = check_budgets(state)  # no corrective turn once a budget is spent
    if over is None and state.output_fixes < state.config.output_retries \
            and n < state.config.max_steps:
        state.output_fixes += 1
        state.emit("output_invalid", step=n, problems=problems, corrective_turn=True)
        schema = json.dumps(model.model_json_schema(), separators=(",", ":"))
        return OutputVerdict(None, user_message(
            f"Your final answer does not match {model.__name__}: {problems}. Reply with only a "
            f"JSON object matching this JSON Schema: {schema}"))
    state.emit("output_invalid", step=n, problems=problems, corrective_turn=False)
    if over is not None:
        over.detail += f"; the answer had also failed {model.__name__}: {problems}"
        return OutputVerdict(over)
    return OutputVerdict(Stop(
        StopCause.INVALID_OUTPUT,
        f"the answer on call {n} failed {model.__name__} after {state.output_fixes} corrective "
        f"turn{'s' if state.output_fixes != 1 else ''}: {problems}"))


def _json_text(text: str) -> str:
    """The JSON of an answer: the text itself, or the body of one ```json fenced block."""
    t = text.strip()
    if t.startswith("```") and t.endswith("```"):
        t = t[3:-3]
        t = t[4:] if t.startswith("json") else t
    return t.strip()


# ---------------------------------------------------------------- the order, as data

#: Checked before each model call, before anything else.
BEFORE_CALL: tuple[Check, ...] = (check_step_limit, check_wall_clock, check_cancelled)
#: Checked on the request about to be sent (after older turns may have been compacted).
BEFORE_SEND: tuple[Check, ...] = (check_context, check_budgets_before_call)
#: Checked on each model reply, before any of its tools run.
AFTER_REPLY: tuple[Check, ...] = (check_stop_reason, check_budgets, check_handoff,
                                  check_repeats, check_step_limit, check_approval)
#: Checked after a reply's tools ran and their results were appended.
AFTER_TOOLS: tuple[Check, ...] = (check_budgets_after_tools, check_no_progress)

#: One turn of the loop as figures and lessons show it: each phase with its exits in the
#: order they are made (the same tuples the loop runs, and the output step where it sits).
ORDER: tuple[tuple[str, tuple[Callable[..., Any], ...]], ...] = (
    ("before the model call", BEFORE_CALL + BEFORE_SEND),
    ("after the model reply", AFTER_REPLY + (validate_output,)),
    ("after the tools ran", AFTER_TOOLS),
)


# ---------------------------------------------------------------- the hand-off tool

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


def registry_for_run(tools: ToolRegistry | Iterable[Tool], config: AgentConfig) -> ToolRegistry:
    """The run's allow-list: ``tools``, plus the hand-off tool when ``offer_handoff`` is on
    and no tool of that name was given. Raises ``ValueError`` for two tools of one name."""
    base = list(tools)
    if config.offer_handoff and all(t.name != HANDOFF_TOOL_NAME for t in base):
        base.append(handoff_tool())
    return ToolRegistry(base)
