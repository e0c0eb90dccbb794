"""How a lesson's exercise is judged: the learner's function run on cases it did not write.

Every exercise of lessons 01–16 follows one pattern. The learner writes a function in the
notebook; the next cell calls a ``check_...`` function of :mod:`primer.course.practice`,
which runs it on a few :class:`Case` objects and prints one line per case::

    PASS  two tool calls: both results in one user message, in request order
    FAIL  unknown tool: raised KeyError: 'refund' at line 4 of execute: `fn = tools[name]`
    score: 1/2

A case is a name, a function that runs the learner's code and returns what is wrong (or
``None``), and a line saying what passing showed. A FAIL line names what to fix; an
exception inside the learner's code is that case's failure, reported with the line of the
learner's function that raised it (:func:`describe_exception`), never an escape from the
check. :func:`run_cases` does the bookkeeping so each check module holds only its cases.
"""

from __future__ import annotations

import linecache
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: What a case's ``probe`` returns: a sentence naming what is wrong and how to fix it, or
#: ``None`` when the learner's code behaved.
Problem = str | None


@dataclass(frozen=True)
class CheckResult:
    """One case's verdict: ``name``, ``passed``, and ``detail`` (what happened)."""

    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        """``PASS  name: detail`` or ``FAIL  name: detail``."""
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}"


@dataclass(frozen=True)
class Case:
    """One case of an exercise check.

    ``probe(fn)`` calls the learner's function ``fn`` on the case's own input and returns
    the problem (a sentence: what was expected, what happened, what to change) or ``None``;
    ``passed`` is the line printed when it returns ``None``.
    """

    name: str
    probe: Callable[[Callable[..., Any]], Problem]
    passed: str


@dataclass(frozen=True)
class ExerciseReport:
    """Every case's :class:`CheckResult` in order, and the score.

    ``str(report)`` is one line per case and a last line ``score: k/n``; ``report.ok`` is
    true when every case passed.
    """

    results: tuple[CheckResult, ...]

    @property
    def score(self) -> int:
        """Cases passed."""
        return sum(r.passed for r in self.results)

    @property
    def total(self) -> int:
        """Cases checked."""
        return len(self.results)

    @property
    def ok(self) -> bool:
        """Whether every case passed."""
        return self.score == self.total

    @property
    def failed(self) -> list[str]:
        """Names of the cases that failed, in order."""
        return [r.name for r in self.results if not r.passed]

    def detail(self, name: str) -> str:
        """The detail line of the case called ``name`` (``KeyError`` if there is none)."""
        for r in self.results:
            if r.name == name:
                return r.detail
        raise KeyError(name)

    def __str__(self) -> str:
        return "\n".join([*(r.line() for r in self.results),
                          f"score: {self.score}/{self.total}"])

    def __repr__(self) -> str:
        return f"ExerciseReport(score={self.score}/{self.total}, failed={self.failed})"


def run_cases(fn: Any, cases: Sequence[Case], *, what: str, show: bool = True
              ) -> ExerciseReport:
    """Run ``fn`` through every case and return (and, when ``show``, print) the report.

    ``what`` names the function the exercise asks for (``"execute"``), for the message when
    ``fn`` is not callable. An exception raised by the learner's code inside a probe (even
    ``SystemExit``) is that case's failure, described by :func:`describe_exception`;
    ``KeyboardInterrupt`` still stops the check. Raises ``TypeError`` only when ``fn`` is not
    callable.
    """
    if not callable(fn):
        raise TypeError(f"pass your function itself, e.g. check(…)({what}); "
                        f"got {type(fn).__name__}")
    results = []
    for case in cases:
        try:
            problem = case.probe(fn)
        except KeyboardInterrupt:
            raise  # the person at the keyboard stops the check
        except BaseException as e:  # noqa: BLE001 - the learner's exception (sys.exit
            problem = describe_exception(e, fn)  # included) is the verdict, never an exit
        results.append(CheckResult(case.name, problem is None,
                                   case.passed if problem is None else problem))
    report = ExerciseReport(tuple(results))
    if show:
        print(report)
    return report


def shown(value: Any, show: Any = str) -> str:
    """``show(value)`` (``str`` or ``repr``), or a placeholder naming its type when that
    raises: a learner's exception or value whose ``__str__`` fails still gets a FAIL line."""
    try:
        text = show(value)
        return text if isinstance(text, str) else f"<{type(value).__name__}>"
    except Exception:  # noqa: BLE001 - any failure of the learner's __str__/__repr__
        return f"<{type(value).__name__} that cannot be shown>"


def short(text: Any, limit: int = 50) -> str:
    """``repr``-free, one-line, at most ``limit`` characters: for quoting a value in a
    FAIL line (a value whose ``str`` raises is named by its type)."""
    s = " ".join(shown(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\\/\s'\"]+)+[\\/]([^\\/\s'\"]+)")


def describe_exception(e: BaseException, fn: Any, *, limit: int = 120) -> str:
    """One stable line for an exception raised through the learner's function ``fn``.

    ``raised KeyError: 'x' at line 7 of my_loop: `code```: the last traceback frame in the
    file (or notebook cell) that defines ``fn``, found with ``traceback.walk_tb``; lines
    count from that function's ``def`` line as 1, so the report does not change when code
    is added above it. Memory addresses and directories are removed, so the line is the
    same on every machine; a message over ``limit`` characters is cut (``limit=0``: never).
    """
    message = _PATH.sub(r"\1", _ADDRESS.sub("0x…", shown(e)))
    if limit and len(message) > limit:
        message = message[: limit - 3] + "..."
    what = f"raised {type(e).__name__}" + (f": {message}" if message else "")
    code = getattr(fn, "__code__", None)
    frames = [(frame.f_code, lineno) for frame, lineno in traceback.walk_tb(e.__traceback__)
              if code is not None and frame.f_code.co_filename == code.co_filename]
    if not frames:
        return what
    where, lineno = frames[-1]
    line = linecache.getline(where.co_filename, lineno).strip()
    return (f"{what} at line {lineno - where.co_firstlineno + 1} of {where.co_name}: "
            f"`{line}`")
