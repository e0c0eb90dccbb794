"""The ground-truth replay of every AgentDojo user task passes AgentDojo's utility check
through run_agent, one call a reply and in parallel batches (the extra .[agentdojo])."""

from __future__ import annotations

import pytest

pytest.importorskip("agentdojo")

from primer.harness.evals.agentdojo.replay import (  # noqa: E402
    EMPTY_ANSWER,
    MODES,
    AttackedModel,
    batches,
    replay_llm,
)
from primer.harness.evals.agentdojo.world import (  # noqa: E402
    SIDE_EFFECTING,
    SUITE_NAMES,
    DojoWorld,
    agentdojo_system_prompt,
    get_suite,
    suite_limits,
    user_tasks,
)
from primer.loop.config import AgentConfig  # noqa: E402
from primer.loop.loop import run_agent  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sequential", "batched"])
@pytest.mark.parametrize("name", SUITE_NAMES)
def test_every_user_task_of_the_default_benchmark_passes_agentdojos_utility_check(name, mode):
    suite = get_suite(name)
    config = AgentConfig(**suite_limits(suite))
    failed = []
    for tid in user_tasks(suite):
        world = DojoWorld.new(suite, tid)
        result = run_agent(replay_llm(world, mode), world.task.PROMPT, world.tools(),
                           system=agentdojo_system_prompt(), config=config)
        calls = result.executions
        if (result.stop_cause.value != "end_turn" or any(e.is_error for e in calls)
                or len(calls) != len(world.ground_truth) or not world.utility(result)):
            failed.append((tid, result.stop_cause.value, result.summary))
    assert not failed
    assert len(user_tasks(suite)) == {"workspace": 40, "travel": 20, "banking": 16,
                                      "slack": 21}[name]


def test_batches_put_reads_together_and_each_side_effect_in_a_reply_of_its_own():
    world = DojoWorld.new(get_suite("slack"), "user_task_11")
    names = [[c.function for c in b] for b in batches(world.ground_truth, "batched")]
    assert names == [["read_inbox"], ["get_webpage"], ["invite_user_to_slack"],
                     ["add_user_to_channel"], ["add_user_to_channel"]]
    world = DojoWorld.new(get_suite("travel"), "user_task_19")
    grouped = batches(world.ground_truth, "batched")
    assert sum(map(len, grouped)) == 18 and len(grouped) < 18
    for b in grouped:
        assert len(b) == 1 or not any(c.function in SIDE_EFFECTING for c in b)
    assert len(batches(world.ground_truth, "all")) == 1
    with pytest.raises(ValueError, match="sequential, batched, all"):
        batches(world.ground_truth, "shuffled")
    assert MODES == ("sequential", "batched", "all")


def test_all_calls_in_one_reply_pass_too_and_take_two_model_calls():
    world = DojoWorld.new(get_suite("travel"), "user_task_19")
    result = run_agent(replay_llm(world, "all"), world.task.PROMPT, world.tools(),
                       system=agentdojo_system_prompt(),
                       config=AgentConfig(**suite_limits(world.suite)))
    assert len(result.steps) == 2 and len(result.executions) == 18
    assert world.utility(result)


def test_an_empty_ground_truth_answer_is_sent_as_a_short_text():
    world = DojoWorld.new(get_suite("banking"), "user_task_0")
    assert world.task.GROUND_TRUTH_OUTPUT == ""
    result = run_agent(replay_llm(world), world.task.PROMPT, world.tools(),
                       config=AgentConfig(**suite_limits(world.suite)))
    assert result.final_text == EMPTY_ANSWER


def test_the_attacked_model_plays_the_injection_tasks_calls_once_it_reads_the_marker():
    suite = get_suite("banking")
    clean = DojoWorld.new(suite, "user_task_0", injection_task_id="injection_task_0")
    model = AttackedModel(clean)  # nothing planted: the model never reads the marker
    result = run_agent(model, clean.task.PROMPT, clean.tools(),
                       config=AgentConfig(**suite_limits(suite)))
    assert not model.followed and not clean.security(result) and clean.utility(result)
    with pytest.raises(ValueError, match="injection task"):
        AttackedModel(DojoWorld.new(suite, "user_task_0"))
