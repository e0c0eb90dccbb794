"""The stdio transport for MCP servers we start: their output read defensively, and closing
ends the server with everything it started.

A server's stdout is the protocol: one JSON-RPC message per line. A server we did not write
may print a stray line (a log, a banner), a partial line, or two messages on one line. Each
line is parsed whole; one that is not a message is searched for messages inside it (junk
before, between or after them), so a stray write costs at most the call whose answer it
corrupted, never the next one. A line longer than :data:`MAX_LINE_BYTES` is dropped.

The server is started in a process group of its own. Closing the connection closes its
stdin, gives it :data:`EXIT_GRACE_S` seconds to exit, then sends SIGTERM to the whole group
(so a child that outlived the server goes too), and SIGKILL after :data:`KILL_GRACE_S`
more. A process that leaves the group (``setsid``) is out of reach of this; a container or
cgroup is the tool for that.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

#: Seconds a server gets to exit after its stdin closes, before its group gets SIGTERM.
EXIT_GRACE_S = 2.0
#: Seconds after SIGTERM before the group gets SIGKILL.
KILL_GRACE_S = 2.0
#: The longest stdout line read, in bytes (a longer one is dropped as junk).
MAX_LINE_BYTES = 32 * 1024 * 1024
#: How many ``{`` in a junk line are tried as the start of a message.
MAX_SALVAGE_TRIES = 16
_POLL_S = 0.02


def parse_line(line: bytes) -> list[SessionMessage]:
    """The JSON-RPC messages in one stdout line: the line itself, or, when it is not one,
    each message found inside it (at most :data:`MAX_SALVAGE_TRIES` starts tried). Junk
    yields ``[]`` and is logged at debug level only."""
    text = line.decode("utf-8", "replace").strip()
    if not text:
        return []
    try:
        return [SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))]
    except ValueError:
        pass
    found: list[SessionMessage] = []
    decoder = json.JSONDecoder()
    pos = 0
    for _ in range(MAX_SALVAGE_TRIES):
        start = text.find("{", pos)
        if start < 0:
            break
        try:
            value, end = decoder.raw_decode(text, start)
            message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except ValueError:
            pos = start + 1
            continue
        found.append(SessionMessage(message))
        pos = end
    log.debug("MCP server wrote a line that is not a JSON-RPC message (%d kept from it): %.200s",
              len(found), text)
    return found


@asynccontextmanager
async def stdio_transport(params: StdioServerParameters, errlog: TextIO
                          ) -> AsyncIterator[TransportStreams]:
    """Start ``params.command params.args`` in a new process group and yield the
    ``(read, write)`` streams ``mcp.Client`` speaks over; on exit, stop the group (see the
    module). Raises ``OSError`` when the command cannot be started."""
    process = await anyio.open_process(
        [params.command, *params.args], env=get_default_environment() | (params.env or {}),
        stderr=errlog, cwd=params.cwd, start_new_session=True)
    reader_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        skipping = False  # inside an over-long line: drop up to its end
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with reader_in:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (cut := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:cut])
                        del buffer[:cut + 1]
                        if skipping:
                            skipping = False
                            continue
                        for message in parse_line(line):
                            await reader_in.send(message)
                    if len(buffer) > MAX_LINE_BYTES:
                        log.debug("dropped a stdout line of more than %d bytes", MAX_LINE_BYTES)
                        buffer.clear()
                        skipping = True

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with writer_out:
                async for message in writer_out:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await reader_in.aclose()  # the server stopped reading: end the session
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(0.5):
                    await writer_done.wait()
                await stop_group(process)
                for stream in (read_stream, write_stream, reader_in, writer_out):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def stop_group(process: anyio.abc.Process) -> None:
    """Close the server's stdin, wait up to :data:`EXIT_GRACE_S` for it to exit, then end
    its process group: SIGTERM, and SIGKILL after :data:`KILL_GRACE_S` (bounded: at most
    about 6 s in all, however the processes behave)."""
    pgid = process.pid
    if process.stdin is not None:  # (bounded: a server that stopped reading never drains it)
        with anyio.move_on_after(0.5), suppress(OSError, anyio.BrokenResourceError,
                                                anyio.ClosedResourceError):
            await process.stdin.aclose()
    await _wait(lambda: process.returncode is not None, EXIT_GRACE_S)
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        if not group_alive(pgid):
            break
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        await _wait(lambda: not group_alive(pgid), grace)
    await _wait(lambda: process.returncode is not None, KILL_GRACE_S)
    if process.stdout is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # (else asyncio warns about it at garbage collection)
        with suppress(Exception):
            close()


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


async def _wait(done: Any, seconds: float) -> bool:
    deadline = anyio.current_time() + seconds
    while not done():
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL_S)
    return True
