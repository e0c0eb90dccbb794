"""Lesson 01's exercise: build the request a harness with memory sends on call ``n``.

The learner writes ``request_for_call(system, turns, replies, n)``. ``turns`` are the
user's messages in order (strings), ``replies`` the model's replies received so far (each a
reply's ``content``: a string or a list of blocks), reply ``k`` answering turn ``k``;
``n`` counts calls from 1. It returns ``{"system": system, "messages": [...]}``: the system
prompt beside the list, and in the list the first ``n`` turns with the ``n - 1`` replies
between them (``user``, ``assistant``, ..., ``user``), each reply copied unchanged. Replies
after call ``n - 1`` are not sent: call ``n`` happens before them.

:func:`check_request_for_call` runs it on conversations of its own, so a function that
passes has not been fitted to the lesson's example.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short

_SYSTEM = "You help customers of a bicycle shop. Be brief."
_TURNS = ["Hi, I'm Meera. I bought a blue bicycle last week.",
          "The front brake squeaks.",
          "Can I bring it in on Saturday?",
          "What was my name again?"]
_REPLIES: list[Any] = ["Hello Meera, thanks for buying from us.",
                       "A squeaking brake usually needs its pads cleaned.",
                       [{"type": "text", "text": "Yes, we are open 10 to 6 on Saturday."}],
                       "You are Meera."]


def _fresh(turns: list[str], replies: list[Any]) -> tuple[list[str], list[Any]]:
    """Deep copies of ``turns`` and ``replies`` for the learner's function: what it does to
    them (a block changed in place, a list appended to) cannot reach the check's own data,
    so the expected answer and later runs in the same kernel stay as written."""
    return copy.deepcopy(turns), copy.deepcopy(replies)


def _same(got: Any, want: Any) -> bool:
    """``got == want`` for JSON-like data, with every value of ``got`` of the exact type of
    the one in ``want``: a str subclass whose ``__eq__`` always says yes is not a str."""
    if type(got) is not type(want):
        return False
    if type(want) is dict:
        return (all(type(k) is str for k in got) and got.keys() == want.keys()
                and all(_same(got[k], want[k]) for k in want))
    if type(want) is list:
        return len(got) == len(want) and all(map(_same, got, want))
    return bool(got == want)


def _block_keys(got: Any, want: Any) -> str:
    """`` (block 1 has keys [...], the reply's has [...])`` for the first block of a reply
    whose keys differ from the reply's (a key added in place), else ``""``."""
    if not (isinstance(got, list) and isinstance(want, list) and len(got) == len(want)):
        return ""
    for k, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        if isinstance(g, dict) and isinstance(w, dict) and set(map(str, g)) != set(w):
            return f" (block {k} has keys {sorted(map(str, g))}, the reply's has {sorted(w)})"
    return ""


def _expected(turns: list[str], replies: list[Any], n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for k in range(n):
        messages.append({"role": "user", "content": turns[k]})
        if k < n - 1:
            messages.append({"role": "assistant", "content": replies[k]})
    return messages


def _roles(messages: list[Any]) -> str:
    return ", ".join(str(m.get("role")) if isinstance(m, dict) else type(m).__name__
                     for m in messages)


def _request_problem(request: Any, system: str) -> Problem:
    """What is wrong with the shape of ``request`` (not its messages' contents)."""
    if not isinstance(request, dict):
        return (f"returned {type(request).__name__} {short(request)}; return a dict "
                f"{{'system': system, 'messages': [...]}}")
    if "messages" not in request or not isinstance(request["messages"], list):
        return (f"the request has no 'messages' list (keys: {sorted(map(str, request))}); "
                f"put the message list under 'messages'")
    roles = [m.get("role") if isinstance(m, dict) else None for m in request["messages"]]
    if "system" in roles:
        return ("the list holds a message with role 'system'; the Messages API takes the "
                "system prompt as its own parameter: request['system'], beside the list")
    if not _same(request.get("system"), system):
        return (f"request['system'] is {short(request.get('system'))!r}, expected the "
                f"system prompt {short(system)!r} (a str): it travels beside the list on "
                f"every call")
    bad = [m for m in request["messages"]
           if not isinstance(m, dict) or set(m) != {"role", "content"}]
    if bad:
        return (f"each message is a dict with exactly 'role' and 'content'; got "
                f"{short(bad[0], 70)}")
    return None


def _call_problem(fn: Callable[..., Any], turns: list[str], replies: list[Any], n: int
                  ) -> Problem:
    """Call ``fn`` for call ``n`` and compare its messages with what a harness sends."""
    request = fn(_SYSTEM, *_fresh(turns, replies), n)
    problem = _request_problem(request, _SYSTEM)
    if problem:
        return problem
    got, want = request["messages"], _expected(turns, replies, n)
    if _same(got, want):
        return None
    if len(got) != len(want):
        hint = ("only the newest turn was sent: add the earlier turns and the model's "
                "replies to them" if len(got) == 1 and len(want) > 1 else
                "a reply the model had not written yet was sent: call n sends only "
                "replies 1 to n - 1" if len(got) > len(want) else
                "send the first n turns with the n - 1 replies between them")
        return (f"call {n}: expected {len(want)} messages ({_roles(want)}), got "
                f"{len(got)} ({_roles(got)}); {hint}")
    for i, (g, w) in enumerate(zip(got, want, strict=True), start=1):
        if not _same(g["role"], w["role"]):
            return (f"call {n}: message {i} has role {g['role']!r}, expected {w['role']!r}; "
                    f"the list alternates user, assistant, ..., and ends with the newest "
                    f"user turn")
        if not _same(g["content"], w["content"]):
            hint = ("copy each reply's content unchanged, blocks and all"
                    if w["role"] == "assistant" else "put the turns in the order they came")
            return (f"call {n}: message {i} ({w['role']}) holds {short(g['content'])!r}, "
                    f"expected {short(w['content'])!r}{_block_keys(g['content'], w['content'])}"
                    f"; {hint}")
    return ("the messages differ from what a harness with memory sends; build them from "
            "plain dicts, lists and strings")  # pragma: no cover


def _leaves_inputs_alone(fn: Callable[..., Any]) -> Problem:
    # call 4 sends reply 3, a list of blocks: a block changed in place shows here
    turns, replies = _fresh(_TURNS, _REPLIES)
    before = copy.deepcopy((turns, replies))
    first = copy.deepcopy(fn(_SYSTEM, turns, replies, 4))
    if not (_same(turns, before[0]) and _same(replies, before[1])):
        return ("your function changed the turns or replies it was given (a list appended "
                "to, or a reply's block changed in place); build a new list and copy each "
                "reply's content unchanged")
    second = fn(_SYSTEM, turns, replies, 4)
    if first != second:
        return ("two calls with the same arguments returned different requests: is a list "
                "kept between calls (a default argument, a global)? Start a new list each "
                "call")
    return _request_problem(second, _SYSTEM)


def _cases() -> list[Case]:
    later = _REPLIES  # every reply of the conversation, as when counting a finished one
    return [
        Case("first call",
             lambda fn: _call_problem(fn, _TURNS, [], 1),
             "call 1 sends the first turn alone, the system prompt beside it"),
        Case("system prompt beside the list",
             lambda fn: _request_problem(fn(_SYSTEM, *_fresh(_TURNS, later), 2), _SYSTEM),
             "request['system'] holds the system prompt; no message has role 'system'"),
        Case("call 3 re-sends the history",
             lambda fn: _call_problem(fn, _TURNS, _REPLIES[:2], 3),
             "user, assistant, user, assistant, user: the whole conversation so far"),
        Case("no reply from a later call",
             lambda fn: _call_problem(fn, _TURNS, later, 2),
             "given every reply, call 2 sends only reply 1"),
        Case("a reply's blocks copied unchanged",
             lambda fn: _call_problem(fn, _TURNS, later, 4),
             "call 4 sends seven messages, the block list of reply 3 as it came"),
        Case("inputs left alone",
             _leaves_inputs_alone,
             "the caller's lists are unchanged and the same call gives the same request"),
    ]


def check_request_for_call(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge lesson 01's ``request_for_call(system, turns, replies, n) -> dict``.

    ``fn`` receives a system prompt (str), the user's turns (list of str), the model's
    replies (list of reply contents, str or list of blocks; possibly more than ``n - 1`` of
    them) and the call number ``n`` (1-based), and must return ``{"system": str,
    "messages": list}`` with the first ``n`` turns and the ``n - 1`` replies between them.
    Six cases on a conversation the learner did not write; prints one PASS/FAIL line each
    and the score when ``show``. Raises ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, _cases(), what="request_for_call", show=show)
