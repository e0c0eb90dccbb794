"""Lesson 16's session-store check: the notebook's reference passes, each broken
add_user_turn fails the case it breaks, with a message that says what to fix."""

import json

import pytest
from notebook_cells import solution

from primer.course.practice.session_store import CASES, check_session_store

NAMES = [c.name for c in CASES]


def reference():
    return solution("16", "add_user_turn")


def report(fn):
    return check_session_store(fn, show=False)


def test_the_notebooks_reference_scores_full_marks():
    result = report(reference())
    assert result.ok, str(result)
    assert result.total == len(NAMES) == 6


def _variant(select="SELECT message FROM messages WHERE session_id = ? ORDER BY seq",
             first_seq=0, dump=json.dumps, commit=True):
    """The reference with one thing done differently: the query, the first seq, how the
    message is written, whether it commits."""
    def add_user_turn(db, session_id, text):
        rows = db.execute(select, (session_id,) if "?" in select else ()).fetchall()
        messages = [json.loads(m) for (m,) in rows]
        turn = {"role": "user", "content": text}
        db.execute("INSERT INTO messages VALUES (?, ?, ?)",
                   (session_id, len(messages) + first_seq, dump(turn)))
        if commit:
            db.commit()
        return [*messages, turn]
    return add_user_turn


no_commit = _variant(commit=False)
no_order_by = _variant(select="SELECT message FROM messages WHERE session_id = ?")
every_session = _variant(select="SELECT message FROM messages ORDER BY seq")
seq_from_one = _variant(first_seq=1)
stores_repr = _variant(dump=str)


def saves_everything_again(db, session_id, text):
    messages = reference()(db, session_id, text)      # saves the new row ...
    with db:                                          # ... and then the whole list again
        db.executemany("INSERT INTO messages VALUES (?, ?, ?)",
                       [(session_id, k, json.dumps(m)) for k, m in enumerate(messages)])
    return messages


def returns_only_the_new_turn(db, session_id, text):
    return reference()(db, session_id, text)[-1:]


@pytest.mark.parametrize("broken, case, says", [
    (no_commit, "committed", "db.commit()"),
    (no_order_by, "history in order", "ORDER BY seq"),
    (every_session, "another session", "WHERE session_id = ?"),
    (saves_everything_again, "one new row", "insert only the new message"),
    (seq_from_one, "one new row", "the number of messages before it (4)"),
    (stores_repr, "JSON round trip", "store json.dumps(message)"),
    (returns_only_the_new_turn, "history in order", "returned a list of 1, expected 5 messages"),
])
def test_each_broken_add_user_turn_fails_the_case_it_breaks(broken, case, says):
    result = report(broken)
    assert case in result.failed, str(result)
    assert says in result.detail(case), result.detail(case)


def test_the_starter_of_the_notebook_fails_naming_the_save():
    def load(db, session_id):
        rows = db.execute("SELECT message FROM messages WHERE session_id = ? ORDER BY seq",
                          (session_id,))
        return [json.loads(text) for (text,) in rows]

    def add_user_turn(db, session_id, text):
        return [*load(db, session_id), {"role": "user", "content": text}]
    result = report(add_user_turn)
    assert result.failed == ["new session", "one new row", "JSON round trip", "committed"]
    assert "expected one row with seq 0" in result.detail("new session")


@pytest.mark.parametrize("junk", [lambda db, s, t: 42, lambda db, s, t: None, lambda: None,
                                  lambda db, s, t: db.execute("DROP TABLE messages"),
                                  lambda db, s, t: (_ for _ in ()).throw(SystemError("x"))])
def test_junk_is_reported_never_raised(junk):
    result = report(junk)
    assert result.score < result.total


def test_a_function_that_raises_is_reported_with_its_line():
    def add_user_turn(db, session_id, text):
        raise RuntimeError("disk full")
    result = report(add_user_turn)
    assert result.score == 0
    assert "raised RuntimeError: disk full at line 2 of add_user_turn" in result.detail("committed")


def test_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="pass your function"):
        check_session_store("add_user_turn")
