"""Lesson 12's sub-agent check: the reference passes, each realistic mistake fails the right
case with a message that says what to fix, and junk never breaks the check."""

from __future__ import annotations

import pytest
from notebook_cells import solution

from primer.course.practice.sub_agent import check_sub_agent_call
from primer.loop.messages import assistant_message, tool_result_block, user_message


def judge(fn):
    return check_sub_agent_call(fn, show=False)


def test_the_notebooks_reference_solution_scores_full_marks():
    report = judge(solution("12", "call_sub_agent"))
    assert report.ok, str(report)
    assert report.total == 6


def make(*, history=False, mutate=False, charge="total", whole_share=False, no_stop=False,
         answer="final", error_flag=True, result_id=True):
    """A sub-agent call with one deliberate mistake (the defaults make it right)."""

    def call_sub_agent(call, parent, llm, tools, share):
        allowance = share if whole_share else min(share, parent["limit"] - parent["spent"])
        task = user_message(call["input"]["task"])
        if mutate:
            messages = parent["messages"]
            messages.append(task)
        elif history:
            messages = [*parent["messages"], task]
        else:
            messages = [task]
        spent, texts, last = 0, [], None
        while no_stop or spent < allowance:
            reply = llm(system="", messages=messages, tools=tools.definitions(), max_tokens=1024)
            spent += reply.usage.total_tokens
            if charge == "total":
                parent["spent"] += reply.usage.total_tokens
            elif charge == "output":
                parent["spent"] += reply.usage.output_tokens
            last = reply
            texts.append(reply.text)
            messages.append(assistant_message(reply.content))
            if reply.stop_reason != "tool_use":
                content = {"final": reply.text, "all": "\n".join(texts),
                           "transcript": str(messages)}[answer]
                return tool_result_block(call["id"] if result_id else "toolu_child",
                                         content)
            results = [tools.run(c).result_block() for c in reply.tool_uses]
            messages.append(user_message(results))
        if charge == "last" and last is not None:
            parent["spent"] += last.usage.total_tokens
        return tool_result_block(call["id"], "stopped at its share", is_error=error_flag)

    if charge == "last":                    # charges once, at the end, only the last call
        inner = call_sub_agent

        def call_sub_agent(call, parent, llm, tools, share):  # noqa: F811
            before = parent["spent"]
            seen = []

            def recording(**kw):
                reply = llm(**kw)
                seen.append(reply)
                return reply

            out = inner(call, parent, recording, tools, share)
            parent["spent"] = before + (seen[-1].usage.total_tokens if seen else 0)
            return out

    return call_sub_agent


@pytest.mark.parametrize("mistake, case, words", [
    (dict(history=True), "fresh history", "start the child with a new list"),
    (dict(mutate=True), "fresh history", "start the child with a new list"),
    (dict(charge="none"), "parent charged", "parent['spent'] grew by 0"),
    (dict(charge="output"), "parent charged", "reply.usage.total_tokens"),
    (dict(charge="last"), "parent charged", "not only the last"),
    (dict(no_stop=True), "stops at its share", "called more than 60 times"),
    (dict(whole_share=True), "no more than the parent has left", "min(share, limit - spent)"),
    (dict(answer="all"), "only the final text", "it holds the child's thoughts"),
    (dict(answer="transcript"), "only the final text", "it holds the child's tool results"),
    (dict(error_flag=False), "stops at its share", "is not is_error"),
    (dict(result_id=False), "only the final text", "use the parent's call['id']"),
])
def test_each_mistake_fails_the_right_case_with_a_message_that_says_what_to_fix(
        mistake, case, words):
    report = judge(make(**mistake))
    assert case in report.failed, str(report)
    assert words in report.detail(case), report.detail(case)


def test_the_gallery_helper_without_a_mistake_passes():
    assert judge(make()).ok


def test_a_child_that_leaks_into_the_parents_list_is_caught_even_if_it_starts_fresh():
    def leaky(call, parent, llm, tools, share):
        out = make()(call, parent, llm, tools, share)
        parent["messages"].append(user_message("child transcript"))
        return out

    report = judge(leaky)
    assert report.failed == ["fresh history"]
    assert "never to parent['messages']" in report.detail("fresh history")


@pytest.mark.parametrize("junk", [
    lambda call, parent, llm, tools, share: 1 / 0,
    lambda call, parent, llm, tools, share: None,
    lambda call, parent, llm, tools, share: "done",
    lambda call, parent, llm, tools, share: {"type": "tool_result"},
    lambda: None,
])
def test_junk_is_judged_not_raised(junk):
    report = judge(junk)
    assert not report.ok


def test_a_non_callable_is_a_type_error_naming_the_function():
    with pytest.raises(TypeError, match="call_sub_agent"):
        check_sub_agent_call(None)
