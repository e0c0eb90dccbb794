"""Lesson 13's check, check_api_request: the reference passes, realistic mistakes fail the
right case with a message that says what to fix, and junk never escapes the check."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.api_request import check_api_request


def judge(fn):
    return check_api_request(fn, show=False)


def reference():
    return solution("13", "to_request")


def as_it_is(history, tools, *, model, max_tokens):           # the other provider's shape
    return {"model": model, "max_tokens": max_tokens, "messages": list(history),
            "tools": tools}


def system_kept_in_the_list(history, tools, *, model, max_tokens):
    request = reference()(history, tools, model=model, max_tokens=max_tokens)
    request["messages"].insert(0, {"role": "system", "content": request["system"]})
    return request


def parameters_not_renamed(history, tools, *, model, max_tokens):
    request = reference()(history, tools, model=model, max_tokens=max_tokens)
    request["tools"] = [dict(t) for t in tools]
    return request


def one_message_per_result(history, tools, *, model, max_tokens):   # splits the results
    request = reference()(history, tools, model=model, max_tokens=max_tokens)
    messages = []
    for m in request["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        if m["role"] == "user" and blocks and all(b["type"] == "tool_result" for b in blocks):
            messages += [{"role": "user", "content": [b]} for b in blocks]
        else:
            messages.append(m)
    request["messages"] = messages
    return request


def results_without_ids(history, tools, *, model, max_tokens):
    request = reference()(history, tools, model=model, max_tokens=max_tokens)
    for m in request["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b["type"] == "tool_result":
                b["tool_use_id"] = "toolu_result"
    return request


def fixed_max_tokens(history, tools, *, model, max_tokens):
    return reference()(history, tools, model=model, max_tokens=1024)


def pops_the_system_message(history, tools, *, model, max_tokens):  # edits the caller's list
    system = history.pop(0)["content"]
    request = reference()([{"role": "system", "content": system}, *history], tools,
                          model=model, max_tokens=max_tokens)
    return request


def test_the_lessons_reference_passes_every_case():
    report = judge(reference())
    assert report.ok, str(report)
    assert report.total == 7


@pytest.mark.parametrize("fn, case, words", [
    (as_it_is, "system prompt", "the 'system' parameter, beside the list"),
    (as_it_is, "one result", "a message with role 'tool' is in the list"),
    (system_kept_in_the_list, "system prompt", "a message with role 'system' is in the list"),
    (parameters_not_renamed, "tool definitions", "input_schema (the schema is what other APIs"),
    (one_message_per_result, "two results", "ONE user message"),
    (results_without_ids, "one result", "with its tool_use_id, in the order asked"),
    (fixed_max_tokens, "model and max_tokens", "max_tokens=1024 (expected 777)"),
    (pops_the_system_message, "inputs untouched", "changed the history or tools"),
])
def test_each_mistake_fails_the_case_that_names_it(fn, case, words):
    report = judge(fn)
    assert case in report.failed, str(report)
    assert words in report.detail(case), report.detail(case)


def test_splitting_results_passes_the_single_result_case():
    report = judge(one_message_per_result)
    assert "one result" not in report.failed and "two results" in report.failed


@pytest.mark.parametrize("junk", [
    lambda history, tools, **kw: None,
    lambda history, tools, **kw: "a request",
    lambda history, tools, **kw: {"messages": None},
    lambda history, tools, **kw: 1 / 0,
    lambda history: history,                      # the wrong signature
])
def test_junk_fails_every_case_without_raising(junk):
    report = judge(junk)
    assert report.score == 0, str(report)


def test_a_value_that_is_not_a_function_is_named():
    with pytest.raises(TypeError, match="pass your function itself"):
        judge("to_request")
