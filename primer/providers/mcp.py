"""Tools from an MCP server: each tool a server lists becomes an ordinary :class:`Tool`.

The Model Context Protocol lets a program (a *server*) offer tools to any agent harness. A
connection lists the server's tools once; each becomes a :class:`~primer.loop.tools.Tool` with
the ``name``, ``description`` and ``input_schema`` exactly as listed, whose function sends a
``tools/call`` request and waits for the answer. So an MCP tool goes through the loop's own
machinery unchanged: the arguments are validated against the listed schema before anything
is sent, the tool timeout (:class:`~primer.harness.runner.ToolRunner`) bounds the call, and every
failure is an error result the model can act on, never an exception that ends the run:

* a result the server marks ``isError`` is sent with ``is_error: true`` and its text (with
  no text, a sentence saying that the tool failed);
* a protocol error (a JSON-RPC error response) becomes a :class:`ToolError` naming its code;
* a server that never answers: the SDK's per-request timeout cancels the request at the
  protocol level (``notifications/cancelled``) and the call is a ``timeout`` result;
* a server that dies mid-run (its process exits, its HTTP endpoint goes away): the pending
  call and every later call become error results saying the server is gone.

A server's annotations (``readOnlyHint`` ...) are hints only, so the harness decides side
effects and approval itself, by tool name: ``side_effecting=`` and ``needs_approval=``.

Three context managers yield a server's ``list[Tool]``: :func:`mcp_stdio_tools` (start a
subprocess, speak over its stdin/stdout, stop it when the block ends), :func:`mcp_http_tools`
(a Streamable HTTP URL), :func:`mcp_inprocess_tools` (a server object in this process, for
fast lessons and tests). :class:`MCPConnection` is the object behind them.

The ``mcp`` SDK is async (anyio), our tools sync: each connection runs one event loop on a
daemon thread of its own, and every wait on it is bounded, so neither a hung server nor a
forgotten connection can hang the caller or interpreter exit (an ``atexit`` hook closes open
connections). A stdio server runs in a process group of its own, which closing ends
(:mod:`primer.providers.mcp_stdio`: stdin closed, then SIGTERM, then SIGKILL to the group).

Imported only when used: ``import primer`` does not import ``mcp``.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypedDict

import anyio
import jsonschema
import mcp_types as types
import pydantic
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from primer.harness.allowance import cancel_requested
from primer.harness.retry import ToolTimeout
from primer.loop.state import HANDOFF_TOOL_NAME
from primer.loop.steps import CANCEL_POLL_S
from primer.loop.text import safe_str
from primer.loop.tools import Tool, ToolError, ToolOutput

from .event_loop_thread import EventLoopThread
from .mcp_stdio import stdio_transport

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mcp.client import Transport
    from typing_extensions import Unpack

#: Seconds a call may wait beyond its ``timeout_s`` for the SDK to report its own timeout,
#: before the wait is abandoned; the bound that holds even if the event loop is stuck.
GRACE_S = 2.0
#: Seconds :meth:`MCPConnection.close` waits for the shutdown (a stdio server gets 2 s to
#: exit after its stdin closes, then its group SIGTERM, then SIGKILL 2 s later).
CLOSE_TIMEOUT_S = 10.0
#: At most this many pages of ``tools/list`` are read (a paginator that never ends).
MAX_LIST_PAGES = 100
#: Characters of a stdio server's stderr quoted in the error when it dies.
STDERR_TAIL_CHARS = 300

Target = Server[Any] | MCPServer | str | StdioServerParameters


class MCPOptions(TypedDict, total=False):
    """The options every way of connecting takes (see :class:`MCPConnection`)."""

    timeout_s: float
    connect_timeout_s: float
    side_effecting: bool | Collection[str]
    needs_approval: bool | Collection[str]
    reserved: Iterable[str | Tool]
    argument_mode: Literal["strict", "lax"]


class MCPConnectionError(Exception):
    """Connecting to an MCP server failed: it could not start, did not answer in time,
    closed the connection, or listed a tool that cannot be sent to a model.

    Raised when the connection opens, never during a run (a call that fails is an error
    result). The message names the server and says what happened.
    """


class MCPConnection:
    """One connection to an MCP server, usable from synchronous code; ``tools`` its tools.

    ``target`` is what ``mcp.Client`` connects to: a ``StdioServerParameters`` (a
    subprocess), a Streamable HTTP URL, or a ``Server`` / ``MCPServer`` object in this
    process. Prefer the constructors :meth:`stdio`, :meth:`http` and :meth:`inprocess`.

    ``timeout_s`` (seconds) bounds each ``tools/call``: it is every tool's ``timeout_s``
    (what :class:`~primer.harness.runner.ToolRunner` enforces) and the SDK's per-request timeout.
    ``connect_timeout_s`` bounds opening the connection and listing the tools.
    ``side_effecting`` and ``needs_approval`` are tool names (or ``True`` for every tool)
    to mark so; a name the server does not list is a ``ValueError`` when the connection
    opens, so a typo cannot leave a tool unguarded. ``argument_mode`` is every tool's
    (``"lax"`` converts ``"98.7"`` to a number, see :class:`~primer.loop.tools.Tool`).
    ``stderr`` receives a stdio server's stderr; by default it is kept in a temporary file,
    read with :meth:`server_stderr`.

    A server's tool list is data we check, never code we obey. A listed tool is left out,
    with the reason in :attr:`refused` (and a warning on this module's logger), when its
    name is reserved (the hand-off tool's, or any name in ``reserved``: the tools or names
    already registered for the run, e.g. ``reserved=my_tools``), when its name cannot be
    sent to a model, or when its ``input_schema`` cannot be checked safely (a ``$ref``
    outside the document, a cycle, a pattern needing backtracking: see
    :mod:`primer.loop.schema_safety`).

    Use it as a context manager (``with MCPConnection.stdio(...) as conn:``) or call
    :meth:`open` and :meth:`close`. :meth:`open` raises :class:`MCPConnectionError` and
    ``ValueError`` as described; the connection is closed again before either is raised.
    """

    def __init__(self, target: Target, *, label: str, timeout_s: float = 30.0,
                 connect_timeout_s: float = 30.0,
                 side_effecting: bool | Collection[str] = (),
                 needs_approval: bool | Collection[str] = (),
                 reserved: Iterable[str | Tool] = (),
                 argument_mode: Literal["strict", "lax"] = "strict",
                 stderr_file: TextIO | None = None) -> None:
        value: object
        for what, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not 0 < value <= 86_400 * 365):  # Tool's rule, but None is refused
                raise ValueError(f"{what} must be a number of seconds > 0 (at most a year), "
                                 f"not {value!r}: every MCP request needs a bound")
        for what, value in (("side_effecting", side_effecting),
                            ("needs_approval", needs_approval)):
            if isinstance(value, str):
                raise TypeError(f"{what} takes a collection of tool names or True, not the "
                                f"string {value!r}; write {what}={{{value!r}}}")
        self.target = target
        self.label = label
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self._marks = {"side_effecting": side_effecting, "needs_approval": needs_approval}
        self.argument_mode = argument_mode
        self._reserved = {HANDOFF_TOOL_NAME, *(r.name if isinstance(r, Tool) else str(r)
                                               for r in reserved)}
        #: Tool name → why the listed tool was left out (see the class's docstring).
        self.refused: dict[str, str] = {}
        self._stderr = stderr_file
        #: The server's tools, in the order it lists them (empty until :meth:`open`).
        self.tools: list[Tool] = []
        #: Tool name → the server's annotations (hints such as ``readOnlyHint``), as sent.
        self.annotations: dict[str, dict[str, Any]] = {}
        #: The name the server gave for itself, if it did.
        self.server_name: str | None = None
        self._loop: EventLoopThread | None = None
        self._client: Client | None = None
        self._hold: concurrent.futures.Future[None] | None = None
        self._stop: anyio.Event | None = None
        self._lost: str | None = None
        self._own_stderr = False
        #: True once :meth:`close` has run.
        self.closed = False

    # ------------------------------------------------------------ constructors

    @classmethod
    def stdio(cls, command: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
              cwd: str | Path | None = None, stderr: TextIO | None = None,
              **options: Unpack[MCPOptions]) -> MCPConnection:
        """A connection to a server started as ``command args...`` and spoken to over its
        stdin/stdout. ``env`` adds variables to the SDK's safe default environment (``PATH``,
        ``HOME`` and a few more; the rest of ours is not passed on). ``options`` as for
        :class:`MCPConnection`."""
        params = StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
        own = stderr is None
        file = (tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if own
                else stderr)
        label = shlex.join([os.path.basename(command), *args])
        conn = cls(params, label=label, stderr_file=file, **options)
        conn._own_stderr = own
        return conn

    @classmethod
    def http(cls, url: str, **options: Unpack[MCPOptions]) -> MCPConnection:
        """A connection to a Streamable HTTP server at ``url`` (e.g.
        ``http://127.0.0.1:8000/mcp``). ``options`` as for :class:`MCPConnection`."""
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"an MCP server URL starts with http:// or https://, not {url!r}")
        return cls(url, label=url, **options)

    @classmethod
    def inprocess(cls, server: Server[Any] | MCPServer,
                  **options: Unpack[MCPOptions]) -> MCPConnection:
        """A connection to ``server``, an ``mcp`` server object in this process (no
        subprocess, no sockets: the SDK dispatches requests to it directly). Its tools run
        on this process's threads, so a tool that crashes the process crashes the caller."""
        return cls(server, label=f"in-process server {server.name!r}", **options)

    # ------------------------------------------------------------ life cycle

    def __enter__(self) -> MCPConnection:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> MCPConnection:
        """Connect, list the server's tools and build :attr:`tools`; returns ``self``."""
        if self._loop is not None or self.closed:
            raise RuntimeError(f"MCP connection to {self.label} was already opened")
        self._loop = EventLoopThread(f"mcp {self.label}"[:60], timeout_s=CLOSE_TIMEOUT_S)
        atexit.register(self.close)
        ready: concurrent.futures.Future[list[types.Tool]] = concurrent.futures.Future()
        deadline = time.monotonic() + self.connect_timeout_s
        self._hold = self._loop.portal.start_task_soon(self._run, ready)
        try:
            try:
                listed = ready.result(timeout=self.connect_timeout_s)
            except concurrent.futures.TimeoutError:
                raise MCPConnectionError(
                    f"MCP server {self.label} did not answer within "
                    f"{self.connect_timeout_s:g} s (connect and tools/list)"
                    f"{self._stderr_note()}") from None
            except MCPConnectionError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure to connect is reported
                raise MCPConnectionError(
                    f"could not connect to MCP server {self.label}: {_describe(e)}"
                    f"{self._stderr_note()}") from e
            self.tools = self._build_tools(listed, deadline)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """End the connection and stop the server if we started it; bounded, idempotent.

        Waits at most :data:`CLOSE_TIMEOUT_S` seconds for the SDK's shutdown; a call still
        running gets an error result. Safe to call from ``atexit`` and more than once.
        """
        if self.closed:
            return
        self.closed = True
        atexit.unregister(self.close)
        loop, hold, stop = self._loop, self._hold, self._stop
        if loop is not None and hold is not None and not hold.done():
            if self._client is not None and stop is not None:  # connected: leave in order
                with contextlib.suppress(Exception):
                    loop.portal.start_task_soon(_set, stop).result(timeout=CLOSE_TIMEOUT_S)
                    hold.result(timeout=CLOSE_TIMEOUT_S)
            hold.cancel()  # still connecting, or not done in time: cancel it
        if loop is not None:
            loop.stop()  # waits (bounded) for the SDK's shielded shutdown to finish
        if self._own_stderr and self._stderr is not None:
            self._stderr.close()

    async def _run(self, ready: concurrent.futures.Future[list[types.Tool]]) -> None:
        """The connection's task on the event loop: connect, list, hold until closed.

        All of the SDK's context managers are entered and left in this one task, as anyio
        requires. A failure after the tools were listed marks the connection lost.
        """
        self._stop = anyio.Event()
        target: Target | Transport = self.target
        if isinstance(target, StdioServerParameters):
            target = stdio_transport(target, self._stderr or sys.stderr)
        try:
            async with Client(target, read_timeout_seconds=self.connect_timeout_s) as client:
                self.server_name = client.server_info.name if client.server_info else None
                listed = await _list_all(client)
                self._client = client
                ready.set_result(listed)
                await self._stop.wait()
        except Exception as e:  # noqa: BLE001 - recorded, then reported by open() or calls
            if not ready.done():
                ready.set_exception(e)
            self._lost = _describe(e)
        finally:
            self._client = None

    # ------------------------------------------------------------ tools

    def _build_tools(self, listed: list[types.Tool], deadline: float) -> list[Tool]:
        """The listed tools as primer Tools; a tool left when ``deadline`` (``time.monotonic``)
        has passed is refused, so checking schemas stays inside ``connect_timeout_s``."""
        names = [t.name for t in listed]
        if len(set(names)) != len(names):
            raise MCPConnectionError(f"MCP server {self.label} lists a tool name twice: "
                                     f"{', '.join(names)}")
        marked = {what: _marked(what, value, names, self.label)
                  for what, value in self._marks.items()}
        tools = []
        for t in listed:
            self.annotations[t.name] = (t.annotations.model_dump(by_alias=True, exclude_none=True)
                                        if t.annotations else {})
            if time.monotonic() > deadline:
                self._refuse(t.name, f"connect_timeout_s ({self.connect_timeout_s:g} s) ran out "
                                     f"while the listed tools' schemas were checked; raise it "
                                     f"or ask the server for smaller schemas")
                continue
            if t.name in self._reserved:
                self._refuse(t.name, "its name is reserved: the harness (or a tool already "
                                     "registered for the run) has a tool of that name, which "
                                     "a server may not replace")
                continue
            try:
                tools.append(Tool(
                    t.name, t.description or t.title or "", dict(t.input_schema),
                    _CallFn(self, t.name), side_effecting=t.name in marked["side_effecting"],
                    needs_approval=t.name in marked["needs_approval"], timeout_s=self.timeout_s,
                    argument_mode=self.argument_mode))
            except (ValueError, jsonschema.SchemaError) as e:
                self._refuse(t.name, f"it cannot be offered to a model safely: "
                                     f"{safe_str(getattr(e, 'message', e), 300)}")
        return tools

    def _refuse(self, name: str, why: str) -> None:
        self.refused[name] = why
        log.warning("MCP server %s lists tool %r, left out: %s", self.label, name, why)

    def call(self, name: str, arguments: dict[str, Any]) -> str | ToolOutput:
        """Send ``tools/call`` for ``name`` and wait for the result (at most ``timeout_s``
        plus :data:`GRACE_S` seconds); this is every MCP tool's function.

        Returns the result's text, or a :class:`ToolOutput` with ``is_error`` for a result
        the server marked ``isError``. Raises :class:`ToolTimeout` when the server did not
        answer in time (the request is cancelled) and :class:`ToolError` for a protocol
        error, a lost or closed connection, or a result that breaks the protocol. While it
        waits it reads the current run's cancel signal: a cancel cancels the request on the
        session (the SDK sends ``notifications/cancelled``) and raises :class:`ToolError`.
        """
        client, loop = self._client, self._loop
        if client is None or loop is None:
            raise ToolError(self._gone_message(name))
        try:
            future = loop.portal.start_task_soon(client.call_tool, name, arguments,
                                                 self.timeout_s)
        except RuntimeError:  # the event loop has stopped
            raise ToolError(self._gone_message(name)) from None
        try:
            result = _result(future, self.timeout_s + GRACE_S, name)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolTimeout(self.timeout_s) from None
        except concurrent.futures.CancelledError:
            raise ToolError(self._gone_message(name)) from None
        except MCPError as e:
            if e.code == types.REQUEST_TIMEOUT:
                raise ToolTimeout(self.timeout_s) from None
            if e.code == types.CONNECTION_CLOSED:
                raise ToolError(self._gone_message(name)) from None
            raise ToolError(f"{name}: the MCP server answered with protocol error {e.code}: "
                            f"{safe_str(e.message, 500)}") from None
        except pydantic.ValidationError as e:
            raise ToolError(f"{name}: the MCP server sent a result that does not follow the "
                            f"protocol ({e.error_count()} problem(s), first: "
                            f"{safe_str(e.errors()[0]['msg'], 200)})") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as e:
            self._lost = self._lost or _describe(e)
            raise ToolError(self._gone_message(name)) from None
        except BaseException:  # the wait was interrupted (the harness's timer, Ctrl-C):
            future.cancel()    # the request is cancelled, not left running
            raise
        if result.is_error and not result.content and result.structured_content is None:
            return ToolOutput(f"{name} failed: MCP server {self.label} reported an error "
                              f"without saying what went wrong", is_error=True)
        text = mcp_result_text(result)
        return ToolOutput(text, is_error=True) if result.is_error else text

    def server_stderr(self) -> str:
        """What a stdio server has written to its stderr so far (``""`` if not kept)."""
        f = self._stderr if self._own_stderr else None
        if f is None or f.closed:
            return ""
        size = os.fstat(f.fileno()).st_size
        return os.pread(f.fileno(), size, 0).decode("utf-8", "replace")

    def _gone_message(self, name: str) -> str:
        if self.closed:
            return (f"{name}: the connection to MCP server {self.label} is closed, so its "
                    f"tools cannot be called any more")
        why = f" ({self._lost})" if self._lost else ""
        return (f"{name}: MCP server {self.label} is gone: the connection closed{why}, so "
                f"the call's result is lost and none of its tools can be called again in this "
                f"run. Answer without them or tell the user the service is down."
                f"{self._stderr_note()}")

    def _stderr_note(self) -> str:
        tail = self.server_stderr().strip()
        if not tail:
            return ""
        last = tail.splitlines()[-1]
        return f" Its stderr ends: {safe_str(last, STDERR_TAIL_CHARS)}"


class _CallFn:
    """The function of one MCP tool: ``fn(**input)`` calls the tool on the server.

    A class rather than a closure so a tool's ``repr`` says which server it calls.
    """

    def __init__(self, conn: MCPConnection, name: str) -> None:
        self.conn, self.name = conn, name

    def __call__(self, **arguments: Any) -> str | ToolOutput:
        return self.conn.call(self.name, arguments)

    def __repr__(self) -> str:
        return f"<MCP tool {self.name} of {self.conn.label}>"


def mcp_result_text(result: types.CallToolResult) -> str:
    """A ``CallToolResult`` as ``tool_result`` text: its text blocks joined by newlines.

    The harness sends tool results as text, so a block that is not text is described
    (``[image/png image, 1234 base64 characters, not shown]``), a text resource gives its
    text, a resource link its URI. With no content blocks the ``structuredContent`` is sent
    as JSON; with neither, ``"(no output)"``.
    """
    parts = [_block_text(b) for b in result.content]
    if parts:
        return "\n".join(parts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "(no output)"


def _block_text(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return (f"[{block.mime_type} {block.type}, {len(block.data)} base64 characters, "
                f"not shown]")
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.uri}]"
    contents = block.resource
    if isinstance(contents, types.TextResourceContents):
        return contents.text
    return f"[resource {contents.uri}, {len(contents.blob)} base64 characters, not shown]"


@contextlib.contextmanager
def mcp_stdio_tools(command: str, args: Sequence[str] = (), *,
                    env: dict[str, str] | None = None, cwd: str | Path | None = None,
                    stderr: TextIO | None = None,
                    **options: Unpack[MCPOptions]) -> Iterator[list[Tool]]:
    """Start ``command args...`` as an MCP server; yield its tools; stop it at the end.

    ``options``: ``timeout_s`` (seconds per call, default 30), ``connect_timeout_s``,
    ``side_effecting``, ``needs_approval``, ``env``, ``cwd``, ``stderr`` (see
    :class:`MCPConnection`). Raises :class:`MCPConnectionError` when the server cannot be
    started or does not answer, ``ValueError`` for a marked name it does not list. E.g.
    ``with mcp_stdio_tools("python", ["-m", "primer", "mcp-serve", "orders"]) as tools:``.
    """
    with MCPConnection.stdio(command, args, env=env, cwd=cwd, stderr=stderr, **options) as conn:
        yield conn.tools


@contextlib.contextmanager
def mcp_http_tools(url: str, **options: Unpack[MCPOptions]) -> Iterator[list[Tool]]:
    """Connect to the Streamable HTTP MCP server at ``url``; yield its tools.

    ``options`` and errors as for :func:`mcp_stdio_tools` (no ``env``, ``cwd``, ``stderr``).
    """
    with MCPConnection.http(url, **options) as conn:
        yield conn.tools


@contextlib.contextmanager
def mcp_inprocess_tools(server: Server[Any] | MCPServer,
                        **options: Unpack[MCPOptions]) -> Iterator[list[Tool]]:
    """Connect to ``server``, an ``mcp`` server object in this process; yield its tools.

    The fast path for lessons and tests: same protocol objects, no subprocess. ``options``
    and errors as for :func:`mcp_http_tools`.
    """
    with MCPConnection.inprocess(server, **options) as conn:
        yield conn.tools


# ---------------------------------------------------------------- internals

def _result(future: concurrent.futures.Future[Any], seconds: float, name: str) -> Any:
    """``future.result(timeout=seconds)``, reading the current run's cancel signal every
    :data:`~primer.loop.steps.CANCEL_POLL_S` seconds: once it is set, the request is
    cancelled (its task on the event loop, so the SDK sends ``notifications/cancelled``)
    and :class:`ToolError` says so."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        try:
            return future.result(timeout=max(0.0, min(left, CANCEL_POLL_S)))
        except concurrent.futures.TimeoutError:
            if left <= 0:
                raise
            if cancel_requested():
                future.cancel()
                raise ToolError(f"{name}: the run was cancelled; the MCP request was "
                                f"cancelled on the session") from None


async def _set(event: anyio.Event) -> None:
    event.set()


async def _list_all(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise MCPConnectionError(f"tools/list did not end after {MAX_LIST_PAGES} pages")


def _marked(what: str, value: bool | Collection[str], names: list[str], label: str) -> set[str]:
    if value is True:
        return set(names)
    if value is False:
        return set()
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ValueError(f"{what} names {', '.join(map(repr, unknown))}, which MCP server "
                         f"{label} does not list; it lists: {', '.join(names) or '(no tools)'}")
    return set(value)


def _describe(e: BaseException) -> str:
    if isinstance(e, MCPError):
        return f"MCP error {e.code}: {safe_str(e.message, 300)}"
    inner = getattr(e, "exceptions", None)  # an exception group from a task group
    if isinstance(inner, tuple) and inner:
        return "; ".join(_describe(x) for x in inner[:3])
    return f"{type(e).__name__}: {safe_str(e, 300)}"
