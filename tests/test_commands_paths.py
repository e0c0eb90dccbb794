"""Up-front checks of the paths a command writes to (``primer.commands.paths``)."""

from __future__ import annotations

import errno

from primer.commands.paths import os_error_line, output_dir_problem, output_file_problem


def test_a_file_in_an_existing_directory_is_fine_and_nothing_is_created(tmp_path):
    assert output_file_problem(tmp_path / "t.jsonl", "--trace") is None
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_directory_is_missing_names_the_directory_and_how_to_make_it(tmp_path):
    problem = output_file_problem(tmp_path / "a" / "t.jsonl", "--trace")
    assert problem.startswith(f"--trace {tmp_path / 'a' / 't.jsonl'}: the directory "
                              f"{tmp_path / 'a'} does not exist")
    assert f"mkdir -p {tmp_path / 'a'}" in problem


def test_a_directory_given_as_a_file_is_refused(tmp_path):
    assert "that is a directory" in output_file_problem(tmp_path, "--trace")


def test_a_file_under_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    assert "is not a directory" in output_file_problem(tmp_path / "f" / "t.jsonl", "--trace")


def test_an_output_directory_may_be_new_but_its_parent_must_exist(tmp_path):
    assert output_dir_problem(tmp_path, "--checkpoint-dir") is None
    assert output_dir_problem(tmp_path / "new", "--checkpoint-dir") is None
    problem = output_dir_problem(tmp_path / "a" / "b", "--checkpoint-dir")
    assert f"the directory {tmp_path / 'a'} does not exist" in problem
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_not_an_output_directory(tmp_path):
    (tmp_path / "f").write_text("")
    assert "that is a file" in output_dir_problem(tmp_path / "f", "--trace-dir")


def test_an_os_error_becomes_one_line_naming_the_path():
    e = FileNotFoundError(errno.ENOENT, "No such file or directory", "/proc/x.jsonl")
    assert os_error_line("demo", e) == "demo: cannot use /proc/x.jsonl: No such file or directory"
