"""AgentDojo's tools, environments and scoring through primer's loop (the extra .[agentdojo])."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("agentdojo")

from agentdojo.functions_runtime import FunctionsRuntime  # noqa: E402
from deepdiff import DeepDiff  # noqa: E402

from primer.harness.evals.agentdojo.limits import would_stop  # noqa: E402
from primer.harness.evals.agentdojo.replay import replay_llm  # noqa: E402
from primer.harness.evals.agentdojo.world import (  # noqa: E402
    SIDE_EFFECTING,
    SUITE_NAMES,
    DojoWorld,
    agentdojo_system_prompt,
    eval_tasks,
    get_suite,
    injection_tasks,
    suite_limits,
    user_tasks,
)
from primer.harness.production import run_production  # noqa: E402
from primer.loop.config import AgentConfig  # noqa: E402
from primer.loop.tools import ToolOutput, ToolRegistry  # noqa: E402


def _run(world: DojoWorld, mode: str = "sequential"):
    config = AgentConfig(**suite_limits(world.suite))
    return run_production(replay_llm(world, mode), world.task.PROMPT, world.tools(),
                          system=agentdojo_system_prompt(), config=config)


def _clock(text: str) -> str:
    """``text`` with each time a tool read from the clock (a sent email's stamp, a file's
    last change: the only stamps with microseconds) masked."""
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d+", "(now)", text)


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_every_tool_offers_agentdojos_own_name_description_and_schema(name):
    suite = get_suite(name)
    world = DojoWorld.new(suite, next(iter(user_tasks(suite))))
    tools = world.tools()
    assert [t.name for t in tools] == [f.name for f in suite.tools]
    for t, f in zip(tools, suite.tools, strict=True):
        assert t.description == f.description
        assert t.input_schema == f.parameters.model_json_schema()
        assert t.side_effecting == (f.name in SIDE_EFFECTING)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE_NAMES)
def test_tool_results_are_byte_identical_to_agentdojos_runtime_and_the_environments_end_equal(
        name):
    # imported here, not at the top: AgentDojo's pipelines bring every provider's SDK (about
    # 4 s), which each test worker would otherwise import while collecting
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline

    suite = get_suite(name)
    for tid, task in user_tasks(suite).items():
        world = DojoWorld.new(suite, tid)
        theirs = DojoWorld.new(suite, tid).env  # AgentDojo's own ground-truth pipeline on a twin
        _, _, theirs, messages, _ = GroundTruthPipeline(task).query(
            task.PROMPT, FunctionsRuntime(suite.tools), theirs)
        expected = [m["content"][0]["content"] for m in messages if m["role"] == "tool"]
        result = _run(world)
        assert [_clock(e.content) for e in result.executions] == list(map(_clock, expected)), tid
        assert not any(e.is_error for e in result.executions), tid
        # equal but for the clock: a sent email is stamped with the time it was sent
        assert not DeepDiff(world.env.model_dump(), theirs.model_dump(),
                            exclude_regex_paths=[r"\['(timestamp|last_modified)'\]$"]), tid


def test_an_error_inside_a_tool_reaches_the_model_as_agentdojos_own_error_text():
    suite = get_suite("banking")
    world = DojoWorld.new(suite, "user_task_0")
    _, expected = FunctionsRuntime(suite.tools).run_function(
        world.pre_env.model_copy(deep=True), "update_scheduled_transaction", {"id": 999})
    execution = ToolRegistry(world.tools()).run(
        {"type": "tool_use", "id": "toolu_1", "name": "update_scheduled_transaction",
         "input": {"id": 999}})
    assert expected == "ValueError: Transaction with ID 999 not found."
    assert execution.is_error and execution.content == expected


def test_a_string_that_reads_as_a_list_is_handed_on_as_a_list_as_agentdojo_does():
    suite = get_suite("workspace")
    world = DojoWorld.new(suite, "user_task_0")
    as_text = world.call("search_contacts_by_name", {"query": "['Sarah']"})
    runtime = FunctionsRuntime(suite.tools)
    _, error = runtime.run_function(world.pre_env.model_copy(deep=True),
                                    "search_contacts_by_name", {"query": ["Sarah"]})
    assert error is not None and error.startswith("ValidationError")
    assert isinstance(as_text, ToolOutput) and as_text.value == error


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE_NAMES)
def test_every_ground_truth_call_that_changes_an_environment_is_marked_side_effecting(name):
    suite = get_suite(name)
    runtime = FunctionsRuntime(suite.tools)
    for tid, task in [*user_tasks(suite).items(), *injection_tasks(suite).items()]:
        env = DojoWorld.new(suite, next(iter(user_tasks(suite)))).env
        if tid.startswith("user"):
            env = DojoWorld.new(suite, tid).env
        for call in task.ground_truth(env.model_copy(deep=True)):
            before = env.model_copy(deep=True)
            runtime.run_function(env, call.function, call.args)
            if env != before and call.function != "get_unread_emails":  # marks them read
                assert call.function in SIDE_EFFECTING, (tid, call.function)


def test_a_run_that_stops_before_its_answer_fails_agentdojos_utility_check():
    suite = get_suite("banking")
    world = DojoWorld.new(suite, "user_task_15")
    config = AgentConfig(max_steps=2, token_budget=None, offer_handoff=False)
    result = run_production(replay_llm(world), world.task.PROMPT, world.tools(),
                            system=agentdojo_system_prompt(), config=config)
    assert result.stop_cause.value == "max_steps"
    assert world.utility(result) is False


def test_every_task_of_a_suite_runs_with_limits_from_the_suites_longest_ground_truth():
    tasks = eval_tasks("travel")
    assert len(tasks) == 20
    assert {t.limits["max_steps"] for t in tasks} == {38}  # 2 x (18 calls + the answer)
    assert all(t.limits["token_budget"] is None and not t.limits["offer_handoff"]
               for t in tasks)
    assert tasks[0].system == agentdojo_system_prompt()


def test_a_plain_agent_config_stops_travel_user_task_19_and_its_eighteen_calls():
    stopped = would_stop("travel", only=["user_task_18", "user_task_19"])
    assert [(tid, cause) for tid, cause, _ in stopped] == [("user_task_19", "max_steps")]


def test_an_unknown_suite_or_task_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="known: workspace, travel, banking, slack"):
        get_suite("shopping")
    with pytest.raises(ValueError, match="no user task user_task_99"):
        eval_tasks("banking", only=["user_task_99"])


def test_primer_eval_runs_a_suite_streams_its_rows_and_resumes_with_pass_hat_k(tmp_path,
                                                                              capsys):
    from primer.__main__ import main

    results = tmp_path / "banking.jsonl"
    args = ["eval", "--agentdojo", "banking", "--tasks", "user_task_0,user_task_15",
            "--model", "replay-batched", "--repeats", "2", "--results", str(results),
            "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "pass^2" in out and "success rate: 100%" in out
    assert "max_steps=12" in out and "banking/user_task_15: 5 calls" in out
    before = results.read_text()
    assert len(before.splitlines()) == 1 + 4  # header + 2 tasks x 2 trials
    assert main(args) == 0
    assert results.read_text() == before  # every trial was in the file: nothing ran again


def test_primer_eval_says_in_one_line_what_an_agentdojo_option_needs(capsys):
    from primer.__main__ import main

    assert main(["eval", "--model", "replay-all"]) == 2
    assert "give one" in capsys.readouterr().err
    assert main(["eval", "--agentdojo", "shopping", "--no-progress"]) == 2
    assert "unknown AgentDojo suite 'shopping'" in capsys.readouterr().err


def test_the_limits_report_names_the_step_limit_and_the_token_budget_that_stop_a_task():
    from primer.harness.evals.agentdojo.limits import limits_report

    report = limits_report("travel", only=["user_task_19"])
    assert "max_steps=38" in report and "travel/user_task_19: 18 calls" in report
    assert "  travel/user_task_19: max_steps" in report
    assert "token_budget alone (by the course's estimate) would stop 1 task: " \
           "travel/user_task_19 (token_budget)" in report
