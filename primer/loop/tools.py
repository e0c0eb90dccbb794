"""Tools: definitions the model reads, functions the harness runs, errors as results.

A tool is a name, a description, a JSON Schema for its input (``input_schema``) and a Python
function the model never sees. The model picks a tool by reading its description, so the
description is part of the prompt: it should say *when* to use the tool.

:class:`ToolRegistry` maps names to tools. It renders the definitions sent to the model and
it is the allow-list: a name that is not registered never runs, whatever the model writes.

Every failure becomes a ``tool_result`` with ``is_error: true`` that says what was wrong and
how to fix the call, never an exception that ends the run:

* an unknown tool name (the error lists the real tools),
* input that is not a JSON object or fails the schema (the error names the field and shows
  the ``input_schema``), checked with ``jsonschema`` and never coerced
  (:mod:`primer.loop.schema`, which also builds a schema from type hints),
* the function raising (:class:`ToolError` for messages written for the model; any other
  exception is reported with its type and message).

:func:`execute_tools` runs the calls of one reply concurrently and returns their results in
the order the model asked for them.
"""

from __future__ import annotations

import contextvars
import difflib
import inspect
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any

from .coroutines import is_async_callable, run_to_completion
from .jsontext import compact_json
from .messages import Block, tool_result_block
from .model import Usage
from .schema import (
    IDEMPOTENCY_PARAM,
    SchemaCheck,
    object_problem,
    parse_docstring,
    schema_from_signature,
)
from .text import safe_repr, safe_str, valid_text


def idempotency_key(tool_use_id: str) -> str:
    """The idempotency key of a call: derived from its ``tool_use`` id, so every retry or
    resume of the same call carries the same key and a side effect can be deduplicated."""
    return f"idem-{tool_use_id}"


class ToolError(Exception):
    """Raise inside a tool to send the model a readable error (``is_error: true``).

    The message is the whole observation the model gets, so write it for the model: say
    what was wrong and what a correct call looks like, e.g. ``"as_of must be YYYY-MM-DD"``.
    """


@dataclass
class Tool:
    """A tool: what the model sees (``name``, ``description``, ``input_schema``) and ``fn``.

    ``fn`` is called with the validated input as keyword arguments and may return a string,
    a JSON-serialisable value (sent as JSON text), ``None`` or UTF-8 ``bytes``.

    ``fn`` may be an ``async def`` function (:attr:`is_async`): the async loop awaits it on
    its event loop; the sync loop runs its coroutine to completion.

    ``side_effecting`` marks a tool that changes the world (a refund, an email); such calls
    are not retried blindly. ``needs_approval`` makes the harness pause for a person before
    it runs: ``True`` for every call, or a predicate ``(input) -> bool`` deciding per call
    (say, refunds over 100 USD); see :meth:`requires_approval`. ``timeout_s`` (seconds)
    overrides the run's default tool timeout. A tool that holds the GIL in C code (a
    backtracking regular expression, a huge integer power) or an ``async def`` tool that
    blocks the event loop (``time.sleep``, a loop with no ``await``) cannot be interrupted
    in-process: wrap it with :func:`~primer.harness.timeouts.in_subprocess`.

    Raises ``jsonschema.SchemaError`` at construction when ``input_schema`` is not a valid
    JSON Schema, and ``ValueError`` for a bad name, ``timeout_s`` or ``needs_approval``.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    side_effecting: bool = False
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False
    timeout_s: float | None = None
    _check: SchemaCheck = field(init=False, repr=False, compare=False)
    _takes_key: bool = field(init=False, repr=False, compare=False)
    _is_async: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 letters, digits, _ or -")
        t = self.timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float)
                              or not 0 < t <= 86_400 * 365):
            raise ValueError(f"tool {self.name}: timeout_s must be a number of seconds > 0 "
                             f"(at most a year) or None, not {t!r}")
        if not isinstance(self.needs_approval, bool) and not callable(self.needs_approval):
            raise ValueError(f"tool {self.name}: needs_approval must be True, False or a "
                             f"function (input) -> bool, not {self.needs_approval!r}")
        if not isinstance(self.side_effecting, bool):
            raise ValueError(f"tool {self.name}: side_effecting must be True or False, not "
                             f"{self.side_effecting!r}")
        self._check = SchemaCheck(self.input_schema)
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            params = {}
        self._takes_key = IDEMPOTENCY_PARAM in params
        self._is_async = is_async_callable(self.fn)

    def definition(self) -> dict[str, Any]:
        """The definition sent to the model: ``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema}

    def requires_approval(self, args: Any) -> bool:
        """Whether a call with input ``args`` must wait for a person's approval.

        ``needs_approval`` as a bool answers for every call. A predicate is asked only for
        input the tool would run (input that fails the schema never runs, so there is
        nothing to approve), and fails closed: a predicate that raises or returns anything
        but a bool means the call needs approval. It must be a pure function of the input:
        the loop, a pause and a resume each ask it.
        """
        gate = self.needs_approval
        if gate is True or gate is False:
            return gate
        if self.input_errors(args) is not None:
            return False
        try:
            verdict = gate(args)
        except Exception:  # noqa: BLE001 - a failing predicate fails closed
            return True
        return verdict if isinstance(verdict, bool) else True

    def input_errors(self, args: Any) -> str | None:
        """``None`` when ``args`` is valid input, else a message naming every bad field.

        The message shows the expected ``input_schema`` so the model can fix its next call.
        Input that is not a JSON object is refused with :func:`object_problem`'s reason (for
        text: the JSON parser's own message and position); a JSON string that holds an
        object is refused too: input must be an object, and the harness does not guess.
        """
        if type(args) is not dict:  # (the loop's boundary has checked a dict's values)
            return (f"{self.name}: the input {object_problem(args)}. Send the arguments as a "
                    f"JSON object matching input_schema {compact_json(self.input_schema)}.")
        lines = self._check.problems(args)
        if lines is None:
            return None
        return (f"{self.name}: invalid input: {'; '.join(lines)}. "
                f"Expected input_schema: {compact_json(self.input_schema)}.")

    @property
    def takes_idempotency_key(self) -> bool:
        """Whether ``fn`` has an ``idempotency_key`` parameter (the harness fills it in)."""
        return self._takes_key

    def __call__(self, **kwargs: Any) -> Any:
        return self.fn(**kwargs)

    @property
    def is_async(self) -> bool:
        """Whether ``fn`` is an ``async def`` function (or an object with one as ``__call__``)."""
        return self._is_async

    def invoke(self, args: dict[str, Any], tool_use_id: str) -> Any:
        """Call ``fn`` with validated ``args``, adding the idempotency key if ``fn`` takes one.

        A coroutine ``fn`` returns (an ``async def`` tool) is run to completion here
        (:func:`run_to_completion`), so any caller gets the tool's value.
        """
        if self._takes_key:
            value = self.fn(**args, **{IDEMPOTENCY_PARAM: idempotency_key(tool_use_id)})
        else:
            value = self.fn(**args)
        return run_to_completion(value) if isinstance(value, CoroutineType) else value

    def invoke_async(self, args: dict[str, Any], tool_use_id: str) -> Any:
        """``fn(**args)`` (plus the idempotency key if it takes one) as it returns: for an
        ``async def`` tool the coroutine, for the async loop to await."""
        if self._takes_key:
            return self.fn(**args, **{IDEMPOTENCY_PARAM: idempotency_key(tool_use_id)})
        return self.fn(**args)


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, side_effecting: bool = False,
         needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
         timeout_s: float | None = None) -> Any:
    """Build a :class:`Tool` from a typed, documented function (``@tool`` or ``@tool(...)``).

    The ``input_schema`` comes from the type hints through ``pydantic`` (every parameter must
    have one; parameters with defaults are optional), with ``additionalProperties: false`` so
    a misspelt argument is an error rather than silently ignored. The description is the
    docstring's text before an ``Args:`` section; each ``name: text`` line of that section
    describes one parameter. ``needs_approval`` is ``True`` or a predicate on the input (see
    :meth:`Tool.requires_approval`). Raises ``TypeError`` for a parameter with no type hint.
    """

    def build(f: Callable[..., Any]) -> Tool:
        doc = inspect.getdoc(f) or ""
        summary, arg_docs = parse_docstring(doc)
        return Tool(name or f.__name__, description or summary or f.__name__,
                    schema_from_signature(f, arg_docs), f, side_effecting=side_effecting,
                    needs_approval=needs_approval, timeout_s=timeout_s)

    return build(fn) if fn is not None else build


@dataclass
class ToolOutput:
    """A tool's return value plus the model usage spent making it (e.g. by a sub-agent).

    ``value`` is what the tool returns (text or JSON, as for any tool); ``usage`` the tokens
    models inside the tool consumed and ``cost_usd`` their dollars; ``is_error`` sends the
    value as an error result (a child run that stopped short, say) while still counting the
    usage. The loop adds ``usage`` and ``cost_usd`` to the run's totals, so work done inside
    a tool counts against the run's budgets.
    """

    value: Any
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    is_error: bool = False


@dataclass
class ToolExecution:
    """What happened to one ``tool_use``: the result sent back and how it was obtained.

    ``content`` is the text of the ``tool_result``; ``is_error`` its flag. ``error_kind`` is
    ``None`` on success, else one of ``"unknown_tool"``, ``"invalid_input"``,
    ``"tool_error"`` (a :class:`ToolError`), ``"exception"`` (any other exception),
    ``"bad_result"`` (a return value that is not text or JSON), ``"timeout"`` (the tool
    raised ``TimeoutError``), ``"too_many_calls"`` (its reply asked for more calls than
    ``max_tool_calls_per_reply``) or ``"not_run"`` (the run stopped before running it); with
    :mod:`primer.harness.runner` also ``"rate_limited"``, ``"transient"`` and
    ``"gave_up"`` (retries used up); with resume ``"rejected"`` and ``"unknown_outcome"``;
    with hooks ``"blocked"`` and ``"hook_error"``. ``latency_s``
    is wall seconds spent in the function. ``attempts`` counts tries; ``attempt_log`` holds
    one JSON-ready record per try when a retry policy ran the call. ``usage`` and
    ``cost_usd`` are the tokens and dollars models spent inside the tool (a sub-agent, see
    :class:`ToolOutput`); ``None`` / 0.0 for an ordinary tool.
    """

    tool_use_id: str
    name: str
    input: Any
    content: str
    is_error: bool = False
    error_kind: str | None = None
    latency_s: float = 0.0
    attempts: int = 1
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    cost_usd: float = 0.0

    def __post_init__(self) -> None:
        if self.usage is not None and type(self.usage) is dict:  # read back from JSON
            self.usage = Usage.from_dict(self.usage)

    def result_block(self) -> Block:
        """The ``tool_result`` block answering this call. Its content is always valid text for
        the Messages API: a lone surrogate (from a tool's return value or an exception's
        message) becomes U+FFFD, anything but a string its ``str``."""
        content = self.content
        if type(content) is not str or not content.isascii():
            content = valid_text(safe_str(content) if type(content) is not str else content)
        return tool_result_block(self.tool_use_id, content, self.is_error)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = {"tool_use_id": self.tool_use_id, "name": self.name, "input": self.input,
             "content": self.content, "is_error": self.is_error, "error_kind": self.error_kind,
             "latency_s": self.latency_s, "attempts": self.attempts,
             "attempt_log": self.attempt_log}
        if self.usage is not None:
            d["usage"], d["cost_usd"] = self.usage.to_dict(), self.cost_usd
        return d


class ToolRegistry:
    """Name → :class:`Tool`: the definitions sent to the model, and the allow-list.

    Raises ``ValueError`` when two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[dict[str, Any]] | None = None
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        """Register ``t``; ``ValueError`` if its name is taken."""
        if t.name in self._tools:
            raise ValueError(f"a tool named {t.name!r} is already registered")
        self._tools[t.name] = t
        self._definitions = None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name) if isinstance(name, str) else None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        """The tool definitions for the model call (the same list object until a tool is added)."""
        if self._definitions is None:
            self._definitions = [t.definition() for t in self._tools.values()]
        return self._definitions

    def unknown_tool_message(self, name: Any) -> str:
        """The error a model gets for a name that is not registered: lists the real tools."""
        known = ", ".join(self._tools) or "(none)"
        hint = ""
        if isinstance(name, str):
            close = difflib.get_close_matches(name, list(self._tools), n=1, cutoff=0.7)
            hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Unknown tool {safe_repr(name, 80)}. Available tools: {known}.{hint}"

    def refuse(self, block: Block, refusal: dict[str, str]) -> ToolExecution:
        """The error result for a call the harness refused before running it
        (``Reply.refused``: ``{"error_kind", "problem"}``); the call never runs."""
        call_id, name = str(block.get("id", "")), str(block.get("name"))
        kind, problem = refusal.get("error_kind", "refused"), refusal.get("problem", "")
        t = self.get(name)
        if kind == "unknown_tool" or (kind == "invalid_input" and t is None):
            known = ", ".join(self._tools) or "(none)"
            what = problem if kind == "unknown_tool" else f"there is no tool {name!r}"
            text = f"Unknown tool: {what}. Available tools: {known}."
            kind = "unknown_tool"
        elif kind == "invalid_input" and t is not None:
            text = (f"{name}: the input {problem}. It did not run. Send the arguments as a "
                    f"JSON object matching input_schema {compact_json(t.input_schema)}.")
        else:
            text = f"{name} did not run: {problem}."
        return ToolExecution(call_id, name, block.get("input"), text, True, kind)

    def run(self, block: Block,
            invoke: Callable[[Tool, dict[str, Any], str], Any] | None = None, *,
            tool: Tool | None = None) -> ToolExecution:
        """Validate and run one ``tool_use`` block; every failure becomes an error result.

        ``invoke(tool, input, tool_use_id)`` calls the tool (default :meth:`Tool.invoke`);
        :class:`primer.harness.runner.ToolRunner` passes one that adds a timeout.
        ``tool``, when the caller has already looked the block's name up, is that tool.
        """
        call_id = block.get("id", "")
        if type(call_id) is not str:
            call_id = str(call_id)
        name, args = block.get("name"), block.get("input")
        t = tool if tool is not None else self.get(name)
        if t is None:
            return ToolExecution(call_id, str(name), args, self.unknown_tool_message(name),
                                 True, "unknown_tool")
        problem = t.input_errors(args)
        if problem:
            return ToolExecution(call_id, t.name, args, problem, True, "invalid_input")
        start = time.perf_counter()
        try:
            value = invoke(t, args, call_id) if invoke else t.invoke(args, call_id)
        except ToolError as e:
            return ToolExecution(call_id, t.name, args, safe_str(e), True, "tool_error",
                                 time.perf_counter() - start)
        except TimeoutError as e:  # the tool's own client gave up waiting: outcome unknown
            return ToolExecution(call_id, t.name, args, timeout_error_message(t, e), True,
                                 "timeout", time.perf_counter() - start)
        except BaseException as e:  # noqa: BLE001 - any failure is an observation
            if not is_tool_failure(e):
                raise
            what = (f"called sys.exit({safe_str(e.code)})" if isinstance(e, SystemExit)
                    else f"failed: {type(e).__name__}: {safe_str(e)}")
            return ToolExecution(call_id, t.name, args, f"{t.name} {what}", True,
                                 "exception", time.perf_counter() - start)
        latency = time.perf_counter() - start
        if type(value) is str and value.isascii():  # the common case: plain text
            return ToolExecution(call_id, t.name, args, value, False, None, latency)
        usage, spent, failed = None, 0.0, False
        if isinstance(value, ToolOutput):
            value, usage, spent, failed = value.value, value.usage, value.cost_usd, value.is_error
        text, problem = result_text(value)
        if problem:
            return ToolExecution(call_id, t.name, args, f"{t.name} {problem}", True,
                                 "bad_result", latency, usage=usage, cost_usd=spent)
        return ToolExecution(call_id, t.name, args, text, failed, "tool_error" if failed else None,
                             latency, usage=usage, cost_usd=spent)


def call_needs_approval(registry: ToolRegistry, block: Block,
                        refused: dict[str, Any] | None = None) -> bool:
    """Whether the call ``block`` must wait for a person: its tool requires approval for this
    input (:meth:`Tool.requires_approval`), and it was not refused where the reply entered
    the loop (``refused``, the reply's: a refused call never runs, so there is nothing to
    approve). An unknown tool needs none, nor a call whose input fails the tool's
    ``input_schema``: neither ever runs (each is answered with its error)."""
    t = registry.get(block.get("name"))
    if t is None or t.needs_approval is False or (refused and block.get("id") in refused):
        return False
    args = block.get("input")
    return t.input_errors(args) is None and t.requires_approval(args)


def is_tool_failure(error: BaseException) -> bool:
    """Whether ``error``, raised by a tool's code, is the tool's failure (answered with an
    error ``tool_result``) rather than a stop of the whole run: any ``Exception``,
    ``SystemExit``, ``GeneratorExit`` and ``asyncio.CancelledError`` (a tool's inner cancel
    scope; the async loop re-raises it when its own task is being cancelled). Only
    ``KeyboardInterrupt`` and the harness's own ``BaseException`` signals pass through."""
    if isinstance(error, (Exception, SystemExit, GeneratorExit)):
        return True
    asyncio = sys.modules.get("asyncio")  # not imported: no tool can have raised its error
    return asyncio is not None and isinstance(error, asyncio.CancelledError)


def timeout_error_message(t: Tool, error: BaseException) -> str:
    """The result for a tool that raised a plain ``TimeoutError`` (its own client timed out).

    For a side-effecting tool the outcome is unknown: the request may have taken effect, so
    the model is told to check the state before calling again.
    """
    what = f"{t.name} timed out ({type(error).__name__}: {safe_str(error, 300) or 'no detail'})"
    if t.side_effecting:
        return (f"{what}. Its outcome is unknown: the request may already have taken effect. "
                f"It changes state, so it was not retried: check the current state (look the "
                f"result up) before calling {t.name} again.")
    return f"{what}. It may work if called again."


def result_text(value: Any) -> tuple[str, str | None]:
    """A tool's return value as ``tool_result`` text: ``(text, None)`` or ``("", problem)``.

    Strings pass as they are; ``None`` becomes ``"(no output)"``; UTF-8 ``bytes`` are
    decoded; other values are sent as JSON text. Bytes that are not UTF-8 and values JSON
    cannot encode are reported as a problem rather than sent garbled.
    """
    if type(value) is str:
        return valid_text(value), None
    if value is None:
        return "(no output)", None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8"), None
        except UnicodeDecodeError:
            return "", (f"returned {len(value)} bytes that are not UTF-8 text; a tool must "
                        f"return text or JSON")
    try:
        return valid_text(json.dumps(value, ensure_ascii=False, allow_nan=False)), None
    except (TypeError, ValueError, RecursionError) as e:
        return "", f"returned a {type(value).__name__} that cannot be sent as JSON ({e})"


def execute_tools(registry: ToolRegistry, tool_uses: Sequence[Block], *,
                  max_workers: int = 16,
                  run: Callable[[Block], ToolExecution] | None = None) -> list[ToolExecution]:
    """Run one reply's ``tool_use`` blocks concurrently; results in request order.

    Calls in one reply cannot use each other's results, so they run at the same time on a
    thread pool sized to the number of calls (at most ``max_workers``); the wall time is
    about the slowest call, not the sum. They may still depend on order or side effects (a
    create, then an update): a harness that needs an order runs such tools one at a time
    (``max_workers=1`` runs a turn in request order). A single call runs in the calling thread. One
    failing call never loses its siblings' results: each call's failure is its own error
    result. ``run`` replaces ``registry.run`` for one call (used to add timeouts or hooks).
    Each call sees the caller's ``contextvars`` (the current run, for a sub-agent).
    """
    run_one = run or registry.run
    if len(tool_uses) <= 1:
        return [run_one(b) for b in tool_uses]
    with ThreadPoolExecutor(max_workers=max(1, min(len(tool_uses), max_workers)),
                            thread_name_prefix="tool") as pool:
        contexts = [contextvars.copy_context() for _ in tool_uses]  # the caller's, in each
        return list(pool.map(lambda b, ctx: ctx.run(run_one, b), tool_uses, contexts))
