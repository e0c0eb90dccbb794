"""A results file: eval rows streamed to JSON Lines as trials finish, read back to resume.

``run_evals(..., results=PATH)`` writes here. The first line is a header::

    {"format": "primer-evals", "version": 2, "suite": "<id>", "config": "<id>", "tasks": 20,
     "repeats": 10, "mac": "<HMAC>"}

``suite`` is a fingerprint of the suite (:func:`fingerprint` of each task's name, input,
system prompt, limits, expected path, scorers and meta, as
:func:`~primer.harness.evals.run.run_evals` gives it; :func:`suite_id` of the task names when
none is given), ``config`` one of the run's config, so a run cannot resume into the file of
another suite or another config. Every later line is one
:class:`~primer.harness.evals.results.EvalRow` (``EvalRow.to_dict``), written and flushed by
the driver when its trial finishes, so a run that is interrupted or killed keeps every row
before that moment. Resuming reads the rows back, skips the (task, trial) pairs already
there, and appends the rest.

Every line is signed as a checkpoint journal's are (HMAC-SHA256, chained: each line's
``mac`` signs its text and the previous line's ``mac``, under the key of
:func:`~primer.harness.durable.keystore.checkpoint_key`, kept outside the results' directory).
A file with a line that is not signed so (written or edited by hand, forged, or signed with
another key), a row of a task the suite does not have or of a trial past its repeats, or any
unreadable line, is refused with one :class:`EvalResultsError` naming the file and the
line, and the file is left as it is: none of its rows is counted. A last line cut off
mid-write is dropped (and cut from the file before appending), with a note.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from primer.harness.durable.journal import signed_lines, verified_line
from primer.harness.durable.keystore import KEY_SOURCES, CheckpointError, checkpoint_key
from primer.harness.files import UnreadableFile, check_writable, open_bounded
from primer.loop.text import parse_json

from .results import EvalRow, EvalSummary

FORMAT_NAME = "primer-evals"
#: The results format's version, written in the header; a reader refuses others (version 1
#: files were not signed).
FORMAT_VERSION = 2


class EvalResultsError(ValueError):
    """A results file that cannot be used: the message names the file, the line and the fix."""


def suite_id(names: Sequence[str]) -> str:
    """A short fingerprint of a suite: SHA-256 of its task names in order (16 hex digits)."""
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


def fingerprint(value: Any) -> str:
    """SHA-256 (16 hex digits) of ``value`` as canonical JSON (sorted keys); a value JSON
    cannot hold (a function, an object) counts by its type's name, so the fingerprint is
    the same in every process."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=lambda o: f"<{type(o).__qualname__}>")
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ResultsFile:
    """One results file (see the module docstring). Not safe for two writers at once: the
    eval driver is its only writer.

    ``notes`` says what reading had to leave out (a torn last line).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.notes: list[str] = []
        self._out: IO[bytes] | None = None
        self._good_end = 0  # bytes up to the end of the last whole line read
        self._mac = FORMAT_NAME.encode()  # the last line's signature (an append follows it)
        self._key: bytes | None = None
        self._names: frozenset[str] | None = None  # the suite's tasks, once started
        self._repeats: int | None = None

    # ------------------------------------------------------------ writing

    def start(self, names: Sequence[str], repeats: int, *, resume: bool = True,
              suite: str | None = None, config: str = "") -> set[tuple[str, int]]:
        """Open the file for appending rows; returns the (task, trial) pairs already done.

        ``suite`` is the suite's fingerprint (default :func:`suite_id` of ``names``),
        ``config`` the run config's (:func:`fingerprint`). With ``resume`` and an existing
        non-empty file, its header must be a signed primer results header of the same suite
        and config, and every row signed, of a task in ``names`` and a trial below
        ``repeats`` (else :class:`EvalResultsError`, one line, file untouched, no row
        counted); its rows are then counted as done (a resume may ask for more repeats).
        Otherwise the file is created (or emptied) with a new header. Raises
        :class:`EvalResultsError` for a path that is neither a regular file nor absent (a
        FIFO, a dangling symbolic link) or a signing key that cannot be used, ``OSError``
        when the file cannot be written.
        """
        try:
            check_writable(self.path)
        except UnreadableFile as e:
            raise EvalResultsError(str(e)) from None
        sid = suite or suite_id(names)
        self._names, self._repeats = frozenset(names), repeats
        done: set[tuple[str, int]] = set()
        if resume and self.path.is_file() and self.path.stat().st_size > 0:
            header, rows = self._read(track=done)
            if header.get("suite") != sid:
                raise EvalResultsError(
                    f"{self.path}: written for another suite ({header.get('tasks')} tasks, "
                    f"id {header.get('suite')}; these {len(names)} tasks have id {sid}); "
                    f"write to a new file, or pass resume=False to start this one over")
            if header.get("config") != config:
                raise EvalResultsError(
                    f"{self.path}: written with another config (id "
                    f"{header.get('config') or 'none'}; this run's is {config or 'none'}); its "
                    f"rows are not this run's: write to a new file, or pass resume=False to "
                    f"start this one over")
            for _ in rows:  # each row checked and counted as done
                pass
            with self.path.open("r+b") as f:  # cut a torn last line before appending
                f.truncate(self._good_end)
            self._out = self.path.open("ab")
            return done
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = self._signing_key()
        self._out = self.path.open("wb")
        self._key, self._mac = key, FORMAT_NAME.encode()
        self._write({"format": FORMAT_NAME, "version": FORMAT_VERSION, "suite": sid,
                     "config": config, "tasks": len(names), "repeats": repeats})
        return done

    def _signing_key(self) -> bytes:
        try:
            return checkpoint_key(self.path.parent)
        except CheckpointError as e:
            raise EvalResultsError(f"{self.path}: cannot sign or check its rows: {e}") from None

    def append(self, row: EvalRow) -> None:
        """Write ``row`` as one line and flush it (call :meth:`start` first)."""
        self._write(row.to_dict())

    def close(self) -> None:
        """Close the file (rows already written stay)."""
        if self._out is not None:
            self._out.close()
            self._out = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._out is None or self._key is None:
            raise RuntimeError("ResultsFile.start() was not called")
        data, self._mac = signed_lines([record], self._key, self._mac)
        self._out.write(data)
        self._out.flush()

    # ------------------------------------------------------------ reading

    def rows(self) -> Iterator[EvalRow]:
        """The rows, read one line at a time (a torn last line is skipped, with a note)."""
        yield from self._read()[1]

    def summary(self) -> EvalSummary:
        """:meth:`EvalSummary.of` the file's rows, read in one pass (memory stays flat)."""
        return EvalSummary.of(self.rows())

    def _read(self, track: set[tuple[str, int]] | None = None
              ) -> tuple[dict[str, Any], Iterator[EvalRow]]:
        try:
            f = open_bounded(self.path)
        except UnreadableFile as e:
            raise EvalResultsError(f"{self.path}: no such results file" if e.missing
                                   else str(e)) from None
        first = f.readline()
        key = self._key = self._key or self._signing_key()
        header, mac = self._header(first, key)
        self._good_end = len(first)
        self._mac = mac
        self.notes = []

        def rows() -> Iterator[EvalRow]:
            seen: set[tuple[str, int]] = set() if track is None else track
            number = 1
            offset = len(first)
            with f:
                for raw in f:
                    number += 1
                    if not raw.endswith(b"\n"):  # the writer ends every line it finishes
                        self.notes.append(f"line {number} is torn (the run was stopped while "
                                          f"writing it); dropped, its trial runs again on "
                                          f"resume")
                        return
                    body = self._verified(raw, number, key)
                    try:
                        row = EvalRow.from_dict(parse_json(body))
                    except (ValueError, TypeError, KeyError) as e:
                        raise EvalResultsError(f"{self.path}: line {number} is not an eval "
                                               f"row ({e}); no row of the file was counted. "
                                               f"Start it over (resume=False)") from e
                    self._check_row(row, number)
                    trial = (row.task, row.trial)
                    if trial in seen:
                        raise EvalResultsError(f"{self.path}: line {number} repeats task "
                                               f"{row.task!r} trial {row.trial}; two runs "
                                               f"wrote this file at once? no row of the file "
                                               f"was counted. Start it over (resume=False)")
                    seen.add(trial)
                    offset += len(raw)
                    self._good_end = offset
                    yield row

        return header, rows()

    def _header(self, line: bytes, key: bytes) -> tuple[dict[str, Any], bytes]:
        """The header (checked for format and version before its signature) and its mac."""
        try:
            header = parse_json(line)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise EvalResultsError(f"{self.path}: not a primer eval results file (line 1 is "
                                   f"not its header); choose another file name")
        if header.get("version") != FORMAT_VERSION:
            old = " (unsigned: its rows cannot be trusted)" if header.get("version") == 1 else ""
            raise EvalResultsError(f"{self.path}: results format version "
                                   f"{header.get('version')}{old}, this primer reads "
                                   f"{FORMAT_VERSION}; start it over (resume=False)")
        self._mac = FORMAT_NAME.encode()
        self._verified(line, 1, key)
        return header, self._mac

    def _verified(self, raw: bytes, number: int, key: bytes) -> bytes:
        """The body of line ``number`` (``raw``, with its newline) if it is signed after the
        line before it, else :class:`EvalResultsError`; moves the chain on."""
        ok = verified_line(raw.removesuffix(b"\n"), key, self._mac)
        if ok is None:
            raise EvalResultsError(
                f"{self.path}: line {number} does not match its signature: the file was "
                f"written or edited outside primer, forged, or signed with another key "
                f"(this machine's: {KEY_SOURCES}); no row of it was counted. Start it over "
                f"(resume=False), or write to a new file")
        body, self._mac = ok
        return body

    def _check_row(self, row: EvalRow, number: int) -> None:
        """:class:`EvalResultsError` for a row of a task this suite does not have, or of a
        trial past its repeats (only once :meth:`start` named them)."""
        if self._names is not None and row.task not in self._names:
            raise EvalResultsError(f"{self.path}: line {number} is a row of task "
                                   f"{row.task!r}, which this suite does not have; no row of "
                                   f"the file was counted. Start it over (resume=False)")
        if self._repeats is not None and row.trial >= self._repeats:
            raise EvalResultsError(f"{self.path}: line {number} is trial {row.trial} of task "
                                   f"{row.task!r}, past this run's {self._repeats} repeats; "
                                   f"no row of the file was counted. Start it over "
                                   f"(resume=False)")
