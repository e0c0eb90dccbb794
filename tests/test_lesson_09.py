"""Lesson 09's quiz figures, recomputed with the library."""

from __future__ import annotations

from primer import RetryPolicy
from primer.course.quiz import load_quiz


def test_the_ceiling_before_retry_4_is_8_s_and_the_60_s_cap_is_reached_at_retry_7():
    policy = RetryPolicy(base_s=1.0, factor=2.0, max_delay_s=60.0)
    assert policy.backoff_s(4) == 8.0
    assert (policy.backoff_s(6), policy.backoff_s(7)) == (32.0, 60.0)
    quiz = load_quiz("09")
    assert quiz.answer(2, 8).right
    assert not quiz.answer(2, 16).right and not quiz.answer(2, 60).right


def test_the_quiz_has_one_right_choice_per_choice_question():
    quiz = load_quiz("09")
    assert quiz.answer(1, "b").right and quiz.answer(3, "a").right
    assert quiz.answer(4, "b").right and quiz.answer(5, "c").right
