"""Lesson 15's accumulator check: the notebook's reference passes, each broken reader fails
the case it breaks, with a message that says what to fix."""

import json

import pytest
from notebook_cells import solution

from primer.course.practice.sse import CASES, check_accumulator

NAMES = [c.name for c in CASES]


def reference():
    return solution("15", "accumulate", index=1)


def report(fn):
    return check_accumulator(fn, show=False)


def test_the_notebooks_reference_scores_full_marks():
    assert report(reference()).ok


def _with(**changes):
    """The reference reader with one event kind handled differently."""
    ref = reference()

    def reader(events):
        out = []
        for e in events:
            handler = changes.get(e["type"])
            if handler is None:
                out.append(e)
                continue
            replaced = handler(e)
            if replaced is not None:
                out.append(replaced)
        return ref(out)
    return reader


def text_only(events):
    reply = None
    for e in events:
        if e["type"] == "message_start":
            reply = {**e["message"], "content": []}
        elif e["type"] == "content_block_start":
            reply["content"].append(dict(e["content_block"]))
        elif e["type"] == "content_block_delta":
            reply["content"][e["index"]]["text"] += e["delta"]["text"]
        elif e["type"] == "message_delta":
            reply.update(e["delta"])
            reply["usage"] = {**reply["usage"], **e["usage"]}
        elif e["type"] == "message_stop":
            return reply
    raise ConnectionError("no message_stop")


def usage_from_start_only(events):
    reply = reference()(events)
    reply["usage"]["output_tokens"] = 0
    return reply


def parses_each_piece(events):
    for e in events:
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta":
            json.loads(e["delta"]["partial_json"])
    return reference()(events)


def input_never_filled(events):
    reply = reference()(events)
    for b in reply["content"]:
        if b["type"] == "tool_use":
            b["input"] = {}
    return reply


def chokes_on_ping(events):
    if any(e["type"] == "ping" for e in events[2:]):
        raise ValueError("unknown event type 'ping'")
    return reference()(events)


def returns_what_it_has(events):
    try:
        return reference()(events)
    except ConnectionError:
        return {"content": [], "stop_reason": None}


def strict_json(events):
    if any(e["type"] == "message_delta" and e["delta"]["stop_reason"] == "max_tokens"
           for e in events):
        raise ValueError("Unterminated string")
    return reference()(events)


drops_signature = _with(content_block_delta=lambda e: None
                        if e["delta"]["type"] == "signature_delta" else e)
ignores_error = _with(error=lambda e: {"type": "message_stop"})
skips_error = _with(error=lambda e: None)


def drops_id(events):
    reply = reference()(events)
    reply.pop("id")
    return reply


@pytest.mark.parametrize("broken, case, says", [
    (text_only, "two tool calls", "raised KeyError"),
    (usage_from_start_only, "text reply", "output_tokens in message_delta"),
    (parses_each_piece, "two tool calls", "raised JSONDecodeError"),
    (input_never_filled, "two tool calls", "input is the JSON of its input_json_delta pieces"),
    (chokes_on_ping, "pings in between", "raised ValueError: unknown event type 'ping'"),
    (returns_what_it_has, "connection dropped", "raise instead"),
    (strict_json, "cut at max_tokens", "raised ValueError"),
    (drops_signature, "thinking before a call", "signature_delta"),
    (ignores_error, "error event", "raise instead"),
    (skips_error, "error event", "raise instead"),
    (drops_id, "text reply", "start the reply from message_start's message"),
])
def test_each_broken_reader_fails_the_case_it_breaks(broken, case, says):
    result = report(broken)
    assert case in result.failed, str(result)
    assert says in result.detail(case), result.detail(case)


def test_the_starter_of_the_notebook_fails_and_never_raises():
    def starter(events):
        ...
    result = report(starter)
    assert result.score == 0 and "return the reply as a dict" in result.detail("text reply")


@pytest.mark.parametrize("junk", [lambda events: 42, lambda events: [], lambda: None,
                                  lambda events: (_ for _ in ()).throw(SystemError("x"))])
def test_junk_is_reported_never_raised(junk):
    result = report(junk)
    assert result.score < result.total


def test_a_reader_that_fails_on_everything_does_not_pass_the_raise_cases():
    def always_raises(events):
        raise RuntimeError("nope")
    result = report(always_raises)
    assert result.score == 0
    assert "raised RuntimeError: nope" in result.detail("error event")


def test_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="pass your function"):
        check_accumulator("accumulate")
