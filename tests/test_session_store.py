"""Sessions in SQLite: saved after each turn, loaded elsewhere, listed; bad stores refused."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

from primer.harness.sessions.session import SessionCapReached, SessionError
from primer.harness.sessions.store import (
    FILE_NAME,
    SCHEMA_VERSION,
    SessionStore,
    list_sessions,
    read_session,
)
from primer.loop.messages import user_message
from primer.loop.state import StopCause
from primer.scenarios import support_chat

T0 = 1_750_000_000.0


def new_support(store: SessionStore, session_id: str = "support-42"):
    return store.new(support_chat.make_llm(), support_chat.make_tools(), session_id=session_id,
                     system=support_chat.SYSTEM, config=support_chat.CONFIG)


def load_support(store: SessionStore, session_id: str = "support-42"):
    return store.load(session_id, support_chat.make_llm(), support_chat.make_tools(),
                      config=support_chat.CONFIG)


def message_rows(store: SessionStore, session_id: str = "support-42") -> list[tuple]:
    with sqlite3.connect(store.path) as db:
        return db.execute("SELECT rowid, position FROM messages WHERE session_id = ? "
                          "ORDER BY position", (session_id,)).fetchall()


def test_a_session_is_saved_after_each_turn_and_loads_back_the_same(tmp_path):
    store = SessionStore(tmp_path)
    session = new_support(store)
    session.send(support_chat.QUESTIONS[0])
    session.send(support_chat.QUESTIONS[1])
    again = load_support(SessionStore(tmp_path))
    assert again.messages == session.messages
    assert again.turns == session.turns
    assert (again.id, again.system) == ("support-42", support_chat.SYSTEM)
    assert again.usage == session.usage


def test_a_loaded_session_goes_on_with_its_memory(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store).send(support_chat.QUESTIONS[0])
    later = load_support(SessionStore(tmp_path))
    answer = later.send(support_chat.QUESTIONS[1]).final_text
    assert answer.startswith("Returning one keyboard from order A123 refunds 2950.0 rupees")
    assert [t.index for t in read_session(tmp_path, "support-42").turns] == [1, 2]


def test_a_session_saved_in_one_process_goes_on_in_another(tmp_path):
    new_support(SessionStore(tmp_path)).send(support_chat.QUESTIONS[0])
    script = textwrap.dedent(f"""
        from primer.harness.sessions.store import SessionStore
        from primer.scenarios import support_chat
        s = SessionStore({str(tmp_path)!r}).load("support-42", support_chat.make_llm(),
                                                  support_chat.make_tools())
        print(s.send({support_chat.QUESTIONS[1]!r}).final_text)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "refunds 2950.0 rupees" in out
    assert read_session(tmp_path, "support-42").turns[-1].index == 2


def test_a_save_appends_the_new_messages_and_leaves_the_earlier_rows_alone(tmp_path):
    store = SessionStore(tmp_path)
    session = new_support(store)
    session.send(support_chat.QUESTIONS[0])
    before = message_rows(store)
    session.send(support_chat.QUESTIONS[1])
    after = message_rows(store)
    assert after[: len(before)] == before
    assert [p for _, p in after] == list(range(len(session.messages)))


def test_a_rewritten_history_is_saved_from_the_first_message_that_changed(tmp_path):
    store = SessionStore(tmp_path)
    session = new_support(store)
    session.send(support_chat.QUESTIONS[0])
    session.messages = [user_message("(summary of earlier turns)"), *session.messages[-1:]]
    store.save(session)
    assert read_session(tmp_path, "support-42").messages == session.messages


def test_a_session_another_process_went_on_with_is_not_overwritten(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store).send(support_chat.QUESTIONS[0])
    here, there = load_support(SessionStore(tmp_path)), load_support(SessionStore(tmp_path))
    there.send(support_chat.QUESTIONS[1])
    saved = read_session(tmp_path, "support-42")
    with pytest.raises(SessionError, match="the session changed since it was loaded; "
                                           "load it again"):
        here.send(support_chat.QUESTIONS[2])
    assert read_session(tmp_path, "support-42") == saved


def test_two_copies_loaded_from_one_store_cannot_both_go_on(tmp_path):
    store = SessionStore(tmp_path)
    capped_support(store, max_turns=2).send(support_chat.QUESTIONS[0])
    one, two = (store.load("capped", support_chat.make_llm(), support_chat.make_tools(),
                           config=support_chat.CONFIG) for _ in range(2))
    one.send(support_chat.QUESTIONS[1])
    saved = read_session(tmp_path, "capped")
    with pytest.raises(SessionError, match="the session changed since it was loaded; load it "
                                           "again"):
        two.send(support_chat.QUESTIONS[2])
    assert read_session(tmp_path, "capped") == saved and len(saved.turns) == 2
    again = store.load("capped", support_chat.make_llm())
    with pytest.raises(SessionCapReached, match="max_turns"):
        again.send(support_chat.QUESTIONS[2])


def test_a_reply_that_ends_in_a_space_is_saved_and_loads_back(tmp_path):
    from primer.loop.model import ScriptedLLM

    store = SessionStore(tmp_path)
    session = store.new(ScriptedLLM(lambda messages: "ok "), session_id="spacey")
    session.send("Hello")
    loaded = store.load("spacey", ScriptedLLM(lambda messages: "fine"))
    assert loaded.messages == session.messages
    loaded.send("And again?")
    assert read_session(tmp_path, "spacey").turns[-1].final_text == "fine"


def test_a_message_that_is_not_json_is_refused_and_nothing_is_written(tmp_path):
    store = SessionStore(tmp_path)
    session = new_support(store)
    session.send(support_chat.QUESTIONS[0])
    saved = read_session(tmp_path, "support-42")
    session.messages = [*session.messages, user_message([{"type": "text", "text": object()}])]
    with pytest.raises(SessionError, match=r"not JSON \(.*\); nothing was saved"):
        store.save(session)
    assert read_session(tmp_path, "support-42") == saved


def test_ids_are_unique_and_of_a_plain_form(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store)
    with pytest.raises(SessionError, match="already in"):
        new_support(store)
    with pytest.raises(SessionError, match="letters, digits"):
        new_support(store, "../escape")
    assert store.new(support_chat.make_llm()).id.startswith("session-")


def test_loading_an_unknown_session_names_the_ones_there_are(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store)
    with pytest.raises(SessionError, match="no session 'nope' in .*; it holds support-42"):
        load_support(store, "nope")


def test_a_session_not_from_this_store_cannot_be_saved_in_it(tmp_path):
    from primer.harness.sessions.session import Session

    store = SessionStore(tmp_path)
    with pytest.raises(SessionError, match="not created or loaded by this store"):
        Session(support_chat.make_llm(), store=store).send("Hello")


def test_the_listing_has_each_sessions_size_totals_and_last_turn_oldest_first(tmp_path):
    clock = iter([T0, T0, T0 + 60, T0 + 120, T0 + 180]).__next__
    store = SessionStore(tmp_path, clock=clock)
    first = new_support(store)                     # created at T0
    store.new(support_chat.make_llm(), session_id="empty")   # T0
    first.send(support_chat.QUESTIONS[0])          # updated at T0 + 60
    infos = list_sessions(tmp_path)
    assert [i.id for i in infos] == ["empty", "support-42"]
    empty, s = infos
    assert (empty.turns, empty.messages, empty.last_task, empty.updated_at) == (0, 0, None, T0)
    assert (s.turns, s.messages, s.usage, s.last_stop_cause) == (
        1, len(first.messages), first.usage, StopCause.END_TURN)
    assert s.describe() == (
        f"support-42: 1 turns, {len(first.messages)} messages, "
        f"{first.usage.total_tokens:,} tokens, {first.cost_usd:.4f} USD, updated "
        f"2025-06-15 15:07 UTC; last: 'What does order A123 cost in total with 18% GST?' "
        f"-> end_turn")
    assert store.sessions() == infos


def test_listing_only_reads_and_a_directory_without_a_store_holds_none(tmp_path):
    assert list_sessions(tmp_path) == []
    assert not (tmp_path / FILE_NAME).exists()
    with pytest.raises(SessionError, match="does not exist"):
        list_sessions(tmp_path / "missing")


def test_delete_removes_a_session_and_everything_stored_with_it(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store).send(support_chat.QUESTIONS[0])
    assert store.delete("support-42") and not store.delete("support-42")
    assert message_rows(store) == [] and store.sessions() == []


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path):
    (tmp_path / FILE_NAME).write_text("not a database, just text\n" * 100)
    with pytest.raises(SessionError, match="is not a session store"):
        SessionStore(tmp_path)
    with pytest.raises(SessionError, match="is not a session store"):
        list_sessions(tmp_path)


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    SessionStore(tmp_path)
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(SessionError, match="newer primer"):
        SessionStore(tmp_path)


def test_a_directory_is_made_only_inside_one_that_exists(tmp_path):
    SessionStore(tmp_path / "new")
    assert (tmp_path / "new" / FILE_NAME).is_file()
    with pytest.raises(SessionError, match="does not exist; create it first"):
        SessionStore(tmp_path / "no" / "such")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SessionError, match="is a file"):
        SessionStore(tmp_path / "file")


def capped_support(store: SessionStore, **caps):
    return store.new(support_chat.make_llm(), support_chat.make_tools(), session_id="capped",
                     system=support_chat.SYSTEM, config=support_chat.CONFIG, **caps)


def test_a_sessions_caps_are_stored_and_a_loaded_session_keeps_them(tmp_path):
    caps = {"max_turns": 2, "max_tokens_total": 50_000, "max_cost_usd": 0.5}
    capped_support(SessionStore(tmp_path), **caps).send(support_chat.QUESTIONS[0])
    assert read_session(tmp_path, "capped").caps == caps
    later = load_support(SessionStore(tmp_path), "capped")
    assert later.caps == caps
    later.send(support_chat.QUESTIONS[1])
    again = load_support(SessionStore(tmp_path), "capped")
    with pytest.raises(SessionCapReached, match="has had 2 turns, its max_turns is 2") as e:
        again.send(support_chat.QUESTIONS[2])
    assert e.value.cap == "max_turns" and len(read_session(tmp_path, "capped").turns) == 2


def test_a_cap_given_at_load_replaces_the_stored_one_and_is_saved_with_the_next_turn(tmp_path):
    capped_support(SessionStore(tmp_path), max_turns=1,
                   max_cost_usd=0.5).send(support_chat.QUESTIONS[0])
    raised = SessionStore(tmp_path).load("capped", support_chat.make_llm(),
                                         support_chat.make_tools(), config=support_chat.CONFIG,
                                         max_turns=3, max_cost_usd=None)
    assert raised.caps == {"max_turns": 3, "max_tokens_total": None, "max_cost_usd": None}
    assert read_session(tmp_path, "capped").caps["max_turns"] == 1   # not saved yet
    raised.send(support_chat.QUESTIONS[1])
    assert read_session(tmp_path, "capped").caps == raised.caps


def test_a_session_without_caps_stores_none_and_a_bad_cap_stores_nothing(tmp_path):
    store = SessionStore(tmp_path)
    new_support(store)
    assert read_session(tmp_path, "support-42").caps == dict.fromkeys(
        ("max_turns", "max_tokens_total", "max_cost_usd"))
    with pytest.raises(ValueError, match="max_turns is a whole number of turns above 0"):
        capped_support(store, max_turns=0)
    assert [i.id for i in store.sessions()] == ["support-42"]


@pytest.mark.parametrize("caps, why", [
    ("not json", "its caps column is not JSON"),
    ('["max_turns"]', "its caps are not a JSON object"),
    ('{"max_turns": 0}', "max_turns is a whole number of turns above 0"),
    ('{"max_fun": 1}', "'max_fun' is not a cap"),
])
def test_damaged_caps_are_refused_before_anything_is_sent(tmp_path, caps, why):
    capped_support(SessionStore(tmp_path), max_turns=5).send(support_chat.QUESTIONS[0])
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE sessions SET caps = ?", (caps,))
    with pytest.raises(SessionError, match="session 'capped'") as e:
        SessionStore(tmp_path).load("capped", support_chat.make_llm())
    assert why in str(e.value) and "the store is damaged" in str(e.value)


@pytest.mark.parametrize("caps", ["{}", '{"max_turns": null}'])
def test_caps_that_do_not_name_every_cap_are_refused_not_read_as_no_cap(tmp_path, caps):
    capped_support(SessionStore(tmp_path), max_turns=1).send(support_chat.QUESTIONS[0])
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE sessions SET caps = ?", (caps,))
    with pytest.raises(SessionError, match="max_cost_usd is missing.*the store is damaged"):
        SessionStore(tmp_path).load("capped", support_chat.make_llm())


def test_a_version_2_store_whose_caps_column_was_dropped_is_damaged(tmp_path):
    capped_support(SessionStore(tmp_path), max_turns=1).send(support_chat.QUESTIONS[0])
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("ALTER TABLE sessions DROP COLUMN caps")
    for read in (lambda: SessionStore(tmp_path).load("capped", support_chat.make_llm()),
                 lambda: read_session(tmp_path, "capped")):
        with pytest.raises(SessionError, match="schema version 2.*no caps column.*damaged"):
            read()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:  # nothing was added back
        assert not any(r[1] == "caps" for r in db.execute("PRAGMA table_info(sessions)"))


V1_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, system TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE messages (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (session_id, position));
CREATE TABLE turns (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (session_id, turn));
INSERT INTO sessions VALUES ('old', '', 1750000000.0, 1750000000.0);
PRAGMA user_version = 1;
"""


def test_a_store_of_schema_version_1_is_read_as_uncapped_and_gets_its_caps_column(tmp_path):
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.executescript(V1_SCHEMA)
    assert read_session(tmp_path, "old").caps["max_turns"] is None     # read only: unchanged
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    old = SessionStore(tmp_path).load("old", support_chat.make_llm(), max_turns=1)
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    old.send("Hello")
    assert read_session(tmp_path, "old").caps["max_turns"] == 1
