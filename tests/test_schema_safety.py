"""An input_schema from outside is data we check: no fetch, no endless recursion, no regex
that backtracks, and every refusal says why."""

from __future__ import annotations

import json

import pytest

from primer.loop.schema_safety import (
    MAX_EXPANSION,
    SchemaRefused,
    pattern_matches,
    schema_refusal,
)
from primer.loop.tools import Tool

OBJ = {"type": "object"}


def prop(schema: dict) -> dict:
    return {"type": "object", "properties": {"x": schema}}


def make(schema: dict) -> Tool:
    return Tool("t", "A tool.", schema, lambda **kw: "ok")


@pytest.mark.parametrize("ref", ["http://127.0.0.1:9/schema.json", "https://example.com/s#/a",
                                 "file:///etc/passwd", "other.json#/a", "//host/x", 5])
def test_a_ref_outside_the_document_is_refused_before_anything_is_fetched(ref):
    with pytest.raises(SchemaRefused, match="points outside the schema; references are "
                                            "resolved within the document only"):
        make(prop({"$ref": ref}))


def test_a_ref_to_nothing_and_an_anchor_ref_are_refused():
    assert "points to nothing" in schema_refusal(prop({"$ref": "#/$defs/missing"}))
    assert "an anchor" in schema_refusal(prop({"$ref": "#thing"}))


@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {**OBJ, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
     "properties": {"x": {"$ref": "#/$defs/a"}}},
    {**OBJ, "$defs": {"a": {"anyOf": [{"not": {"$ref": "#/$defs/a"}}]}}},
], ids=["itself", "two definitions", "through not"])
def test_a_circular_ref_that_never_steps_into_the_input_is_refused(schema):
    assert "circular reference that never steps into the input" in schema_refusal(schema)


def test_a_recursive_schema_that_steps_into_the_input_is_kept_and_checks_every_level():
    tree = {**OBJ, "properties": {"name": {"type": "string"},
                                  "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"]}
    t = make(tree)
    assert t.input_errors({"name": "a", "children": [{"name": "b"}]}) is None
    assert "at 'children/0/children/0': 'name' is a required property" in t.input_errors(
        {"name": "a", "children": [{"name": "b", "children": [{}]}]})


def test_refs_that_fan_out_past_the_bound_are_refused():
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
            for i in range(30)}
    schema = {**OBJ, "$defs": {**defs, "d30": {"type": "string"}},
              "properties": {"x": {"$ref": "#/$defs/d0"}}}
    assert f"more than {MAX_EXPANSION} subschemas to one value" in schema_refusal(schema)


def test_a_schema_nested_too_deep_or_too_big_is_refused():
    deep: dict = {"type": "string"}
    for _ in range(40):
        deep = {**OBJ, "properties": {"a": deep}}
    assert "nested deeper than 64 levels" in schema_refusal(deep)
    assert "more than 20000 values" in schema_refusal(prop({"enum": list(range(30_000))}))


def test_a_python_dict_that_contains_itself_is_refused_not_a_recursion_error():
    cyclic: dict = {"type": "object", "properties": {}}
    cyclic["properties"]["x"] = cyclic
    assert "nested deeper than" in schema_refusal(cyclic)


@pytest.mark.parametrize("pattern", ["(?=a)b", r"(a)\1", "(?<!x)y"])
def test_a_pattern_only_a_backtracking_engine_can_run_is_refused_with_the_reason(pattern):
    with pytest.raises(SchemaRefused, match="cannot be run by a linear-time regex engine"):
        make(prop({"type": "string", "pattern": pattern}))
    assert "cannot be run" in schema_refusal({**OBJ, "patternProperties": {pattern: {}}})


def test_a_catastrophic_pattern_is_checked_in_linear_time_and_gives_the_usual_error():
    t = make(prop({"type": "string", "pattern": "^(a+)+$"}))
    # Python's re takes minutes on 34 characters of this; RE2 answers at once on 200,000.
    problem = t.input_errors({"x": "a" * 200_000 + "!"})
    assert "does not match '^(a+)+$'" in problem
    assert t.input_errors({"x": "aaaa"}) is None


def test_pattern_properties_and_additional_properties_match_with_re2():
    t = make({**OBJ, "patternProperties": {"^(a+)+$": {"type": "integer"}},
              "additionalProperties": False})
    assert t.input_errors({"aaa": 1}) is None
    problem = t.input_errors({"a" * 60 + "!": 1, "aa": "x"})
    assert "does not match any of the regexes: '^(a+)+$'" in problem
    assert "at 'aa': 'x' is not of type 'integer'" in problem


def test_patterns_search_anywhere_as_json_schema_says():
    assert pattern_matches("b", "abc") and not pattern_matches("^b", "abc")


def test_an_unknown_dialect_and_a_nested_id_are_refused():
    assert "not one this harness knows" in schema_refusal({"$schema": "http://x.test/s", **OBJ})
    assert "draft 4, 6, 7" in schema_refusal(
        {"$schema": "http://json-schema.org/draft-03/schema#", **OBJ})
    assert "keep $id at the top" in schema_refusal(prop({"$id": "http://x.test/a"}))
    assert "$dynamicRef" in schema_refusal(prop({"$dynamicRef": "#meta"}))


def test_a_remote_id_at_the_top_resolves_local_refs_without_fetching():
    t = make({"$id": "http://127.0.0.1:9/root.json", **OBJ,
              "properties": {"x": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"type": "integer"}}})
    assert "is not of type 'integer'" in t.input_errors({"x": "s"})


def test_schemas_pydantic_writes_pass_unchanged():
    from primer.scenarios.orders import make_tools

    for t in make_tools():
        assert schema_refusal(t.input_schema) is None
    nested = {"$defs": {"Item": {"properties": {"sku": {"pattern": "^[A-Z]{3}-\\d{4}$",
                                                       "type": "string"}},
                                 "required": ["sku"], "type": "object"}},
              "properties": {"items": {"items": {"$ref": "#/$defs/Item"}, "type": "array"}},
              "required": ["items"], "type": "object"}
    t = make(nested)
    assert t.input_errors({"items": [{"sku": "ABC-1234"}]}) is None
    assert "does not match" in t.input_errors({"items": [{"sku": "abc"}]})
    json.dumps(t.definition())  # still plain JSON


def test_an_input_that_costs_too_many_checks_is_refused_with_a_message_not_a_hang(monkeypatch):
    from primer.loop import schema_safety

    monkeypatch.setattr(schema_safety, "MAX_KEYWORD_STEPS", 100)
    t = make(prop({"type": "array", "items": {"const": 1}}))
    assert t.input_errors({"x": [1] * 20}) is None
    assert "costs more than 100 checks against input_schema" in t.input_errors({"x": [1] * 200})
    # outside a counted check (jsonschema used directly) nothing is counted
    assert list(t._check.validator.iter_errors({"x": [1] * 200})) == []


@pytest.mark.parametrize("text", ["a\u00a0b", "a\u2028b", "a\x0bb", "a\u3000b", "a\ufeffb"])
def test_backslash_s_in_a_pattern_is_ecma_262_whitespace_not_re2s_ascii_one(text):
    assert not pattern_matches(r"^\S+$", text) and pattern_matches(r"^\S+$", "ab")
    assert pattern_matches(r"^a\sb$", text)


def test_a_dot_does_not_match_a_line_terminator_as_in_ecma_262():
    assert not pattern_matches(r"^.+$", "a\rb") and pattern_matches(r"^.+$", "ab")
    assert pattern_matches(r"^a\.b$", "a.b") and not pattern_matches(r"^a\.b$", "axb")
    assert not pattern_matches(r"^[.]$", "x")


def test_unique_items_is_charged_for_every_pair_it_may_compare(monkeypatch):
    from primer.loop import schema_safety

    monkeypatch.setattr(schema_safety, "MAX_KEYWORD_STEPS", 1_000)
    t = make(prop({"type": "array", "uniqueItems": True}))
    assert t.input_errors({"x": [{"k": i} for i in range(30)]}) is None  # 435 pairs
    assert "costs more than 1000 checks" in t.input_errors({"x": [{"k": i} for i in range(60)]})


def test_pattern_properties_is_charged_for_every_pattern_against_every_key(monkeypatch):
    from primer.loop import schema_safety

    monkeypatch.setattr(schema_safety, "MAX_KEYWORD_STEPS", 1_000)
    t = make({"type": "object", "patternProperties": {f"^p{i}_": {"type": "string"}
                                                      for i in range(40)}})
    assert t.input_errors({f"k{i}": "v" for i in range(10)}) is None        # 400 matches
    assert "costs more than 1000 checks" in t.input_errors({f"k{i}": "v" for i in range(40)})


@pytest.mark.parametrize("dialect", [[], {}, 7, None])
def test_a_schema_keyword_that_is_not_a_string_is_refused_with_the_reason(dialect):
    with pytest.raises(SchemaRefused, match=r"\$schema .* must be a dialect's URI"):
        make({"$schema": dialect, "type": "object"})
