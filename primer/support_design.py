"""The design round: a worksheet for a customer-support agent, its numbers, and a checklist.

The learner fills in a :class:`SupportDesign`: the tools (which change the world, which need a
person's approval), the limits (step cap, token budget) with a reason for each, and the
sizes and rates the numbers rest on. Every figure an interviewer asks for is computed from
those choices by :mod:`primer.agents.cost`, never typed in:

- cost per task (USD) for a good run and for a run that hits the step cap
  (:func:`~primer.agents.cost.run_usages`, :func:`~primer.agents.cost.run_cost_usd`);
- end-to-end success at the per-step success rate
  (:func:`~primer.agents.cost.end_to_end_success`) and the per-step rate needed for 90%
  (:func:`~primer.agents.cost.per_step_success_needed`);
- tokens at the step cap (:func:`~primer.agents.cost.cumulative_input_tokens`) and the
  share of the context window they fill (:func:`~primer.agents.cost.context_budget`);
- dollars a day (:func:`~primer.agents.cost.daily_cost_usd`): good runs only (a lower
  bound), and the expected cost when every failed run goes on to the step cap.

:meth:`SupportDesign.review` flags choices an interviewer would question, and
:func:`checklist` holds the questions interviewers ask, marking which key terms an answer
covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from primer.agents.cost import (
    Prices,
    context_budget,
    cumulative_input_tokens,
    daily_cost_usd,
    end_to_end_success,
    per_step_success_needed,
    run_cost_usd,
    run_usages,
)
from primer.agents.exits import HANDOFF_TOOL_NAME

#: End-to-end success a design should reach; below it the review says so.
TARGET_SUCCESS = 0.9
#: Share of the context window at which older turns should be compressed, and at which a
#: run should stop (the course's guard against context rot).
COMPRESS_SHARE, STOP_SHARE = 0.6, 0.8


@dataclass(frozen=True)
class ToolPlan:
    """One tool of the design: its ``name``, what it is for, and how it is guarded.

    ``side_effecting``: it changes the world (a refund, an email), so a retry needs an
    idempotency key and a timeout is never retried blindly. ``needs_approval``: the harness
    pauses for a person before it runs.
    """

    name: str
    purpose: str
    side_effecting: bool = False
    needs_approval: bool = False


@dataclass(frozen=True)
class DesignNumbers:
    """The figures of a design (tokens, USD, probabilities 0..1, shares 0..1).

    ``cost_per_task_usd`` / ``tokens_per_task``: a good run of ``good_run_steps`` model
    calls; ``cost_at_cap_usd`` / ``tokens_at_cap``: a run that uses every step;
    ``input_tokens_at_cap``: the input tokens of that run (the quadratic part);
    ``end_to_end_success``: ``per_step_success ** good_run_steps``; ``per_step_needed``: the
    per-step rate for :data:`TARGET_SUCCESS` over ``good_run_steps``; ``context_share_at_cap``:
    the window share the last call of a capped run needs; ``daily_cost_usd``: good runs at
    ``tasks_per_day`` (a lower bound: failed runs cost more); ``expected_cost_per_task_usd``:
    ``s × good run + (1 − s) × run at the cap`` with ``s`` = ``end_to_end_success``, i.e. a
    failed run is priced as one that uses every step (a failure that stops earlier costs
    less, so this leans high); ``expected_daily_cost_usd``: that at ``tasks_per_day``.
    """

    cost_per_task_usd: float
    cost_at_cap_usd: float
    tokens_per_task: int
    tokens_at_cap: int
    input_tokens_at_cap: int
    end_to_end_success: float
    per_step_needed: float
    context_share_at_cap: float
    daily_cost_usd: float
    expected_cost_per_task_usd: float
    expected_daily_cost_usd: float


@dataclass(frozen=True)
class SupportDesign:
    """A support agent's design: tools, limits with reasons, and the sizes behind the numbers.

    - ``tools``: the :class:`ToolPlan` list (include ``handoff_to_human`` so a person can
      take over).
    - ``good_run_steps``: model calls a typical successful task needs.
    - ``max_steps``: the step cap; ``token_budget``: tokens (input + output) a run may use.
    - ``per_step_success``: probability each step goes right (0..1).
    - ``static_tokens``: system prompt and task; ``tool_definition_tokens``: the tool
      definitions; ``tokens_per_step``: history each step adds (the model's reply plus the
      tool result); ``output_tokens_per_call``: tokens the model writes per call.
    - ``prices``: USD per million tokens, default 3 in / 15 out: a design round quotes the
      list prices of the model you choose (3 / 15 is ``claude-sonnet-4-6``'s), not the
      course's 5 / 25 reference prices; set them from your choice. ``context_window``:
      tokens; ``tasks_per_day``.
    - ``reasons``: why each limit was chosen, keyed ``"max_steps"``, ``"token_budget"``.

    Raises ``ValueError`` for sizes or limits that cannot work, saying which and why.
    """

    tools: tuple[ToolPlan, ...]
    good_run_steps: int
    max_steps: int
    token_budget: int
    per_step_success: float
    static_tokens: int = 2_000
    tool_definition_tokens: int = 800
    tokens_per_step: int = 800
    output_tokens_per_call: int = 150
    prices: Prices = field(default_factory=lambda: Prices(3.0, 15.0))
    context_window: int = 128_000
    tasks_per_day: int = 10_000
    reasons: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = [f"{k} must be >= 1 (got {v})" for k, v in
                    (("good_run_steps", self.good_run_steps), ("max_steps", self.max_steps),
                     ("token_budget", self.token_budget),
                     ("context_window", self.context_window)) if v < 1]
        problems += [f"{k} must be >= 0 (got {v})" for k, v in
                     (("static_tokens", self.static_tokens),
                      ("tool_definition_tokens", self.tool_definition_tokens),
                      ("tokens_per_step", self.tokens_per_step),
                      ("output_tokens_per_call", self.output_tokens_per_call),
                      ("tasks_per_day", self.tasks_per_day)) if v < 0]
        if not 0 <= self.per_step_success <= 1:
            problems.append(f"per_step_success must be a probability between 0 and 1 (got "
                            f"{self.per_step_success}); write 97% as 0.97")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            problems.append(f"tool names must be unique (got {names})")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def base_tokens(self) -> int:
        """Tokens every call re-sends before any history: static + tool definitions."""
        return self.static_tokens + self.tool_definition_tokens

    def _run(self, calls: int) -> tuple[int, float]:
        usages = run_usages(calls, self.base_tokens, self.tokens_per_step,
                            self.output_tokens_per_call)
        return sum(u.total_tokens for u in usages), run_cost_usd(usages, self.prices)

    def numbers(self) -> DesignNumbers:
        """Every figure of the design, computed by :mod:`primer.agents.cost` (no caching;
        the first call carries no history)."""
        tokens, usd = self._run(self.good_run_steps)
        cap_tokens, cap_usd = self._run(self.max_steps)
        success = end_to_end_success(self.per_step_success, self.good_run_steps)
        expected = success * usd + (1 - success) * cap_usd
        last_call = context_budget(self.max_steps - 1, static=self.static_tokens,
                                   tool_definitions=self.tool_definition_tokens,
                                   per_step=self.tokens_per_step,
                                   output_reserve=self.output_tokens_per_call,
                                   window=self.context_window)
        return DesignNumbers(
            cost_per_task_usd=usd, cost_at_cap_usd=cap_usd, tokens_per_task=tokens,
            tokens_at_cap=cap_tokens,
            input_tokens_at_cap=cumulative_input_tokens(self.max_steps, self.base_tokens,
                                                        self.tokens_per_step),
            end_to_end_success=success,
            per_step_needed=per_step_success_needed(TARGET_SUCCESS, self.good_run_steps),
            context_share_at_cap=last_call.share,
            daily_cost_usd=daily_cost_usd(usd, self.tasks_per_day),
            expected_cost_per_task_usd=expected,
            expected_daily_cost_usd=daily_cost_usd(expected, self.tasks_per_day))

    def review(self) -> list[str]:
        """What an interviewer would question in this design, one sentence each ([] = none).

        Rules (the course's): side-effecting tools need an idempotency key and usually
        approval; a person must be able to take over; cap steps near twice a good run (more
        than three times lets a runaway run cost far more than a good one); a token budget
        between a good run's tokens and the cap's; compress history past 60% of the window,
        stop past 80%; end-to-end success of at least 90%; a reason for every limit.
        """
        n = self.numbers()
        notes = []
        for t in self.tools:
            if t.side_effecting and not t.needs_approval:
                notes.append(f"{t.name} changes the world and runs without approval: give it "
                             f"an idempotency key, never retry its timeouts blindly, and say "
                             f"why no person needs to approve it.")
            if t.needs_approval and not t.side_effecting:
                notes.append(f"{t.name} only reads, yet needs approval: every run waits for "
                             f"a person for nothing.")
        if HANDOFF_TOOL_NAME not in {t.name for t in self.tools}:
            notes.append(f"No {HANDOFF_TOOL_NAME} tool: the agent cannot hand a task to a "
                         f"person when it is out of its depth.")
        if self.max_steps < self.good_run_steps:
            notes.append(f"max_steps {self.max_steps} is below the {self.good_run_steps} "
                         f"steps a good run needs: good runs would stop at the cap.")
        elif self.max_steps > 3 * self.good_run_steps:
            notes.append(f"max_steps {self.max_steps} is more than three times a good run "
                         f"({self.good_run_steps}): a runaway run costs "
                         f"{n.cost_at_cap_usd / n.cost_per_task_usd:.1f}× a good one "
                         f"before it stops.")
        if self.token_budget < n.tokens_per_task:
            notes.append(f"token_budget {self.token_budget:,} is below a good run's "
                         f"{n.tokens_per_task:,} tokens: good runs would stop on the budget.")
        elif self.token_budget > n.tokens_at_cap:
            notes.append(f"token_budget {self.token_budget:,} is above the {n.tokens_at_cap:,} "
                         f"tokens of a run at the step cap: it never binds while steps stay "
                         f"this size.")
        if n.context_share_at_cap > STOP_SHARE:
            notes.append(f"At the step cap the prompt needs {n.context_share_at_cap:.0%} of "
                         f"the window: the run would stop on the context before the cap.")
        elif n.context_share_at_cap > COMPRESS_SHARE:
            notes.append(f"At the step cap the prompt needs {n.context_share_at_cap:.0%} of "
                         f"the window: plan to compress older turns.")
        if n.end_to_end_success < TARGET_SUCCESS:
            notes.append(f"Only {n.end_to_end_success:.0%} of tasks succeed end to end at "
                         f"{self.per_step_success:.0%} a step over {self.good_run_steps} steps; "
                         f"{TARGET_SUCCESS:.0%} needs {n.per_step_needed:.1%} a step, or a "
                         f"shorter chain with checks between steps.")
        for limit in ("max_steps", "token_budget"):
            if not self.reasons.get(limit, "").strip():
                notes.append(f"Give a reason for {limit}: interviewers ask why this number.")
        return notes

    def worksheet(self) -> str:
        """The design on one page: tools, limits with reasons, numbers, review notes."""
        n = self.numbers()
        width = max(len(t.name) for t in self.tools) if self.tools else 4
        lines = ["TOOLS", f"  {'name':<{width}}  side-effecting  approval  purpose"]
        lines += [f"  {t.name:<{width}}  {'yes' if t.side_effecting else 'no':<14}  "
                  f"{'yes' if t.needs_approval else 'no':<8}  {t.purpose}" for t in self.tools]
        lines += ["", "LIMITS",
                  f"  max_steps     {self.max_steps:>8,}   {self.reasons.get('max_steps', '')}",
                  f"  token_budget  {self.token_budget:>8,}   "
                  f"{self.reasons.get('token_budget', '')}",
                  "", "NUMBERS",
                  f"  prices: {self.prices.input_per_mtok:g} USD in / "
                  f"{self.prices.output_per_mtok:g} USD out per million tokens",
                  f"  a good run ({self.good_run_steps} steps): {n.tokens_per_task:,} tokens, "
                  f"{n.cost_per_task_usd:.4f} USD",
                  f"  a run at the cap ({self.max_steps} steps): {n.tokens_at_cap:,} tokens "
                  f"({n.input_tokens_at_cap:,} input), {n.cost_at_cap_usd:.4f} USD",
                  f"  end-to-end success: {n.end_to_end_success:.1%} "
                  f"(at {self.per_step_success:.1%} a step; {TARGET_SUCCESS:.0%} needs "
                  f"{n.per_step_needed:.2%})",
                  f"  context at the cap: {n.context_share_at_cap:.1%} of "
                  f"{self.context_window:,} tokens",
                  f"  a day of {self.tasks_per_day:,} good runs: {n.daily_cost_usd:,.2f} USD "
                  f"(a lower bound)",
                  f"  a day of {self.tasks_per_day:,} tasks, each failed run at the cap: "
                  f"{n.expected_daily_cost_usd:,.2f} USD",
                  "", "REVIEW"]
        notes = self.review()
        lines += [f"  - {note}" for note in notes] or ["  nothing to question"]
        return "\n".join(lines)


# ---------------------------------------------------------------- the interview checklist

@dataclass(frozen=True)
class Question:
    """An interview question and the key terms a strong answer mentions.

    Each entry of ``terms`` is a tuple of interchangeable spellings; the first is shown.
    """

    text: str
    terms: tuple[tuple[str, ...], ...]


QUESTIONS: tuple[Question, ...] = (
    Question("What does the model return when it wants a tool?",
             (("tool_use",), ("id",), ("input", "arguments"), ("stop_reason",))),
    Question("Who runs the tool, and what decides whether it may run?",
             (("harness", "host", "my code", "our code"), ("allow-list", "registry"),
              ("schema", "validate"), ("approval",))),
    Question("What happens when a tool fails?",
             (("tool_result",), ("is_error",), ("retry", "backoff"), ("timeout",))),
    Question("What stops a run that never finishes?",
             (("max_steps", "step limit", "step cap"), ("budget",), ("loop",),
              ("hand-off", "handoff"))),
    Question("Which tools change the world, and how do you keep them safe?",
             (("side-effecting", "side effect"), ("idempotency key",), ("approval",),
              ("checkpoint",))),
    Question("What does a task cost, and how does it grow with steps?",
             (("tokens",), ("history", "quadratic"), ("cache", "caching"), ("usd", "dollar", "$"))),
    Question("How do you know the agent works?",
             (("eval",), ("trace",), ("success rate",), ("replay",))),
)


def _mentions(answer: str, spellings: tuple[str, ...]) -> bool:
    text = answer.lower()
    return any(re.search(r"(?<![a-z])" + re.escape(s.lower()), text) for s in spellings)


def checklist(answers: dict[str, str] | None = None) -> str:
    """The interview questions, each marked with the key terms ``answers`` covers.

    ``answers`` maps a question's text (or its number from 1, as a string or int) to the
    learner's answer. A question with no answer shows ``[ ]``; an answered one shows
    ``[x]`` when it mentions every key term, else ``[~]`` and the terms it misses. Matching
    is case-insensitive and finds a term at the start of a word. Raises ``KeyError`` for an
    answer keyed to no question.
    """
    answers = dict(answers or {})
    by_key: dict[str, str] = {}
    for key, value in answers.items():
        q = _question(key)
        by_key[q.text] = value
    lines = []
    for k, q in enumerate(QUESTIONS, start=1):
        answer = by_key.get(q.text, "").strip()
        missing = [t[0] for t in q.terms if not _mentions(answer, t)]
        mark = " " if not answer else ("x" if not missing else "~")
        line = f"[{mark}] {k}. {q.text}"
        if answer and missing:
            line += f"  (not yet mentioned: {', '.join(missing)})"
        elif not answer:
            line += f"  (a strong answer mentions: {', '.join(t[0] for t in q.terms)})"
        lines.append(line)
    return "\n".join(lines)


def _question(key: str | int) -> Question:
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        k = int(key)
        if 1 <= k <= len(QUESTIONS):
            return QUESTIONS[k - 1]
    for q in QUESTIONS:
        if q.text == key:
            return q
    raise KeyError(f"no interview question {key!r}; key answers by number 1..{len(QUESTIONS)} "
                   f"or by the question's exact text")
