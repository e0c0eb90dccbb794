"""``python -m primer approvals list / approve / resume``: output and exit codes."""

from __future__ import annotations

import pytest

from primer.__main__ import main
from primer.commands.hints import interpreter
from primer.scenarios import get_demo
from primer.scenarios.refunds import DELAY_ENV, LEDGER_ENV


@pytest.fixture
def paused(tmp_path, monkeypatch):
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "ledger.sqlite"))
    monkeypatch.delenv(DELAY_ENV, raising=False)
    return get_demo("refund").run(checkpoint_dir=str(tmp_path / "ck"))


def test_approvals_list_shows_the_pending_call_with_its_arguments(paused, tmp_path, capsys):
    assert main(["approvals", "list", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "run-001.jsonl: awaiting_approval" in out
    assert f"{paused.pending[0]['id']}  issue_refund(" in out and "undecided" in out


def test_approve_then_resume_finishes_the_run(paused, capsys):
    call_id = paused.pending[0]["id"]
    assert main(["approve", paused.checkpoint, call_id, "--yes"]) == 0
    assert main(["resume", paused.checkpoint, "--scenario", "refund"]) == 0
    out = capsys.readouterr().out
    assert f"approved {call_id}" in out and "stop cause: end_turn" in out


def test_resume_of_an_undecided_run_says_what_still_awaits_approval(paused, capsys):
    assert main(["resume", paused.checkpoint, "--scenario", "refund"]) == 0
    out = capsys.readouterr().out
    assert "stop cause: awaiting_approval" in out
    assert f"awaiting approval: {paused.pending[0]['id']} issue_refund" in out


def test_an_unknown_tool_use_id_exits_2_with_the_known_ids(paused, capsys):
    assert main(["approve", paused.checkpoint, "toolu_nope", "--no"]) == 2
    err = capsys.readouterr().err
    assert "no call with tool_use_id 'toolu_nope'" in err and paused.pending[0]["id"] in err


def test_a_corrupt_checkpoint_exits_2_and_runs_nothing(paused, capsys):
    with open(paused.checkpoint, "a") as f:
        f.write("}\n")  # a whole line that no one signed
    assert main(["resume", paused.checkpoint, "--scenario", "refund"]) == 2
    err = capsys.readouterr().err
    assert "does not match its signature" in err and "Nothing was run" in err


def test_an_unknown_scenario_exits_2_with_the_known_names(paused, capsys):
    assert main(["resume", paused.checkpoint, "--scenario", "nope"]) == 2
    assert "refund" in capsys.readouterr().err


def test_approve_needs_yes_or_no(paused):
    with pytest.raises(SystemExit) as e:
        main(["approve", paused.checkpoint, "toolu_x"])
    assert e.value.code == 2


def test_approvals_list_of_a_missing_directory_exits_2(tmp_path, capsys):
    assert main(["approvals", "list", str(tmp_path / "nowhere")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_approve_prints_the_resume_command_without_the_recorded_scenario(paused, capsys):
    assert main(["approve", paused.checkpoint, paused.pending[0]["id"], "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"run `{interpreter()} -m primer resume {paused.checkpoint}` to continue" in out
    assert "--scenario" not in out


def test_resume_without_scenario_uses_the_one_the_checkpoint_records(paused, capsys):
    assert main(["approve", paused.checkpoint, paused.pending[0]["id"], "--yes"]) == 0
    assert main(["resume", paused.checkpoint]) == 0
    assert "Refunded 40.00 USD" in capsys.readouterr().out


def test_resume_with_the_wrong_scenario_suggests_the_recorded_one(paused, capsys):
    assert main(["approve", paused.checkpoint, paused.pending[0]["id"], "--yes"]) == 0
    assert main(["resume", paused.checkpoint, "--scenario", "orders"]) == 2
    err = capsys.readouterr().err
    assert "issue_refund" in err and "--scenario refund" in err


def test_resume_of_a_checkpoint_without_a_scenario_asks_for_one(tmp_path, capsys):
    from primer.harness.production import run_production
    from primer.loop.config import AgentConfig

    demo = get_demo("refund")
    paused = run_production(demo.make_llm(), demo.task, demo.make_tools(), system=demo.system,
                            config=AgentConfig(checkpoint_dir=str(tmp_path / "bare")))
    assert main(["resume", paused.checkpoint]) == 2
    assert "pass --scenario NAME" in capsys.readouterr().err


def test_approvals_list_of_one_checkpoint_file_shows_its_calls(paused, capsys):
    assert main(["approvals", "list", paused.checkpoint]) == 0
    out = capsys.readouterr().out
    assert "is one checkpoint file" in out and "no such directory" not in out
    assert f"{paused.pending[0]['id']}  issue_refund(" in out
