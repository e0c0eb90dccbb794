"""A loop written from lesson 14's instructions alone passes ``check-loop``; each way a hurried
candidate breaks it is caught, through the command, with a line that says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from primer.__main__ import main

#: Written from the lesson's text, not from the reference solution.
LEARNER_LOOP = (Path(__file__).parent / "learner_loop.py").read_text()

#: hurried change -> (text replaced, replacement, words of the fix in the first FAIL line)
HURRIED = {
    "sends the raw output": ('"content": json.dumps(out)})', '"content": out})',
                             "send json.dumps(output)"),
    "offers no tools": ("model(messages, tools.definitions)", "model(messages, None)",
                        "pass tools.definitions on every call"),
    "reads the first block": ('text = " ".join(b["text"] for b in reply["content"] if '
                              'b["type"] == "text")', 'text = reply["content"][0]["text"]',
                              "the text of every text block, joined"),
    "skips the budget": ("if used > token_budget:", "if False:",
                         "check the budget before running tools"),
    "one message per result": ('messages.append({"role": "user", "content": results})',
                               'messages.extend({"role": "user", "content": [r]} '
                               'for r in results)', "put all results in one user message"),
    "returns stop_reason": ('"stop_cause": "max_steps"}', '"stop_reason": "max_steps"}',
                            "stop_reason is the model's field"),
    "uses a tool role": ('messages.append({"role": "user", "content": results})',
                         'messages.extend({"role": "tool", "tool_use_id": r["tool_use_id"], '
                         '"content": r["content"]} for r in results)',
                         "tool results go back as tool_result blocks in a user message"),
    "has no step limit": ("last = max_steps", "last = 10**6", "it needs a step limit"),
    "runs the last reply's tools": ("if step == last:", "if False:",
                                    "stop with 'max_steps' before running it"),
    "keeps only the text": ('messages.append({"role": "assistant", "content": reply["content"]})',
                            'messages.append({"role": "assistant", "content": " ".join('
                            'b.get("text", "") for b in reply["content"])})',
                            "keep the reply's tool_use blocks in the assistant message"),
    "runs a cut-off call": ('        if reply["stop_reason"] in ("max_tokens", "refusal"):\n'
                            '            return {"answer": None, "stop_cause": '
                            'reply["stop_reason"]}\n', "",
                            "its input may be half-written"),
    "drops failed calls": ('                results.append({"type": "tool_result", "tool_use_id": '
                           'u["id"], "is_error": True,\n                                '
                           '"content": f"{type(e).__name__}: {e}"})', "                pass",
                           "answer every tool_use of a reply with a tool_result"),
}


def check(tmp_path, source: str, capsys) -> tuple[int, list[str]]:
    loop = tmp_path / "loop.py"
    loop.write_text(source)
    code = main(["check-loop", str(loop)])
    return code, capsys.readouterr().out.splitlines()


def test_the_learners_loop_passes_every_behaviour(tmp_path, capsys):
    code, lines = check(tmp_path, LEARNER_LOOP, capsys)
    assert code == 0 and lines[-1] == "score: 11/11", lines


@pytest.mark.parametrize("change", sorted(HURRIED))
def test_each_hurried_change_is_caught_with_what_to_fix(tmp_path, capsys, change):
    old, new, fix = HURRIED[change]
    assert LEARNER_LOOP.count(old) == 1
    code, lines = check(tmp_path, LEARNER_LOOP.replace(old, new), capsys)
    first = next(line for line in lines if line.startswith("FAIL  "))
    assert code == 1 and fix in first, first


@pytest.mark.parametrize("body", ["sys.exit(0)", "raise SystemExit('x')",
                                  "raise GeneratorExit('x')", "raise BaseException('x')"])
def test_a_loop_that_exits_or_raises_a_base_exception_fails_every_behaviour(tmp_path, capsys,
                                                                             body):
    code, lines = check(tmp_path, f"import sys\n\n\ndef my_loop(model, task, tools, *, "
                                  f"max_steps, token_budget):\n    {body}\n", capsys)
    assert code == 1 and lines[-1] == "score: 0/11", lines


def test_a_file_that_exits_on_import_is_a_load_error(tmp_path, capsys):
    loop = tmp_path / "loop.py"
    loop.write_text("import sys\nsys.exit(0)\n")
    assert main(["check-loop", str(loop)]) == 2
    assert "failed to import: SystemExit" in capsys.readouterr().err


def test_a_return_value_whose_methods_raise_is_a_failure_not_a_crash(tmp_path, capsys):
    source = ("class Bad:\n    def __eq__(self, other):\n        raise RuntimeError('no')\n"
              "    __hash__ = object.__hash__\n\n\n"
              "def my_loop(model, task, tools, *, max_steps, token_budget):\n"
              "    model([{'role': 'user', 'content': task}], tools.definitions)\n"
              "    return {'answer': None, 'stop_cause': Bad()}\n")
    code, lines = check(tmp_path, source, capsys)
    assert code == 1 and lines[-1] == "score: 0/11"
    # the value never reaches the checker's process: it arrives as data naming its type
    assert any("returned stop_cause <Bad object>; use one of" in line for line in lines), lines
