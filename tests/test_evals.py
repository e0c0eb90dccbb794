"""Evals: outcome and path per task, the summary figures, executors, tasks from traces."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Executor, Future, ProcessPoolExecutor

import pytest

from primer.agents import (
    AgentConfig,
    AnswerContains,
    EvalRow,
    EvalSummary,
    EvalTask,
    ScriptedLLM,
    StopCauseIs,
    run_agent,
    run_evals,
    task_from_trace,
    tool,
    tool_reply,
)
from primer.agents.evals import path_matches, percentile
from primer.scenarios.relay import SkilledModel, final_code, make_tools, relay_llm, relay_task


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: any key.
    """
    return f"value of {key}"


def two_step_llm(task: EvalTask) -> ScriptedLLM:
    return ScriptedLLM([tool_reply(("lookup", {"key": task.meta["key"]})),
                        f"the answer is {task.meta['answer']}"])


def tools_for(task: EvalTask):
    return [lookup]


def row(name, success, latency, steps=1, cost=0.01, path_ok=None):
    return EvalRow(name, success, path_ok, [], steps, 100, 10, cost, latency, "end_turn")


def test_a_task_succeeds_only_when_its_check_passes_and_its_path_is_scored_separately():
    tasks = [EvalTask("right", "q", AnswerContains("42"), ["lookup"],
                      meta={"key": "a", "answer": 42}),
             EvalTask("wrong", "q", AnswerContains("42"), ["lookup", "lookup"],
                      meta={"key": "a", "answer": 41})]
    report = run_evals(tasks, two_step_llm, tools_for, progress=False)
    assert [(r.task, r.success, r.path_ok) for r in report.rows] == [
        ("right", True, True), ("wrong", False, False)]
    assert report.rows[0].path == ["lookup"] and report.rows[0].steps == 2
    assert report.failures() == [report.rows[1]]


def test_a_set_path_ignores_order_and_repeats_but_a_list_path_does_not():
    assert path_matches(frozenset({"a", "b"}), ["b", "a", "b"])
    assert not path_matches(frozenset({"a", "b"}), ["a", "c", "b"])
    assert not path_matches(["a", "b"], ["b", "a"])


def test_the_summary_gives_success_rate_path_accuracy_mean_steps_cost_and_percentiles():
    rows = [row("a", True, 0.1, steps=2, path_ok=True), row("b", False, 0.2, steps=4,
                                                             path_ok=False),
            row("c", True, 0.3, steps=3), row("d", True, 0.4, steps=3, path_ok=True)]
    s = EvalSummary.of(rows)
    assert s.success_rate == 3 / 4
    assert s.path_accuracy == 2 / 3  # c has no expected path and is left out
    assert s.mean_steps == (2 + 4 + 3 + 3) / 4
    assert s.total_cost_usd == pytest.approx(0.04)
    # linear interpolation between closest ranks: rank (n-1)q = 1.5 and 2.85
    assert s.p50_latency_s == pytest.approx(0.25)
    assert s.p95_latency_s == pytest.approx(0.3 + 0.85 * 0.1)
    assert (s.input_tokens, s.output_tokens) == (400, 40)


def test_percentile_of_one_value_is_that_value_and_of_none_is_a_clear_error():
    assert percentile([0.7], 95) == 0.7
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_a_task_whose_model_raises_becomes_an_error_row_not_a_crash():
    def broken(task):
        raise RuntimeError("no model today")

    report = run_evals([EvalTask("t", "q", AnswerContains("x"))], broken, [lookup],
                       progress=False)
    assert report.rows[0].stop_cause == "error" and "no model today" in report.rows[0].error
    assert report.summary.success_rate == 0


def test_limits_of_a_task_override_the_base_config():
    task = EvalTask("short", "q", StopCauseIs("max_steps"), limits={"max_steps": 1},
                    meta={"key": "a", "answer": 1})
    report = run_evals([task], two_step_llm, [lookup], AgentConfig(max_steps=10),
                       progress=False)
    assert report.rows[0].success and report.rows[0].steps == 1


class InlineExecutor(Executor):
    """Runs each task at submit time, recording that it was used."""

    def __init__(self):
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        f = Future()
        f.set_result(fn(*args, **kwargs))
        return f


def test_run_evals_uses_the_executor_it_is_given():
    ex = InlineExecutor()
    tasks = [relay_task(i, 3, p=1.0) for i in range(3)]
    report = run_evals(tasks, relay_llm, make_tools, executor=ex, progress=False)
    assert ex.submitted == 3 and report.summary.success_rate == 1


# fork starts workers in milliseconds; spawn (the only choice on some systems) re-imports all
START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def test_evals_run_on_a_real_process_pool_and_agree_with_threads():
    tasks = [relay_task(i, 4, p=0.8) for i in range(6)]
    threads = run_evals(tasks, relay_llm, make_tools, progress=False)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(START_METHOD)) as pool:
        procs = run_evals(tasks, relay_llm, make_tools, executor=pool, progress=False)
    assert [(r.task, r.success, r.path_ok, r.steps, r.input_tokens) for r in procs.rows] == [
        (r.task, r.success, r.path_ok, r.steps, r.input_tokens) for r in threads.rows]


def test_a_perfect_relay_model_always_succeeds_and_a_hopeless_one_never_does():
    tasks = [relay_task(i, 5, p=0) for i in range(10)]
    assert run_evals(tasks, SkilledModel(1.0), make_tools, progress=False
                     ).summary.success_rate == 1
    assert run_evals(tasks, SkilledModel(0.0), make_tools, progress=False
                     ).summary.success_rate == 0


def test_relay_success_means_every_step_was_right():
    task = relay_task(3, 6, p=0.7)
    model = SkilledModel(0.7)
    result = run_agent(model(task), task.input, make_tools(), config=AgentConfig(
        max_steps=7, token_budget=None))
    calls = [(e.name, e.input["code"]) for e in result.executions]
    code, right = "R00003", True
    for name, arg in calls:
        right = right and name == "next_code" and arg == code
        code = final_code(code, 1)
    assert task.check(result) == right


def test_measured_relay_success_over_many_tasks_is_close_to_p_to_the_n():
    p, n = 0.9, 5
    tasks = [relay_task(i, n, p=p) for i in range(300)]
    rate = run_evals(tasks, relay_llm, make_tools, progress=False).summary.success_rate
    # binomial standard error sqrt(q(1-q)/300) is about 0.029 at q = 0.59; allow 3 of them
    assert abs(rate - p ** n) < 0.09


def test_a_failed_runs_trace_becomes_a_task_with_its_input_system_and_limits(tmp_path):
    path = tmp_path / "fail.jsonl"
    run_agent(ScriptedLLM([tool_reply(("lookup", {"key": "a"})), "no idea"]), "what is a?",
              [lookup], system="be brief", config=AgentConfig(max_steps=3), trace=path)
    task = task_from_trace(path, AnswerContains("value of a"), expected_path=["lookup"])
    assert (task.name, task.input, task.system) == ("from-fail", "what is a?", "be brief")
    assert task.limits["max_steps"] == 3
    report = run_evals([task], lambda t: ScriptedLLM([tool_reply(("lookup", {"key": "a"})),
                                                      "a is value of a"]),
                       [lookup], progress=False)
    assert report.rows[0].success and report.rows[0].path_ok


def test_trace_dir_writes_one_trace_per_task_and_rejects_repeated_names(tmp_path):
    tasks = [relay_task(i, 2, p=1.0) for i in range(2)]
    report = run_evals(tasks, relay_llm, make_tools, progress=False, trace_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["relay-2-0.jsonl", "relay-2-1.jsonl"]
    assert report.rows[0].trace.endswith("relay-2-0.jsonl")
    with pytest.raises(ValueError, match="repeated"):
        run_evals(tasks + tasks[:1], relay_llm, make_tools, progress=False, trace_dir=tmp_path)
