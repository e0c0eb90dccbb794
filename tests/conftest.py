"""Settings for the whole test session.

Checkpoint journals are signed with a key (``primer.harness.durable.journal.checkpoint_key``).
Unless
the environment names one, the session keeps its key in a temporary file rather than
creating ``~/.config/primer/checkpoint.key``; subprocesses started by tests inherit it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_KEY_DIR: list[str] = []


def pytest_configure(config: object) -> None:
    if not any(os.environ.get(k) for k in ("PRIMER_CHECKPOINT_KEY", "PRIMER_CHECKPOINT_KEY_FILE")):
        _KEY_DIR.append(tempfile.mkdtemp(prefix="primer-test-key-"))
        os.environ["PRIMER_CHECKPOINT_KEY_FILE"] = os.path.join(_KEY_DIR[0], "checkpoint.key")


def pytest_unconfigure(config: object) -> None:
    for d in _KEY_DIR:
        shutil.rmtree(d, ignore_errors=True)
