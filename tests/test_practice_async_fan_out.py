"""Lesson 15's fan-out check: the notebook's reference passes, each broken fan-out fails the
case it breaks, with a message that says what to fix."""

import asyncio
import json

import pytest
from notebook_cells import solution

from primer.course.practice.async_fan_out import check_async_fan_out


def report(fn):
    return check_async_fan_out(fn, show=False)


def result(call, content, error=False):
    block = {"type": "tool_result", "tool_use_id": call["id"], "content": content}
    return {**block, "is_error": True} if error else block


async def one(call, tools):
    try:
        if call["name"] not in tools:
            raise LookupError(f"no tool {call['name']}; the tools are {', '.join(tools)}")
        return result(call, json.dumps(await tools[call["name"]](**call["input"])))
    except Exception as e:  # noqa: BLE001
        return result(call, f"failed: {e}", error=True)


async def sequential(calls, tools):
    return {"role": "user", "content": [await one(c, tools) for c in calls]}


async def completion_order(calls, tools):
    done = [await t for t in asyncio.as_completed([one(c, tools) for c in calls])]
    return {"role": "user", "content": done}


async def no_try(calls, tools):
    async def bare(call):
        return result(call, json.dumps(await tools[call["name"]](**call["input"])))
    return {"role": "user", "content": list(await asyncio.gather(*(bare(c) for c in calls)))}


async def vague_unknown(calls, tools):
    async def careful(call):
        if call["name"] not in tools:
            return result(call, "unknown tool", error=True)
        return await one(call, tools)
    return {"role": "user", "content": list(await asyncio.gather(*(careful(c) for c in calls)))}


def not_async(calls, tools):
    return {"role": "user", "content": []}


async def message_per_result(calls, tools):
    return [{"role": "user", "content": [r]}
            for r in await asyncio.gather(*(one(c, tools) for c in calls))]


async def error_not_marked(calls, tools):
    async def unmarked(call):
        block = await one(call, tools)
        block.pop("is_error", None)
        return block
    return {"role": "user", "content": list(await asyncio.gather(*(unmarked(c) for c in calls)))}


async def drops_failed(calls, tools):
    got = await asyncio.gather(*(one(c, tools) for c in calls))
    return {"role": "user", "content": [b for b in got if not b.get("is_error")]}


def test_the_notebooks_reference_scores_full_marks():
    assert report(solution("15", "fan_out", index=0)).ok


@pytest.mark.parametrize("broken, case, says", [
    (sequential, "four calls at once", "ran one after another"),
    (completion_order, "four calls at once", "gather keeps request order"),
    (no_try, "one call raises", "raised ConnectionError"),
    (vague_unknown, "unknown tool", "name the tools there are"),
    (not_async, "a single call", "write it as async def"),
    (message_per_result, "a single call", "return ONE user message"),
    (error_not_marked, "one call raises", "is_error: True"),
    (drops_failed, "one call raises", "answer every tool_use"),
])
@pytest.mark.slow
def test_each_broken_fan_out_fails_the_case_it_breaks(broken, case, says):
    got = report(broken)
    assert case in got.failed, str(got)
    assert says in got.detail(case), got.detail(case)


def test_the_check_works_inside_a_running_event_loop_as_in_a_notebook():
    async def inside():
        return report(solution("15", "fan_out", index=0))
    assert asyncio.run(inside()).ok


@pytest.mark.parametrize("junk", [lambda calls, tools: None, lambda: None,
                                  lambda calls, tools: 1 / 0])
def test_junk_is_reported_never_raised(junk):
    got = report(junk)
    assert got.score == 0


def test_a_fan_out_that_hangs_is_cancelled_and_failed(monkeypatch):
    from primer.course.practice import async_fan_out
    monkeypatch.setattr(async_fan_out, "HANG_S", 0.2)

    async def hangs(calls, tools):
        await asyncio.Event().wait()

    got = report(hangs)
    assert got.score == 0 and "did not return within 0.2 s" in got.detail("a single call")
