"""The coding round: check a learner's own agent loop against scripted models and tools.

Write a loop with this signature, no framework::

    def my_loop(model, task, tools, *, max_steps, token_budget) -> dict:
        ...
        return {"answer": ..., "stop_cause": ...}

- ``model(messages, tool_definitions)`` is one stateless model call. ``messages`` is the
  whole history as a list of Anthropic-shape messages (see :mod:`primer.loop.messages`),
  starting with ``{"role": "user", "content": task}``; ``tool_definitions`` is
  ``tools.definitions``, passed on every call (a model offered no tools cannot call one).
  Every call is checked as the Messages API would check the request
  (:func:`primer.harness.request_check.request_problems`, the validator ``FakeModelServer``
  answers with). It returns a reply dict::

      {"content": [block, ...],              # text and tool_use blocks
       "stop_reason": "end_turn" | "tool_use" | "max_tokens" | "refusal",
       "usage": {"input_tokens": int, "output_tokens": int}}

- ``task`` is the user's request (a string).
- ``tools`` is a dict, tool name → Python function; call a tool with its ``tool_use`` input
  as keyword arguments, ``tools[name](**input)``. ``tools.definitions`` holds the tool
  definitions (``{"name", "description", "input_schema"}``) to send to the model.
- ``max_steps`` is how many model calls the run may make.
- ``token_budget`` is how many tokens it may use: the sum of ``input_tokens + output_tokens``
  over every reply's ``usage``.

The loop returns ``{"answer": str | None, "stop_cause": str}``: the answer (the text of
every text block of the last reply, joined) and ``"end_turn"`` when the model finished;
otherwise ``None`` and the stop cause, why the loop stopped: ``"max_tokens"``,
``"refusal"``, ``"token_budget"``, ``"loop_detected"`` or ``"max_steps"``. (``stop_reason``
is the model's field in each reply; the loop's own reason to stop is its stop cause.)

What the checks hold the loop to (the course's production loop, reduced to its core):

1. Append each reply to the history exactly as returned, as an ``assistant`` message.
2. After each reply, read its ``stop_reason`` first, then in order: ``end_turn`` → return
   the text of its text blocks, joined; ``max_tokens`` → stop and run nothing (a cut-off
   tool call may be half-written); ``refusal`` → stop, the text is not an answer; a running
   token total past ``token_budget`` → stop before running the reply's tools; the same tool
   with the same input requested for the :data:`REPEAT_THRESHOLD`-th time → stop with
   ``loop_detected``.
3. Otherwise run every ``tool_use`` of the reply and answer them all in ONE ``user``
   message: one ``tool_result`` per call, with the call's id as ``tool_use_id``, in the order
   asked, its ``content`` a string (``json.dumps`` of what the tool returned) or a list of
   text blocks. A failure (unknown tool, bad arguments, the function raising) is a result with
   ``"is_error": True`` whose content says what went wrong (an unknown tool lists the real
   ones), never an exception that ends the run.
4. Make at most ``max_steps`` model calls; then stop with ``max_steps``, without running
   the last reply's tools (no model call would read their results).

:func:`check_loop` runs the loop once per behaviour in :data:`BEHAVIOURS`, watching it through
an instrumented model (which checks every request, the tools offered included, as the real
API would, then the course's rules for the history) and instrumented tools (which record
every run). It returns a :class:`LoopReport`: one line per behaviour, passed or failed with
what was expected and what happened, and a score. An exception inside the learner's code
is that behaviour's failure, reported with the line that raised it; it never escapes
:func:`check_loop`.
"""

from __future__ import annotations

import ast
import copy
import functools
import inspect
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

from primer.course.checking import CheckResult, ExerciseReport, short, shown
from primer.course.loop_interface import (
    MODEL_SIGNATURE,
    LoopFn,
    ModelCallError,
    Toolbox,
    describe_loop_exception,
    interface_kind,
)
from primer.harness.request_check import request_problems
from primer.loop.messages import (
    Message,
    ToolUseBlock,
    blocks_of,
    text_block,
    text_of,
    tool_uses_of,
)
from primer.loop.model import Reply, ScriptedLLM, text_reply, tool_reply
from primer.scenarios import orders
from primer.scenarios.policy import Observation, action_reply, call_number, last_observations

#: The loop must stop with ``loop_detected`` when the same tool with the same input is
#: requested for this many times (the course's default, as in ``AgentConfig``).
REPEAT_THRESHOLD = 3

#: The checker's model refuses to answer more calls than this in one run: a loop that gets
#: here has no working step limit.
MAX_MODEL_CALLS = 25

#: Tool calls one run may make before the checker stops it (no behaviour needs 10).
MAX_TOOL_RUNS = 50

#: The stop causes a learner's loop may return (the names of :class:`~primer.loop.state.StopCause`).
STOP_CAUSES = ("end_turn", "max_tokens", "refusal", "token_budget", "loop_detected",
               "max_steps")

#: The ``model`` field of the request the checker validates for each call (the exercise's
#: model call carries no model id; the validator needs one).
CHECKED_MODEL_ID = "checker-model"

def _model_interface(messages: Any, tool_definitions: Any = None) -> None:
    """The checker's model's parameters, for binding a call's arguments (never called)."""


class _CheckStopped(BaseException):
    """Raised by the checker's model to end a run that broke a rule it cannot recover from.

    A ``BaseException`` (like ``KeyboardInterrupt``), so an ``except Exception`` in the
    learner's loop does not swallow it and keep the run going forever.
    """


@dataclass
class Run:
    """What one behaviour's run did, as the instrumented model and tools saw it.

    ``replies`` are the reply dicts the model returned, in order; ``results`` maps each
    ``tool_use`` id to the ``tool_result`` block the loop sent back for it; ``tool_runs``
    lists ``(model calls so far, tool name, input)`` for every tool call, in the order they
    began; ``violation`` is the first broken rule of the message list (or a runaway loop),
    ``error`` the learner's exception as a one-line report, ``result`` what the loop returned;
    ``misuse`` says how the loop called the model the wrong way (see :class:`ModelCallError`),
    even when the loop caught the error and went on; ``max_steps`` the limit the run was
    given.
    """

    replies: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    tool_runs: list[tuple[int, str, Any]] = field(default_factory=list)
    violation: str | None = None
    error: str | None = None
    result: Any = None
    misuse: str | None = None
    max_steps: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def calls(self) -> int:
        """Model calls the loop made."""
        return len(self.replies)

    @property
    def tokens(self) -> list[int]:
        """Running total of reported tokens (input + output) after each model call."""
        total, out = 0, []
        for r in self.replies:
            total += r["usage"]["input_tokens"] + r["usage"]["output_tokens"]
            out.append(total)
        return out

    def runs_of(self, name: str) -> int:
        """How many times tool ``name`` was called."""
        return sum(1 for _, n, _ in self.tool_runs if n == name)

    def result_for(self, reply_no: int, k: int = 0) -> dict[str, Any] | None:
        """The ``tool_result`` sent for the ``k``-th tool call of reply ``reply_no`` (from 1).

        ``None`` when there was no such reply (the loop made fewer model calls), no such
        call in it, or no result for it.
        """
        if not 1 <= reply_no <= len(self.replies):
            return None
        uses = tool_uses_of(self.replies[reply_no - 1]["content"])
        return self.results.get(uses[k]["id"]) if k < len(uses) else None

    def tool_uses(self, reply_no: int) -> list[ToolUseBlock]:
        """The ``tool_use`` blocks of reply ``reply_no`` (from 1); ``[]`` when there is none."""
        if not 1 <= reply_no <= len(self.replies):
            return []
        return tool_uses_of(self.replies[reply_no - 1]["content"])


# ---------------------------------------------------------------- the instrumented model

class CheckedModel:
    """The model handed to the learner's loop: a :class:`ScriptedLLM` behind a check.

    Called as ``model(messages, tool_definitions)``; any other call (for example the
    ``LLM`` protocol's ``model(system=..., messages=..., tools=..., max_tokens=...)`` of the
    earlier lessons) raises :class:`ModelCallError` saying so. Before answering it checks the
    request as the Messages API would (:func:`api_problem`: the tools offered, then the
    shared validator), then the course's rules for the history (:func:`sent_history_problem`); a
    broken request, or more than :data:`MAX_MODEL_CALLS` calls, is recorded in
    ``run.violation`` and ends the run.
    Returns a reply dict ``{"content", "stop_reason", "usage"}`` (a fresh copy each time, so
    the loop may keep or change it freely).
    """

    def __init__(self, policy: Callable[[list[Message]], Any], task: str,
                 definitions: list[dict[str, Any]], run: Run) -> None:
        self._llm = ScriptedLLM(policy, name="the checker's model")
        self._task = task
        self._definitions = definitions
        self._run = run

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        run = self._run
        try:
            bound = inspect.signature(_model_interface).bind(*args, **kwargs)
        except TypeError:
            run.misuse = run.misuse or model_call_problem(args, kwargs)
            raise ModelCallError(run.misuse) from None
        bound.apply_defaults()
        messages = bound.arguments["messages"]
        problem = (api_problem(messages, bound.arguments["tool_definitions"],
                               self._definitions, run.calls + 1)
                   or sent_history_problem(messages, self._task, run))
        if problem is None and run.calls >= MAX_MODEL_CALLS:
            problem = (f"the loop made {MAX_MODEL_CALLS} model calls and kept going; "
                       f"it needs a step limit")
        if problem is not None:
            run.violation = run.violation or problem
            raise _CheckStopped(problem)
        try:
            reply: Reply = self._llm(system="", messages=messages, tools=self._definitions,
                                     max_tokens=1024)
        except Exception as e:  # noqa: BLE001 - a history the model cannot read ends the run
            run.violation = (f"the model could not read the history on call {run.calls + 1} "
                             f"({type(e).__name__}: {e})")
            raise _CheckStopped(run.violation) from None
        record = {"content": reply.content, "stop_reason": reply.stop_reason,
                  "usage": {"input_tokens": reply.usage.input_tokens,
                            "output_tokens": reply.usage.output_tokens}}
        run.replies.append(copy.deepcopy(record))
        return copy.deepcopy(record)


def model_call_problem(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """Why a call ``model(*args, **kwargs)`` is not how this exercise calls the model.

    Names the arguments the loop passed and spells out ``model(messages, tool_definitions)``
    and the reply dict it returns, since lessons 01-05 call an ``LLM`` with keywords instead.
    """
    given = ", ".join([*(type(a).__name__ for a in args), *(f"{k}=..." for k in kwargs)])
    protocol = (", the LLM protocol of lessons 01-05" if {"system", "max_tokens"} & set(kwargs)
                else "")
    return (f"the loop called model({given}){protocol}; in this exercise the model is "
            f"called as {MODEL_SIGNATURE}, with the message list and tools.definitions "
            f"(no system prompt, no max_tokens), and returns a reply dict "
            f"{{'content', 'stop_reason', 'usage'}}")


#: What to fix for each kind of problem the request validator reports: (pattern in its
#: message, advice). The first match is appended to the validator's own message.
FIXES: tuple[tuple[str, str], ...] = (
    (r"^tools", "pass tools.definitions, unchanged, as the second argument"),
    (r"\.content\.\d+\.content: Input should be a valid string",
     "a tool_result's content is a string or a list of text blocks: send json.dumps(output) "
     "(or str(output)), not the tool's raw return value"),
    (r"is_error: Input should be a valid boolean",
     'is_error is the boolean True or False, not a string'),
    (r"without `tool_result` blocks immediately after",
     "answer every tool_use of a reply in the very next user message: one tool_result per "
     "call, its tool_use_id the call's id, failures included (as is_error results)"),
    (r"unexpected `tool_use_id`",
     "keep the reply's tool_use blocks in the assistant message as returned, and copy each "
     "call's id into its tool_result's tool_use_id"),
    (r"must come first",
     "put the tool_result blocks first in the user message, before any text"),
    (r"\.role: Input should be",
     "the Messages API has two roles, user and assistant: tool results go back as "
     "tool_result blocks in a user message, and a system prompt travels beside the list, "
     "not in it"),
    (r"non-empty content|must be non-empty|non-whitespace",
     "never send an empty message or text block: keep each reply's content blocks as "
     "returned, and answer every tool_use of a reply with a tool_result (failures as "
     "is_error results)"),
    (r"Extra inputs are not permitted",
     "send only the fields the API defines: a message is {'role', 'content'}, a tool_result "
     "{'type', 'tool_use_id', 'content', 'is_error'}"),
    (r"Input tag",
     "every content block needs a type the API knows: text, tool_use, tool_result, ..."),
)


def api_problem(messages: Any, offered: Any, definitions: list[dict[str, Any]],
                call_no: int) -> str | None:
    """Why the Messages API would refuse model call ``call_no`` (from 1), or ``None``.

    ``offered`` is what the loop passed as ``tool_definitions``; it must be the checker's
    ``definitions`` (a model offered no tools cannot call one). The request
    ``{"model", "max_tokens", "messages", "tools"}`` is then checked by
    :func:`primer.harness.request_check.request_problems`, the validator ``FakeModelServer``
    answers with; the first of its problems that :data:`FIXES` has advice for (in the
    table's order) is reported with that advice.
    """
    if offered is None:
        return (f"call {call_no} offered the model no tools (tool_definitions was None); "
                f"pass tools.definitions on every call: a model that is offered no tools "
                f"cannot call one")
    body = {"model": CHECKED_MODEL_ID, "max_tokens": 1024, "messages": messages,
            "tools": offered}
    problems = request_problems(body)
    if not problems and offered != definitions:
        problems = ["tools: the tools offered are not tools.definitions"]
    if not problems:
        return None
    problem, fix = next(((p, advice) for pattern, advice in FIXES for p in problems
                         if re.search(pattern, p)),
                        (problems[0], "make the request one the Messages API accepts"))
    return f"call {call_no} would be refused by the Messages API (HTTP 400: {problem}); {fix}"


def sent_history_problem(messages: Any, task: str, run: Run) -> str | None:
    """What is wrong with the message list sent on the next call, or ``None``.

    The list must start with the task as a ``user`` message, then hold each earlier reply as
    an ``assistant`` message exactly as returned, each followed by one ``user`` message
    answering every ``tool_use`` of that reply with a ``tool_result`` carrying its id, in the
    order asked (``tool_result`` blocks first; text may follow). Records the results it
    finds in ``run.results``. Rules: the Anthropic Messages API's (a ``tool_use`` must be
    answered in the next user message) and the course's (one message, in request order).
    """
    if not isinstance(messages, list) or not messages:
        return f"the model was sent {type(messages).__name__} instead of a list of messages"
    first = messages[0]
    if not (isinstance(first, dict) and first.get("role") == "user"
            and text_of(first.get("content", "")).strip() == task):
        return "the first message must be the task, as {'role': 'user', 'content': task}"
    for k, reply in enumerate(run.replies):
        if not tool_uses_of(reply["content"]) or reply["stop_reason"] == "max_tokens":
            why = ("was cut off (max_tokens)" if reply["stop_reason"] == "max_tokens"
                   else f"had stop_reason {reply['stop_reason']!r} and no tool call")
            return (f"the model was called again after reply {k + 1}, which {why}; "
                    f"that reply ends the run")
        if len(messages) < 3 + 2 * k:
            return (f"call {run.calls + 1} was sent {len(messages)} message(s); reply {k + 1} "
                    f"and the user message answering it are missing from the history")
        said, answer = messages[1 + 2 * k], messages[2 + 2 * k]
        if not isinstance(said, dict) or said.get("role") != "assistant" \
                or said.get("content") != reply["content"]:
            return (f"message {2 + 2 * k} should be reply {k + 1} as an assistant message, "
                    f"its content exactly as the model returned it")
        if not isinstance(answer, dict) or answer.get("role") != "user":
            return f"message {3 + 2 * k} should be a user message answering reply {k + 1}"
        problem = _answer_problem(reply, answer, k + 1, run)
        if problem:
            return problem
    if len(messages) != 1 + 2 * run.calls:
        return (f"call {run.calls + 1} was sent {len(messages)} messages; after "
                f"{run.calls} replies the history should hold {1 + 2 * run.calls} (the task, "
                f"then each reply and one user message answering it)")
    return None


def _answer_problem(reply: dict[str, Any], answer: dict[str, Any], reply_no: int,
                    run: Run) -> str | None:
    asked = [b["id"] for b in tool_uses_of(reply["content"])]
    content = answer.get("content")
    blocks = blocks_of(content) if isinstance(content, str | list) else []
    # the results the loop under test wrote, as plain dicts: their fields are checked below
    results = [cast(dict[str, Any], b) for b in blocks
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    got: list[Any] = [b.get("tool_use_id") for b in results]  # ids as written, maybe not str
    if got == asked:
        lead = blocks[:len(results)]
        if lead != results:
            return (f"in the user message answering reply {reply_no}, put the tool_result "
                    f"blocks first, before any text")
        run.results.update({b["tool_use_id"]: b for b in results})
        return None
    missing = [i for i in asked if i not in got]
    if missing and not got:
        return (f"reply {reply_no} asked for {len(asked)} tool call(s), but the next user "
                f"message holds no tool_result for {', '.join(missing)}; answer every "
                f"tool_use in the next user message")
    if missing:
        return (f"the user message after reply {reply_no} answers {len(got)} of its "
                f"{len(asked)} tool calls (no tool_result for {', '.join(missing)}); put all "
                f"results in one user message")
    unknown = [i for i in got if i not in asked]
    if unknown:
        return (f"a tool_result after reply {reply_no} has tool_use_id {unknown[0]!r}, which "
                f"matches no call of that reply; copy each call's id into its tool_result")
    if sorted(got) == sorted(asked) and len(got) == len(asked):
        return (f"the results after reply {reply_no} came back in the order {got}; send them "
                f"in the order the model asked for them ({asked})")
    return (f"the user message after reply {reply_no} answers a call more than once "
            f"(tool_use_ids {got}); send one tool_result per call")


# ---------------------------------------------------------------- instrumented tools

def _instrument(name: str, fn: Callable[..., Any], run: Run) -> Callable[..., Any]:
    @functools.wraps(fn)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        with run.lock:
            run.tool_runs.append((run.calls, name, dict(kwargs) if not args else args))
            runaway = len(run.tool_runs) > MAX_TOOL_RUNS
        if runaway:
            run.violation = run.violation or (
                f"the loop ran tools {MAX_TOOL_RUNS} times without stopping (the last was "
                f"{name}); retrying a failing tool forever is a loop with no limit")
            raise _CheckStopped(run.violation)
        return fn(*args, **kwargs)

    return recorded


def order_service_down(order_id: str) -> dict:
    """A ``get_order`` whose backing service is down: it always raises ``ConnectionError``."""
    raise ConnectionError(f"order service unavailable (HTTP 503) while fetching {order_id!r}; "
                          f"try again in a minute")


def _toolbox(run: Run, overrides: Mapping[str, Callable[..., Any]] | None = None) -> Toolbox:
    functions = {**orders.mini_tools(), **(overrides or {})}
    definitions = [t.definition() for t in orders.make_tools()]
    return Toolbox({n: _instrument(n, f, run) for n, f in functions.items()}, definitions)


# ---------------------------------------------------------------- the scripted models

def _readable(o: Observation) -> Observation:
    """``o`` as a real model would read it, whatever format the loop chose.

    A Python literal (``str(dict)``) or a list of text blocks becomes JSON text, and a result
    that is not JSON is read as an error message even if the loop forgot ``is_error`` (the
    order tools answer in JSON; only errors are prose). The checks still look at the flag
    the loop really sent.
    """
    content = o.content
    try:
        json.loads(content)
        return o
    except ValueError:
        pass
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return replace(o, is_error=True)
    if isinstance(value, list) and all(isinstance(b, dict) for b in value):
        return _readable(replace(o, content=text_of(value)))
    if isinstance(value, dict | int | float):
        return replace(o, content=json.dumps(value))
    return replace(o, is_error=True)


def _last(messages: list[Message]) -> Observation | None:
    seen = last_observations(messages)
    return _readable(seen[-1]) if seen else None


def _orders_model(kind: str, first: dict[str, Any] | None = None
                  ) -> Callable[[list[Message]], Any]:
    """The order world's model ``kind`` (see :func:`primer.scenarios.orders.decide`), reading
    results leniently; ``first`` replaces its first action."""

    def respond(messages: list[Message]) -> Any:
        last = _last(messages)
        if last is None and first is not None:
            return action_reply(first)
        return action_reply(orders.decide(kind, call_number(messages), last))

    return respond


_happy = _orders_model("recover", first={"tool": "get_order", "input": {"order_id": "A123"},
                                         "thought": "I need the order first."})


def _unknown_tool(messages: list[Message]) -> Any:
    last = _last(messages)
    if last is None:
        return tool_reply(("lookup_order", {"order_id": "A123"}),
                          text="I'll look the order up.")
    if last.name == "lookup_order":
        if "get_order" not in last.content:
            return text_reply("I have no tool that looks orders up, so I cannot answer.")
        return action_reply({"tool": "get_order", "input": {"order_id": "A123"},
                             "thought": "The error lists get_order; using that."})
    return _happy(messages)


def _tool_raises(messages: list[Message]) -> Any:
    seen = last_observations(messages)
    if not seen:
        return action_reply({"tool": "get_order", "input": {"order_id": "A123"}})
    return text_reply(f"I could not look the order up: {seen[-1].content}")


def _two_calls(messages: list[Message]) -> Any:
    seen = last_observations(messages)
    if not seen:
        return tool_reply(("get_order", {"order_id": "A123"}),
                          ("get_order", {"order_id": "B456"}),
                          text="I'll look both orders up at once.")
    items = [_item(_readable(o)) for o in seen]
    return text_reply(f"Order A123 is {items[0]}; order B456 is {items[-1]}.")


def _item(o: Observation) -> str:
    try:
        return f"a {json.loads(o.content)['item']}"
    except (ValueError, KeyError, TypeError):
        return "unknown"


#: What the cut-off reply holds: a ``get_order`` call whose input stopped mid-id.
CUT_OFF_INPUT = {"order_id": "A1"}


def _cut_off(messages: list[Message]) -> Any:
    if len(messages) == 1:
        reply = tool_reply(("get_order", CUT_OFF_INPUT), text="Looking up order A1")
        return Reply(reply.content, "max_tokens")
    return text_reply("Order A1 could not be found.")


REFUSAL_TEXT = "I can't help with that request."


def _refusal(messages: list[Message]) -> Any:
    return text_reply(REFUSAL_TEXT, stop_reason="refusal")


#: The final reply of the "answer in two text blocks" behaviour: a model may split its
#: answer over several text blocks (the answer is all of them, joined).
ANSWER_BLOCKS = ("Order A123 is 2 keyboards at 2500 rupees each.",
                 "With 18% GST the total is 5900.0 rupees.")


def _two_text_blocks(messages: list[Message]) -> Any:
    reply = _happy(messages)
    if reply.stop_reason != "end_turn":
        return reply
    return Reply([text_block(t) for t in ANSWER_BLOCKS], "end_turn")


# ---------------------------------------------------------------- judging a run

def _stopped(run: Run, expected: str, answer: bool) -> str | None:
    """``None`` when the run stopped with ``expected`` (and an answer iff ``answer``)."""
    got = run.result["stop_cause"]
    if got != expected:
        early = (f"; the run may make {run.max_steps} model calls: stop with 'max_steps' only "
                 f"once they are used" if got == "max_steps" and run.calls < run.max_steps
                 else "")
        return (f"stopped with {got!r} after {_calls(run.calls)}; expected {expected!r}"
                f"{early}")
    if answer and not run.result["answer"]:
        return f"stopped with {expected!r} but returned no answer text"
    if not answer and run.result["answer"] is not None:
        return (f"stopped with {expected!r} but returned an answer "
                f"({_short(run.result['answer'])}); a stopped run's answer must be None")
    return None


def _calls(n: int) -> str:
    return f"{n} model call{'s' if n != 1 else ''}"


def _short(text: Any, limit: int = 50) -> str:
    text = shown(text)
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _answered_5900(run: Run) -> str | None:
    problem = _stopped(run, "end_turn", answer=True)
    if problem:
        return problem
    if "5900" not in str(run.result["answer"]):
        return f"answered {_short(run.result['answer'])}; expected the model's 5900.0 answer"
    return None


def _error_result(run: Run, reply_no: int, what: str, must_mention: tuple[str, ...] = ()
                  ) -> str | None:
    block = run.result_for(reply_no)
    if block is None:
        return f"{what} got no tool_result"
    if block.get("is_error") is not True:
        return f"{what}'s tool_result was not marked \"is_error\": True"
    content = block.get("content")
    text = content if isinstance(content, str) else text_of(content or [])
    missing = [m for m in must_mention if m not in text]
    if missing:
        return (f"{what}'s error result {_short(text)} does not mention "
                f"{', '.join(missing)}; say what went wrong and how to fix the call")
    return None


def judge_happy(run: Run) -> str | None:
    """Answers 5900.0 with ``end_turn``; ``get_order`` and ``calculator`` each ran once."""
    runs = (run.runs_of("get_order"), run.runs_of("calculator"))
    if run.result["stop_cause"] != "end_turn":
        return _stopped(run, "end_turn", answer=True)
    if runs != (1, 1):
        return (f"get_order ran {runs[0]} and calculator {runs[1]} time(s); each should "
                f"run once")
    return _answered_5900(run)


def judge_text_blocks(run: Run) -> str | None:
    """Answers with the text of every text block of the final reply, joined."""
    problem = _stopped(run, "end_turn", answer=True)
    if problem:
        return problem
    missing = [t for t in ANSWER_BLOCKS if t not in run.result["answer"]]
    if missing:
        return (f"answered {_short(run.result['answer'], 60)}, but the final reply holds "
                f"{len(ANSWER_BLOCKS)} text blocks and the answer misses {_short(missing[0])}; "
                f"the answer is the text of every text block, joined, not one block such as "
                f"content[0]")
    return None


def judge_wrong_argument(run: Run) -> str | None:
    """The call with a wrong argument name gets an error result; the model then recovers."""
    return _error_result(run, 1, "the call with a wrong argument") or _answered_5900(run)


def judge_unknown_tool(run: Run) -> str | None:
    """An unknown tool gets an error result listing the real tools; nothing else runs."""
    if run.runs_of("lookup_order"):
        return (f"lookup_order, a tool that does not exist, ran "
                f"{run.runs_of('lookup_order')} time(s)")
    return (_error_result(run, 1, "the unknown tool", ("get_order", "calculator"))
            or _answered_5900(run))


def judge_tool_raises(run: Run) -> str | None:
    """A tool that raises becomes an error result carrying its message; the run goes on."""
    return (_error_result(run, 1, "the failing tool", ("order service unavailable",))
            or _stopped(run, "end_turn", answer=True))


def judge_two_calls(run: Run) -> str | None:
    """Both calls of one reply run and both results reach the model (one message, in order)."""
    if run.runs_of("get_order") != 2:
        return f"get_order ran {run.runs_of('get_order')} time(s); both calls should run"
    problem = _stopped(run, "end_turn", answer=True)
    if problem:
        return problem
    if "keyboard" not in run.result["answer"] or "monitor" not in run.result["answer"]:
        return f"answered {_short(run.result['answer'])}; expected both orders' items"
    return None


def judge_repeats(run: Run) -> str | None:
    """Stops with ``loop_detected`` on the third identical request, not at the step limit."""
    problem = _stopped(run, "loop_detected", answer=False)
    if problem:
        return problem + (f": count the requests of each tool with the same input and stop "
                          f"with 'loop_detected' on request {REPEAT_THRESHOLD}"
                          if run.result["stop_cause"] != "loop_detected" else "")
    if run.calls > REPEAT_THRESHOLD:
        return (f"detected the loop only after {_calls(run.calls)}; stop on request "
                f"{REPEAT_THRESHOLD} of the same call")
    late = _ran_from(run, REPEAT_THRESHOLD)
    if late:
        return (f"ran the repeated {late[0]} call of request {REPEAT_THRESHOLD} before "
                f"stopping; check repeats before running tools, so the repeated call never runs")
    return None


def judge_wanders(run: Run, max_steps: int) -> str | None:
    """Stops with ``max_steps`` after exactly ``max_steps`` model calls.

    The model never finishes, so a loop that stops sooner gave up early and one that
    goes on ignored the limit; either way the line says how many calls it made.
    """
    if run.calls > max_steps:
        return (f"made {_calls(run.calls)} with max_steps={max_steps}; stop after exactly "
                f"{max_steps}")
    problem = _stopped(run, "max_steps", answer=False)
    if problem:
        return problem
    if run.calls < max_steps:
        return (f"stopped with 'max_steps' after {_calls(run.calls)} with "
                f"max_steps={max_steps}; the model had not finished, so make all "
                f"{max_steps} calls before stopping")
    late = _ran_from(run, max_steps)
    if late:
        return (f"ran the {late[0]} call of reply {max_steps}, the last the limit allows; no "
                f"model call would read its result, so stop with 'max_steps' before running it")
    return None


def _ran_from(run: Run, reply: int) -> list[str]:
    """The names of the tools that ran after reply ``reply`` (1-based) or a later one."""
    return [name for after, name, _ in run.tool_runs if after >= reply]


def _crossed(run: Run, budget: int) -> int | None:
    return next((k for k, t in enumerate(run.tokens, start=1) if t > budget), None)


def ran_past_budget(run: Run, budget: int) -> str | None:
    """A tool of the reply that crossed the budget (or a later one) ran."""
    crossed = _crossed(run, budget)
    late = _ran_from(run, crossed) if crossed else []
    if late:  # so a reply crossed the budget
        return (f"reply {crossed} took the total to {run.tokens[cast(int, crossed) - 1]:,} "
                f"tokens, past the {budget:,}-token budget, and its {late[0]} call still ran; "
                f"check the budget before running tools (it counts input + output tokens, "
                f"summed over every reply so far)")
    return None


def judge_budget(run: Run, budget: int) -> str | None:
    """Stops with ``token_budget`` at the first reply whose running total passes the budget,
    before running that reply's tools."""
    totals = run.tokens
    crossed = _crossed(run, budget)
    if crossed is not None:
        if run.calls > crossed:
            return (f"kept calling the model after reply {crossed} passed the "
                    f"{budget:,}-token budget ({totals[crossed - 1]:,} tokens)")
    problem = _stopped(run, "token_budget", answer=False)
    if problem and run.replies:
        problem += f" (used {totals[-1]:,} tokens of a {budget:,}-token budget)"
    return problem


def ran_cut_off_tool(run: Run) -> str | None:
    """A tool ran after a reply cut off at ``max_tokens``."""
    if run.tool_runs:
        _, name, given = run.tool_runs[0]
        return (f"the cut-off reply's tool ran ({name} with {short(given, 80)}); it must "
                f"not (its input may be half-written)")
    return None


def judge_cut_off(run: Run) -> str | None:
    """Stops with ``max_tokens`` and no answer."""
    return _stopped(run, "max_tokens", answer=False)


def called_after_refusal(run: Run) -> str | None:
    """The model was called again after its refusal (the one reply of this behaviour; a
    request the checker refused counts too, unless the history itself is what is wrong)."""
    history_wrong = (run.violation or "").startswith("the model was called again after reply")
    if (run.calls > 1 or run.violation) and not history_wrong:
        return ("called the model again after a reply with stop_reason 'refusal'; a refusal "
                "ends the run: stop with stop_cause 'refusal' and answer None")
    return None


def judge_refusal(run: Run) -> str | None:
    """Stops with ``refusal`` and no answer: a refusal's text is not an answer."""
    if run.result["answer"] == REFUSAL_TEXT:
        return (f"returned the refusal's text {_short(REFUSAL_TEXT)} as the answer with "
                f"stop_cause {run.result['stop_cause']!r}; a refusal is not an answer")
    return _stopped(run, "refusal", answer=False)


# ---------------------------------------------------------------- what a passing run did
# Each takes a run its judge passed and says what happened in it, from the run itself.

def _answered(run: Run) -> str:
    return f"answered with {run.result['stop_cause']} after {_calls(run.calls)}"


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _first_call(run: Run) -> str:
    uses = run.tool_uses(1)
    return uses[0]["name"] if uses else "the first"


def did_happy(run: Run) -> str:
    """What a passing happy-path run did: its tool runs and its answer."""
    return (f"ran get_order {_times(run.runs_of('get_order'))} and calculator "
            f"{_times(run.runs_of('calculator'))}, then answered "
            f"{_short(run.result['answer'], 60)} with {run.result['stop_cause']} after "
            f"{_calls(run.calls)}")


def did_join_text(run: Run) -> str:
    """What a passing two-text-blocks run did: the answer it read from both blocks."""
    return (f"joined the final reply's {len(ANSWER_BLOCKS)} text blocks into the answer "
            f"{_short(run.result['answer'], 60)}; {_answered(run)}")


def did_recover(run: Run) -> str:
    """What a passing wrong-argument run did: the error result, then the answer."""
    uses = run.tool_uses(1)
    given = uses[0]["input"] if uses else {}
    return (f"sent the {_first_call(run)} call with {short(given, 80)} back as an error "
            f"result; the model fixed it and {_answered(run)}")


def did_unknown_tool(run: Run) -> str:
    """What a passing unknown-tool run did: the error result and the tools it named."""
    block = run.result_for(1) or {}
    content = block.get("content")
    text = content if isinstance(content, str) else text_of(content or [])
    named = [n for n in ("get_order", "calculator") if n in text]
    return (f"answered {_first_call(run)} with an error naming {', '.join(named)}; the "
            f"model then {_answered(run)}")


def did_survive_raise(run: Run) -> str:
    """What a passing tool-that-raises run did: the error result, then the run going on."""
    return (f"turned {_first_call(run)}'s exception into an error result; the run went on "
            f"and the model {_answered(run)}")


def did_two_calls(run: Run) -> str:
    """What a passing two-calls run did: how many calls ran and how they were answered."""
    names = sorted({u["name"] for u in run.tool_uses(1)})
    return (f"ran the {len(run.tool_uses(1))} {', '.join(names)} calls of reply 1 and "
            f"answered them in one user message, in order; the model then {_answered(run)}")


def _most_requests(run: Run) -> int:
    """The most times one tool with one input was requested over the run."""
    seen: dict[str, int] = {}
    for k in range(1, run.calls + 1):
        for use in run.tool_uses(k):
            key = json.dumps([use["name"], use["input"]], sort_keys=True, default=str)
            seen[key] = seen.get(key, 0) + 1
    return max(seen.values(), default=0)


def did_stop(run: Run) -> str:
    """What a passing stopped run did: its stop cause and its model calls."""
    return (f"stopped with {run.result['stop_cause']} after {_calls(run.calls)} and no "
            f"answer")


def did_detect_loop(run: Run) -> str:
    """What a passing repeat run did: when it stopped, and on which identical request."""
    return f"{did_stop(run)}, on request {_most_requests(run)} of the same call"


def did_stop_at_budget(run: Run, budget: int) -> str:
    """What a passing tight-budget run did: the reply that crossed the budget, its tool."""
    crossed = _crossed(run, budget)
    if crossed is None:  # not reached by a passing run; said plainly all the same
        return f"{did_stop(run)}, within the {budget:,}-token budget"
    names = [u["name"] for u in run.tool_uses(crossed)] or ["no"]
    return (f"stopped with token_budget at reply {crossed} ({run.tokens[crossed - 1]:,} "
            f"tokens, past the {budget:,}-token budget); its {', '.join(names)} call never "
            f"ran")


def did_skip_cut_off(run: Run) -> str:
    """What a passing cut-off run did: stopped, and the half-written call never ran."""
    return f"{did_stop(run)}; the half-written {_first_call(run)} call never ran"


# ---------------------------------------------------------------- the battery

@dataclass(frozen=True)
class Behaviour:
    """One check of the battery: a scripted model, the tools, the limits and a judge.

    ``policy`` is a :class:`ScriptedLLM` policy (a function of the message list);
    ``overrides`` replaces some of the order world's tools; ``judge(run)`` returns ``None``
    when the run behaved, else one line saying what was expected and what happened.
    ``forbidden(run)``, when given, names a tool run that must not happen; it is judged
    first, even when the loop then crashed (running the tool is the fault, the crash only
    its consequence). ``passed(run)`` says what a run the judge passed did (the line
    printed on success), computed from the run.
    """

    name: str
    policy: Callable[[list[Message]], Any]
    judge: Callable[[Run], str | None]
    passed: Callable[[Run], str]
    max_steps: int = 6
    token_budget: int = 50_000
    forbidden: Callable[[Run], str | None] | None = None
    overrides: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


#: The tight budget: the happy path's first reply fits, its second reply (a calculator call)
#: takes the running total past it.
TIGHT_BUDGET = 450
WANDER_STEPS = 4

BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour("happy path", _happy, judge_happy, did_happy),
    Behaviour("wrong argument", _orders_model("recover"), judge_wrong_argument, did_recover),
    Behaviour("unknown tool", _unknown_tool, judge_unknown_tool, did_unknown_tool),
    Behaviour("tool that raises", _tool_raises, judge_tool_raises, did_survive_raise,
              overrides={"get_order": order_service_down}),
    Behaviour("two calls in one reply", _two_calls, judge_two_calls, did_two_calls),
    Behaviour("model that repeats itself", _orders_model("repeat"), judge_repeats,
              did_detect_loop, max_steps=10),
    Behaviour("model that wanders", _orders_model("wander"),
              functools.partial(judge_wanders, max_steps=WANDER_STEPS), did_stop,
              max_steps=WANDER_STEPS),
    Behaviour("tight budget", _happy, functools.partial(judge_budget, budget=TIGHT_BUDGET),
              functools.partial(did_stop_at_budget, budget=TIGHT_BUDGET),
              token_budget=TIGHT_BUDGET,
              forbidden=functools.partial(ran_past_budget, budget=TIGHT_BUDGET)),
    Behaviour("cut-off reply", _cut_off, judge_cut_off, did_skip_cut_off,
              forbidden=ran_cut_off_tool),
    Behaviour("refusal", _refusal, judge_refusal, did_stop, forbidden=called_after_refusal),
    Behaviour("answer in two text blocks", _two_text_blocks, judge_text_blocks,
              did_join_text),
)


@dataclass(frozen=True)
class LoopReport(ExerciseReport):
    """Every behaviour's :class:`CheckResult`, in battery order, and the score (an
    :class:`~primer.course.checking.ExerciseReport` whose cases are the battery's
    behaviours).

    ``str(report)`` is one line per behaviour and a last line ``score: k/n``.
    """

    #: Set when the loop could not be called the way the checker calls it (its signature,
    #: or its call of the model, is not the exercise's); the behaviours after the first were
    #: then not run. The text says what was wrong.
    interface_problem: str | None = None

    def __repr__(self) -> str:
        return f"LoopReport(score={self.score}/{self.total}, failed={self.failed})"


TASK = orders.TASK


def check_loop(fn: LoopFn, *, behaviours: tuple[Behaviour, ...] = BEHAVIOURS,
               show: bool = True) -> LoopReport:
    """Run the learner's loop ``fn`` once per behaviour and judge each run.

    ``fn(model, task, tools, *, max_steps, token_budget) -> {"answer", "stop_cause"}`` (see
    the module docstring). Prints the report when ``show`` is true and returns it. Never
    raises because of ``fn``: an exception in it, a broken message list, a runaway loop or a
    malformed result is that behaviour's failure. A loop that keeps calling the model or the
    tools is stopped after :data:`MAX_MODEL_CALLS` model calls or :data:`MAX_TOOL_RUNS` tool
    runs; one that spins without calling either cannot be stopped from here. This runs the
    loop in the caller's process, for a notebook's own cell: to grade code you did not write,
    use :func:`primer.course.loop_process.check_loop_file` (a child process, a time limit).

    When the first behaviour shows that ``fn`` cannot be called as
    :data:`~primer.course.loop_interface.LOOP_SIGNATURE`, or that it calls the model some
    other way than :data:`MODEL_SIGNATURE`, the other behaviours are not run (they would all
    fail the same way) and the report's ``interface_problem`` says what was wrong. Raises
    ``TypeError`` only when ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"check_loop needs your loop function, e.g. check_loop(my_loop); "
                        f"got {type(fn).__name__}")
    return run_battery(functools.partial(_check_one, fn), behaviours, show=show)


#: One behaviour checked: its verdict, and what is wrong with how the loop is called (or
#: ``None``). What :func:`run_battery` needs from a way of running the loop.
CheckOne = Callable[[Behaviour], tuple[CheckResult, str | None]]


def run_battery(check_one: CheckOne, behaviours: tuple[Behaviour, ...], *,
                show: bool = True) -> LoopReport:
    """``check_one`` on each behaviour in order, as a :class:`LoopReport`.

    Stops after the first behaviour whose check names an interface problem (the others are
    reported as not run). Used by :func:`check_loop` (the loop in this process) and by
    :func:`primer.course.loop_process.check_loop_file` (the loop in a child process).
    """
    results: list[CheckResult] = []
    interface = None
    for behaviour in behaviours:
        result, interface = check_one(behaviour)
        results.append(result)
        if interface:
            results += [CheckResult(b.name, False, "not run: fix how the loop is called "
                                                   f"first ({results[0].name} says how)")
                        for b in behaviours[len(results):]]
            break
    report = LoopReport(tuple(results), interface)
    if show:
        print(report)
    return report


def watched(behaviour: Behaviour) -> tuple[Run, Toolbox, CheckedModel]:
    """A fresh :class:`Run` for ``behaviour``, and the instrumented tools and model that
    record into it (the model answers with the behaviour's scripted policy)."""
    run = Run(max_steps=behaviour.max_steps)
    tools = _toolbox(run, behaviour.overrides)
    return run, tools, CheckedModel(behaviour.policy, TASK, tools.definitions, run)


def _check_one(fn: LoopFn, behaviour: Behaviour) -> tuple[CheckResult, str | None]:
    """Run one behaviour in this process and judge it (see :func:`verdict`)."""
    run, tools, model = watched(behaviour)
    kind = None
    try:
        run.result = fn(model, TASK, tools, max_steps=behaviour.max_steps,
                        token_budget=behaviour.token_budget)
    except _CheckStopped:
        pass
    except KeyboardInterrupt:
        raise  # the person at the keyboard stops the check
    except BaseException as e:  # noqa: BLE001 - the learner's failure (sys.exit included) is
        run.error = describe_loop_exception(e, fn)  # the report, never the checker's exit
        kind = interface_kind(e, fn)
    return verdict(run, behaviour, kind)


def verdict(run: Run, behaviour: Behaviour, kind: str | None
            ) -> tuple[CheckResult, str | None]:
    """Judge a finished run: its :class:`CheckResult`, and the interface problem (or None).

    ``kind`` is :func:`~primer.course.loop_interface.interface_kind` of the exception the
    loop raised (``None`` when it returned, or raised something else). The first problem
    wins, in this order: how the loop was called, a forbidden tool run, a broken request
    (``run.violation``), the loop's failure (``run.error``), the shape of its result, no
    model call, then the behaviour's judge.
    """
    interface = None
    if kind == "model call":
        interface = run.error
    elif run.misuse:  # the loop caught the ModelCallError and went on
        interface = run.misuse
    elif kind == "signature":
        interface = run.error
    problem = interface or (behaviour.forbidden(run) if behaviour.forbidden else None)
    problem = problem or run.violation or run.error or _result_problem_guarded(run.result)
    if problem is None and run.calls == 0:
        problem = (f"returned stop_cause {run.result['stop_cause']!r} without calling the "
                   f"model; call {MODEL_SIGNATURE} first")
    if problem is None:
        problem = behaviour.judge(run)
    return (CheckResult(behaviour.name, problem is None,
                        problem if problem is not None else behaviour.passed(run)),
            interface)


def _result_problem_guarded(result: Any) -> str | None:
    """:func:`result_problem`, for a value whose own methods may raise."""
    try:
        return result_problem(result)
    except Exception as e:  # noqa: BLE001 - a value that cannot be read is the loop's fault
        return (f"returned a value the checker cannot read ({type(e).__name__}: "
                f"{_short(e)}); return a plain dict {{'answer': str | None, "
                f"'stop_cause': str}}")


def result_problem(result: Any) -> str | None:
    """What is wrong with the shape of a loop's return value, or ``None``."""
    if isinstance(result, Mapping) and "stop_reason" in result and "stop_cause" not in result:
        return (f"returned {{'stop_reason': {result['stop_reason']!r}}}; stop_reason is the "
                f"model's field in each reply: return the loop's own reason to stop as "
                f"{{'answer': ..., 'stop_cause': ...}}")
    if not isinstance(result, Mapping) or not {"answer", "stop_cause"} <= set(result):
        return (f"returned {_short(repr(result))}; return a dict "
                f"{{'answer': str | None, 'stop_cause': str}}")
    if result["stop_cause"] not in STOP_CAUSES:
        return (f"returned stop_cause {result['stop_cause']!r}; use one of "
                f"{', '.join(STOP_CAUSES)}")
    if result["answer"] is not None and not isinstance(result["answer"], str):
        return f"returned an answer of type {type(result['answer']).__name__}; use str or None"
    return None
