"""Hooks: your code at fixed points of the loop.

A larger harness lets its owner run code at three fixed points of every run, without
touching the loop:

* ``before_tool(call)``: before a tool runs. ``call`` is the ``tool_use`` block
  (``{"type", "id", "name", "input"}``). Return it unchanged (or ``None``) to let it run,
  return a changed block to run that instead (the ``id`` is kept, so the result still
  answers the model's call), or return :class:`Blocked` with a reason: the tool never runs and
  the model gets an error result saying why.
* ``after_tool(call, execution)``: after it ran. Return the
  :class:`~primer.loop.tools.ToolExecution` (or ``None``) to keep it, or a changed one
  (``dataclasses.replace(execution, content=...)``) to send the model something else.
* ``after_reply(reply)``: after each model reply, to log or count; its return value is
  ignored.

A hook that raises never crashes the run: in ``before_tool`` the call does not run and the
model gets an error result naming the hook; in ``after_tool`` the model gets an error result
saying the call ran but its result was withheld; in ``after_reply`` the failure is reported
as a ``hook_error`` event and the run goes on.

Where they sit: ``before_tool`` runs after the model asked and before anything else touches
the call, which is exactly where the registry's own checks sit (the allow-list, then the
``input_schema`` check). :class:`SchemaHook` is that check written as a hook, to show it.
Hooks wrap the whole tool call, retries and timeouts included: ``before_tool`` runs once per
call, not once per attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from primer.loop.messages import ToolUseBlock
from primer.loop.model import EventSink, Reply, estimate_tokens
from primer.loop.state import RunState
from primer.loop.tools import ErrorKind, ToolExecution, ToolRegistry


@dataclass(frozen=True)
class Blocked:
    """A ``before_tool`` verdict: do not run the call; tell the model ``reason``."""

    reason: str


BeforeTool = Callable[[ToolUseBlock], "ToolUseBlock | Blocked | None"]
AfterTool = Callable[[ToolUseBlock, ToolExecution], "ToolExecution | None"]
AfterReply = Callable[[Reply], Any]


class Hooks:
    """Code run at fixed points of a run; pass to ``run_agent(..., hooks=...)``.

    Either subclass and override :meth:`before_tool`, :meth:`after_tool` and
    :meth:`after_reply`, or pass plain functions: ``Hooks(before_tool=fn, name="audit")``.
    ``name`` appears in error results and events (default: the class name). Hooks in a list
    run in order; each ``before_tool`` sees the call as the previous one left it.
    """

    def __init__(self, *, before_tool: BeforeTool | None = None,
                 after_tool: AfterTool | None = None, after_reply: AfterReply | None = None,
                 name: str | None = None) -> None:
        self._before, self._after, self._reply = before_tool, after_tool, after_reply
        self.name = name or type(self).__name__

    def before_tool(self, call: ToolUseBlock) -> ToolUseBlock | Blocked | None:
        """Return the call (maybe changed), ``None`` for unchanged, or :class:`Blocked`."""
        return self._before(call) if self._before else None

    def after_tool(self, call: ToolUseBlock, execution: ToolExecution) -> ToolExecution | None:
        """Return the execution (maybe changed) or ``None`` for unchanged."""
        return self._after(call, execution) if self._after else None

    def after_reply(self, reply: Reply) -> None:
        """Observe one model reply (log, count); the return value is ignored."""
        if self._reply:
            self._reply(reply)

    def __repr__(self) -> str:
        return f"Hooks({self.name})"


def as_hook_list(hooks: Hooks | Iterable[Hooks] | None) -> list[Hooks]:
    """``None``, one :class:`Hooks` or several, as a list; ``TypeError`` for anything else."""
    if hooks is None:
        return []
    items = [hooks] if isinstance(hooks, Hooks) else list(hooks)
    for h in items:
        if not isinstance(h, Hooks):
            raise TypeError(f"hooks must be Hooks objects (got {type(h).__name__}); wrap "
                            f"functions as Hooks(before_tool=..., after_tool=...)")
    return items


def _error(call: ToolUseBlock, content: str, kind: ErrorKind) -> ToolExecution:
    return ToolExecution(str(call.get("id", "")), str(call.get("name")), call.get("input"),
                         content, True, kind)


def run_hooked(hooks: list[Hooks], run: Callable[[ToolUseBlock], ToolExecution],
               call: ToolUseBlock, registry: ToolRegistry | None = None) -> ToolExecution:
    """Run one call through ``before_tool`` hooks, ``run`` and ``after_tool`` hooks.

    Returns the execution the model will see. A :class:`Blocked` gives an error result with
    ``error_kind == "blocked"`` and the tool never runs; a hook that raises, or returns the
    wrong type, gives an error result with ``error_kind == "hook_error"``. With ``registry``,
    a hook that turns a call into a call of a tool that needs a person's approval, or changes
    its input into one that needs it (even a call a person approved: the approval was for the
    input they saw), is refused the same way. Never raises.
    """
    call, refused = before_tool_hooks(hooks, call, registry)
    if refused is not None:
        return refused
    return after_tool_hooks(hooks, call, run(call))


def before_tool_hooks(hooks: list[Hooks], call: ToolUseBlock,
                      registry: ToolRegistry | None = None
                      ) -> tuple[ToolUseBlock, ToolExecution | None]:
    """The first half of :func:`run_hooked`: ``(call as the hooks left it, None)``, or
    ``(call, error execution)`` when a hook blocked it, failed, or rerouted it to a gated tool.
    """
    original_id, original_name, original_input = call.get("id"), call.get("name"), call.get("input")
    for h in hooks:
        try:
            out = h.before_tool(call)
        except Exception as e:  # noqa: BLE001 - a failing hook becomes an error result
            return call, _error(call, f"The before_tool hook {h.name} failed "
                                      f"({type(e).__name__}: {e}); {call.get('name')} did not "
                                      f"run.", "hook_error")
        if isinstance(out, Blocked):
            return call, _error(call, f"Blocked by {h.name}: {out.reason} The call did not run.",
                                "blocked")
        if out is not None:
            if not (isinstance(out, dict) and out.get("type") == "tool_use"):
                return call, _error(call, f"The before_tool hook {h.name} returned "
                                          f"{type(out).__name__}, not a tool_use block or "
                                          f"Blocked; {call.get('name')} did not run.",
                                    "hook_error")
            call = {**out, "id": original_id}
    if call.get("name") == original_name and call.get("input") == original_input:
        return call, None  # unchanged: the gate's answer for it stands (asked once, by the loop)
    target = registry.get(call.get("name")) if registry is not None else None
    if target is not None and target.needs_approval is not False \
            and target.requires_approval(call.get("input")):
        if call.get("name") != original_name:
            return call, _error(call, f"A before_tool hook turned a call to {original_name} "
                                      f"into a call to {target.name}, which needs a person's "
                                      f"approval; it did not run.", "hook_error")
        return call, _error(call, f"A before_tool hook changed the input of this "
                                  f"{target.name} call into one that needs a person's "
                                  f"approval, which a person never saw (an approval holds for "
                                  f"the input it was given); it did not run.", "hook_error")
    return call, None


def after_tool_hooks(hooks: list[Hooks], call: ToolUseBlock,
                     execution: ToolExecution) -> ToolExecution:
    """The second half of :func:`run_hooked`: the execution after every ``after_tool`` hook
    (``call`` as :func:`before_tool_hooks` left it); a failing hook withholds the result."""
    for h in hooks:
        try:
            out = h.after_tool(call, execution)
        except Exception as e:  # noqa: BLE001
            return _error(call, f"{call.get('name')} ran, but the after_tool hook {h.name} "
                                f"failed ({type(e).__name__}: {e}), so its result was "
                                f"withheld. Do not repeat a call that changes state; check "
                                f"the state first.", "hook_error")
        if out is not None:
            if not isinstance(out, ToolExecution):
                return _error(call, f"{call.get('name')} ran, but the after_tool hook "
                                    f"{h.name} returned {type(out).__name__}, not a "
                                    f"ToolExecution, so its result was withheld.",
                              "hook_error")
            execution = out
    return execution


def with_hooks(hooks: list[Hooks], run: Callable[[ToolUseBlock], ToolExecution],
               registry: ToolRegistry | None = None) -> Callable[[ToolUseBlock],
                                                                 ToolExecution]:
    """``run`` (one call → execution) wrapped by ``hooks``; for ``execute_tools(run=...)``."""
    return lambda call: run_hooked(hooks, run, call, registry)


def after_reply_sink(hooks: list[Hooks], state: RunState,
                     forward: EventSink | None) -> EventSink:
    """The run's event sink with the ``after_reply`` hooks listening: on each
    ``model_call`` event (after ``forward`` got it) every hook sees the reply
    (``state.last_reply``); a hook that raises is reported as a ``hook_error`` event."""

    def sink(kind: str, data: dict[str, Any]) -> None:
        if forward is not None:
            forward(kind, data)
        if kind == "model_call":
            for hook, error in after_reply_hooks(hooks, state.last_reply):
                sink("hook_error", {"step": data.get("step"), "hook": hook,
                                    "point": "after_reply", "error": error})

    return sink


def after_reply_hooks(hooks: list[Hooks], reply: Reply) -> list[tuple[str, str]]:
    """Call every hook's ``after_reply``; returns ``(hook name, error)`` for each that raised
    (the loop reports them as ``hook_error`` events; a failing hook is never fatal)."""
    failed = []
    for h in hooks:
        try:
            h.after_reply(reply)
        except Exception as e:  # noqa: BLE001
            failed.append((h.name, f"{type(e).__name__}: {e}"))
    return failed


# ---------------------------------------------------------------- hooks the lessons use

class CallLog(Hooks):
    """Records every call and result it sees: ``log`` holds one dict per tool call."""

    def __init__(self) -> None:
        super().__init__(name="CallLog")
        self.log: list[dict[str, Any]] = []

    def after_tool(self, call: ToolUseBlock, execution: ToolExecution) -> None:
        self.log.append({"name": execution.name, "input": execution.input,
                         "is_error": execution.is_error, "error_kind": execution.error_kind})
        return None


class BlockTools(Hooks):
    """Blocks every call to the named tools with ``reason`` (e.g. a policy on refunds)."""

    def __init__(self, names: Iterable[str], reason: str) -> None:
        super().__init__(name="BlockTools")
        self.names, self.reason = frozenset(names), reason

    def before_tool(self, call: ToolUseBlock) -> Blocked | None:
        return Blocked(self.reason) if call.get("name") in self.names else None


class SchemaHook(Hooks):
    """The registry's ``input_schema`` check written as a ``before_tool`` hook.

    It blocks a call whose input fails the schema with the very message the registry would
    give, which shows the schema check is a before-tool hook that every harness installs.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        super().__init__(name="SchemaHook")
        self.registry = registry

    def before_tool(self, call: ToolUseBlock) -> Blocked | None:
        t = self.registry.get(call.get("name"))
        problem = t.input_errors(call.get("input")) if t is not None else None
        return Blocked(problem) if problem else None


class ThoughtRequired(Hooks):
    """ReAct as a rule: block tool calls in a reply that carries no short thought (text).

    ``after_reply`` notes whether the reply had text; ``before_tool`` blocks the reply's
    calls when it did not, asking for one sentence of reasoning first.
    """

    def __init__(self) -> None:
        super().__init__(name="ThoughtRequired")
        self.had_thought = True

    def after_reply(self, reply: Reply) -> None:
        self.had_thought = bool(reply.text.strip())

    def before_tool(self, call: ToolUseBlock) -> Blocked | None:
        if self.had_thought:
            return None
        return Blocked("write one short sentence of reasoning (a thought) before each action, "
                     "then call the tool again.")


def replace_input(call: ToolUseBlock, **changes: Any) -> ToolUseBlock:
    """A copy of ``call`` with some input fields changed (for hooks that rewrite a call)."""
    return {**call, "input": {**(call.get("input") or {}), **changes}}


def replace_result(execution: ToolExecution, content: str) -> ToolExecution:
    """A copy of ``execution`` sending ``content`` instead (for hooks that rewrite results)."""
    return dataclasses.replace(execution, content=content)


# ---------------------------------------------------------------- trimming results

def trim_text(text: str, max_tokens: int) -> str:
    """``text`` cut to about ``max_tokens`` tokens (characters/4) with a note of the cut.

    The note says how much was kept, so the model knows the result is partial. Text already
    within the limit is returned unchanged. ``ValueError`` for ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1 (got {max_tokens})")
    total = estimate_tokens(text)
    if total <= max_tokens:
        return text
    return (text[: max_tokens * 4]
            + f" …[trimmed: first {max_tokens:,} of about {total:,} tokens shown]")


def trim_tool_results(max_tokens: int) -> Hooks:
    """An ``after_tool`` hook that trims every tool result to about ``max_tokens`` tokens."""
    trim_text("", max_tokens)  # validate now

    def after_tool(call: Any, execution: ToolExecution) -> ToolExecution:
        return dataclasses.replace(execution, content=trim_text(execution.content, max_tokens))

    return Hooks(after_tool=after_tool, name=f"trim_tool_results({max_tokens})")
