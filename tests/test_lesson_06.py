"""Lesson 06's claim about the thread cap, checked with the library (its latency figures are
pinned in test_parallel.py)."""

from __future__ import annotations

import time

from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.model import ScriptedLLM, text_reply, tool_reply
from primer.scenarios.parallel import latency_model, waiting_tool

TURN, SCALE = [1.2, 0.2, 0.6], 0.1


def one_turn(**config):
    done = []
    llm = ScriptedLLM([tool_reply(*[("wait", {"k": k}) for k in range(3)]), text_reply("done")])
    start = time.perf_counter()
    run = run_agent(llm, "Run the three lookups.", [waiting_tool(TURN, SCALE, finished=done)],
                    config=AgentConfig(**config))
    return run, done, time.perf_counter() - start


def test_with_the_default_cap_the_calls_overlap_and_finish_fastest_first():
    run, done, _ = one_turn()
    assert done == [1, 2, 0]  # run one after another they would finish 0, 1, 2
    assert [e.tool_use_id for e in run.executions] == ["toolu_01_1", "toolu_01_2", "toolu_01_3"]


def test_with_a_cap_of_one_they_finish_in_request_order_and_take_the_sum():
    run, done, took = one_turn(max_parallel_tools=1)
    total, _ = latency_model([t * SCALE for t in TURN])
    assert done == [0, 1, 2] and took >= total
    assert [e.tool_use_id for e in run.executions] == ["toolu_01_1", "toolu_01_2", "toolu_01_3"]


def test_the_quizs_latency_answers_are_the_models_sum_and_slowest():
    total, slowest = latency_model([0.4, 1.0, 0.3])
    assert (round(total, 2), round(slowest, 2)) == (1.7, 1.0)
    assert min([0.4, 1.0, 0.3]) == 0.3
