"""``python -m primer eval``: repeats, results files that resume, suite files, a judge, Dask,
and one clear line with exit 2 for anything that cannot be used."""

from __future__ import annotations

import pytest
import yaml

from primer.__main__ import main
from primer.scenarios.suite import suite_tools


def test_repeats_print_one_row_per_task_with_pass_at_k_and_pass_hat_k(capsys):
    assert main(["eval", "--relay-tasks", "2", "--hops", "3", "--repeats", "4",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "pass@4" in out and "pass^4" in out and "trials: 28 (at least 4 each)" in out
    assert "95% interval" in out


def test_a_results_file_resumes_without_running_a_finished_trial_again(tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    args = ["eval", "--relay-tasks", "3", "--hops", "2", "--no-progress", "--results",
            str(results), "--summary-only"]
    assert main(args) == 0
    first = capsys.readouterr().out
    before = results.read_text()
    assert len(before.splitlines()) == 1 + 8  # header + 5 demos + 3 relay tasks
    assert main(args) == 0
    assert results.read_text() == before  # nothing left to run, nothing appended
    assert capsys.readouterr().out.split("latency")[0] == first.split("latency")[0]
    assert main(args + ["--fresh"]) == 0
    assert len(results.read_text().splitlines()) == 9


def test_a_results_file_of_another_suite_is_refused_in_one_line(tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    assert main(["eval", "--relay-tasks", "1", "--no-progress", "--results",
                 str(results)]) == 0
    capsys.readouterr()
    assert main(["eval", "--relay-tasks", "2", "--no-progress", "--results",
                 str(results)]) == 2
    err = capsys.readouterr().err
    assert "written for another suite" in err and err.count("\n") == 1


def test_a_suite_file_runs_with_a_scripted_judge(tmp_path, capsys):
    suite = tmp_path / "mine.yaml"
    suite.write_text(yaml.safe_dump({"tasks": [
        {"name": "pto-judged", "meta": {"world": "demo", "demo": "pto"},
         "check": [{"model_graded": "Says alice has 12 days, citing [hr-001]."}]}]}))
    assert main(["eval", "--suite", str(suite), "--judge", "scripted", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "pto-judged" in out and "success rate: 100%" in out


@pytest.mark.parametrize("args, message", [
    (["--suite", "missing.yaml"], "no such suite file"),
    (["--fresh"], "--fresh starts a --results FILE over"),
    (["--judge", "scripted"], "--judge grades the model_graded checks"),
    (["--repeats", "0"], "--repeats must be 1 or more"),
    (["--timeout", "0"], "--timeout must be a positive number"),
    (["--processes", "--dask", "local"], "choose one of --processes and --dask"),
])
def test_a_setting_that_cannot_work_is_one_line_and_exit_2(tmp_path, capsys, args, message,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--no-progress"] + args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and captured.err.count("\n") == 1


def test_a_timed_out_trial_is_a_row_and_named_after_the_table(capsys, monkeypatch):
    import time

    import primer.commands.eval as command

    def slow_tools(task):
        if task.name == "pto":
            time.sleep(2)
        return suite_tools(task)

    monkeypatch.setattr(command, "suite_tools", slow_tools)
    assert main(["eval", "--relay-tasks", "1", "--hops", "2", "--timeout", "0.3",
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "trials that raised or timed out: 1 of 6" in captured.out
    assert "eval: task pto trial 0: timeout: the trial ran past its 0.3 s limit" in (
        captured.err)


def test_eval_runs_on_a_local_dask_cluster_it_starts_and_closes(capsys):
    pytest.importorskip("distributed")
    assert main(["eval", "--relay-tasks", "4", "--hops", "2", "--dask", "local", "--workers",
                 "2", "--no-progress", "--summary-only"]) == 0
    assert "tasks: 9" in capsys.readouterr().out
