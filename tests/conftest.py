"""Settings for the whole test session.

Tests marked ``slow`` (a few seconds or more each) run first: spread over workers (``make
unit``), the long ones then start early, and no worker is left running one alone at the end.

Checkpoint journals are signed with a key (``primer.harness.durable.journal.checkpoint_key``).
Unless
the environment names one, the session keeps its key in a temporary file rather than
creating ``~/.config/primer/checkpoint.key``; subprocesses started by tests inherit it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_KEY_DIR: list[str] = []


def pytest_configure(config: object) -> None:
    if not any(os.environ.get(k) for k in ("PRIMER_CHECKPOINT_KEY", "PRIMER_CHECKPOINT_KEY_FILE")):
        _KEY_DIR.append(tempfile.mkdtemp(prefix="primer-test-key-"))
        os.environ["PRIMER_CHECKPOINT_KEY_FILE"] = os.path.join(_KEY_DIR[0], "checkpoint.key")


def pytest_unconfigure(config: object) -> None:
    for d in _KEY_DIR:
        shutil.rmtree(d, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first; the order within each part is kept (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
