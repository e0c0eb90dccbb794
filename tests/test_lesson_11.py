"""Lesson 11's routing and orchestrator-workers figures, computed as the lesson does."""

from __future__ import annotations

import pytest

from primer.scenarios import support
from primer.scenarios import support_routes as routes


def test_routing_sends_the_ticket_naming_an_order_to_the_agent_and_the_rest_to_the_workflow():
    taken = {t.id: routes.handle_with_routing(t)[0].route for t in support.TICKETS}
    assert taken == {"T1": "workflow", "T2": "workflow", "T3": "workflow", "T4": "workflow",
                     "T5": "agent"}


def test_the_routed_desk_answers_every_ticket_for_under_half_the_agents_cost():
    wf, agent, routed = routes.compare_with_routing()
    assert (routed["succeeded"], routed["tickets"], routed["model calls"]) == (5, 5, 16)
    assert routed["model calls"] == 4 * 3 + 4  # the workflow's 2 + router, the agent's 3 + router
    assert f"{routed['cost USD'] / agent['cost USD']:.0%}" == "42%"
    assert wf["succeeded"] == 4 and agent["succeeded"] == 5


def test_a_ticket_of_no_known_kind_falls_back_to_the_agent():
    r, _ = routes.handle_with_routing(support.Ticket("T6", "Do you sell gift cards?", "pol-refund"))
    assert (r.route, r.fell_back) == ("agent", True)


def test_the_orchestrator_splits_the_three_problem_message_into_three_workers():
    run = routes.handle_with_orchestrator(routes.MULTI_TICKET)
    assert [s.id for s in run.subtasks] == ["damaged", "shipping", "account"]
    assert run.outcome == "done" and run.model_calls == 5
    assert routes.policies_cited(run.final_text) == routes.policies_needed(routes.MULTI_TICKET) \
        == {"pol-damaged", "pol-shipping", "pol-account"}


def test_the_workflow_answers_one_of_three_problems_and_costs_less():
    wf, orch = routes.multi_ticket_rows()
    assert (wf["policies cited"], orch["policies cited"]) == ("1 of 3", "3 of 3")
    assert (wf["model calls"], orch["model calls"]) == (2, 5)
    assert orch["cost USD"] / wf["cost USD"] == pytest.approx(6.7, abs=0.05)


def test_the_number_of_workers_follows_the_message_and_the_cap_is_checked_first():
    two = "The mug I ordered arrived cracked. And I cannot log in."
    assert len(routes.handle_with_orchestrator(two).subtasks) == 2
    capped = routes.handle_with_orchestrator(two, max_subtasks=1)
    assert (capped.outcome, capped.model_calls) == ("too_many_subtasks", 1)


def test_the_quiz_counts_the_routed_desks_model_calls_as_the_library_does():
    from primer.course.quiz import load_quiz
    wf, agent, routed = routes.compare_with_routing()
    q = load_quiz("11").questions[2]
    assert q.number == routed["model calls"] == 16
    per_ticket = {t.id: routes.handle_with_routing(t)[1].model_calls for t in support.TICKETS}
    assert sorted(per_ticket.values()) == [3, 3, 3, 3, 4]      # router + workflow 2, + agent 3
    wrong = {w.value for w in q.wrong}
    assert wrong == {routed["model calls"] - len(support.TICKETS), agent["model calls"]} \
        == {11, 15}
