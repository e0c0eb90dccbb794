"""Every exit of the loop: one small check each, and the order the loop makes them, as data.

The model is stateless and cannot stop itself; the harness owns every exit. Each check is
``check(state) -> Stop | None``: it reads the run's state (the last reply is
``state.last_reply``) and returns a :class:`~primer.loop.state.Stop` when its exit fires.
``check.causes`` lists the stop causes it can return, so figures and lessons can show the exits
without reading source. One turn: :data:`BEFORE_CALL`, compaction, :data:`BEFORE_SEND`, the
model call, :data:`AFTER_REPLY` (then :func:`check_output` when the reply ended the turn and
the run asked for a shape), the tools, :data:`AFTER_TOOLS`; :data:`ORDER` lists them by phase.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from .messages import Message, user_message
from .model import STOP_REASONS, Prices, Reply, Usage, cost_usd
from .state import (
    HANDOFF_TOOL_NAME,
    RunState,
    Stop,
    StopCause,
    canonical_call,
    handoff_tool,
    prompt_size_text,
    prompt_tokens,
    repeat_key,
)
from .text import safe_str


class Check(Protocol):
    """One exit: ``check(state) -> Stop | None``; ``causes`` are the stop causes it returns."""

    causes: tuple[StopCause, ...]
    __name__: str

    def __call__(self, state: RunState) -> Stop | None: ...


R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Marked(Protocol[R_co]):
    """A function of the state marked with its stop causes (a :class:`Check`, or the output
    step)."""

    causes: tuple[StopCause, ...]
    __name__: str

    def __call__(self, state: RunState) -> R_co: ...


def stops(*causes: StopCause) -> Callable[[Callable[[RunState], R]], Marked[R]]:
    """Mark a check (or the output step) with the stop causes it can return."""
    def mark(fn: Callable[[RunState], R]) -> Marked[R]:
        fn.causes = causes  # type: ignore[attr-defined]
        return cast(Marked[R], fn)
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
    Checked before each call, and after a reply that still asks for tools: those tools never
    run, as no model call would read their results."""
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
    """Stop when the caller's cancel signal is set, read before each model call.
    (The steps read it before each tool call and while one runs, too.)
    Calls of the last reply that had not started got ``not_run`` results and those running
    ``cancelled`` ones, so every ``tool_use`` is answered and the run can be continued later."""
    cancel = state.inputs.cancel
    if cancel is not None and cancel.is_set():
        kinds = [e.error_kind for e in state.steps[-1].executions] if state.steps else []
        unrun, stopped, n = kinds.count("not_run"), kinds.count("cancelled"), state.model_calls
        return Stop(StopCause.CANCELLED,
                    f"the run was cancelled before model call {n + 1}"
                    + (f"; {stopped} tool call{'s' if stopped > 1 else ''} of call {n} "
                       f"{'were' if stopped > 1 else 'was'} cancelled while running"
                       if stopped else "")
                    + (f"; {unrun} tool call{'s' if unrun > 1 else ''} of call "
                       f"{n} had not started and did not run" if unrun else ""))
    return None


@stops(StopCause.CONTEXT_WINDOW)
def check_context(state: RunState) -> Stop | None:
    """Stop before a call whose prompt passes context_stop_share of the window.
    The prompt's size is :func:`~primer.loop.state.prompt_tokens`."""
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
    The worst case is the prompt plus ``max_tokens`` of output. The prompt is the larger of
    :func:`~primer.loop.state.prompt_tokens` (built on the reported usage) and the run's own
    characters/4 estimate of the whole prompt, so a provider that under-reports its usage
    cannot let a call through; or the exact count of a model with a true ``exact_count``
    and ``count_tokens(*, system, messages, tools)`` (as
    :class:`~primer.providers.claude.ClaudeLLM`), the larger figure if counting fails.
    With ``wrap_up`` on, the worst case also keeps room for a wrap-up after the call: this
    prompt and ``max_tokens`` in, ``wrap_up_max_tokens`` out."""
    c = state.config
    if c.budget_check != "before" or (c.token_budget is None and c.cost_budget_usd is None):
        return None
    prompt, how = largest_prompt(state), "about"
    llm = state.inputs.llm
    if getattr(llm, "exact_count", False):
        try:
            prompt = int(llm.count_tokens(  # type: ignore[attr-defined]
                system=state.inputs.system, messages=state.messages,
                tools=state.inputs.tool_defs))
            how = "exactly"
        except Exception:  # noqa: BLE001 - counting is an optimisation; fall back
            pass
    worst = Usage(prompt, c.max_tokens)
    # with wrap_up on, room kept for a wrap-up after this call: this prompt and this reply
    # in, wrap_up_max_tokens out (checked again before the wrap-up: wrap_up_room)
    reserve = Usage(prompt + c.max_tokens, c.wrap_up_max_tokens) if c.wrap_up else Usage()
    n = state.model_calls + 1
    worst_total = state.usage.total_tokens + worst.total_tokens + reserve.total_tokens
    if c.token_budget is not None and worst_total > c.token_budget:
        return Stop(StopCause.TOKEN_BUDGET,
                    f"model call {n} could take the run to {worst_total:,} "
                    f"tokens (prompt {how} {worst.input_tokens:,} + up to {c.max_tokens:,} "
                    f"output" + (f" + {reserve.total_tokens:,} kept for a wrap-up"
                                 if c.wrap_up else "") +
                    f"), past the {c.token_budget:,}-token budget; "
                    f"{state.usage.total_tokens:,} used")
    if c.cost_budget_usd is not None:
        worst_cost = state.cost_usd + worst_cost_usd(worst, c.prices) \
            + worst_cost_usd(reserve, c.prices)
        if worst_cost > c.cost_budget_usd:
            return Stop(StopCause.COST_BUDGET,
                        f"model call {n} could take the run to {worst_cost:.4f} USD, past "
                        f"the {c.cost_budget_usd:.4f} USD budget; {state.cost_usd:.4f} spent")
    return None


def largest_prompt(state: RunState) -> int:
    """The next prompt's tokens as the larger of :func:`~primer.loop.state.prompt_tokens`
    (built on the reported usage) and the run's characters/4 estimate, so a provider that
    under-reports its usage cannot let a call through."""
    return max(prompt_tokens(state), state.prompt_estimate)


def worst_cost_usd(usage: Usage, prices: Prices) -> float:
    """The most ``usage`` can cost (USD) at ``prices``: its prompt billed as plain input or
    as a cache write (at a premium), whichever costs more."""
    as_cache_write = Usage(0, usage.output_tokens,
                           cache_creation_input_tokens=usage.input_tokens)
    return max(cost_usd(usage, prices), cost_usd(as_cache_write, prices))


def wrap_up_room(state: RunState, note_tokens: int = 0) -> str | None:
    """Why a wrap-up call (:func:`~primer.loop.steps.wrap_up`) made now would not fit in what
    is left of the budgets, or ``None`` when it fits. Its worst case: the prompt as it stands
    (:func:`largest_prompt`) plus
    ``note_tokens``, and ``wrap_up_max_tokens`` of output, priced by :func:`worst_cost_usd`."""
    c = state.config
    worst = Usage(largest_prompt(state) + note_tokens, c.wrap_up_max_tokens)
    total = state.usage.total_tokens + worst.total_tokens
    if c.token_budget is not None and total > c.token_budget:
        return (f"it could take the run to {total:,} tokens, past the {c.token_budget:,}-token "
                f"budget ({state.usage.total_tokens:,} used)")
    cost = state.cost_usd + worst_cost_usd(worst, c.prices)
    if c.cost_budget_usd is not None and cost > c.cost_budget_usd:
        return (f"it could take the run to {cost:.4f} USD, past the {c.cost_budget_usd:.4f} "
                f"USD budget ({state.cost_usd:.4f} spent)")
    return None


# ---------------------------------------------------------------- after a reply

_KNOWN_STOP_REASONS = frozenset(STOP_REASONS)
_CUT_OFF = {"max_tokens": StopCause.MAX_TOKENS, "refusal": StopCause.REFUSAL,
            "model_context_window_exceeded": StopCause.CONTEXT_WINDOW}


_GOES_ON = frozenset({"pause_turn", "compaction"})


def _refusal_why(reply: Reply) -> str:
    """`` (category: cyber; explanation)`` from a refusal's ``stop_details``, or ``""``."""
    d = reply.stop_details or {}
    parts = [f"category: {d['category']}" if d.get("category") else "",
             str(d.get("explanation") or "")]
    return f" ({'; '.join(p for p in parts if p)})" if any(parts) else ""


def _calls_not_run(calls: int) -> str:
    return f"; its {calls} tool call{'s' if calls > 1 else ''} did not run" if calls else ""


@stops(StopCause.END_TURN, StopCause.MAX_TOKENS, StopCause.REFUSAL, StopCause.CONTEXT_WINDOW,
       StopCause.MODEL_ERROR)
def check_stop_reason(state: RunState) -> Stop | None:
    """The model's own stop reason, checked first.
    An unknown one is a model error; ``max_tokens`` ends the run running nothing of the cut-off
    reply; ``refusal`` ends it with no answer (the detail names the provider's category, if
    it gave one). ``pause_turn``, ``compaction`` (the server summarised older turns and paused;
    the summary block stays in the transcript) and replies with tool calls go on; any other
    reply (``end_turn``, ``stop_sequence``) ends the run with the answer."""
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
            StopCause.REFUSAL: f"the model refused on call {n}" + _refusal_why(reply),
            StopCause.CONTEXT_WINDOW: f"the model reported its context window exceeded "
                                      f"on call {n}",
        }[cause]
        return Stop(cause, detail + _calls_not_run(len(reply.tool_uses)))
    if reply.stop_reason in _GOES_ON or reply.tool_uses:
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
    Only the built-in tool counts: when it was not offered (``offer_handoff=False``), or a
    user's own tool has that name, the call is an ordinary tool call."""
    for block in state.last_reply.tool_uses:
        if block.get("name") == HANDOFF_TOOL_NAME:
            if state.inputs.registry.get(HANDOFF_TOOL_NAME) is not handoff_tool():
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
    step = state.steps[-1]
    for block in step.reply.tool_uses:
        key = repeat_key(block, step.refused) if step.refused else canonical_call(block)
        state.repeat_counts[key] += 1
        if state.repeat_counts[key] >= threshold:
            return Stop(StopCause.LOOP_DETECTED,
                        f"{block.get('name')} was requested with the same input "
                        f"{state.repeat_counts[key]} times (threshold {threshold})")
    return None


@stops(StopCause.AWAITING_APPROVAL)
def check_approval(state: RunState) -> Stop | None:
    """Pause with awaiting_approval when a requested call needs a person's approval.
    Which calls need it: :meth:`~primer.loop.state.Step.approval_reason` (never a refused
    one), asked once per call and kept on the step; the detail gives any reasons."""
    reasons: dict[str, str] = {}
    step, registry = state.steps[-1], state.inputs.registry
    for b in step.reply.tool_uses:
        t = registry.get(b.get("name"))
        if t is not None and t.needs_approval is not False:
            reason = step.approval_reason(registry, b)
            if reason is not None and reasons.get(t.name) in (None, ""):
                reasons[t.name] = reason
    if reasons:
        why = "; ".join(r for r in dict.fromkeys(reasons.values()) if r)
        return Stop(StopCause.AWAITING_APPROVAL,
                    f"call {state.model_calls} asks for {', '.join(sorted(reasons))}, which "
                    f"needs a person's approval" + (f" ({why})" if why else ""))
    return None


# ---------------------------------------------------------------- after the tools


@stops(StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET)
def check_budgets_after_tools(state: RunState) -> Stop | None:
    """Stop when models run inside the last reply's tools (sub-agents) crossed a budget.
    A child's usage joins the run's totals with its result, so it spends the parent's budget;
    this stops the parent before its next call."""
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
    """What :func:`check_output` decided about a final answer. Accept: ``stop`` is the
    ``end_turn`` stop (``state.output`` holds the answer). Retry: ``stop`` is ``None`` and
    ``corrective`` the user message the loop appends before calling again. Stop: an
    ``invalid_output`` stop, or a budget's when no corrective turn can be paid for."""

    stop: Stop | None
    corrective: Message | None = None


@stops(StopCause.END_TURN, StopCause.INVALID_OUTPUT, StopCause.TOKEN_BUDGET,
       StopCause.COST_BUDGET)
def check_output(state: RunState) -> OutputVerdict:
    """Check a final answer against the run's output_model (a pydantic model class).
    The text must be JSON it accepts, strictly (a ``"1"`` for an ``int`` fails; a
    ```` ```json ```` fence is read). A failing answer gets a corrective turn naming each bad
    field, with the JSON Schema, while ``config.output_retries``, a model call and the budgets
    allow; else the run stops, so it never becomes ``final_text``. Emits one
    ``output_invalid`` event per failing answer."""
    import pydantic  # (only a run with an output_model gets here)

    model = state.inputs.output_model
    assert model is not None, "check_output needs inputs.output_model"
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
ORDER: tuple[tuple[str, tuple[Marked[Any], ...]], ...] = (
    ("before the model call", BEFORE_CALL + BEFORE_SEND),
    ("after the model reply", AFTER_REPLY + (check_output,)),
    ("after the tools ran", AFTER_TOOLS),
)
