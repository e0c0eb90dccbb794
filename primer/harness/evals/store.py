"""A results file: eval rows streamed to JSON Lines as trials finish, read back to resume.

``run_evals(..., results=PATH)`` writes here. The first line is a header::

    {"format": "primer-evals", "version": 1, "suite": "<id>", "tasks": 20, "repeats": 10}

``suite`` is :func:`suite_id` of the task names, so a run cannot resume into the file of
another suite. Every later line is one :class:`~primer.harness.evals.results.EvalRow`
(``EvalRow.to_dict``), written and flushed by the driver when its trial finishes, so a run
that is interrupted or killed keeps every row before that moment. Resuming reads the rows
back, skips the (task, trial) pairs already there, and appends the rest. A last line cut
off mid-write is dropped (and cut from the file before appending), with a note; any other
unreadable line is an :class:`EvalResultsError` naming it, and the file is left as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from primer.harness.files import UnreadableFile, check_writable, open_bounded
from primer.loop.text import parse_json

from .results import EvalRow, EvalSummary

FORMAT_NAME = "primer-evals"
#: The results format's version, written in the header; a reader refuses others.
FORMAT_VERSION = 1


class EvalResultsError(ValueError):
    """A results file that cannot be used: the message names the file, the line and the fix."""


def suite_id(names: Sequence[str]) -> str:
    """A short fingerprint of a suite: SHA-256 of its task names in order (16 hex digits)."""
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]


class ResultsFile:
    """One results file (see the module docstring). Not safe for two writers at once: the
    eval driver is its only writer.

    ``notes`` says what reading had to leave out (a torn last line).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.notes: list[str] = []
        self._out: IO[str] | None = None
        self._good_end = 0  # bytes up to the end of the last whole line read

    # ------------------------------------------------------------ writing

    def start(self, names: Sequence[str], repeats: int, *,
              resume: bool = True) -> set[tuple[str, int]]:
        """Open the file for appending rows; returns the (task, trial) pairs already done.

        With ``resume`` and an existing non-empty file, its header must be a primer results
        header of the same suite (else :class:`EvalResultsError`, file untouched) and its
        rows are counted as done. Otherwise the file is created (or emptied) with a new
        header. Raises :class:`EvalResultsError` for a path that is neither a regular file
        nor absent (a FIFO, a dangling symbolic link), ``OSError`` when the file cannot be
        written.
        """
        try:
            check_writable(self.path)
        except UnreadableFile as e:
            raise EvalResultsError(str(e)) from None
        sid = suite_id(names)
        done: set[tuple[str, int]] = set()
        if resume and self.path.is_file() and self.path.stat().st_size > 0:
            header, good_end = self._scan(done)
            if header.get("suite") != sid:
                raise EvalResultsError(
                    f"{self.path}: written for another suite ({header.get('tasks')} tasks, "
                    f"id {header.get('suite')}; these {len(names)} tasks have id {sid}); "
                    f"write to a new file, or pass resume=False to start this one over")
            with self.path.open("r+b") as f:  # cut a torn last line before appending
                f.truncate(good_end)
            self._out = self.path.open("a", encoding="utf-8")
            return done
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("w", encoding="utf-8")
        self._write({"format": FORMAT_NAME, "version": FORMAT_VERSION, "suite": sid,
                     "tasks": len(names), "repeats": repeats})
        return done

    def append(self, row: EvalRow) -> None:
        """Write ``row`` as one line and flush it (call :meth:`start` first)."""
        self._write(row.to_dict())

    def close(self) -> None:
        """Close the file (rows already written stay)."""
        if self._out is not None:
            self._out.close()
            self._out = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._out is None:
            raise RuntimeError("ResultsFile.start() was not called")
        self._out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._out.flush()

    # ------------------------------------------------------------ reading

    def rows(self) -> Iterator[EvalRow]:
        """The rows, read one line at a time (a torn last line is skipped, with a note)."""
        yield from self._read()[1]

    def summary(self) -> EvalSummary:
        """:meth:`EvalSummary.of` the file's rows, read in one pass (memory stays flat)."""
        return EvalSummary.of(self.rows())

    def _scan(self, done: set[tuple[str, int]]) -> tuple[dict[str, Any], int]:
        """Read the header and every row's key into ``done``; returns the header and the
        byte offset just past the last whole line."""
        header, rows = self._read(track=done)
        for _ in rows:
            pass
        return header, self._good_end

    def _read(self, track: set[tuple[str, int]] | None = None
              ) -> tuple[dict[str, Any], Iterator[EvalRow]]:
        try:
            f = open_bounded(self.path)
        except UnreadableFile as e:
            raise EvalResultsError(f"{self.path}: no such results file" if e.missing
                                   else str(e)) from None
        first = f.readline()
        header = self._header(first)
        self._good_end = len(first)
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
                    try:
                        row = EvalRow.from_dict(parse_json(raw))
                    except (ValueError, TypeError, KeyError) as e:
                        raise EvalResultsError(f"{self.path}: line {number} is not an eval "
                                               f"row ({e}); fix or remove that line") from e
                    key = (row.task, row.trial)
                    if key in seen:
                        raise EvalResultsError(f"{self.path}: line {number} repeats task "
                                               f"{row.task!r} trial {row.trial}; two runs "
                                               f"wrote this file at once? remove one line")
                    seen.add(key)
                    offset += len(raw)
                    self._good_end = offset
                    yield row

        return header, rows()

    def _header(self, line: bytes) -> dict[str, Any]:
        try:
            header = parse_json(line)
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise EvalResultsError(f"{self.path}: not a primer eval results file (line 1 is "
                                   f"not its header); choose another file name")
        if header.get("version") != FORMAT_VERSION:
            raise EvalResultsError(f"{self.path}: results format version "
                                   f"{header.get('version')}, this primer reads "
                                   f"{FORMAT_VERSION}")
        return header
