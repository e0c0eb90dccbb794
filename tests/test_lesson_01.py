"""Lesson 01's figures, recomputed with the library: the numbers its prose cells display."""

from __future__ import annotations

import json
import math

from primer.loop.messages import user_message
from primer.loop.model import ScriptedLLM
from primer.scenarios import chat


def test_the_model_remembers_only_what_the_list_it_is_sent_holds():
    llm = ScriptedLLM(chat.name_model)

    def ask(*texts):
        return llm(system=chat.SYSTEM, messages=[user_message(t) for t in texts], tools=[],
                   max_tokens=200).text

    assert ask("What is my name?") == "I don't know: nobody told me your name."
    assert ask("Hi, my name is Asha.", "What is my name?") == "Your name is Asha."


def test_call_1_sends_37_tokens_the_message_28_the_system_prompt_8_and_no_tools_1():
    as_json = json.dumps(user_message(chat.QUESTIONS[0]), separators=(",", ":"))
    parts = [math.ceil(len(t) / 4) for t in (as_json, chat.SYSTEM, "[]")]
    assert (len(as_json), parts) == (109, [28, 8, 1])
    first = chat.with_memory(ScriptedLLM(chat.name_model), chat.QUESTIONS[:1])[0]
    assert first.usage.input_tokens == sum(parts) == 37


def test_six_calls_send_869_tokens_call_6_sends_246_six_point_six_times_call_1():
    sent = [r.usage.input_tokens
            for r in chat.with_memory(ScriptedLLM(chat.name_model), chat.QUESTIONS)]
    assert sent == [37, 85, 132, 161, 208, 246]
    assert (sum(sent), len(sent) * sent[0], round(sent[-1] / sent[0], 1)) == (869, 222, 6.6)


def test_one_shot_forgets_for_41_tokens_and_memory_remembers_for_74():
    turns = ["Hi, my name is Asha.", "What is my name?"]
    out = {}
    for harness in (chat.one_shot, chat.with_memory):
        replies = harness(ScriptedLLM(chat.name_model), turns)
        out[harness.__name__] = (replies[-1].text, sum(r.usage.input_tokens for r in replies))
    assert out == {"one_shot": ("I don't know: nobody told me your name.", 41),
                   "with_memory": ("Your name is Asha.", 74)}


def test_the_quiz_s_36_is_what_six_calls_with_memory_send_in_messages():
    sizes = []

    def counting(messages):
        sizes.append(len(messages))
        return chat.name_model(messages)

    chat.with_memory(ScriptedLLM(counting), chat.QUESTIONS)
    assert sizes == [1, 3, 5, 7, 9, 11] and sum(sizes) == 36
    from primer.course.quiz import load_quiz
    assert load_quiz("01").questions[2].number == sum(sizes)


def test_the_reference_request_for_call_counts_what_the_model_s_usage_reports():
    from notebook_cells import solution

    from primer.loop.model import estimate_tokens
    request_for_call = solution("01", "request_for_call")
    replies = chat.with_memory(ScriptedLLM(chat.name_model), chat.QUESTIONS)
    said = [r.content for r in replies]
    counted = []
    for n in range(1, len(chat.QUESTIONS) + 1):
        request = request_for_call(chat.SYSTEM, chat.QUESTIONS, said, n)
        counted.append(estimate_tokens(request["system"]) + estimate_tokens([])
                       + sum(estimate_tokens(m) for m in request["messages"]))
    assert counted == [r.usage.input_tokens for r in replies] == [37, 85, 132, 161, 208, 246]
