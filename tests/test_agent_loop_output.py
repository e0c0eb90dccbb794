"""Output validation: a final answer must pass its pydantic model, or the run says so."""

from __future__ import annotations

import json

import pydantic

from primer.loop.config import AgentConfig
from primer.loop.loop import run_agent
from primer.loop.model import ScriptedLLM
from primer.loop.state import StopCause


class Answer(pydantic.BaseModel):
    order_id: str
    total_inr: float = pydantic.Field(gt=0)


GOOD = json.dumps({"order_id": "A123", "total_inr": 5900.0})
BAD = json.dumps({"order_id": "A123", "total_inr": -1})


def run(script, **cfg):
    llm = ScriptedLLM(script)
    return run_agent(llm, "total of A123?", output_model=Answer,
                     config=AgentConfig(**cfg)), llm


def test_a_valid_answer_is_returned_with_its_parsed_output():
    result, llm = run([GOOD])
    assert result.stop_cause is StopCause.END_TURN and result.final_text == GOOD
    assert result.output == Answer(order_id="A123", total_inr=5900.0) and llm.calls == 1


def test_a_failing_answer_gets_one_corrective_turn_naming_the_field():
    result, llm = run([BAD, GOOD])
    assert result.stop_cause is StopCause.END_TURN and llm.calls == 2
    correction = result.messages[2]["content"]
    assert "total_inr" in correction and "greater than 0" in correction
    assert result.output.total_inr == 5900.0


def test_a_failing_final_answer_never_reaches_final_text_as_if_it_had_passed():
    result, llm = run([BAD, "about 5900 rupees"])
    assert result.stop_cause is StopCause.INVALID_OUTPUT
    assert result.final_text is None and result.output is None
    assert llm.calls == 2  # one corrective turn, then the named stop
    assert "Answer" in result.stop_detail and "invalid final answer" in result.summary


def test_the_corrective_turns_are_capped_by_output_retries():
    result, llm = run([BAD, BAD, BAD, GOOD], output_retries=2)
    assert result.stop_cause is StopCause.INVALID_OUTPUT and llm.calls == 3


def test_no_corrective_turn_is_made_on_the_last_allowed_step():
    result, llm = run([BAD, GOOD], max_steps=1)
    assert result.stop_cause is StopCause.INVALID_OUTPUT and llm.calls == 1


def test_a_fenced_json_answer_is_read():
    result, _ = run([f"```json\n{GOOD}\n```"])
    assert result.output.order_id == "A123"
