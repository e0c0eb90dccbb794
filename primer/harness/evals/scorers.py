"""Scorers: small objects that judge one run, for eval tasks.

A scorer is called with the :class:`~primer.loop.result.AgentResult` of a run and returns a
``bool``, or a :class:`Verdict` (a bool with a reason). An eval task's ``check`` is one
scorer, or a list of them that must all pass (each verdict is kept in the row, by
:func:`scorer_name`). Any function of the result works too.

* :class:`AnswerContains` - the run ended with ``end_turn`` and its answer holds each text;
* :class:`StopCauseIs` - the run stopped the way the task requires (e.g. ``handoff``);
* :class:`ToolsInOrder` - the tools ran in this order (exactly, or with others between);
* :class:`CostUnder` - the run cost at most a cap (USD);
* :class:`ModelGraded` - a judge model (any :class:`~primer.loop.model.LLM`) reads the task,
  the answer and the criteria and answers PASS or FAIL with a reason. Offline, the judge is
  a scripted model; the same scorer takes ``ClaudeLLM``.

The path functions :func:`tool_path` and :func:`path_matches` are the one definition of "the
tools the run called" and "the path is right" used by scorers and eval rows alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from primer.loop.messages import text_of, user_message
from primer.loop.model import LLM
from primer.loop.result import AgentResult
from primer.loop.state import StopCause

ExpectedPath = Sequence[str] | frozenset[str] | set[str]


@dataclass(frozen=True)
class Verdict:
    """A scorer's answer with its reason; truthy when ``passed``."""

    passed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.passed


ScoreValue = bool | Verdict
Scorer = Callable[[AgentResult], ScoreValue]


def tool_path(result: AgentResult) -> list[str]:
    """The names of the tool calls the harness ran, in order (calls not run left out)."""
    return [e.name for e in result.executions if e.error_kind != "not_run"]


def path_matches(expected: ExpectedPath, path: Sequence[str]) -> bool:
    """Whether ``path`` is right: equal to a list/tuple, or equal as a set to a set."""
    if isinstance(expected, set | frozenset):
        return set(path) == set(expected)
    return list(path) == list(expected)


def scorer_name(scorer: object) -> str:
    """The name a scorer's verdict is kept under: its ``name`` attribute, else its class
    name in snake_case (``AnswerContains`` → ``answer_contains``), else the function's."""
    name = getattr(scorer, "name", None)
    if isinstance(name, str) and name:
        return name
    if hasattr(scorer, "__dataclass_fields__") or not hasattr(scorer, "__name__"):
        return re.sub(r"(?<!^)(?=[A-Z])", "_", type(scorer).__name__).lower()
    return str(scorer.__name__)


@dataclass(frozen=True)
class AnswerContains:
    """Check: the run ended with ``end_turn`` and its answer contains every one of ``texts``."""

    texts: tuple[str, ...]

    def __init__(self, *texts: str) -> None:
        if not texts or not all(isinstance(t, str) and t for t in texts):
            raise ValueError(f"AnswerContains needs one or more non-empty texts (got {texts!r})")
        object.__setattr__(self, "texts", tuple(texts))

    def __call__(self, result: AgentResult) -> bool:
        answer = result.final_text
        return answer is not None and all(t in answer for t in self.texts)


@dataclass(frozen=True)
class StopCauseIs:
    """Check: the run stopped with ``cause`` (e.g. ``"handoff"`` for a task a person must
    take). ``ValueError`` for a name that is not a stop cause."""

    cause: str

    def __post_init__(self) -> None:
        StopCause(self.cause)  # ValueError naming the bad value

    def __call__(self, result: AgentResult) -> bool:
        return result.stop_cause.value == StopCause(self.cause).value


@dataclass(frozen=True)
class ToolsInOrder:
    """Check: the tools ran in this order.

    ``exact=True``: the run's tool path is exactly ``names`` (:func:`path_matches`);
    ``exact=False``: ``names`` appear in this order, other calls allowed before, between and
    after (a subsequence). ``ValueError`` for no names.
    """

    names: tuple[str, ...]
    exact: bool = False

    def __init__(self, *names: str, exact: bool = False) -> None:
        if not names:
            raise ValueError("ToolsInOrder needs at least one tool name")
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "exact", exact)

    def __call__(self, result: AgentResult) -> Verdict:
        path = tool_path(result)
        if self.exact:
            ok = path_matches(list(self.names), path)
        else:
            rest = iter(path)
            ok = all(any(name == p for p in rest) for name in self.names)
        return Verdict(ok, "" if ok else f"tools ran {path}, expected "
                                         f"{'exactly ' if self.exact else 'in order '}"
                                         f"{list(self.names)}")


@dataclass(frozen=True)
class CostUnder:
    """Check: the run cost at most ``usd`` (USD, at the run's prices). ``ValueError`` for a
    negative or non-finite cap."""

    usd: float

    def __post_init__(self) -> None:
        if not (self.usd >= 0 and self.usd != float("inf")):
            raise ValueError(f"CostUnder needs a finite cap >= 0 USD (got {self.usd})")

    def __call__(self, result: AgentResult) -> Verdict:
        ok = result.cost_usd <= self.usd
        return Verdict(ok, f"cost {result.cost_usd:.4f} USD, cap {self.usd:.4f} USD")


JUDGE_SYSTEM = (
    "You grade the answer an AI agent gave to a task. Read the task, the answer and the "
    "criteria. Reply with PASS or FAIL as the first word, then one sentence saying why. "
    "An answer that is missing, or meets only part of the criteria, is a FAIL.")


@dataclass(frozen=True)
class ModelGraded:
    """Check by a judge model: PASS or FAIL against ``criteria``, with the judge's reason.

    The judge (any :class:`~primer.loop.model.LLM`, called as ``judge(system=JUDGE_SYSTEM,
    messages=[...], tools=[], max_tokens=max_tokens)``) sees the task (the run's first
    message), the answer (``final_text``; a run that did not end with ``end_turn`` has
    none) and the criteria. Its reply's first word decides; a reply that starts with neither
    PASS nor FAIL is a FAIL whose reason says the judge's reply was unreadable, and a judge
    that raises is a FAIL naming the error: never a silent pass. The judge's tokens are not
    added to the run's usage; count them on the judge's side if they matter. The judge is
    shared by every task of an eval, so it must be safe to call from several threads at once
    (``ClaudeLLM`` is; a :class:`~primer.loop.model.ScriptedLLM` with a policy is).
    """

    judge: LLM
    criteria: str
    max_tokens: int = 200
    name: str = "model_graded"

    def __post_init__(self) -> None:
        if not self.criteria.strip():
            raise ValueError("ModelGraded needs criteria: what a passing answer must do")

    def prompt(self, result: AgentResult) -> str:
        """The user message sent to the judge for ``result``."""
        task = text_of(result.messages[0]["content"]) if result.messages else ""
        answer = result.final_text if result.final_text is not None else (
            f"(no answer: the run stopped with {result.stop_cause.value})")
        return f"Task:\n{task}\n\nAnswer:\n{answer}\n\nCriteria:\n{self.criteria}"

    def __call__(self, result: AgentResult) -> Verdict:
        try:
            reply = self.judge(system=JUDGE_SYSTEM,
                               messages=[user_message(self.prompt(result))], tools=[],
                               max_tokens=self.max_tokens)
            text = text_of(reply.content).strip()
        except Exception as e:  # noqa: BLE001 - a failing judge is a FAIL with its reason
            return Verdict(False, f"the judge failed: {type(e).__name__}: {e}")
        first = text.split(maxsplit=1)[0].strip(".:,!*").upper() if text else ""
        if first not in ("PASS", "FAIL"):
            return Verdict(False, f"the judge's reply did not start with PASS or FAIL: "
                                  f"{text[:120]!r}")
        return Verdict(first == "PASS", text[len(text.split(maxsplit=1)[0]):].strip(" .:-"))
