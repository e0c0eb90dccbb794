"""Lesson 06's check (answer_tool_calls) fails each realistic mistake on the right case with
the right words, passes the notebook's folded solution, and never raises on junk."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed

import pytest
from notebook_cells import solution

from primer.course.practice import fan_out
from primer.course.practice.fan_out import check_answer_tool_calls


@pytest.fixture(autouse=True)
def short_waits(monkeypatch):
    """Sequential mistakes wait for siblings that never come; keep that short here."""
    monkeypatch.setattr(fan_out, "WAIT_S", 0.5)


def _calls(messages):
    return [b for b in messages[-1]["content"] if b["type"] == "tool_use"]


def _run(tools, call):
    result = {"type": "tool_result", "tool_use_id": call["id"]}
    if call["name"] not in tools:
        return result | {"content": f"unknown tool {call['name']}", "is_error": True}
    try:
        return result | {"content": tools[call["name"]](**call["input"])}
    except Exception as e:  # noqa: BLE001
        return result | {"content": str(e), "is_error": True}


def reference(messages, tools):
    calls = _calls(messages)
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        results = list(pool.map(lambda c: _run(tools, c), calls))
    messages.append({"role": "user", "content": results})


def completion_order(messages, tools):
    calls = _calls(messages)
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(_run, tools, c) for c in calls]
        results = [f.result() for f in as_completed(futures)]
    messages.append({"role": "user", "content": results})


def sequential(messages, tools):
    messages.append({"role": "user", "content": [_run(tools, c) for c in _calls(messages)]})


def two_workers(messages, tools):
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: _run(tools, c), _calls(messages)))
    messages.append({"role": "user", "content": results})


def one_message_per_result(messages, tools):
    calls = _calls(messages)
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        for r in pool.map(lambda c: _run(tools, c), calls):
            messages.append({"role": "user", "content": [r]})


def keyed_by_tool_name(messages, tools):
    calls = _calls(messages)
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        by_name = dict(zip([c["name"] for c in calls],
                           pool.map(lambda c: _run(tools, c), calls), strict=True))
    messages.append({"role": "user", "content": list(by_name.values())})


def lets_exceptions_escape(messages, tools):
    calls = _calls(messages)

    def run(c):
        return {"type": "tool_result", "tool_use_id": c["id"],
                "content": tools[c["name"]](**c["input"])}
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        results = list(pool.map(run, calls))
    messages.append({"role": "user", "content": results})


def error_without_flag(messages, tools):
    reference(messages, tools)
    for r in messages[-1]["content"]:
        r.pop("is_error", None)


def drops_failed_calls(messages, tools):
    reference(messages, tools)
    messages[-1]["content"] = [r for r in messages[-1]["content"] if not r.get("is_error")]


def returns_instead_of_appending(messages, tools):
    copy = list(messages)
    reference(copy, tools)
    return copy[-1]


@pytest.mark.parametrize(("broken", "case", "words"), [
    (completion_order, "request order", "(the calls finished toolu_c3, toolu_c2, toolu_c1)"),
    (sequential, "concurrent", "did not all run at the same time"),
    (two_workers, "concurrent", "as many workers as calls"),
    (one_message_per_result, "one user message", "appended 3 messages"),
    (keyed_by_tool_name, "every call answered", "no tool_result for toolu_b"),
    (lets_exceptions_escape, "error as result", "raised ValueError: no order 'Z9'"),
    (lets_exceptions_escape, "unknown tool", "raised KeyError"),
    (error_without_flag, "error as result", "set 'is_error': True"),
    (drops_failed_calls, "error as result", "no tool_result for toolu_e2"),
    (drops_failed_calls, "unknown tool", "no tool_result for toolu_f2"),
    (returns_instead_of_appending, "one user message", "append the message to messages"),
])
def test_each_mistake_fails_the_case_that_names_it(broken, case, words):
    report = check_answer_tool_calls(broken, show=False)
    assert case in report.failed, report
    assert words in report.detail(case)


def test_a_sequential_solution_fails_only_the_concurrency_case():
    assert check_answer_tool_calls(sequential, show=False).failed == ["concurrent"]


def test_the_reference_here_and_the_notebooks_folded_solution_score_full_marks():
    assert check_answer_tool_calls(reference, show=False).ok
    assert check_answer_tool_calls(solution("06", "answer_tool_calls"), show=False).ok


@pytest.mark.parametrize("junk", [
    lambda messages, tools: 1 / 0,
    lambda messages, tools: None,
    lambda messages, tools: messages.append("done"),
    lambda messages, tools: messages.append({"role": "user", "content": "all done"}),
    lambda messages, tools: messages.append({"role": "user", "content": [None, 3]}),
    lambda: None,
])
def test_the_check_never_raises_on_junk(junk):
    report = check_answer_tool_calls(junk, show=False)
    assert report.score == 0 and report.total == 6


def test_a_function_that_never_returns_fails_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(fan_out, "LIMIT_S", 0.2)
    import threading
    never = threading.Event()
    report = check_answer_tool_calls(lambda messages, tools: never.wait(1.0), show=False)
    never.set()
    assert "did not return within" in report.detail("one user message")


def test_a_check_passed_something_not_callable_says_what_to_pass():
    with pytest.raises(TypeError, match="pass your function itself"):
        check_answer_tool_calls("answer_tool_calls")  # type: ignore[arg-type]
