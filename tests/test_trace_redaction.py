"""The trace writer's look for secrets: whatever an event holds, the line written is the
event as :func:`~primer.harness.tracing.redaction.redact` leaves it.

The writer looks only at the outside part of a step's ``model_call`` and ``tool_execution``
events (see :mod:`primer.harness.tracing.trace`); these tests plant secrets in every field of those
events, counted fields and extra fields included, and compare each written line with
``redact`` of the whole event.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primer.harness.production import run_production
from primer.harness.tracing.redaction import REDACTED, redact
from primer.harness.tracing.trace import _OUTSIDE, TraceWriter
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.tools import ToolError, tool

SECRETS = ["sk-ant-api03-" + "Ab1" * 10, "Bearer abcdefghijklmnopqrstuvwx", "AKIAABCDEFGHIJKLMNOP",
           "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", 'api_key="hunter2hunter2"', "password: swordfish",
           "x-api-key=zzzzzzzzzzzzzzzz", "tokensk-ant-api03-GLUEDgluedGLUED01234"]
SECRET_KEYS = ["api_key", "Authorization", "headers", "X-Api-Key", "cookie", "secret",
               "sk-ant-api03-KEYASKEYASKEYAS12"]

text = st.one_of(st.text(max_size=12), st.sampled_from(SECRETS),
                 st.builds(lambda a, s, b: a + s + b, st.text(max_size=4),
                           st.sampled_from(SECRETS), st.text(max_size=4)))
keys = st.one_of(st.text(max_size=8), st.sampled_from(SECRET_KEYS))
values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8)
count = st.one_of(st.integers(0, 10**6), st.integers(0, 10**6), text)  # now and then forged
seconds = st.one_of(st.floats(0, 100), st.floats(0, 100), text, st.integers(0, 9))
inputs = st.dictionaries(keys, values, max_size=3)
blocks = st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": text}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": text, "name": text,
                           "input": inputs})), max_size=3)
usage = st.one_of(
    st.fixed_dictionaries({k: count for k in ("input_tokens", "output_tokens",
                                              "cache_creation_input_tokens",
                                              "cache_read_input_tokens")}),
    st.dictionaries(keys, values, max_size=4))
reply = st.fixed_dictionaries(
    {"content": blocks, "stop_reason": text, "usage": usage, "model": text},
    optional={"received": text, "refused": st.lists(text, max_size=2)})
extra = st.dictionaries(keys.filter(lambda k: k not in ("event", "seq", "t")), values,
                        max_size=1)
model_call = st.builds(
    lambda base, more: {**base, **more},
    st.fixed_dictionaries({"step": count, "prompt_estimate": count, "reply": reply,
                           "latency_s": seconds}),
    st.one_of(st.just({}), st.just({}), extra))
tool_execution = st.builds(
    lambda base, more: {**base, **more},
    st.fixed_dictionaries({"step": count, "tool_use_id": text, "name": text, "input": inputs,
                           "content": text, "is_error": st.one_of(st.booleans(), text),
                           "error_kind": st.one_of(st.none(), text), "latency_s": seconds,
                           "attempts": count,
                           "attempt_log": st.lists(st.dictionaries(keys, values, max_size=2),
                                                   max_size=2)}),
    st.one_of(st.just({}), st.just({}), extra))
events = st.one_of(st.tuples(st.just("model_call"), model_call),
                   st.tuples(st.just("tool_execution"), tool_execution),
                   st.tuples(st.sampled_from(["approval", "hook_error"]),
                             st.dictionaries(keys, values, max_size=3)))


def written(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        TraceWriter(path)(kind, data)
        return json.loads(path.read_text())


@settings(max_examples=600, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(events)
def test_every_line_is_the_event_as_redact_leaves_it(event):
    kind, data = event
    line = written(kind, data)
    expected = redact({"event": kind, "seq": 0, "t": line["t"], **data})
    assert line == json.loads(json.dumps(expected))
    for secret in SECRETS + SECRET_KEYS[-1:]:
        if secret.startswith(("sk-ant-", "tokensk-")):
            assert secret.removeprefix("token") not in json.dumps(line)


def test_a_secret_in_any_outside_field_of_a_step_event_is_redacted():
    key = SECRETS[0]
    base_call = {"step": 1, "prompt_estimate": 10, "latency_s": 0.5,
                 "reply": {"content": [], "stop_reason": "end_turn", "model": "m",
                           "usage": {"input_tokens": 1, "output_tokens": 2,
                                     "cache_creation_input_tokens": 0,
                                     "cache_read_input_tokens": 0}}}
    for field in ("content", "stop_reason", "model", "received", "extra"):
        data = json.loads(json.dumps(base_call))
        data["reply"][field] = [{"type": "text", "text": key}] if field == "content" else key
        assert key not in json.dumps(written("model_call", data)), field
    for forged in ("step", "prompt_estimate", "latency_s", "input_tokens",
                   "cache_read_input_tokens", "extra"):  # a counted field that holds text
        data = json.loads(json.dumps(base_call))
        where = data["reply"]["usage"] if forged.endswith("tokens") else data
        where[forged] = key
        assert key not in json.dumps(written("model_call", data)), forged
    data = json.loads(json.dumps(base_call))
    data["reply"]["usage"]["api_key"] = 7  # a secret-named key among the counts
    assert written("model_call", data)["reply"]["usage"]["api_key"] == REDACTED
    base_exec = {"step": 1, "tool_use_id": "t1", "name": "n", "input": {}, "content": "ok",
                 "is_error": False, "error_kind": None, "latency_s": 0.1, "attempts": 1,
                 "attempt_log": []}
    for field, value in (("tool_use_id", key), ("name", key), ("input", {"q": key}),
                         ("input", {"api_key": "x"}), ("content", key), ("error_kind", key),
                         ("attempt_log", [{"error": key}]), ("step", key), ("attempts", key),
                         ("is_error", key), ("latency_s", key), ("extra", key)):
        line = written("tool_execution", {**base_exec, field: value})
        assert key not in json.dumps(line) and (value != {"api_key": "x"} or
                                                line["input"] == {"api_key": REDACTED}), field


def test_the_loops_own_step_events_take_the_short_look():
    """Every model_call and tool_execution the loop writes has the shape whose outside part
    alone is looked at (a field added to either event must be placed on one side)."""
    @tool
    def flaky(n: int) -> str:
        """Fail on odd n."""
        if n % 2:
            raise ToolError("odd")
        return "even"

    seen: list[tuple[str, dict[str, Any]]] = []
    llm = ScriptedLLM([tool_reply(("flaky", {"n": 1}), ("flaky", {"n": 2})),
                       tool_reply(("missing", {})), tool_reply(("flaky", {"n": "x"})), "done"])
    run_production(llm, "go", [flaky], config=AgentConfig(tool_retries=1),
                   on_event=lambda kind, data: seen.append((kind, data)))
    steps = [(k, d) for k, d in seen if k in _OUTSIDE]
    assert {k for k, _ in steps} == {"model_call", "tool_execution"} and len(steps) >= 8
    assert [k for k, d in steps if _OUTSIDE[k](d) is None] == []


# ---------------------------------------------------------------- a key cut in pieces

SPLIT_KEY = "sk-ant-api03-" + "Zq7Rm2Kp9Xw4" * 7 + "Lb3Nv8Tc1Yh"  # 108 characters


def leaked_pieces(text: str) -> list[str]:
    """Every 8-character piece of the key's secret part found in ``text``."""
    body = SPLIT_KEY[len("sk-ant-api03-"):]
    return sorted({body[i:i + 8] for i in range(len(body) - 7) if body[i:i + 8] in text})


def test_a_108_character_key_split_by_a_newline_is_redacted_wherever_it_is_cut():
    assert len(SPLIT_KEY) == 108
    for cut in range(1, len(SPLIT_KEY)):
        for newline in ("\n", "\r\n", "\\n", "\n    "):
            text = f"log: {SPLIT_KEY[:cut]}{newline}{SPLIT_KEY[cut:]} done"
            assert leaked_pieces(redact(text)) == [], (cut, newline)
            assert leaked_pieces(redact(json.dumps({"log": text}))) == [], (cut, newline)


def test_a_key_split_across_chunks_is_redacted():
    for cut in range(1, len(SPLIT_KEY)):
        chunks = ["log: " + SPLIT_KEY[:cut], SPLIT_KEY[cut:], " done"]
        assert "".join(redact(chunks)) == f"log: {REDACTED} done", cut
    # a whole-looking key of another kind ends at its chunk: the next value is kept
    assert redact(["sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "input_tokens"]) == [REDACTED,
                                                                          "input_tokens"]


def test_a_split_key_reaches_no_trace_eval_trace_or_content_export(tmp_path):
    from primer.harness.evals.run import EvalTask, run_task
    from primer.harness.evals.scorers import AnswerContains
    from primer.harness.tracing.otel import otlp_json

    split = SPLIT_KEY[:30] + "\n" + SPLIT_KEY[30:]

    @tool
    def read_env(name: str) -> str:
        """Read a setting.

        Args:
          name: the setting.
        """
        return f"{name}={split}"

    def llm(_task=None):
        return ScriptedLLM([tool_reply(("read_env", {"name": "KEY"})),
                            f"The key is {split} and it works."])

    run_production(llm(), "show the key", [read_env], config=AgentConfig(),
                   trace=tmp_path / "run.jsonl")
    run_task(EvalTask("key", "show the key", AnswerContains("works")), llm, [read_env],
             trace_dir=tmp_path / "evals")
    written = {"trace": (tmp_path / "run.jsonl").read_text(),
               "eval trace": (tmp_path / "evals" / "key.jsonl").read_text(),
               "export --content": otlp_json([str(tmp_path / "run.jsonl")],
                                             capture_content=True)}
    assert "sk-ant-api03" not in written["trace"]  # the test's key did reach the run
    assert {name: leaked_pieces(text) for name, text in written.items()} == \
        {name: [] for name in written}
