"""The quiz object: answers judged with a reason each; malformed quiz files refused."""

import textwrap

import pytest

from primer.course.quiz import QUIZ_DIR, QuizError, load_quiz

GOOD = """
questions:
  - ask: What does end_turn prove?
    choices:
      - text: The answer is right.
        why: No, it is the model's belief.
      - text: The model thinks it is done.
        right: true
        why: Yes; check the output to know more.
  - ask: Input tokens over 10 calls of 500 new tokens each?
    number: 27500
    why: 500 times 1 + 2 + ... + 10.
    wrong:
      - value: 5000
        why: That is the flat estimate.
    otherwise: Each call re-sends the history.
"""


def write(tmp_path, text, name="03"):
    (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(text))
    return tmp_path


def test_a_choice_gets_its_own_explanation(tmp_path):
    quiz = load_quiz("03", write(tmp_path, GOOD))
    assert str(quiz.answer(1, "b")) == "Right: Yes; check the output to know more."
    assert str(quiz.answer(1, "A")) == "Not quite: No, it is the model's belief."
    assert quiz.answer(1, 1).right and not quiz.answer(1, 0).right


def test_a_number_is_right_wrong_with_a_reason_or_wrong(tmp_path):
    quiz = load_quiz(3, write(tmp_path, GOOD))
    assert quiz.answer(2, "27,500").right
    assert quiz.answer(2, 5000).text == "That is the flat estimate."
    assert quiz.answer(2, 123).text == "Each call re-sends the history."


@pytest.mark.parametrize("number, response", [(3, "a"), (0, "a"), (1, "c"), (1, 2),
                                              (1, True), (2, "lots"), (2, float("nan"))])
def test_an_answer_that_is_not_an_answer_says_what_to_give(tmp_path, number, response):
    quiz = load_quiz("03", write(tmp_path, GOOD))
    with pytest.raises(QuizError):
        quiz.answer(number, response)


@pytest.mark.parametrize("bad, says", [
    ("questions: []", "non-empty"),
    ("questions:\n  - ask: q\n    choices:\n      - {text: a, why: w}\n      - {text: b, why: w}",
     "exactly one"),
    ("questions:\n  - ask: q\n    choices:\n      - {text: a, why: w, right: true}\n"
     "      - {text: b, why: w, right: true}", "exactly one"),
    ("questions:\n  - ask: q\n    choices:\n      - {text: a, right: true}\n"
     "      - {text: b, why: w}", "'why'"),
    ("questions:\n  - ask: q\n    number: .nan\n    why: w", "finite"),
    ("questions:\n  - ask: q\n    number: 5\n    why: w\n    wrong: [{value: 5, why: x}]",
     "counts as right"),
    ("questions:\n  - ask: q\n    number: 5", "'why'"),
    ("questions:\n  - ask: q\n    number: 5\n    why: w\n    choices: []", "either"),
    ("questions:\n  - ask: q\n    number: 5\n    why: w\n    answer: 5", "unknown keys"),
    ("questions: [", "cannot be read as UTF-8 YAML"),
])
def test_a_malformed_quiz_file_is_refused_naming_the_question(tmp_path, bad, says):
    with pytest.raises(QuizError, match=says):
        load_quiz("03", write(tmp_path, bad))


def test_a_missing_quiz_says_which(tmp_path):
    with pytest.raises(QuizError, match="no quiz for lesson 07"):
        load_quiz("07", tmp_path)


def test_written_answers_are_folded(tmp_path):
    text = load_quiz("03", write(tmp_path, GOOD)).written()
    assert text.count("<details>") == 2 and "(b) Yes;" in text and "27,500." in text


def test_every_committed_quiz_loads():
    for path in sorted(QUIZ_DIR.glob("*.yaml")):
        load_quiz(path.stem)


def test_the_widget_wires_each_question_to_the_same_answer(tmp_path):
    from primer.views.quiz_widget import quiz_widget
    quiz = load_quiz("03", write(tmp_path, GOOD))
    panel = quiz_widget(quiz)
    first = panel.children[0]
    radio, buttons, verdict = first.children[1], first.children[2], first.children[3]
    buttons.children[0].click()
    assert "Pick an answer" in verdict.value
    radio.value = "b"
    buttons.children[0].click()
    assert "Right: Yes" in verdict.value
    second = panel.children[1]
    second.children[1].value = "5000"
    second.children[2].children[0].click()
    assert "flat estimate" in second.children[3].value


CHOICE = "choices: [{text: a, why: x, right: true}, {text: b, why: y}]"


@pytest.mark.parametrize("bad, says", [
    ("questions:\n - {ask: q, number: 3, why: w, wrong: 5}\n", "must be a list"),
    ("questions:\n - {ask: q, " + CHOICE + ", 1: x, extra: y}\n", "unknown keys"),
    ("questions: " + "[" * 5000 + "]" * 5000 + "\n", "cannot be read"),
    ("questions:\n - {ask: q, number: 3, why: w, wrong: [{value: 4, why: ''}]}\n", "'why'"),
    ("questions:\n - {ask: '   ', " + CHOICE + "}\n", "'ask'"),
    ("questions:\n - {ask: q, choices: [{text: '', why: x, right: true}, {text: b, why: y}]}\n",
     "'text'"),
    ("questions:\n - {ask: q, number: 3, tolerance: '1,5', why: w}\n", "tolerance"),
])
def test_a_hostile_quiz_file_is_a_quiz_error_never_a_crash(tmp_path, bad, says):
    with pytest.raises(QuizError, match=says):
        load_quiz("03", write(tmp_path, bad))


def test_a_file_that_is_not_utf8_is_a_quiz_error(tmp_path):
    (tmp_path / "03.yaml").write_bytes("questions:\n - {ask: 'caf\xe9', ".encode("latin-1")
                                       + CHOICE.encode() + b"}\n")
    with pytest.raises(QuizError, match="UTF-8"):
        load_quiz("03", tmp_path)


@pytest.mark.parametrize("lesson", ["²", "../quizzes/01", "1", True, 3.0, None, "13B"])
def test_a_lesson_name_is_two_digits_and_maybe_a_letter(lesson):
    with pytest.raises(QuizError, match="a lesson is a number"):
        load_quiz(lesson)


@pytest.mark.parametrize("number", [True, 1.0, "1", None])
def test_a_question_number_is_an_int(tmp_path, number):
    quiz = load_quiz("03", write(tmp_path, GOOD))
    with pytest.raises(QuizError, match="there is no question"):
        quiz.answer(number, "b")


@pytest.mark.parametrize("typed, value", [("27,500", 27500), ("27500", 27500), ("2.75e4", 27500),
                                          ("0,5", 0.5), ("3,6", 3.6), ("-1,250.5", -1250.5)])
def test_numbers_are_read_as_people_type_them(tmp_path, typed, value):
    quiz = load_quiz("03", write(tmp_path, GOOD.replace("number: 27500", f"number: {value}")))
    assert quiz.answer(2, typed).right


def test_a_long_answer_is_not_echoed_in_full(tmp_path):
    quiz = load_quiz("03", write(tmp_path, GOOD))
    with pytest.raises(QuizError) as raised:
        quiz.answer(1, "x" * 100_000)
    assert len(str(raised.value)) < 200
