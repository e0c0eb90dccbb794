"""``python -m primer sessions list DIR`` and ``sessions show DIR ID``: read-only, clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from primer.__main__ import main
from primer.commands.hints import interpreter
from primer.harness.sessions.store import FILE_NAME, SessionStore
from primer.harness.summaries import render_lines
from primer.scenarios import support_chat

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_750_000_000.0


@pytest.fixture
def store_dir(tmp_path):
    store = SessionStore(tmp_path, clock=lambda: T0)
    session = store.new(support_chat.make_llm(), support_chat.make_tools(),
                        session_id="support-42", system=support_chat.SYSTEM)
    for question in support_chat.QUESTIONS[:2]:
        session.send(question)
    store.new(support_chat.make_llm(), session_id="later")
    return tmp_path, session


def one_line_error(capsys, argv: list[str], code: int) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_list_prints_one_line_per_session(capsys, store_dir):
    directory, session = store_dir
    assert main(["sessions", "list", str(directory)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "later: 0 turns, 0 messages, 0 tokens, 0.0000 USD, updated 2025-06-15 15:06 UTC; "
        "no turns yet",
        f"support-42: 2 turns, {len(session.messages)} messages, "
        f"{session.usage.total_tokens:,} tokens, {session.cost_usd:.4f} USD, updated "
        f"2025-06-15 15:06 UTC; last: 'I want to return one of the keyboards. How much d…' "
        f"-> end_turn"]


def test_list_takes_the_store_file_too(capsys, store_dir):
    directory, _ = store_dir
    assert main(["sessions", "list", str(directory / FILE_NAME)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_list_of_a_directory_without_sessions_says_so_and_creates_nothing(capsys, tmp_path):
    assert main(["sessions", "list", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no sessions in {tmp_path}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_does_not_exist_is_one_line_and_exit_code_2(capsys, tmp_path):
    line = one_line_error(capsys, ["sessions", "list", str(tmp_path / "nope")], 2)
    assert line == f"sessions list: {tmp_path / 'nope'} does not exist"
    line = one_line_error(capsys, ["sessions", "show", str(tmp_path / "nope"), "x"], 2)
    assert line == f"sessions show: {tmp_path / 'nope'} does not exist"


def test_a_file_that_is_not_a_store_is_one_line_and_exit_code_2(capsys, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n" * 200)
    line = one_line_error(capsys, ["sessions", "list", str(bad)], 2)
    assert line.startswith(f"sessions list: {bad} is not a session store")


def test_show_prints_the_turns_and_the_conversation(capsys, store_dir):
    directory, session = store_dir
    assert main(["sessions", "show", str(directory), "support-42"]) == 0
    out = capsys.readouterr().out
    table, conversation, note = out.split("\n\n")
    assert table == session.table()
    assert len(conversation.splitlines()) == len(session.transcript().splitlines())
    assert "called calculator({\"expression\":\"2500 * 1.18\"})" in conversation
    assert note.startswith("(texts and results longer than 100 characters are cut")


def test_show_marks_every_cut_with_what_it_left_out_and_says_how_to_see_it_whole(
        capsys, store_dir, monkeypatch):
    directory, session = store_dir
    monkeypatch.chdir(directory)
    assert main(["sessions", "show", ".", "support-42", "--chars", "40"]) == 0
    out = capsys.readouterr().out
    whole = render_lines(session.messages, None)
    shown = out.split("\n\n")[1].splitlines()
    cuts = 0
    for full_line, line in zip(whole, shown, strict=True):
        if full_line == line:
            continue
        cuts += 1
        kept, left = line.rsplit("…[+", 1)
        assert full_line.startswith(kept) and left.endswith(" chars]")
        assert len(kept) + int(left.split(" ")[0]) == len(full_line), line
    assert cuts >= 2
    assert out.rstrip().splitlines()[-1] == (
        f"(texts and results longer than 40 characters are cut, each cut marked …[+K chars]; "
        f"see them whole with: {interpreter()} -m primer sessions show . support-42 --full)")


def test_show_full_prints_every_text_and_result_whole(capsys, store_dir):
    directory, session = store_dir
    assert main(["sessions", "show", str(directory), "support-42", "--full"]) == 0
    out = capsys.readouterr().out
    table, conversation = out.split("\n\n")
    assert conversation.splitlines() == render_lines(session.messages, None)
    assert "…" not in conversation and session.messages[-1]["content"][0]["text"] in out


def test_show_of_an_unknown_session_names_the_known_ones(capsys, store_dir):
    directory, _ = store_dir
    line = one_line_error(capsys, ["sessions", "show", str(directory), "nope"], 2)
    assert line.endswith("it holds support-42, later") or line.endswith(
        "it holds later, support-42")


def test_no_action_prints_the_help_and_exits_2(capsys):
    assert main(["sessions"]) == 2
    assert "list" in capsys.readouterr().err


def test_the_command_runs_as_a_program(store_dir):
    directory, _ = store_dir
    done = subprocess.run([sys.executable, "-m", "primer", "sessions", "list", str(directory)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.count("\n") == 2 and done.stderr == ""


def test_the_readme_lists_the_sessions_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".venv/bin/python -m primer sessions list DIR" in readme
    assert ".venv/bin/python -m primer sessions show DIR ID" in readme


def test_the_readmes_session_example_prints_what_the_readme_says(capsys, tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## Conversations that go on\n")
    section = readme[start:readme.index("\n## ", start + 1)]
    code = section.split("```python\n")[1].split("```")[0]
    shown = section.split("prints `")[1].split("`")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})  # noqa: S102
    assert capsys.readouterr().out == " ".join(shown.split()) + "\n"
    assert main(["sessions", "list", "sessions"]) == 0
    assert capsys.readouterr().out.startswith("support-42: 2 turns")
