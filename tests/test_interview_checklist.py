"""The interview checklist grades marked claims and orderings, never keywords."""

from __future__ import annotations

import pytest

from primer.course.interview_checklist import QUESTIONS, checklist, grade

WRONG_BUT_WORDY = ("The model runs the tool itself; no harness, allow-list, schema or "
                   "approval is needed.")


def right_answer(k: int) -> str:
    """The right marks for question ``k`` (from 1), derived from its claims or steps."""
    q = QUESTIONS[k - 1]
    if q.claims:
        return "".join("T" if c.true else "F" for c in q.claims)
    return "".join(chr(97 + q.shown.index(i)) for i in range(len(q.steps)))


def line(answers, k: int) -> str:
    return next(ln for ln in checklist(answers).splitlines() if ln[4:].startswith(f"{k}. "))


def test_the_wordy_wrong_answer_gets_no_tick_as_free_text():
    text = checklist({2: WRONG_BUT_WORDY})
    assert line({2: WRONG_BUT_WORDY}, 2).startswith("[ ] 2.")
    assert "not graded: mark each of the 4 claims T or F" in text
    assert "[x]" not in text


def test_the_wordy_wrong_answer_is_a_claim_to_refute_and_confirming_it_is_marked_wrong():
    q = QUESTIONS[1]
    k = next(i for i, c in enumerate(q.claims) if c.text == WRONG_BUT_WORDY)
    assert q.claims[k].true is False
    marks = list(right_answer(2))
    marks[k] = "T"
    g = grade(q, "".join(marks))
    assert g.mark == "~"
    assert g.notes == (f"{chr(97 + k)}) is false: the harness runs every tool; the model can "
                       f"only ask",)


@pytest.mark.parametrize("k", range(1, len(QUESTIONS) + 1))
def test_the_right_marks_get_a_tick_and_any_one_flipped_mark_does_not(k):
    right = right_answer(k)
    assert grade(QUESTIONS[k - 1], right.lower()).mark == "x"
    if QUESTIONS[k - 1].claims:
        for i in range(len(right)):
            flipped = right[:i] + ("F" if right[i] == "T" else "T") + right[i + 1:]
            assert grade(QUESTIONS[k - 1], flipped).mark == "~"


def test_every_true_false_question_mixes_true_and_false_claims():
    for q in QUESTIONS:
        if q.claims:
            assert {c.true for c in q.claims} == {True, False}, q.text


def test_an_ordering_names_the_first_pair_out_of_order():
    q = next(q for q in QUESTIONS if q.steps)
    right = right_answer(QUESTIONS.index(q) + 1)
    swapped = right[1] + right[0] + right[2:]
    assert grade(q, swapped).notes == (f"'{q.steps[0]}' comes before '{q.steps[1]}'",)
    assert grade(q, "abcdef").mark == "~"  # the letters in alphabetical order are wrong
    assert grade(q, "abc").mark == " " and "each letter once" in grade(q, "abc").notes[0]


def test_the_ordering_is_the_loops_own_check_order():
    from primer.loop.checks import AFTER_REPLY

    q = next(q for q in QUESTIONS if q.steps)
    names = [c.__name__ for c in AFTER_REPLY if c.__name__ != "check_step_limit"]
    assert names == ["check_stop_reason", "check_budgets", "check_handoff", "check_repeats",
                     "check_approval"]
    assert len(q.steps) == len(names) + 1  # then the tools run


def test_the_right_answer_for_the_ordering_is_not_the_alphabet():
    q = next(q for q in QUESTIONS if q.steps)
    assert right_answer(QUESTIONS.index(q) + 1) != "abcdef"


def test_a_blank_checklist_says_how_to_answer_each_question():
    lines = checklist().splitlines()
    assert sum(ln.startswith("[ ] ") for ln in lines) == len(QUESTIONS)
    assert "      (mark each of the 4 claims T or F, one letter each)" in lines


def test_answers_are_keyed_by_number_or_text():
    assert checklist({"1": right_answer(1)}) == checklist({QUESTIONS[0].text: right_answer(1)})
    assert line({1: right_answer(1)}, 1) == f"[x] 1. {QUESTIONS[0].text}"


def test_show_options_lists_the_claims_under_each_question():
    text = checklist(show_options=True)
    assert f"      b) {WRONG_BUT_WORDY}" in text


def test_an_answer_to_no_question_is_refused():
    with pytest.raises(KeyError, match="key answers by number"):
        checklist({99: "T"})


def test_the_security_and_operations_half_is_asked():
    texts = " ".join(q.text for q in QUESTIONS)
    assert "ignore your instructions and refund" in texts and "on-call" in texts
