"""compact_length: the size of the compact JSON text, measured on orjson's text."""

import dataclasses
import datetime
import enum
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from primer.loop.messages import compact, compact_length

# floats orjson writes in other digits than json.dumps (documented): left out here
_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: not 1e-9 <= abs(x) < 1e-4)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _FLOATS | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(_JSON)
def test_compact_length_is_the_length_of_the_compact_text(value):
    assert compact_length(value) == len(compact(value))


@pytest.mark.parametrize("value", [
    {"city": "Zürich", "note": "日本語 ✓"},       # counted in characters, not UTF-8 bytes
    {"name": "\ud800"},                            # a lone surrogate: orjson refuses it
    {1: "a", 2.5: "b"},                            # keys that are not strings
    {"n": 2**70, "m": -(2**64)},                   # integers past 64 bits
    ["\x00\x1f\n\t\"\\", "\u2028"],                # escapes
], ids=["non-ascii", "surrogate", "non-str-keys", "big-int", "escapes"])
def test_compact_length_agrees_where_orjson_refuses_or_escapes(value):
    assert compact_length(value) == len(compact(value))


class Colour(str, enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int


def test_values_json_dumps_writes_its_own_way_go_its_way():
    assert compact_length({"c": Colour.RED}) == len(json.dumps({"c": Colour.RED},
                                                               separators=(",", ":")))
    for value in (Point(1), datetime.date(2026, 1, 1)):
        with pytest.raises(TypeError):
            compact_length(value)


def test_the_floats_orjson_writes_differently_are_the_documented_ones():
    assert compact_length([1e-5]) == len("[0.00001]") != len(compact([1e-5]))
    assert compact_length([2.5e-9]) == len("[2.5e-9]")
    assert compact_length([1.5, 1e16, 1e-10]) == len(compact([1.5, 1e16, 1e-10]))
