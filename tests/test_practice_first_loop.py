"""Lesson 03's check, check_first_loop: the notebook's reference loop passes, realistic broken
loops fail the right behaviour with a line that says what to fix, junk never escapes."""

from __future__ import annotations

import json

import pytest
from notebook_cells import solution

from primer.course.practice.first_loop import FIRST_LOOP, check_first_loop


def judge(fn):
    return check_first_loop(fn, show=False)


def text_of(reply):
    return " ".join(b["text"] for b in reply["content"] if b["type"] == "text")


def run_tools(reply, tools, *, dump=json.dumps, catch=True):
    results = []
    for call in (b for b in reply["content"] if b["type"] == "tool_use"):
        try:
            content, failed = dump(tools[call["name"]](**call["input"])), False
        except Exception as e:
            if not catch:
                raise
            content, failed = f"{type(e).__name__}: {e}", True
        results.append({"type": "tool_result", "tool_use_id": call["id"],
                        "content": content, "is_error": failed})
    return results


def make_loop(*, answer=text_of, steps=lambda n: n, keep=lambda reply: reply["content"],
              answer_with=lambda results: [{"role": "user", "content": results}],
              **tool_options):
    """The reference loop with one piece swapped for a realistic mistake."""
    def my_loop(model, task, tools, *, max_steps, token_budget):
        messages = [{"role": "user", "content": task}]
        for _ in range(steps(max_steps)):
            reply = model(messages, tools.definitions)
            messages.append({"role": "assistant", "content": keep(reply)})
            if reply["stop_reason"] == "end_turn":
                return {"answer": answer(reply), "stop_cause": "end_turn"}
            messages += answer_with(run_tools(reply, tools, **tool_options))
        return {"answer": None, "stop_cause": "max_steps"}
    return my_loop


def keyword_model_call(model, task, tools, *, max_steps, token_budget):
    reply = model(system="", messages=[{"role": "user", "content": task}],
                  tools=tools.definitions, max_tokens=1024)
    return {"answer": text_of(reply), "stop_cause": "end_turn"}


#: mistake -> (loop, the behaviour that fails first, words of its FAIL line)
GALLERY = {
    "reads the first text block only": (
        make_loop(answer=lambda reply: reply["content"][0]["text"]),
        "answer in two text blocks", "the text of every text block, joined"),
    "one user message per result": (
        make_loop(answer_with=lambda results: [{"role": "user", "content": [r]}
                                               for r in results]),
        "two calls in one reply", "put all results in one user message"),
    "results in reverse order": (
        make_loop(answer_with=lambda results: [{"role": "user", "content": results[::-1]}]),
        "two calls in one reply", "in the order the model asked for them"),
    "lets a failing tool raise": (
        make_loop(catch=False), "wrong argument", "raised TypeError"),
    "keeps only the reply's text": (
        make_loop(keep=lambda reply: text_of(reply)),
        "happy path", "keep the reply's tool_use blocks in the assistant message"),
    "sends the raw output": (
        make_loop(dump=lambda value: value), "happy path", "send json.dumps(output)"),
    "no step limit": (
        make_loop(steps=lambda n: 10**6), "step limit", "it needs a step limit"),
    "stops one call early": (
        make_loop(steps=lambda n: n - 1), "step limit", "make all 4 calls before stopping"),
    "calls the model with the LLM protocol": (
        keyword_model_call, "happy path", "model(messages, tool_definitions)"),
}


def test_the_notebooks_reference_loop_passes_every_behaviour():
    report = judge(solution("03", "my_loop"))
    assert report.score == report.total == len(FIRST_LOOP) == 5


def test_the_reference_made_here_passes_too():
    assert judge(make_loop()).failed == []


def test_the_gallery_holds_realistic_mistakes():
    assert len(GALLERY) >= 4


@pytest.mark.parametrize("mistake", GALLERY)
def test_each_mistake_fails_its_behaviour_saying_what_to_fix(mistake):
    loop, behaviour, words = GALLERY[mistake]
    report = judge(loop)
    assert behaviour in report.failed
    detail = next(r.detail for r in report.results if r.name == behaviour)
    assert words in detail, detail


def test_a_loop_that_runs_its_last_replys_tools_passes_here_though_lesson_05_fails_it():
    from primer.course.exercises import check_loop
    loop = make_loop()
    assert "step limit" not in judge(loop).failed
    assert "model that wanders" in check_loop(loop, show=False).failed


def test_the_starter_fails_every_behaviour_naming_what_is_missing():
    def my_loop(model, task, tools, *, max_steps, token_budget):
        model([{"role": "user", "content": task}], tools.definitions)
        return {"answer": None, "stop_cause": "max_steps"}
    report = judge(my_loop)
    assert report.score == 0
    assert "make all 4 calls before stopping" in report.results[-1].detail


@pytest.mark.parametrize("junk", [
    lambda *a, **k: None,
    lambda *a, **k: 1 / 0,
    lambda *a, **k: "end_turn",
    lambda *a, **k: {"answer": 5900, "stop_cause": "end_turn"},
    lambda model: None,
])
def test_junk_is_a_failure_never_an_exception(junk):
    report = judge(junk)
    assert report.score == 0 and report.total == 5


def test_a_value_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError, match="check_loop needs your loop function"):
        check_first_loop("my_loop")
