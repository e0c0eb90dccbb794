"""What a run has left, and the run a tool is being called from.

A tool that spends model tokens itself (a sub-agent runs a whole child loop) must not spend
more than the run calling it has left, or the run overshoots its own budget. While a run
goes, the loop makes it the *current run* (:func:`running`, a ``contextvars`` variable, so
it is seen by the tool's thread too); :func:`current_scope` gives the tool a
:class:`RunScope`, and :meth:`RunScope.take` what it may spend: :class:`Allowance`, the
run's remaining tokens, dollars, model calls and wall-clock seconds.

Several calls of one reply may run at the same time, and their usage reaches the run's
totals only once all of them are done. So what one call takes is held for it until the
reply's results are counted: a second call running beside it gets what the first left, and
together they can never pass the run's budget.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from primer.loop.config import AgentConfig
from primer.loop.model import Usage
from primer.loop.state import RunState


@dataclass(frozen=True)
class Allowance:
    """What a tool called from a run may spend (``None``: no limit of that kind).

    ``tokens`` (input + output, as budgets count them), ``cost_usd`` (USD), ``steps`` (model
    calls; the parent's step limit minus the calls it made) and ``seconds`` (wall clock).
    """

    tokens: int | None = None
    cost_usd: float | None = None
    steps: int | None = None
    seconds: float | None = None

    def problem(self) -> str | None:
        """Why nothing can be spent (``"no tokens left ..."``), or ``None``."""
        if self.tokens is not None and self.tokens <= 0:
            return "the run has no tokens of its budget left"
        if self.cost_usd is not None and self.cost_usd <= 0:
            return "the run has no dollars of its budget left"
        if self.steps is not None and self.steps <= 0:
            return "the run has no model calls left"
        if self.seconds is not None and self.seconds <= 0:
            return "the run has no wall-clock time left"
        return None

    def limit(self, config: AgentConfig) -> AgentConfig:
        """``config`` with each limit at most this allowance (the smaller of the two wins).

        A child given a token or dollar budget from here checks it *before* each call
        (``budget_check="before"``): it stops before a call that could pass it, so it never
        spends more than it was given. ``ValueError`` if :meth:`problem` is not ``None``.
        """
        if (why := self.problem()) is not None:
            raise ValueError(why)

        def least(own: float | None, given: float | None) -> float | None:
            return given if own is None else own if given is None else min(own, given)

        budgeted = self.tokens is not None or self.cost_usd is not None
        tokens = least(config.token_budget, self.tokens)
        cost = least(config.cost_budget_usd, self.cost_usd)
        seconds = least(config.wall_clock_s, self.seconds)
        return replace(config,
                       token_budget=None if tokens is None else int(tokens),
                       cost_budget_usd=cost, wall_clock_s=seconds,
                       max_steps=int(least(config.max_steps, self.steps) or 1),
                       budget_check="before" if budgeted else config.budget_check)


def remaining(state: RunState) -> Allowance:
    """What ``state``'s run has left: its budgets minus its totals, its step limit minus its
    model calls, its wall-clock limit minus the time since it started (each ``None`` when
    the run has no such limit)."""
    c = state.config
    return Allowance(
        tokens=None if c.token_budget is None else c.token_budget - state.usage.total_tokens,
        cost_usd=None if c.cost_budget_usd is None else c.cost_budget_usd - state.cost_usd,
        steps=c.max_steps - state.model_calls,
        seconds=None if c.wall_clock_s is None else
        c.wall_clock_s - (c.clock() - state.started_at))


class RunScope:
    """The run a tool is being called from, with what its running calls hold.

    :meth:`take` gives a call the run's :func:`remaining` less what other calls of the same
    reply hold, and holds all of it; :meth:`settle` replaces the hold by what the call spent.
    Holds are dropped when the run makes its next model call (the reply's results have been
    counted in its totals by then). Thread-safe.
    """

    def __init__(self, state: RunState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._reply = -1
        self._tokens = 0
        self._cost = 0.0

    def take(self) -> Allowance:
        """What one call may spend now; it is held until :meth:`settle`."""
        with self._lock:
            self._fresh()
            left = remaining(self.state)
            tokens = None if left.tokens is None else left.tokens - self._tokens
            cost = None if left.cost_usd is None else left.cost_usd - self._cost
            self._tokens += max(tokens or 0, 0)
            self._cost += max(cost or 0.0, 0.0)
            return replace(left, tokens=tokens, cost_usd=cost)

    def settle(self, taken: Allowance, tokens: int, cost_usd: float) -> None:
        """Release ``taken`` (from :meth:`take`) and hold what the call spent instead
        (``tokens``; ``cost_usd`` USD) until the run counts it."""
        with self._lock:
            if self._reply != self.state.model_calls:
                return  # (cannot happen while the call runs: the run waits for it)
            self._tokens += tokens - max(taken.tokens or 0, 0)
            self._cost += cost_usd - max(taken.cost_usd or 0.0, 0.0)

    def charge(self, usage: Usage, cost_usd: float) -> None:
        """Add to the run's totals what a call spent but could not report, because it was
        interrupted (at its time limit): ``usage`` (tokens) and ``cost_usd`` (USD). The run's
        budgets count it at their next check, and the call's next attempt gets what is left."""
        with self._lock:
            self.state.add_usage(usage, cost_usd)

    def _fresh(self) -> None:
        if self._reply != self.state.model_calls:  # a new reply: the last one's are counted
            self._reply, self._tokens, self._cost = self.state.model_calls, 0, 0.0


_CURRENT: ContextVar[RunScope | None] = ContextVar("primer_current_run", default=None)


@contextmanager
def running(state: RunState) -> Iterator[RunScope]:
    """Make ``state`` the current run while the block runs (the loop does, around a run)."""
    scope = RunScope(state)
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


def current_scope() -> RunScope | None:
    """The :class:`RunScope` of the run whose tool is running, or ``None`` outside a run."""
    return _CURRENT.get()


def cancel_requested() -> bool:
    """Whether the current run's cancel signal is set (``False`` outside a run): what a tool
    that waits on something it can stop reads while it waits (a subprocess tool kills its
    process, an MCP call cancels its request), so a cancel reaches work in flight."""
    scope = _CURRENT.get()
    cancel = None if scope is None else scope.state.inputs.cancel
    return cancel is not None and cancel.is_set()


def time_left_s() -> float | None:
    """Seconds the current run has left on its wall clock, or ``None`` (outside a run, or a
    run without ``wall_clock_s``): how long a retry's wait may be without passing it."""
    scope = _CURRENT.get()
    return None if scope is None else remaining(scope.state).seconds
