"""Lesson 16's exercise: a conversation kept as a message list in SQLite.

The learner writes ``add_user_turn(db, session_id, text) -> messages``: ``db`` is an open
``sqlite3.Connection`` whose table is :data:`TABLE` (one row per message: the session's id,
the message's position ``seq`` from 0, and the message as JSON text); the function loads the
session's messages in ``seq`` order, appends ``{"role": "user", "content": text}``, saves
that one new row (``seq`` = the number of messages before it) and commits, and returns the
whole list, the new turn last: the list the next request sends.

:func:`check_session_store` runs it on database files it fills itself: rows stored out of
order, another customer's session in the same table, ``tool_use`` blocks with non-ASCII
input, and a second connection that must see the saved turn.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short

AddUserTurn = Callable[[sqlite3.Connection, str, str], Any]

#: The table the exercise uses: one message per row, as JSON text.
TABLE = "CREATE TABLE messages (session_id TEXT, seq INTEGER, message TEXT)"

_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order C789? It was ₹1,499."},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look it up."},
        {"type": "tool_use", "id": "toolu_c1", "name": "track_order",
         "input": {"order_id": "C789", "fields": ["status", "eta"], "price": 1499.0}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_c1",
         "content": '{"status": "shipped", "eta": "Thursday"}'}]},
    {"role": "assistant", "content": [{"type": "text",
                                       "text": "C789 has shipped; it arrives Thursday."}]},
]
_OTHER: list[dict[str, Any]] = [
    {"role": "user", "content": "Cancel my subscription."},
    {"role": "assistant", "content": [{"type": "text", "text": "Done: it ends on the 30th."}]},
]
_QUESTION = "Can it come to my office instead?"


@contextlib.contextmanager
def _database(rows: list[tuple[str, int, dict[str, Any]]]) -> Iterator[Path]:
    """A database file holding :data:`TABLE` with ``rows`` inserted in the order given."""
    with tempfile.TemporaryDirectory(prefix="session-check-") as folder:
        path = Path(folder) / "sessions.sqlite3"
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(TABLE)
            db.executemany("INSERT INTO messages VALUES (?, ?, ?)",
                           [(sid, seq, json.dumps(m)) for sid, seq, m in rows])
            db.commit()
        yield path


def _call(fn: AddUserTurn, path: Path, session_id: str, text: str) -> Any:
    """The learner's function on a connection of its own, closed afterwards."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return fn(db, session_id, text)


def _stored(path: Path, session_id: str) -> list[tuple[int, str]]:
    """What a second connection reads: the session's (seq, message text) rows, by seq."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq",
                          (session_id,)).fetchall()


def _shuffled(session_id: str, messages: list[dict[str, Any]]
              ) -> list[tuple[str, int, dict[str, Any]]]:
    """The rows of ``messages``, inserted odd positions first (so rowid order is wrong)."""
    rows = [(session_id, seq, m) for seq, m in enumerate(messages)]
    return rows[1::2] + rows[0::2]


def _list_problem(got: Any, want: list[dict[str, Any]]) -> Problem:
    """What is wrong with the returned list ``got``, expected ``want``, or ``None``."""
    if not isinstance(got, list):
        return (f"returned {short(repr(got))}; return the session's messages as a list, "
                f"the new user turn last")
    if got == want:
        return None
    if len(got) != len(want):
        return (f"returned a list of {len(got)}, expected {len(want)} messages: the stored "
                f"history ({len(want) - 1}) in seq order, then the new user turn")
    if sorted(json.dumps(m, default=str) for m in got) == sorted(map(json.dumps, want)):
        return ("the messages came back out of order; rows have no order of their own: "
                "SELECT ... ORDER BY seq")
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if a != b:
            return f"message {k} is {short(repr(a), 70)}, expected {short(repr(b), 70)}"
    return None  # pragma: no cover - equal lists returned above


def _new_session(fn: AddUserTurn) -> Problem:
    with _database([("cust-9", s, m) for s, m in enumerate(_OTHER)]) as path:
        got = _call(fn, path, "cust-7", _QUESTION)
        problem = _list_problem(got, [{"role": "user", "content": _QUESTION}])
        if problem:
            return f"a session with no rows yet: {problem}"
        rows = _stored(path, "cust-7")
        if len(rows) != 1 or rows[0][0] != 0:
            return (f"a new session's rows are {short(repr(rows), 80)}; expected one row with "
                    f"seq 0 (saved and committed)")
    return None


def _in_order(fn: AddUserTurn) -> Problem:
    with _database(_shuffled("cust-7", _HISTORY)) as path:
        return _list_problem(_call(fn, path, "cust-7", _QUESTION),
                             [*_HISTORY, {"role": "user", "content": _QUESTION}])


def _other_session(fn: AddUserTurn) -> Problem:
    rows = [("cust-3", 0, _OTHER[0]), ("cust-7", 0, _HISTORY[0]), ("cust-3", 1, _OTHER[1]),
            ("cust-7", 1, _HISTORY[1])]
    with _database(rows) as path:
        got = _call(fn, path, "cust-7", _QUESTION)
        if isinstance(got, list) and any(m in got for m in _OTHER):
            return ("another customer's messages are in the list: load only this session's "
                    "rows (WHERE session_id = ?)")
        return _list_problem(got, [*_HISTORY[:2], {"role": "user", "content": _QUESTION}])


def _one_new_row(fn: AddUserTurn) -> Problem:
    with _database(_shuffled("cust-7", _HISTORY)) as path:
        _call(fn, path, "cust-7", _QUESTION)
        rows = _stored(path, "cust-7")
    n = len(_HISTORY)
    if len(rows) > n + 1:
        return (f"the session has {len(rows)} rows after one new turn, expected {n + 1}: "
                f"insert only the new message; the earlier ones are stored already")
    if len(rows) < n + 1:
        return (f"the session has {len(rows)} rows, expected {n + 1}: insert the new "
                f"message and commit (another connection reads the file)")
    seqs = [seq for seq, _ in rows]
    if seqs != list(range(n + 1)):
        return (f"the rows' seq values are {seqs}; the new message's seq is the number of "
                f"messages before it ({n})")
    return None


def _json_rows(fn: AddUserTurn) -> Problem:
    with _database(_shuffled("cust-7", _HISTORY)) as path:
        got = _call(fn, path, "cust-7", _QUESTION)
        rows = _stored(path, "cust-7")
    problem = _list_problem(got, [*_HISTORY, {"role": "user", "content": _QUESTION}])
    if problem:
        return f"a history with tool_use, tool_result and non-ASCII text: {problem}"
    new = [text for seq, text in rows if seq == len(_HISTORY)]
    if not new:
        return "no row with the new message's seq was saved (see 'one new row')"
    try:
        saved = json.loads(new[-1])
    except (TypeError, ValueError):
        return (f"the new row's message is {short(repr(new[-1]), 60)}, not JSON: store "
                f"json.dumps(message) so any reader gets the message back")
    if saved != {"role": "user", "content": _QUESTION}:
        return f"the new row holds {short(repr(saved), 70)}; store the new user message"
    return None


def _committed(fn: AddUserTurn) -> Problem:
    with _database([("cust-7", s, m) for s, m in enumerate(_HISTORY[:2])]) as path:
        db = sqlite3.connect(path)
        try:
            fn(db, "cust-7", _QUESTION)
            seen = len(_stored(path, "cust-7"))
        finally:
            db.close()
    if seen != 3:
        return (f"while the connection stays open, another connection sees {seen} rows, "
                f"expected 3: commit the insert (db.commit(), or `with db:` around it) or a "
                f"crash loses the turn")
    return None


CASES = (
    Case("new session", _new_session, "one message, saved with seq 0"),
    Case("history in order", _in_order, "rows stored out of order come back by seq"),
    Case("another session", _other_session, "only this session's rows loaded"),
    Case("one new row", _one_new_row, "only the new message inserted, with the next seq"),
    Case("JSON round trip", _json_rows, "tool_use input and non-ASCII text come back equal"),
    Case("committed", _committed, "a second connection sees the turn at once"),
)


def check_session_store(fn: AddUserTurn, *, show: bool = True) -> ExerciseReport:
    """Judge the learner's ``add_user_turn(db, session_id, text) -> messages`` on
    :data:`CASES` (database files of its own, in a temporary directory, removed after).
    Prints the report when ``show``; raises ``TypeError`` only when ``fn`` is not callable."""
    return run_cases(fn, CASES, what="add_user_turn", show=show)
