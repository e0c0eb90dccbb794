"""Checkpoints: pause a run for a person's approval, survive the process ending, resume.

When the model asks for a tool marked ``needs_approval``, the loop does not run it. With
``AgentConfig.checkpoint_dir`` set the run keeps a *checkpoint*: a journal per run
(``run-001.jsonl``, ...; the format is in :mod:`primer.harness.durable.journal`) holding everything
needed to continue in another process, hours later: the messages, the config, every call of
the paused reply with its exact ``input``, usage and cost so far, and which demo started the
run (``scenario``), so ``python -m primer resume`` can rebuild its model and tools.

Calls of that reply that need no approval run first, once; their results are recorded.
This module is what a person does next, from any process:

* :func:`read_checkpoint` / :func:`list_checkpoints`: what is waiting (``approvals list``);
* :func:`approve` / :func:`reject` / :func:`edit` / :func:`respond`: a decision keyed by
  ``tool_use`` id, bound to a SHA-256 of the exact input the person saw, of the tool's
  definition and to the approval rules' version, appended to the journal;
* :func:`resume` (from :mod:`primer.harness.durable.resume`): continue the run; undecided
  calls never run, approved ones run with the approved input (an edited one with the
  person's input), rejected ones reach the model as an error, answered ones with the
  person's text; a decision made on another tool definition or other rules is refused.

Crash safety: before a side-effecting call runs, the journal records it ``started`` with its
idempotency key (derived from its ``tool_use`` id), and ``done`` with its result after, both
on disk before the loop goes on. A call found ``started`` with no result is re-sent with the
same key if its tool takes one, and otherwise not re-run blind. Decisions and resumes of one
journal are serialised with an advisory file lock (``fcntl.flock``, released by the OS if the
process dies).

Bad input gets a :class:`CheckpointError` naming the problem, and nothing runs: a file that
is missing, torn in its first line, not a journal, from a newer format version, edited,
reordered, forged or cut in the middle (its signatures fail), or a decision for a
``tool_use`` id that is not waiting.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.harness.files import UnreadableFile, read_bounded
from primer.loop.schema import SchemaCheck
from primer.loop.text import json_problem

from .journal import (
    DECISION_ACTIONS,
    FORMAT_VERSION,
    CheckpointError,
    expired,
    input_sha256,
    read_journal,
)
from .recorder import JournalRecorder
from .resume import resume

__all__ = ["FORMAT_VERSION", "ApprovalDesk", "CheckpointError", "CheckpointInfo", "approve",
           "checkpoint_info", "decision_terms", "decision_verb", "describe_decision", "edit",
           "login_name", "input_sha256", "list_checkpoints", "read_checkpoint", "reject",
           "respond", "resume"]


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read, verify and replay a checkpoint journal; returns what it holds as one dict.

    The keys are those of :meth:`primer.harness.durable.journal.Journal.view`: ``status``
    (``running`` / ``awaiting_approval`` / ``finished``), ``messages``, ``steps``, ``usage``,
    ``cost_usd``, ``calls`` (the paused reply's calls: ``tool_use_id``, ``name``, ``input``,
    ``needs_approval``, ``side_effecting``, ``state``, ``idempotency_key``, ``decision``,
    ``result``), ``result``, ``scenario``, ``notes``, ... Raises :class:`CheckpointError`
    for a file that cannot be used (see :func:`~primer.harness.durable.journal.read_journal`).
    """
    return read_journal(path).view()


# ---------------------------------------------------------------- decisions


def approve(path: str | Path, tool_use_id: str, note: str = "", *, approver: str | None = None,
            expires_at: datetime | None = None) -> dict[str, Any]:
    """Record a person's yes for the call ``tool_use_id`` of the checkpoint at ``path``.

    The decision stores a SHA-256 of the call's input, so only those exact arguments can
    run; who approved (``approver``, default the login name of this process), the time
    (UTC) and, if given, ``expires_at`` (a timezone-aware datetime): :func:`resume` refuses
    to run the call once that time has passed, and a new decision may then be recorded.
    Approving twice is a no-op; approving a rejected call raises. Returns the call's record
    (``tool_use_id``, ``name``, ``input``, ``decision``, ...). Nothing runs until
    :func:`resume`. Raises :class:`CheckpointError` for an unknown ``tool_use_id``, a
    finished run or a bad file, ``ValueError`` for an empty ``approver`` or an
    ``expires_at`` without a timezone or not in the future.
    """
    return _decide(path, tool_use_id, "approve", note, approver, expires_at)


def reject(path: str | Path, tool_use_id: str, note: str = "", *,
           approver: str | None = None) -> dict[str, Any]:
    """Record a person's no for the call ``tool_use_id``; the ``note`` reaches the model.

    Same checks, ``approver`` and return value as :func:`approve` (a rejection never
    expires).
    """
    return _decide(path, tool_use_id, "reject", note, approver, None)


def edit(path: str | Path, tool_use_id: str, new_input: dict[str, Any], note: str = "", *,
         approver: str | None = None, expires_at: datetime | None = None) -> dict[str, Any]:
    """Approve the call ``tool_use_id`` with ``new_input`` in place of the model's input.

    ``new_input`` is checked against the tool's ``input_schema`` as the run offered it (and
    again against the live tool at :func:`resume`); the decision stores the SHA-256 of the
    input the person saw and of ``new_input``, so only that input can run. The model is
    told a person changed the input. Same checks, ``approver``, ``expires_at`` and return
    value as :func:`approve`; ``ValueError`` for input the schema refuses or that is not
    plain JSON (NaN, infinities, integers past the limit), before anything is written.
    """
    problem = json_problem(new_input, text=True)
    if problem is not None:
        raise ValueError(f"the edited input is not plain JSON ({problem}); nothing was "
                         f"recorded. Give numbers as finite decimals, e.g. 40.0")
    return _decide(path, tool_use_id, "edit", note, approver, expires_at, new_input)


def respond(path: str | Path, tool_use_id: str, text: str, *,
            approver: str | None = None) -> dict[str, Any]:
    """Answer the call ``tool_use_id`` with a person's ``text``: the tool never runs, and
    ``text`` goes back to the model as the call's ``tool_result``. Same checks, ``approver``
    and return value as :func:`reject`; ``ValueError`` for blank ``text``."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("respond needs the person's text, which the model reads as the "
                         "call's result")
    return _decide(path, tool_use_id, "respond", text, approver, None)


def login_name() -> str:
    """The login name of this process (``getpass.getuser()``), or ``""`` if it has none."""
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return ""


_NO_EDIT = object()


def _decide(path: str | Path, tool_use_id: str, action: str, note: str,
            approver: str | None, expires_at: datetime | None,
            edited_input: Any = _NO_EDIT) -> dict[str, Any]:
    assert action in DECISION_ACTIONS
    approved = action in ("approve", "edit")
    who = login_name() if approver is None else approver
    if approver is not None and (not isinstance(approver, str) or not approver.strip()
                                 or not approver.isprintable()):
        raise ValueError(f"approver must be a person's name on one line (no control "
                         f"characters), not {approver!r}")
    now = datetime.now(timezone.utc)
    if expires_at is not None:
        if not isinstance(expires_at, datetime) or expires_at.tzinfo is None:
            raise ValueError(f"expires_at must be a timezone-aware datetime (UTC), not "
                             f"{expires_at!r}")
        if expires_at <= now:
            raise ValueError(f"expires_at {expires_at.isoformat()} is not in the future")
    recorder, journal = JournalRecorder.reopen(path)
    try:
        if journal.status == "finished":
            raise CheckpointError(f"{journal.path}: the run has already finished; there is "
                                  f"nothing to {action}.")
        gated = [c for c in journal.calls.values() if c.needs_approval and c.state != "done"]
        call = next((c for c in gated if c.tool_use_id == tool_use_id), None)
        if call is None:
            known = ", ".join(f"{c.tool_use_id} ({c.name})" for c in gated) or "none"
            raise CheckpointError(f"{journal.path}: no call with tool_use_id {tool_use_id!r} "
                                  f"awaits a decision. Calls awaiting approval here: {known}.")
        if action == "edit":
            _check_edit(journal.path, journal.header["tools"], call.name, edited_input)
        old = call.decision
        if old is not None and not (old["approved"] and call.state != "started"
                                    and _expired(journal.path, old, now)):
            if old["action"] == action and (action != "edit" or old.get("edited_sha256")
                                            == input_sha256(edited_input)):
                return call.to_dict()  # the same answer twice is a no-op
            raise CheckpointError(
                f"{journal.path}: call {tool_use_id} ({call.name}) was already "
                f"{decision_verb(old)}; a decision cannot be changed. Start a new run to ask "
                f"again.")
        call.decision = recorder.decided(
            tool_use_id, approved, note, input_sha256(call.input), approver=who,
            expires_at=expires_at, action=action,
            edited_input=edited_input if action == "edit" else None,
            tool_sha256=call.tool_sha256, rules_version=call.rules_version)
        return call.to_dict()
    finally:
        recorder.close()


def _check_edit(path: Path, tools: list[dict[str, Any]], name: str, new_input: Any) -> None:
    """Refuse (``ValueError``) an edited input that the tool's ``input_schema``, as the run
    offered it, does not accept."""
    definition = next((t for t in tools if isinstance(t, dict) and t.get("name") == name), None)
    if definition is None or not isinstance(definition.get("input_schema"), dict):
        raise CheckpointError(f"{path}: the run did not offer a tool named {name!r}, so an "
                              f"edit of its input cannot be checked. Nothing was recorded.")
    if type(new_input) is not dict:
        raise ValueError(f"the edited input for {name} must be a JSON object of its "
                         f"arguments, not {type(new_input).__name__}. Nothing was recorded.")
    problems = SchemaCheck(definition["input_schema"]).problems(new_input)
    if problems:
        raise ValueError(f"the edited input for {name} does not fit its input_schema: "
                         f"{'; '.join(problems)}. Nothing was recorded.")


def _expired(path: Path, decision: dict[str, Any], now: datetime) -> bool:
    try:
        return expired(decision, now)
    except ValueError as e:
        raise CheckpointError(f"{path}: a decision's expiry is not a time ({e}).") from None


def describe_decision(decision: dict[str, Any] | None) -> str:
    """One line for a person: ``approved by alice at 2026-12-01T13:40:00+00:00, expires
    ..., note: ...``, or ``undecided``."""
    if decision is None:
        return "undecided"
    return f"{decision_verb(decision)} {decision_terms(decision)}"


#: The past tense of each decision, for one-line reports.
DECIDED = {"approve": "approved", "reject": "rejected", "edit": "edited",
           "respond": "answered"}


def decision_verb(decision: dict[str, Any]) -> str:
    """What a person did, in words: ``approved``, ``rejected``, ``approved with the input
    changed to {...}`` or ``answered in the tool's place``."""
    action = decision.get("action") or ("approve" if decision["approved"] else "reject")
    if action == "edit":
        changed = json.dumps(decision.get("edited_input"), ensure_ascii=False, sort_keys=True)
        return f"approved with the input changed to {changed}"
    return {"approve": "approved", "reject": "rejected",
            "respond": "answered in the tool's place"}[action]


def decision_terms(decision: dict[str, Any]) -> str:
    """Who decided, when (UTC), until when and the note: ``by alice at ..., note: ...``."""
    line = f"by {decision.get('approver') or 'an unrecorded approver'}"
    line += f" at {decision['at']}" if decision.get("at") else ""
    line += f", expires {decision['expires_at']}" if decision.get("expires_at") else ""
    return line + (f", note: {decision['note']}" if decision["note"] else "")


# ---------------------------------------------------------------- listing


@dataclass
class CheckpointInfo:
    """One checkpoint file as ``approvals list`` shows it.

    ``status`` is ``running`` / ``awaiting_approval`` / ``cancelled`` / ``finished``, or
    ``invalid`` with ``error`` saying why. ``calls`` are the records of calls awaiting a
    decision or a run (with the ``reason`` a person is needed, when the gate gave one).
    """

    path: Path
    status: str
    run_id: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    error: str = ""

    def describe(self) -> str:
        """A few lines for a person: the file, its status, each gated call and decision."""
        if self.status == "invalid":
            return f"{self.path.name}: INVALID: {self.error}"
        lines = [f"{self.path.name}: {self.status}" + (f" - {self.summary}" if self.summary
                                                       else "")]
        for c in self.calls:
            verdict = describe_decision(c["decision"])
            args = json.dumps(c["input"], ensure_ascii=False, sort_keys=True)
            why = f" (why a person: {c['reason']})" if c.get("reason") else ""
            lines.append(f"  {c['tool_use_id']}  {c['name']}({args})  {verdict}{why}")
        return "\n".join(lines)


def list_checkpoints(directory: str | Path) -> list[CheckpointInfo]:
    """Every checkpoint (``*.jsonl``, and older ``*.json``) in ``directory``, sorted by
    name; bad files as ``invalid``.

    ``directory`` may also be one checkpoint file: the list then holds that file alone.
    Raises :class:`CheckpointError` when ``directory`` does not exist.
    """
    directory = Path(directory)
    if directory.is_file():
        return [checkpoint_info(directory)]
    if not directory.is_dir():
        if directory.exists():  # a FIFO, a device, a socket: what it is, not "missing"
            try:
                read_bounded(directory, limit=0)
            except UnreadableFile as e:
                raise CheckpointError(f"{directory}: {e.reason}; give a directory of "
                                      f"checkpoints or one checkpoint file") from None
        raise CheckpointError(f"{directory}: no such directory of checkpoints (or "
                              f"checkpoint file)")
    files = [*directory.glob("*.jsonl"), *directory.glob("*.json")]
    return [checkpoint_info(p) for p in sorted(files)]


def checkpoint_info(path: str | Path) -> CheckpointInfo:
    """One checkpoint file as :class:`CheckpointInfo`; a bad file is ``invalid``, not raised."""
    p = Path(path)
    try:
        journal = read_journal(p)
    except CheckpointError as e:
        return CheckpointInfo(p, "invalid", error=str(e).removeprefix(f"{p}: ")
                              .removeprefix(f"{p}, "))
    gated = [c.to_dict() for c in journal.calls.values()
             if c.needs_approval and c.state != "done"]
    summary = ((journal.result or {}).get("summary", "")
               if journal.status in ("finished", "cancelled") else "")
    return CheckpointInfo(p, journal.status, journal.run_id, gated, summary)


# ---------------------------------------------------------------- the approval desk


@dataclass
class ApprovalDesk:
    """Approve / Reject for one paused call, as a plain object (notebook buttons call it).

    ``checkpoint`` is the file, ``tool_use_id`` the call, ``note``, ``approver`` and
    ``expires_at`` what the next decision carries (see :func:`approve`). :meth:`approve`,
    :meth:`reject`, :meth:`edit` and :meth:`respond` record the decision and return (and keep in
    ``status``) one line saying what happened; a bad file or id becomes that line, starting
    with ``"error: "``, rather than an exception, so a button never fails silently.
    """

    checkpoint: str | Path
    tool_use_id: str
    note: str = ""
    status: str = ""
    approver: str | None = None
    expires_at: datetime | None = None

    def describe(self) -> str:
        """The call as the person sees it: tool, exact arguments, decision so far."""
        try:
            data = read_checkpoint(self.checkpoint)
        except CheckpointError as e:
            return f"error: {e}"
        call = next((c for c in data["calls"] if c["tool_use_id"] == self.tool_use_id), None)
        if call is None:
            return f"{self.tool_use_id}: nothing awaits a decision (run {data['status']})"
        verdict = describe_decision(call["decision"])
        return (f"{call['name']}({json.dumps(call['input'], ensure_ascii=False, sort_keys=True)})"
                f" - {verdict}")

    def approve(self) -> str:
        """Record a yes (with ``note``, ``approver``, ``expires_at``); returns the status
        line."""
        return self._decide(lambda: approve(self.checkpoint, self.tool_use_id, self.note,
                                            approver=self.approver,
                                            expires_at=self.expires_at))

    def reject(self) -> str:
        """Record a no (with ``note``, which the model will read); returns the status line."""
        return self._decide(lambda: reject(self.checkpoint, self.tool_use_id, self.note,
                                           approver=self.approver))

    def edit(self, new_input: dict[str, Any]) -> str:
        """Record a yes for ``new_input`` in place of the model's (see :func:`edit`); returns
        the status line."""
        return self._decide(lambda: edit(self.checkpoint, self.tool_use_id, new_input,
                                         self.note, approver=self.approver,
                                         expires_at=self.expires_at))

    def respond(self, text: str) -> str:
        """Answer the call with ``text`` instead of running it (see :func:`respond`);
        returns the status line."""
        return self._decide(lambda: respond(self.checkpoint, self.tool_use_id, text,
                                            approver=self.approver))

    def _decide(self, decide: Callable[[], dict[str, Any]]) -> str:
        try:
            call = decide()
        except (CheckpointError, ValueError) as e:
            self.status = f"error: {e}"
            return self.status
        d = call["decision"]
        self.status = (f"{DECIDED[d['action']]} {call['name']} ({call['tool_use_id']}) "
                       f"{decision_terms(d)}")
        return self.status
