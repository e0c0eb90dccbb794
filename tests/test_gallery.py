"""The exercise traces shipped with primer are exactly what their scripted models record:
nobody edits them by hand, and they install with the package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primer.scenarios.gallery import GALLERY, GALLERY_DIR, gallery_path, write_gallery


def _comparable(text: str, suffix: str) -> list:
    """The file's JSON values, without the primer version (it changes with every release)."""
    values = ([json.loads(line) for line in text.splitlines()] if suffix == ".jsonl"
              else [json.loads(text)])
    for v in values:
        v.pop("primer_version", None)
    return values


def test_every_gallery_file_is_what_its_scripted_model_records(tmp_path):
    written = write_gallery(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in GALLERY_DIR.iterdir())
    for fresh in written:
        committed = GALLERY_DIR / fresh.name
        assert _comparable(committed.read_text(), fresh.suffix) == _comparable(
            fresh.read_text(), fresh.suffix), (
            f"{committed.name} differs from what the code records: run write_gallery()")


def test_recording_twice_gives_the_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_gallery(a)
    write_gallery(b)
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes()


def test_gallery_files_are_package_data():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["primer"]
    for entry in GALLERY.values():
        path = gallery_path(entry.name)
        assert path.exists()
        assert any(path.match(pattern.split("/")[-1]) for pattern in patterns)


def test_an_unknown_gallery_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: healthy-orders"):
        gallery_path("nope")
