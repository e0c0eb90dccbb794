"""The command lines printed for pasting name the Python that is running."""

from __future__ import annotations

import sys

from primer.commands.hints import interpreter, primer_command


def test_an_interpreter_under_the_current_directory_is_named_by_its_relative_path(tmp_path):
    exe = tmp_path / ".venv" / "bin" / "python"
    assert interpreter(str(exe), tmp_path) == ".venv/bin/python"


def test_an_interpreter_in_the_current_directory_itself_gets_a_dot_slash(tmp_path):
    assert interpreter(str(tmp_path / "python3"), tmp_path) == "./python3"


def test_an_interpreter_outside_the_current_directory_is_plain_python(tmp_path):
    assert interpreter("/usr/bin/python3", tmp_path / "work") == "python"


def test_an_unknown_interpreter_is_plain_python(tmp_path):
    assert interpreter("", tmp_path) == "python"


def test_a_path_with_a_space_is_quoted_for_the_shell(tmp_path):
    exe = tmp_path / "my env" / "bin" / "python"
    assert interpreter(str(exe), tmp_path) == "'my env/bin/python'"


def test_the_printed_command_uses_the_running_interpreter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert primer_command("resume", "ck/run-001.json") == \
        ".venv/bin/python -m primer resume ck/run-001.json"
