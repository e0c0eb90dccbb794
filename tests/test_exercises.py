"""The loop checker: it passes a correct loop, flags each broken one, and never crashes.

The gallery is one loop with a switch per fault: ``make_loop(None)`` is a correct loop,
``make_loop("ignores_budget")`` the same loop with that one fault. Each fault must fail the
behaviours it breaks and pass the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from primer.course.checking import describe_exception
from primer.course.exercises import (
    BEHAVIOURS,
    MAX_MODEL_CALLS,
    MAX_TOOL_RUNS,
    REPEAT_THRESHOLD,
    TIGHT_BUDGET,
    WANDER_STEPS,
    LoopReport,
    check_loop,
)

ROOT = Path(__file__).resolve().parent.parent
NAMES = [b.name for b in BEHAVIOURS]
WITH_TOOLS = ["happy path", "wrong argument", "unknown tool", "tool that raises",
              "two calls in one reply", "model that repeats itself", "model that wanders",
              "tight budget", "answer in two text blocks"]


def make_loop(fault: str | None = None):
    """A correct loop, or the same loop with one named fault."""

    def loop(model, task, tools, *, max_steps, token_budget):
        if fault == "never_calls_model":
            return {"answer": None, "stop_cause": "max_steps"}
        messages = [{"role": "user", "content": task}]
        if fault == "system_as_message":
            messages.insert(0, {"role": "system", "content": "You answer order questions."})
        offered = {"no_tools_offered": None,
                   "offers_tool_names": list(tools)}.get(fault or "", tools.definitions)
        used, requests = 0, {}
        steps = {"one_step_too_many": max_steps + 1, "one_step_too_few": max_steps - 1,
                 "stops_after_one_call": 1}.get(fault or "", max_steps)
        step = 0
        while fault == "no_step_limit" or step < steps:
            step += 1
            reply = model(messages, offered)
            content = reply["content"]
            text = "\n".join(b["text"] for b in reply["content"] if b["type"] == "text")
            if fault == "drops_reply_text":
                content = [b for b in content if b["type"] == "tool_use"]
            if fault == "stores_only_reply_text":
                content = text
            messages.append({"role": "assistant", "content": content})
            used += reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"]
            stop = reply["stop_reason"]
            if stop == "end_turn" or (stop == "refusal" and fault == "refusal_as_answer"):
                if fault in ("first_block_text", "last_block_text"):
                    text = reply["content"][0 if fault == "first_block_text" else -1]["text"]
                return finish(text, "end_turn", fault)
            if stop == "refusal" or (stop == "max_tokens" and fault != "runs_cut_off_tool"):
                return finish(None, stop, fault)
            over = used > token_budget and fault != "ignores_budget"
            if over and fault != "budget_checked_after_tools":
                return finish(None, "token_budget", fault)
            calls = [b for b in reply["content"] if b["type"] == "tool_use"]
            repeated = False
            for call in calls:
                key = json.dumps([call["name"], call["input"]], sort_keys=True)
                requests[key] = requests.get(key, 0) + 1
                repeated |= requests[key] >= REPEAT_THRESHOLD and fault != "no_loop_detection"
            if repeated and fault != "loop_detected_after_tools":
                return finish(None, "loop_detected", fault)
            if step == steps and fault not in ("no_step_limit", "runs_last_allowed_tools"):
                return finish(None, "max_steps", fault)  # no call would read these results
            results = [run_tool(tools, call, fault) for call in calls]
            if fault == "drops_failed_results":
                results = [r for r in results if not r["is_error"]]
            if fault == "loses_tool_use_ids":
                results = [{**r, "tool_use_id": f"result_{k}"} for k, r in enumerate(results)]
            if fault == "results_out_of_order":
                results.reverse()
            if fault == "splits_results":
                messages.extend({"role": "user", "content": [r]} for r in results)
            elif fault == "openai_tool_role":
                messages.extend({"role": "tool", "tool_use_id": r["tool_use_id"],
                                 "content": r["content"]} for r in results)
            else:
                messages.append({"role": "user", "content": results})
            if over:
                return finish(None, "token_budget", fault)
            if repeated:
                return finish(None, "loop_detected", fault)
        return finish(None, "max_steps", fault)

    loop.__name__ = f"loop_{fault or 'correct'}"
    return loop


def finish(answer, cause, fault):
    """The loop's return value (with the model's field name under one fault)."""
    return {"answer": answer,
            ("stop_reason" if fault == "returns_stop_reason_key" else "stop_cause"): cause}


def run_tool(tools, call, fault):
    """One tool_result for ``call``; every failure becomes an error result (unless a fault)."""
    name = call["name"]
    if name not in tools and fault != "crashes_on_unknown_tool":
        content, is_error = f"Unknown tool {name!r}. Available tools: {', '.join(tools)}.", True
    elif fault == "tool_errors_crash":
        content, is_error = json.dumps(tools[name](**call["input"])), False
    else:
        fn = tools[name]
        try:
            output = fn(**call["input"])
            content = output if fault == "raw_dict_content" else json.dumps(output)
            is_error = False
        except Exception as e:  # noqa: BLE001
            content, is_error = f"{name} failed: {type(e).__name__}: {e}", True
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": content}
    if fault == "errors_not_flagged":
        return result
    return {**result, "is_error": str(is_error).lower() if fault == "is_error_as_string"
            else is_error}


#: fault -> (the behaviours it must fail, every other behaviour passing; words of the fix
#: that the first failing behaviour's line must hold).
GALLERY = {
    "runs_cut_off_tool": (["cut-off reply"], "its input may be half-written"),
    "no_step_limit": (["model that wanders"], "it needs a step limit"),
    "one_step_too_many": (["model that wanders"], "stop after exactly 4"),
    "one_step_too_few": (["model that wanders"], "make all 4 calls before stopping"),
    # the cut-off reply and the refusal end the run on the first call anyway
    "stops_after_one_call": ([n for n in NAMES if n not in ("cut-off reply", "refusal")],
                             "stop with 'max_steps' only once they are used"),
    "never_calls_model": (NAMES, "call model(messages, tool_definitions) first"),
    "splits_results": (["two calls in one reply"], "put all results in one user message"),
    "results_out_of_order": (["two calls in one reply"],
                             "in the order the model asked for them"),
    "loses_tool_use_ids": (WITH_TOOLS, "its tool_use_id the call's id"),
    # the failing tool's model writes no text beside its call, so nothing is dropped there
    "drops_reply_text": ([n for n in WITH_TOOLS if n != "tool that raises"],
                         "its content exactly as the model returned it"),
    "crashes_on_unknown_tool": (["unknown tool"], "raised KeyError: 'lookup_order'"),
    "tool_errors_crash": (["wrong argument", "tool that raises", "model that repeats itself",
                           "model that wanders"], "raised TypeError"),
    "errors_not_flagged": (["wrong argument", "unknown tool", "tool that raises"],
                           'not marked "is_error": True'),
    "ignores_budget": (["tight budget"], "check the budget before running tools"),
    "budget_checked_after_tools": (["tight budget"], "check the budget before running tools"),
    "refusal_as_answer": (["refusal"], "a refusal is not an answer"),
    "no_loop_detection": (["model that repeats itself"],
                          "stop with 'loop_detected' on request 3"),
    "loop_detected_after_tools": (["model that repeats itself"],
                                  "check repeats before running tools"),
    "runs_last_allowed_tools": (["model that wanders"],
                                "stop with 'max_steps' before running it"),
    # the request validator's faults: each is a request the Messages API refuses
    "raw_dict_content": ([n for n in WITH_TOOLS if n not in ("tool that raises",
                                                              "model that repeats itself",
                                                              "model that wanders")],
                         "send json.dumps(output) (or str(output)), not the tool's raw"),
    "no_tools_offered": (NAMES, "pass tools.definitions on every call"),
    "offers_tool_names": (NAMES, "pass tools.definitions, unchanged"),
    "system_as_message": (NAMES, "a system prompt travels beside the list"),
    "stores_only_reply_text": (WITH_TOOLS,
                               "keep the reply's tool_use blocks in the assistant message"),
    "drops_failed_results": (["wrong argument", "unknown tool", "tool that raises",
                              "model that repeats itself", "model that wanders"],
                             "answer every tool_use of a reply with a tool_result"),
    "openai_tool_role": (WITH_TOOLS,
                         "tool results go back as tool_result blocks in a user message"),
    "is_error_as_string": (WITH_TOOLS,
                           "is_error is the boolean True or False"),
    "first_block_text": (["answer in two text blocks"],
                         "the text of every text block, joined, not one block"),
    "last_block_text": (["answer in two text blocks"],
                        "the text of every text block, joined, not one block"),
    "returns_stop_reason_key": (NAMES, "stop_reason is the model's field in each reply"),
}


def check(fn) -> LoopReport:
    return check_loop(fn, show=False)


def test_a_correct_loop_scores_full_marks():
    report = check(make_loop())
    assert report.failed == [], str(report)
    assert report.score == report.total == len(BEHAVIOURS) == 11


def test_the_gallery_holds_at_least_twenty_broken_loops():
    assert len(GALLERY) >= 20


@pytest.mark.parametrize("fault", sorted(GALLERY))
def test_each_broken_loop_fails_exactly_the_behaviours_its_fault_breaks(fault):
    report = check(make_loop(fault))
    assert report.failed == [n for n in NAMES if n in GALLERY[fault][0]], str(report)


@pytest.mark.parametrize("fault", sorted(GALLERY))
def test_each_broken_loops_first_failure_says_what_to_fix(fault):
    report = check(make_loop(fault))
    first = next(r for r in report.results if not r.passed)
    assert GALLERY[fault][1] in first.detail, first.detail


def detail(report: LoopReport, name: str) -> str:
    return next(r.detail for r in report.results if r.name == name)


def test_a_cut_off_reply_whose_tool_ran_is_reported_as_such():
    report = check(make_loop("runs_cut_off_tool"))
    assert detail(report, "cut-off reply").startswith(
        "the cut-off reply's tool ran (get_order with {'order_id': 'A1'}); it must not")


def test_a_loop_that_never_calls_the_model_fails_every_behaviour_saying_so():
    report = check(make_loop("never_calls_model"))
    assert all(r.detail == "returned stop_cause 'max_steps' without calling the model; "
                           "call model(messages, tool_definitions) first"
               for r in report.results), str(report)


def test_stopping_before_the_step_limit_is_reported_with_the_calls_really_made():
    text = detail(check(make_loop("stops_after_one_call")), "model that wanders")
    assert text.startswith(
        f"stopped with 'max_steps' after 1 model call with max_steps={WANDER_STEPS}")


def test_each_pass_line_reports_what_the_run_did():
    lines = {r.name: r.detail for r in check(make_loop()).results}
    assert lines["happy path"].startswith("ran get_order once and calculator once, then "
                                          "answered 'Order A123 costs 5900.0")
    assert lines["happy path"].endswith("with end_turn after 3 model calls")
    assert lines["model that wanders"] == \
        f"stopped with max_steps after {WANDER_STEPS} model calls and no answer"
    assert lines["model that repeats itself"].endswith(
        f"after {REPEAT_THRESHOLD} model calls and no answer, on request {REPEAT_THRESHOLD} "
        f"of the same call")
    assert lines["tight budget"].startswith("stopped with token_budget at reply 2 (")
    assert lines["tight budget"].endswith(
        f"past the {TIGHT_BUDGET:,}-token budget); its calculator call never ran")
    assert lines["refusal"] == "stopped with refusal after 1 model call and no answer"


def test_split_results_are_reported_as_a_message_that_answers_only_some_calls():
    text = detail(check(make_loop("splits_results")), "two calls in one reply")
    assert "answers 1 of its 2 tool calls" in text and "one user message" in text


def test_a_loop_without_a_step_limit_is_stopped_and_named():
    text = detail(check(make_loop("no_step_limit")), "model that wanders")
    assert f"made {MAX_MODEL_CALLS} model calls" in text and "step limit" in text


def test_running_a_tool_past_the_budget_names_the_reply_and_the_tool():
    text = detail(check(make_loop("budget_checked_after_tools")), "tight budget")
    assert "reply 2" in text and f"{TIGHT_BUDGET:,}-token budget" in text
    assert "calculator call still ran" in text


def test_an_exception_in_the_loop_is_reported_with_its_line_not_raised():
    report = check(make_loop("crashes_on_unknown_tool"))
    text = detail(report, "unknown tool")
    assert text.startswith("raised KeyError: 'lookup_order' at line ")
    assert text.endswith("of run_tool: `fn = tools[name]`")


def test_the_reported_line_counts_from_the_functions_def():
    def broken(model, task, tools, *, max_steps, token_budget):
        model([{"role": "user", "content": task}], tools.definitions)
        raise ValueError("bad idea")

    assert detail(check(broken), "happy path") == \
        "raised ValueError: bad idea at line 3 of broken: `raise ValueError(\"bad idea\")`"


def test_exception_reports_hide_memory_addresses_and_directories():
    try:
        raise RuntimeError(f"{object()} in /home/someone/project/loop.py")
    except RuntimeError as e:
        line = describe_exception(e, json.dumps)  # a function with no frame in the traceback
    assert line == "raised RuntimeError: <object object at 0x…> in loop.py"


def test_a_loop_with_the_wrong_signature_gets_a_hint_not_a_crash():
    def no_keywords(model, task, tools):
        return {"answer": None, "stop_cause": "max_steps"}

    text = detail(check(no_keywords), "happy path")
    assert text.startswith("raised TypeError") and "def my_loop(model, task, tools, *" in text


def test_a_wrong_signature_is_reported_once_and_the_other_behaviours_are_not_run():
    def no_keywords(model, task, tools):
        return {"answer": None, "stop_cause": "max_steps"}

    report = check(no_keywords)
    assert report.interface_problem == detail(report, "happy path")
    assert all(detail(report, n).startswith("not run: fix how the loop is called first")
               for n in NAMES[1:])


def test_calling_the_model_with_the_llm_protocols_keywords_explains_the_exercises_call():
    def keyword_call(model, task, tools, *, max_steps, token_budget):
        model(system="", messages=[{"role": "user", "content": task}],
              tools=tools.definitions, max_tokens=1024)

    report = check(keyword_call)
    assert report.score == 0
    assert report.interface_problem.startswith(
        "raised ModelCallError: the loop called model(system=..., messages=..., tools=..., "
        "max_tokens=...), the LLM protocol of lessons 01-05; in this exercise the model is "
        "called as model(messages, tool_definitions)")


def test_a_loop_that_swallows_a_wrong_model_call_is_still_told_how_to_call_the_model():
    def swallow(model, task, tools, *, max_steps, token_budget):
        try:
            model([{"role": "user", "content": task}], tools.definitions, 1024)
        except TypeError:
            pass
        return {"answer": None, "stop_cause": "max_steps"}

    report = check(swallow)
    assert report.interface_problem.startswith("the loop called model(list, list, int);")


@pytest.mark.parametrize("value", [None, "5900", {"answer": "x"},
                                   {"answer": "x", "stop_cause": "done"},
                                   {"answer": 5900, "stop_cause": "end_turn"}])
def test_a_malformed_result_fails_with_what_to_return(value):
    report = check(lambda model, task, tools, **limits: value)
    assert report.score == 0
    assert all(("return a dict" in r.detail or "use one of" in r.detail
                or "use str or None" in r.detail) for r in report.results)


def test_a_loop_that_swallows_every_exception_still_ends():
    def swallow(model, task, tools, *, max_steps, token_budget):
        while True:
            try:
                model([{"role": "user", "content": task}], tools.definitions)
            except Exception:  # noqa: BLE001 - the fault under test
                continue

    report = check(swallow)
    assert report.score == 0
    assert detail(report, "refusal").startswith("the model was called again after reply 1")
    assert "reply 1 and the user message answering it are missing" in \
        detail(report, "happy path")


def test_a_loop_that_retries_a_failing_tool_forever_is_stopped_and_named():
    def retry_forever(model, task, tools, *, max_steps, token_budget):
        reply = model([{"role": "user", "content": task}], tools.definitions)
        for block in reply["content"]:
            fn = tools.get(block.get("name"))
            while fn is not None:
                try:
                    return fn(**block["input"])
                except Exception:  # noqa: BLE001 - the fault under test
                    continue
        return {"answer": None, "stop_cause": reply["stop_reason"]}

    text = detail(check(retry_forever), "tool that raises")
    assert text.startswith(f"the loop ran tools {MAX_TOOL_RUNS} times without stopping")


def test_check_loop_prints_one_line_per_behaviour_and_the_score(capsys):
    report = check_loop(make_loop("ignores_budget"))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(BEHAVIOURS) + 1
    assert lines[-1] == f"score: {report.score}/{report.total}" == "score: 10/11"
    assert [ln.split("  ")[0] for ln in lines[:-1]] == \
        ["FAIL" if n == "tight budget" else "PASS" for n in NAMES]


def test_check_loop_refuses_something_that_is_not_a_function():
    with pytest.raises(TypeError, match="check_loop needs your loop function"):
        check_loop("my_loop")


def test_the_output_is_the_same_on_every_run():
    assert str(check(make_loop("splits_results"))) == str(check(make_loop("splits_results")))


# ---------------------------------------------------------------- the lesson's own loops

def tagged_source(path: Path, tag: str) -> str:
    cells = [c for c in nbformat.read(path, as_version=4).cells
             if tag in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{path.name} needs exactly one cell tagged {tag!r}"
    return cells[0].source


def loop_from(path: Path, tag: str):
    namespace: dict = {}
    exec(compile(tagged_source(path, tag), f"<{path.name}>", "exec"), namespace)  # noqa: S102
    return namespace["my_loop"]


def test_the_reference_solution_scores_full_marks():
    report = check(loop_from(ROOT / "notebooks" / "14_the_interview_rounds.ipynb",
                             "exercise-solution"))
    assert report.failed == [], str(report)


def test_the_lessons_starter_loop_passes_only_the_happy_path():
    report = check(loop_from(ROOT / "notebooks" / "14_the_interview_rounds.ipynb",
                             "exercise-starter"))
    assert report.failed == NAMES[1:], str(report)


def test_a_loop_without_a_refusal_exit_is_told_that_a_refusal_ends_the_run():
    def no_refusal_exit(model, task, tools, *, max_steps, token_budget):
        messages = [{"role": "user", "content": task}]
        for _ in range(max_steps):
            reply = model(messages, tools.definitions)
            messages.append({"role": "assistant", "content": reply["content"]})
            if reply["stop_reason"] == "end_turn":
                return {"answer": "".join(b["text"] for b in reply["content"]
                                          if b["type"] == "text"), "stop_cause": "end_turn"}
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b["id"],
                 "content": json.dumps(tools[b["name"]](**b["input"]))}
                for b in reply["content"] if b["type"] == "tool_use"]})
        return {"answer": None, "stop_cause": "max_steps"}

    assert detail(check(no_refusal_exit), "refusal") == (
        "called the model again after a reply with stop_reason 'refusal'; a refusal ends the "
        "run: stop with stop_cause 'refusal' and answer None")


def test_a_verdict_quotes_a_huge_tool_input_cut_to_one_short_line():
    from primer.course.exercises import Run, ran_cut_off_tool

    line = ran_cut_off_tool(Run(tool_runs=[(1, "get_order", {"order_id": "A" * 900_000})]))
    assert line is not None and len(line) < 200 and "..." in line
