"""Workflows and the agent patterns built on the loop: ReAct, plan-and-execute, reflection.

* **Workflow**: your code fixes the path and the model fills in steps
  (:func:`run_workflow`). Each step is a function; a model step makes exactly one call
  through :class:`ModelCalls`, a code step makes none. The number of calls is known before
  the run starts, which is what makes a workflow cheap, fast and testable.
* **ReAct**: a short thought before each action, kept in the trace (:func:`react_rows`
  reads thought, action and observation back out of a run; :data:`REACT_INSTRUCTIONS` asks
  for them; :class:`~primer.harness.hooks.ThoughtRequired` enforces them).
* **Plan-and-execute** (:func:`run_plan_and_execute`): one call writes a numbered plan of
  tool calls; the harness runs the steps one by one without asking the model; when a step
  fails it asks for a new plan from what is known now (a *replan*), up to a cap. A plan is a
  guess about the world made at one moment; when a fact changes mid-run the plan goes stale.
* **Reflection** (:func:`reflect`): a review call checks a draft against stated criteria and
  asks for a retry, with a cap on retries; each round costs two more calls.

Every helper counts its model calls, tokens (as the model reports them) and dollars, so the
lessons can put the patterns side by side in a table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from primer.loop.messages import tool_use_block, user_message
from primer.loop.model import LLM, Prices, Usage, cost_usd
from primer.loop.result import AgentResult
from primer.loop.text import one_line
from primer.loop.tools import Tool, ToolExecution, ToolRegistry


class PatternError(RuntimeError):
    """A pattern could not go on: a cut-off or refused reply, or a plan that is not JSON."""


@dataclass
class PatternCall:
    """One model call made by a pattern: its ``label``, ``usage`` (tokens) and reply text."""

    label: str
    usage: Usage
    text: str


class ModelCalls:
    """One-shot model calls outside the loop, each counted.

    ``ask(prompt, system=..., label=...)`` sends one user message (no tools) and returns the
    reply's text. ``records`` keeps every call; ``usage`` (tokens) and ``cost_usd`` (at
    ``prices``) are their totals. Raises :class:`PatternError` when a reply stops with
    ``max_tokens`` or ``refusal``: its text is not an answer to build on.
    """

    def __init__(self, llm: LLM, prices: Prices | None = None, max_tokens: int = 1024) -> None:
        self.llm, self.prices, self.max_tokens = llm, prices or Prices(), max_tokens
        self.records: list[PatternCall] = []

    def ask(self, prompt: str, *, system: str = "", label: str = "") -> str:
        """One call; returns the reply text (see class docstring for errors)."""
        reply = self.llm(system=system, messages=[user_message(prompt)], tools=[],
                         max_tokens=self.max_tokens)
        self.records.append(PatternCall(label or f"call {len(self.records) + 1}", reply.usage,
                                       reply.text))
        if reply.stop_reason in ("max_tokens", "refusal"):
            raise PatternError(f"{label or 'a model call'} stopped with {reply.stop_reason}; "
                               f"its text is not an answer")
        return reply.text

    @property
    def count(self) -> int:
        """Model calls made."""
        return len(self.records)

    @property
    def usage(self) -> Usage:
        """Total usage of every call (tokens)."""
        total = Usage()
        for r in self.records:
            total = total + r.usage
        return total

    @property
    def cost_usd(self) -> float:
        """Total dollars at ``prices``."""
        return cost_usd(self.usage, self.prices)


class CountedCalls:
    """For a pattern's result that keeps its model calls in ``calls``: their number."""

    calls: list[PatternCall]

    @property
    def model_calls(self) -> int:
        """Model calls made (code steps make none)."""
        return len(self.calls)


# ---------------------------------------------------------------- workflow

@dataclass
class WorkflowRun:
    """What a workflow step sees: the run's ``inputs``, the ``outputs`` of earlier steps
    (name → value) and :meth:`ask` for one model call."""

    inputs: dict[str, Any]
    outputs: dict[str, Any]
    calls: ModelCalls
    system: str = ""

    def ask(self, prompt: str, label: str = "") -> str:
        """One model call (counted); see :meth:`ModelCalls.ask`."""
        return self.calls.ask(prompt, system=self.system, label=label)


WorkflowStep = tuple[str, Callable[[WorkflowRun], Any]]


@dataclass
class WorkflowResult(CountedCalls):
    """A workflow's outcome: every step's output (name → value), the last one as ``final``,
    the step that failed (``None`` when all ran) and why, and what the calls cost."""

    outputs: dict[str, Any]
    final: Any
    failed_step: str | None
    error: str | None
    calls: list[PatternCall]
    usage: Usage
    cost_usd: float


def run_workflow(llm: LLM, steps: Sequence[WorkflowStep], inputs: dict[str, Any], *,
                 system: str = "", prices: Prices | None = None) -> WorkflowResult:
    """Run ``steps`` in order; each ``(name, fn)`` gets a :class:`WorkflowRun` and its return
    value is stored under ``name``. The path is fixed: no step chooses the next.

    A step that raises (a :class:`PatternError`, a ``KeyError`` from a lookup, ...) stops the
    workflow; the result names the step and the error instead of raising. ``ValueError`` for
    two steps with one name.
    """
    names = [n for n, _ in steps]
    if len(set(names)) != len(names):
        raise ValueError(f"workflow step names must be unique, got {names}")
    run = WorkflowRun(dict(inputs), {}, ModelCalls(llm, prices), system)
    failed = error = None
    for name, fn in steps:
        try:
            run.outputs[name] = fn(run)
        except Exception as e:  # noqa: BLE001 - a failed step is an outcome to report
            failed, error = name, f"{type(e).__name__}: {e}"
            break
    final = run.outputs.get(names[-1]) if names and failed is None else None
    return WorkflowResult(run.outputs, final, failed, error, run.calls.records,
                          run.calls.usage, run.calls.cost_usd)


# ---------------------------------------------------------------- ReAct

#: Added to a system prompt to ask for ReAct: a thought before each action.
REACT_INSTRUCTIONS = ("Before each tool call, write one short sentence starting with "
                      "'Thought:' that says what you know and why this call is next.")


def react_prompt(base: str = "") -> str:
    """``base`` with :data:`REACT_INSTRUCTIONS` appended."""
    return f"{base}\n\n{REACT_INSTRUCTIONS}".strip()


def react_rows(result: AgentResult, width: int = 70) -> list[dict[str, Any]]:
    """The run as ReAct rows: ``{"step", "thought", "action", "observation"}`` per model call.

    The thought is the reply's text when it asked for tools ("-" when it wrote none), the
    action the calls it asked for (or "answer"), the observation the results, each cut to
    ``width`` characters. Everything comes from the saved steps: the thoughts are in the trace.
    """
    def cut(text: str) -> str:
        return one_line(text, width)

    rows = []
    for s in result.steps:
        calls = s.reply.tool_uses
        rows.append({
            "step": s.index,
            "thought": cut(s.reply.text) if calls and s.reply.text else "-",
            "action": cut("; ".join(f"{b.get('name')}({json.dumps(b.get('input'))})"
                                    for b in calls)) if calls else "answer",
            "observation": cut("; ".join(("error: " if e.is_error else "") + e.content
                                         for e in s.executions)) if calls
            else cut(s.reply.text)})
    return rows


# ---------------------------------------------------------------- plan-and-execute

@dataclass(frozen=True)
class PlanStep:
    """One planned action: a ``tool`` call with ``input`` and the reason (``why``)."""

    tool: str
    input: dict[str, Any]
    why: str = ""

    def __str__(self) -> str:
        return f"{self.why} → {self.tool}({json.dumps(self.input, ensure_ascii=False)})"


def parse_plan(text: str) -> list[PlanStep]:
    """A plan from the planner's text: a JSON list of ``{"tool", "input", "why"}`` objects.

    Raises :class:`PatternError` saying what is wrong: not JSON, not a list, or a step
    without a string ``tool`` and an object ``input``.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PatternError(f"the plan is not JSON ({e.msg} at character {e.pos}); expected a "
                           f"list of steps like [{{\"tool\": ..., \"input\": {{...}}, "
                           f"\"why\": ...}}]") from None
    if not isinstance(data, list) or not data:
        raise PatternError("the plan must be a non-empty JSON list of steps")
    steps = []
    for k, d in enumerate(data, start=1):
        if not (isinstance(d, dict) and isinstance(d.get("tool"), str)
                and isinstance(d.get("input"), dict)):
            raise PatternError(f"plan step {k} needs a string 'tool' and an object 'input'; "
                               f"got {d!r}")
        steps.append(PlanStep(d["tool"], d["input"], str(d.get("why", ""))))
    return steps


def format_plan(plan: Sequence[PlanStep]) -> str:
    """The plan as numbered lines, ``1. why → tool(input)``."""
    return "\n".join(f"{k}. {step}" for k, step in enumerate(plan, start=1))


PLANNER_SYSTEM = ("You plan before acting. Reply with only a JSON list of steps, each "
                  "{\"tool\": name, \"input\": {...}, \"why\": short reason}, using only the "
                  "tools listed. Steps run in order without you seeing their results.")


@dataclass
class PlanRun:
    """A plan-and-execute run.

    ``plans`` holds every plan made (the first, then each replan); ``log`` one dict per step
    run: ``{"plan", "step", "tool", "input", "result", "is_error"}``. ``outcome`` is
    ``"done"`` (every step of the last plan ran and an answer was written),
    ``"step_failed"`` (a step failed and replanning was off), ``"replan_limit"`` (a step
    failed after ``max_replans`` replans) or ``"bad_plan"`` (a plan could not be read).
    ``final_text`` is the answer only when ``outcome == "done"``.
    """

    plans: list[list[PlanStep]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = ""
    detail: str = ""
    final_text: str | None = None
    calls: list[PatternCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0

    @property
    def model_calls(self) -> int:
        """Model calls made: plans, replans and the answer."""
        return len(self.calls)


def _tool_list(registry: ToolRegistry) -> str:
    return "\n".join(f"- {t.name}: {t.description} input_schema: "
                     f"{json.dumps(t.input_schema, separators=(',', ':'))}" for t in registry)


def _results(log: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {r['tool']}({json.dumps(r['input'])}) → "
                     f"{'ERROR ' if r['is_error'] else ''}{r['result']}" for r in log) or "(none)"


def run_plan_and_execute(llm: LLM, task: str, tools: Iterable[Tool], *, replan: bool = True,
                         max_replans: int = 2,
                         between_steps: Callable[[int], None] | None = None,
                         prices: Prices | None = None) -> PlanRun:
    """Plan once, run the plan's tool calls in order, replan when a step fails, then answer.

    ``llm`` writes plans (JSON, see :func:`parse_plan`) and the final answer; ``tools`` are
    run by the harness through a :class:`~primer.loop.tools.ToolRegistry` (so unknown
    names and bad input become error results, which count as a failed step).
    ``between_steps(n)`` is called before each step with the number of steps run so far: the
    lessons use it to change a fact mid-run. With ``replan=False`` the first failed step ends
    the run; otherwise the planner sees what ran and what failed and writes a new plan for
    the rest, at most ``max_replans`` times. Never raises for a failing tool or a bad plan;
    the outcome says what happened (see :class:`PlanRun`).
    """
    registry = ToolRegistry(tools)
    calls = ModelCalls(llm, prices)
    out = PlanRun()
    prompt = (f"Task: {task}\n\nTools:\n{_tool_list(registry)}\n\n"
              f"Write the plan.")
    try:
        while True:
            plan = parse_plan(calls.ask(prompt, system=PLANNER_SYSTEM,
                                        label="plan" if not out.plans else "replan"))
            out.plans.append(plan)
            failed: ToolExecution | None = None
            for k, step in enumerate(plan, start=1):
                if between_steps is not None:
                    between_steps(len(out.log))
                e = registry.run(tool_use_block(f"plan{len(out.plans)}_step{k}", step.tool,
                                                step.input))
                out.log.append({"plan": len(out.plans), "step": k, "tool": step.tool,
                                "input": step.input, "result": e.content,
                                "is_error": e.is_error})
                if e.is_error:
                    failed = e
                    break
            if failed is None:
                out.final_text = calls.ask(
                    f"Task: {task}\n\nSteps run and their results:\n{_results(out.log)}\n\n"
                    f"Write the answer for the user.", label="answer")
                out.outcome, out.detail = "done", f"plan {len(out.plans)} ran to the end"
                break
            where = f"step {out.log[-1]['step']} of plan {len(out.plans)} ({failed.name})"
            if not replan:
                out.outcome, out.detail = "step_failed", f"{where} failed: {failed.content}"
                break
            if len(out.plans) > max_replans:
                out.outcome = "replan_limit"
                out.detail = f"{where} failed after {max_replans} replans: {failed.content}"
                break
            prompt = (f"Task: {task}\n\nTools:\n{_tool_list(registry)}\n\n"
                      f"Steps run so far and their results:\n{_results(out.log)}\n\n"
                      f"The last step failed. Write a new plan for the remaining work only, "
                      f"using what the results say now.")
    except PatternError as e:
        out.outcome, out.detail = "bad_plan", str(e)
    out.calls, out.usage, out.cost_usd = calls.records, calls.usage, calls.cost_usd
    return out


# ---------------------------------------------------------------- reflection

@dataclass
class Review:
    """A reviewer's verdict: ``passed`` and the ``problems`` it found (one string each)."""

    passed: bool
    problems: list[str]


def parse_review(text: str) -> Review:
    """Read ``{"pass": bool, "problems": [str, ...]}``; anything else is a failed review
    whose problem says the review could not be read (never a silent pass)."""
    try:
        data = json.loads(text)
        passed = data["pass"]
        problems = [str(p) for p in data.get("problems", [])]
        if not isinstance(passed, bool):
            raise TypeError("'pass' must be true or false")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        return Review(False, [f"the review could not be read ({e}); expected "
                              f"{{\"pass\": true|false, \"problems\": [...]}}"])
    return Review(passed, problems)


REVIEWER_SYSTEM = ("You review drafts against criteria. Reply with only JSON: "
                   "{\"pass\": true|false, \"problems\": [one short string per unmet "
                   "criterion]}.")


@dataclass
class ReflectionRun:
    """A reflection run: ``rounds`` of ``(draft, review)``, the last draft, whether it
    ``passed``, and the calls it took (``model_calls``, ``usage`` in tokens, ``cost_usd``).
    ``outcome`` is ``"passed"`` or ``"retry_cap"`` (the last draft still failed review)."""

    rounds: list[tuple[str, Review]]
    draft: str
    passed: bool
    outcome: str
    calls: list[PatternCall]
    usage: Usage
    cost_usd: float

    @property
    def model_calls(self) -> int:
        """Model calls made: one draft and one review per round."""
        return len(self.calls)


def reflect(drafter: LLM, reviewer: LLM, task: str, criteria: Sequence[str], *,
            max_retries: int = 2, prices: Prices | None = None) -> ReflectionRun:
    """Draft, review against ``criteria``, and redraft with the problems, at most
    ``max_retries`` times after the first draft.

    Each round is two calls (draft, review), so a run costs 2 to ``2 × (max_retries + 1)``
    calls. The drafter and the reviewer may be the same model. A draft that still fails
    after the cap is returned with ``passed=False`` and ``outcome="retry_cap"``: the caller
    decides what to do with it (send it to a person, say), nothing passes it off as
    reviewed. ``ValueError`` for no criteria or ``max_retries < 0``.
    """
    if not criteria:
        raise ValueError("reflection needs at least one criterion to review against")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0 (got {max_retries})")
    p = prices or Prices()
    draft_calls, review_calls = ModelCalls(drafter, p), ModelCalls(reviewer, p)
    listed = "\n".join(f"{k}. {c}" for k, c in enumerate(criteria, start=1))
    rounds: list[tuple[str, Review]] = []
    prompt = f"Task: {task}\n\nWrite the draft."
    records: list[PatternCall] = []
    for attempt in range(max_retries + 1):
        draft = draft_calls.ask(prompt, label=f"draft {attempt + 1}")
        review = parse_review(review_calls.ask(
            f"Criteria:\n{listed}\n\nDraft:\n{draft}\n\nDoes the draft meet every criterion?",
            system=REVIEWER_SYSTEM, label=f"review {attempt + 1}"))
        records += [draft_calls.records[-1], review_calls.records[-1]]
        rounds.append((draft, review))
        if review.passed:
            break
        prompt = (f"Task: {task}\n\nYour last draft:\n{draft}\n\nA reviewer found these "
                  f"problems:\n" + "\n".join(f"- {x}" for x in review.problems)
                  + "\n\nWrite a corrected draft.")
    usage = draft_calls.usage + review_calls.usage
    draft, review = rounds[-1]
    return ReflectionRun(rounds, draft, review.passed,
                         "passed" if review.passed else "retry_cap", records, usage,
                         cost_usd(usage, p))
