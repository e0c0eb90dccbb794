"""Lesson 05's exercise: the seven exits after a model reply, in the order the seeds check them.

The learner writes ``stop_cause_after(reply, state) -> str | None``: the stop cause that
ends the run after this reply, or ``None`` to run the reply's tool calls and go on.

- ``reply`` is one reply dict, as the coding round's model returns it (see
  :mod:`primer.course.exercises`): ``{"content": [block, ...], "stop_reason": str,
  "usage": {"input_tokens": int, "output_tokens": int}}``.
- ``state`` is a dict: ``"tokens"`` (the run's running total of input + output tokens,
  this reply included), ``"token_budget"`` (tokens), ``"calls"`` (model calls made, this
  one included), ``"max_steps"``, ``"repeat_threshold"`` and ``"seen"``, a dict from a
  call's canonical key (tool name + its input as JSON with sorted keys) to how many times it
  was requested. The function updates ``"seen"``; the same ``state`` is passed after every
  reply of one run.

The order (the seeds'): ``end_turn`` (also a ``stop_sequence`` reply: the turn ended on a
custom stop sequence), ``max_tokens`` (a cut-off call never runs), ``refusal``, then
``token_budget`` (running total *past* the budget), ``handoff`` (a ``handoff_to_human``
call), ``loop_detected`` (a call requested for the ``repeat_threshold``-th time with the
same canonical input), ``max_steps`` (the last allowed call was made: its tools would feed
no call).

:func:`check_exits` runs the learner's function on :data:`EXIT_CASES` (replies and states the
learner did not write) and prints one PASS/FAIL line per case and the score.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short

#: What the learner's function is called in the lesson (for messages).
EXITS_FUNCTION = "stop_cause_after"

#: The stop causes the function may return, in the order it must check them.
SEVEN_EXITS = ("end_turn", "max_tokens", "refusal", "token_budget", "handoff",
               "loop_detected", "max_steps")

_HANDOFF = "handoff_to_human"

#: Why each exit exists, for FAIL lines.
_WHY = {
    "end_turn": "the model finished its turn: its text is the answer",
    "max_tokens": "the reply was cut off, so its tool call may be half-written: never run it",
    "refusal": "the content is a refusal, not an answer",
    "token_budget": "the running total is past the budget: stop before running more",
    "handoff": "the model asked for a person with handoff_to_human",
    "loop_detected": "the same tool with the same input, in any key order, reached the "
                     "repeat threshold",
    "max_steps": "the last allowed model call was made: no call would read these tools' results",
    None: "no exit fires: the loop runs the reply's tools and calls the model again",
}


def _use(name: str, args: dict[str, Any], n: int = 1) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": args}


def _reply(stop_reason: str, *blocks: dict[str, Any], text: str | None = None,
           tokens: tuple[int, int] = (400, 40)) -> dict[str, Any]:
    content = ([{"type": "text", "text": text}] if text else []) + list(blocks)
    return {"content": content, "stop_reason": stop_reason,
            "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}


def _state(*, tokens: int = 900, token_budget: int = 3000, calls: int = 2, max_steps: int = 6,
           repeat_threshold: int = 3) -> dict[str, Any]:
    return {"tokens": tokens, "token_budget": token_budget, "calls": calls,
            "max_steps": max_steps, "repeat_threshold": repeat_threshold, "seen": {}}


def _name(value: Any) -> Any:
    """A returned stop cause as text: a ``StopCause`` (a ``str`` enum) counts as its value."""
    return getattr(value, "value", value)


def _verdict(got: Any, expected: str | None, fix: str, where: str = "") -> Problem:
    got = _name(got)
    if got is not None and type(got) is not str:  # a str subclass may lie about ==
        return (f"{where}returned {type(got).__name__} {short(repr(got), 30)}; return a stop "
                f"cause as a string (a plain str: one of {', '.join(SEVEN_EXITS)}) or None")
    if got == expected:
        return None
    if got is not None and got not in SEVEN_EXITS:
        return (f"{where}returned {short(repr(got), 30)}, not a stop cause; expected "
                f"{expected!r} ({_WHY[expected]})")
    return f"{where}expected {expected!r} ({_WHY[expected]}), got {got!r}: {fix}"


def _one(reply: dict[str, Any], state: dict[str, Any], expected: str | None, fix: str
         ) -> Callable[[Callable[..., Any]], Problem]:
    def probe(fn: Callable[..., Any]) -> Problem:
        return _verdict(fn(copy.deepcopy(reply), copy.deepcopy(state)), expected, fix)
    return probe


def _run(replies: list[tuple[dict[str, Any], int]], state: dict[str, Any],
         expected: list[str | None], fix: str) -> Callable[[Callable[..., Any]], Problem]:
    """Pass each reply in turn with ONE state (``calls`` set to each reply's number)."""
    def probe(fn: Callable[..., Any]) -> Problem:
        run_state = copy.deepcopy(state)
        for (reply, calls), want in zip(replies, expected, strict=True):
            run_state["calls"] = calls
            problem = _verdict(fn(copy.deepcopy(reply), run_state), want, fix,
                               where=f"after reply {calls}: ")
            if problem:
                return problem
        return None
    return probe


_ORDER = _use("get_order", {"order_id": "A123", "fields": ["unit_price", "quantity"]})
_ORDER_REORDERED = _use("get_order", {"fields": ["unit_price", "quantity"], "order_id": "A123"})
_CALC = _use("calculator", {"expression": "2500 * 2 * 1.18"}, 2)
_ASK_PERSON = _use(_HANDOFF, {"reason": "the customer disputes the GST rate"}, 2)

EXIT_CASES: tuple[Case, ...] = (
    Case("a tool call to run",
         _one(_reply("tool_use", _ORDER, text="I need the order first."), _state(), None,
              "only a limit or the model's own stop_reason ends the run; here none fired"),
         "None: the tool call runs and the loop goes on"),
    Case("end_turn",
         _one(_reply("end_turn", text="Order A123 costs 5900.0 rupees."), _state(), "end_turn",
              "a reply whose stop_reason is 'end_turn' ends the run with its answer"),
         "'end_turn' for a finished answer"),
    Case("stop_sequence",
         _one(_reply("stop_sequence", text="Total: 5900.0 rupees"), _state(), "end_turn",
              "a reply stopped by one of the request's stop sequences is a finished turn too: "
              "return 'end_turn' for stop_reason 'stop_sequence'"),
         "'end_turn': a custom stop sequence also ends the turn"),
    Case("an answer that crossed the budget",
         _one(_reply("end_turn", text="5900.0 rupees."), _state(tokens=3100), "end_turn",
              "read stop_reason first: the answer is already paid for, so return it rather "
              "than throw it away at the budget"),
         "'end_turn': stop_reason is read before the budget"),
    Case("cut-off tool call",
         _one(_reply("max_tokens", _use("calculator", {"expression": "2500 * 2 *"}),
                     text="Now the total."), _state(), "max_tokens",
              "check stop_reason == 'max_tokens' before anything that runs tools"),
         "'max_tokens': the half-written call is not run"),
    Case("refusal",
         _one(_reply("refusal", text="I can't help with that request."), _state(), "refusal",
              "stop_reason 'refusal' ends the run with no answer; check it before the budget"),
         "'refusal': the text is not passed off as an answer"),
    Case("over the budget",
         _one(_reply("tool_use", _CALC), _state(tokens=3001), "token_budget",
              "after the stop_reason checks, stop when state['tokens'] > "
              "state['token_budget']"),
         "'token_budget' one token past it"),
    Case("exactly at the budget",
         _one(_reply("tool_use", _CALC), _state(tokens=3000), None,
              "the budget stops a run *past* it: use >, not >="),
         "None at exactly the budget (the exit is for a total past it)"),
    Case("budget before hand-off",
         _one(_reply("tool_use", _ASK_PERSON), _state(tokens=3500), "token_budget",
              "check the budget before the hand-off"),
         "'token_budget' before a hand-off"),
    Case("hand-off beside another call",
         _one(_reply("tool_use", _use("get_order", {"order_id": "A123"}), _ASK_PERSON),
              _state(), "handoff",
              "look at every tool_use block of the reply for name == 'handoff_to_human', "
              "not only the first"),
         "'handoff' for a handoff_to_human call anywhere in the reply"),
    Case("hand-off on the last step",
         _one(_reply("tool_use", _ASK_PERSON), _state(calls=6, max_steps=6), "handoff",
              "check the hand-off before the step limit"),
         "'handoff' before the step limit"),
    Case("same call, keys reordered",
         _run([(_reply("tool_use", _ORDER), 1), (_reply("tool_use", _ORDER_REORDERED), 2),
               (_reply("tool_use", _ORDER), 3)], _state(), [None, None, "loop_detected"],
              "count each call in state['seen'] under its name plus "
              "json.dumps(input, sort_keys=True), and stop when a count reaches "
              "state['repeat_threshold']"),
         "'loop_detected' on the third identical request, whatever its key order"),
    Case("different inputs are not a loop",
         _run([(_reply("tool_use", _use("get_order", {"order_id": oid})), n)
               for n, oid in enumerate(("A123", "A124", "A125", "A126"), start=1)],
              _state(), [None] * 4,
              "count a call as a repeat only when its name AND its input are the same"),
         "None: four different order ids are four different calls"),
    Case("threshold from the state",
         _run([(_reply("tool_use", _ORDER), 1), (_reply("tool_use", _ORDER_REORDERED), 2)],
              _state(repeat_threshold=2), [None, "loop_detected"],
              "read the threshold from state['repeat_threshold'] (here 2), and keep the "
              "counts in state['seen'], not in a global"),
         "'loop_detected' on the second request when the threshold is 2"),
    Case("repeat on the last step",
         _run([(_reply("tool_use", _ORDER), 1), (_reply("tool_use", _ORDER), 2),
               (_reply("tool_use", _ORDER), 3)], _state(max_steps=3),
              [None, None, "loop_detected"],
              "check loop detection before the step limit"),
         "'loop_detected' before the step limit"),
    Case("step limit",
         _run([(_reply("tool_use", _use("get_order", {"order_id": "A124"})), 3),
               (_reply("tool_use", _use("get_order", {"order_id": "A125"})), 4)],
              _state(max_steps=4), [None, "max_steps"],
              "stop when state['calls'] >= state['max_steps']: the last allowed call's tools "
              "would feed no model call"),
         "'max_steps' after the last allowed call, None before it"),
)


def check_exits(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge the learner's ``stop_cause_after(reply, state) -> str | None`` on :data:`EXIT_CASES`.

    Each case passes replies (dicts of the coding round's shape) and a state dict the learner
    did not write (see the module docstring), and expects one of :data:`SEVEN_EXITS` or
    ``None``. Prints (when ``show``) and returns the :class:`ExerciseReport`. An exception
    in ``fn`` is that case's FAIL line; raises ``TypeError`` only when ``fn`` is not
    callable.
    """
    return run_cases(fn, EXIT_CASES, what=EXITS_FUNCTION, show=show)
