"""Checkpoint journals: one run's progress as an append-only, signed JSON Lines file.

A run with ``AgentConfig.checkpoint_dir`` writes ``run-001.jsonl`` (``run-002.jsonl``, ...)
there the first time it has something that must survive the process: a pause for a
person's approval, or a side-effecting call about to run. From then on each fixed point of
the loop appends one line holding only what is new. Reading the file replays the lines into
the run's state (:func:`read_journal`); :mod:`primer.harness.durable.resume` continues from it.

The format (``primer-checkpoint``, version :data:`FORMAT_VERSION`)
-----------------------------------------------------------------
Every line is one JSON object with a ``type`` and, last, a ``mac`` (see *Integrity*):

``header`` (always the first line)
    ``format``, ``version``, ``run_id``, ``system`` (the system prompt), ``config`` (every
    :class:`~primer.loop.config.AgentConfig` setting), ``tools`` (the definitions offered),
    ``journal_id`` (random; names the journal's anchor and so is the run's identity
    wherever the file lies), if known ``scenario`` (the demo that started the run) and, for
    a session's turn, ``session`` (``{"id", "turn"}``: the only turn that may resume it).
``state``
    ``state``: the whole run so far (:meth:`RunState.to_dict`): the second line, and again
    after a compaction rewrote the message list.
``started`` / ``done`` (fsynced)
    a side-effecting call about to run (``tool_use_id``, ``name``, its ``idempotency_key``),
    written *before* it runs; a recorded call that finished (``execution``: its result).
``results``
    the reply's results were appended, in one user message.
``pause`` (fsynced)
    the run paused for approval on the last reply's ``calls`` (``tool_use_id``, ``name``,
    ``input``, ``needs_approval`` and its ``reason``: the gate's answer, asked once, which a
    resume keeps; ``side_effecting`` as the run saw it, shown only; ``tool_sha256``, a hash
    of the tool's definition, and ``rules_version``, the version of the approval rules that
    gate it: a decision holds only while both are unchanged). A resume may pause again; a
    call's decision carries over only if its tool and rules are still those it was made on.
``decision`` (fsynced)
    a person's decision for ``tool_use_id``: ``action`` (``approve``, ``reject``, ``edit``:
    run with ``edited_input`` instead, whose hash is ``edited_sha256``; or ``respond``: the
    ``note`` is the call's result and the tool does not run), ``approved`` (whether the tool
    may run), the ``note``, the ``input_sha256`` of the exact input the person saw, the
    ``tool_sha256`` and ``rules_version`` of the pause they decided on, who decided
    (``approver``), ``at`` (UTC time) and, for an approval, an optional ``expires_at`` (UTC
    time; past it, resume refuses to run the call and a new decision may be recorded).
``stop`` (fsynced)
    ``stop_cause``, ``stop_detail``, ``summary``, ``final_text``. After an
    ``awaiting_approval`` or ``cancelled`` stop the run may go on: a resume appends to the
    same file.

Any line but ``header`` and ``decision`` may carry what the run gained since the line before:
``messages`` (appended), ``executions`` (added to the last step), ``steps`` (new steps) and
``totals`` (:meth:`RunState.totals`), so writing costs the same at step 300 as at step 3.

Integrity. Each line's ``mac`` is an HMAC-SHA256, chained: it signs the line's text together
with the previous line's ``mac``, under a key that lives outside the checkpoint directory
(``$PRIMER_CHECKPOINT_KEY``, else a key file created with mode 0600 on first use, see
:func:`checkpoint_key`). An edited, reordered, forged or cut-in-the-middle file, or one
signed with another key, is refused with a :class:`CheckpointError`. A last line with no
newline is one the process was killed while writing: it is dropped with a note and every
line before it is kept (and cut off before the next append). A file becomes visible only
once its first lines are complete and on disk, so a kill during the first write leaves no
file at all (nor a temporary one, on Linux).

What the signatures cannot see is a file cut short at a line boundary: that reads like a
crash there. So after each fsynced line the writer records the journal's length and last
signature outside the checkpoint directory, beside the key (its *anchor*, see
:mod:`primer.harness.durable.keystore`), and a journal that ends before its anchor is refused. Lines
that are not fsynced (``results``) can still be lost, as to a power cut: a resume then runs
that reply's read-only calls again, and side effects keep their recorded outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.harness.files import UnreadableFile, read_bounded
from primer.loop.messages import tool_uses_of
from primer.loop.schema_safety import import_jsonschema
from primer.loop.state import canonical_call
from primer.loop.text import JSONRefused, parse_json

from .keystore import (
    KEY_ENV,
    KEY_FILE_ENV,
    KEY_SOURCES,
    CheckpointError,
    checkpoint_key,
    key_file_path,
    read_anchor,
)

__all__ = ["DECISION_ACTIONS", "FORMAT_NAME", "FORMAT_VERSION", "KEY_ENV", "KEY_FILE_ENV",
           "RECORD_SCHEMAS", "CallRecord", "CheckpointError", "Journal", "checkpoint_key",
           "decision_holds", "definition_sha256", "expired", "input_sha256", "key_file_path",
           "read_journal", "signed_lines", "utc_time"]

FORMAT_NAME = "primer-checkpoint"
#: The format this module writes (1 was a single JSON file; 2 kept the harness's verdicts on
#: a reply, where 3 keeps them on its step); any other version is refused.
FORMAT_VERSION = 3

#: Stop causes after which a journal is not finished: resume continues the run (its status
#: is the cause's name).
RESUMABLE_STOPS = ("awaiting_approval", "cancelled")


def input_sha256(value: Any) -> str:
    """SHA-256 (hex) of a call's input as canonical JSON (sorted keys, no spaces).

    Stored with a decision, so the arguments that run are provably the ones approved.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate (never in a model's input, which the loop refuses; but
    # possibly in a file name) hashes to its own digest instead of failing
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def definition_sha256(definition: Any) -> str:
    """SHA-256 (hex) of a tool's definition (``{"name", "description", "input_schema"}``),
    as :func:`input_sha256` hashes an input: what a pause records, so a decision made on one
    definition is not carried out under another."""
    return input_sha256(definition)


def utc_time(text: str | None) -> datetime | None:
    """An ISO 8601 time from a decision line (``at``, ``expires_at``) as an aware UTC
    datetime; ``None`` stays ``None``. Raises ``ValueError`` for text that is not a time
    with a UTC offset."""
    if text is None:
        return None
    t = datetime.fromisoformat(text)
    if t.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return t.astimezone(timezone.utc)


def decision_holds(decision: dict[str, Any], call: CallRecord) -> bool:
    """Whether ``decision`` was made on the tool definition and approval rules ``call``
    (a pause's record of it) now names: a decision never carries over to a changed tool or
    to other rules."""
    return (decision.get("tool_sha256") == call.tool_sha256
            and decision.get("rules_version") == call.rules_version)


def expired(decision: dict[str, Any], now: datetime) -> bool:
    """Whether an approval is past its ``expires_at`` at ``now`` (aware datetime); a
    decision without an expiry never expires. Raises ``ValueError`` for a malformed time."""
    ends = utc_time(decision.get("expires_at"))
    return ends is not None and now >= ends


# ---------------------------------------------------------------- signed lines

_MAC_HEAD = b', "mac": "'
_MAC_LEN = len(_MAC_HEAD) + 64 + 2  # the suffix: , "mac": "<64 hex>"}
_ENCODER = json.JSONEncoder(ensure_ascii=False)  # ", " and ": ", as json.dumps writes


def _mac(key: bytes, previous: bytes, body: bytes) -> bytes:
    return hmac.new(key, previous + b"\n" + body, hashlib.sha256).hexdigest().encode()


def signed_lines(records: list[dict[str, Any]], key: bytes,
                 previous: bytes) -> tuple[bytes, bytes]:
    """``records`` as journal lines, each signed after ``previous`` (the last line's mac, or
    :data:`FORMAT_NAME` for the first line): ``(bytes to append, the last mac)``."""
    out = []
    for record in records:
        # a lone surrogate (a file name decoded with os.fsdecode) is written as \\udcXX
        body = _ENCODER.encode(record).encode("utf-8", "backslashreplace")
        previous = _mac(key, previous, body)
        out.append(body[:-1] + _MAC_HEAD + previous + b'"}\n')
    return b"".join(out), previous


def verified_line(line: bytes, key: bytes, previous: bytes) -> tuple[bytes, bytes] | None:
    """``(body, mac)`` of a line (without its newline) that :func:`signed_lines` signed with
    ``key`` after ``previous``, else ``None``."""
    if len(line) <= _MAC_LEN or line[-_MAC_LEN:-66] != _MAC_HEAD or not line.endswith(b'"}'):
        return None
    mac = line[-66:-2]
    body = line[:-_MAC_LEN] + b"}"
    return (body, mac) if hmac.compare_digest(mac, _mac(key, previous, body)) else None


# ---------------------------------------------------------------- what a journal says


@dataclass
class CallRecord:
    """One call of the last reply as the journal knows it (what a person and resume see).

    ``state`` is ``waiting`` → ``started`` → ``done``; ``needs_approval`` and its
    ``reason`` are the gate's recorded answer, ``side_effecting`` as the run saw it when it
    paused (shown, never trusted); ``tool_sha256`` and ``rules_version`` what the tool's
    definition and approval rules were then; ``decision`` is ``{"action", "approved",
    "note", "input_sha256", "edited_input", "edited_sha256", "tool_sha256", "rules_version",
    "approver", "at", "expires_at"}`` (times as ISO 8601 UTC strings; ``approver`` ``""``
    and the others ``None`` when a line does not record them) or ``None``; ``result`` the
    execution dict once ``done``.
    """

    tool_use_id: str
    name: str
    input: Any
    needs_approval: bool = False
    side_effecting: bool = False
    state: str = "waiting"
    idempotency_key: str | None = None
    decision: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    reason: str = ""
    tool_sha256: str | None = None
    rules_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass
class Journal:
    """A journal read back and replayed (:func:`read_journal`).

    ``header`` is the first line; ``state`` the run in :meth:`RunState.to_dict` form;
    ``calls`` the last reply's recorded calls by ``tool_use_id`` (when it paused or died
    with calls in flight); ``status`` is ``running``, ``awaiting_approval``, ``cancelled``
    (stopped by the caller's cancel signal, every call answered: resume continues it) or
    ``finished``; ``result`` the ``stop`` line's fields once it stopped; ``notes`` what the
    reader left out (a torn last line). ``size`` is the length in bytes of the verified
    lines, ``mac`` the last line's mac (where an append continues the chain).
    """

    path: Path
    header: dict[str, Any]
    state: dict[str, Any]
    calls: dict[str, CallRecord] = field(default_factory=dict)
    status: str = "running"
    result: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    size: int = 0
    mac: bytes = FORMAT_NAME.encode()

    @property
    def run_id(self) -> str:
        """The run's id (``run-001``)."""
        return str(self.header["run_id"])

    def view(self) -> dict[str, Any]:
        """Everything in one JSON-ready dict: ``format``, ``version``, ``run_id``,
        ``status``, ``system``, ``config``, ``tools``, ``messages``, ``steps``, ``usage``,
        ``cost_usd``, ``prompt_estimate``, ``repeat_counts``, ``recent_errors``, ``calls``
        (in request order), ``result``, ``notes`` and ``scenario`` when recorded."""
        counts: dict[str, int] = {}
        if self.header["config"].get("repeat_threshold") is not None:
            for s in self.state["steps"]:
                for b in tool_uses_of(s["reply"]["content"]):  # the dicts typed tool_use
                    key = canonical_call(b)
                    counts[key] = counts.get(key, 0) + 1
        out = {k: self.header[k] for k in ("format", "version", "run_id")}
        out.update(status=self.status, system=self.header["system"],
                   config=self.header["config"], tools=self.header["tools"],
                   messages=self.state["messages"], steps=self.state["steps"],
                   usage=self.state["usage"], cost_usd=self.state["cost_usd"],
                   prompt_estimate=self.state["prompt_estimate"], repeat_counts=counts,
                   recent_errors=self.state["recent_errors"],
                   calls=[c.to_dict() for c in self.calls.values()], result=self.result,
                   notes=self.notes)
        if self.header.get("scenario"):
            out["scenario"] = self.header["scenario"]
        return out

    # -- replaying one line

    def apply(self, r: dict[str, Any]) -> None:
        """Replay one record (already verified and checked against its schema)."""
        kind = r["type"]
        if kind == "state":
            self.state = r["state"]
        self._apply_delta(r)
        if kind == "pause":  # (a resume may pause again: what is known of a call stays)
            calls = {c["tool_use_id"]: CallRecord(**c) for c in r["calls"]}
            for call_id, old in self.calls.items():
                if call_id in calls:
                    new = calls[call_id]
                    new.state, new.idempotency_key = old.state, old.idempotency_key
                    new.result = old.result
                    if old.decision is not None and decision_holds(old.decision, new):
                        new.decision = old.decision  # (made on a tool and rules now changed: void)
            self.calls, self.status = calls, "awaiting_approval"
        elif kind in ("started", "done"):
            call = self.calls.get(r["tool_use_id"]) or self._call_of_reply(r["tool_use_id"])
            if kind == "started":
                call.state, call.idempotency_key = "started", r["idempotency_key"]
            else:
                call.state, call.result = "done", r["execution"]
            self.calls[call.tool_use_id] = call
        elif kind == "decision":  # the latest line wins (a new one only after an expiry)
            self.calls[r["tool_use_id"]].decision = {
                "action": r.get("action") or ("approve" if r["approved"] else "reject"),
                **{k: r[k] for k in ("approved", "note", "input_sha256")},
                **{k: r.get(k) for k in ("edited_input", "edited_sha256", "tool_sha256",
                                         "rules_version")},
                "approver": r.get("approver", ""), "at": r.get("at"),
                "expires_at": r.get("expires_at")}
        elif kind == "results":
            self.calls, self.status = {}, "running"
        elif kind == "stop":
            self.result = {k: r[k] for k in ("stop_cause", "stop_detail", "summary",
                                             "final_text")}
            self.status = (r["stop_cause"] if r["stop_cause"] in RESUMABLE_STOPS
                           else "finished")

    def _apply_delta(self, r: dict[str, Any]) -> None:
        s = self.state
        s["messages"].extend(r.get("messages", ()))
        if r.get("executions"):
            s["steps"][-1]["executions"].extend(r["executions"])
        if r.get("steps"):
            s["steps"].extend(r["steps"])
            self.calls = {}  # a new reply: its calls start unrecorded
        if "totals" in r:
            s.update(r["totals"])

    def _call_of_reply(self, tool_use_id: str) -> CallRecord:
        for b in self.state["steps"][-1]["reply"]["content"] if self.state["steps"] else []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") == tool_use_id:
                return CallRecord(tool_use_id, str(b.get("name")), b.get("input"))
        raise ValueError(f"call {tool_use_id} is not in the last reply")


# ---------------------------------------------------------------- reading


def read_journal(path: str | Path, key: bytes | None = None) -> Journal:
    """Read, verify and replay the journal at ``path``.

    Raises :class:`CheckpointError` when the file is missing or unreadable, is not a
    journal (or an older single-file checkpoint), was written by a newer format version,
    has a line whose signature does not match (edited, reordered, cut in the middle, forged,
    or signed with another key), or holds a record that breaks :data:`RECORD_SCHEMAS` or
    contradicts the lines before it. A torn last line is dropped with a note.
    """
    path = Path(path)
    try:
        data = read_bounded(path)
    except UnreadableFile as e:
        if e.missing:
            raise CheckpointError(f"{path}: no such checkpoint file. List the checkpoints of "
                                  f"a directory with `python -m primer approvals list DIR`.") \
                from None
        raise CheckpointError(f"{path}: {e.reason}; a checkpoint is a run-NNN.jsonl file. "
                              f"Nothing was run.") from None
    if not data:
        raise CheckpointError(f"{path}: the file is empty: not a checkpoint (a run that was "
                              f"killed before its first line leaves no file). Nothing was run.")
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline, as a complete one does
    notes = []
    if torn:
        if not lines:
            raise CheckpointError(f"{path}: its first line is incomplete: the file is truncated "
                                  f"or corrupt. Nothing was run. Restore it from a copy, or "
                                  f"start the task again.")
        notes.append(f"line {len(lines) + 1} is torn (the process was killed while writing "
                     f"it); kept the {len(lines)} lines before it")
    header = _header(path, lines[0])
    key = key if key is not None else checkpoint_key(path.parent)
    journal = Journal(path, header, {"messages": [], "steps": []}, notes=notes)
    previous = FORMAT_NAME.encode()
    ends: dict[int, bytes] = {}  # byte offset just past each verified line -> its mac
    for n, line in enumerate(lines, start=1):
        verified = verified_line(line, key, previous)
        if verified is None:
            raise CheckpointError(
                f"{path}, line {n}: the line does not match its signature: the journal was "
                f"edited, reordered or cut in the middle, or signed with another key (this "
                f"machine's: {KEY_SOURCES}). A "
                f"checkpoint is never edited by hand; record decisions with `python -m primer "
                f"approve`. Nothing was run.")
        body, previous = verified
        try:
            record = parse_json(body)
        except JSONRefused as e:  # signed, yet unreadable: written by a broken writer
            raise CheckpointError(f"{path}, line {n}: {e.reason}. Nothing was run.") from None
        _check_record(path, n, record)
        try:
            journal.apply(record)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"{path}, line {n}: a {record['type']!r} record that does "
                                  f"not fit the lines before it ({type(e).__name__}: {e}). "
                                  f"Nothing was run.") from None
        journal.size += len(line) + 1
        ends[journal.size] = previous
    journal.mac = previous
    if len(lines) < 2:
        raise CheckpointError(f"{path}: the journal holds a header and nothing else; it is "
                              f"not a run that can be resumed. Nothing was run.")
    _check_anchor(journal, ends)
    return journal


def _check_anchor(journal: Journal, ends: dict[int, bytes]) -> None:
    """Refuse a journal that ends before its last durable line (see
    :mod:`primer.harness.durable.keystore`); note one this machine has no anchor for."""
    journal_id = journal.header.get("journal_id")
    if journal_id is None:
        return  # written before journals had ids
    anchor = read_anchor(journal_id)
    if anchor is None:
        journal.notes.append("no record of where this journal ended is kept for it here (it "
                             "was written on another machine, or its anchor was removed), "
                             "so a cut-off end could not be noticed")
        return
    size, mac = anchor
    if ends.get(size) != mac:
        raise CheckpointError(
            f"{journal.path}: the journal ends before its last line that was on disk: it is "
            f"an older copy of run {journal.run_id} (journal {journal_id}), which went on "
            f"after this copy was made (to byte {size:,}; this copy has {journal.size:,} "
            f"bytes), or its end was cut off, which a crash cannot do. Resuming it could run "
            f"again a side effect the run already finished, so it is refused wherever the "
            f"copy lies. Resume the run's latest journal, or start the task again. Nothing "
            f"was run.")


def _header(path: Path, line: bytes) -> dict[str, Any]:
    """The first line, checked for format and version before any signature is trusted."""
    try:
        first = parse_json(line)
    except JSONRefused as e:
        if line.strip() == b"{":  # format 1: one indented JSON document
            raise CheckpointError(f"{path}: a checkpoint of format version 1 (one JSON file); "
                                  f"this primer reads version {FORMAT_VERSION} journals "
                                  f"(run-NNN.jsonl). Finish that run with the primer that wrote "
                                  f"it. Nothing was run.") from None
        raise CheckpointError(f"{path}, line 1: {e.reason}; the file is truncated or corrupt. "
                              f"Nothing was run. Restore it from a copy, or start the task "
                              f"again.") from None
    if not isinstance(first, dict) or first.get("type") != "header" \
            or first.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{path}: not a primer checkpoint (its first line is not a "
                              f"{FORMAT_NAME!r} header). Nothing was run.")
    version = first.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: written in checkpoint format version {version!r}, but this primer reads "
            f"versions up to {FORMAT_VERSION}. Upgrade primer to resume it. Nothing was run.")
    if version < FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: written in checkpoint format version {version}; this primer reads version "
            f"{FORMAT_VERSION}. Finish that run with the primer that wrote it. Nothing was run.")
    return first


# ---------------------------------------------------------------- record schemas

_DELTA = {"messages": {"type": "array", "items": {
              "type": "object", "required": ["role", "content"],
              "properties": {"role": {"enum": ["user", "assistant"]},
                             "content": {"type": ["string", "array"]}}}},
          "executions": {"type": "array", "items": {"type": "object"}},
          "steps": {"type": "array", "items": {
              "type": "object", "required": ["index", "reply", "usage", "total_usage",
                                             "cost_usd", "prompt_estimate", "executions"]}},
          "totals": {"type": "object", "required": ["usage", "cost_usd", "prompt_estimate",
                                                    "recent_errors"]}}
_ID = {"type": "string", "minLength": 1}
_SHA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_VERSION = {"type": ["string", "null"]}
_CALL = {"type": "object", "additionalProperties": False,
         "required": ["tool_use_id", "name", "input", "needs_approval", "side_effecting"],
         "properties": {"tool_use_id": _ID, "name": {"type": "string"}, "input": {},
                        "needs_approval": {"type": "boolean"},
                        "side_effecting": {"type": "boolean"}, "reason": {"type": "string"},
                        "tool_sha256": {"anyOf": [_SHA, {"type": "null"}]},
                        "rules_version": _VERSION}}
#: What a person may decide about a waiting call (see the ``decision`` record).
DECISION_ACTIONS = ("approve", "reject", "edit", "respond")


def _schema(required: dict[str, Any], optional: dict[str, Any] | None = None,
            delta: bool = True) -> dict[str, Any]:
    props = {"type": {}, "mac": {}, **required, **(optional or {}), **(_DELTA if delta else {})}
    return {"type": "object", "required": ["type", *required], "properties": props,
            "additionalProperties": False}


#: The JSON Schema of each record type (format version 3), keyed by ``type``.
RECORD_SCHEMAS: dict[str, dict[str, Any]] = {
    "header": _schema({"format": {}, "version": {},
                       "run_id": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
                       "system": {"type": "string"}, "config": {"type": "object"},
                       "tools": {"type": "array", "items": {"type": "object"}}},
                      {"scenario": {"type": "string", "minLength": 1},
                       "journal_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                       "session": {"type": "object", "additionalProperties": False,
                                   "required": ["id", "turn"],
                                   "properties": {"id": {"type": "string", "minLength": 1},
                                                  "turn": {"type": "integer",
                                                           "minimum": 1}}}},
                      delta=False),
    "state": _schema({"state": {"type": "object", "required": [
        "system", "messages", "steps", "usage", "cost_usd", "prompt_estimate",
        "recent_errors"]}}),
    "started": _schema({"tool_use_id": _ID, "name": {"type": "string"},
                        "idempotency_key": {"type": "string"}}),
    "done": _schema({"tool_use_id": _ID, "execution": {
        "type": "object", "required": ["tool_use_id", "name", "content", "is_error"]}}),
    "results": _schema({}),
    "pause": _schema({"calls": {"type": "array", "minItems": 1, "items": _CALL}}),
    "decision": _schema({"tool_use_id": _ID, "approved": {"type": "boolean"},
                         "note": {"type": "string"},
                         "input_sha256": _SHA, "at": {"type": "string"}},
                        {"approver": {"type": "string"},
                         "expires_at": {"type": ["string", "null"], "format": "date-time"},
                         "action": {"enum": list(DECISION_ACTIONS)}, "edited_input": {},
                         "edited_sha256": {"anyOf": [_SHA, {"type": "null"}]},
                         "tool_sha256": {"anyOf": [_SHA, {"type": "null"}]},
                         "rules_version": _VERSION},
                        delta=False),
    "stop": _schema({"stop_cause": {"type": "string"}, "stop_detail": {"type": "string"},
                     "summary": {"type": "string"}, "final_text": {"type": ["string", "null"]}}),
}
_VALIDATORS: dict[str, Any] = {}


def _check_record(path: Path, n: int, record: Any) -> None:
    kind = record.get("type") if isinstance(record, dict) else None
    if kind not in RECORD_SCHEMAS or (kind == "header") != (n == 1):
        raise CheckpointError(f"{path}, line {n}: not a journal record of this format (type "
                              f"{kind!r}). Nothing was run.")
    if kind not in _VALIDATORS:
        jsonschema = import_jsonschema()
        _VALIDATORS[kind] = jsonschema.Draft202012Validator(RECORD_SCHEMAS[kind])
    errors = sorted(_VALIDATORS[kind].iter_errors(record),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "(the record)"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise CheckpointError(f"{path}, line {n}: not a valid {kind!r} record: at '{where}': "
                              f"{errors[0].message}{more}. Nothing was run.")
