"""diagnose() on conversations the course did not make (primer/data/diagnose_gallery): each
gets the verdict a person wrote for it before the detectors were tuned, no healthy one is
flagged, and ``diagnose --score`` prints the precision and recall computed here."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from primer.__main__ import main
from primer.harness.tracing.diagnosis import NOTHING_FOUND, FailureMode, diagnose
from primer.harness.tracing.gallery_score import gallery_cases, score_gallery

CASES = gallery_cases()
MODES = {m.value for m in FailureMode}


def test_the_gallery_has_25_or_more_conversations_of_every_kind_asked_for():
    assert len(CASES) >= 25
    expected = {c.expected for c in CASES}
    assert {"healthy", "repeats", "alternation", "empty_results", "errors_as_text",
            "rate_limited", "runaway_cost", "silent_wrong_answer"} <= expected
    assert expected - {"healthy"} <= MODES
    sources = " ".join(c.source for c in CASES)
    for framework in ("Anthropic SDK tool runner", "LangGraph", "OpenAI Agents SDK"):
        assert framework in sources


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_conversation_gets_its_expected_verdict(case):
    found = diagnose(case.path)
    modes = [m.value for m in found.modes]
    if case.expected == "healthy" or case.undetectable:
        assert modes == [], found.report()
        assert found.verdict.startswith(NOTHING_FOUND) and "healthy" not in found.verdict
    else:
        assert modes[:1] == [case.expected], found.report()


@pytest.mark.parametrize("case", [c for c in CASES if c.expected not in ("healthy",)
                                  and not c.undetectable], ids=lambda c: c.name)
def test_a_finding_names_the_conversations_own_tools_and_a_guard_for_any_loop(case):
    data = json.loads(case.path.read_text())
    tools = {b["name"] for m in data["messages"] if isinstance(m["content"], list)
             for b in m["content"] if b.get("type") == "tool_use"}
    finding = diagnose(case.path).findings[0]
    if case.expected != "silent_wrong_answer":
        assert any(t in finding.evidence for t in tools), finding.evidence
    assert finding.anywhere, finding.mode


def test_no_healthy_conversation_is_flagged_and_the_figures_are_what_the_cli_prints():
    score = score_gallery()
    assert score.healthy_flagged == []
    assert all(r.right for r in score.results)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["diagnose", "--gallery", "--score"])
    last = [line for line in out.getvalue().splitlines() if "precision" in line][0]
    assert code == 0
    assert (f"precision {score.precision:.2f} ({len(score.named_right)} of "
            f"{len(score.flagged)} flagged named right)") in last
    assert f"recall {score.recall:.2f}" in last and "healthy flagged: 0" in last
    undetectable = [c.name for c in CASES if c.undetectable]
    assert score.recall == pytest.approx(1 - len(undetectable) / len(score.stuck))
    assert all(f"cannot judge: {n}" in out.getvalue() for n in undetectable)


def test_the_issues_cases_by_their_evidence():
    by = {c.name: c for c in CASES}
    date = diagnose(by["healthy-date-day-month"].path)
    assert date.findings == [] and date.exit_code == 0
    (alt, *_) = diagnose(by["alternating-empty-orders"].path).findings
    assert alt.mode is FailureMode.ALTERNATION
    assert "get_orders and lookup_customer alternated" in alt.evidence
    assert '{"orders": []}' in alt.evidence
    (rate,) = diagnose(by["openai-agents-rate-limited"].path).findings
    assert "geocode ×5" in rate.evidence and "none marked is_error" in rate.evidence
    assert "RateLimited" in rate.guard and "Retry-After" in rate.anywhere
    (wrong,) = diagnose(by["wrong-date"].path).findings
    assert "5 March 2026" in wrong.evidence
