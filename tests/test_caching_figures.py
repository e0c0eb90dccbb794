"""The course's prompt-caching figures put the cache where the requests ``ClaudeLLM`` sends
put it, and honour the minimum cacheable prefix.

Each test sends real requests through the ``anthropic`` SDK to the local Messages API server,
reads the ``cache_control`` marks in the bodies as sent, and bills those bodies by the API's
caching rule (:func:`api_cache_usages` below: a mark caches the request up to it, only from
the model's minimum length on; a later request reads the longest marked prefix already
written). The figure functions of :mod:`primer.loop.cost` (and the design worksheet built on
them) must give the same usage.
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import accumulate
from typing import Any

import anthropic
import pytest

from primer.course.support_design import SupportDesign, ToolPlan
from primer.harness.production import run_production
from primer.harness.sessions.session import Session
from primer.loop.cost import (
    cached_history_usages,
    cached_prefix_usages,
    run_cost_usd,
    run_usages,
)
from primer.loop.model import Prices, Usage, estimate_tokens
from primer.providers.claude import DEFAULT_MODEL, MIN_CACHEABLE_TOKENS, ClaudeLLM
from primer.providers.fake_server import FakeModelServer, strip_cache_control
from primer.scenarios import get_demo, support_chat
from primer.scenarios.handbook import system_with_handbook

MINIMUM = MIN_CACHEABLE_TOKENS[DEFAULT_MODEL]
pto = get_demo("pto")


def _claude(server: FakeModelServer, **options: Any) -> ClaudeLLM:
    client = anthropic.Anthropic(api_key="sk-ant-local", base_url=server.base_url,
                                 max_retries=0)
    return ClaudeLLM(client=client, **options)


def breakpoints(body: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Each ``cache_control`` mark of a request body, in the API's order (tools, system,
    messages): ``(where, tokens up to and including the marked block, the prefix's key)``.
    Tokens are counted as the local server counts them (``estimate_tokens``)."""
    tools = [strip_cache_control(t) for t in body.get("tools") or []]
    system = body.get("system") or ""
    text = system if isinstance(system, str) else "".join(b["text"] for b in system)
    marks = []
    if any("cache_control" in t for t in body.get("tools") or []):
        marks.append(("tools", estimate_tokens(tools), json.dumps(tools, sort_keys=True)))
    if isinstance(system, list) and any("cache_control" in b for b in system):
        marks.append(("system", estimate_tokens(tools) + estimate_tokens(text),
                      json.dumps([tools, text], sort_keys=True)))
    for i, m in enumerate(body["messages"]):
        blocks = m["content"] if isinstance(m["content"], list) else []
        if "cache_control" in m or any("cache_control" in b for b in blocks):
            marks.append((f"messages.{i}", -1, ""))      # counted below if ever sent
    return marks


def api_cache_usages(bodies: list[dict[str, Any]], plain: list[Usage], minimum: int
                     ) -> list[Usage]:
    """Bill each request as the API does, from its marks: ``plain`` are the same calls'
    uncached usages (their prompt sizes). A mark under ``minimum`` tokens caches nothing."""
    written: set[str] = set()
    out = []
    for body, u in zip(bodies, plain, strict=True):
        marks = [(n, key) for where, n, key in breakpoints(body) if n >= minimum]
        assert all(n >= 0 for n, _ in marks), "a mark in the history: count it before use"
        read = max((n for n, key in marks if key in written), default=0)
        top = max((n for n, _ in marks), default=0)
        written |= {key for _, key in marks}
        out.append(Usage(u.input_tokens - top, u.output_tokens, top - read, read))
    return out


def _pto_runs(system: str) -> tuple[list[Usage], list[Usage], list[dict[str, Any]]]:
    """The PTO task with ``system``: usages uncached, usages ``cache_prefix=True`` (as the
    local server reports them, which ignores the minimum) and the cached run's bodies."""
    runs = []
    for options in ({}, {"cache_prefix": True}):
        with FakeModelServer(pto.make_llm()) as server:
            result = run_production(_claude(server, **options), pto.task, pto.make_tools(),
                                    system=system, config=pto.config)
            runs.append(([s.usage for s in result.steps],
                         [r.body for r in server.model_requests]))
    (plain, _), (cached, bodies) = runs
    return plain, cached, bodies


def test_claude_llm_marks_the_last_tool_and_the_system_prompt_and_nothing_in_the_history():
    _, _, bodies = _pto_runs(pto.system)
    assert len(bodies) == 2 and len(bodies[1]["messages"]) == 3
    for body in bodies:
        assert [where for where, _, _ in breakpoints(body)] == ["tools", "system"]


def test_a_prefix_above_the_minimum_is_billed_as_cached_prefix_usages_says():
    plain, cached, bodies = _pto_runs(system_with_handbook(pto.system))
    prefix = breakpoints(bodies[0])[-1][1]
    assert prefix >= MINIMUM == 2_048
    figure = cached_prefix_usages(plain, prefix, min_cacheable=MINIMUM)
    assert api_cache_usages(bodies, plain, MINIMUM) == figure == cached
    assert figure[0].cache_creation_input_tokens == figure[1].cache_read_input_tokens == prefix


def test_a_prefix_under_the_minimum_caches_nothing_though_the_local_server_reports_it():
    plain, cached, bodies = _pto_runs(pto.system)
    prefix = breakpoints(bodies[0])[-1][1]
    assert prefix < MINIMUM
    assert api_cache_usages(bodies, plain, MINIMUM) == plain
    assert cached_prefix_usages(plain, prefix, min_cacheable=MINIMUM) == plain
    # the local server has no minimum: what it reports is the same function without one
    assert cached == cached_prefix_usages(plain, prefix) != plain


def test_caching_the_history_is_not_what_claude_llm_asks_for():
    plain, _, bodies = _pto_runs(system_with_handbook(pto.system))
    sent = api_cache_usages(bodies, plain, MINIMUM)
    assert cached_history_usages(plain, min_cacheable=MINIMUM) != sent
    assert sent[1].input_tokens > 0          # call 2's history is billed as plain input


def test_the_design_worksheet_caches_the_prefix_as_claude_llm_does_0_0642_usd():
    design = SupportDesign(tools=(ToolPlan("get_order", "look up an order"),),
                           good_run_steps=6, max_steps=12, token_budget=60_000,
                           per_step_success=0.97)
    assert design.min_cacheable_tokens == MINIMUM and design.base_tokens == 2_800
    plain = run_usages(6, 2_800, 800, 150)
    usages = cached_prefix_usages(plain, 2_800, min_cacheable=MINIMUM)
    assert usages == run_usages(6, 2_800, 800, 150, cache="prefix", min_cacheable=MINIMUM)
    n = design.numbers()
    assert n.cached_cost_per_task_usd == pytest.approx(run_cost_usd(usages, Prices(3, 15)))
    assert round(n.cached_cost_per_task_usd, 4) == 0.0642
    assert round(n.cost_per_task_usd, 4) == 0.0999
    # the old figure assumed a breakpoint at the end of every prompt
    assert round(run_cost_usd(cached_history_usages(plain), Prices(3, 15)), 4) == 0.0456
    short = replace(design, static_tokens=1_000)            # a 1,800-token prefix
    assert not short.prefix_is_cached
    assert short.numbers().cached_cost_per_task_usd == short.numbers().cost_per_task_usd
    assert "caching covers nothing: the 1,800-token prefix" in short.worksheet()


@pytest.fixture(scope="module")
def twenty_turns():
    """Lesson 16's twenty-turn session, through ClaudeLLM(cache_prefix=True) and the SDK."""
    with FakeModelServer(support_chat.make_llm()) as server:
        chat = Session(_claude(server, cache_prefix=True), support_chat.make_tools(),
                       system=support_chat.SYSTEM, config=support_chat.CONFIG)
        for k in range(20):
            chat.send(support_chat.QUESTIONS[k % len(support_chat.QUESTIONS)])
        bodies = [r.body for r in server.model_requests]
    plain = [Usage(u.prompt_tokens, u.output_tokens) for t in chat.turns for u in t.call_usages]
    return chat.turns, plain, bodies


def test_lesson_16s_session_caches_nothing_with_claude_llms_marks(twenty_turns):
    turns, plain, bodies = twenty_turns
    assert len(bodies) == len(plain) == 42
    assert all([w for w, _, _ in breakpoints(b)] == ["tools", "system"] for b in bodies)
    prefix = breakpoints(bodies[0])[-1][1]
    assert prefix < MINIMUM
    starts = set(accumulate([0, *(t.steps for t in turns[:-1])]))
    assert api_cache_usages(bodies, plain, MINIMUM) == plain
    for cold in ((), starts):
        assert cached_prefix_usages(plain, prefix, cold, min_cacheable=MINIMUM) == plain
    assert round(run_cost_usd(plain), 3) == 0.410


def test_lesson_16s_session_with_a_breakpoint_at_each_prompts_end_and_the_minimum(twenty_turns):
    turns, plain, _ = twenty_turns
    starts = set(accumulate([0, *(t.steps for t in turns[:-1])]))
    warm = run_cost_usd(cached_history_usages(plain, min_cacheable=MINIMUM))
    cold = run_cost_usd(cached_history_usages(plain, starts, min_cacheable=MINIMUM))
    ignoring = run_cost_usd(cached_history_usages(plain))
    assert (round(warm, 3), round(cold, 3), round(ignoring, 3)) == (0.229, 0.346, 0.091)
