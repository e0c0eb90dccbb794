"""The budget burner: a model that never stops, stopped by a 12,000-token budget."""

from __future__ import annotations

from primer.loop.state import StopCause
from primer.scenarios import burner, get_demo


def test_the_burner_stops_on_the_token_budget_at_the_first_call_past_12000():
    result = get_demo("burner").run()
    rows = burner.per_call_tokens(result)
    assert result.stop_cause is StopCause.TOKEN_BUDGET
    assert rows[-1].running_total > 12_000 >= rows[-2].running_total
    assert burner.stop_call(rows) == len(result.steps)


def test_the_burner_stops_at_call_11_within_the_10_to_12_calls_the_course_quotes():
    result = get_demo("burner").run()
    assert len(result.steps) == 11
    assert result.usage.total_tokens == burner.per_call_tokens(result)[-1].running_total


def test_each_call_sends_more_tokens_than_the_last_and_the_total_is_their_sum():
    rows = burner.per_call_tokens()
    sent = [r.sent for r in rows]
    assert all(b > a for a, b in zip(sent, sent[1:], strict=False))
    running = 0
    for r in rows:
        running += r.sent + r.output
        assert r.running_total == running


def test_the_burner_searches_a_new_query_every_call():
    result = get_demo("burner").run()
    queries = [e.input["query"] for e in result.executions]
    assert len(set(queries)) == len(result.steps)


def test_the_burner_costs_what_its_usage_costs_at_the_lessons_prices():
    result = get_demo("burner").run()
    expected = (result.usage.input_tokens * 5 + result.usage.output_tokens * 25) / 1_000_000
    assert abs(result.cost_usd - expected) < 1e-12
