"""Lesson 13b's check, check_stream_outcome: the reference passes, realistic mistakes fail the
right case with a message that says what to fix, and junk never escapes the check."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.stream_usage import check_stream_outcome


def judge(fn):
    return check_stream_outcome(fn, show=False)


def reference():
    return solution("13b", "outcome")


def from_message_start_only(events):            # the reply's fields, before it was written
    start = next(e for e in events if e["type"] == "message_start")["message"]
    return {"stop_reason": start["stop_reason"], "usage": dict(start["usage"])}


def adds_every_count(events):                   # treats running counts as increments
    stop_reason, usage = None, {}
    for e in events:
        if e["type"] == "message_start":
            usage = dict(e["message"]["usage"])
        elif e["type"] == "message_delta":
            stop_reason = e["delta"]["stop_reason"]
            usage["output_tokens"] += e["usage"]["output_tokens"]
    return {"stop_reason": stop_reason, "usage": usage}


def first_delta_only(events):                   # stops at the first message_delta
    stop_reason, usage = None, {}
    for e in events:
        if e["type"] == "message_start":
            usage = dict(e["message"]["usage"])
        elif e["type"] == "message_delta":
            return {"stop_reason": e["delta"]["stop_reason"], "usage": {**usage, **e["usage"]}}
    return {"stop_reason": stop_reason, "usage": usage}


def usage_from_the_delta_only(events):          # loses the input and cache counts
    delta = [e for e in events if e["type"] == "message_delta"]
    if not delta:
        return {"stop_reason": None, "usage": {}}
    return {"stop_reason": delta[-1]["delta"]["stop_reason"], "usage": dict(delta[-1]["usage"])}


def assumes_a_finished_stream(events):          # a dropped stream raises StopIteration
    delta = next(e for e in events if e["type"] == "message_delta")
    start = events[0]["message"]
    return {"stop_reason": delta["delta"]["stop_reason"],
            "usage": {**start["usage"], **delta["usage"]}}


def trips_on_pings(events):                     # every event but message_start has a delta
    stop_reason, usage = None, {}
    for e in events:
        if e["type"] == "message_start":
            usage = dict(e["message"]["usage"])
            continue
        if e["type"] != "message_stop" and not e["type"].startswith("content_block") \
                and e["delta"].get("stop_reason"):
            stop_reason = e["delta"]["stop_reason"]
            usage.update(e["usage"])
    return {"stop_reason": stop_reason, "usage": usage}


def test_the_lessons_reference_passes_every_case():
    report = judge(reference())
    assert report.ok, str(report)
    assert report.total == 6


@pytest.mark.parametrize("fn, case, words", [
    (from_message_start_only, "text reply", "message_start always says None"),
    (adds_every_count, "text reply", "not an increment: replace message_start's figure"),
    (adds_every_count, "running count", "take the last message_delta's output_tokens"),
    (first_delta_only, "running count", "take it from the last message_delta"),
    (usage_from_the_delta_only, "text reply", "input_tokens comes in message_start's usage"),
    (usage_from_the_delta_only, "cache fields", "input_tokens comes in message_start"),
    (assumes_a_finished_stream, "dropped stream", "raised StopIteration"),
    (trips_on_pings, "pings and new events", "raised KeyError: 'delta'"),
])
def test_each_mistake_fails_the_case_that_names_it(fn, case, words):
    report = judge(fn)
    assert case in report.failed, str(report)
    assert words in report.detail(case), report.detail(case)


def test_the_single_delta_reader_passes_the_plain_cases():
    report = judge(first_delta_only)
    assert report.failed == ["running count"], str(report)


@pytest.mark.parametrize("junk", [
    lambda events: None,
    lambda events: {"stop_reason": "end_turn"},
    lambda events: {"stop_reason": None, "usage": "lots"},
    lambda events: 1 / 0,
    lambda: None,                                # the wrong signature
])
def test_junk_never_escapes_the_check(junk):
    report = judge(junk)
    assert report.score <= 1 and report.total == 6, str(report)


def test_a_value_that_is_not_a_function_is_named():
    with pytest.raises(TypeError, match="pass your function itself"):
        judge(None)
