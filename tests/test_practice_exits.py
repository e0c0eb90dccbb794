"""Lesson 05's exercise check: the seven exits after a reply, in the seeds' order.

A gallery of realistic broken solutions, each failing the case that names its mistake; the
notebook's folded reference passing; and junk that never makes the check raise.
"""

from __future__ import annotations

import json

import pytest
from notebook_cells import solution

from primer.course.practice.exits import EXIT_CASES, SEVEN_EXITS, check_exits


def _calls(reply):
    return [b for b in reply["content"] if b["type"] == "tool_use"]


def _exits(reply, state, *, first=("end_turn", "stop_sequence"), cut=("max_tokens", "refusal"),
           over=lambda s: s["tokens"] > s["token_budget"], key=None, order=None,
           counts=None, threshold=None, handoff_all=True):
    """A configurable version of the seven exits; each gallery entry breaks one piece."""
    key = key or (lambda c: c["name"] + json.dumps(c["input"], sort_keys=True))
    seen = state["seen"] if counts is None else counts

    def stop_reason():
        r = reply["stop_reason"]
        return "end_turn" if r in first else r if r in cut else None

    def budget():
        return "token_budget" if over(state) else None

    def handoff():
        calls = _calls(reply) if handoff_all else _calls(reply)[:1]
        return "handoff" if any(c["name"] == "handoff_to_human" for c in calls) else None

    def repeats():
        for c in _calls(reply):
            k = key(c)
            seen[k] = seen.get(k, 0) + 1
            if seen[k] >= (threshold or state["repeat_threshold"]):
                return "loop_detected"
        return None

    def steps():
        return "max_steps" if state["calls"] >= state["max_steps"] else None

    checks = {"stop_reason": stop_reason, "budget": budget, "handoff": handoff,
              "repeats": repeats, "steps": steps}
    for name in order or ("stop_reason", "budget", "handoff", "repeats", "steps"):
        cause = checks[name]()
        if cause:
            return cause
    return None


_GLOBAL: dict = {}

GALLERY = {
    # the ten-line loop's one exit: anything but tool_use is an answer
    "ten-line loop": (lambda reply, state: None if reply["stop_reason"] == "tool_use"
                      else "end_turn",
                      "cut-off tool call", "got 'end_turn'"),
    "budget before stop_reason": (
        lambda r, s: _exits(r, s, order=("budget", "stop_reason", "handoff", "repeats",
                                         "steps")),
        "an answer that crossed the budget", "read stop_reason first"),
    "stop_sequence not known": (lambda r, s: _exits(r, s, first=("end_turn",)),
                                "stop_sequence", "return 'end_turn' for stop_reason"),
    "refusal not checked": (lambda r, s: _exits(r, s, cut=("max_tokens",)),
                            "refusal", "got None"),
    "budget with >=": (
        lambda r, s: _exits(r, s, over=lambda st: st["tokens"] >= st["token_budget"]),
        "exactly at the budget", "use >, not >="),
    "hand-off before budget": (
        lambda r, s: _exits(r, s, order=("stop_reason", "handoff", "budget", "repeats",
                                         "steps")),
        "budget before hand-off", "check the budget before the hand-off"),
    "hand-off only in the first block": (lambda r, s: _exits(r, s, handoff_all=False),
                                         "hand-off beside another call", "not only the first"),
    "step limit before hand-off and repeats": (
        lambda r, s: _exits(r, s, order=("stop_reason", "budget", "steps", "handoff",
                                         "repeats")),
        "hand-off on the last step", "before the step limit"),
    "input compared as written": (
        lambda r, s: _exits(r, s, key=lambda c: c["name"] + json.dumps(c["input"])),
        "same call, keys reordered", "sort_keys=True"),
    "name only": (lambda r, s: _exits(r, s, key=lambda c: c["name"]),
                  "different inputs are not a loop", "name AND its input"),
    "threshold hard-coded": (lambda r, s: _exits(r, s, threshold=3),
                             "threshold from the state", "state['repeat_threshold']"),
    "step limit before repeats": (
        lambda r, s: _exits(r, s, order=("stop_reason", "budget", "handoff", "steps",
                                         "repeats")),
        "repeat on the last step", "loop detection before the step limit"),
    "step limit off by one": (
        lambda r, s: _exits(r, {**s, "max_steps": s["max_steps"] + 1}),
        "step limit", "state['calls'] >= state['max_steps']"),
}


@pytest.mark.parametrize("name", GALLERY)
def test_each_broken_solution_fails_the_case_that_names_its_mistake(name):
    fn, case, message = GALLERY[name]
    report = check_exits(fn, show=False)
    assert case in report.failed, (name, report)
    assert message in report.detail(case), report.detail(case)


def test_counts_kept_in_a_global_fail_the_threshold_case():
    _GLOBAL.clear()
    report = check_exits(lambda r, s: _exits(r, s, counts=_GLOBAL), show=False)
    assert not report.ok and "threshold from the state" in report.failed


def test_the_notebook_reference_passes_every_case():
    fn = solution("05", "stop_cause_after")
    report = check_exits(fn, show=False)
    assert report.ok, report
    assert report.total == len(EXIT_CASES) == 16


def test_a_stop_cause_enum_counts_as_its_value():
    from primer.loop.state import StopCause
    fn = solution("05", "stop_cause_after")

    def as_enum(reply, state):
        cause = fn(reply, state)
        return None if cause is None else StopCause(cause)

    assert check_exits(as_enum, show=False).ok


@pytest.mark.parametrize("junk", [
    lambda r, s: 1 / 0,
    lambda r, s: 42,
    lambda r, s: "stop",
    lambda r, s: ["end_turn"],
    lambda r, s: s.clear(),
    lambda r, s: r["missing"],
])
def test_junk_fails_without_raising(junk):
    report = check_exits(junk, show=False)
    assert not report.ok
    assert all(line for line in str(report).splitlines())


def test_junk_lines_say_what_to_return():
    report = check_exits(lambda r, s: 42, show=False)
    assert "return a stop cause as a string" in report.detail("end_turn")
    report = check_exits(lambda r, s: "stop", show=False)
    assert "not a stop cause" in report.detail("end_turn")
    report = check_exits(lambda r, s: 1 / 0, show=False)
    assert "raised ZeroDivisionError" in report.detail("end_turn")


def test_the_check_refuses_what_is_not_a_function():
    with pytest.raises(TypeError):
        check_exits("stop_cause_after")
    assert SEVEN_EXITS[0] == "end_turn" and SEVEN_EXITS[-1] == "max_steps"


def test_a_str_that_equals_everything_scores_nothing():
    class Yes(str):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = str.__hash__

    report = check_exits(lambda reply, state: Yes("end_turn"), show=False)
    assert report.score == 0, report
    assert "a plain str" in report.detail("end_turn")
