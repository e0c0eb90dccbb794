"""Tools: definitions the model reads, functions the harness runs, errors as results.

A tool is a name, a description, an ``input_schema`` (JSON Schema) and a Python function the
model never sees. The model picks a tool by its description, so the description is part of
the prompt: it should say *when* to use the tool. :class:`ToolRegistry` is the allow-list: an
unregistered name never runs, whatever the model writes. Every failure (an unknown name, input
that fails the schema, a raising function) becomes a ``tool_result`` with ``is_error: true``
saying how to fix the call, never an exception that ends the run.
"""

from __future__ import annotations

import difflib
import inspect
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any, Literal, cast, get_args

from .messages import ToolResultBlock, ToolUseBlock, result_text, tool_result_block, valid_text
from .model import Usage, is_async_callable, run_to_completion
from .schema import (
    IDEMPOTENCY_PARAM,
    SchemaCheck,
    object_problem,
    parse_docstring,
    schema_from_signature,
)
from .text import compact_json, safe_repr, safe_str

#: Why a call's result is an error (``None`` on success); see :class:`ToolExecution`.
ErrorKind = Literal["unknown_tool", "invalid_input", "tool_error", "exception", "bad_result",
                    "timeout", "too_many_calls", "not_run", "cancelled", "refused",
                    "rate_limited", "transient", "gave_up", "rejected", "unknown_outcome",
                    "blocked", "hook_error"]
ERROR_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))
#: A tool's definition as the model reads it: ``{"name", "description", "input_schema"}``.
ToolDefinition = dict[str, Any]
#: What the harness decided about a call before running it: ``{"error_kind", "problem"}``.
Refusal = dict[str, str]
#: A predicate on a call's input: does this call need a person's approval? (``True`` /
#: ``False``, or the reason it does.)
ApprovalRule = Callable[[dict[str, Any]], "bool | str"]


def idempotency_key(tool_use_id: str) -> str:
    """A call's idempotency key, from its ``tool_use`` id: the same on every retry and resume,
    so a side effect can be deduplicated."""
    return f"idem-{tool_use_id}"


class ToolError(Exception):
    """Raise inside a tool to send the model a readable error (``is_error: true``): say what
    was wrong and what a correct call looks like, e.g. ``"as_of must be YYYY-MM-DD"``."""


@dataclass
class Tool:
    """A tool: what the model sees (``name``, ``description``, ``input_schema``) and ``fn``.

    ``fn`` gets the validated input as keyword arguments and returns a string, a JSON value
    (sent as JSON text), ``None`` or UTF-8 ``bytes``; it may be ``async def``.
    ``side_effecting``: it changes the world (a refund), so its calls are not retried blindly.
    ``needs_approval``: ``True``, or a predicate on the input (:meth:`requires_approval`),
    pauses the loop for a person first. ``timeout_s`` (seconds) overrides the harness's time
    limit. ``argument_mode``: ``"strict"`` (the default) refuses a value of the wrong JSON
    type; ``"lax"`` first converts it as pydantic's lax mode does (``"98.7"`` to a number,
    ``"7"`` to an integer) and the call's :class:`ToolExecution` records each conversion
    (``coerced``, in the trace too). ``jsonschema.SchemaError`` for an invalid
    ``input_schema``; ``ValueError`` for one that cannot be checked safely
    (:mod:`~primer.loop.schema_safety`), a bad name, ``timeout_s``, ``side_effecting``,
    ``needs_approval`` or ``argument_mode``.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any]
    side_effecting: bool = False
    needs_approval: bool | ApprovalRule = False
    timeout_s: float | None = None
    argument_mode: Literal["strict", "lax"] = "strict"
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
        if self.argument_mode not in ("strict", "lax"):
            raise ValueError(f"tool {self.name}: argument_mode must be 'strict' or 'lax', not "
                             f"{self.argument_mode!r}")
        self._check = SchemaCheck(self.input_schema)
        try:
            params: Any = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            params = {}
        self._takes_key = IDEMPOTENCY_PARAM in params
        self._is_async = is_async_callable(self.fn)

    def definition(self) -> ToolDefinition:
        """The definition sent to the model: ``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description,
                "input_schema": self.input_schema}

    def requires_approval(self, args: object) -> bool:
        """Whether a call with input ``args`` must wait for a person's approval
        (:meth:`approval_reason` is not ``None``)."""
        return self.approval_reason(args) is not None

    def approval_reason(self, args: object) -> str | None:
        """Why a call with input ``args`` must wait for a person: ``None`` when it need not,
        else the reason (``""`` when none was given). A predicate is asked only for input
        that passes the schema; it may return ``True``/``False`` or a reason (text means yes),
        and fails closed (raising, or returning anything else, means yes, with a reason
        saying so). The loop asks once per call and keeps the answer on its step
        (:meth:`~primer.loop.state.Step.approval_reason`); a pause and a resume read it."""
        gate = self.needs_approval
        if gate is True or gate is False:
            return "" if gate else None
        if self.input_errors(args) is not None:
            return None
        try:
            verdict = gate(self.lax_input(cast(dict[str, Any], args))[0])
        except Exception as e:  # noqa: BLE001 - a failing predicate fails closed
            return (f"the needs_approval predicate of {self.name} raised "
                    f"{type(e).__name__}: {safe_str(e, 200)}; a failing predicate means yes")
        if verdict is True or verdict is False:
            return "" if verdict else None
        if isinstance(verdict, str) and verdict.strip():
            return verdict
        return (f"the needs_approval predicate of {self.name} returned "
                f"{safe_repr(verdict, 60)}, not True, False or a reason; that means yes")

    def input_errors(self, args: object) -> str | None:
        """``None`` for valid ``args``, else a message naming every bad field and showing the
        ``input_schema``; a non-object (even text holding one) gets :func:`object_problem`'s."""
        if type(args) is not dict:
            return (f"{self.name}: the input {object_problem(args)}. Send the arguments as a "
                    f"JSON object matching input_schema {compact_json(self.input_schema)}.")
        lines = self._check.problems(args)
        if lines is None or (self.argument_mode == "lax" and self._check.coerce(args)):
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
        """``fn(**args)`` plus any idempotency key; a coroutine it returns is run to the end."""
        value = self.invoke_async(args, tool_use_id)
        return run_to_completion(value) if isinstance(value, CoroutineType) else value

    def lax_input(self, args: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``args`` as the function receives them, and the conversions made: in lax mode,
        each value converted (:meth:`SchemaCheck.coerce`, ``{"path", "from", "to",
        "type"}``); otherwise, or when nothing needed converting, ``(args, [])``."""
        if self.argument_mode == "lax" and self._check.problems(args) is not None:
            lax = self._check.coerce(args)
            if lax is not None:
                return lax
        return args, []

    def invoke_async(self, args: dict[str, Any], tool_use_id: str) -> Any:
        """``fn(**args)`` plus any idempotency key, as returned (an ``async def`` coroutine)."""
        if self.argument_mode == "lax":
            args = self.lax_input(args)[0]
        if self._takes_key:
            return self.fn(**args, **{IDEMPOTENCY_PARAM: idempotency_key(tool_use_id)})
        return self.fn(**args)


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, side_effecting: bool = False,
         needs_approval: bool | ApprovalRule = False,
         timeout_s: float | None = None,
         argument_mode: Literal["strict", "lax"] = "strict") -> Any:
    """Build a :class:`Tool` from a typed, documented function (``@tool`` or ``@tool(...)``).

    The ``input_schema`` comes from the type hints (pydantic; a default makes a parameter
    optional; ``additionalProperties: false``, so a misspelt argument is an error). The
    description is the docstring before ``Args:``, whose ``name: text`` lines describe the
    parameters. Raises ``TypeError`` for a parameter with no type hint.
    """

    def build(f: Callable[..., Any]) -> Tool:
        summary, arg_docs = parse_docstring(inspect.getdoc(f) or "")
        return Tool(name or f.__name__, description or summary or f.__name__,
                    schema_from_signature(f, arg_docs), f, side_effecting=side_effecting,
                    needs_approval=needs_approval, timeout_s=timeout_s,
                    argument_mode=argument_mode)

    return build(fn) if fn is not None else build


@dataclass(frozen=True)
class ToolOutput:
    """A tool's ``value`` plus what models inside it (a sub-agent) spent, ``usage`` (tokens,
    kept as a plain :class:`Usage`) and ``cost_usd`` (USD), added to the run's totals;
    ``is_error``: an error result. ``ValueError`` for counts or a cost budgets cannot use."""

    value: Any
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    is_error: bool = False

    def __post_init__(self) -> None:
        c, u = self.cost_usd, self.usage
        if isinstance(u, Usage):  # (a subclass's fields could change after the check)
            object.__setattr__(self, "usage", Usage(**Usage.to_dict(u)))
        why = self.usage.problem() if isinstance(u, Usage) else "not a Usage"
        if why is None and not (type(c) in (int, float) and 0 <= c < math.inf):
            why = f"cost_usd is {safe_repr(c, 40)}, not a number of USD >= 0"
        if why:
            raise ValueError(f"ToolOutput: {why}")


@dataclass
class ToolExecution:
    """What happened to one ``tool_use``: the result sent back and how it was obtained.

    ``content`` and ``is_error`` make the ``tool_result``; ``error_kind`` says why it is an
    error (:data:`ErrorKind`, the core's kinds first, then the harness's), ``None`` on success.
    ``latency_s``: wall seconds in the function; ``attempts``/``attempt_log``: tries, a record
    each under a retry policy. ``usage``, ``cost_usd``: what models inside it spent.
    ``coerced``: each value a lax-mode tool converted before it ran (:meth:`Tool.lax_input`).
    """

    tool_use_id: str
    name: str
    input: Any
    content: str
    is_error: bool = False
    error_kind: ErrorKind | None = None
    latency_s: float = 0.0
    attempts: int = 1
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    cost_usd: float = 0.0
    coerced: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        usage: object = self.usage
        if type(usage) is dict:  # read back from JSON
            self.usage = Usage.from_dict(usage)

    def result_block(self) -> ToolResultBlock:
        """The ``tool_result`` block answering this call; its content always valid text for
        the Messages API (a lone surrogate becomes U+FFFD, anything but a string its str)."""
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
        if self.coerced:
            d["coerced"] = self.coerced
        return d


#: ``invoke(tool, input, tool_use_id)``: how :meth:`ToolRegistry.run` calls a tool.
Invoke = Callable[[Tool, dict[str, Any], str], Any]


class ToolRegistry:
    """Name → :class:`Tool`: the definitions sent to the model, and the allow-list. Raises
    ``ValueError`` when two tools share a name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: list[ToolDefinition] | None = None
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

    def get(self, name: object) -> Tool | None:
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

    def definitions(self) -> list[ToolDefinition]:
        """The tool definitions for the model call (the same list object until a tool is added)."""
        if self._definitions is None:
            self._definitions = [t.definition() for t in self._tools.values()]
        return self._definitions

    def unknown_tool_message(self, name: object) -> str:
        """The error a model gets for a name that is not registered: lists the real tools."""
        known = ", ".join(self._tools) or "(none)"
        hint = ""
        if isinstance(name, str):
            close = difflib.get_close_matches(name, list(self._tools), n=1, cutoff=0.7)
            hint = f" Did you mean '{close[0]}'?" if close else ""
        return f"Unknown tool {safe_repr(name, 80)}. Available tools: {known}.{hint}"

    def refuse(self, block: ToolUseBlock, refusal: Refusal) -> ToolExecution:
        """The error result for a call the harness refused before running it (``refusal``,
        the step's: ``{"error_kind", "problem"}``); the call never runs."""
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
        return ToolExecution(call_id, name, block.get("input"), text, True,
                             cast(ErrorKind, kind if kind in ERROR_KINDS else "refused"))

    def run(self, block: ToolUseBlock, invoke: Invoke | None = None, *,
            tool: Tool | None = None) -> ToolExecution:
        """Validate and run one ``tool_use`` block; every failure becomes an error result.
        ``invoke`` calls the tool (default :meth:`Tool.invoke`; the harness's adds a time
        limit); ``tool`` is the block's tool when the caller already looked it up. A lax
        tool's conversions are recorded on the execution (``coerced``)."""
        execution = self._run(block, invoke, tool)
        t = tool if tool is not None else self.get(block.get("name"))
        if (t is not None and t.argument_mode == "lax" and type(execution.input) is dict
                and execution.error_kind != "invalid_input"):
            execution.coerced = t.lax_input(execution.input)[1]
        return execution

    def _run(self, block: ToolUseBlock, invoke: Invoke | None, tool: Tool | None
             ) -> ToolExecution:
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


def call_needs_approval(registry: ToolRegistry, block: ToolUseBlock,
                        refused: dict[str, Refusal] | None = None) -> bool:
    """Whether ``block`` must wait for a person (:func:`call_approval_reason` is not
    ``None``). Asks the tool's predicate: the loop asks once per call, through its step."""
    return call_approval_reason(registry, block, refused) is not None


def call_approval_reason(registry: ToolRegistry, block: ToolUseBlock,
                         refused: dict[str, Refusal] | None = None) -> str | None:
    """Why ``block`` must wait for a person (:meth:`Tool.approval_reason`), or ``None``:
    never for a call ``refused`` (the step's), an unknown tool or bad input, which never run."""
    t = registry.get(block.get("name"))
    if t is None or t.needs_approval is False or (refused and block.get("id") in refused):
        return None
    args = block.get("input")
    return t.approval_reason(args) if t.input_errors(args) is None else None


def is_tool_failure(error: BaseException) -> bool:
    """Whether ``error`` from a tool's code is the tool's failure (an error ``tool_result``),
    not a stop of the run: an ``Exception``, ``SystemExit``, ``GeneratorExit``, or the tool's
    own ``asyncio.CancelledError``; ``KeyboardInterrupt`` and the harness's signals are not."""
    if isinstance(error, (Exception, SystemExit, GeneratorExit)):
        return True
    asyncio = sys.modules.get("asyncio")  # not imported: no tool can have raised its error
    return asyncio is not None and isinstance(error, asyncio.CancelledError)


def timeout_error_message(t: Tool, error: BaseException) -> str:
    """The result for a tool that raised a plain ``TimeoutError`` (its own client timed out).
    For a side-effecting tool the outcome is unknown: the model is told to check first."""
    what = f"{t.name} timed out ({type(error).__name__}: {safe_str(error, 300) or 'no detail'})"
    if t.side_effecting:
        return (f"{what}. Its outcome is unknown: the request may already have taken effect. "
                f"It changes state, so it was not retried: check the current state (look the "
                f"result up) before calling {t.name} again.")
    return f"{what}. It may work if called again."
