"""Approval rules as data: a refund over the limit waits for a person, with the rule's
reason; under it runs; bad rules are refused with what to fix."""

from __future__ import annotations

import pytest

from primer.harness.approval_rules import ApprovalRules, RuleGate, rules_version
from primer.loop.tools import ToolRegistry, call_approval_reason, tool

DATA = {"version": "2026-12-01", "rules": [
    {"tool": "refund", "when": {"amount": {">": 100}},
     "reason": "a refund over 100 USD needs a person"},
    {"tool": "refund", "when": {"country": {"not in": ["GB", "DE"]}},
     "reason": "refunds abroad need a person"},
]}


@tool(side_effecting=True)
def refund(order: str, amount: float, country: str = "GB") -> str:
    """Refund an order.

    Args:
      order: the order id.
      amount: USD.
      country: where the customer lives.
    """
    return "refunded"


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
      order: the order id.
    """
    return "found"


def reason(rules: ApprovalRules, **args) -> str | None:
    registry = ToolRegistry(rules.apply([refund, lookup]))
    return call_approval_reason(registry, {"type": "tool_use", "id": "t1", "name": "refund",
                                           "input": {"order": "R-1", **args}})


def test_a_refund_over_the_limit_needs_a_person_with_the_rules_reason_and_under_it_runs():
    rules = ApprovalRules.from_dict(DATA)
    assert reason(rules, amount=250) == "a refund over 100 USD needs a person"
    assert reason(rules, amount=100) is None
    assert reason(rules, amount=20, country="FR") == "refunds abroad need a person"


def test_rules_apply_to_the_tools_they_name_and_carry_their_version():
    refund_gated, lookup_kept = ApprovalRules.from_dict(DATA).apply([refund, lookup])
    assert isinstance(refund_gated.needs_approval, RuleGate)
    assert lookup_kept is lookup
    assert rules_version(refund_gated) == "2026-12-01" and rules_version(lookup) is None


def test_a_condition_that_cannot_be_judged_holds_so_the_call_waits():
    rules = ApprovalRules.from_dict({"version": "1", "rules": [
        {"tool": "refund", "when": {"country": {">": 3}}, "reason": "odd rule"}]})
    assert reason(rules, amount=5, country="GB") == "odd rule"  # "GB" > 3 does not compare


def test_rules_read_back_from_their_own_data_are_the_same_rules():
    rules = ApprovalRules.from_dict(DATA)
    assert ApprovalRules.from_dict(rules.to_dict()) == rules
    assert rules.to_dict() == DATA


@pytest.mark.parametrize(("data", "message"), [
    ({"rules": []}, "need a version"),
    ({"version": "1", "rules": [{"tool": "refund", "when": {}}]}, "give the reason"),
    ({"version": "1", "rules": [{"tool": "refund", "when": {"amount": {"~": 1}},
                                 "reason": "r"}]}, "unknown operator '~'"),
    ({"version": "1", "rules": [{"tool": "refund", "when": {"country": {"in": "GB"}},
                                 "reason": "r"}]}, "needs a list"),
    ({"version": "1", "rules": [{"tool": "refund", "if": {}, "reason": "r"}]},
     "a rule is"),
])
def test_a_rule_set_that_cannot_be_used_is_refused_saying_what_to_fix(data, message):
    with pytest.raises(ValueError, match=message):
        ApprovalRules.from_dict(data)


def test_rules_naming_a_tool_or_argument_that_does_not_exist_are_refused_by_apply():
    unknown_tool = ApprovalRules.from_dict({"version": "1", "rules": [
        {"tool": "refnud", "reason": "r"}]})
    with pytest.raises(ValueError, match="names the tool 'refnud', which is not among"):
        unknown_tool.apply([refund])
    unknown_arg = ApprovalRules.from_dict({"version": "1", "rules": [
        {"tool": "refund", "when": {"amount_usd": {">": 1}}, "reason": "r"}]})
    with pytest.raises(ValueError, match="tests 'amount_usd', which is not an argument"):
        unknown_arg.apply([refund])


def test_an_argument_left_out_is_judged_at_its_default_and_without_one_the_call_waits():
    rules = ApprovalRules.from_dict(DATA)
    assert reason(rules, amount=20) is None  # country defaults to "GB"
    no_amount = ApprovalRules.from_dict({"version": "1", "rules": [
        {"tool": "refund", "when": {"amount": {">": 100}}, "reason": "big"}]})
    assert no_amount.apply([refund])[0].needs_approval({"order": "R-1"}) == "big"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "100", None, True])
def test_a_rule_whose_bound_cannot_compare_as_a_number_is_refused(value):
    with pytest.raises(ValueError, match=r"approval rule 1 \(refund\): .*'>'"):
        ApprovalRules.from_dict({"version": "1", "rules": [
            {"tool": "refund", "when": {"amount": {">": value}}, "reason": "big"}]})
