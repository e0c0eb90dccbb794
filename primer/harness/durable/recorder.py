"""``JournalRecorder``: writes a run's checkpoint journal at the loop's fixed points.

The loop calls its :class:`~primer.loop.state.Recorder` when a side-effecting call is about
to run and when it finished, when a reply's results are in, when the run pauses for approval
and when it stops. This recorder turns each call into one signed line of the run's journal
(the format is in :mod:`primer.harness.durable.journal`), holding only what the state gained since
the line before. It never runs anything itself.

No file exists until the run first has something that must survive the process (a pause,
or a side-effecting call about to run); a run that never pauses and calls no side-effecting
tool writes nothing. From its first line until the run stops, the run holds the journal's
lock, so a decision recorded meanwhile by another process waits instead of being lost.
``started``, ``done``, ``pause`` and ``stop`` lines are fsynced before the loop goes on;
``results`` lines are written (not fsynced): losing one to a power cut means the reply's
read-only calls run again on resume, while side effects keep their recorded outcome.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.loop.messages import ToolUseBlock
from primer.loop.state import RunState, Stop, StopCause
from primer.loop.tools import ToolExecution, idempotency_key

from ..approval_rules import rules_version
from .journal import (
    FORMAT_NAME,
    FORMAT_VERSION,
    CheckpointError,
    Journal,
    checkpoint_key,
    definition_sha256,
    input_sha256,
    read_journal,
    signed_lines,
)
from .keystore import anchor_path, new_journal_id, write_anchor

#: The keys of :meth:`RunState.totals`, as a journal's replayed state holds them.
_TOTALS = ("usage", "cost_usd", "prompt_estimate", "recent_errors", "output_fixes",
           "compactions")

try:  # POSIX: serialise the writers of one journal across processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]


class JournalRecorder:
    """The :class:`~primer.loop.state.Recorder` that writes checkpoint journals.

    ``JournalRecorder(directory, scenario=...)`` records a new run in the next free
    ``run-NNN.jsonl`` of ``directory`` (created on the first durable event);
    :meth:`reopen` continues an existing journal (resume, decisions). ``path`` is ``None``
    until the file exists. Thread-safe: the calls of one reply run concurrently and each
    records its own progress. Raises
    :class:`~primer.harness.durable.journal.CheckpointError` when it
    is made with a ``directory`` that cannot be one (:func:`directory_problem`), for a key
    that cannot be used, and when a line cannot be written (then what it would have
    recorded does not go ahead: a side-effecting call does not run).
    """

    def __init__(self, directory: Path, *, scenario: str | None = None,
                 session: tuple[str, int] | None = None) -> None:
        problem = directory_problem(Path(directory))
        if problem:
            raise CheckpointError(f"checkpoint_dir {directory}: {problem}. Nothing was run.")
        self.directory = Path(directory)
        self.scenario = scenario
        self.session = session
        self.path: Path | None = None
        self.status = "running"
        self._fd: int | None = None
        self._lock: int | None = None
        self._run_lock: int | None = None  # the journal's identity, wherever copies lie
        self._key = b""
        self._mac = FORMAT_NAME.encode()
        self._mutex = threading.Lock()
        self._messages = self._steps = self._executions = self._compactions = 0
        self._totals: dict[str, Any] | None = None
        self._journal_id: str | None = None
        self._anchor_path: Path | None = None
        self._size = 0  # bytes written to the journal (its anchor records where it ends)

    @classmethod
    def reopen(cls, path: str | Path, *, session: tuple[str, int] | None = None
               ) -> tuple[JournalRecorder, Journal]:
        """Lock the journal at ``path`` and its run (every copy of it), read and verify it,
        cut off a torn last line, and return a recorder that appends to it, with what it
        holds. The locks are held until :meth:`close`. With ``session`` (``(session id,
        turn)``) the journal must have been written for that turn of that session. Raises
        :class:`~primer.harness.durable.journal.CheckpointError` for a bad file, another
        run's journal (:func:`bound_to_its_run`) or another turn's, before any lock file is
        made beside it (it is read once unlocked, then again under the locks).
        """
        path = Path(path)
        key = checkpoint_key(path.parent)
        # a file that is no journal, or another run's, is refused before any lock file
        journal_id = bound_to_its_run(read_journal(path, key), session)
        handle = lock(path)
        run_handle = None
        try:
            run_handle = None if journal_id is None else lock(anchor_path(journal_id))
            journal = read_journal(path, key)
            if journal.header.get("journal_id") != journal_id:
                raise CheckpointError(f"{path}: the file was replaced while it was opened. "
                                      f"Nothing was run.")
            if journal.size < path.stat().st_size:
                os.truncate(path, journal.size)  # the torn line goes before anything follows
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            unlock(run_handle)
            unlock(handle)
            raise
        rec = cls(path.parent, scenario=journal.header.get("scenario"))
        rec.path, rec._fd, rec._lock, rec._key, rec._mac = path, fd, handle, key, journal.mac
        rec._run_lock = run_handle
        rec.status, rec._size = journal.status, journal.size
        rec._journal_id = journal.header.get("journal_id")
        steps = journal.state["steps"]
        rec._messages, rec._steps = len(journal.state["messages"]), len(steps)
        rec._executions = len(steps[-1]["executions"]) if steps else 0
        rec._compactions = journal.state.get("compactions", 0)
        rec._totals = {k: journal.state.get(k) for k in _TOTALS}
        return rec, journal

    # -- the loop's fixed points

    def call_started(self, state: RunState, call: ToolUseBlock) -> None:
        """Record that a side-effecting call is about to run, with its idempotency key."""
        call_id = str(call.get("id"))
        self._write(state, {"type": "started", "tool_use_id": call_id,
                            "name": str(call.get("name")),
                            "idempotency_key": idempotency_key(call_id)}, durable=True)

    def call_done(self, state: RunState, execution: ToolExecution) -> None:
        """Record a call's result, so a resume never runs it again."""
        self._write(state, {"type": "done", "tool_use_id": execution.tool_use_id,
                            "execution": execution.to_dict()}, durable=True)

    def results_added(self, state: RunState) -> None:
        """Record that a reply's results were appended (once the journal exists)."""
        if self._fd is not None:
            self._write(state, {"type": "results"}, durable=False)
            self.status = "running"

    def paused(self, state: RunState, calls: list[ToolUseBlock]) -> None:
        """Record the pause and the paused reply's calls, before any of them runs: for each,
        the gate's answer as the step keeps it (asked once), a hash of its tool's definition
        and the version of the approval rules that gate it."""
        rows = []
        step, registry = state.steps[-1], state.inputs.registry
        for b in calls:
            t = registry.get(b.get("name"))
            reason = step.approval_reason(registry, b)
            rows.append({"tool_use_id": str(b.get("id")), "name": str(b.get("name")),
                         "input": b.get("input"), "needs_approval": reason is not None,
                         "side_effecting": bool(t is not None and t.side_effecting),
                         "reason": reason or "",
                         "tool_sha256": None if t is None else definition_sha256(t.definition()),
                         "rules_version": rules_version(t)})
        self._write(state, {"type": "pause", "calls": rows}, durable=True)
        self.status = "awaiting_approval"
        state.emit("checkpoint", path=str(self.path), status=self.status)

    def stopped(self, state: RunState, stop: Stop, summary: str,
                final_text: str | None) -> str | None:
        """Record how the run ended and close the journal; returns its path (``None`` when
        the run never wrote one). A pause that gained nothing since its line adds none. A
        cancelled run is always recorded (the journal is created if need be), so that it can
        be continued later."""
        cancelled = stop.cause is StopCause.CANCELLED
        if self._fd is None and not cancelled:
            return None
        pause = stop.cause is StopCause.AWAITING_APPROVAL
        with self._mutex:
            unchanged = pause and self.status == "awaiting_approval" and not self._delta(
                state, peek=True)
        if not unchanged:
            self._write(state, {"type": "stop", "stop_cause": stop.cause.value,
                                "stop_detail": stop.detail, "summary": summary,
                                "final_text": final_text}, durable=True)
            self.status = stop.cause.value if pause or cancelled else "finished"
            state.emit("checkpoint", path=str(self.path), status=self.status)
        path = str(self.path)
        self.close()
        return path

    def decided(self, tool_use_id: str, approved: bool, note: str, input_hash: str, *,
                approver: str = "", expires_at: datetime | None = None,
                action: str | None = None, edited_input: Any = None,
                tool_sha256: str | None = None,
                rules_version: str | None = None) -> dict[str, Any]:
        """Record a person's decision for one paused call (see
        :func:`primer.harness.durable.checkpoint.decide`): its ``action`` (default
        ``approve`` or ``reject``), the hashes it is bound to (the input seen, an edit's new
        input, the tool's definition) and the rules' version, who decided, the time (UTC)
        and an optional expiry (aware datetime); returns it as a call record holds it."""
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        ends = None if expires_at is None else \
            expires_at.astimezone(timezone.utc).isoformat(timespec="seconds")
        decision = {"action": action or ("approve" if approved else "reject"),
                    "approved": approved, "note": note, "input_sha256": input_hash,
                    "edited_input": edited_input,
                    "edited_sha256": None if action != "edit" else input_sha256(edited_input),
                    "tool_sha256": tool_sha256, "rules_version": rules_version,
                    "approver": approver, "at": at, "expires_at": ends}
        with self._mutex:
            self._append([{"type": "decision", "tool_use_id": tool_use_id, **decision}],
                         durable=True)
        return decision

    def close(self) -> None:
        """Close the journal and release its lock; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        handle, self._lock = self._lock, None
        unlock(handle)
        run_handle, self._run_lock = self._run_lock, None
        unlock(run_handle)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- writing

    def _write(self, state: RunState, record: dict[str, Any], durable: bool) -> None:
        with self._mutex:
            try:
                if self._fd is None:
                    self._create(state, record)
                elif state.compactions != self._compactions:  # the messages were rewritten
                    self._append([self._snapshot(state), record], durable)
                else:
                    record.update(self._delta(state))
                    self._append([record], durable)
            except OSError as e:  # a full disk, a directory removed under the run
                raise CheckpointError(
                    f"cannot write the checkpoint journal in {self.directory} "
                    f"({e.strerror or e}); the {record['type']!r} line was not recorded, so "
                    f"what it records did not go ahead.") from None

    def _append(self, records: list[dict[str, Any]], durable: bool) -> None:
        if self._fd is None:
            raise RuntimeError("the journal is closed")
        data, self._mac = signed_lines(records, self._key, self._mac)
        append_bytes(self._fd, data, durable)
        self._size += len(data)
        if durable:
            self._anchor()

    def _anchor(self) -> None:
        """Record where the journal ends now, outside the checkpoint directory (see
        :mod:`primer.harness.durable.keystore`). Best effort: a key directory that cannot be written
        costs the check of a cut-off end, not the run."""
        if self._journal_id is not None and self.path is not None:
            if self._anchor_path is None:  # (resolved once)
                self._anchor_path = anchor_path(self._journal_id)
            with contextlib.suppress(OSError):
                write_anchor(self._anchor_path, self._size, self._mac)

    def _snapshot(self, state: RunState) -> dict[str, Any]:
        """A ``state`` record of the whole run; what follows it is new."""
        self._delta(state)  # move the marks to now
        return {"type": "state", "state": state.to_dict()}

    def _delta(self, state: RunState, peek: bool = False) -> dict[str, Any]:
        """What ``state`` gained since the last line: new messages, executions added to
        the last written step, new steps, changed totals (all O(new), never O(history))."""
        out: dict[str, Any] = {}
        steps = state.steps
        if len(state.messages) > self._messages:
            out["messages"] = state.messages[self._messages:]
        if self._steps and len(steps[self._steps - 1].executions) > self._executions:
            out["executions"] = [e.to_dict()
                                 for e in steps[self._steps - 1].executions[self._executions:]]
        if len(steps) > self._steps:
            out["steps"] = [s.to_dict() for s in steps[self._steps:]]
        totals = state.totals()
        if totals != self._totals:
            out["totals"] = totals
        if not peek:
            self._messages, self._steps = len(state.messages), len(steps)
            self._executions = len(steps[-1].executions) if steps else 0
            self._compactions, self._totals = state.compactions, totals
        return out

    def _create(self, state: RunState, record: dict[str, Any]) -> None:
        self._key = checkpoint_key(self.directory)
        snapshot = self._snapshot(state)

        self._journal_id = new_journal_id()

        def lines_for(run_id: str) -> bytes:
            header = {"type": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION,
                      "run_id": run_id, "journal_id": self._journal_id,
                      "system": state.inputs.system, "config": state.config.to_dict(),
                      "tools": state.inputs.tool_defs}
            if self.scenario:
                header["scenario"] = self.scenario
            if self.session is not None:
                header["session"] = {"id": self.session[0], "turn": self.session[1]}
            data, self._mac = signed_lines([header, snapshot, record], self._key,
                                           FORMAT_NAME.encode())
            self._size = len(data)
            return data

        self._run_lock = lock(anchor_path(self._journal_id))  # before any copy can exist
        try:
            self.path, self._fd, self._lock = create_journal(self.directory, lines_for)
        except BaseException:
            run_lock, self._run_lock = self._run_lock, None
            unlock(run_lock)
            raise
        self._anchor()


# ---------------------------------------------------------------- files and locks


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive advisory lock of the journal at ``path`` (no-op without ``fcntl``).

    The lock lives on a hidden side file (``.run-001.jsonl.lock``); the OS drops it when the
    process dies.
    """
    handle = lock(path)
    try:
        yield
    finally:
        unlock(handle)


def lock(path: Path) -> int | None:
    """Take the lock of :func:`locked` and return its handle (for :func:`unlock`)."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:  # (an anchor's lock, before the first anchor was written)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def unlock(handle: int | None) -> None:
    """Release a lock taken by :func:`lock`."""
    if handle is not None:
        os.close(handle)  # closing the descriptor releases the flock


def bound_to_its_run(journal: Journal, session: tuple[str, int] | None = None) -> str | None:
    """The ``journal_id`` of ``journal`` (``None`` for a journal written before journals had
    ids), once it is shown to be at its own run's name (``run-001.jsonl`` holds run
    ``run-001``) and, with ``session`` (``(session id, turn)``), to have been written for
    that turn of that session (its signed header says so). Raises :class:`CheckpointError`
    for a journal of another run put in its place (a swap), or another session's or turn's:
    continuing it there would carry out that run's calls as this one's."""
    if session is not None:
        owner = journal.header.get("session")
        wanted = {"id": session[0], "turn": session[1]}
        if owner != wanted:
            whose = (f"turn {owner['turn']} of session {owner['id']}" if owner
                     else "no session")
            raise CheckpointError(
                f"{journal.path}: the journal of run {journal.run_id} belongs to {whose}, not "
                f"to turn {session[1]} of session {session[0]}: a turn record can only point "
                f"at its own turn's journal (the store's record was changed). Nothing was "
                f"run.")
    expected = f"{journal.run_id}.jsonl"
    if journal.path.name != expected:
        raise CheckpointError(
            f"{journal.path}: this file holds the journal of run {journal.run_id}, not of a "
            f"run named {journal.path.stem}: a journal resumes only as the run it belongs to. "
            f"If it is a copy of that run's journal kept on purpose, name it {expected}. "
            f"Nothing was run.")
    journal_id = journal.header.get("journal_id")
    return journal_id if isinstance(journal_id, str) else None


def directory_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot hold checkpoint journals, or ``None``: it must be a
    writable directory, or not exist yet below a writable one (it is made on first use)."""
    if directory.exists():
        if not directory.is_dir():
            return "that is a file, not a directory"
        return None if os.access(directory, os.W_OK | os.X_OK) else "the directory is not writable"
    parent = directory.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"it does not exist and {parent} is not writable, so it cannot be made"
    return None


def append_bytes(fd: int, data: bytes, durable: bool) -> None:
    """Append ``data`` at ``fd``; with ``durable`` wait until it is on disk (fdatasync)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if durable:
        getattr(os, "fdatasync", os.fsync)(fd)


def create_journal(directory: Path,
                   lines_for: Callable[[str], bytes]) -> tuple[Path, int, int | None]:
    """Create the next free ``run-NNN.jsonl`` in ``directory`` with its first lines.

    ``lines_for(run_id)`` returns those lines (bytes). They are written and fsynced in an
    unnamed file (``O_TMPFILE``, Linux) that is then linked under its name, so the file
    appears whole or not at all; elsewhere a hidden temporary file is linked the same way
    and removed. The journal's lock is taken before the name appears. Returns ``(path, an
    append descriptor, the lock handle)``. Raises ``OSError`` when the directory is not
    writable.
    """
    directory.mkdir(parents=True, exist_ok=True)
    n = len(list(directory.glob("run-*.jsonl"))) + 1
    while True:
        path = directory / f"run-{n:03d}.jsonl"
        if path.exists():
            n += 1
            continue
        handle = lock(path)
        try:
            _link_new(directory, path, lines_for(path.stem))
        except FileExistsError:
            unlock(handle)
            n += 1
            continue
        except BaseException:
            unlock(handle)
            raise
        _fsync_dir(directory)
        return path, os.open(path, os.O_WRONLY | os.O_APPEND), handle


def _link_new(directory: Path, path: Path, data: bytes) -> None:
    tmp_flag = getattr(os, "O_TMPFILE", 0)
    fd = -1
    if tmp_flag:
        with contextlib.suppress(OSError):  # not every file system offers O_TMPFILE
            fd = os.open(directory, tmp_flag | os.O_WRONLY, 0o600)
    if fd >= 0:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            append_bytes(fd, data, durable=True)
            # linkat(AT_SYMLINK_FOLLOW) of the descriptor's /proc entry: giving a dir_fd makes
            # os.link call linkat (plain link(2) would not follow the magic link)
            os.link(f"/proc/self/fd/{fd}", path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd,
                    follow_symlinks=True)
        finally:
            os.close(dir_fd)
            os.close(fd)
        return
    tmp = directory / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        append_bytes(fd, data, durable=True)
        os.close(fd)
        fd = -1
        os.link(tmp, path)  # FileExistsError if another run took the name first
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(tmp)


def _fsync_dir(directory: Path) -> None:
    if hasattr(os, "O_DIRECTORY"):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
