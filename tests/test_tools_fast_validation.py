"""The compiled fast check in primer.loop.tools only ever says "valid" when jsonschema would.

It exists for speed (the harness validates every call); jsonschema stays the judge of
invalid input and writes the messages the model reads.
"""

from __future__ import annotations

import json
from typing import Literal

import pytest

from primer.loop.schema import SchemaCheck, _fast_check
from primer.loop.tools import Tool, tool


@tool
def lookup(order_id: str, quantity: int = 1, scale: float | None = None,
           mode: Literal["fast", "full"] = "fast", tags: list[int] | None = None) -> str:
    """Look an order up.

    Args:
        order_id: the order id
    """
    return "ok"


CASES = [{"order_id": "A1"}, {"order_id": "A1", "quantity": 2}, {"order_id": "A1", "quantity": 2.0},
         {"order_id": "A1", "quantity": True}, {"order_id": 5}, {}, {"order_id": "A1", "x": 1},
         {"order_id": "A1", "scale": None}, {"order_id": "A1", "scale": 1}, {"order_id": "A1",
         "mode": "slow"}, {"order_id": "A1", "tags": [1, 2]}, {"order_id": "A1", "tags": [1.5]},
         {"order_id": "A1", "tags": None}]


def fast(t: Tool):
    return _fast_check(json.dumps(t.input_schema, sort_keys=True))


def test_a_pydantic_schema_gets_a_fast_check():
    assert callable(fast(lookup))


@pytest.mark.parametrize("args", CASES, ids=[json.dumps(c) for c in CASES])
def test_the_fast_check_and_jsonschema_agree_on_every_input(args):
    errors = list(SchemaCheck(lookup.input_schema).validator.iter_errors(args))
    assert fast(lookup)(args) == (not errors)
    assert (lookup.input_errors(args) is None) == (not errors)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"n": {"const": 3}}},
    {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.1}}},
    {"type": "object", "properties": {"n": {"enum": [1, 2]}}},
    {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "$defs": {"N": {}}},
    {"type": "object", "prefixItems": [{"type": "string"}]},
], ids=["const", "multipleOf", "numeric enum", "$ref", "prefixItems"])
def test_a_schema_with_a_keyword_outside_the_safe_set_gets_no_fast_check(schema):
    assert _fast_check(json.dumps(schema, sort_keys=True)) is False


def test_a_boolean_is_still_refused_by_an_enum_of_numbers():
    t = Tool("pick", "Pick a number.", {"type": "object", "properties": {"n": {"enum": [1, 2]}},
                                        "required": ["n"]}, lambda n: n)
    assert t.input_errors({"n": 1}) is None
    assert "is not one of" in t.input_errors({"n": True})


# ---------------------------------------------------------------- the meta-schema check, once


def test_a_schema_is_checked_against_the_meta_schema_once_and_a_bad_one_every_time(
        monkeypatch):
    import jsonschema.validators

    from primer.loop import schema as schema_module

    calls = []
    real = jsonschema.validators.Draft202012Validator.check_schema.__func__

    def counting(cls, schema, **kw):
        calls.append(json.dumps(schema, sort_keys=True))
        return real(cls, schema, **kw)

    monkeypatch.setattr(jsonschema.validators.Draft202012Validator, "check_schema",
                        classmethod(counting))
    schema_module._check_schema_text.cache_clear()
    good = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 7}}}
    for _ in range(3):
        SchemaCheck(json.loads(json.dumps(good)))
    assert len(calls) == 1
    bad = {"type": "object", "required": "n"}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            SchemaCheck(dict(bad))
    assert len(calls) == 3


@pytest.mark.parametrize("schema", [
    {"type": "object", "required": ("a",)},                    # a tuple where JSON has a list
    {"type": "object", "properties": {"a": {"enum": ("x", "y")}}},
    {"type": ("object",)},
], ids=["required", "enum", "type"])
def test_a_schema_json_would_change_is_checked_as_it_is(schema):
    import jsonschema

    SchemaCheck(json.loads(json.dumps(schema)))  # its JSON twin is valid, and remembered
    with pytest.raises(jsonschema.SchemaError):
        SchemaCheck(schema)


def test_a_large_schema_is_checked_every_time_not_kept():
    from primer.loop import schema as schema_module

    schema_module._check_schema_text.cache_clear()
    big = {"type": "object", "description": "x" * (schema_module.CACHED_SCHEMA_CHARS + 1)}
    SchemaCheck(big)
    assert schema_module._check_schema_text.cache_info().currsize == 0
