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
    run's setting; 3 when the run had loop detection off), each getting the same result as
    its last (polling until "done" and a retry that recovered are not loops). Guard:
    ``repeat_threshold``.
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
    off), by the harness's estimate (characters / 4), on two calls or in a run with no
    answer. Guard: ``context_stop_share``.
``tool_hallucination``
    a call to a tool the run did not offer, or input that fails the tool's
    ``input_schema`` and was run anyway (a call the harness answered with a validation error
    is the guard working, not a failure).
``alternation``
    at least :data:`ALTERNATION_MIN_CALLS` tool calls in a row cycling between two tools,
    the inputs changing, and no result in that stretch new: each is empty, an error, or one
    that tool already returned. Guard: none of ours counts it; cap the tool calls of a run.
``rate_limited``
    at least :data:`RATE_LIMIT_MIN` results shaped like a rate limit (opening with "HTTP
    429", "Rate limit", "Too Many Requests"; a JSON error of status 429 or naming one; an
    ``is_error`` result naming one), each followed by another call. A SKU of 429 is not one.
``errors_as_text``
    ``no_progress_window`` results in a row shaped like errors ("Error: ...", "ValueError:
    ...", an ``{"error": "..."}`` object, a status of 400+ with a message) though none is
    marked ``is_error``, so a loop that counts ``is_error`` never stops on them. Data holding
    such words (``{"errors": [...]}`` from a linter, ``{"status": 404}`` from a link
    checker) is not.
``empty_results``
    :data:`EMPTY_MIN` successful results in a row that are empty (``{"orders": []}``,
    ``[]``, "no results"; not ``""``, an action's result) with nothing found after them, in
    a run that ends without an answer (or twice that many in a row before one, of one search
    reworded: one lookup per item that finds nothing may be the answer).
``silent_wrong_answer``
    a final answer stating a number (not part of a name such as ``A123``) or a date that
    no successful tool result, the task, another user message or the system prompt contains.
    Values are compared, not text: ``5,900`` matches ``5900.0``, ``4 March 2026`` matches
    ``2026-03-04``; so does a value the answer derived in one step: a unit change (×/÷ 60,
    100, 1,000, 3,600, 24), rounding to the digits written, the length of a list in a result,
    the number of tool calls, or the sum, difference, product, ratio or percent change of two
    supported values. Signs are ignored; list markers, "2 of 3" and 12-hour times are not
    checked. It cannot see an
    answer that contradicts a result in words ("in stock" for ``"in_stock": false``).
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
from primer.loop.text import JSONRefused, compact_json, one_line, parse_json
from primer.loop.tools import Tool

from .conversation import RECORDED_AS, load_run
from .trace import PathLike, Trace, TraceStep, check_record
from .what_if import GuardEffect, what_if

#: A runaway needs at least this many model calls ...
RUNAWAY_MIN_CALLS = 6
#: ... and its last prompt at least this many times its first.
RUNAWAY_GROWTH = 3.0
#: An alternation needs at least this many tool calls in a row between two tools.
ALTERNATION_MIN_CALLS = 6
#: Rate-limit answers (each followed by another call) before ``rate_limited`` shows.
RATE_LIMIT_MIN = 2
#: Empty results in a row before ``empty_results`` shows (twice this before an answer).
EMPTY_MIN = 3
#: Settings used to look for a mode when the run had its guard off (``None``).
DEFAULT_REPEAT_THRESHOLD = 3
DEFAULT_NO_PROGRESS_WINDOW = 3
DEFAULT_COMPACT_SHARE = 0.6

_FINISHED = {StopCause.END_TURN}
#: The verdict when no detector fires: not "healthy", since a fault no detector knows
#: (an answer wrong in words) leaves no finding either.
NOTHING_FOUND = "no known failure mode found"
_HANDED_OVER = {StopCause.HANDOFF, StopCause.AWAITING_APPROVAL}
#: Stops the run's caller asked for: not a failure of the run.
_CALLER_STOPPED = {StopCause.CANCELLED}


class FailureMode(str, Enum):
    """The failure modes :func:`diagnose` looks for (see the module docstring)."""

    REPEATS = "repeats"
    ALTERNATION = "alternation"
    RATE_LIMITED = "rate_limited"
    ERRORS_AS_TEXT = "errors_as_text"
    NO_PROGRESS = "no_progress"
    EMPTY_RESULTS = "empty_results"
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
    FailureMode.ALTERNATION: {StopCause.MAX_STEPS, StopCause.TOKEN_BUDGET},
    FailureMode.RATE_LIMITED: {StopCause.MAX_STEPS, StopCause.NO_PROGRESS},
    FailureMode.ERRORS_AS_TEXT: {StopCause.MAX_STEPS},
    FailureMode.EMPTY_RESULTS: {StopCause.MAX_STEPS},
    FailureMode.RUNAWAY_COST: {StopCause.TOKEN_BUDGET, StopCause.COST_BUDGET,
                               StopCause.MAX_STEPS, StopCause.WALL_CLOCK},
    FailureMode.CONTEXT_ROT: {StopCause.CONTEXT_WINDOW},
    FailureMode.CUT_OFF: {StopCause.MAX_TOKENS},
}


#: Each detector's rule in one line, from the settings it uses (lesson 10 shows this table).
RULES: dict[FailureMode, str] = {
    FailureMode.REPEATS: f"one tool + input requested {DEFAULT_REPEAT_THRESHOLD} times, each "
                         f"getting the result it got last time (polling whose result "
                         f"changes is not counted; or the run's repeat_threshold)",
    FailureMode.ALTERNATION: f"{ALTERNATION_MIN_CALLS}+ calls in a row cycling between two "
                             f"tools, inputs changing, no result new",
    FailureMode.RATE_LIMITED: f"{RATE_LIMIT_MIN}+ results reading as a rate limit (429, "
                              f"'Too Many Requests'), each retried",
    FailureMode.ERRORS_AS_TEXT: f"{DEFAULT_NO_PROGRESS_WINDOW} results in a row reading as "
                                f"errors, none marked is_error",
    FailureMode.NO_PROGRESS: f"{DEFAULT_NO_PROGRESS_WINDOW} is_error results in a row (or the "
                             f"run's no_progress_window)",
    FailureMode.EMPTY_RESULTS: f"{EMPTY_MIN} empty results in a row, nothing found after, no "
                               f"answer ({2 * EMPTY_MIN} before one)",
    FailureMode.RUNAWAY_COST: f"{RUNAWAY_MIN_CALLS}+ calls, prompt rising on each, the last "
                              f"{RUNAWAY_GROWTH:g}× the first or more, no answer",
    FailureMode.CONTEXT_ROT: f"a prompt past {DEFAULT_COMPACT_SHARE:.0%} of the window (or the "
                             f"run's compact_share)",
    FailureMode.TOOL_HALLUCINATION: "a tool not offered, or input failing input_schema that ran",
    FailureMode.SILENT_WRONG_ANSWER: "a number or date in the answer no result, task or "
                                     "prompt supports (unit changes, rounding allowed)",
    FailureMode.CUT_OFF: "a reply cut at max_tokens holding a tool_use",
    FailureMode.UNANSWERED_TOOL_USE: "a tool_use no tool_result answers",
    FailureMode.STOPPED: "the run stopped on a limit no finding explains",
    FailureMode.UNFINISHED: "no stop line, or a conversation ending on unread tool results",
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
    anywhere: str = ""

    def line(self) -> str:
        """The finding in one line: mode, calls, evidence, guard (primer's setting, then what
        to do in any other loop)."""
        guard = self.effect.describe() if self.effect is not None else self.guard
        other = f" In any loop: {self.anywhere}." if self.anywhere else ""
        return (f"{self.mode.value:<19} {_span(self.calls):<11} {self.evidence}. "
                f"Guard: {guard}.{other}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``mode``, ``calls``, ``evidence``, ``guard``, ``anywhere``, ``effect``
        (or None)."""
        return {"mode": self.mode.value, "calls": list(self.calls), "evidence": self.evidence,
                "guard": self.guard, "anywhere": self.anywhere,
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
        """One sentence: the problems found, handed to a person, cancelled, or "no known
        failure mode found" (never "healthy": the detectors see only the modes they know)."""
        if self.findings:
            names = ", ".join(m.value for m in dict.fromkeys(self.modes))
            n = len(self.findings)
            return f"{n} problem{'s' if n != 1 else ''} ({names}); {self.ended}"
        if self.stop_cause in _HANDED_OVER:
            return f"handed to a person, no failure mode shows; {self.ended}"
        if self.stop_cause in _CALLER_STOPPED:
            return f"cancelled by its caller, no failure mode shows; {self.ended}"
        return f"{NOTHING_FOUND}; {self.ended}"

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
        self.notes: list[str] = []  # what a detector could not check

    # ------------------------------------------------------------ the whole diagnosis

    def diagnosis(self) -> Diagnosis:
        t = self.trace
        kind = "conversation" if self._is_conversation() else "trace"
        d = Diagnosis(str(t.path) if t.path else "<memory>", kind, len(self.steps),
                      t.stop_cause, self._ended(kind),
                      notes=[n for n in t.notes if kind == "conversation"
                             or not n.startswith("no stop event")])
        for find in (self.repeats, self.alternation, self.rate_limited, self.errors_as_text,
                     self.no_progress, self.empty_results, self.runaway_cost, self.context_rot,
                     self.hallucination, self.silent_wrong_answer, self.cut_off,
                     self.unanswered):
            d.findings.extend(find())
        d.findings.extend(self.ending(d.findings, kind))
        d.notes += self.notes
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
        answers: dict[str, list[str | None]] = {}  # each request's result (None: not run)
        for s in self.steps:
            ran = {x.get("tool_use_id"): x for x in s.executions
                   if x.get("error_kind") != "not_run"}
            for b in s.reply.tool_uses:
                key = canonical_call(b)
                where.setdefault(key, []).append(s.index)
                x = ran.get(b.get("id"))
                answers.setdefault(key, []).append(None if x is None else str(x.get("content")))
        # a repeat whose result changed (polling until done, a retry that recovered) is not a
        # loop: count only the requests that got the key's last result (or none)
        for key, got in answers.items():
            last = next((g for g in reversed(got) if g is not None), None)
            where[key] = [i for i, g in zip(where[key], got, strict=True)
                          if g is None or g == last]
        worst = max(where.items(), key=lambda kv: (len(kv[1]), -kv[1][0]), default=None)
        if worst is None or len(worst[1]) < threshold:
            return []
        key, calls = worst
        others = sum(len(c) >= threshold for c in where.values()) - 1
        also = f" (and {others} other call{'s' * (others != 1)} as often)" if others else ""
        return [Finding(FailureMode.REPEATS, tuple(calls),
                        f"{one_line(key, 90)} requested {len(calls)} times{also}",
                        "loop detection (check_repeats)",
                        self.what_if(repeat_threshold=threshold),
                        f"key each call by tool name + input and stop (or tell the model) when "
                        f"one comes back {threshold} times")]

    def _results(self) -> list[tuple[int, dict[str, Any]]]:
        """Every tool result the loop ran, in order, with its model call number."""
        return [(s.index, x) for s in self.steps for x in s.executions
                if x.get("error_kind") != "not_run"]

    def alternation(self) -> list[Finding]:
        results = self._results()
        names = [str(x.get("name")) for _, x in results]
        seen: dict[str, set[str]] = {}  # each tool's results so far
        best = (0, 0)  # (start, length) of the longest stale two-tool alternation
        start = 0
        for k, (_, x) in enumerate(results):
            content = str(x.get("content", ""))
            stale = bool(x.get("is_error") or _reads_as_error(content) or _is_empty(content)
                         or content in seen.get(names[k], set()))
            seen.setdefault(names[k], set()).add(content)
            if not stale:
                start = k + 1
                continue
            if k > start and names[k] == names[k - 1]:
                start = k  # the same tool twice: not alternating
            elif k - start >= 2 and names[k] != names[k - 2]:
                start = k - 1  # a third tool: a new pair starts with the call before
            best = max(best, (start, k - start + 1), key=lambda r: r[1])
        stretch = results[best[0]:best[0] + best[1]]
        if len(stretch) < ALTERNATION_MIN_CALLS:
            return []
        names = list(dict.fromkeys(str(x.get("name")) for _, x in stretch))
        keys = {f"{x.get('name')}:{compact_json(x.get('input'))}" for _, x in stretch}
        if len(names) != 2 or len(keys) <= 2:  # the same two calls again: that is repeats
            return []
        inputs = {n: [compact_json(x.get("input")) for _, x in stretch if x.get("name") == n]
                  for n in names}
        shown = "; ".join(f"{n} {one_line(' then '.join(v[:3]), 70)}"
                          + (f" (+{len(v) - 3} more)" if len(v) > 3 else "")
                          for n, v in inputs.items())
        last = {n: str(next(x.get("content") for _, x in reversed(stretch)
                             if x.get("name") == n)) for n in names}
        return [Finding(FailureMode.ALTERNATION, tuple(dict.fromkeys(i for i, _ in stretch)),
                        f"{names[0]} and {names[1]} alternated for {len(stretch)} calls with "
                        f"changed inputs ({shown}) and learned nothing new: "
                        + ", ".join(f"{n} kept returning {one_line(c, 40)!r}"
                                    for n, c in last.items()),
                        "primer's loop has no run-time guard for this: "
                        "max_tool_calls_per_run caps the calls, max_steps the model calls",
                        anywhere="stop when a stretch of calls brings no new result "
                        "(empty, an error, or one seen before); cap tool calls per run")]

    def rate_limited(self) -> list[Finding]:
        results = self._results()
        hits = [(k, i, x) for k, (i, x) in enumerate(results)
                if _reads_as_rate_limit(str(x.get("content", "")), bool(x.get("is_error")))]
        retried = [h for h in hits if h[0] + 1 < len(results)
                   or self._final_answer() is None and h[1] < len(self.steps)]
        if len(hits) < RATE_LIMIT_MIN or len(retried) < RATE_LIMIT_MIN - 1:
            return []
        names = Counter(str(x.get("name")) for _, _, x in hits)
        inputs = list(dict.fromkeys(compact_json(x.get("input")) for _, _, x in hits))
        marked = sum(bool(x.get("is_error")) for _, _, x in hits)
        return [Finding(FailureMode.RATE_LIMITED, tuple(dict.fromkeys(i for _, i, _ in hits)),
                        f"{len(hits)} results read as a rate limit "
                        f"({', '.join(f'{n} ×{k}' for n, k in names.items())}), the first: "
                        f"{one_line(str(hits[0][2].get('content', '')), 60)!r}; "
                        + (f"{marked} marked is_error" if marked else "none marked is_error")
                        + f"; the calls went on at once with {len(inputs)} different "
                        f"input{'s' * (len(inputs) != 1)}",
                        "raise RateLimited(retry_after_s=...) in the tool: tool_retries and "
                        "retry (RetryPolicy) wait and retry the same call",
                        anywhere="turn a 429 into an error the loop sees (is_error / an "
                        "exception), wait as long as Retry-After says (else back off "
                        "exponentially) and retry the same input, a few times at most")]

    def errors_as_text(self) -> list[Finding]:
        window = self.config.no_progress_window or DEFAULT_NO_PROGRESS_WINDOW
        results = self._results()
        longest = streak = (0, 0)
        for k, (_, x) in enumerate(results):
            text = str(x.get("content", ""))
            as_text = (not x.get("is_error") and _reads_as_error(text)
                       and not _reads_as_rate_limit(text))
            streak = (streak[0], streak[1] + 1) if as_text else (k + 1, 0)
            longest = max(longest, streak, key=lambda r: r[1])
        best = results[longest[0]:longest[0] + longest[1]]
        if len(best) < window:
            return []
        names = Counter(str(x.get("name")) for _, x in best)
        return [Finding(FailureMode.ERRORS_AS_TEXT, tuple(dict.fromkeys(i for i, _ in best)),
                        f"{len(best)} results in a row read as errors but none is marked "
                        f"is_error ({', '.join(f'{n} ×{k}' for n, k in names.items())}), the "
                        f"first: {one_line(str(best[0][1].get('content', '')), 60)!r}",
                        f"raise ToolError in the tool, so the result is marked is_error and "
                        f"no_progress_window={window} stops the run",
                        anywhere=f"return tool errors as errors (is_error: true in the "
                        f"Messages API, status='error' on a LangChain ToolMessage) and stop "
                        f"after {window} in a row")]

    def empty_results(self) -> list[Finding]:
        results = self._results()
        answered = self._final_answer() is not None
        longest = streak = (0, 0)
        for k, (_, x) in enumerate(results):
            empty = not x.get("is_error") and _is_empty(str(x.get("content", "")))
            streak = (streak[0], streak[1] + 1) if empty else (k + 1, 0)
            longest = max(longest, streak, key=lambda r: r[1])
        best = results[longest[0]:longest[0] + longest[1]]
        after = results[longest[0] + longest[1]:]
        found_later = any(not x.get("is_error") and not _is_empty(str(x.get("content", "")))
                          for _, x in after)
        # a run that answered may have found that nothing is the answer (six customers, no
        # open tickets): before an answer, only the same search reworded again and again
        if (len(best) < EMPTY_MIN * (2 if answered else 1) or found_later
                or answered and not _reworded([x.get("input") for _, x in best])):
            return []
        names = Counter(str(x.get("name")) for _, x in best)
        inputs = list(dict.fromkeys(compact_json(x.get("input")) for _, x in best))
        contents = list(dict.fromkeys(str(x.get("content")) for _, x in best))
        return [Finding(FailureMode.EMPTY_RESULTS, tuple(dict.fromkeys(i for i, _ in best)),
                        f"{len(best)} empty results in a row "
                        f"({', '.join(f'{n} ×{k}' for n, k in names.items())}: "
                        f"{one_line(' / '.join(contents[:2]), 50)}) for {len(inputs)} different "
                        f"input{'s' * (len(inputs) != 1)}, e.g. {one_line(inputs[0], 50)}, and "
                        f"nothing found after them",
                        "primer's loop has no run-time guard for this: "
                        "max_tool_calls_per_run caps the calls",
                        anywhere=f"count empty results in a row and, after {EMPTY_MIN}, stop "
                        f"or ask the user; say in the tool's result what input would match")]

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
                        self.what_if(no_progress_window=window),
                        f"count error results in a row and stop after {window}")]

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
        used = Counter(str(b.get("name")) for r in self.replies
                       for b in r.tool_uses).most_common(3)
        return [Finding(FailureMode.RUNAWAY_COST, tuple(range(1, n + 1)),
                        f"prompt tokens rose on every call, {prompts[0]:,} at call 1 to "
                        f"{prompts[-1]:,} at call {n} (+{per_call:,.0f} a call, "
                        f"{prompts[-1] / prompts[0]:.1f}×), {total:,} tokens in all and no "
                        f"answer; the tool calls: {', '.join(f'{t} ×{k}' for t, k in used)}",
                        "a token budget (check_budgets)",
                        self.what_if(token_budget=budget),
                        "add up usage.input_tokens + output_tokens of every call and stop past "
                        "a budget; compact or drop old tool results")]

    def context_rot(self) -> list[Finding]:
        c = self.config
        share = c.compact_share or DEFAULT_COMPACT_SHARE
        sizes = [int(s.call.get("prompt_estimate") or 0) for s in self.steps]
        over = [s.index for s, p in zip(self.steps, sizes, strict=True)
                if p > c.context_window * share]
        if not over or len(over) < 2 and self._final_answer() is not None:
            return []  # one big prompt that the run answered from is not a rotting context
        peak = max(sizes)
        at = sizes.index(peak) + 1
        return [Finding(FailureMode.CONTEXT_ROT, tuple(over),
                        f"the prompt passed {share:.0%} of the {c.context_window:,}-token "
                        f"window at call {over[0]} and reached ~{peak:,} tokens "
                        f"({peak / c.context_window:.0%}) at call {at}",
                        "compaction past compact_share, and check_context",
                        self.what_if(context_stop_share=c.context_stop_share
                                     if c.context_stop_share < 1
                                     else AgentConfig().context_stop_share),
                        "count the prompt's tokens before each call; summarise or drop old "
                        "tool results past a share of the window")]

    def hallucination(self) -> list[Finding]:
        # a checked trace's tool definitions each have a string name
        offered = {cast(str, t.get("name")): t for t in self.trace.tools if isinstance(t, dict)}
        if not offered:
            return []
        checkers: dict[str, Tool | str | None] = {  # one per schema
            name: _checker(d) for name, d in offered.items()}
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
                if isinstance(checker, str):  # refused when built: say so once
                    self.notes.append(f"the input_schema of {name} cannot be checked "
                                      f"({checker}); its calls' inputs are not checked")
                    checkers[name] = checker = None
                try:
                    problem = checker.input_errors(b.get("input")) if checker else None
                except Exception as e:  # noqa: BLE001 - e.g. a $ref to nowhere: no evidence
                    checkers[name] = problem = None
                    self.notes.append(f"the input_schema of {name} cannot be checked "
                                      f"({one_line(f'{type(e).__name__}: {e}', 80)}); its "
                                      f"calls' inputs are not checked")
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
                               "an error result listing the real tools",
                               anywhere="run only tools you offered; answer any other name "
                               "with an is_error result that lists the real ones"))
        if unchecked:
            i, name, problem = unchecked[0]
            out.append(Finding(FailureMode.TOOL_HALLUCINATION,
                               tuple(dict.fromkeys(k for k, _, _ in unchecked)),
                               f"{len(unchecked)} call{'s' * (len(unchecked) != 1)} ran with "
                               f"input that fails its input_schema, first {name} at call {i}: "
                               f"{one_line(problem, 80)}",
                               "input_schema validation before a call runs (Tool.input_errors)",
                               anywhere="validate each input against its input_schema before "
                               "running the tool; send the errors back as is_error"))
        return out

    def silent_wrong_answer(self) -> list[Finding]:
        answer = self._final_answer()
        if answer is None:
            return []
        texts = [self.trace.system]
        texts += [text_of(m["content"]) for m in self.trace.messages() if m["role"] == "user"]
        texts += [str(x.get("content", "")) for s in self.steps for x in s.executions
                  if not x.get("is_error")]
        support: set[float] = set()
        dates: set[tuple[int | None, int, int]] = set()
        for text in texts:
            found = _dates(text)
            dates |= {d for _, d in found}
            support |= {float(d[0]) for _, d in found if d[0] is not None}  # "in 2026"
            support |= set(_numbers(_blank(text, found)))
            support |= {float(n) for n in _list_lengths(text)}
        # the answer may count the calls it made ("none of the 3 services")
        results = self._results()
        support |= {float(len(results))}
        support |= {float(n) for n in Counter(str(x.get("name")) for _, x in results).values()}
        said = _dates(answer)
        unsupported = [text for text, d in said
                       if d not in dates and (d[0] is not None or not any(
                           d[1:] == e[1:] for e in dates))]
        check = _Support(support)
        unsupported += [text for text, value in _number_spans(_not_amounts(_blank(answer, said)))
                        if not check.supports(text, value)]
        if not unsupported:
            return []
        return [Finding(FailureMode.SILENT_WRONG_ANSWER, (len(self.steps),),
                        f"the answer states {', '.join(dict.fromkeys(unsupported))}, which no "
                        f"tool result, user message or system prompt contains: "
                        f"{one_line(answer, 80)!r}",
                        "check the final answer: run_agent(..., output_model=...), an eval "
                        "(AnswerContains), or a second model call that checks it",
                        anywhere="compare the answer's figures and dates with the tool results "
                        "before it reaches the user, or have a second model call check it")]

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
                               "never run a cut-off call (check_stop_reason); raise max_tokens",
                               anywhere="when stop_reason is max_tokens, do not run the "
                               "reply's tool_use: ask again with a higher max_tokens"))
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
                        "'not run'); repair the history before sending it again",
                        anywhere="answer every tool_use with a tool_result, even 'not run', "
                        "before saving or trimming the history")]

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
                        "run_agent names a stop cause at every exit (trace=PATH records it)",
                        anywhere="record why the loop stopped (which cap, which error) next "
                        "to the saved messages; this record does not say")]

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


def _checker(definition: dict[str, Any]) -> Tool | str:
    """A tool that checks inputs against ``definition``'s ``input_schema`` (built once per
    definition: building one checks the schema itself), or why the schema cannot be checked
    (no evidence either way)."""
    try:
        return Tool(str(definition.get("name")), "", definition.get("input_schema")
                    or {"type": "object"}, lambda **_: None)
    except Exception as e:  # noqa: BLE001 - a schema we cannot check is not evidence
        return one_line(f"{type(e).__name__}: {e}", 80)


# ------------------------------------------------------------ what a result says

#: Words of a rate limit (looked for only in a result shaped like an error).
_RATE_LIMIT = re.compile(r"\b429\b|rate[ _-]?limit|too many requests|quota exceeded|"
                         r"retry[ _-]after|slow down|throttl|rate exceeded", re.IGNORECASE)
#: A plain-text result that opens like a rate limit: "429 ...", "Too Many Requests", ...
_RATE_LIMIT_TEXT = re.compile(r"^\W*(?:(?:HTTP|error|status)\W*429\b|429\W+too many|"
                              r"rate[ _-]?limit|\w*too ?many ?requests|quota exceeded|\w*throttl)",
                              re.IGNORECASE)
#: A plain-text result that opens like an error: "Error: ...", "ValueError: ...",
#: "Failed to ...", "Traceback (most recent call last)", "HTTP 503".
_ERROR_TEXT = re.compile(r"^\W*(?:(?:error|exception|fatal|failed|failure)\s*[:!\-\u2014]|"
                         r"failed to\b|could not\b|unable to\b|permission denied\b|"
                         r"(?:request |connection )?timed out\b|service (?:temporarily )?"
                         r"unavailable\b|\w*(?:Error|Exception)\s*:|"
                         r"traceback \(most recent|HTTP [45]\d\d\b)", re.IGNORECASE)
#: Keys of a JSON object that carry an error's message beside its status.
_ERROR_KEYS = ("error", "message", "detail", "error_message")
_EMPTY_TEXT = re.compile(r"^\W*(no (results?|matches|records?|items?)( found)?|nothing found|"
                         r"0 results?|none)\W*$|^\W*no (?:[^\W\d]+ ){0,2}(?:found|matched)\b"
                         r"[^.;\n]{0,40}\W*$", re.IGNORECASE)


def _json_of(text: str) -> Any:
    try:
        return parse_json(text) if text.strip()[:1] in ("{", "[") else None
    except JSONRefused:
        return None


def _status(value: dict[str, Any]) -> int | None:
    return next((value[k] for k in ("status", "status_code", "code")
                 if isinstance(value.get(k), int) and not isinstance(value.get(k), bool)), None)


def _reads_as_error(text: str) -> bool:
    """A result shaped like a failure: "Error: ...", ``{"error": "..."}``, a status of 400+
    with an error message beside it. Data that merely holds such words (``{"errors": [...]}``
    from a linter, ``{"status": 404}`` from a link checker, "ERROR lines: none") is not."""
    if _ERROR_TEXT.search(text[:300]) or _reads_as_rate_limit(text):
        return True
    value = _json_of(text)
    if not isinstance(value, dict):
        return False
    error = value.get("error")
    if isinstance(error, str | dict) and error:
        return True
    status = _status(value)
    return (status is not None and 400 <= status <= 599
            and any(isinstance(value.get(k), str) and value.get(k) for k in _ERROR_KEYS))


def _reads_as_rate_limit(text: str, is_error: bool = False) -> bool:
    """A result shaped like a rate limit: marked an error and naming one, opening with one
    ("429 Too Many Requests", "Rate limit exceeded"), or a JSON error of status 429 or whose
    error or message names one. A SKU of 429 or "slow down" in data is not."""
    head = text[:500]
    if is_error and _RATE_LIMIT.search(head):
        return True
    if _RATE_LIMIT_TEXT.search(head):
        return True
    value = _json_of(text)
    if not isinstance(value, dict):
        return False
    if _status(value) == 429 and any(value.get(k) for k in _ERROR_KEYS):
        return True
    error = value.get("error")
    if isinstance(error, dict):
        error = " ".join(str(v) for v in error.values())
    kinds = [error] + [value.get(k) for k in ("__type", "type", "code", "error_code")]
    return any(isinstance(k, str) and bool(_RATE_LIMIT.search(k)) for k in kinds)


def _is_empty(text: str) -> bool:
    """A result that found nothing: ``[]``, ``{}``, ``{"orders": []}``, ``{"hits": [],
    "total": 0}``, "no results"."""
    if not text.strip():
        return False  # an action's result ("deleted"), not a search that found nothing
    if _EMPTY_TEXT.match(text.strip()):
        return True
    value = _json_of(text)
    if value in ([], {}):
        return True
    if not isinstance(value, dict):
        return False
    holders = [v for v in value.values() if isinstance(v, list | dict)]
    return bool(holders) and _hollow(value)


def _hollow(value: Any) -> bool:
    """Nothing in it: ``None``, ``""``, 0, ``[]``, or an object of such (nested too)."""
    if isinstance(value, dict):
        return all(map(_hollow, value.values()))
    return value in (None, "", 0, [], {}) and not isinstance(value, bool)


def _reworded(inputs: list[Any]) -> bool:
    """Whether ``inputs`` are one search reworded: a word (3+ letters) of their string
    values is in at least half of them ("Nordwind contract", "Nordwind GmbH", ...), not one
    lookup per item (``{"id": "c0"}``, ``{"id": "c1"}``, ...)."""
    def words(v: Any) -> set[str]:
        if isinstance(v, str):
            return {w.lower() for w in re.findall(r"[^\W\d_]{3,}", v)}
        if isinstance(v, dict):
            return set().union(*map(words, v.values())) if v else set()
        if isinstance(v, list):
            return set().union(*map(words, v)) if v else set()
        return set()
    counts = Counter(w for i in inputs for w in words(i))
    return bool(counts) and max(counts.values()) * 2 >= len(inputs)


def _list_lengths(text: str) -> Iterable[int]:
    """The length of every list in a JSON result (an answer may count them)."""
    stack = [_json_of(text)]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            yield len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())


# ------------------------------------------------------------ dates in text

_MONTHS = {m: k for k, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1) for m in (name, name[:3])}
#: German and French month names, written out (their short forms clash: "mar", "jui").
_MONTHS |= {name: k for names in (
    ["januar", "februar", "märz", "april", "mai", "juni", "juli", "august", "september",
     "oktober", "november", "dezember"],
    ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
     "octobre", "novembre", "décembre"]) for k, name in enumerate(names, 1)}
_MONTH = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DATE_FORMS = [
    re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})"),
    re.compile(r"\b(?P<d>\d{1,2})(?:st|nd|rd|th|\.)?\s+(?:of\s+)?" + _MONTH
               + r"(?:,?\s+(?P<y>\d{4}))?\b", re.IGNORECASE),
    re.compile(r"\b" + _MONTH + r"\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{4}))?\b",
               re.IGNORECASE),
]


def _dates(text: str) -> list[tuple[str, tuple[int | None, int, int]]]:
    """Each date written in ``text`` (ISO, "4 March 2026", "March 4, 2026", with or
    without the year) as ``(its text, (year or None, month, day))``."""
    out: list[tuple[str, tuple[int | None, int, int]]] = []
    taken: list[tuple[int, int]] = []
    for form in _DATE_FORMS:
        for m in form.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            groups = m.groupdict()
            month = int(groups["m"]) if groups.get("m") else _MONTHS[groups["mon"].lower()]
            day = int(groups["d"])
            if 1 <= month <= 12 and 1 <= day <= 31:
                taken.append(m.span())
                out.append((m.group(0), (int(groups["y"]) if groups.get("y") else None,
                                         month, day)))
    return out


def _blank(text: str, dates: list[tuple[str, Any]]) -> str:
    """``text`` with the dates found in it blanked out (their digits are not amounts)."""
    for said, _ in dates:
        text = text.replace(said, " " * len(said))
    return text


# ------------------------------------------------------------ is a number supported?

#: Unit changes an answer may make in one step: cents, percent, metres/km, seconds/minutes/
#: hours, hours/days.
_FACTORS = (1.0, 100.0, 1000.0, 60.0, 3600.0, 24.0)


def _key(x: float) -> float:
    """``x`` to 12 significant digits: values equal but for float noise share a key."""
    return float(f"{x:.12g}")


class _Support:
    """The values a run supports, indexed once (an answer's numbers are then looked up, not
    compared with every value): each supported value, its unit changes, and the values one
    arithmetic step from two (sum, difference, product, ratio, percent change: 14 on hand -
    2 reserved = 12 that can ship; 80 to 100 is 25%)."""

    def __init__(self, support: set[float]) -> None:
        values = {abs(v) for v in support if math.isfinite(v)}
        self.scaled = {x for v in values for f in _FACTORS for x in (v * f, v / f)
                       if math.isfinite(x)}
        self.keys = {_key(x) for x in self.scaled}
        self._rounded: dict[int, set[float]] = {}
        small = sorted(values)[:60]  # bounded: 60² pairs at most
        derived: set[float] = set()
        for a in small:
            for b in small:
                derived |= {a + b, abs(a - b), a * b}
                if b:
                    derived |= {a / b, a / b * 100, abs(a - b) / b * 100}
        self.derived = {_key(x) for x in derived if math.isfinite(x)}

    def supports(self, text: str, value: float) -> bool:
        """Whether ``value`` (written as ``text``) is supported, a unit change of a supported
        value, one rounded to the digits ``text`` shows, or one arithmetic step from two. A
        number written with spaces ("5 900") may also be its parts."""
        if self._one(text, value):
            return True
        parts = text.split()
        return len(parts) > 1 and all(self._one(p, float(p)) for p in parts if p.isdigit())

    def _one(self, text: str, value: float) -> bool:
        value = abs(value)
        key = _key(value)
        if key in self.keys or key in self.derived:
            return True
        digits = len(text.split(".")[1]) if "." in text else 0
        if digits not in self._rounded:
            self._rounded[digits] = {_key(round(x, digits)) for x in self.scaled
                                     if abs(x) < 1e15}
        return key in self._rounded[digits]


# ------------------------------------------------------------ numbers in text

#: A number standing alone: not glued to letters, digits, ``_``, ``-`` or ``/`` (so ``A123``,
#: ``hr-001`` and the parts of ``2026-09-25`` are not numbers), thousands commas allowed.
#: A minus sign is read but ignored (values are compared as magnitudes: "owe 42.50" for a
#: balance of -42.5); "5 900" and "5,90,000" (grouped in thousands by spaces, or in lakhs)
#: are one number.
_NUMBER = re.compile(r"(?:(?<![\w.\-/])|(?<=[\s(\[:=]-))"
                     r"(\d{1,2}(?:,\d{2})+,\d{3}|\d{1,3}(?:,\d{3})+|"
                     r"\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?![.,]\d)|\d+)"
                     r"(\.\d+)?(?![\w\-/]|[.,]\d)")
#: What in an answer is not an amount to check: list markers ("2. Shipping"), the first
#: number of "2 of 3" (a count the result holds only as items), 12-hour times ("6 pm").
_NOT_AMOUNTS = re.compile(r"(?:^|(?<=[.!?:;]\s)|(?<=\n))\s*\d{1,2}[.)](?=\s)|"
                          r"\b\d+(?=\s+(?:out\s+)?of\s+(?:[^\W\d]+\s+){0,2}\d)|"
                          r"\b\d{1,2}(?:[:.]\d{2})?\s*(?:[ap]\.?m\b\.?)", re.IGNORECASE)


def _not_amounts(text: str) -> str:
    """``text`` with list markers, "N of M" counts and 12-hour times blanked."""
    return _NOT_AMOUNTS.sub(lambda m: " " * len(m.group(0)), text)


def _number_spans(text: str) -> Iterable[tuple[str, float]]:
    for m in _NUMBER.finditer(text):
        digits = re.sub(r"[,\s\u00a0\u202f]", "", m.group(1))
        yield m.group(0), float(digits + (m.group(2) or ""))


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


__all__ = ["ALTERNATION_MIN_CALLS", "DEFAULT_COMPACT_SHARE", "DEFAULT_NO_PROGRESS_WINDOW",
           "DEFAULT_REPEAT_THRESHOLD", "Diagnosis", "EMPTY_MIN", "FailureMode", "Finding",
           "GuardEffect", "NOTHING_FOUND", "RATE_LIMIT_MIN", "RULES", "RUNAWAY_GROWTH",
           "RUNAWAY_MIN_CALLS", "diagnose"]
