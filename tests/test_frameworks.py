"""The same scripted models under other frameworks' loops (lesson 13): how many calls each
makes before it stops, what it raises, and what its caller can see. Needs the ``frameworks``
extra, which ``make test`` installs."""

from __future__ import annotations

import asyncio
import logging
from importlib.util import find_spec

import pytest

from primer.course.frameworks import (
    DISTRIBUTIONS,
    run_agents_sdk,
    run_langgraph,
    run_ours,
    run_tool_runner,
    versions,
)
from primer.scenarios import get_demo

#: Skipped without the frameworks (looked up, not imported: importing them costs each test
#: worker about 2 s while collecting; the tests import them when they run).
pytestmark = pytest.mark.skipif(
    not all(find_spec(m) for m in ("langgraph", "langchain_anthropic", "agents")),
    reason="needs the frameworks extra: .venv/bin/pip install -e '.[frameworks]'")

REPEATS, BURNER = get_demo("orders-repeat"), get_demo("burner")


@pytest.fixture(autouse=True)
def _quiet_tool_runner():
    """The tool runner logs a traceback for each tool that raises; the tests read results."""
    logger = logging.getLogger("anthropic.lib.tools._beta_runner")
    logger.disabled = True
    yield
    logger.disabled = False


def test_versions_name_every_compared_distribution():
    assert list(versions()) == list(DISTRIBUTIONS)
    assert "not installed" not in versions().values()


@pytest.mark.parametrize("scenario, calls, cause", [(REPEATS, 3, "loop_detected"),
                                                    (BURNER, 11, "token_budget")])
def test_our_loop_stops_the_stuck_models_on_a_named_cause(scenario, calls, cause):
    run = run_ours(scenario)
    assert run.model_calls == calls and run.named and run.told.startswith(cause)
    assert run.caller_tokens == run.usage.total_tokens


@pytest.mark.parametrize("scenario", [REPEATS, BURNER], ids=["repeats", "burner"])
def test_the_tool_runner_without_max_iterations_never_stops_by_itself(scenario):
    run = run_tool_runner(scenario, give_up_after=12)
    assert run.model_calls == 12 and not run.named
    assert run.ended_with == "still going: we broke off after 12 calls"


def test_the_tool_runner_stops_at_max_iterations_without_saying_why():
    run = run_tool_runner(REPEATS, max_iterations=4)
    assert run.model_calls == 4 and run.told == "stop_reason tool_use (max_iterations reached)"


@pytest.mark.parametrize("limit", [5, 25])
def test_langgraph_makes_limit_over_2_plus_1_model_calls_then_raises_and_hands_back_nothing(
        limit):
    run = run_langgraph(REPEATS, recursion_limit=limit)
    assert run.model_calls == limit // 2 + 1
    assert run.ended_with == "raised GraphRecursionError" and run.named
    assert run.caller_tokens == 0 and run.usage.total_tokens > 0
    assert run.told.startswith(f"Recursion limit of {limit} reached")


@pytest.mark.parametrize("scenario", [REPEATS, BURNER], ids=["repeats", "burner"])
def test_the_agents_sdk_raises_max_turns_exceeded_after_its_default_10_turns(scenario):
    run = asyncio.run(run_agents_sdk(scenario))
    assert run.model_calls == 10 and run.ended_with == "raised MaxTurnsExceeded"
    assert run.told == "Max turns (10) exceeded"
    assert run.caller_tokens == run.usage.total_tokens  # e.run_data keeps every response


def test_the_agents_sdk_with_a_higher_cap_lets_the_burner_spend_more():
    ten = asyncio.run(run_agents_sdk(BURNER))
    twenty = asyncio.run(run_agents_sdk(BURNER, max_turns=20))
    assert twenty.model_calls == 20 and twenty.usage.total_tokens > 2 * ten.usage.total_tokens


def test_lesson_13s_figures_for_langgraphs_default_limit_and_the_burner():
    """The values lesson 13 states: LangGraph's default allows 5,004 model calls; the
    burner's prompt (229 tokens, +183 a call) outgrows a 200,000-token window at call 1,093,
    after about 109 million input tokens, 546 USD at the course's prices."""
    from itertools import count

    from langgraph._internal._config import DEFAULT_RECURSION_LIMIT

    from primer.loop.cost import call_input_tokens, cumulative_input_tokens
    from primer.loop.model import Prices, Usage, cost_usd

    assert int(DEFAULT_RECURSION_LIMIT) // 2 + 1 == 5_004
    steps = run_ours(BURNER).extra["result"].steps
    base = steps[0].usage.input_tokens
    growth = round((steps[-1].usage.input_tokens - base) / (len(steps) - 1))
    assert (base, growth) == (229, 183)
    full_at = next(n for n in count(1) if call_input_tokens(n, base, growth) > 200_000)
    sent = cumulative_input_tokens(full_at - 1, base, growth)
    assert full_at == 1_093 and round(sent / 1e6) == 109
    assert round(cost_usd(Usage(sent), Prices())) == 546


@pytest.mark.slow
def test_lesson_13s_figures_for_the_tool_runner_after_30_calls():
    assert f"{run_tool_runner(REPEATS, give_up_after=30).cost_usd:.2f}" == "0.25"
    assert f"{run_tool_runner(BURNER, give_up_after=30).cost_usd:.2f}" == "0.44"
