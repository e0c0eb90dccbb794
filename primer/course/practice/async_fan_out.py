"""Lesson 15's exercise: one reply's tool calls run at the same time on asyncio.

The learner writes ``async def fan_out(calls, tools) -> message``: ``calls`` is the list
of ``tool_use`` blocks of one reply (``{"type": "tool_use", "id", "name", "input"}``),
``tools`` a dict from tool name to an ``async def`` function called with the input as
keyword arguments. It returns ONE user message holding one ``tool_result`` per call, in the
order the calls were asked for, whatever order they finish in; a failure (unknown tool, a
tool that raises) is a result with ``"is_error": True`` saying what went wrong, and the
other calls' results are kept.

:func:`check_async_fan_out` runs it on its own event loop (so it works from a notebook,
whose kernel already runs one) with tools the learner has not seen. Concurrency is proven,
not timed: each "slow" tool waits until every call of the reply has started, so calls made
one after another never get there and the case fails after :data:`PATIENCE_S`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.loop.model import run_to_completion

FanOutFn = Callable[[list[dict[str, Any]], dict[str, Any]], Any]

#: Seconds a tool waits for the reply's other calls to start before it concludes that the
#: calls are not running at the same time.
PATIENCE_S = 1.0

#: Seconds one case waits for ``fan_out`` to return before it is cancelled and the case
#: fails (a hang, e.g. awaiting an event nobody sets).
HANG_S = 10.0


class _World:
    """Tools for one case: each records when it starts and ends; slow ones wait until all
    ``expected`` calls have started, then finish in reverse order of their delay."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.started: list[str] = []
        self.finished: list[str] = []
        self.all_started = asyncio.Event()
        self.overlapped = True

    def tools(self) -> dict[str, Any]:
        async def check_stock(warehouse: str) -> dict[str, Any]:
            self.started.append(warehouse)
            if len(self.started) >= self.expected:
                self.all_started.set()
            try:
                await asyncio.wait_for(self.all_started.wait(), PATIENCE_S)
            except asyncio.TimeoutError:
                self.overlapped = False
            await asyncio.sleep(0.001 * (10 - len(warehouse) % 10))  # finish out of order
            self.finished.append(warehouse)
            return {"warehouse": warehouse, "units": len(warehouse) * 3}

        async def failing_lookup(warehouse: str) -> dict[str, Any]:
            self.started.append(warehouse)
            if len(self.started) >= self.expected:
                self.all_started.set()
            raise ConnectionError(f"the {warehouse} warehouse did not answer")

        return {"check_stock": check_stock, "failing_lookup": failing_lookup}


def _call(i: int, name: str, warehouse: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i:02d}", "name": name,
            "input": {"warehouse": warehouse}}


def _run(fn: FanOutFn, calls: list[dict[str, Any]], world: _World) -> Any:
    async def go() -> Any:
        world.all_started = asyncio.Event()  # bound to this run's event loop
        returned = fn(calls, world.tools())
        if not asyncio.iscoroutine(returned):
            raise _NotAsync(returned)
        try:
            return await asyncio.wait_for(returned, HANG_S)
        except asyncio.TimeoutError:
            raise _Hung() from None
    return run_to_completion(go())


class _Hung(Exception):
    def __init__(self) -> None:
        super().__init__(f"fan_out did not return within {HANG_S:g} s and was cancelled: "
                         f"does it await something nothing ever finishes?")


class _NotAsync(Exception):
    def __init__(self, value: Any) -> None:
        super().__init__("fan_out returned without a coroutine: write it as async def "
                         f"fan_out(calls, tools) (it returned {short(repr(value))})")


def _results(message: Any, calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None,
                                                                  Problem]:
    if not isinstance(message, dict) or message.get("role") != "user":
        return None, (f"returned {short(repr(message), 70)}; return ONE user message "
                      f"{{'role': 'user', 'content': [tool_result, ...]}}")
    content = message.get("content")
    if not isinstance(content, list) or not all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return None, "the message's content must be a list of tool_result blocks"
    if len(content) != len(calls):
        return None, (f"{len(content)} tool_result blocks for {len(calls)} calls; answer "
                      f"every tool_use, once")
    asked = [c["id"] for c in calls]
    got = [b.get("tool_use_id") for b in content]
    if sorted(map(str, got)) != sorted(asked):
        return None, f"tool_use_ids {got}, the calls were {asked}; copy each call's id"
    if got != asked:
        return None, (f"results in the order {got}, the calls were asked {asked}: "
                      f"gather keeps request order; do not append as tasks finish")
    return content, None


def _parallel(fn: FanOutFn) -> Problem:
    places = ["Pune", "Delhi", "Kolkata", "Jaipur"]
    calls = [_call(i, "check_stock", p) for i, p in enumerate(places, 1)]
    world = _World(len(calls))
    content, problem = _results(_run(fn, calls, world), calls)
    if problem:
        return problem
    if not world.overlapped:
        return (f"the calls ran one after another (started {world.started}, each waited "
                f"{PATIENCE_S:g} s for the others); start them all, then await them "
                f"together (asyncio.gather or a TaskGroup)")
    assert content is not None
    for call, block in zip(calls, content, strict=True):
        want = {"warehouse": call["input"]["warehouse"],
                "units": len(call["input"]["warehouse"]) * 3}
        if not isinstance(block.get("content"), str) or _loads(block["content"]) != want:
            return (f"result for {call['id']} is {short(repr(block.get('content')), 60)}; "
                    f"send json.dumps of what the tool returned")
        if block.get("is_error"):
            return f"result for {call['id']} is marked is_error, but the call worked"
    return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _error_answer(fn: FanOutFn, calls: list[dict[str, Any]], world: _World, what: str,
                  must_say: str, fix: str) -> Problem:
    """Run ``calls``, whose second one fails (``what``): its result must be ``is_error``
    and mention ``must_say``; the other results must not be errors."""
    content, problem = _results(_run(fn, calls, world), calls)
    if problem:
        return problem
    assert content is not None
    bad = content[1]
    if bad.get("is_error") is not True or must_say not in str(bad.get("content")):
        return f"{what} came back as {short(repr(bad), 70)}; {fix}"
    if any(b.get("is_error") for i, b in enumerate(content) if i != 1):
        return "one call failed and the others were marked as errors too; keep their results"
    return None


def _failure(fn: FanOutFn) -> Problem:
    calls = [_call(1, "check_stock", "Pune"), _call(2, "failing_lookup", "Delhi"),
             _call(3, "check_stock", "Mumbai")]
    return _error_answer(fn, calls, _World(3), "the call that raised", "did not answer",
                         "catch the exception inside that call's task and return "
                         "is_error: True with its message")


def _unknown(fn: FanOutFn) -> Problem:
    calls = [_call(1, "check_stock", "Pune"), _call(2, "refund_order", "Delhi")]
    return _error_answer(fn, calls, _World(1),  # only the real tool runs
                         "a call to a tool that does not exist", "check_stock",
                         "answer it with is_error: True and name the tools there are")


def _one(fn: FanOutFn) -> Problem:
    calls = [_call(1, "check_stock", "Lucknow")]
    _, problem = _results(_run(fn, calls, _World(1)), calls)
    return problem


def _guarded(probe: Callable[[FanOutFn], Problem]) -> Callable[[FanOutFn], Problem]:
    """``probe``, with a ``fan_out`` that is not ``async def`` reported as such."""
    def run(fn: FanOutFn) -> Problem:
        try:
            return probe(fn)
        except (_NotAsync, _Hung) as e:
            return str(e)
    return run


CASES = (
    Case("four calls at once", _guarded(_parallel),
         "all four started before any finished; results in request order"),
    Case("one call raises", _guarded(_failure), "is_error result for it, the others kept"),
    Case("unknown tool", _guarded(_unknown), "is_error result naming the real tools"),
    Case("a single call", _guarded(_one), "one tool_result in one user message"),
)


def check_async_fan_out(fn: FanOutFn, *, show: bool = True) -> ExerciseReport:
    """Judge the learner's ``async def fan_out(calls, tools) -> message`` on :data:`CASES`.
    Prints the report when ``show``; raises ``TypeError`` only when ``fn`` is not
    callable. Takes about :data:`PATIENCE_S` per case when the calls do not overlap."""
    return run_cases(fn, CASES, what="fan_out", show=show)
