"""Suite files: tasks in YAML or JSON, no Python; every mistake named before anything runs."""

from __future__ import annotations

import json

import pytest
import yaml

from primer.harness.evals.run import run_evals
from primer.harness.evals.scorers import (
    AnswerContains,
    CostUnder,
    ModelGraded,
    StopCauseIs,
    ToolsInOrder,
)
from primer.harness.evals.suite import SuiteError, load_suite
from primer.scenarios.suite import (
    BUILTIN_SUITE,
    builtin_suite,
    load_suite_file,
    scripted_judge,
    suite_llm,
    suite_tools,
)

SUITE = {
    "defaults": {"limits": {"max_steps": 6}, "meta": {"world": "demo"}},
    "tasks": [
        {"name": "orders-total", "meta": {"demo": "orders"},
         "check": [{"answer_contains": "5900"}, {"stop_cause_is": "end_turn"},
                   {"tools_in_order": ["get_order", "calculator"]}, {"cost_under": 0.05}],
         "expected_path": ["get_order", "get_order", "calculator"]},
        {"name": "pto", "meta": {"demo": "pto"}, "limits": {"max_steps": 3},
         "check": {"answer_contains": ["12", "[hr-001]"],
                   "model_graded": "Gives alice's 12 days and cites [hr-001]."},
         "expected_path": {"any_order": ["search_kb", "get_pto_balance"]}},
    ],
}


def write(tmp_path, data, name="suite.yaml"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return path


def test_a_yaml_suite_becomes_tasks_with_scorers_paths_limits_and_meta(tmp_path):
    tasks = load_suite_file(write(tmp_path, SUITE), judge=scripted_judge())
    orders, pto = tasks
    assert [type(s) for s in orders.check] == [AnswerContains, StopCauseIs, ToolsInOrder,
                                               CostUnder]
    assert orders.limits["max_steps"] == 6 and pto.limits["max_steps"] == 3  # task wins
    assert pto.expected_path == frozenset({"search_kb", "get_pto_balance"})
    assert isinstance(pto.check[1], ModelGraded)
    assert orders.meta == {"world": "demo", "demo": "orders"}
    assert orders.input.startswith("What does order A123 cost")  # filled from the demo


def test_the_same_suite_in_json_loads_the_same_tasks(tmp_path):
    from_yaml = load_suite_file(write(tmp_path, SUITE), judge=scripted_judge())
    from_json = load_suite_file(write(tmp_path, SUITE, "suite.json"), judge=scripted_judge())
    assert [(t.name, t.input, t.limits, t.expected_path) for t in from_yaml] == [
        (t.name, t.input, t.limits, t.expected_path) for t in from_json]


def test_a_loaded_suite_runs_and_keeps_each_scorers_verdict(tmp_path):
    tasks = load_suite_file(write(tmp_path, SUITE), judge=scripted_judge())
    report = run_evals(tasks, suite_llm, suite_tools, progress=False)
    orders, pto = report.rows
    assert orders.success and orders.scores == {"answer_contains": True, "stop_cause_is": True,
                                                "tools_in_order": True, "cost_under": True}
    assert pto.success and pto.scores["model_graded"] and "figure" in pto.reasons[
        "model_graded"]


def test_the_builtin_suite_file_judges_the_demos_as_before():
    rows = run_evals(builtin_suite(relay_tasks=0), suite_llm, suite_tools,
                     progress=False).rows
    assert [(r.task, r.success) for r in rows] == [
        ("orders", True), ("orders-repeat", False), ("orders-wander", False),
        ("orders-budget", False), ("pto", True)]
    assert BUILTIN_SUITE.suffix == ".yaml"


@pytest.mark.parametrize("change, message", [
    (lambda s: s["tasks"][0]["check"].append({"answer_has": "x"}), "unknown scorer 'answer_has'"),
    (lambda s: s["tasks"][0].update(expcted_path=[]), "expcted_path: Extra inputs"),
    (lambda s: s["tasks"][0].update(limits={"max_steps": 0}), "max_steps must be an integer"),
    (lambda s: s["tasks"][0].update(limits={"max_stepz": 3}), "unknown settings"),
    (lambda s: s["tasks"][1].update(name="orders-total"), "repeated: ['orders-total']"),
    (lambda s: s["tasks"][0].update(meta={"demo": "nope"}), "no demo named 'nope'"),
    (lambda s: s["tasks"][0]["check"].append({"cost_under": -1}), "finite cap"),
    (lambda s: s.update(task=[]), "unknown top-level keys ['task']"),
])
def test_every_mistake_is_named_with_its_file_and_task(tmp_path, change, message):
    data = json.loads(json.dumps(SUITE))
    change(data)
    path = write(tmp_path, data)
    with pytest.raises(SuiteError) as err:
        load_suite_file(path, judge=scripted_judge())
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_model_graded_check_without_a_judge_says_how_to_give_one(tmp_path):
    with pytest.raises(SuiteError, match="task 2 \\(pto\\): model_graded needs a judge"):
        load_suite_file(write(tmp_path, SUITE))


def test_a_task_without_input_outside_a_demo_is_refused(tmp_path):
    path = write(tmp_path, {"tasks": [{"name": "x", "check": {"answer_contains": "a"}}]})
    with pytest.raises(SuiteError, match="task 1 \\(x\\): input: Field required"):
        load_suite(path)


@pytest.mark.parametrize("name, content, message", [
    ("missing.yaml", None, "no such suite file"),
    ("suite.txt", "tasks: []", "ends in .yaml, .yml or .json"),
    ("bad.yaml", "tasks: [\n", "not valid YAML"),
    ("bad.json", "{", "not valid JSON"),
    ("empty.yaml", "tasks: []", "has no tasks"),
    ("list.yaml", "- a\n", "a mapping with a 'tasks' list"),
])
def test_a_file_that_is_no_suite_is_a_one_line_error(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(SuiteError, match=message):
        load_suite(path)


@pytest.mark.parametrize("content", ["[" * 100_000, "".join("  " * i + "-\n" for i in range(300)),
                                     "tasks: " + "{a: " * 5_000 + "1" + "}" * 5_000])
def test_yaml_nested_past_the_json_limit_is_refused_not_a_recursion_error(tmp_path, content):
    path = tmp_path / "deep.yaml"
    path.write_text(content)
    with pytest.raises(SuiteError, match=r"nested deeper than 100 levels \(line \d+"):
        load_suite(path)


def test_yaml_nested_within_the_limit_still_loads(tmp_path):
    task = {**SUITE["tasks"][0], "meta": {"demo": "orders",
                                          "x": json.loads("[" * 90 + "]" * 90)}}
    path = write(tmp_path, {"defaults": SUITE["defaults"], "tasks": [task]})
    assert [t.name for t in load_suite_file(path)] == ["orders-total"]
