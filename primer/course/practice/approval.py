"""Lesson 08's exercise: pause a run for a person, and resume it on yes or on no.

The learner writes two functions:

* ``pause(messages, reply) -> saved``: ``messages`` is the list sent on the call that
  returned ``reply`` (a :class:`~primer.loop.model.Reply` asking for tool calls, one of
  which needs approval). ``saved`` holds everything needed to go on later, in another
  process: plain JSON data (``json.dumps`` must accept it), so no ``Reply``, no tools.
* ``resume_paused(saved, approved, tools) -> messages``: ``approved`` is the person's answer
  (``True`` for yes), ``tools`` a :class:`~primer.loop.tools.ToolRegistry` built afresh, as
  after a restart. It returns the list to send the model next: the saved list, the model's
  reply as an assistant message, then ONE user message with a ``tool_result`` for every
  ``tool_use`` of the reply, in request order. A call whose tool ``needs_approval`` runs
  only on yes; on no it does not run and its result is ``is_error: true`` with a text
  saying a person rejected it, so the model picks another path. Calls that need no
  approval run either way; every call runs at most once.

:func:`check_pause_resume` runs both on a small order-cancelling world of its own (its tools
count how often they run), so a pair that passes has not been fitted to the lesson's refund.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from primer.course.checking import (
    Case,
    ExerciseReport,
    Problem,
    describe_exception,
    run_cases,
    short,
)
from primer.loop.messages import text_block, tool_use_block
from primer.loop.model import Reply
from primer.loop.tools import ToolError, ToolRegistry, tool

_TASK = "Cancel order B-7 and tell me what it held."
_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": _TASK},
    {"role": "assistant", "content": [
        text_block("I will look the order up first."),
        tool_use_block("toolu_ck_01_1", "get_order", {"order_id": "B-7"})]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_ck_01_1",
         "content": '{"order_id": "B-7", "item": "garden hose"}', "is_error": False}]},
]
#: The calls a case's reply can ask for: id, tool name, input.
_CANCEL = ("toolu_ck_02_1", "cancel_order", {"order_id": "B-7"})
_LOOKUP = ("toolu_ck_02_2", "get_order", {"order_id": "B-7"})
_BROKEN = ("toolu_ck_02_1", "cancel_order", {"order_id": "B-404"})
_OTHER = ("toolu_ck_03_1", "get_order", {"order_id": "C-9"})


def _world() -> tuple[ToolRegistry, dict[str, int]]:
    """Fresh tools (as after a restart) and the count of each tool's runs."""
    runs = {"cancel_order": 0, "get_order": 0}

    @tool
    def get_order(order_id: str) -> dict:
        """Look an order up.

        Args:
          order_id: the order id, like B-7.
        """
        runs["get_order"] += 1
        return {"order_id": order_id, "item": "garden hose"}

    @tool(side_effecting=True, needs_approval=True)
    def cancel_order(order_id: str) -> str:
        """Cancel an order; it cannot be undone, so a person approves each call.

        Args:
          order_id: the order id, like B-7.
        """
        if order_id != "B-7":
            raise ToolError(f"no order {order_id!r} to cancel")
        runs["cancel_order"] += 1
        return f"cancelled order {order_id}"

    return ToolRegistry([get_order, cancel_order]), runs


def _reply(*calls: tuple[str, str, dict[str, Any]]) -> Reply:
    return Reply([text_block("Cancelling it, as asked."),
                  *(tool_use_block(i, n, dict(a)) for i, n, a in calls)], "tool_use")


def _session(pause: Callable[..., Any], resume: Callable[..., Any],
             calls: tuple[tuple[str, str, dict[str, Any]], ...], approved: bool
             ) -> tuple[Any, dict[str, int], Reply]:
    """pause on a reply asking for ``calls``, then resume with new tools (as after a
    restart); returns what resume returned, the count of each tool's runs, and the reply."""
    reply = _reply(*calls)
    saved = pause(copy.deepcopy(_HISTORY), reply)
    tools, runs = _world()
    return resume(saved, approved, tools), runs, reply


def _results(out: Any, reply: Reply) -> tuple[list[dict[str, Any]], Problem]:
    """The ``tool_result`` blocks of the last message of ``out``, or what is wrong with it."""
    if not isinstance(out, list):
        return [], (f"resume_paused returned {type(out).__name__} {short(out)}; return the "
                    f"message list to send the model next")
    last = out[-1] if out else None
    if not (isinstance(last, dict) and last.get("role") == "user"
            and isinstance(last.get("content"), list)):
        return [], (f"the last message is {short(last, 70)}; end the list with one user "
                    f"message whose content is the list of tool_result blocks")
    blocks = [b for b in last["content"] if isinstance(b, dict)
              and b.get("type") == "tool_result"]
    ids = [b.get("tool_use_id") for b in blocks]
    want = [c["id"] for c in reply.tool_uses]
    if ids == want:
        return blocks, None
    asked = [b for b in want if b not in ids]
    others = [m for m in out[len(_HISTORY):-1] if isinstance(m, dict) and m.get("role") == "user"]
    if asked and others:
        return blocks, (f"the last user message answers {ids}, and another user message comes "
                        f"before it; put every tool_result of the reply in ONE user message")
    if asked:
        return blocks, (f"no tool_result answers {asked} (the last message answers {ids}); "
                        f"every tool_use of the reply needs its tool_result, approved, "
                        f"rejected or not gated, or the API refuses the next call")
    if sorted(map(str, ids)) == sorted(want):
        return blocks, (f"the results answer {ids}, the reply asked in the order {want}; "
                        f"answer in request order")
    return blocks, f"the results answer {ids}; expected exactly {want}, once each"


def _ran(runs: dict[str, int], name: str, times: int, when: str) -> Problem:
    n = runs[name]
    if n == times:
        return None
    if times == 0:
        return (f"{name} ran {n} time(s) {when}; a call that needs approval must not run "
                f"unless the person said yes")
    if n == 0:
        return (f"{name} never ran {when}; run it with tools.run(call) and put "
                f".result_block() in the results")
    return f"{name} ran {n} times {when}; run each pending call exactly once"


def _rejection_problem(block: dict[str, Any]) -> Problem:
    content = block.get("content")
    if block.get("is_error") is not True:
        return (f"the rejected call's tool_result has is_error {block.get('is_error')!r}; "
                f"set is_error: True so the model reads it as a failed call")
    if "reject" not in str(content).lower():
        return (f"the rejected call's tool_result says {short(content)!r}; say that a person "
                f"rejected it (e.g. 'A person rejected this call; it did not run.') so the "
                f"model picks another path instead of retrying")
    return None


def _yes(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
    out, runs, reply = _session(pause, resume, (_CANCEL,), True)
    blocks, problem = _results(out, reply)
    if problem:
        return problem
    if (why := _ran(runs, "cancel_order", 1, "on yes")) is not None:
        return why
    if blocks[0].get("is_error") or "cancelled order B-7" not in str(blocks[0].get("content")):
        return (f"the approved call's tool_result is {short(blocks[0], 80)}; its content "
                f"should be the tool's output ('cancelled order B-7'), is_error false")
    return None


def _no(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
    out, runs, reply = _session(pause, resume, (_CANCEL,), False)
    if (why := _ran(runs, "cancel_order", 0, "on no")) is not None:
        return why
    blocks, problem = _results(out, reply)
    return problem or _rejection_problem(blocks[0])


def _tool_use_ids(saved: Any) -> set[str]:
    """The ids of every ``tool_use`` block (a dict with ``"id"``, ``"name"`` and
    ``"input"``) anywhere in the JSON data ``saved``."""
    found: set[str] = set()
    stack, seen = [saved], 0
    while stack and seen < 10_000:
        item, seen = stack.pop(), seen + 1
        if isinstance(item, dict):
            if {"id", "name", "input"} <= set(item) and isinstance(item["id"], str):
                found.add(item["id"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


#: What a saved state needs so another process can resume it.
_ON_ITS_OWN = ("save the pending tool_use blocks in what pause returns; resume must work from "
               "that alone, as in another process")


def _json(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
    reply = _reply(_CANCEL)
    saved = pause(copy.deepcopy(_HISTORY), reply)
    try:
        text = json.dumps(saved)
    except (TypeError, ValueError) as e:
        return (f"json.dumps(saved) failed ({type(e).__name__}: {short(e, 60)}); save plain "
                f"dicts and lists: reply.content, not the Reply object, and no tools")
    missing = [c["id"] for c in reply.tool_uses if c["id"] not in _tool_use_ids(json.loads(text))]
    if missing:
        return f"the saved state holds no tool_use block with id {missing}; {_ON_ITS_OWN}"
    # another run pauses before this one resumes: nothing kept in the process is this run's
    pause([{"role": "user", "content": "Look order C-9 up."}], _reply(_OTHER))
    tools, runs = _world()
    out = resume(json.loads(text), True, tools)
    last = out[-1].get("content") if isinstance(out, list) and out and isinstance(
        out[-1], dict) else None
    if isinstance(last, list) and any(isinstance(b, dict) and b.get("tool_use_id") == _OTHER[0]
                                      for b in last):
        return (f"resume answered {_OTHER[0]}, a call of a run paused after this one; "
                f"{_ON_ITS_OWN}")
    _, problem = _results(out, reply)
    if problem:
        return f"after a round trip through JSON: {problem}"
    return _ran(runs, "cancel_order", 1, "after a round trip through JSON")


def _history(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
    out, _, reply = _session(pause, resume, (_CANCEL,), True)
    _, problem = _results(out, reply)
    if problem:
        return problem
    n = len(_HISTORY)
    if out[:n] != _HISTORY:
        return ("the list does not start with the saved messages, unchanged; save the whole "
                "list the model was sent and send it again")
    if len(out) != n + 2 or out[n] != {"role": "assistant", "content": reply.content}:
        got = short(out[n] if len(out) > n else None, 60)
        return (f"after the saved messages comes {got}; the next message must be the model's "
                f"reply, {{'role': 'assistant', 'content': reply.content}} (its tool_use "
                f"blocks), and then the results")
    return None


def _two(approved: bool) -> Callable[[Callable[..., Any], Callable[..., Any]], Problem]:
    calls = (_LOOKUP, _CANCEL) if approved else (_CANCEL, _LOOKUP)
    when = "on yes" if approved else "on no"

    def probe(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
        out, runs, reply = _session(pause, resume, calls, approved)
        blocks, problem = _results(out, reply)
        if problem:
            return problem
        why = (_ran(runs, "get_order", 1, f"{when} (it needs no approval)")
               or _ran(runs, "cancel_order", 1 if approved else 0, when))
        if why:
            return why
        lookup = next(b for b in blocks if b.get("tool_use_id") == _LOOKUP[0])
        if lookup.get("is_error"):
            return (f"get_order needs no approval, but its result is an error: "
                    f"{short(lookup.get('content'))!r}; only gated calls wait for the answer")
        return None if approved else _rejection_problem(
            next(b for b in blocks if b.get("tool_use_id") == _CANCEL[0]))

    return probe


def _failing(pause: Callable[..., Any], resume: Callable[..., Any]) -> Problem:
    try:
        out, _, reply = _session(pause, resume, (_BROKEN,), True)
    except ToolError as e:
        return (f"{describe_exception(e, resume)}; run calls through tools.run(call), which "
                f"turns a failing tool into an is_error tool_result (lesson 04)")
    blocks, problem = _results(out, reply)
    if problem:
        return problem
    if blocks[0].get("is_error") is not True or "B-404" not in str(blocks[0].get("content")):
        return (f"the failing call's tool_result is {short(blocks[0], 80)}; expected "
                f"is_error true with the tool's message (no order 'B-404')")
    return None


def check_pause_resume(pause: Callable[..., Any], resume_paused: Callable[..., Any], *,
                       show: bool = True) -> ExerciseReport:
    """Judge the learner's ``pause(messages, reply) -> saved`` and
    ``resume_paused(saved, approved, tools) -> messages`` (see the module docstring).

    Seven cases on a world of the check's own: yes runs the gated call once and answers its
    ``tool_use_id``; no runs nothing and answers ``is_error`` saying a person rejected it;
    the saved state survives ``json.dumps``/``json.loads``, holds the reply's ``tool_use``
    blocks and resumes from that alone (another run pausing in between changes nothing);
    the list goes on from the saved messages and the model's reply; two calls of one reply
    where one needs approval, on yes and on no (both answered, in request order, in one
    user message; the other call runs once); an approved call whose tool fails becomes an
    error result. Prints one PASS/FAIL line per case and the score (``show=False``: silent)
    and returns the :class:`~primer.course.checking.ExerciseReport`. ``TypeError`` when
    ``pause`` or ``resume_paused`` is not callable.
    """
    if not callable(pause):
        raise TypeError(f"pass your functions themselves, e.g. check_pause_resume(pause, "
                        f"resume_paused); got {type(pause).__name__} for pause")

    def case(name: str, probe: Callable[[Callable[..., Any], Callable[..., Any]], Problem],
             passed: str) -> Case:
        return Case(name, lambda fn: probe(pause, fn), passed)

    cases = [
        case("yes runs the call once", _yes,
             "the approved call ran exactly once and its result answers its tool_use_id"),
        case("no runs nothing", _no,
             "nothing ran; an is_error result says a person rejected the call"),
        case("saved state is JSON", _json,
             "the saved state went through json.dumps and json.loads, holds the pending "
             "tool_use blocks, and resumed from that alone"),
        case("the list goes on", _history,
             "saved messages, then the model's reply, then one user message of results"),
        case("two calls, yes", _two(True),
             "both calls ran once and are answered in request order"),
        case("two calls, no", _two(False),
             "the ungated call ran once; the gated one is a rejection; both answered"),
        case("failing tool", _failing,
             "an approved call whose tool fails comes back as an is_error result"),
    ]
    return run_cases(resume_paused, cases, what="resume_paused", show=show)
