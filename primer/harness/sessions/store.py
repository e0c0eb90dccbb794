"""Sessions kept on disk: one SQLite file per directory, appended to after every turn.

``SessionStore(DIR)`` keeps its sessions in ``DIR/sessions.sqlite3`` (the standard
library's ``sqlite3``: an embedded database, no server). :meth:`SessionStore.new` starts a
session that saves itself after each turn; :meth:`SessionStore.load` brings one back, in
another process, with the live model and tools; :func:`list_sessions` lists them (also
``python -m primer sessions list DIR``).

Why SQLite rather than the checkpoint journal's JSON Lines: a session outlives many runs
(each may have a checkpoint journal of its own), many sessions share one file and are listed
with one query, and each turn is saved in one transaction, so a crash mid-save leaves the
previous turn intact. The OpenAI Agents SDK's ``SQLiteSession`` makes the same choice. What
the store does not do is sign its rows: a session's history is what the model is shown
again, never an authority to act (loading one runs nothing; an unanswered call is answered
with an error result, never run). Approvals stay in the signed checkpoint journals.

The schema (``PRAGMA user_version`` = :data:`SCHEMA_VERSION`; a newer file is refused)::

    sessions(id TEXT PRIMARY KEY, system TEXT, created_at REAL, updated_at REAL, caps TEXT)
    messages(session_id, position, message)   -- one JSON message per row, in order
    turns(session_id, turn, record)           -- one Turn.to_dict() as JSON per row

Times are seconds since the epoch (UTC); ``caps`` is the session's caps as a JSON object
naming every one of :data:`~primer.harness.sessions.session.SESSION_CAPS` (``null``: no
cap). A cap missing from it is refused as damage, not read as no cap, so that emptying the
column does not lift a session's caps (rewriting them to ``null`` still would: rows are not
signed). A save appends only what is new: the messages from the first one that changed
(normally the ones this turn added) and the new turn records, and writes the caps again.
A store of schema version 1 (no ``caps`` column) gets the column, every cap ``null``, when
a :class:`SessionStore` opens it; read only, its sessions have no caps. A store of version
2 without the column is damaged.

What the store refuses. A file holding any object the store did not make (a trigger, a view,
an index or a table of its own: SQLite runs a planted trigger on every save) is refused
before anything is read or written (:data:`OBJECTS`), and so is a session id that is not a
plain name (:data:`SESSION_ID`), wherever one is given.

One process at a time. A turn (:meth:`Session.send`, :meth:`Session.resume`) holds the
session's lock (:meth:`SessionStore.hold`: an exclusive ``flock`` on
``.session-locks/<id>.lock`` beside the file, dropped by the OS if the process dies) from
before its first model call until its turn is saved. A second process (or a second copy in
this one) that tries meanwhile is refused at once, and one that comes after a turn it has not
seen is refused too: either way before it sends or runs anything, so no tool's side effect
happens outside a saved history.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from primer.harness.files import UnreadableFile, check_writable
from primer.harness.hooks import Hooks
from primer.harness.request_check import messages_problems
from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import LLM, Usage
from primer.loop.state import StopCause
from primer.loop.text import JSONRefused, json_problem, one_line, parse_json, safe_repr
from primer.loop.tools import Tool, ToolRegistry

from .session import SESSION_CAPS, Session, SessionError, Turn, cap_problem, new_session_id

FILE_NAME = "sessions.sqlite3"
SCHEMA_VERSION = 2
#: The tables of a session store (see the module docstring).
TABLES = frozenset({"sessions", "messages", "turns"})
#: Seconds a save waits for another process that holds the file's write lock.
BUSY_TIMEOUT_S = 10.0
#: What a session id may be: a plain name of letters, digits and ``._:@-``, starting with a
#: letter or digit, at most 128 characters (never a path: no ``/``, ``\\`` or ``..``).
SESSION_ID = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
#: Every object of a session store's file, as ``(type, name)`` in ``sqlite_master``: the
#: tables and the indexes SQLite makes for their primary keys. Anything else is refused.
OBJECTS = frozenset({("table", "sessions"), ("table", "messages"), ("table", "turns"),
                     ("index", "sqlite_autoindex_sessions_1"),
                     ("index", "sqlite_autoindex_messages_1"),
                     ("index", "sqlite_autoindex_turns_1")})
#: The directory beside the store's file that holds one lock file per session being continued.
LOCKS = ".session-locks"

try:  # POSIX: one process at a time per session
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

#: The ``caps`` of a session without caps: every cap named, each ``null``.
NO_CAPS = json.dumps(dict.fromkeys(SESSION_CAPS))

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, system TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, caps TEXT NOT NULL DEFAULT '{NO_CAPS}');
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (session_id, position));
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (session_id, turn));
"""
#: Version 1 to 2: the sessions' caps, each ``null`` (a version 1 session has none).
_ADD_CAPS = f"ALTER TABLE sessions ADD COLUMN caps TEXT NOT NULL DEFAULT '{NO_CAPS}'"


class _Stored(enum.Enum):
    """The default of :meth:`SessionStore.load`'s caps: the cap stored with the session."""

    CAP = "the stored cap"


@dataclass
class SessionInfo:
    """One line of a listing: a stored session's id, size, totals and last turn.

    ``turns`` and ``messages`` are counts; ``usage`` and ``cost_usd`` the session's totals
    (tokens; USD); ``last_task`` and ``last_stop_cause`` those of its latest turn (``None``
    before the first); ``created_at`` and ``updated_at`` seconds since the epoch.
    """

    id: str
    turns: int
    messages: int
    usage: Usage
    cost_usd: float
    last_task: str | None
    last_stop_cause: StopCause | None
    created_at: float
    updated_at: float

    def describe(self, task_chars: int = 50) -> str:
        """One line for a person: id, turns, messages, tokens, cost, update time, last turn."""
        when = datetime.fromtimestamp(self.updated_at, timezone.utc).strftime("%Y-%m-%d %H:%M")
        last = "no turns yet"
        if self.last_task is not None and self.last_stop_cause is not None:
            last = f"last: {one_line(self.last_task, task_chars)!r} -> " \
                   f"{self.last_stop_cause.value}"
        return (f"{self.id}: {self.turns} turns, {self.messages} messages, "
                f"{self.usage.total_tokens:,} tokens, {self.cost_usd:.4f} USD, "
                f"updated {when} UTC; {last}")


@dataclass
class StoredSession:
    """A session as stored, without a model or tools: what :meth:`SessionStore.read` gives.

    ``caps`` maps each of :data:`~primer.harness.sessions.session.SESSION_CAPS` to its value
    (turns; tokens; USD) or ``None`` (no cap).
    """

    id: str
    system: str
    messages: list[Message]
    turns: list[Turn]
    created_at: float
    updated_at: float
    caps: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(SESSION_CAPS))


class SessionStore:
    """The sessions kept in ``directory/sessions.sqlite3``.

    ``directory`` is created if its parent exists; the file on first use. ``clock`` gives
    the times recorded (seconds since the epoch; pass a fixed one for output that must not
    change between runs). Raises :class:`SessionError` when the directory cannot be used or
    the file is not a session store this version can read; a store that lost one of its
    :data:`TABLES` is refused as damaged, never made again.
    """

    def __init__(self, directory: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.clock = clock
        if self.directory.exists() and not self.directory.is_dir():
            raise SessionError(f"{directory} is a file, not a directory for sessions")
        if not self.directory.exists():
            if not self.directory.parent.is_dir():
                raise SessionError(f"cannot create {directory}: {self.directory.parent} does "
                                   f"not exist; create it first")
            try:
                self.directory.mkdir()
            except OSError as e:
                raise SessionError(f"cannot create {directory}: {e.strerror or e}") from None
        with self._db() as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master "
                                                "WHERE type = 'table'")}
            if not tables:  # a new file (or an empty one): make the store
                db.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; "
                                 f"COMMIT;")
            elif not TABLES <= tables:  # never re-create what was lost: refuse
                missing = ", ".join(sorted(TABLES - tables))
                raise SessionError(f"{self.path} has no {missing} table: the store is damaged "
                                   f"(or not a session store); nothing was changed")
            elif not _has_caps(db):  # schema version 1: add the caps
                _check_caps_column(db, self.path)
                db.execute("BEGIN IMMEDIATE")
                if not _has_caps(db):  # (another process may have added them meanwhile)
                    db.execute(_ADD_CAPS)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        #: per session object made or loaded here: (messages as last saved or loaded,
        #: turns saved); per object, so that two copies of one session are told apart
        self._saved: weakref.WeakKeyDictionary[Session, tuple[list[Message], int]] = \
            weakref.WeakKeyDictionary()

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with _connect(self.path) as db:
            yield db

    # -- sessions in, sessions out

    def new(self, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
            session_id: str | None = None, system: str = "",
            config: AgentConfig | None = None,
            hooks: Hooks | Iterable[Hooks] | None = None,
            max_turns: int | None = None, max_tokens_total: int | None = None,
            max_cost_usd: float | None = None) -> Session:
        """A new, empty session kept in this store (saved after each turn).

        ``session_id`` names it (default: a random ``session-...``); the other arguments
        are :class:`~primer.harness.sessions.session.Session`'s. The caps (turns; tokens;
        USD) are stored with it. Raises :class:`SessionError` for an id that is taken or not
        of the form :data:`SESSION_ID`, ``ValueError`` for a cap that cannot be one.
        """
        session_id = session_id or new_session_id()
        _check_id(session_id)
        session = Session(llm, tools, system=system, config=config, hooks=hooks,
                          session_id=session_id, store=self, max_turns=max_turns,
                          max_tokens_total=max_tokens_total, max_cost_usd=max_cost_usd)
        now = self.clock()
        with self._db() as db:
            try:
                db.execute("INSERT INTO sessions (id, system, created_at, updated_at, caps) "
                           "VALUES (?, ?, ?, ?, ?)",
                           (session_id, system, now, now, json.dumps(session.caps)))
            except sqlite3.IntegrityError:
                raise SessionError(f"a session {session_id!r} is already in {self.path}; "
                                   f"load it, or choose another id") from None
        self._saved[session] = ([], 0)
        return session

    def load(self, session_id: str, llm: LLM, tools: ToolRegistry | Iterable[Tool] = (), *,
             config: AgentConfig | None = None,
             hooks: Hooks | Iterable[Hooks] | None = None,
             max_turns: int | None | _Stored = _Stored.CAP,
             max_tokens_total: int | None | _Stored = _Stored.CAP,
             max_cost_usd: float | None | _Stored = _Stored.CAP) -> Session:
        """The stored session ``session_id`` with its history, turns, system prompt and caps,
        ready for the next turn with model ``llm`` and ``tools``. Nothing runs.

        A cap left out is the stored one; one given (turns; tokens; USD; ``None`` for no
        cap) replaces it, and is stored with the next turn. Caps count the stored turns (see
        :class:`~primer.harness.sessions.session.Session`). Raises :class:`SessionError` for
        an unknown id or a stored session that cannot be read back (see :meth:`read`);
        nothing is sent to ``llm`` then.
        """
        stored = self.read(session_id)  # (checks the id)
        given = {"max_turns": max_turns, "max_tokens_total": max_tokens_total,
                 "max_cost_usd": max_cost_usd}
        caps = {name: stored.caps.get(name) if value is _Stored.CAP else value
                for name, value in given.items()}
        session = Session(llm, tools, system=stored.system, config=config, hooks=hooks,
                          messages=stored.messages, turns=stored.turns, session_id=session_id,
                          store=self, **caps)  # type: ignore[arg-type]
        self._saved[session] = (list(session.messages), len(session.turns))
        return session

    def read(self, session_id: str) -> StoredSession:
        """The stored session ``session_id`` as data (no model needed): messages, turns and
        caps.

        Raises :class:`SessionError`, naming the session and the turn, for an unknown id or
        rows that cannot be read back: a column that is not JSON text within
        :mod:`~primer.loop.text`'s limits (nesting, integers, no NaN, valid Unicode),
        a time that is not seconds since the epoch, or a history the Messages API would
        refuse (:func:`~primer.harness.request_check.messages_problems`).
        """
        _check_id(session_id)
        with self._db() as db:
            return _read(db, self.path, session_id)

    def sessions(self) -> list[SessionInfo]:
        """Every session in the store, the most recently updated last."""
        with self._db() as db:
            return _list(db)

    def delete(self, session_id: str) -> bool:
        """Remove a session and everything stored with it; ``False`` if there was none.
        Raises :class:`SessionError` for an id that is not of the form :data:`SESSION_ID`."""
        _check_id(session_id)
        with self._db() as db:
            db.execute("PRAGMA foreign_keys = ON")
            gone = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
        for session in [s for s in self._saved if s.id == session_id]:
            del self._saved[session]
        return bool(gone)

    def save(self, session: Session) -> None:
        """Write what ``session`` gained since it was last saved or loaded, in one transaction.

        Messages from the first one that differs from the saved list are replaced (normally
        only new ones are added), and new turn records appended; the previous turn's record
        is rewritten too, as a resumed turn replaces it, and so are the caps. Raises
        :class:`SessionError` when the session is not in this store, when another process
        saved turns to it since it was loaded here (load it again), or when a message is not
        JSON; nothing is written then.
        """
        saved, saved_turns = self._saved.get(session, ([], None))
        if saved_turns is None:
            raise SessionError(f"session {session.id!r} was not created or loaded by this "
                               f"store ({self.path}); use store.new() or store.load()")
        start = _first_changed(saved, session.messages)
        first_turn = max(saved_turns - 1, 0)
        try:
            rows = [(session.id, k, json.dumps(m, ensure_ascii=False))
                    for k, m in enumerate(session.messages[start:], start=start)]
        except (TypeError, ValueError) as e:
            raise SessionError(f"session {session.id!r}: a message is not JSON ({e}); "
                               f"nothing was saved") from None
        records = [(session.id, t.index, json.dumps(t.to_dict(), ensure_ascii=False))
                   for t in session.turns[first_turn:]]
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            _check_unchanged(db, self.path, session, len(saved), saved_turns,
                             "This turn was not saved.")
            db.execute("DELETE FROM messages WHERE session_id = ? AND position >= ?",
                       (session.id, start))
            db.executemany("INSERT INTO messages VALUES (?, ?, ?)", rows)
            db.executemany("INSERT OR REPLACE INTO turns VALUES (?, ?, ?)", records)
            db.execute("UPDATE sessions SET updated_at = ?, caps = ? WHERE id = ?",
                       (self.clock(), json.dumps(session.caps), session.id))
        self._saved[session] = (list(session.messages), len(session.turns))

    @contextlib.contextmanager
    def hold(self, session: Session) -> Iterator[None]:
        """Hold ``session``'s lock while its turn runs and is saved (see the module
        docstring): taken at once or not at all, and only by a copy that has seen every turn
        stored. Raises :class:`SessionError`, before anything is sent, when another process
        or copy holds it, when the stored session went on since this copy was loaded or
        saved, or when the session is not this store's."""
        _check_id(session.id)
        saved, saved_turns = self._saved.get(session, ([], None))
        if saved_turns is None:
            raise SessionError(f"session {session.id!r} was not created or loaded by this "
                               f"store ({self.path}); use store.new() or store.load()")
        handle = _take_lock(self.directory / LOCKS / f"{session.id}.lock", session.id)
        try:
            with self._db() as db:
                _check_unchanged(db, self.path, session, len(saved), saved_turns,
                                 "Nothing was sent.")
            yield
        finally:
            if handle is not None:
                os.close(handle)  # closing the descriptor releases the flock


def _take_lock(path: Path, session_id: str) -> int | None:
    """The exclusive lock at ``path`` for ``session_id``, taken without waiting (``None``
    without ``fcntl``); :class:`SessionError` when another process or copy holds it."""
    if fcntl is None:  # pragma: no cover
        return None
    try:
        path.parent.mkdir(exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise SessionError(f"session {session_id!r}: cannot make its lock file {path} "
                           f"({e.strerror or e}); nothing was sent") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SessionError(f"session {session_id!r} is being continued by another process "
                           f"(or another copy of it here); nothing was sent. Wait for that "
                           f"turn to end, then load the session again.") from None
    return fd


def _check_unchanged(db: sqlite3.Connection, path: Path, session: Session, messages: int,
                     turns: int, what_happened: str) -> None:
    """:class:`SessionError` when the store holds other than the ``turns`` turns and
    ``messages`` messages this copy of ``session`` loaded or saved."""
    stored = db.execute("SELECT COUNT(*) FROM turns WHERE session_id = ?",
                        (session.id,)).fetchone()[0]
    stored_messages = db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?",
                                 (session.id,)).fetchone()[0]
    if (stored, stored_messages) != (turns, messages):
        raise SessionError(
            f"session {session.id!r}: the session changed since it was loaded; load "
            f"it again. It has {stored} turns and {stored_messages} messages in "
            f"{path}, not the {turns} and {messages} this copy loaded "
            f"or saved: another process, or another copy loaded from the store, "
            f"went on with it. {what_happened}")


def _first_changed(saved: Sequence[Message], now: Sequence[Message]) -> int:
    """The index of the first message of ``now`` that is not the saved one (by identity:
    a run keeps the history's message objects and adds new ones after them)."""
    for k, (a, b) in enumerate(zip(saved, now, strict=False)):
        if a is not b:
            return k
    return min(len(saved), len(now))


def _check_id(session_id: Any) -> None:
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise SessionError(f"session id {safe_repr(session_id)}: a session id is a plain "
                           f"name: use 1-128 letters, digits and ._:@- (no '..'), starting "
                           f"with a letter or digit")


@contextlib.contextmanager
def _connect(path: Path, *, read_only: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the store at ``path`` in a transaction (committed at the end, rolled
    back on an exception), closed afterwards. ``SessionError`` for a file that is not a
    session store this version reads, or a path that is not a regular file (a FIFO would
    block SQLite forever; :func:`~primer.harness.files.check_writable`)."""
    try:
        check_writable(path)
    except UnreadableFile as e:
        raise SessionError(f"cannot open the session store {e}") from None
    try:
        db = (sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                              timeout=BUSY_TIMEOUT_S, isolation_level=None) if read_only
              else sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None))
    except sqlite3.Error as e:
        raise SessionError(f"cannot open the session store {path}: {e}") from None
    try:
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise SessionError(f"{path} is not a session store ({e})") from None
        if not isinstance(version, int) or version < 0 or (version == 0 and _size(path)):
            raise SessionError(f"{path} is not a session store (schema version "
                               f"{safe_repr(version)}; a session store has "
                               f"{SCHEMA_VERSION})")
        if version > SCHEMA_VERSION:
            raise SessionError(f"{path} was written by a newer primer (schema version "
                               f"{version}; this one reads up to {SCHEMA_VERSION}); upgrade "
                               f"primer to use it")
        _check_objects(db, path)
        try:
            yield db
            if db.in_transaction:
                db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    except sqlite3.DatabaseError as e:
        raise SessionError(f"the session store {path} cannot be used: {e}") from None
    finally:
        db.close()


def _check_objects(db: sqlite3.Connection, path: Path) -> None:
    """:class:`SessionError` for a store holding an object it did not make (a trigger, a
    view, another index or table: see :data:`OBJECTS`), before anything is read or written."""
    found = {(kind, name) for kind, name in db.execute("SELECT type, name FROM sqlite_master")}
    foreign = sorted(found - OBJECTS, key=lambda o: (str(o[0]), str(o[1])))
    if foreign:
        kind, name = foreign[0]
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise SessionError(f"{path} holds a {kind} named {safe_repr(name)}{more} "
                           f"that a session store does not make: the file was changed "
                           f"outside primer; nothing was read or written. Remove it (or use "
                           f"a store made by primer)")


def _has_caps(db: sqlite3.Connection) -> bool:
    """Whether the store's sessions table has its ``caps`` column (schema version 2)."""
    return any(r[1] == "caps" for r in db.execute("PRAGMA table_info(sessions)"))


def _check_caps_column(db: sqlite3.Connection, path: Path) -> None:
    """:class:`SessionError` for a store of schema version 2 or later without its ``caps``
    column: it was dropped (a version 1 store never had one)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version >= 2:
        raise SessionError(f"{path} (schema version {version}) has no caps column in its "
                           f"sessions table: the store is damaged; nothing was changed")


def _read(db: sqlite3.Connection, path: Path, session_id: str) -> StoredSession:
    has_caps = _has_caps(db)
    if not has_caps:
        _check_caps_column(db, path)
    caps_column = "caps" if has_caps else repr(NO_CAPS)
    row = db.execute(f"SELECT system, created_at, updated_at, {caps_column} FROM sessions "
                     f"WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        known = [r[0] for r in db.execute("SELECT id FROM sessions ORDER BY updated_at")]
        raise SessionError(f"no session {session_id!r} in {path}"
                           + (f"; it holds {', '.join(map(str, known))}" if known
                              else "; it is empty"))
    where = f"session {session_id!r} in {path}"
    system, created, updated, raw_caps = row
    if not isinstance(system, str) or json_problem(system, text=True):
        raise SessionError(f"{where}: its system prompt is not text; the store is damaged")
    _check_times(where, created, updated)
    caps = _caps(where, raw_caps)
    turns = [_turn(where, record) for (record,) in db.execute(
        "SELECT record FROM turns WHERE session_id = ? ORDER BY turn", (session_id,))]
    messages = []
    for position, raw in db.execute(
            "SELECT position, message FROM messages WHERE session_id = ? ORDER BY position",
            (session_id,)):
        try:
            messages.append(_stored_json(raw))
        except SessionError as e:
            raise SessionError(f"{where}: message {safe_repr(position)} "
                               f"({_turn_of(len(messages), turns)}) {e}; the store is "
                               f"damaged") from None
    problems = _history_problems(messages)
    if problems:
        found = re.match(r"messages\.(\d+)", problems[0])
        turn = _turn_of(int(found.group(1)), turns) if found else "its history"
        raise SessionError(f"{where}, {turn}: the Messages API would refuse this history "
                           f"({problems[0]}); the store is damaged, nothing was sent")
    return StoredSession(session_id, system, messages, turns, float(created), float(updated),
                         caps)


def _history_problems(messages: list[Message]) -> list[str]:
    """Why the Messages API would refuse a stored history as the next turn sends it: with a
    user message after it. So its last message is not the request's final one, and the rule
    for that (an assistant's text may not end in whitespace) does not apply: a reply that
    ends in a space is saved, and must load."""
    if not messages:
        return []
    final = f"messages.{len(messages) - 1}: final assistant content cannot end with trailing"
    return [p for p in messages_problems(messages) if not p.startswith(final)]


def _caps(where: str, raw: Any) -> dict[str, float | None]:
    """A stored ``caps`` column as one value (or ``None``) per cap; :class:`SessionError`
    for one that is not a JSON object of caps that can be."""
    try:
        caps = _stored_json(raw)
    except SessionError as e:
        raise SessionError(f"{where}: its caps column {e}; the store is damaged") from None
    if not isinstance(caps, dict):
        raise SessionError(f"{where}: its caps are not a JSON object; the store is damaged")
    problems = [f"{safe_repr(k)} is not a cap" for k in caps if k not in SESSION_CAPS]
    problems += [p for k in SESSION_CAPS if (p := cap_problem(k, caps.get(k)))]
    problems += [f"{k} is missing (a session without it stores null)" for k in SESSION_CAPS
                 if k not in caps]
    if problems:
        raise SessionError(f"{where}: its caps cannot be used ({'; '.join(problems)}); the "
                           f"store is damaged")
    return {k: caps.get(k) for k in SESSION_CAPS}


def _stored_json(raw: Any) -> Any:
    """A stored JSON column, parsed within :mod:`~primer.loop.text`'s limits, strings
    valid Unicode; :class:`SessionError` (saying what is wrong) otherwise."""
    if not isinstance(raw, str):
        raise SessionError(f"is {'NULL' if raw is None else 'a ' + type(raw).__name__}, "
                           f"not JSON text")
    try:
        value = parse_json(raw)
    except JSONRefused as e:
        raise SessionError(f"is not JSON within the limits ({e.reason})") from None
    problem = json_problem(value, text=True)
    if problem:
        raise SessionError(f"holds {problem}")
    return value


def _turn(where: str, record: Any) -> Turn:
    try:
        d = _stored_json(record)
        if not isinstance(d, dict):
            raise SessionError(f"is a {type(d).__name__}, not a turn record")
        return Turn.from_dict(d)
    except SessionError as e:
        raise SessionError(f"{where}: a turn record {e}; the store is damaged") from None
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise SessionError(f"{where}: a turn record cannot be read back "
                           f"({type(e).__name__}: {e}); the store is damaged") from None


def _turn_of(index: int, turns: Sequence[Turn]) -> str:
    """Which turn wrote message ``index`` (a turn's ``messages`` is the history's length
    after it), for an error message."""
    for t in turns:
        if index < t.messages:
            return f"turn {t.index}"
    return "after the last turn"


def _check_times(where: str, *times: Any) -> None:
    for t in times:
        if type(t) not in (int, float) or not 0 <= t < 1e11:
            raise SessionError(f"{where}: a time that is not seconds since the epoch "
                               f"({safe_repr(t)}); the store is damaged")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _list(db: sqlite3.Connection) -> list[SessionInfo]:
    infos = []
    for sid, created, updated, n_messages, n_turns, record in db.execute(
            "SELECT s.id, s.created_at, s.updated_at,"
            " (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),"
            " (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id),"
            " (SELECT record FROM turns t WHERE t.session_id = s.id ORDER BY turn DESC LIMIT 1)"
            " FROM sessions s ORDER BY s.updated_at, s.id"):
        where = f"session {safe_repr(sid)}"
        if not isinstance(sid, str) or json_problem(sid, text=True):
            raise SessionError(f"{where}: its id is not text; the store is damaged")
        _check_times(where, created, updated)
        last = _turn(where, record) if record is not None else None
        infos.append(SessionInfo(sid, n_turns, n_messages,
                                 last.session_usage if last else Usage(),
                                 last.session_cost_usd if last else 0.0,
                                 last.task if last else None,
                                 last.stop_cause if last else None, created, updated))
    return infos


def list_sessions(path: str | Path) -> list[SessionInfo]:
    """The sessions stored at ``path``: a store's directory, or its ``sessions.sqlite3``.

    Read-only: nothing is created. A directory without a store holds no sessions (``[]``).
    Raises :class:`SessionError` when ``path`` does not exist or the file is not a session
    store this version reads.
    """
    p = Path(path)
    if not p.exists():
        raise SessionError(f"{path} does not exist")
    file = p / FILE_NAME if p.is_dir() else p
    if not file.exists():
        return []
    with _connect(file, read_only=True) as db:
        return _list(db)


def read_session(path: str | Path, session_id: str) -> StoredSession:
    """One stored session read from ``path`` (a store's directory or file), read-only.

    Raises :class:`SessionError` when ``path`` holds no store, or no such session.
    """
    p = Path(path)
    file = p / FILE_NAME if p.is_dir() else p
    if not file.exists():
        raise SessionError(f"{path} holds no session store ({FILE_NAME})" if p.is_dir()
                           else f"{path} does not exist")
    with _connect(file, read_only=True) as db:
        return _read(db, file, session_id)
