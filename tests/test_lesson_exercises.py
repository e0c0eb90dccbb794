"""Every lesson has an exercise (starter, check, folded solution) and an in-notebook quiz.

The convention (see :mod:`primer.course.checking` and :mod:`primer.course.quiz`): a code
cell tagged ``exercise-starter`` the learner completes; a later one tagged
``exercise-check`` that judges it (its committed output shows what the starter misses); a
folded (``source_hidden``) cell tagged ``exercise-solution`` whose check scores full marks;
and a "Test yourself" cell tagged ``quiz`` that shows the lesson's quiz.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from notebook_cells import ROOT

from primer.course.quiz import load_quiz

LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb"))


def cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def text_out(cell):
    return "".join(o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name.split("_")[0])
def test_the_lesson_has_a_starter_a_check_and_a_folded_solution_that_passes(path):
    code = cells(path)
    starters = [i for i, c in enumerate(code) if "exercise-starter" in tags(c)]
    checks = [i for i, c in enumerate(code) if "exercise-check" in tags(c)]
    solutions = [i for i, c in enumerate(code) if "exercise-solution" in tags(c)]
    assert starters and checks and solutions, (starters, checks, solutions)
    assert starters[0] < checks[0] < solutions[0]
    for i in checks:
        assert re.search(r"score: \d+/\d+", text_out(code[i])), "a check prints its score"
    for i in solutions:
        assert code[i].metadata.get("jupyter", {}).get("source_hidden"), "fold the solution"
        scores = re.findall(r"score: (\d+)/(\d+)", text_out(code[i]))
        assert scores and all(a == b for a, b in scores), f"solution scores {scores}"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name.split("_")[0])
def test_the_lesson_ends_with_its_quiz(path):
    lesson = path.name.split("_")[0]
    quiz = load_quiz(lesson)
    assert len(quiz.questions) >= 3
    shown = [c for c in cells(path) if "quiz" in tags(c)]
    assert shown and f'load_quiz("{lesson}")' in shown[0].source


def test_every_lesson_is_checked():
    numbers = [p.name.split("_")[0] for p in LESSONS]
    assert {f"{n:02d}" for n in range(1, 17)} <= set(numbers) and "13b" in numbers
