"""Skills: one line each in the prompt, full text on demand."""

from __future__ import annotations

import pytest

from primer.harness.production import run_production
from primer.harness.skills import Skill, SkillBook
from primer.loop.model import ScriptedLLM, estimate_tokens, tool_reply
from primer.loop.state import StopCause

BOOK = SkillBook([Skill("refunds", "Use for refund requests.", "Step one. " * 100),
                  Skill("shipping", "Use for late or lost parcels.", "Check carrier. " * 80)])


def test_only_one_line_per_skill_sits_in_the_index_prompt():
    prompt = BOOK.index_prompt("You help customers.")
    assert "- refunds: Use for refund requests." in prompt
    assert "Step one." not in prompt
    assert "Step one." in BOOK.full_prompt("You help customers.")


def test_the_index_is_smaller_than_the_full_prompt_by_the_skills_text():
    t = BOOK.prompt_tokens("base")
    assert t["full"] - t["index"] > estimate_tokens("Step one. " * 100)
    assert t["index"] == estimate_tokens(BOOK.index_prompt("base"))


def test_load_skill_brings_the_full_text_into_the_history():
    llm = ScriptedLLM([tool_reply(("load_skill", {"name": "refunds"})), "done"])
    result = run_production(llm, "refund me", [BOOK.load_tool()], system=BOOK.index_prompt())
    assert result.stop_cause is StopCause.END_TURN
    assert "Step one." in result.executions[0].content


def test_an_unknown_skill_name_is_refused_with_the_real_names():
    llm = ScriptedLLM([tool_reply(("load_skill", {"name": "taxes"})), "done"])
    result = run_production(llm, "t", [BOOK.load_tool()])
    e = result.executions[0]
    assert e.error_kind == "invalid_input" and "refunds" in e.content and "shipping" in e.content


def test_a_multi_line_description_is_refused():
    with pytest.raises(ValueError, match="one line"):
        Skill("x", "a\nb", "text")
