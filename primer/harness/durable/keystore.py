"""What a checkpoint's trust rests on, kept outside the checkpoint directory.

* The **key** that signs every journal line (HMAC-SHA256, :mod:`primer.harness.durable.journal`):
  ``$PRIMER_CHECKPOINT_KEY``, else a key file created with mode 0600 on first use
  (:func:`checkpoint_key`).
* Each journal's **anchor**: the byte length and signature of its last line that was made
  durable, kept beside the key file (``anchors/``, one file per journal, named by the
  journal's random ``journal_id``, which its signed header holds: not by its path). A signed
  chain proves no line was edited, reordered or forged, but a file cut short at a line
  boundary, or put back to an older copy of itself, reads exactly like a crash there. With
  the anchor, a journal that ends before its last durable line is refused
  (:func:`read_anchor`; :func:`~primer.harness.durable.journal.read_journal` checks it),
  wherever the copy lies: a copy at another path is the same run, held to the same anchor,
  so an older copy of a run that went on cannot run a side effect again. A crash cannot
  cause that: the line is on disk before its anchor is written. The anchor's side file
  (``anchors/.<journal_id>.lock``) is the run's lock, so two copies of one journal are never
  continued at once. A journal read on another machine has no anchor; it is read with a
  note that a cut-off end could not be noticed there. Whoever can write the key's directory
  can move the anchor too, as they could sign anything: the key's directory is what must be
  protected.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

from primer.harness.files import UnreadableFile, read_bounded

KEY_ENV = "PRIMER_CHECKPOINT_KEY"
KEY_FILE_ENV = "PRIMER_CHECKPOINT_KEY_FILE"


class CheckpointError(ValueError):
    """A checkpoint cannot be used as it is; the message says what is wrong and what to do.

    Raised before anything runs: nothing is executed on a checkpoint that fails a check.
    """


def key_file_path() -> Path:
    """Where the signing key is kept: ``$PRIMER_CHECKPOINT_KEY_FILE``, else
    ``$XDG_CONFIG_HOME/primer/checkpoint.key`` (``~/.config/primer/checkpoint.key``)."""
    if os.environ.get(KEY_FILE_ENV):
        return Path(os.environ[KEY_FILE_ENV]).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config_home) / "primer" / "checkpoint.key"


#: Where this machine's key comes from, for messages. The same text on every machine: a
#: message (and a notebook's output) never shows the key file's real path, which depends on
#: the home directory and ``XDG_CONFIG_HOME``.
KEY_SOURCES = (f"${KEY_ENV} if set, else the key file ${KEY_FILE_ENV} names, else "
               f"$XDG_CONFIG_HOME/primer/checkpoint.key (by default "
               f"~/.config/primer/checkpoint.key)")


def checkpoint_key(directory: Path) -> bytes:
    """The key that signs the journals of ``directory`` (bytes).

    ``$PRIMER_CHECKPOINT_KEY`` (any non-empty text) if set; else the content of
    :func:`key_file_path`, created on first use with 32 random bytes (hex) and mode 0600.
    Raises :class:`CheckpointError` when the key file lies inside ``directory`` (whoever can
    edit a checkpoint could then read its key), is readable by others, or cannot be read.
    """
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV].encode("utf-8")
    path = key_file_path()
    if path.resolve().is_relative_to(directory.resolve()):
        raise CheckpointError(f"the checkpoint key file {path} lies inside the checkpoint "
                              f"directory {directory}; keep it elsewhere (unset "
                              f"{KEY_FILE_ENV} or point it outside). Nothing was run.")
    try:
        if not path.exists():
            _create_key_file(path)
        if path.stat().st_mode & 0o077:
            raise CheckpointError(f"the checkpoint key file {path} can be read by other users; "
                                  f"run `chmod 600 {path}`. Nothing was run.")
        key = read_bounded(path, limit=4096).strip()
    except UnreadableFile as e:
        raise CheckpointError(f"the checkpoint key file {e}; set {KEY_ENV} or {KEY_FILE_ENV}. "
                              f"Nothing was run.") from None
    except OSError as e:
        raise CheckpointError(f"cannot read or create the checkpoint key file {path} ({e}); "
                              f"set {KEY_ENV} or {KEY_FILE_ENV}. Nothing was run.") from None
    if not key:
        raise CheckpointError(f"the checkpoint key file {path} is empty; delete it to get a "
                              f"new key (journals signed with the old one become unreadable)")
    return key


def _create_key_file(path: Path) -> None:
    """Write a new random key at ``path`` (mode 0600), unless another process just did."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # atomic; the first process to get here wins
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


# ---------------------------------------------------------------- anchors

_JOURNAL_ID = re.compile(r"[0-9a-f]{32}")


def new_journal_id() -> str:
    """A random id for a new journal (its header's ``journal_id``; names its anchor)."""
    return secrets.token_hex(16)


def anchor_path(journal_id: str) -> Path:
    """Where the anchor of the journal ``journal_id`` is kept, whatever path the journal is
    at: ``anchors/<journal_id>`` beside the key file (:func:`key_file_path`). Raises
    ``ValueError`` for an id that is not one :func:`new_journal_id` makes."""
    if not _JOURNAL_ID.fullmatch(journal_id):
        raise ValueError(f"not a journal id: {journal_id!r}")
    return key_file_path().parent / "anchors" / journal_id


def write_anchor(path: Path, size: int, mac: bytes) -> None:
    """Record at ``path`` (an :func:`anchor_path`) that its journal is at least ``size`` bytes
    long and that its line ending there is signed ``mac``: a temporary file renamed over the
    old one. Not fsynced, on purpose: the journal's line is on disk before this is written, so
    whatever a power cut leaves (this anchor, an older one, none, an unreadable one) is never
    ahead of the journal; an unreadable anchor reads as none. Raises ``OSError`` when it
    cannot be written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except FileNotFoundError:  # the first anchor: make the directory
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, f"{size} ".encode() + mac + b"\n")
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_anchor(journal_id: object) -> tuple[int, bytes] | None:
    """``(size, mac)`` recorded for the journal ``journal_id`` (at any path), or ``None``
    when there is no anchor for it here (or the id is not one this module makes)."""
    if not isinstance(journal_id, str) or not _JOURNAL_ID.fullmatch(journal_id):
        return None
    try:
        size, mac = read_bounded(anchor_path(journal_id), limit=200).split()
        return int(size), mac
    except (UnreadableFile, ValueError):
        return None


def forget_anchor(journal_id: str) -> None:
    """Remove the anchor of the journal ``journal_id`` (if any): every copy of the journal is
    then read as one from elsewhere, and the next durable line of the one continued anchors
    it again. For a journal a person restored from a copy on purpose (and for tests that cut
    a journal to stand for a crash there)."""
    with contextlib.suppress(FileNotFoundError):
        anchor_path(journal_id).unlink()
