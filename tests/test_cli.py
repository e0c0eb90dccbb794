"""``python -m primer demo``: list the demos, run one offline, refuse unknown names clearly.

Most tests register a tiny fake scenario, so they test the command and not the scenarios;
the last ones run the course's real order-A123 demos.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import primer.scenarios as scenarios
from primer.__main__ import main, missing_packages_line
from primer.commands.hints import interpreter
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.tools import tool
from primer.scenarios import Scenario

ROOT = Path(__file__).resolve().parent.parent


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def tiny(name="tiny", script=None, **config):
    return Scenario(name=name, description="a two-step demo for the tests",
                    task="What is the value of k?", make_tools=lambda: [lookup],
                    make_llm=lambda: ScriptedLLM(script or [tool_reply(("lookup", {"key": "k"})),
                                                            "The value is 'value of k'."]),
                    config=AgentConfig(**config))


@pytest.fixture
def fake_demos(monkeypatch):
    """Replace the registry with two fake demos; the real scenario modules are not imported."""
    demos = {"tiny": tiny(), "tiny-stuck": tiny("tiny-stuck", max_steps=1)}
    monkeypatch.setattr(scenarios, "DEMOS", demos)
    monkeypatch.setattr(scenarios, "SCENARIO_MODULES", [])
    return demos


def test_demo_list_prints_each_demo_with_its_description(fake_demos, capsys):
    assert main(["demo", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["tiny", "tiny-stuck"]
    assert all(line.endswith("a two-step demo for the tests") for line in lines)


def test_demo_prints_the_scenario_the_trace_table_the_stop_cause_and_the_answer(fake_demos,
                                                                                capsys):
    assert main(["demo", "tiny"]) == 0
    out = capsys.readouterr().out
    expected = fake_demos["tiny"].run()
    assert out.startswith("tiny: a two-step demo for the tests\ntask: What is the value of k?")
    assert expected.table() in out
    assert out.rstrip().endswith("answer: The value is 'value of k'.")


def test_a_run_stopped_by_a_limit_exits_0_and_prints_no_answer(fake_demos, capsys):
    assert main(["demo", "tiny-stuck"]) == 0
    out = capsys.readouterr().out
    assert "stop cause: max_steps" in out and "answer:" not in out


def test_demo_json_prints_the_whole_result_as_json(fake_demos, capsys):
    assert main(["demo", "tiny", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_cause"] == "end_turn"
    assert result["final_text"] == "The value is 'value of k'."
    assert len(result["steps"]) == 2 and result["messages"][0]["role"] == "user"


def test_an_unknown_name_exits_2_listing_the_known_names_without_a_traceback(fake_demos,
                                                                             capsys):
    assert main(["demo", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no demo named 'nope'" in captured.err
    assert "known demos: tiny, tiny-stuck" in captured.err
    assert "Traceback" not in captured.err


def test_demo_without_a_name_exits_2_and_shows_the_list(fake_demos, capsys):
    assert main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "give a demo NAME" in err and "tiny-stuck" in err


# ---------------------------------------------------------------- the course's real demos

ORDER_DEMOS = ["orders", "orders-repeat", "orders-wander", "orders-budget", "pto", "burner"]


def test_demo_list_includes_the_course_demos(capsys):
    assert main(["demo", "--list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()}
    assert set(ORDER_DEMOS) <= listed


def test_demo_orders_answers_5900_and_stops_on_end_turn(capsys):
    assert main(["demo", "orders"]) == 0
    out = capsys.readouterr().out
    assert "stop cause: end_turn" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("answer:") and "5900.0" in last
    assert 2500 * 2 * 1.18 == pytest.approx(5900.0)


@pytest.mark.parametrize("name, cause", [("orders-repeat", "loop_detected"),
                                         ("orders-wander", "max_steps"),
                                         ("orders-budget", "token_budget")])
def test_each_order_model_ends_on_its_own_exit_and_exits_0(name, cause, capsys):
    assert main(["demo", name]) == 0
    out = capsys.readouterr().out
    assert f"stop cause: {cause}" in out and "answer:" not in out


def test_a_paused_demo_without_a_checkpoint_dir_says_how_to_save_one_and_writes_nothing(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIMER_REFUND_LEDGER", raising=False)
    assert main(["demo", "refund"]) == 0
    out = capsys.readouterr().out
    assert "stop cause: awaiting_approval" in out
    assert "issue_refund" in out and "--checkpoint-dir DIR" in out
    assert "none of the paused reply's calls ran, not even lookup_customer" in out
    assert "the calls that need no approval run first" in out
    assert list(tmp_path.iterdir()) == []


def test_a_paused_demo_with_a_checkpoint_dir_prints_the_approve_and_resume_commands(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIMER_REFUND_LEDGER", raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert main(["demo", "refund", "--checkpoint-dir", "ck"]) == 0
    out = capsys.readouterr().out
    checkpoint = next((tmp_path / "ck").glob("run-*.jsonl")).relative_to(tmp_path)
    call_id = next(line.split()[5] for line in out.splitlines() if "primer approve" in line)
    assert f"  .venv/bin/python -m primer approve {checkpoint} {call_id} --yes" in out
    # the checkpoint records its scenario, so resume needs no --scenario
    assert out.rstrip().endswith(f"\n  .venv/bin/python -m primer resume {checkpoint}")
    assert main(["approve", str(checkpoint), call_id, "--yes"]) == 0
    assert main(["resume", str(checkpoint), "--scenario", "refund"]) == 0
    assert "Refunded 40.00 USD" in capsys.readouterr().out


# ---------------------------------------------------------------- output paths

def test_a_trace_in_a_missing_directory_exits_2_and_creates_nothing(fake_demos, tmp_path,
                                                                    capsys):
    target = tmp_path / "missing" / "dir" / "t.jsonl"
    assert main(["demo", "tiny", "--trace", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert f"the directory {target.parent} does not exist" in captured.err
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_dir_whose_parent_is_missing_exits_2_and_creates_nothing(
        fake_demos, tmp_path, capsys):
    assert main(["demo", "tiny", "--checkpoint-dir", str(tmp_path / "a" / "b")]) == 2
    assert f"the directory {tmp_path / 'a'} does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_trace_the_os_refuses_to_write_is_one_line_and_exit_2(fake_demos, capsys):
    assert main(["demo", "tiny", "--trace", "/proc/x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == "demo: cannot use /proc/x.jsonl: No such file or directory\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_checkpoint_dir_the_os_refuses_is_one_line_and_exit_2(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIMER_REFUND_LEDGER", raising=False)
    assert main(["demo", "refund", "--checkpoint-dir", "/proc/forbidden"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("demo: cannot write the checkpoint journal in /proc/forbidden")
    assert err.count("\n") == 1


# ---------------------------------------------------------------- no command

def test_no_command_prints_a_hint_then_the_help_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    first, rest = err.split("\n", 1)
    assert first == (f"python -m primer: choose a command, e.g. {interpreter()} -m primer "
                     f"demo orders")
    assert rest.startswith(f"usage: {interpreter()} -m primer")


def test_hints_name_the_command_as_typed_here(fake_demos, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    assert main(["demo", "nope"]) == 2
    assert "Run `.venv/bin/python -m primer demo --list` for" in capsys.readouterr().err
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "e.g. .venv/bin/python -m primer demo orders\nusage: .venv/bin/python -m primer" in err


# ---------------------------------------------------------------- a Python without the packages

def test_a_python_without_the_course_packages_prints_one_line_naming_the_command():
    # -S: no site-packages, as with a system python3 run from the checkout
    done = subprocess.run([sys.executable, "-S", "-m", "primer", "demo", "--list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "lacks the course's packages (no module named" in lines[0]
    assert lines[0].endswith("run it with the course's environment: "
                             ".venv/bin/python -m primer demo --list (`make lab` sets it up)")


def test_the_missing_packages_line_names_the_venv_by_its_full_path_from_elsewhere(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = missing_packages_line("fastjsonschema", ["sessions", "show", "my dir", "x"])
    assert f"{ROOT / '.venv' / 'bin' / 'python'} -m primer sessions show 'my dir' x" in line
