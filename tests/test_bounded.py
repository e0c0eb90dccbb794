"""The one bounded reader and the JSON limits: refused before anything can hang or crash."""

from __future__ import annotations

import os
import threading

import pytest

from primer.harness.files import UnreadableFile, read_bounded
from primer.loop.messages import valid_text
from primer.loop.text import MAX_DEPTH, JSONRefused, json_problem, parse_json


def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path):
    (tmp_path / "a").write_bytes(b"hello")
    os.symlink(tmp_path / "a", tmp_path / "link")
    assert read_bounded(tmp_path / "a") == read_bounded(tmp_path / "link") == b"hello"


def test_a_fifo_is_refused_at_once_rather_than_blocking_the_reader(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_refusal(tmp_path / "fifo")),
                              daemon=True)
    reader.start()
    reader.join(10)
    assert outcome and "named pipe (FIFO)" in outcome[0]


def _refusal(path):
    try:
        read_bounded(path)
    except UnreadableFile as e:
        return e.reason
    return "read"


@pytest.mark.parametrize("target, kind", [("/dev/zero", "a device"), ("/dev/null", "a device")])
def test_a_symlink_to_a_device_is_refused_without_reading_it(tmp_path, target, kind):
    os.symlink(target, tmp_path / "link")
    assert _refusal(tmp_path / "link").startswith(f"is {kind} (behind a symbolic link)")


def test_a_directory_a_missing_file_and_a_file_too_large_are_refused(tmp_path):
    assert _refusal(tmp_path).startswith("is a directory")
    with pytest.raises(UnreadableFile) as e:
        read_bounded(tmp_path / "nope")
    assert e.value.missing
    (tmp_path / "big").write_bytes(b"x" * 11)
    assert "more than the 10 bytes" in _refusal_limited(tmp_path / "big", 10)


def _refusal_limited(path, limit):
    with pytest.raises(UnreadableFile) as e:
        read_bounded(path, limit=limit)
    return e.value.reason


@pytest.mark.parametrize("text, says", [
    ("[" * 5000 + "]" * 5000, f"nested deeper than {MAX_DEPTH} levels"),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ("1" * 4300, "an integer of 4,300 digits"),
    ("[NaN]", "NaN is not JSON"), ("[-Infinity]", "-Infinity is not JSON"),
    ("1e400", "too large for a float"),
    ('{"a": 1,}', "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
], ids=["very-deep", "just-too-deep", "4300-digits", "nan", "infinity", "1e400", "comma"])
def test_json_outside_the_limits_is_one_clear_refusal(text, says):
    with pytest.raises(JSONRefused, match=says.replace("[", r"\[")):
        parse_json(text)


def test_json_inside_the_limits_parses_as_the_standard_library_does():
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(deep) is not None and parse_json(b'{"a": [1, 2.5, "\\u00e9"]}') == {
        "a": [1, 2.5, "é"]}


@pytest.mark.parametrize("data, says", [(b"\xff\xfe{\x00}\x00", "UTF-16"),
                                        (b'{"a": "\xff"}', "not UTF-8 text (byte 7")],
                         ids=["utf16", "latin1"])
def test_bytes_that_are_not_utf8_are_refused_naming_why(data, says):
    with pytest.raises(JSONRefused, match=says.replace("(", r"\(")):
        parse_json(data)


@pytest.mark.parametrize("value, says", [
    ({"a": {1, 2}}, "a set, which JSON cannot carry at 'a'"),
    ({"a": float("nan")}, "nan, which JSON cannot hold"),
    ({"a": [{"b": 10**101}]}, "more than 100 digits at 'a/0/b'"),
    ({1: "x"}, "a key 1 that is not a string"),
    ({"a": "\ud800"}, "lone surrogate"),
], ids=["set", "nan", "huge-int", "int-key", "surrogate"])
def test_a_value_in_memory_that_is_not_json_within_the_limits_is_described(value, says):
    assert says in json_problem(value, text=True)


def test_a_value_nested_100000_deep_is_described_without_recursion():
    value = []
    for _ in range(100_000):
        value = [value]
    assert json_problem(value).startswith("nested deeper than")


def test_valid_text_joins_a_written_out_pair_and_replaces_a_lone_surrogate():
    assert valid_text("a\ud83d\ude00b\udc80") == "a\U0001f600b\ufffd"
    text = "plain"
    assert valid_text(text) is text


def test_check_writable_takes_a_regular_file_or_nothing(tmp_path):
    from primer.harness.files import check_writable

    (tmp_path / "a").write_text("x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    for ok in ("a", "link", "absent"):
        check_writable(tmp_path / ok)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling link", "device"])
def test_check_writable_refuses_what_would_block_or_write_elsewhere(tmp_path, kind):
    from primer.harness.files import check_writable

    path = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling link":
        os.symlink(tmp_path / "nowhere", path)
    else:
        path = "/dev/null"
    with pytest.raises(UnreadableFile) as e:
        check_writable(path)
    assert {"fifo": "FIFO", "directory": "a directory", "dangling link": "does not exist",
            "device": "a device"}[kind] in str(e.value)
    assert not (tmp_path / "nowhere").exists()
