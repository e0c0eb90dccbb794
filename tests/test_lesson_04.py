"""Lesson 04's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

from primer.loop.mini import ten_line_loop
from primer.loop.tools import ToolRegistry
from primer.scenarios import hr


def run(mistake=None):
    return ten_line_loop(hr.make_llm(mistake), hr.TASK, ToolRegistry(hr.make_tools()),
                         system=hr.SYSTEM)


def tokens(replies):
    return sum(r.usage.total_tokens for r in replies)


def test_each_mistake_comes_back_as_an_error_and_call_2_fixes_it():
    kinds = {}
    registry = ToolRegistry(hr.make_tools())
    for mistake, (name, args) in hr.MISTAKES.items():
        kinds[mistake] = registry.run({"id": "t", "name": name, "input": args}).error_kind
        messages, replies = run(mistake)
        assert any(b["is_error"] for b in messages[2]["content"])
        assert not messages[4]["content"][0]["is_error"]
        assert [r.stop_reason for r in replies] == ["tool_use", "tool_use", "end_turn"]
    assert kinds == {"unknown_tool": "unknown_tool", "bad_args": "invalid_input",
                     "bad_date": "tool_error"}


def test_the_recovered_run_costs_1533_tokens_more_than_a_crash_and_restart_at_1216():
    _, recovered = run("bad_date")
    _, clean = run()
    assert [(r.usage.input_tokens, r.usage.output_tokens) for r in recovered] == [
        (260, 79), (490, 56), (603, 45)]
    assert (tokens(recovered), tokens(clean), tokens(recovered[:1])) == (1533, 877, 339)
    assert tokens(recovered[:1]) + tokens(clean) == 1216 < tokens(recovered)


def test_the_quizzes_scripted_answers_are_right():
    from primer.course.quiz import load_quiz
    assert load_quiz("03").answer(1, "b").right
    assert load_quiz("04").answer(2, "c").right
