"""Why did this agent get stuck? :func:`diagnose` reads its trace and says.

``diagnose(source)`` takes a :class:`~primer.harness.tracing.trace.Trace`, a path to a trace (JSON
Lines) or to a Messages-API conversation saved as JSON (:mod:`primer.harness.tracing.conversation`),
and returns a :class:`Diagnosis`: one :class:`Finding` per failure mode that shows, each with
the model calls where it shows, the evidence, and the guard that stops it, with the setting
and what it would have saved. The saving is computed by replaying the record through
``run_agent`` with that one guard set (:func:`what_if`): the recorded replies play back, each
tool returns its recorded result, and the loop's own checks decide where the run stops; the
tokens and dollars of the recorded calls after that point are what the guard saves.

The failure modes (:class:`FailureMode`), each defined narrowly so a healthy run shows none:

``repeats``
    one call (tool name + canonical input, as loop detection keys it:
    :func:`~primer.loop.loop.canonical_call`) requested ``repeat_threshold`` times (the
    run's setting; 3 when the run had loop detection off). Guard: ``repeat_threshold``.
``no_progress``
    ``no_progress_window`` tool results in a row were errors (the run's setting; 3 when off).
    Calls the harness answered "not run" do not count. Guard: ``no_progress_window``.
``runaway_cost``
    at least :data:`RUNAWAY_MIN_CALLS` model calls, no answer at the end, prompt tokens
    rising on every call, and the last prompt at least :data:`RUNAWAY_GROWTH` times the
    first: the history, not the task, is what the run pays for, and its total grows with the
    square of the calls. Guard: ``token_budget`` (the run's, else ``AgentConfig``'s default).
``context_rot``
    a prompt past ``compact_share`` of the context window (the run's setting; 0.6 when
    off), by the harness's estimate (characters / 4). Guard: ``context_stop_share``.
``tool_hallucination``
    a call to a tool the run did not offer, or input that fails the tool's
    ``input_schema`` and was run anyway (a call the harness answered with a validation error
    is the guard working, not a failure).
``silent_wrong_answer``
    a final answer stating a number (not part of a name such as ``A123`` or a date) that
    no successful tool result, the task, another user message or the system prompt contains
    (values compared, so ``5,900`` matches ``5900.0``).
``cut_off``
    a reply that stopped at ``max_tokens`` holding a ``tool_use``: a half-written call.
``unanswered_tool_use``
    a ``tool_use`` no ``tool_result`` answers (an interrupted run, a saved history that
    must be repaired before it is sent again). A finished trace's last reply is exempt: the
    loop answered it "not run" when it stopped; so is a reply paused for approval.
``stopped`` / ``unfinished``
    the run ended on a limit that no finding above explains, or it has no ``stop`` line.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, cast

from primer.loop.config import AgentConfig
from primer.loop.messages import text_of
from primer.loop.model import Reply
from primer.loop.state import HANDOFF_TOOL_NAME, StopCause, canonical_call
from primer.loop.text import compact_json, one_line
from primer.loop.tools import Tool

from .conversation import RECORDED_AS, load_run
from .trace import PathLike, Trace, TraceStep, check_record
from .what_if import GuardEffect, what_if

#: A runaway needs at least this many model calls ...
RUNAWAY_MIN_CALLS = 6
#: ... and its last prompt at least this many times its first.
RUNAWAY_GROWTH = 3.0
#: Settings used to look for a mode when the run had its guard off (``None``).
DEFAULT_REPEAT_THRESHOLD = 3
DEFAULT_NO_PROGRESS_WINDOW = 3
DEFAULT_COMPACT_SHARE = 0.6

_FINISHED = {StopCause.END_TURN}
_HANDED_OVER = {StopCause.HANDOFF, StopCause.AWAITING_APPROVAL}
#: Stops the run's caller asked for: not a failure of the run.
_CALLER_STOPPED = {StopCause.CANCELLED}


class FailureMode(str, Enum):
    """The failure modes :func:`diagnose` looks for (see the module docstring)."""

    REPEATS = "repeats"
    NO_PROGRESS = "no_progress"
    RUNAWAY_COST = "runaway_cost"
    CONTEXT_ROT = "context_rot"
    TOOL_HALLUCINATION = "tool_hallucination"
    SILENT_WRONG_ANSWER = "silent_wrong_answer"
    CUT_OFF = "cut_off"
    UNANSWERED_TOOL_USE = "unanswered_tool_use"
    STOPPED = "stopped"
    UNFINISHED = "unfinished"

    def __str__(self) -> str:
        return self.value


#: The stop causes each mode accounts for (so no separate ``stopped`` finding is added).
_EXPLAINS = {
    FailureMode.REPEATS: {StopCause.LOOP_DETECTED, StopCause.MAX_STEPS},
    FailureMode.NO_PROGRESS: {StopCause.NO_PROGRESS, StopCause.MAX_STEPS},
    FailureMode.RUNAWAY_COST: {StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET,
                               StopCause.MAX_STEPS, StopCause.WALL_CLOCK},
    FailureMode.CONTEXT_ROT: {StopCause.CONTEXT_WINDOW},
    FailureMode.CUT_OFF: {StopCause.MAX_TOKENS},
}


@dataclass(frozen=True)
class Finding:
    """One failure mode in one run: ``mode``, the model ``calls`` where it shows (numbered from
    1), ``evidence`` (what in the record shows it), ``guard`` (what stops or prevents it) and,
    for the guards that stop a run, ``effect`` (:class:`GuardEffect`)."""

    mode: FailureMode
    calls: tuple[int, ...]
    evidence: str
    guard: str
    effect: GuardEffect | None = None

    def line(self) -> str:
        """The finding in one line: mode, calls, evidence, guard."""
        guard = self.effect.describe() if self.effect is not None else self.guard
        return f"{self.mode.value:<19} {_span(self.calls):<11} {self.evidence}. Guard: {guard}."

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``mode``, ``calls``, ``evidence``, ``guard``, ``effect`` (or None)."""
        return {"mode": self.mode.value, "calls": list(self.calls), "evidence": self.evidence,
                "guard": self.guard,
                "effect": dataclasses.asdict(self.effect) if self.effect else None}


@dataclass
class Diagnosis:
    """What :func:`diagnose` found in one run.

    ``source`` names the file (or ``"<memory>"``); ``kind`` is ``"trace"`` or
    ``"conversation"``; ``calls`` the model calls recorded; ``stop_cause`` the recorded stop
    (``None`` for a conversation or an unfinished trace); ``ended`` says how the record ends,
    in words; ``findings`` in the order of :class:`FailureMode`; ``notes`` what could not be
    checked. ``found`` is true when there is any finding; ``exit_code`` is 1 then, else 0.
    """

    source: str
    kind: str
    calls: int
    stop_cause: StopCause | None
    ended: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """True when at least one failure mode shows."""
        return bool(self.findings)

    @property
    def exit_code(self) -> int:
        """0 when nothing was found, 1 when something was (the CLI's exit code)."""
        return 1 if self.found else 0

    @property
    def modes(self) -> list[FailureMode]:
        """The modes found, in order."""
        return [f.mode for f in self.findings]

    @property
    def verdict(self) -> str:
        """One sentence: healthy, handed to a person, or the problems found."""
        if self.findings:
            names = ", ".join(m.value for m in dict.fromkeys(self.modes))
            n = len(self.findings)
            return f"{n} problem{'s' if n != 1 else ''} ({names}); {self.ended}"
        if self.stop_cause in _HANDED_OVER:
            return f"handed to a person, no failure mode shows; {self.ended}"
        if self.stop_cause in _CALLER_STOPPED:
            return f"cancelled by its caller, no failure mode shows; {self.ended}"
        return f"healthy, no failure mode shows; {self.ended}"

    def report(self) -> str:
        """The diagnosis as text: the file's name (not its whole path), one line per finding,
        then the verdict and any notes."""
        lines = [f"{Path(self.source).name or self.source}: {self.kind}, {self.calls} model "
                 f"call{'s' if self.calls != 1 else ''}"]
        lines += [f.line() for f in self.findings]
        lines.append(f"verdict: {self.verdict}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``--json`` and tools."""
        return {"source": self.source, "kind": self.kind, "calls": self.calls,
                "stop_cause": self.stop_cause.value if self.stop_cause else None,
                "ended": self.ended, "found": self.found, "verdict": self.verdict,
                "findings": [f.to_dict() for f in self.findings], "notes": list(self.notes)}


def diagnose(source: Trace | PathLike, *, context_window: int | None = None) -> Diagnosis:
    """Find the failure modes of one recorded run (see the module docstring for each).

    ``source`` is a :class:`Trace` or the path of a trace or conversation file;
    ``context_window`` (tokens) sets the model's window for a conversation (a trace records
    its own). Returns a :class:`Diagnosis`. Raises
    :class:`~primer.harness.tracing.trace.TraceError` for a file that cannot be read.
    """
    if isinstance(source, Trace):
        trace = check_record(source)
    else:
        trace = load_run(source, context_window=context_window)
    return _Reading(trace).diagnosis()


class _Reading:
    """One run, read once: its steps, tool results, prompt sizes and answer."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.steps: list[TraceStep] = trace.steps()
        self.replies: list[Reply] = [s.reply for s in self.steps]
        self.config: AgentConfig = trace.config

    # ------------------------------------------------------------ the whole diagnosis

    def diagnosis(self) -> Diagnosis:
        t = self.trace
        kind = "conversation" if self._is_conversation() else "trace"
        d = Diagnosis(str(t.path) if t.path else "<memory>", kind, len(self.steps),
                      t.stop_cause, self._ended(kind),
                      notes=[n for n in t.notes if kind == "conversation"
                             or not n.startswith("no stop event")])
        for find in (self.repeats, self.no_progress, self.runaway_cost, self.context_rot,
                     self.hallucination, self.silent_wrong_answer, self.cut_off,
                     self.unanswered):
            d.findings.extend(find())
        d.findings.extend(self.ending(d.findings, kind))
        return d

    def _is_conversation(self) -> bool:
        return self.trace.run_start.get("recorded_as") == RECORDED_AS

    def _ended(self, kind: str) -> str:
        n = len(self.steps)
        stop = self.trace.stop
        if stop is not None:
            return f"the run stopped on {stop['cause']} after {n} model call{'s' * (n != 1)}"
        if kind == "trace":
            return f"the trace has no stop line after {n} model call{'s' * (n != 1)}"
        last = self.replies[-1] if self.replies else None
        if self._final_answer() is not None:
            return f"the conversation ends with an answer (call {n})"
        if last is not None and last.tool_uses and not self.steps[-1].executions:
            return f"the conversation ends on call {n}'s unanswered tool_use"
        return f"the conversation ends after {n} model call{'s' * (n != 1)} without an answer"

    # ------------------------------------------------------------ the detectors

    def repeats(self) -> list[Finding]:
        threshold = self.config.repeat_threshold or DEFAULT_REPEAT_THRESHOLD
        where: dict[str, list[int]] = {}
        for s in self.steps:
            for b in s.reply.tool_uses:
                where.setdefault(canonical_call(b), []).append(s.index)
        worst = max(where.items(), key=lambda kv: (len(kv[1]), -kv[1][0]), default=None)
        if worst is None or len(worst[1]) < threshold:
            return []
        key, calls = worst
        others = sum(len(c) >= threshold for c in where.values()) - 1
        also = f" (and {others} other call{'s' * (others != 1)} as often)" if others else ""
        return [Finding(FailureMode.REPEATS, tuple(calls),
                        f"{one_line(key, 90)} requested {len(calls)} times{also}",
                        "loop detection (check_repeats)",
                        self.what_if(repeat_threshold=threshold))]

    def no_progress(self) -> list[Finding]:
        window = self.config.no_progress_window or DEFAULT_NO_PROGRESS_WINDOW
        results = [(s.index, x) for s in self.steps for x in s.executions
                   if x.get("error_kind") != "not_run"]
        longest = streak = (0, 0)  # (start, length) of the longest run of error results
        for k, (_, x) in enumerate(results):
            streak = (streak[0], streak[1] + 1) if x.get("is_error") else (k + 1, 0)
            longest = max(longest, streak, key=lambda r: r[1])
        best = results[longest[0]:longest[0] + longest[1]]
        if len(best) < window:
            return []
        names = Counter(x.get("name") for _, x in best)
        first = str(best[0][1].get("content", ""))
        return [Finding(FailureMode.NO_PROGRESS, tuple(dict.fromkeys(i for i, _ in best)),
                        f"{len(best)} error results in a row "
                        f"({', '.join(f'{n} ×{k}' for n, k in names.items())}), the first: "
                        f"{one_line(first, 70)!r}",
                        "the no-progress detector (check_no_progress)",
                        self.what_if(no_progress_window=window))]

    def runaway_cost(self) -> list[Finding]:
        prompts = [r.usage.prompt_tokens for r in self.replies]
        n = len(prompts)
        if (n < RUNAWAY_MIN_CALLS or self._final_answer() is not None or prompts[0] <= 0
                or any(b <= a for a, b in zip(prompts, prompts[1:], strict=False))
                or prompts[-1] < RUNAWAY_GROWTH * prompts[0]):
            return []
        total = sum(r.usage.total_tokens for r in self.replies)
        per_call = (prompts[-1] - prompts[0]) / (n - 1)
        budget = self.config.token_budget or AgentConfig().token_budget
        return [Finding(FailureMode.RUNAWAY_COST, tuple(range(1, n + 1)),
                        f"prompt tokens rose on every call, {prompts[0]:,} at call 1 to "
                        f"{prompts[-1]:,} at call {n} (+{per_call:,.0f} a call, "
                        f"{prompts[-1] / prompts[0]:.1f}×), {total:,} tokens in all and no "
                        f"answer", "a token budget (check_budgets)",
                        self.what_if(token_budget=budget))]

    def context_rot(self) -> list[Finding]:
        c = self.config
        share = c.compact_share or DEFAULT_COMPACT_SHARE
        sizes = [int(s.call.get("prompt_estimate") or 0) for s in self.steps]
        over = [s.index for s, p in zip(self.steps, sizes, strict=True)
                if p > c.context_window * share]
        if not over:
            return []
        peak = max(sizes)
        at = sizes.index(peak) + 1
        return [Finding(FailureMode.CONTEXT_ROT, tuple(over),
                        f"the prompt passed {share:.0%} of the {c.context_window:,}-token "
                        f"window at call {over[0]} and reached ~{peak:,} tokens "
                        f"({peak / c.context_window:.0%}) at call {at}",
                        "compaction past compact_share, and check_context",
                        self.what_if(context_stop_share=c.context_stop_share
                                     if c.context_stop_share < 1
                                     else AgentConfig().context_stop_share))]

    def hallucination(self) -> list[Finding]:
        # a checked trace's tool definitions each have a string name
        offered = {cast(str, t.get("name")): t for t in self.trace.tools if isinstance(t, dict)}
        if not offered:
            return []
        checkers = {name: _checker(d) for name, d in offered.items()}  # one per schema
        unknown: list[tuple[int, Any]] = []
        unchecked: list[tuple[int, Any, str]] = []
        for s in self.steps:
            ran = {x.get("tool_use_id"): x for x in s.executions}
            for b in s.reply.tool_uses:
                name = b.get("name")
                if name not in offered:
                    unknown.append((s.index, name))
                    continue
                checker = checkers[name]
                problem = checker.input_errors(b.get("input")) if checker else None
                result = ran.get(b.get("id"))
                if problem and result is not None and not result.get("is_error"):
                    unchecked.append((s.index, name, problem))
        out = []
        if unknown:
            names = ", ".join(sorted({str(n) for _, n in unknown}))
            out.append(Finding(FailureMode.TOOL_HALLUCINATION,
                               tuple(dict.fromkeys(i for i, _ in unknown)),
                               f"{len(unknown)} call{'s' * (len(unknown) != 1)} to tools the "
                               f"run did not offer: {names} (offered: "
                               f"{', '.join(n for n in offered if n != HANDOFF_TOOL_NAME)})",
                               "the registry's allow-list: an unknown name never runs and gets "
                               "an error result listing the real tools"))
        if unchecked:
            i, name, problem = unchecked[0]
            out.append(Finding(FailureMode.TOOL_HALLUCINATION,
                               tuple(dict.fromkeys(k for k, _, _ in unchecked)),
                               f"{len(unchecked)} call{'s' * (len(unchecked) != 1)} ran with "
                               f"input that fails its input_schema, first {name} at call {i}: "
                               f"{one_line(problem, 80)}",
                               "input_schema validation before a call runs (Tool.input_errors)"))
        return out

    def silent_wrong_answer(self) -> list[Finding]:
        answer = self._final_answer()
        if answer is None:
            return []
        support = set(_numbers(self.trace.system))
        for m in self.trace.messages():
            if m["role"] == "user":
                support |= set(_numbers(text_of(m["content"])))
        for s in self.steps:
            for x in s.executions:
                if not x.get("is_error"):
                    support |= set(_numbers(str(x.get("content", ""))))
        unsupported = [text for text, value in _number_spans(answer)
                       if not any(math.isclose(value, v, rel_tol=1e-9, abs_tol=1e-9)
                                  for v in support)]
        if not unsupported:
            return []
        return [Finding(FailureMode.SILENT_WRONG_ANSWER, (len(self.steps),),
                        f"the answer states {', '.join(dict.fromkeys(unsupported))}, which no "
                        f"tool result, user message or system prompt contains: "
                        f"{one_line(answer, 80)!r}",
                        "check the final answer: run_agent(..., output_model=...), an eval "
                        "(AnswerContains), or a second model call that checks it")]

    def cut_off(self) -> list[Finding]:
        out = []
        for s in self.steps:
            if s.reply.stop_reason != "max_tokens" or not s.reply.tool_uses:
                continue
            b = s.reply.tool_uses[0]
            ran = [x for x in s.executions if x.get("error_kind") != "not_run"
                   and not x.get("is_error")]
            out.append(Finding(FailureMode.CUT_OFF, (s.index,),
                               f"reply {s.index} stopped at max_tokens holding a tool_use "
                               f"{b.get('name')} {one_line(compact_json(b.get('input')), 50)}"
                               + (f", and {len(ran)} such call{'s' * (len(ran) != 1)} ran"
                                  if ran else ""),
                               f"check_stop_reason never runs a cut-off call; raise max_tokens "
                               f"(the run had {self.config.max_tokens:,})"
                               if self.trace.stop is not None else
                               "never run a cut-off call (check_stop_reason); raise max_tokens"))
        return out

    def unanswered(self) -> list[Finding]:
        stop = self.trace.stop_cause
        out: list[tuple[int, Any]] = []
        for k, s in enumerate(self.steps):
            last = k == len(self.steps) - 1
            if last and (self.trace.stop is not None or s.reply.stop_reason == "max_tokens"):
                continue  # the loop answered it "not run" (or it is cut off: see cut_off)
            if last and stop is StopCause.AWAITING_APPROVAL:
                continue
            answered = {x.get("tool_use_id") for x in s.executions}
            out += [(s.index, b.get("name")) for b in s.reply.tool_uses
                    if b.get("id") not in answered]
        if not out:
            return []
        names = ", ".join(sorted({str(n) for _, n in out}))
        return [Finding(FailureMode.UNANSWERED_TOOL_USE, tuple(dict.fromkeys(i for i, _ in out)),
                        f"{len(out)} tool_use block{'s' * (len(out) != 1)} ({names}) without "
                        f"a tool_result; the API refuses a history like this",
                        "answer every tool_use before stopping (run_agent answers unrun calls "
                        "'not run'); repair the history before sending it again")]

    def ending(self, found: list[Finding], kind: str) -> list[Finding]:
        """A ``stopped`` or ``unfinished`` finding when no finding explains how the run ended."""
        stop = self.trace.stop
        n = len(self.steps)
        modes = {f.mode for f in found}
        if stop is not None:
            cause = StopCause(stop["cause"])
            explained = _FINISHED | _HANDED_OVER | _CALLER_STOPPED
            if cause in explained or any(cause in _EXPLAINS.get(m, ()) for m in modes):
                return []
            return [Finding(FailureMode.STOPPED, (n,) if n else (),
                            f"the run stopped on {cause.value} before it answered: "
                            f"{one_line(str(stop.get('detail', '')), 90)}",
                            "the limit that fired; no failure mode explains it, so check "
                            "whether the limit is too tight for the task")]
        if self._final_answer() is not None or modes & {FailureMode.UNANSWERED_TOOL_USE,
                                                       FailureMode.CUT_OFF}:
            return []
        if kind == "conversation" and modes & set(_EXPLAINS):
            return []
        what = ("the trace has no stop line: the run was killed or crashed"
                if kind == "trace" else
                "the conversation ends on tool results no model call read: its loop was "
                "stopped from outside (a turn cap?)")
        return [Finding(FailureMode.UNFINISHED, (n,) if n else (), what,
                        "record traces with run_agent(..., trace=PATH); every exit names "
                        "its stop cause")]

    # ------------------------------------------------------------ the answer, the what-if

    def _final_answer(self) -> str | None:
        if not self.replies:
            return None
        if self.trace.stop is not None:
            return self.trace.final_text
        last = self.replies[-1]
        if last.stop_reason in ("end_turn", "stop_sequence") and not last.tool_uses:
            return last.text
        return None

    def what_if(self, **setting: Any) -> GuardEffect:
        """Replay the record with one guard set; see
        :func:`~primer.harness.tracing.what_if.what_if`."""
        return what_if(self.trace, **setting)


def _checker(definition: dict[str, Any]) -> Tool | None:
    """A tool that checks inputs against ``definition``'s ``input_schema`` (built once per
    definition: building one checks the schema itself), or ``None`` for a schema that
    cannot be checked (no evidence either way)."""
    try:
        return Tool(str(definition.get("name")), "", definition.get("input_schema")
                    or {"type": "object"}, lambda **_: None)
    except Exception:  # noqa: BLE001 - a schema we cannot check is not evidence
        return None


# ------------------------------------------------------------ numbers in text

#: A number standing alone: not glued to letters, digits, ``_``, ``-`` or ``/`` (so ``A123``,
#: ``hr-001`` and the parts of ``2026-09-25`` are not numbers), thousands commas allowed.
_NUMBER = re.compile(r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w\-/]|[.,]\d)")


def _number_spans(text: str) -> Iterable[tuple[str, float]]:
    for m in _NUMBER.finditer(text):
        yield m.group(0), float(m.group(1).replace(",", "") + (m.group(2) or ""))


def _numbers(text: str) -> Iterable[float]:
    return (v for _, v in _number_spans(text))


def _span(calls: tuple[int, ...]) -> str:
    if not calls:
        return "-"
    if len(calls) == 1:
        return f"call {calls[0]}"
    if list(calls) == list(range(calls[0], calls[-1] + 1)):
        return f"calls {calls[0]}-{calls[-1]}"
    return "calls " + ",".join(map(str, calls)) if len(calls) <= 4 else (
        f"calls {calls[0]}..{calls[-1]}")


__all__ = ["DEFAULT_COMPACT_SHARE", "DEFAULT_NO_PROGRESS_WINDOW", "DEFAULT_REPEAT_THRESHOLD",
           "Diagnosis", "FailureMode", "Finding", "GuardEffect", "RUNAWAY_GROWTH",
           "RUNAWAY_MIN_CALLS", "diagnose"]
