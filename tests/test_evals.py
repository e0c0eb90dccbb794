"""Evals: outcome and path per task, the summary figures, executors, tasks from traces."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from primer.harness.evals.results import EvalRow, EvalSummary
from primer.harness.evals.run import EvalTask, path_matches, percentile, run_evals, task_from_trace
from primer.harness.evals.scorers import AnswerContains, StopCauseIs
from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.tools import tool
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
    result = run_production(model(task), task.input, make_tools(), config=AgentConfig(
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
    run_production(ScriptedLLM([tool_reply(("lookup", {"key": "a"})), "no idea"]), "what is a?",
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


# ---------------------------------------------------------------- repeats, timeouts, Dask


def test_each_repeat_is_a_fresh_draw_of_a_nondeterministic_model():
    tasks = [relay_task(i, 4) for i in range(5)]
    report = run_evals(tasks, SkilledModel(0.7), make_tools, repeats=8, progress=False)
    assert [(r.task, r.trial) for r in report.rows[:3]] == [
        ("relay-4-0", 0), ("relay-4-0", 1), ("relay-4-0", 2)]
    per_task = {t.task: t.passed for t in report.summary.per_task}
    assert all(0 < c < 8 for c in list(per_task.values())[:3])  # neither always nor never
    once = run_evals(tasks, SkilledModel(0.7), make_tools, progress=False)
    first_trials = [(r.task, r.success) for r in report.rows if r.trial == 0]
    assert first_trials == [(r.task, r.success) for r in once.rows]


def test_repeats_give_pass_at_k_and_pass_hat_k_from_the_trials_of_each_task():
    from primer.harness.evals.results import pass_at_k, pass_hat_k

    report = run_evals([relay_task(i, 4) for i in range(6)], SkilledModel(0.7), make_tools,
                       repeats=5, progress=False)
    s = report.summary
    counts = [(t.trials, t.passed) for t in s.per_task]
    assert s.repeats == 5 and s.trials == 30
    assert s.pass_at_k == pytest.approx(sum(pass_at_k(n, c, 5) for n, c in counts) / 6)
    assert s.pass_hat_k == pytest.approx(sum(pass_hat_k(n, c, 5) for n, c in counts) / 6)
    assert "pass@5" in report.table(latency=False) and "pass^5" in report.table()


def test_repeats_must_be_a_whole_number_of_at_least_one():
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="repeats"):
            run_evals([relay_task(0, 2)], SkilledModel(1.0), make_tools, repeats=bad)


def test_a_trial_past_its_time_limit_is_a_timeout_row_and_the_others_finish():
    import time as _time

    @tool
    def slow(key: str) -> str:
        """Take a long time.

        Args:
            key: any key.
        """
        _time.sleep(3)
        return "late"

    def llm(task):
        name = "slow" if task.name == "stuck" else "lookup"
        return ScriptedLLM([tool_reply((name, {"key": "a"})), "value of a"])

    tasks = [EvalTask("stuck", "q", AnswerContains("value")),
             EvalTask("fine", "q", AnswerContains("value"))]
    start = _time.perf_counter()
    report = run_evals(tasks, llm, [lookup, slow], AgentConfig(tool_timeout_s=None),
                       timeout_s=0.5, progress=False)
    assert _time.perf_counter() - start < 2.5
    stuck, fine = report.rows
    assert stuck.stop_cause == "timeout" and "0.5 s limit" in stuck.error
    assert fine.success and report.summary.failed_to_run == 1
    with pytest.raises(ValueError, match="timeout_s"):
        run_evals(tasks, llm, [lookup], timeout_s=0)


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that records the most trials submitted and not yet finished at once."""

    def __init__(self, workers):
        super().__init__(workers)
        self.lock, self.outstanding, self.most, self.submitted = threading.Lock(), 0, 0, 0

    def submit(self, fn, /, *args, **kwargs):
        with self.lock:
            self.submitted += 1
            self.outstanding += 1
            self.most = max(self.most, self.outstanding)
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, future):
        with self.lock:
            self.outstanding -= 1


def slow_relay_tools(task):
    import time as _time

    _time.sleep(0.05)  # long enough that the driver fills its window before one finishes
    return make_tools(task)


def test_the_driver_never_holds_more_than_max_in_flight_trials():
    tasks = [relay_task(i, 2) for i in range(24)]
    with CountingExecutor(4) as ex:
        report = run_evals(tasks, SkilledModel(1.0), slow_relay_tools, executor=ex,
                           max_in_flight=3)
    assert ex.submitted == 24 and ex.most == 3 and report.summary.trials == 24
    with CountingExecutor(4) as ex:  # the default window: twice the pool's 4 workers
        run_evals(tasks, SkilledModel(1.0), slow_relay_tools, executor=ex)
    assert ex.most == 8


def test_a_results_file_holds_the_same_rows_and_summary_as_a_run_in_memory(tmp_path):
    tasks = [relay_task(i, 3) for i in range(8)]
    memory = run_evals(tasks, SkilledModel(0.8), make_tools, repeats=3, progress=False)
    on_disk = run_evals(tasks, SkilledModel(0.8), make_tools, repeats=3, progress=False,
                        results=tmp_path / "r.jsonl")
    assert on_disk.results == tmp_path / "r.jsonl"
    key = [(r.task, r.trial, r.success, r.path, r.steps, r.input_tokens) for r in memory.rows]
    assert [(r.task, r.trial, r.success, r.path, r.steps, r.input_tokens)
            for r in on_disk.rows] == key
    a, b = memory.summary, on_disk.summary
    assert (a.success_rate, a.ci_low, a.ci_high, a.pass_at_k, a.pass_hat_k) == (
        b.success_rate, b.ci_low, b.ci_high, b.pass_at_k, b.pass_hat_k)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, timeout="30s") as client:
        yield client


def test_evals_run_on_a_real_dask_local_cluster_and_agree_with_threads(dask_client, tmp_path):
    tasks = [relay_task(i, 4) for i in range(12)]
    threads = run_evals(tasks, SkilledModel(0.8), make_tools, repeats=2, progress=False)
    dask = run_evals(tasks, SkilledModel(0.8), make_tools, executor=dask_client, repeats=2,
                     results=tmp_path / "r.jsonl", progress=False)
    assert [(r.task, r.trial, r.success, r.steps) for r in dask.rows] == [
        (r.task, r.trial, r.success, r.steps) for r in threads.rows]
    workers = {w for w in dask_client.run(lambda: __import__("os").getpid()).values()}
    assert len(workers) == 2  # two worker processes really ran


def test_the_cluster_keeps_no_finished_trial_after_the_run(dask_client):
    import time as _time

    run_evals([relay_task(i, 2) for i in range(30)], SkilledModel(0.9), make_tools,
              executor=dask_client, progress=False)
    deadline = _time.monotonic() + 10
    held = None
    while _time.monotonic() < deadline:  # releases reach the scheduler asynchronously
        held = dask_client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        if held == 0:
            break
        _time.sleep(0.05)
    assert held == 0


def test_dask_runs_lambdas_and_the_clients_own_executor_too(dask_client):
    tasks = [relay_task(i, 2) for i in range(4)]
    report = run_evals(tasks, lambda t: SkilledModel(1.0)(t), make_tools,
                       executor=dask_client.get_executor(pure=False), progress=False)
    assert report.summary.success_rate == 1


def test_an_executor_of_the_wrong_kind_is_a_clear_error():
    with pytest.raises(TypeError, match="concurrent.futures.Executor or a distributed.Client"):
        run_evals([relay_task(0, 2)], SkilledModel(1.0), make_tools, executor=object())


def test_repeated_trials_each_write_a_trace_named_by_trial(tmp_path):
    run_evals([relay_task(0, 2)], SkilledModel(0.9), make_tools, repeats=2, progress=False,
              trace_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["relay-2-0.trial-0.jsonl",
                                                          "relay-2-0.trial-1.jsonl"]


def test_progress_true_shows_a_bar_of_trials_that_starts_at_the_resumed_ones(tmp_path, capsys):
    tasks = [relay_task(i, 2) for i in range(3)]
    results = tmp_path / "r.jsonl"
    run_evals(tasks, SkilledModel(1.0), make_tools, results=results, progress=False)
    run_evals(tasks, SkilledModel(1.0), make_tools, repeats=2, results=results,
              progress=True)  # the first trial of each task is in the file already
    err = capsys.readouterr().err
    assert "eval trials" in err and "3/6" in err and "6/6" in err
