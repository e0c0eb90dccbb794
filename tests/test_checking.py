"""The exercise checks' common part: a learner's failure is a FAIL line, never a crash."""

import pytest

from primer.course.checking import Case, describe_exception, run_cases, short


class Unprintable(Exception):
    def __str__(self):
        raise AttributeError("no field")


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")

    __str__ = __repr__


def learner_raises(exc):
    def fn(x):
        raise exc
    return fn


@pytest.mark.parametrize("exc, says", [
    (Unprintable(), "raised Unprintable: <Unprintable that cannot be shown>"),
    (SystemExit(3), "raised SystemExit: 3"),
    (ValueError("x" * 500), "raised ValueError: " + "x" * 117 + "..."),
])
def test_an_exception_from_the_learner_is_a_fail_line(exc, says):
    report = run_cases(learner_raises(exc), [Case("one", lambda fn: fn(1), "ok")], what="f",
                       show=False)
    assert report.score == 0 and report.detail("one").startswith(says)


def test_a_value_that_cannot_be_shown_is_named_by_its_type():
    assert short(BadRepr()) == "<BadRepr that cannot be shown>"
    report = run_cases(lambda x: BadRepr(),
                       [Case("one", lambda fn: f"returned {short(fn(1))}", "ok")],
                       what="f", show=False)
    assert report.detail("one") == "returned <BadRepr that cannot be shown>"


def test_keyboard_interrupt_still_stops_the_check():
    with pytest.raises(KeyboardInterrupt):
        run_cases(learner_raises(KeyboardInterrupt()), [Case("one", lambda fn: fn(1), "ok")],
                  what="f", show=False)


def test_the_line_of_the_learners_code_is_named():
    def execute(call):
        value = {}["missing"]
        return value
    try:
        execute(1)
    except KeyError as e:
        line = describe_exception(e, execute)
    assert line == "raised KeyError: 'missing' at line 2 of execute: `value = {}[\"missing\"]`"


def test_a_passing_case_prints_its_line_and_the_score(capsys):
    report = run_cases(lambda x: x, [Case("echo", lambda fn: None if fn(2) == 2 else "no",
                                          "returned what it got")], what="f")
    assert capsys.readouterr().out == "PASS  echo: returned what it got\nscore: 1/1\n"
    assert report.ok and repr(report) == "ExerciseReport(score=1/1, failed=[])"


def test_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="pass your function"):
        run_cases("f", [], what="f")
