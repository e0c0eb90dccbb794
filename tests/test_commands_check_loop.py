"""``python -m primer check-loop``: the coding round's checker on a learner's own file."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from primer.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def cell(notebook: str, tag: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / notebook, as_version=4)
    return next(c.source for c in nb.cells if tag in c.get("metadata", {}).get("tags", []))


def solution_source() -> str:
    """Lesson 14's folded reference loop, without the cell's own call of the checker."""
    source = cell("14_the_interview_rounds.ipynb", "exercise-solution")
    assert source.endswith("\nreport = check_loop(my_loop)")
    return source.removesuffix("report = check_loop(my_loop)")


def test_the_reference_solution_in_a_file_exits_0_with_full_marks(tmp_path, capsys):
    loop = tmp_path / "loop.py"
    loop.write_text(solution_source())
    assert main(["check-loop", str(loop)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "score: 11/11"


def test_a_loop_that_never_calls_the_model_gets_fail_lines_not_a_traceback(tmp_path, capsys):
    loop = tmp_path / "stub.py"
    loop.write_text("def my_loop(model, task, tools, *, max_steps, token_budget):\n"
                    "    return {'answer': None, 'stop_cause': 'max_steps'}\n")
    assert main(["check-loop", str(loop)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "score: 0/11"
    assert all(ln.startswith("FAIL  ") and "without calling the model" in ln
               for ln in lines[:-1])


def test_the_starter_exits_1_and_names_the_crashing_line_from_its_def(tmp_path, capsys):
    loop = tmp_path / "starter.py"
    loop.write_text("# my first try\n\n" + cell("14_the_interview_rounds.ipynb", "exercise-starter")
                    .replace("def my_loop", "def first_try"))
    assert main(["check-loop", f"{loop}:first_try"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "score: 1/11"
    assert "KeyError: 'lookup_order' at line 10 of first_try: `output = tools[" in out
    assert str(tmp_path) not in out


@pytest.mark.parametrize("write, target, message", [
    (None, "missing.py", "no file"),
    ("def other(): pass\n", "loop.py", "has no function 'my_loop'; functions in it: other"),
    ("import nonexistent_module_xyz\n", "loop.py", "failed to import: ModuleNotFoundError"),
])
def test_a_file_that_cannot_be_loaded_exits_2_saying_why(tmp_path, capsys, write, target,
                                                          message):
    if write is not None:
        (tmp_path / target).write_text(write)
    assert main(["check-loop", str(tmp_path / target)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err


def test_help_spells_out_the_loop_and_model_interfaces(capsys):
    with pytest.raises(SystemExit):
        main(["check-loop", "--help"])
    out = capsys.readouterr().out
    assert "my_loop(model, task, tools, *, max_steps, token_budget)" in out
    assert "model(messages, tool_definitions) -> reply dict" in out
    assert '{"answer": str | None, "stop_cause": str}' in out


def test_a_loop_with_the_wrong_signature_gets_one_message_with_the_right_one(tmp_path, capsys):
    loop = tmp_path / "loop.py"
    loop.write_text("def my_loop(model, task, tools):\n"
                    "    return {'answer': None, 'stop_cause': 'max_steps'}\n")
    assert main(["check-loop", str(loop)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "score:" not in captured.err
    assert captured.err.count("unexpected keyword argument 'max_steps'") == 1
    assert "my_loop(model, task, tools, *, max_steps, token_budget)" in captured.err
    assert "Traceback" not in captured.err


def test_calling_the_model_as_in_the_early_lessons_is_explained_once(tmp_path, capsys):
    loop = tmp_path / "loop.py"
    loop.write_text(
        "def my_loop(model, task, tools, *, max_steps, token_budget):\n"
        "    messages = [{'role': 'user', 'content': task}]\n"
        "    model(system='', messages=messages, tools=tools.definitions, max_tokens=1024)\n")
    assert main(["check-loop", str(loop)]) == 1
    err = capsys.readouterr().err
    assert err.count("in this exercise the model is called as "
                     "model(messages, tool_definitions)") == 1
    assert "the LLM protocol of lessons 01-05" in err and "at line 3 of my_loop" in err


def test_a_loop_sending_a_tools_raw_dict_is_told_what_the_api_refuses(tmp_path, capsys):
    source = solution_source().replace(
        "output if isinstance(output, str) else json.dumps(output)", "output")
    loop = tmp_path / "loop.py"
    loop.write_text(source)
    assert main(["check-loop", str(loop)]) == 1
    out = capsys.readouterr().out
    assert ("FAIL  happy path: call 2 would be refused by the Messages API (HTTP 400: "
            "messages.2.content.0.content: Input should be a valid string or list of content "
            "blocks); a tool_result's content is a string or a list of text blocks") in out
