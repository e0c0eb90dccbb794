"""Lesson 01's check, check_request_for_call: the reference passes, realistic mistakes fail
the right case with a message that says what to fix, and junk never escapes the check."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.messages import check_request_for_call


def judge(fn):
    return check_request_for_call(fn, show=False)


def only_the_newest(system, turns, replies, n):          # the one-shot harness
    return {"system": system, "messages": [{"role": "user", "content": turns[n - 1]}]}


def every_reply(system, turns, replies, n):              # zips in replies not yet written
    messages = []
    for turn, reply in zip(turns[:n], replies, strict=False):
        messages += [{"role": "user", "content": turn}, {"role": "assistant", "content": reply}]
    if len(messages) < 2 * n:
        messages.append({"role": "user", "content": turns[n - 1]})
    return {"system": system, "messages": messages}


def system_as_a_message(system, turns, replies, n):      # OpenAI's shape, not the Messages API
    messages = [{"role": "system", "content": system}]
    for k in range(n):
        messages.append({"role": "user", "content": turns[k]})
        if k < n - 1:
            messages.append({"role": "assistant", "content": replies[k]})
    return {"system": system, "messages": messages}


def no_system(system, turns, replies, n):                # forgets the system prompt
    request = solution("01", "request_for_call")(system, turns, replies, n)
    return {"messages": request["messages"]}


def reply_text_only(system, turns, replies, n):          # flattens the model's blocks
    def text(c):
        return c if isinstance(c, str) else "".join(b["text"] for b in c)
    request = solution("01", "request_for_call")(system, turns, [text(r) for r in replies], n)
    return request


def roles_swapped(system, turns, replies, n):
    request = solution("01", "request_for_call")(system, turns, replies, n)
    for m in request["messages"]:
        m["role"] = {"user": "assistant", "assistant": "user"}[m["role"]]
    return request


def kept_between_calls(system, turns, replies, n, messages=[]):  # noqa: B006 - the bug
    messages.append({"role": "user", "content": turns[n - 1]})
    return {"system": system, "messages": messages}


def appends_to_the_callers_list(system, turns, replies, n):
    turns.append("(sent)")
    return solution("01", "request_for_call")(system, turns, replies, n)


def test_the_notebooks_reference_solution_scores_full_marks():
    report = judge(solution("01", "request_for_call"))
    assert report.ok, str(report)


@pytest.mark.parametrize("fn, case, says", [
    (only_the_newest, "call 3 re-sends the history", "only the newest turn was sent"),
    (every_reply, "no reply from a later call", "a reply the model had not written yet"),
    (system_as_a_message, "system prompt beside the list", "role 'system'"),
    (no_system, "system prompt beside the list", "travels beside the list"),
    (reply_text_only, "a reply's blocks copied unchanged", "copy each reply's content unchanged"),
    (roles_swapped, "first call", "has role 'assistant', expected 'user'"),
    (kept_between_calls, "inputs left alone", "two calls with the same arguments"),
    (appends_to_the_callers_list, "inputs left alone", "changed the turns or replies"),
])
def test_a_broken_request_fails_the_right_case_with_a_fix(fn, case, says):
    report = judge(fn)
    assert case in report.failed, str(report)
    assert says in report.detail(case)


@pytest.mark.parametrize("junk", [
    lambda *a: None,
    lambda *a: [],
    lambda *a: {"system": a[0], "messages": "hello"},
    lambda *a: {"system": a[0], "messages": [None, 3]},
    lambda *a: 1 / 0,
    lambda: None,                                         # takes no arguments at all
])
def test_junk_fails_every_case_and_never_escapes(junk):
    report = judge(junk)
    assert report.score == 0, str(report)


def test_a_crash_names_the_learners_line():
    def crashes(system, turns, replies, n):
        return {"system": system, "messages": [turns[n + 10]]}
    assert "raised IndexError" in judge(crashes).detail("first call")


def test_the_check_prints_one_line_per_case_and_the_score(capsys):
    check_request_for_call(only_the_newest)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7 and lines[-1] == "score: 3/6"
    assert lines[2].startswith("FAIL  call 3 re-sends the history: call 3: expected 5")


# ------------------------------------------------- the check's own data stays as written


def marks_blocks_for_caching(system, turns, replies, n):  # changes the caller's blocks
    for reply in replies[:n - 1]:
        if isinstance(reply, list):
            for block in reply:
                block["cache_control"] = {"type": "ephemeral"}
    return solution("01", "request_for_call")(system, turns, replies, n)


def test_a_solution_that_changes_the_callers_blocks_in_place_fails():
    report = judge(marks_blocks_for_caching)
    assert "a reply's blocks copied unchanged" in report.failed, str(report)
    assert "cache_control" in report.detail("a reply's blocks copied unchanged")
    assert "inputs left alone" in report.failed
    assert "block changed in place" in report.detail("inputs left alone")


def test_a_broken_solution_does_not_change_what_a_later_run_expects():
    class Marker:  # no __eq__: a copy of it is not equal to it
        pass

    def appends_to_the_blocks(system, turns, replies, n):
        for reply in replies:
            if isinstance(reply, list):
                reply.append({"type": "text", "text": Marker()})

    good = solution("01", "request_for_call")
    judge(marks_blocks_for_caching)
    judge(appends_to_the_blocks)
    report = judge(good)
    assert report.ok, str(report)


def test_a_str_that_equals_everything_is_not_the_system_prompt():
    class Yes(str):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = str.__hash__

    good = solution("01", "request_for_call")

    def lies_about_the_system(system, turns, replies, n):
        return {**good(system, turns, replies, n), "system": Yes("anything")}

    def lies_about_the_messages(system, turns, replies, n):
        request = good(system, turns, replies, n)
        return {**request, "messages": [{**m, "content": Yes()} for m in request["messages"]]}

    report = judge(lies_about_the_system)
    assert report.score == 0, str(report)
    assert "(a str)" in report.detail("system prompt beside the list")
    report = judge(lies_about_the_messages)
    assert {"first call", "call 3 re-sends the history", "no reply from a later call",
            "a reply's blocks copied unchanged"} <= set(report.failed), str(report)
