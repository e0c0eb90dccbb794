"""Conversations that go on: a :class:`Session` sends each new user turn with what came before.

The model is stateless, so a conversation's memory is its message list: every turn sends the
whole history again, with the new question last. A :class:`Session` keeps that list between
runs of the loop. :meth:`Session.send` is one turn: ``run_agent(llm, text, tools,
messages=session.messages)`` with the session's model, tools, system prompt and config, and
its :class:`Turn` record. Limits and budgets are per turn (each turn is one run with its own
``max_steps`` and ``token_budget``); the session adds the turns up (:attr:`Session.usage`,
:attr:`Session.cost_usd`, and each turn's ``session_usage`` and ``session_cost_usd``), so a
conversation's growing cost is always on view: turn ``n`` re-sends turns ``1..n-1``.

Caps on the whole conversation (:data:`SESSION_CAPS`): ``max_turns`` turns,
``max_tokens_total`` tokens and ``max_cost_usd`` dollars. Each turn runs with only what is
left as its ``token_budget`` and ``cost_budget_usd``; once a cap is used up the next turn is
refused before anything is sent, with a :class:`SessionCapReached` that names the cap, as a
run's stop cause names the limit that ended it.

A history that ends with an unanswered ``tool_use`` (a run that crashed or was cancelled
mid-call) is repaired before it is sent (:func:`primer.loop.messages.repair_history`). A
turn that paused for approval is resumed from its checkpoint with :meth:`Session.resume`
before the conversation goes on; without a checkpoint nothing of it ran, and the next turn
tells the model so.

A session with a ``store`` (:class:`primer.harness.sessions.store.SessionStore`, SQLite) is
saved after every turn and can be loaded again in another process. Each turn holds the
store's lock on the session (:meth:`SessionSaver.hold`) from before its first model call until
it is saved, so two processes never continue one session at once: the second is refused
before it sends or runs anything. A turn's checkpoint journal is signed with the session's id
and the turn's number, and :meth:`Session.resume` resumes only that turn's journal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

import pydantic

from primer.harness.hooks import Hooks
from primer.harness.summaries import render_lines
from primer.loop.config import AgentConfig
from primer.loop.loop import task_text
from primer.loop.messages import Message, RepairedHistory, history_problem, repair_history
from primer.loop.model import LLM, EventSink, Usage
from primer.loop.result import AgentResult
from primer.loop.state import StopCause
from primer.loop.tools import Tool, ToolRegistry

from ..production import run_production

#: The result text for calls that awaited approval when the conversation went on without it.
NOT_APPROVED_RESULT = ("Not run: this call needed a person's approval and the conversation "
                       "went on without one. It did not run.")


#: The caps a session can have, in the order they are checked: turns, tokens (prompt plus
#: output, as :attr:`~primer.loop.model.Usage.total_tokens` counts them, summed over every
#: turn) and dollars (USD at the config's prices).
SESSION_CAPS = ("max_turns", "max_tokens_total", "max_cost_usd")
_CAP_UNITS = {"max_turns": "turns", "max_tokens_total": "tokens", "max_cost_usd": "USD"}


class SessionError(ValueError):
    """A session cannot do what was asked; the message says why and what to do instead."""


class SessionCapReached(SessionError):
    """A turn was refused because the session has used up one of its caps; nothing was sent.

    ``cap`` names it (one of :data:`SESSION_CAPS`), ``limit`` is its value and ``spent`` what
    the session has used of it (turns; tokens; USD). The message says both, and what to do:
    start a new session, or raise the cap.
    """

    def __init__(self, session_id: str, cap: str, limit: float, spent: float) -> None:
        self.cap, self.limit, self.spent = cap, limit, spent
        used = {"max_turns": f"has had {spent:,.0f} turns",
                "max_tokens_total": f"has used {spent:,.0f} tokens",
                "max_cost_usd": f"has spent {spent:.4f} USD"}[cap]
        limit_text = f"{limit:g}" if cap == "max_cost_usd" else f"{limit:,}"
        super().__init__(f"session {session_id} {used}, its {cap} is {limit_text}; nothing "
                         f"was sent. Start a new session (e.g. from a summary of this one) "
                         f"or raise the cap.")


def cap_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the session cap ``name`` (one of :data:`SESSION_CAPS`), or
    ``None`` when it can: ``max_turns`` and ``max_tokens_total`` are whole numbers above 0,
    ``max_cost_usd`` a finite number of USD above 0; ``None`` is no cap."""
    if value is None:
        return None
    kinds = (int,) if name != "max_cost_usd" else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value < float("inf"):
        what = "a whole number of" if name != "max_cost_usd" else "a number of"
        return f"{name} is {what} {_CAP_UNITS[name]} above 0, or None, not {value!r}"
    return None


N = TypeVar("N", int, float)


class _Cap(Generic[N]):
    """A session cap as an attribute: every value set is checked with :func:`cap_problem`,
    so a cap set after the session was made (``session.max_turns = 5``) is held to what
    :class:`Session` holds its arguments to (``ValueError`` naming the cap)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Cap[N]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> N | None: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> _Cap[N] | N | None:
        if obj is None:
            return self
        value: N | None = getattr(obj, self.slot, None)
        return value

    def __set__(self, obj: object, value: N | None) -> None:
        problem = cap_problem(self.name, value)
        if problem is not None:
            raise ValueError(f"Session: {problem}")
        setattr(obj, self.slot, value)


@dataclass
class Turn:
    """One turn of a session: a user message and the run that answered it.

    ``index`` counts turns from 1. ``stop_cause``, ``stop_detail``, ``final_text`` and
    ``steps`` (model calls) are the run's; ``usage`` and ``cost_usd`` its totals (tokens;
    USD) and ``call_usages`` the usage of each of its model calls. ``session_usage`` and
    ``session_cost_usd`` are the session's running totals through this turn. ``messages``
    is the length of the history after it; ``repaired`` the ids of ``tool_use`` blocks given
    an error result before it was sent; ``checkpoint`` the run's checkpoint journal, if any.
    ``cap`` names the session cap that ended the turn (``"max_tokens_total"`` or
    ``"max_cost_usd"``: its budget was cut to what the session had left and the run stopped
    at it), else ``None``.
    """

    index: int
    task: str
    stop_cause: StopCause
    stop_detail: str
    final_text: str | None
    steps: int
    usage: Usage
    cost_usd: float
    call_usages: list[Usage]
    session_usage: Usage
    session_cost_usd: float
    messages: int
    repaired: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    cap: str | None = None

    @property
    def first_call_input_tokens(self) -> int:
        """Input tokens of the turn's first model call: the history re-sent before anything
        new happens (0 for a turn that made no call)."""
        return self.call_usages[0].input_tokens if self.call_usages else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"index": self.index, "task": self.task, "stop_cause": self.stop_cause.value,
                "stop_detail": self.stop_detail, "final_text": self.final_text,
                "steps": self.steps, "usage": self.usage.to_dict(), "cost_usd": self.cost_usd,
                "call_usages": [u.to_dict() for u in self.call_usages],
                "session_usage": self.session_usage.to_dict(),
                "session_cost_usd": self.session_cost_usd, "messages": self.messages,
                "repaired": self.repaired, "checkpoint": self.checkpoint, "cap": self.cap}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        """Inverse of :meth:`to_dict`; ``KeyError``, ``TypeError`` or ``ValueError`` for a
        malformed dict."""
        cap = d.get("cap")
        if cap is not None and cap not in SESSION_CAPS:
            raise ValueError(f"cap {cap!r} is not one of {', '.join(SESSION_CAPS)}")
        return cls(int(d["index"]), str(d["task"]), StopCause(d["stop_cause"]),
                   str(d["stop_detail"]), d["final_text"], int(d["steps"]),
                   Usage.from_dict(d["usage"]), float(d["cost_usd"]),
                   [Usage.from_dict(u) for u in d["call_usages"]],
                   Usage.from_dict(d["session_usage"]),
                   float(d["session_cost_usd"]), int(d["messages"]),
                   [str(x) for x in d.get("repaired", [])], d.get("checkpoint"), cap)

    def row(self) -> dict[str, Any]:
        """The turn as one table row (see :meth:`Session.table`)."""
        return {"turn": self.index, "steps": self.steps,
                "first call input": self.first_call_input_tokens,
                "turn tokens": self.usage.total_tokens, "turn USD": round(self.cost_usd, 6),
                "session tokens": self.session_usage.total_tokens,
                "session USD": round(self.session_cost_usd, 6),
                "stop cause": self.stop_cause.value}


class SessionSaver(Protocol):
    """Where a session is kept; :meth:`Session.send` holds ``hold`` around every turn and
    calls ``save`` after it."""

    def save(self, session: Session) -> None:
        """Make the session's messages and turns durable (raises ``SessionError``)."""

    def hold(self, session: Session) -> contextlib.AbstractContextManager[None]:
        """The session's lock for one turn: taken before anything is sent, released after
        the save; raises ``SessionError`` (nothing sent) when another process holds it or
        the stored session went on without this copy."""


def new_session_id() -> str:
    """A fresh random session id, e.g. ``session-3fa85f64``."""
    return f"session-{secrets.token_hex(4)}"


class Session:
    """A conversation with the agent that goes on over many turns.

    ``llm``, ``tools``, ``system``, ``config`` and ``hooks`` are what every turn's run gets
    (see :func:`~primer.loop.loop.run_agent`). ``messages`` is an earlier history to continue
    (checked with :func:`~primer.loop.messages.history_problem`: ``ValueError`` if it is
    not one), ``turns`` its turn records, ``session_id`` a name (default: a random one),
    ``store`` where to save it after each turn (or ``None``: kept in memory only).

    Caps on the whole conversation (``None``: no cap; the turns given count too):
    ``max_turns`` turns; ``max_tokens_total`` tokens (prompt plus output, summed over every
    turn); ``max_cost_usd`` USD at the config's prices. Each turn runs with ``token_budget``
    and ``cost_budget_usd`` at most what is left (the turn stops with ``token_budget`` or
    ``cost_budget`` and :attr:`Turn.cap` names the cap; with ``budget_check="after"`` its
    last call can pass what was left). Once a cap is used up, :meth:`send` raises
    :class:`SessionCapReached` before anything is sent; :attr:`cap_reached` names it. The
    caps are attributes: raise one to go on. Raises ``ValueError`` for a cap that is not a
    number above 0 (a whole number for turns and tokens), given here or set later.

    Two copies of one stored session (loaded twice, in one process or two) are one
    conversation: a turn starts only while no other copy is in a turn and only if nothing
    was saved since this copy was loaded or last saved, else :meth:`send` raises
    :class:`SessionError` ("load it again") before anything is sent or run.
    """

    #: Turns the conversation may have (``None``: no cap).
    max_turns: _Cap[int] = _Cap()
    #: Tokens (prompt plus output, every turn's) the conversation may use (``None``: no cap).
    max_tokens_total: _Cap[int] = _Cap()
    #: Dollars (USD) the conversation may spend (``None``: no cap).
    max_cost_usd: _Cap[float] = _Cap()

    def __init__(self, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
                 system: str = "", config: AgentConfig | None = None,
                 hooks: Hooks | Iterable[Hooks] | None = None,
                 messages: Sequence[Message] = (), turns: Sequence[Turn] = (),
                 session_id: str | None = None, store: SessionSaver | None = None,
                 max_turns: int | None = None, max_tokens_total: int | None = None,
                 max_cost_usd: float | None = None) -> None:
        problem = history_problem(messages)
        if problem is not None:
            raise ValueError(f"Session(messages=...): {problem}")
        caps = {"max_turns": max_turns, "max_tokens_total": max_tokens_total,
                "max_cost_usd": max_cost_usd}
        problems = [p for name, value in caps.items() if (p := cap_problem(name, value))]
        if problems:
            raise ValueError("Session: " + "; ".join(problems))
        self.max_turns = max_turns
        self.max_tokens_total = max_tokens_total
        self.max_cost_usd = max_cost_usd
        self.id = session_id or new_session_id()
        self.llm, self.system, self.config = llm, system, config or AgentConfig()
        self.tools = tools if isinstance(tools, ToolRegistry) else list(tools)
        self.hooks = hooks
        self.messages: list[Message] = list(messages)
        self.turns: list[Turn] = list(turns)
        self.store = store
        #: The result of the latest turn's run in this process (``None`` before one).
        self.last_result: AgentResult | None = None

    # -- totals

    @property
    def usage(self) -> Usage:
        """Tokens used by every turn so far (the last turn's running total)."""
        return self.turns[-1].session_usage if self.turns else Usage()

    @property
    def cost_usd(self) -> float:
        """Dollars (USD) spent by every turn so far."""
        return self.turns[-1].session_cost_usd if self.turns else 0.0

    @property
    def caps(self) -> dict[str, float | None]:
        """The session's caps by name (:data:`SESSION_CAPS`), ``None`` for no cap."""
        return {name: getattr(self, name) for name in SESSION_CAPS}

    def spent(self, cap: str) -> float:
        """What the session has used of the cap ``cap`` so far: turns, tokens or USD."""
        return {"max_turns": len(self.turns), "max_tokens_total": self.usage.total_tokens,
                "max_cost_usd": self.cost_usd}[cap]

    @property
    def cap_reached(self) -> str | None:
        """The first cap (in :data:`SESSION_CAPS` order) the session has used up, so that
        the next :meth:`send` is refused; ``None`` while every cap has something left."""
        for name, limit in self.caps.items():
            if limit is not None and self.spent(name) >= limit:
                return name
        return None

    # -- turns

    def send(self, text: str, *, trace: str | os.PathLike[str] | None = None,
             on_event: EventSink | None = None,
             output_model: type[pydantic.BaseModel] | None = None) -> AgentResult:
        """One turn: run the agent on ``text`` after the history, record the turn, save.

        ``trace``, ``on_event`` and ``output_model`` are this turn's (see
        :func:`~primer.loop.loop.run_agent`). Returns the run's :class:`AgentResult`, whose
        ``messages`` become the session's history and whose ``usage`` and ``cost_usd`` are
        this turn's alone; the new :class:`Turn` is ``session.turns[-1]``. If the run raises
        (a scripted model that ran out of replies), the session is left as it was.

        Raises ``ValueError`` for text that is empty or not a string, and
        :class:`SessionError` when the last turn paused for approval with a checkpoint
        (decide its calls, then :meth:`resume` it first; nothing ran), or when the store
        could not save the turn (it stays in this session in memory), and
        :class:`SessionCapReached` when the session has used up a cap (nothing is sent).
        """
        task_text(text)  # the loop's own check, made before anything else
        history = self._history_to_send()
        cap = self.cap_reached
        if cap is not None:
            raise SessionCapReached(self.id, cap, self.caps[cap] or 0, self.spent(cap))
        config = self._turn_config()
        with self._held():
            result = run_production(self.llm, text, self.tools, system=self.system,
                                    config=config,
                                    hooks=self.hooks, on_event=on_event, trace=trace,
                                    output_model=output_model, messages=history.messages,
                                    session=(self.id, len(self.turns) + 1))
            self._record(text, result, history.repaired_ids, self._cap_of(config, result))
        return result

    def resume(self, *, on_event: EventSink | None = None) -> AgentResult:
        """Continue the last turn from its checkpoint after its calls were decided.

        The paused run goes on (:func:`primer.harness.durable.checkpoint.resume`: approved
        calls run, rejected ones are reported to the model), and its outcome replaces the last
        turn's record. It is the same turn, so ``max_turns`` does not count it again, and it
        runs with the budgets it started with, already cut to what the caps left then.

        Raises :class:`SessionError` when the last turn is not paused with a checkpoint, or
        another process is continuing the session, and
        :class:`~primer.harness.durable.keystore.CheckpointError` for an unusable
        checkpoint, or one that is not this session's turn's (its signed header names the
        session and turn it was written for).
        """
        from primer.harness.durable.checkpoint import resume

        last = self.turns[-1] if self.turns else None
        paused = last is not None and last.stop_cause is StopCause.AWAITING_APPROVAL
        if last is None or not paused or not last.checkpoint:
            raise SessionError(f"session {self.id}: the last turn is not paused with a "
                               f"checkpoint; there is nothing to resume")
        with self._held():
            result = resume(last.checkpoint, self.llm, self.tools, on_event=on_event,
                            hooks=self.hooks, session=(self.id, last.index))
            self.turns.pop()
            started_with = self._turn_config(
                last.session_usage.total_tokens - last.usage.total_tokens,
                last.session_cost_usd - last.cost_usd)
            self._record(last.task, result, last.repaired, self._cap_of(started_with, result))
        return result

    def _held(self) -> contextlib.AbstractContextManager[None]:
        """The store's lock on this session for one turn (none for a session in memory)."""
        return self.store.hold(self) if self.store is not None else contextlib.nullcontext()

    def _turn_config(self, tokens_used: int | None = None,
                     usd_used: float | None = None) -> AgentConfig:
        """The config of a turn that starts after the session used ``tokens_used`` tokens and
        ``usd_used`` USD (default: what it has used so far): the session's, its token and
        dollar budgets cut to what is left under ``max_tokens_total`` and ``max_cost_usd``
        (at least 1 token, a tiny amount of USD: :meth:`send` refuses a turn once a cap is
        used up)."""
        tokens_used = self.usage.total_tokens if tokens_used is None else tokens_used
        usd_used = self.cost_usd if usd_used is None else usd_used
        config = self.config
        if self.max_tokens_total is not None:
            left = max(self.max_tokens_total - tokens_used, 1)
            if config.token_budget is None or left < config.token_budget:
                config = dataclasses.replace(config, token_budget=left)
        if self.max_cost_usd is not None:
            left_usd = max(self.max_cost_usd - usd_used, 1e-12)
            if config.cost_budget_usd is None or left_usd < config.cost_budget_usd:
                config = dataclasses.replace(config, cost_budget_usd=left_usd)
        return config

    def _cap_of(self, config: AgentConfig, result: AgentResult) -> str | None:
        """The session cap that ended ``result``, a run with the turn config ``config``: the
        run stopped at a budget that the cap had cut below the session config's."""
        cut = {StopCause.TOKEN_BUDGET: ("max_tokens_total", "token_budget"),
               StopCause.COST_BUDGET: ("max_cost_usd", "cost_budget_usd")}.get(result.stop_cause)
        if cut is None or getattr(self, cut[0]) is None:
            return None
        own, used = getattr(self.config, cut[1]), getattr(config, cut[1])
        return cut[0] if used is not None and (own is None or used < own) else None

    def _history_to_send(self) -> RepairedHistory:
        """The history, repaired for sending."""
        last = self.turns[-1] if self.turns else None
        if last is not None and last.stop_cause is StopCause.AWAITING_APPROVAL:
            if last.checkpoint:
                pending = ", ".join(self._pending())
                raise SessionError(
                    f"session {self.id}: turn {last.index} is paused awaiting approval of "
                    f"{pending or 'a call'}. Decide each call "
                    f"(primer.harness.durable.checkpoint.approve or reject "
                    f"on {last.checkpoint}, or `python -m primer approve`), then call "
                    f"session.resume() before sending the next turn.")
            return repair_history(self.messages, NOT_APPROVED_RESULT)  # nothing of it ran
        return repair_history(self.messages)

    def _pending(self) -> list[str]:
        pending = self.last_result.pending if self.last_result is not None else []
        return [f"{b.get('name')} ({b.get('id')})" for b in pending]

    def _record(self, text: str, result: AgentResult, repaired: list[str],
                cap: str | None = None) -> None:
        before_usage, before_cost = self.usage, self.cost_usd
        turn = Turn(len(self.turns) + 1, text, result.stop_cause, result.stop_detail,
                    result.final_text, len(result.steps), result.usage, result.cost_usd,
                    [s.usage for s in result.steps], before_usage + result.usage,
                    before_cost + result.cost_usd,
                    len(result.messages), repaired, result.checkpoint, cap)
        self.messages = result.messages
        self.turns.append(turn)
        self.last_result = result
        if self.store is not None:
            self.store.save(self)

    # -- reading

    def rows(self) -> list[dict[str, Any]]:
        """One dict per turn (:meth:`Turn.row`), for tables and tests."""
        return [t.row() for t in self.turns]

    def table(self) -> str:
        """The turns as a fixed-width table, then the session's totals (:func:`turns_table`)."""
        return turns_table(self.turns, self.id)

    def transcript(self, chars: int = 100) -> str:
        """The conversation for a person: one line per text, call and result, each text and
        result cut to ``chars`` characters (:func:`~primer.harness.summaries.render_lines`)."""
        return "\n".join(render_lines(self.messages, chars))

    def __repr__(self) -> str:
        return (f"Session({self.id!r}, turns={len(self.turns)}, messages={len(self.messages)}, "
                f"tokens={self.usage.total_tokens})")


def turns_table(turns: Sequence[Turn], session_id: str) -> str:
    """``turns`` as a fixed-width text table, one row per turn (:meth:`Turn.row`), then one
    line of totals for the session ``session_id``."""
    rows = [t.row() for t in turns]
    if not rows:
        return f"session {session_id}: no turns yet"
    heads = list(rows[0])
    widths = [max(len(h), *(len(_cell(r[h])) for r in rows)) for h in heads]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(_cell(r[h]).rjust(w) for h, w in zip(heads, widths, strict=True))
              for r in rows]
    last = turns[-1]
    lines.append(f"session {session_id}: {len(rows)} turns, "
                 f"{last.session_usage.total_tokens:,} tokens, {last.session_cost_usd:.4f} USD")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
