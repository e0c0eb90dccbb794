""""Test yourself": a lesson's quiz, answered in the notebook, with a reason for every answer.

Each lesson's questions live in ``primer/course/quizzes/NN.yaml`` (``NN`` the lesson
number). A question is either a choice or a number::

    questions:
      - ask: A run ends with stop_reason end_turn. What has it shown?
        choices:
          - text: The answer is right.
            why: No. end_turn is the model's belief that it is done, not proof ...
          - text: The model believes it has finished.
            right: true
            why: Yes. Only a check of the output (a schema, an assertion, an evaluator) ...
      - ask: Ten calls, 500 new tokens each, no base. Input tokens sent in all?
        number: 27500
        tolerance: 0          # absolute; 0 means exactly
        why: Call n re-sends the n - 1 steps before it ...
        wrong:                # answers people give, each with its own reason (optional)
          - value: 5000
            why: That is the flat estimate; each call re-sends the history.
        otherwise: Add up what each call sends, 500 · n for n = 1..10.

Choice questions have exactly one ``right: true`` choice, and every choice has a ``why``.
:class:`Quiz` holds the logic (:meth:`Quiz.answer` returns a :class:`Feedback`), so a test,
nbval and the widget (:func:`primer.views.quiz.quiz_widget`) drive the same object.
:meth:`Quiz.written` renders the questions with folded answers, for the static website.
Loading checks the file and raises :class:`QuizError` naming the question that is wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: Where the lessons' quiz files live.
QUIZ_DIR = Path(__file__).with_name("quizzes")

#: A lesson's name: two digits, optionally a letter for the second part of a split lesson.
_LESSON = re.compile(r"\d{2}[a-z]?")

#: A number as people type it: digits with optional thousands commas (``27,500``) or a
#: decimal comma (``0,0833``), a decimal point, an exponent.
_NUMBER = re.compile(r"[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?"
                     r"|[+-]?\d+,\d+|[+-]?\.\d+([eE][+-]?\d+)?")

#: Choice labels, in order: the first choice is ``a``.
LABELS = "abcdefgh"


class QuizError(ValueError):
    """A quiz file that cannot be used, or an answer in a form the question cannot take."""


@dataclass(frozen=True)
class Choice:
    """One choice of a question: its ``text``, whether it is ``right``, and ``why``."""

    text: str
    right: bool
    why: str


@dataclass(frozen=True)
class WrongNumber:
    """A wrong number people often give (``value``) and the reason it is wrong (``why``)."""

    value: float
    why: str


@dataclass(frozen=True)
class QuizQuestion:
    """A choice question (``choices`` set) or a number question (``number`` set).

    For a number, an answer within ``tolerance`` (absolute) of ``number`` is right and gets
    ``why``; a value in ``wrong`` gets that entry's reason; any other gets ``otherwise``.
    """

    ask: str
    choices: tuple[Choice, ...] = ()
    number: float | None = None
    tolerance: float = 0.0
    why: str = ""
    wrong: tuple[WrongNumber, ...] = ()
    otherwise: str = ""

    @property
    def right_label(self) -> str:
        """The label of the right choice (``"b"``), or the number as text."""
        if self.number is not None:
            return _number_text(self.number)
        return next(LABELS[i] for i, c in enumerate(self.choices) if c.right)


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: ``right``, and the explanation ``text``.

    ``str(feedback)`` is ``Right: <text>`` or ``Not quite: <text>``.
    """

    right: bool
    text: str

    def __str__(self) -> str:
        return f"{'Right' if self.right else 'Not quite'}: {self.text}"


@dataclass(frozen=True)
class Quiz:
    """A lesson's questions, in order; question numbers count from 1."""

    lesson: str
    questions: tuple[QuizQuestion, ...]

    def answer(self, number: int, response: str | float) -> Feedback:
        """Judge ``response`` to question ``number`` (1-based).

        A choice question takes a label (``"b"``, any case) or the choice's index from 0;
        a number question takes a number or a string that parses as one (``"27,500"``).
        Raises :class:`QuizError` for a question that does not exist or a response that is
        not an answer to it (the message says what to give).
        """
        if isinstance(number, bool) or not isinstance(number, int) \
                or not 1 <= number <= len(self.questions):
            raise QuizError(f"lesson {self.lesson}'s quiz has questions 1 to "
                            f"{len(self.questions)}; there is no question {number}")
        q = self.questions[number - 1]
        if q.number is not None:
            value = _as_number(response)
            if value is None:
                raise QuizError(f"question {number} asks for a number; got "
                                f"{_brief(response)}")
            if abs(value - q.number) <= q.tolerance:
                return Feedback(True, q.why)
            for w in q.wrong:
                if abs(value - w.value) <= q.tolerance:
                    return Feedback(False, w.why)
            return Feedback(False, q.otherwise or f"the answer is not {_number_text(value)}.")
        i = _choice_index(response, len(q.choices))
        if i is None:
            raise QuizError(f"question {number} has choices "
                            f"{', '.join(LABELS[:len(q.choices)])}; got {_brief(response)}")
        c = q.choices[i]
        return Feedback(c.right, c.why)

    def written(self) -> str:
        """The questions as Markdown, each answer folded in a ``<details>`` block (for the
        static website, where the widget does not run)."""
        parts = []
        for n, q in enumerate(self.questions, 1):
            lines = [f"**{n}. {q.ask}**", ""]
            lines += [f"- ({LABELS[i]}) {c.text}" for i, c in enumerate(q.choices)]
            right = next((c for c in q.choices if c.right), None)
            answer = (f"({q.right_label}) {right.why}" if right is not None
                      else f"{q.right_label}. {q.why}")
            lines += ["", f"<details><summary>Answer</summary>\n\n{answer}\n\n</details>"]
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def _repr_markdown_(self) -> str:
        return self.written()

    def __repr__(self) -> str:
        return f"Quiz(lesson {self.lesson!r}, {len(self.questions)} questions)"


def load_quiz(lesson: str | int, directory: Path | None = None) -> Quiz:
    """The quiz of lesson ``lesson`` (``"03"``, ``3`` or ``"13b"``), read from
    ``directory`` (default :data:`QUIZ_DIR`). Raises :class:`QuizError` when the file is
    missing or a question is malformed (no right choice, two right choices, a choice
    without ``why``, a number that is not finite, ...)."""
    if isinstance(lesson, bool) or not isinstance(lesson, (int, str)):
        raise QuizError(f"a lesson is a number like 3 or a name like '13b'; got {lesson!r}")
    name = f"{lesson:02d}" if isinstance(lesson, int) else lesson
    if not _LESSON.fullmatch(name):
        raise QuizError(f"a lesson is a number like 3 or a name like '13b'; got {lesson!r}")
    path = (directory or QUIZ_DIR) / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QuizError(f"no quiz for lesson {name}: {path.name} is not in "
                        f"{(directory or QUIZ_DIR).name}/") from None
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise QuizError(f"{path.name} cannot be read as UTF-8 YAML: "
                        f"{type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list) \
            or not data["questions"]:
        raise QuizError(f"{path.name}: expected a mapping with a non-empty 'questions' list")
    return Quiz(name, tuple(_question(q, n, path.name)
                            for n, q in enumerate(data["questions"], 1)))


def _question(raw: Any, n: int, file: str) -> QuizQuestion:
    where = f"{file}, question {n}"
    if not isinstance(raw, dict) or not isinstance(raw.get("ask"), str) \
            or not raw["ask"].strip():
        raise QuizError(f"{where}: each question needs an 'ask' text")
    known = {"ask", "choices", "number", "tolerance", "why", "wrong", "otherwise"}
    if set(raw) - known:
        raise QuizError(f"{where}: unknown keys {sorted(map(str, set(raw) - known))}")
    if ("choices" in raw) == ("number" in raw):
        raise QuizError(f"{where}: give either 'choices' or 'number'")
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list) or not 2 <= len(choices) <= len(LABELS):
            raise QuizError(f"{where}: 'choices' needs 2 to {len(LABELS)} entries")
        parsed = []
        for c in choices:
            if not isinstance(c, dict) or not isinstance(c.get("text"), str) \
                    or not c["text"].strip() \
                    or not isinstance(c.get("why"), str) or not c["why"].strip() \
                    or not isinstance(c.get("right", False), bool):
                raise QuizError(f"{where}: each choice needs 'text' and 'why' (strings) and "
                                f"may have 'right: true'")
            parsed.append(Choice(c["text"], c.get("right", False), c["why"].strip()))
        if sum(c.right for c in parsed) != 1:
            raise QuizError(f"{where}: exactly one choice must have 'right: true'")
        return QuizQuestion(raw["ask"], choices=tuple(parsed))
    number = _as_number(raw["number"])
    tolerance = raw.get("tolerance", 0)
    tolerance = _as_number(tolerance) if not isinstance(tolerance, str) else None
    if number is None or tolerance is None or tolerance < 0:
        raise QuizError(f"{where}: 'number' and 'tolerance' must be finite numbers, "
                        f"tolerance >= 0")
    if not isinstance(raw.get("why"), str) or not raw["why"].strip():
        raise QuizError(f"{where}: a number question needs 'why' (the explanation)")
    wrong = []
    entries = raw.get("wrong", []) or []
    if not isinstance(entries, list):
        raise QuizError(f"{where}: 'wrong' must be a list of {{value, why}} entries")
    for w in entries:
        value = _as_number(w.get("value")) if isinstance(w, dict) else None
        if value is None or not isinstance(w.get("why"), str) or not w["why"].strip():
            raise QuizError(f"{where}: each 'wrong' entry needs a number 'value' and a 'why'")
        if abs(value - number) <= tolerance:
            raise QuizError(f"{where}: wrong value {w['value']} counts as right")
        wrong.append(WrongNumber(value, w["why"].strip()))
    otherwise = raw.get("otherwise", "")
    if not isinstance(otherwise, str):
        raise QuizError(f"{where}: 'otherwise' must be text")
    return QuizQuestion(raw["ask"], number=number, tolerance=tolerance, why=raw["why"].strip(),
                    wrong=tuple(wrong), otherwise=otherwise.strip())


def _as_number(value: Any) -> float | None:
    """A finite float from a number or a string as people type one: ``"27,500"``
    (thousands commas), ``"0,0833"`` (a decimal comma), ``"1e3"``; ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 60 or not _NUMBER.fullmatch(text):
            return None
        if re.fullmatch(r"[+-]?\d+,\d+", text) and not re.fullmatch(r"[+-]?\d{1,3},\d{3}", text):
            text = text.replace(",", ".")  # a decimal comma: 0,0833 or 1,5
        value = float(text.replace(",", ""))
    if not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _brief(value: Any) -> str:
    """``repr(value)``, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _choice_index(response: Any, count: int) -> int | None:
    if isinstance(response, str) and len(response.strip()) == 1:
        i = LABELS.find(response.strip().lower())
        return i if 0 <= i < count else None
    if isinstance(response, int) and not isinstance(response, bool) and 0 <= response < count:
        return response
    return None


def _number_text(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,}"
