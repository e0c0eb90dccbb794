"""Lesson 08's exercise check: pause and resume, judged on cases the learner did not write.

A gallery of realistic broken pairs, each failing the case it gets wrong with a message that
says what to fix; the notebook's starter fails as its committed output shows; the
notebook's folded reference passes; junk never makes the check raise.
"""

from __future__ import annotations

import pytest
from notebook_cells import run_cell, solution

from primer.course.practice.approval import check_pause_resume

REJECTED = "A person rejected this call; it did not run."


def good_pause(messages, reply):
    return {"messages": [*messages, {"role": "assistant", "content": reply.content}],
            "pending": reply.tool_uses}


def _gated(tools, call):
    t = tools.get(call["name"])
    return t is not None and bool(t.needs_approval)


def _rejection(call, content=REJECTED, is_error=True):
    return {"type": "tool_result", "tool_use_id": call["id"], "content": content,
            "is_error": is_error}


def good_resume(saved, approved, tools):
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c) for c in saved["pending"]]
    return [*saved["messages"], {"role": "user", "content": results}]


def judge(pause, resume):
    return check_pause_resume(pause, resume, show=False)


def fails(report, case, text):
    assert case in report.failed, (case, str(report))
    assert text in report.detail(case), report.detail(case)


# ---------------------------------------------------------------- the gallery


def saves_the_reply_object(messages, reply):
    return {"messages": [*messages, {"role": "assistant", "content": reply.content}],
            "reply": reply, "pending": reply.tool_uses}


def runs_even_on_no(saved, approved, tools):
    results = [tools.run(c).result_block() for c in saved["pending"]]
    return [*saved["messages"], {"role": "user", "content": results}]


def drops_the_rejected_call(saved, approved, tools):
    results = [tools.run(c).result_block() for c in saved["pending"]
               if approved or not _gated(tools, c)]
    return [*saved["messages"], {"role": "user", "content": results}]


def answers_only_the_gated_call(saved, approved, tools):
    results = [tools.run(c).result_block() if approved else _rejection(c)
               for c in saved["pending"] if _gated(tools, c)]
    return [*saved["messages"], {"role": "user", "content": results}]


def one_message_per_result(saved, approved, tools):
    out = list(saved["messages"])
    for c in saved["pending"]:
        block = tools.run(c).result_block() if approved or not _gated(tools, c) \
            else _rejection(c)
        out.append({"role": "user", "content": [block]})
    return out


def gated_call_first(saved, approved, tools):
    calls = sorted(saved["pending"], key=lambda c: not _gated(tools, c))
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c) for c in calls]
    return [*saved["messages"], {"role": "user", "content": results}]


def forgets_the_reply(messages, reply):
    return {"messages": list(messages), "pending": reply.tool_uses}


def keeps_only_the_reply(messages, reply):
    return {"messages": [{"role": "assistant", "content": reply.content}],
            "pending": reply.tool_uses}


def rejection_not_an_error(saved, approved, tools):
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c, is_error=False) for c in saved["pending"]]
    return [*saved["messages"], {"role": "user", "content": results}]


def rejection_without_a_reason(saved, approved, tools):
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c, content="not run") for c in saved["pending"]]
    return [*saved["messages"], {"role": "user", "content": results}]


def calls_the_function_directly(saved, approved, tools):
    results = []
    for c in saved["pending"]:
        if approved or not _gated(tools, c):
            out = tools.get(c["name"]).fn(**c["input"])
            results.append({"type": "tool_result", "tool_use_id": c["id"], "content": str(out)})
        else:
            results.append(_rejection(c))
    return [*saved["messages"], {"role": "user", "content": results}]


def runs_the_approved_call_twice(saved, approved, tools):
    for c in saved["pending"]:
        if approved and _gated(tools, c):
            tools.run(c)  # "check it works" before the real run
    return good_resume(saved, approved, tools)


def rejects_every_call_on_no(saved, approved, tools):
    results = [tools.run(c).result_block() if approved else _rejection(c)
               for c in saved["pending"]]
    return [*saved["messages"], {"role": "user", "content": results}]


def test_a_correct_pair_scores_full_marks():
    report = judge(good_pause, good_resume)
    assert report.ok, str(report)
    assert report.total == 7


def test_the_notebooks_reference_solution_passes():
    pause, resume_paused = solution("08", "pause"), solution("08", "resume_paused")
    assert judge(pause, resume_paused).ok


def test_the_notebooks_starter_fails_what_it_leaves_out():
    namespace, _ = run_cell("08", "exercise-starter")
    report = judge(namespace["pause"], namespace["resume_paused"])
    assert report.failed == ["no runs nothing", "saved state is JSON", "the list goes on",
                             "two calls, no"]
    fails(report, "saved state is JSON", "not the Reply object")


#: (pause, resume, case it must fail, words its FAIL line must hold)
GALLERY = [
    (saves_the_reply_object, good_resume, "saved state is JSON",
     "json.dumps(saved) failed (TypeError"),
    (good_pause, runs_even_on_no, "no runs nothing", "cancel_order ran 1 time(s) on no"),
    (good_pause, runs_even_on_no, "two calls, no", "must not run unless the person said yes"),
    (good_pause, drops_the_rejected_call, "no runs nothing",
     "no tool_result answers ['toolu_ck_02_1']"),
    (good_pause, answers_only_the_gated_call, "two calls, yes",
     "no tool_result answers ['toolu_ck_02_2']"),
    (good_pause, answers_only_the_gated_call, "two calls, no",
     "every tool_use of the reply needs its tool_result"),
    (good_pause, one_message_per_result, "two calls, yes",
     "put every tool_result of the reply in ONE user message"),
    (good_pause, gated_call_first, "two calls, yes", "answer in request order"),
    (forgets_the_reply, good_resume, "the list goes on",
     "the next message must be the model's reply"),
    (keeps_only_the_reply, good_resume, "the list goes on",
     "does not start with the saved messages"),
    (good_pause, rejection_not_an_error, "no runs nothing", "set is_error: True"),
    (good_pause, rejection_without_a_reason, "no runs nothing", "say that a person rejected it"),
    (good_pause, rejection_without_a_reason, "two calls, no", "say that a person rejected it"),
    (good_pause, calls_the_function_directly, "failing tool", "raised ToolError"),
    (good_pause, calls_the_function_directly, "failing tool",
     "run calls through tools.run(call)"),
    (good_pause, runs_the_approved_call_twice, "yes runs the call once",
     "cancel_order ran 2 times on yes; run each pending call exactly once"),
    (good_pause, rejects_every_call_on_no, "two calls, no",
     "get_order never ran on no (it needs no approval)"),
]


@pytest.mark.parametrize("pause, resume, case, text", GALLERY,
                         ids=[f"{p.__name__}-{r.__name__}-{c}" for p, r, c, _ in GALLERY])
def test_each_broken_pair_fails_the_right_case_saying_what_to_fix(pause, resume, case, text):
    fails(judge(pause, resume), case, text)


def test_every_broken_pair_of_the_gallery_is_used():
    used = {f for p, r, _, _ in GALLERY for f in (p, r)} - {good_pause, good_resume}
    assert len(used) >= 12


# ---------------------------------------------------------------- junk never escapes


def _raises(*args):
    raise RuntimeError("not written yet")


@pytest.mark.parametrize("pause, resume", [
    (good_pause, _raises),
    (_raises, good_resume),
    (good_pause, lambda saved, approved, tools: None),
    (lambda messages, reply: None, good_resume),
    (good_pause, lambda saved, approved, tools: "done"),
    (good_pause, lambda saved, approved, tools: [1, 2, 3]),
    (good_pause, lambda saved, approved, tools: [{"role": "user", "content": "ok"}]),
    (lambda messages, reply: {"x": object()}, lambda saved, approved, tools: []),
    (good_pause, lambda: None),
])
def test_the_check_never_raises_on_junk(pause, resume):
    report = judge(pause, resume)
    assert report.score == 0 and report.total == 7


def test_a_function_that_raises_is_reported_with_its_line():
    report = judge(good_pause, _raises)
    assert "raised RuntimeError: not written yet at line 2 of _raises" in \
        report.detail("yes runs the call once")


def test_none_returned_names_what_to_return():
    report = judge(good_pause, lambda saved, approved, tools: None)
    assert "resume_paused returned NoneType" in report.detail("yes runs the call once")


def test_passing_something_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="check_pause_resume"):
        check_pause_resume(None, good_resume)
    with pytest.raises(TypeError, match="resume_paused"):
        check_pause_resume(good_pause, None)


# ---------------------------------------------- the saved state is enough on its own

_KEPT = {}


def keeps_the_reply_in_a_global(messages, reply):
    _KEPT["reply"] = reply  # lives only in this process
    return {"messages": messages}


def resumes_from_the_global(saved, approved, tools):
    reply = _KEPT["reply"]
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c) for c in reply.tool_uses]
    return [*saved["messages"], {"role": "assistant", "content": reply.content},
            {"role": "user", "content": results}]


def saves_the_calls_but_reads_the_global(messages, reply):
    _KEPT["reply"] = reply
    return good_pause(messages, reply)


def test_a_reply_kept_in_a_global_instead_of_the_saved_state_fails():
    report = judge(keeps_the_reply_in_a_global, resumes_from_the_global)
    assert report.failed == ["saved state is JSON"], str(report)
    fails(report, "saved state is JSON", "save the pending tool_use blocks in what pause "
          "returns; resume must work from that alone, as in another process")


def answers_the_global_reply(saved, approved, tools):
    calls = _KEPT["reply"].tool_uses
    results = [tools.run(c).result_block() if approved or not _gated(tools, c)
               else _rejection(c) for c in calls]
    return [*saved["messages"], {"role": "user", "content": results}]


def test_resuming_from_the_last_paused_reply_answers_the_wrong_run():
    report = judge(saves_the_calls_but_reads_the_global, answers_the_global_reply)
    assert report.failed == ["saved state is JSON"], str(report)
    fails(report, "saved state is JSON", "a call of a run paused after this one")
