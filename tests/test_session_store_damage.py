"""A damaged or forged session store: one SessionError naming the session and the turn,
exit code 2 from `sessions`, nothing sent to the model and nothing re-created."""

from __future__ import annotations

import json
import sqlite3

import pytest

from primer.__main__ import main
from primer.harness.sessions.session import SessionError
from primer.harness.sessions.store import FILE_NAME, SessionStore, list_sessions
from primer.scenarios import support_chat

T0 = 1_750_000_000.0


@pytest.fixture
def store_dir(tmp_path):
    store = SessionStore(tmp_path, clock=lambda: T0)
    session = store.new(support_chat.make_llm(), support_chat.make_tools(),
                        session_id="s1", system=support_chat.SYSTEM, config=support_chat.CONFIG)
    session.send(support_chat.QUESTIONS[0])
    return tmp_path


def damage(directory, sql: str, *args) -> None:
    with sqlite3.connect(directory / FILE_NAME) as db:
        db.execute(sql, args)


def never_called(**kwargs):
    raise AssertionError("a damaged history was sent to the model")


FIRST = "UPDATE messages SET message = ? WHERE position = 0"
ADDED = "INSERT INTO messages VALUES ('s1', 99, ?)"
DAMAGE = {
    "nested 100k deep": (FIRST, "[" * 100_000 + "]" * 100_000, "turn 1", "nested deeper"),
    "a number": (FIRST, 5, "turn 1", "messages.0"),
    "a JSON string": (FIRST, '"just a string"', "turn 1", "messages.0"),
    "a blob": (FIRST, b"\xff\xfe", "turn 1", "bytes, not JSON"),
    "a lone surrogate escape": (ADDED, '{"role": "user", "content": "\\ud800"}',
                                "after the last turn", "surrogate"),
    "a text block without text": (ADDED, json.dumps({"role": "assistant",
                                                     "content": [{"type": "text"}]}),
                                  "after the last turn", "content.0.text: Field required"),
    "an extra field": (FIRST, json.dumps({"role": "user", "content": "hi", "x": 1}),
                       "turn 1", "Extra inputs"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_history_is_refused_before_anything_is_sent(store_dir, case):
    sql, value, turn, why = DAMAGE[case]
    damage(store_dir, sql, value)
    with pytest.raises(SessionError) as e:
        SessionStore(store_dir).load("s1", never_called)
    assert "session 's1'" in str(e.value) and turn in str(e.value) and why in str(e.value)


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_sessions_show_of_a_damaged_history_is_one_line_and_exit_2(store_dir, capsys, case):
    sql, value, _, _ = DAMAGE[case]
    damage(store_dir, sql, value)
    assert main(["sessions", "show", str(store_dir), "s1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err


@pytest.mark.parametrize("column", ["created_at", "updated_at"])
def test_a_time_stored_as_a_blob_is_refused_by_list_and_show(store_dir, capsys, column):
    damage(store_dir, f"UPDATE sessions SET {column} = ?", b"\x00")
    with pytest.raises(SessionError, match="seconds since the epoch"):
        list_sessions(store_dir)
    for argv in (["sessions", "list", str(store_dir)], ["sessions", "show", str(store_dir), "s1"]):
        assert main(argv) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_turn_record_nested_100k_deep_is_refused_by_list(store_dir):
    damage(store_dir, "UPDATE turns SET record = ?", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(SessionError, match="nested deeper"):
        list_sessions(store_dir)


def test_a_dropped_table_is_not_silently_re_created(store_dir):
    damage(store_dir, "DROP TABLE messages")
    with pytest.raises(SessionError, match="no messages table: the store is damaged"):
        SessionStore(store_dir)
    with sqlite3.connect(store_dir / FILE_NAME) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert "messages" not in tables


def test_a_negative_schema_version_is_refused(store_dir):
    damage(store_dir, "PRAGMA user_version = -5")
    with pytest.raises(SessionError, match="schema version -5"):
        SessionStore(store_dir)
    with pytest.raises(SessionError, match="schema version -5"):
        list_sessions(store_dir)


def test_a_sound_history_still_loads_and_goes_on(store_dir):
    session = SessionStore(store_dir).load("s1", support_chat.make_llm(),
                                           support_chat.make_tools(), config=support_chat.CONFIG)
    assert session.send(support_chat.QUESTIONS[1]).final_text
