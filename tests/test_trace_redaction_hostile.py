"""The trace writer against hostile events: dict subclasses and mappings that answer
lookups otherwise than they serialise, an event kind that only compares equal to a step's,
secrets spelled with the letters a case-insensitive pattern folds to ASCII, dataclasses and
enums in a model's reply. Each test asserts what the writer promises: the line is the event
as :func:`~primer.harness.tracing.redaction.redact` leaves it, and no key reaches the file."""

from __future__ import annotations

import dataclasses
import enum
import json
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from primer.harness.production import run_production
from primer.harness.tracing.redaction import redact
from primer.harness.tracing.trace import TraceWriter, _line
from primer.loop.model import Reply, ScriptedLLM, Usage, tool_reply
from primer.loop.state import StopCause
from primer.loop.tools import tool

KEY = "sk-ant-api03-" + "Ab1" * 10
KELVIN, LONG_S, DOTLESS_I, DOTTED_I = "\u212a", "\u017f", "\u0131", "\u0130"


def base_call() -> dict[str, Any]:
    return {"step": 1, "prompt_estimate": 10, "latency_s": 0.5,
            "reply": {"content": [], "stop_reason": "end_turn", "model": "m",
                      "usage": {"input_tokens": 1, "output_tokens": 2,
                                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}


def base_exec() -> dict[str, Any]:
    return {"step": 1, "tool_use_id": "t1", "name": "n", "input": {}, "content": "ok",
            "is_error": False, "error_kind": None, "latency_s": 0.1, "attempts": 1,
            "attempt_log": []}


def written(kind: str, data: Any) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        TraceWriter(path)(kind, data)
        return path.read_bytes()


def as_redact_leaves_it(kind: str, line: bytes, data: dict[str, Any]) -> dict[str, Any]:
    t = json.loads(line)["t"]
    return json.loads(_line(redact({"event": kind, "seq": 0, "t": t, **data})))


class FourFields(dict):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 4


class TenFields(dict):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10


@pytest.mark.parametrize("kind, cls, base", [("model_call", FourFields, base_call),
                                             ("tool_execution", TenFields, base_exec)])
@pytest.mark.parametrize("extra", [{"note": KEY}, {"api_key": "hunter2hunter2"}])
def test_a_dict_subclass_that_undercounts_its_fields_has_every_field_redacted(
        kind: str, cls: type, base: Any, extra: dict[str, str]) -> None:
    data = cls(base())
    dict.update(data, extra)
    line = written(kind, data)
    assert json.loads(line) == as_redact_leaves_it(kind, line, dict(data.items()))


class HidesContent(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: str) -> Any:
        return "clean" if key == "content" else dict.__getitem__(self, key)


def test_a_dict_subclass_whose_lookups_differ_from_its_items_is_redacted_as_written() -> None:
    data = HidesContent({**base_exec(), "content": KEY})
    line = written("tool_execution", data)
    assert KEY.encode() not in line


class ReadTwice(Mapping[str, Any]):
    """A mapping that answers the first look-up of ``content`` with clean text, later ones
    with the key."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data, self.reads = data, 0

    def __getitem__(self, key: str) -> Any:
        if key == "content":
            self.reads += 1
            return "clean" if self.reads == 1 else KEY
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_a_mapping_read_twice_cannot_slip_a_key_past_the_look() -> None:
    line = written("tool_execution", ReadTwice(base_exec()))
    assert KEY.encode() not in line


class LooksLikeModelCall(str):
    def __eq__(self, other: object) -> bool:
        return other == "model_call" or str.__eq__(self, other)

    def __hash__(self) -> int:
        return hash("model_call")


def test_an_event_kind_that_compares_equal_to_model_call_is_redacted() -> None:
    line = written(LooksLikeModelCall(KEY), base_call())
    assert KEY.encode() not in line


FOLDED = [  # redact's patterns ignore case the Unicode way; each of these is a secret to them
    {"x": "pa" + LONG_S + LONG_S + "word=swordfish"},
    {"x": LONG_S + "ecret: swordfish"},
    {"x": "ap" + DOTLESS_I + "_key=hunter2hunter2"},
    {"x": "ap" + DOTTED_I + "key=hunter2hunter2"},
    {"x": "access_to" + KELVIN + "en=tok12345"},
    {"x": {"coo" + KELVIN + "ie": "sid=12345"}},  # a key: lower() reads KELVIN SIGN as k
    {"x": {"refresh_to" + KELVIN + "en": "tok12345"}},
]


@pytest.mark.parametrize("data", FOLDED, ids=range(len(FOLDED)))
def test_a_secret_spelled_with_a_unicode_case_fold_is_redacted(data: dict[str, Any]) -> None:
    line = written("approval", data)
    assert json.loads(line) == as_redact_leaves_it("approval", line, data)


def test_a_tool_result_spelled_with_a_case_fold_is_redacted_in_a_run() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look q up."""
        return "pa" + LONG_S + LONG_S + "word=swordfish"

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        run_production(ScriptedLLM([tool_reply(("lookup", {"q": "x"})), "done"]), "go", [lookup],
                       on_event=TraceWriter(path))
        assert "swordfish" not in path.read_text()


@dataclasses.dataclass
class Credentials:
    api_key: str


class ModelName(enum.Enum):
    LEAKY = KEY


@pytest.mark.parametrize("field, value", [("model", Credentials(KEY)),
                                          ("model", ModelName.LEAKY),
                                          ("stop_reason", ModelName.LEAKY)])
def test_a_model_reply_with_odd_types_in_its_fields_leaves_no_key_in_the_trace(
        field: str, value: object) -> None:
    fields: dict[str, Any] = {"stop_reason": "end_turn", "model": "m", field: value}

    def llm(**_: Any) -> Reply:
        return Reply([{"type": "text", "text": "done"}], fields["stop_reason"], Usage(1, 1),
                     fields["model"])

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.jsonl"
        run_production(llm, "go", [], on_event=TraceWriter(path))
        assert KEY not in path.read_text()


@pytest.mark.parametrize("stop_reason", [["end_turn"], Credentials(KEY), None, 7],
                         ids=["list", "dataclass", "None", "int"])
def test_a_stop_reason_that_is_not_a_string_ends_the_run_with_model_error(
        stop_reason: object) -> None:
    def llm(**_: Any) -> Reply:
        return Reply([{"type": "text", "text": "done"}], stop_reason, Usage(1, 1), "m")

    result = run_production(llm, "go", [])
    assert result.stop_cause is StopCause.MODEL_ERROR
    assert "stop_reason of type" in result.stop_detail and KEY not in result.stop_detail


class Why(str, enum.Enum):
    END = "end_turn"


def test_a_stop_reason_that_is_an_enum_of_str_is_read_as_its_plain_string() -> None:
    def llm(**_: Any) -> Reply:
        return Reply([{"type": "text", "text": "done"}], Why.END, Usage(1, 1), "m")

    result = run_production(llm, "go", [])
    assert result.stop_cause is StopCause.END_TURN
    assert type(result.steps[-1].reply.stop_reason) is str
