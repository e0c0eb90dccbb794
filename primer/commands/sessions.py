"""``python -m primer sessions list DIR`` and ``sessions show DIR ID``: stored conversations.

A :class:`~primer.harness.sessions.store.SessionStore` keeps its sessions in
``DIR/sessions.sqlite3``. ``list`` prints one line per session (turns, messages, tokens,
cost, when it was last updated, its last turn), oldest first; ``show`` prints one session's
turns as a table and its conversation, one line per text, call and result (each text and
result cut to ``--chars``, every cut marked ``…[+K chars]`` and a last line saying that
``--full`` shows them whole). Both only read:
nothing is created or changed. DIR may also be the ``sessions.sqlite3`` file itself.

Exit codes: 0 on success; 2, with one line on stderr, for a store that cannot be read (a
damaged or forged file, a FIFO), no such session, a usage error or a path that does not
exist, like every other command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from primer.commands.hints import primer_command
from primer.harness.sessions.session import SessionError, turns_table
from primer.harness.sessions.store import FILE_NAME, list_sessions, read_session
from primer.harness.summaries import render_lines

#: Exit codes: an unreadable store or an unknown session; a usage error or a bad path
#: (the same code, as for every command that is given a file it cannot use).
BAD_STORE = 2
USAGE_ERROR = 2


def register(subparsers: Any) -> None:
    """Add ``sessions`` (with ``list`` and ``show``) to ``subparsers`` (argparse sub-parsers)."""
    p = subparsers.add_parser("sessions", help="list and show stored conversations (sessions)",
                              description="Read the sessions a SessionStore keeps in "
                                          f"DIR/{FILE_NAME}. Nothing is changed.")
    sub = p.add_subparsers(dest="sessions_command", metavar="ACTION")
    ls = sub.add_parser("list", help="one line per stored session")
    ls.add_argument("directory", metavar="DIR", help=f"the store's directory (or its {FILE_NAME})")
    ls.set_defaults(func=run_list)
    sh = sub.add_parser("show", help="one session's turns and conversation")
    sh.add_argument("directory", metavar="DIR", help=f"the store's directory (or its {FILE_NAME})")
    sh.add_argument("session_id", metavar="ID", help="the session to show (see `sessions list`)")
    sh.add_argument("--chars", type=int, default=100, metavar="N",
                    help="cut each text and result to N characters (default 100); a cut "
                         "ends in …[+K chars], K the characters left out")
    sh.add_argument("--full", action="store_true",
                    help="print every text and result whole, with no cut")
    sh.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return USAGE_ERROR


def _path_problem(command: str, directory: str) -> str | None:
    if not Path(directory).exists():
        return f"sessions {command}: {directory} does not exist"
    return None


def run_list(args: argparse.Namespace) -> int:
    """``sessions list DIR``: one line per session, oldest update first."""
    problem = _path_problem("list", args.directory)
    if problem:
        print(problem, file=sys.stderr)
        return USAGE_ERROR
    try:
        infos = list_sessions(args.directory)
    except SessionError as e:
        print(f"sessions list: {e}", file=sys.stderr)
        return BAD_STORE
    if not infos:
        print(f"no sessions in {args.directory}")
    for info in infos:
        print(info.describe())
    return 0


def run_show(args: argparse.Namespace) -> int:
    """``sessions show DIR ID``: the session's turns table, then its conversation."""
    problem = _path_problem("show", args.directory)
    if problem:
        print(problem, file=sys.stderr)
        return USAGE_ERROR
    if args.chars < 10:
        print(f"sessions show: --chars must be at least 10 (got {args.chars})", file=sys.stderr)
        return USAGE_ERROR
    try:
        stored = read_session(args.directory, args.session_id)
    except SessionError as e:
        print(f"sessions show: {e}", file=sys.stderr)
        return BAD_STORE
    print(turns_table(stored.turns, stored.id))
    print()
    chars = None if args.full else args.chars
    lines = render_lines(stored.messages, chars, mark_cuts=True)
    print("\n".join(lines))
    if lines != render_lines(stored.messages, None):
        whole = primer_command("sessions", "show", shlex.quote(args.directory),
                               shlex.quote(args.session_id), "--full")
        print(f"\n(texts and results longer than {args.chars} characters are cut, each cut "
              f"marked …[+K chars]; see them whole with: {whole})")
    return 0
