"""A local model server that speaks the provider wire formats, for tests and lessons.

``FakeModelServer`` answers, on ``127.0.0.1`` and a free port:

- ``POST /v1/messages``: the Anthropic Messages API (query string ignored, so the SDK's
  ``?beta=true`` works), including server-side threads (``thread: {"type": "create"}`` and
  ``{"type": "continue", "previous_message_id": ...}``, which the SDK's beta tool runner
  sends) and prompt caching (``cache_control`` on the tools or the system prompt);
- ``POST /v1/messages/count_tokens``: ``{"input_tokens": n}`` for the same prompt;
- ``POST /v1/chat/completions``: the OpenAI chat-completions format (via
  :mod:`primer.providers.openai_compat`).

Each request's prompt is turned back into our shapes (a system string, the message list,
tool definitions) and handed to an :class:`~primer.loop.model.LLM`, usually a
:class:`~primer.loop.model.ScriptedLLM` from a scenario, so the same scripted model runs
offline and over HTTP. Its :class:`~primer.loop.model.Reply` is rendered into the wire JSON
with every field the SDKs require (``id``, ``type``, ``role``, ``model``, ``content``,
``stop_reason``, ``stop_sequence``, ``usage``), and those SDK 2.x reads when they apply: a
reply's ``stop_details`` (a refusal's category) and
``usage.output_tokens_details.thinking_tokens`` (the tokens of its ``thinking`` blocks).
``output_config`` (``effort``, ``format``) and server-side compaction (the
``compact_20260112`` edit) are applied as :mod:`~primer.providers.api_options` describes.
Other extra request fields are tolerated.

With ``"stream": true`` a reply comes as server-sent events (those of
:func:`~primer.harness.streaming.wire_events`) in a chunked HTTP body, as the API sends
them; :meth:`FakeModelServer.cut_next_stream` cuts the next one off mid tool call, either
in good order or by breaking the connection inside a chunk, and
:meth:`FakeModelServer.slow_next_stream` spaces its events out. With thinking enabled the
server signs each ``thinking`` block and applies the API's rules
(:mod:`primer.providers.thinking`), 400 when one is broken.

Every request is checked as the real API checks it (:mod:`primer.harness.request_check`: the
SDK's request types plus the pairing rules): an unanswered ``tool_use``, a non-object
``input``, empty assistant content, a ``tool_result`` whose content is neither a string nor
blocks, results after text, and the rest get the API's 400 with its message, so every test
through the real SDK checks that what the loop sends is valid on the wire.

Errors come back as the API sends them: a status code and a body
``{"type": "error", "error": {"type": ..., "message": ...}}``. Script them with
:meth:`FakeModelServer.fail_next` (e.g. two 429s with ``retry-after``, then a reply).

Every request is recorded (path, headers with the API key redacted, JSON body) in
:attr:`FakeModelServer.requests` so tests can assert on what an SDK actually sent::

    with FakeModelServer(ScriptedLLM([...])) as srv:
        client = anthropic.Anthropic(api_key="test", base_url=srv.base_url)
        ...
    srv.requests[0].body["messages"]
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import urlsplit

from primer.harness.request_check import messages_problems, request_problems
from primer.harness.streaming import CUTS, wire_events
from primer.loop.messages import Block, Message, text_block
from primer.loop.model import LLM, Reply, Usage, estimate_tokens
from primer.loop.text import JSONRefused, parse_json

from . import api_options
from .api_options import after_compaction
from .thinking import MIN_THINKING_BUDGET, tool_round_problem

#: Request headers whose values are never recorded (they carry credentials).
SECRET_HEADERS = ("x-api-key", "authorization")

#: The ``error.type`` the Anthropic API uses for each status code (its "Errors" reference).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}



@dataclass
class RecordedRequest:
    """One request the server received: ``path`` (no query), ``query``, ``headers`` (lower-case
    names; credential values replaced by ``"<redacted>"``) and the parsed JSON ``body``."""

    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedError:
    """An error reply to send instead of a model reply: HTTP ``status``, a ``message``, and
    ``retry_after_s`` (seconds; sent as ``retry-after`` and, when positive,
    ``retry-after-ms``), or ``None`` for no header."""

    status: int
    message: str = ""
    retry_after_s: float | None = None


@dataclass
class ServerSentEvents:
    """A streamed reply: the ``events`` to send, each ``event: <type>`` / ``data: <json>``;
    ``abort``: break the connection inside the body after them."""

    events: list[dict[str, Any]]
    abort: bool = False
    gap_s: float = 0.0


class RequestError(Exception):
    """A request the server rejects with ``status`` and an API-format error body."""

    def __init__(self, status: int, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.message, self.details = status, message, details


@dataclass
class _Thread:
    system: str
    tools: list[dict[str, Any]]
    messages: list[Message] = field(default_factory=list)


class FakeModelServer:
    """A local HTTP server speaking the Messages API (and chat completions) over ``llm``.

    ``llm`` answers every model request (any :class:`~primer.loop.model.LLM`). Replies
    name the model the request asked for (``model`` when it asked for none). Thinking
    blocks are signed with an HMAC under ``signing_key`` (fixed by default, so runs repeat
    exactly; the real API's signatures are opaque). Use as a
    context manager, or call :meth:`start` and :meth:`stop`. Attributes: ``base_url`` (``http://127.0.0.1:<port>``),
    ``requests`` (every :class:`RecordedRequest`, in order).

    Usage (tokens) comes from the LLM; for a ``ScriptedLLM`` that is the characters/4
    estimate over the *whole* conversation, also on a threaded ``continue`` request that
    sent only the new messages, because the model still reads all of it. With
    ``cache_control`` on the tool definitions or the system prompt, the first request with a
    given prefix reports its tokens as ``cache_creation_input_tokens`` and later ones as
    ``cache_read_input_tokens`` (no minimum length, unlike the real API).
    """

    def __init__(self, llm: LLM, *, model: str = "claude-fake-1",
                 signing_key: bytes = b"fake-model-server") -> None:
        self.llm = llm
        self.model = model
        self.requests: list[RecordedRequest] = []
        #: Exceptions the LLM raised while answering (each answered with a 500).
        self.failures: list[Exception] = []
        self._errors: deque[ScriptedError] = deque()
        self._threads: dict[str, _Thread] = {}
        self._cached_prefixes: set[str] = set()
        self._cuts: deque[str] = deque()
        self._gaps: deque[float] = deque()
        #: Streams the client closed before their end (it stopped reading: a cancel).
        self.streams_closed_early = 0
        self._secret = signing_key
        self._redacted: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the SDKs add ``/v1/...`` themselves)."""
        if self._httpd is None:
            raise RuntimeError("the server is not running; use `with FakeModelServer(...)` "
                               "or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeModelServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True, name="fake-model-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ scripting

    def fail_next(self, status: int, times: int = 1, *, retry_after_s: float | None = 0.0,
                  message: str | None = None) -> None:
        """Answer the next ``times`` model requests with HTTP ``status`` instead of a reply.

        For example ``fail_next(429, 2, retry_after_s=0.01)``: two rate-limit errors asking
        for a 10 ms wait, then the model answers again. Raises ``ValueError`` for a status
        that is not an error (below 400).
        """
        if status < 400:
            raise ValueError(f"fail_next needs an error status (400 or above), got {status}")
        text = message or {429: "Number of request tokens has exceeded your rate limit.",
                           529: "Overloaded", 400: "Invalid request."}.get(status, "Error")
        for _ in range(times):
            self._errors.append(ScriptedError(status, text, retry_after_s))

    def cut_next_stream(self, how: str = "max_tokens") -> None:
        """Cut the next streamed reply off half-way through its first ``tool_use`` block's
        input (its last block's when it has none): ``how`` is ``"max_tokens"`` (the block
        closes half-written and the reply stops with ``stop_reason`` ``max_tokens``),
        ``"disconnect"`` (the body ends in good order after the half-written block, with no
        ``message_stop``), ``"abort"`` (after the same events the server announces a chunk,
        sends part of it and closes the socket: the client's HTTP library reports an
        incomplete chunked read, as when a real connection breaks) or ``"overloaded"`` (an
        ``overloaded_error`` event). ``ValueError`` for another ``how``."""
        if how not in CUTS:
            raise ValueError(f"cut_next_stream: how must be one of {', '.join(CUTS)}, "
                             f"not {how!r}")
        self._cuts.append(how)

    def slow_next_stream(self, gap_s: float) -> None:
        """Send the next streamed reply's events ``gap_s`` seconds apart, as a model writing
        a long answer does, so a test can act while the stream is in flight."""
        if not 0 <= gap_s <= 10:
            raise ValueError(f"slow_next_stream: gap_s must be 0 to 10 seconds, not {gap_s!r}")
        self._gaps.append(gap_s)

    def sign(self, thinking: str) -> str:
        """The signature this server gives a ``thinking`` block with text ``thinking``."""
        return hmac.new(self._secret, thinking.encode(), hashlib.sha256).hexdigest()

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """The recorded requests to a model endpoint (not ``count_tokens``)."""
        return [r for r in self.requests if not r.path.endswith("/count_tokens")]

    # ------------------------------------------------------------------ the API

    def handle(self, path: str, body: Any) -> tuple[int, dict[str, str], Any]:
        """Answer one request: ``(status, extra headers, JSON body)``. Never raises: an
        exception from the LLM (a script that ran out, a policy bug) is kept in
        :attr:`failures` and answered with a 500 that tells the SDK not to retry."""
        try:
            if not isinstance(body, dict):
                raise RequestError(400, "The request body must be a JSON object.")
            if path == "/v1/messages/count_tokens":
                system, messages, tools, _ = self._prompt(body, for_count=True)
                _reject(request_problems(body, messages=messages, count_tokens=True))
                return 200, {}, {"input_tokens": self._prompt_tokens(system, messages, tools)}
            if path not in ("/v1/messages", "/v1/chat/completions"):
                raise RequestError(404, f"Not found: {path}. This server answers "
                                        f"/v1/messages, /v1/messages/count_tokens and "
                                        f"/v1/chat/completions.")
            with self._lock:
                scripted = self._errors.popleft() if self._errors else None
            if scripted is not None:
                return self._scripted_error(scripted)
            if path == "/v1/chat/completions":
                return 200, {}, self._chat_completion(body)
            wire = self._message(body)
            if body.get("stream") is True:
                with self._lock:
                    cut = self._cuts.popleft() if self._cuts else None
                    gap = self._gaps.popleft() if self._gaps else 0.0
                return 200, {}, ServerSentEvents(
                    wire_events(wire, cut=cut, max_tokens=body["max_tokens"]),
                    abort=cut == "abort", gap_s=gap)
            return 200, {}, wire
        except RequestError as e:
            return e.status, {}, error_body(e.status, e.message, e.details)
        except Exception as e:  # noqa: BLE001 - a failing script is a 500, never a crash
            self.failures.append(e)
            return 500, {"x-should-retry": "false"}, error_body(
                500, f"the scripted model failed: {type(e).__name__}: {e}")

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        system, messages, tools, thread = self._prompt(body)
        _reject(request_problems(body, messages=messages))
        thinking = self._thinking(body, messages)
        try:
            schema, edit = api_options.output_config(body), api_options.requested_compaction(body)
        except ValueError as e:
            raise RequestError(400, str(e)) from None
        reply = self._reply(system, messages, tools, body, edit, schema)
        msg_id = f"msg_fake_{next(self._ids):04d}"
        usage = self._cached_usage(body, system, tools, reply.usage)
        thought = sum(estimate_tokens(b.get("thinking", "")) for b in reply.content
                      if b.get("type") == "thinking")
        if thought and not usage.thinking_tokens:
            usage = replace(usage, thinking_tokens=min(thought, usage.output_tokens))
        wire = message_json(reply, msg_id, str(body.get("model") or self.model), usage)
        if thinking:
            wire["content"] = [self._signed(b) for b in wire["content"]]
        if thread is not None:
            thread.messages = [*messages, {"role": "assistant", "content": wire["content"]}]
            with self._lock:
                self._threads[msg_id] = thread
        return wire

    def _reply(self, system: str, messages: list[Message], tools: list[dict[str, Any]],
               body: dict[str, Any], edit: dict[str, Any] | None,
               schema: dict[str, Any] | None) -> Reply:
        """The model's reply. The prompt is billed from the last ``compaction`` block on;
        with a compaction edit whose trigger that prompt passes, a ``compaction`` block comes
        first (alone, stop reason ``compaction``, with ``pause_after_compaction``) and both
        calls' tokens are billed. With a format, an answer that does not match it fails the
        call. The scripted model reads :func:`~.api_options.without_compaction`."""
        block: Block | None = None
        spent = Usage()
        billed = after_compaction(messages)
        prompt = self._prompt_tokens(system, billed, tools)
        if edit is not None and prompt > api_options.trigger_tokens(edit):
            summary = api_options.summary_of(billed)
            block = cast(Block, {"type": "compaction", "content": summary})
            spent = Usage(prompt, estimate_tokens(summary))
            if edit.get("pause_after_compaction"):
                return Reply([block], "compaction", spent)
            billed = [{"role": "user", "content": [text_block(summary)]}]
        reply = self.llm(system=system, messages=api_options.without_compaction(messages),
                         tools=tools, max_tokens=int(body["max_tokens"]))
        if billed is not messages and reply.usage.input_tokens:  # billed as the API reads it
            reply = replace(reply, usage=replace(
                reply.usage, input_tokens=self._prompt_tokens(system, billed, tools)))
        if schema is not None and not reply.tool_uses and reply.stop_reason == "end_turn":
            problem = api_options.format_problem(reply.text, schema)
            if problem:
                raise ValueError(f"its answer does not match output_config.format, which the "
                                 f"API guarantees: {problem}")
        if block is None:
            return reply
        return replace(reply, content=[block, *reply.content], usage=spent + reply.usage)

    def _chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        from .openai_compat import chat_completion_json, from_chat_request

        system, messages, tools, max_tokens = from_chat_request(body)
        _reject(messages_problems(messages))
        reply = self.llm(system=system, messages=messages, tools=tools, max_tokens=max_tokens)
        return chat_completion_json(reply, f"chatcmpl-fake-{next(self._ids):04d}",
                                    str(body.get("model") or self.model))

    def _prompt(self, body: dict[str, Any], for_count: bool = False
                ) -> tuple[str, list[Message], list[dict[str, Any]], _Thread | None]:
        """System string, full message list, tool definitions and the thread (if any)."""
        if not isinstance(body.get("messages"), list):  # (the rest is checked with them)
            _reject(request_problems(body, count_tokens=for_count))
        thread_param = body.get("thread")
        if isinstance(thread_param, dict) and thread_param.get("type") == "continue":
            prev = str(thread_param.get("previous_message_id"))
            with self._lock:
                held = self._threads.get(prev)
            if held is None:
                raise RequestError(404, f"thread: no thread holds message {prev}",
                                   {"error_code": "thread_not_found"})
            for f in ("system", "tools"):
                if f in body:
                    raise RequestError(400, f"{f}: cannot be set on a thread `continue`; the "
                                            f"thread keeps the one it was created with")
            messages = [*held.messages, *(strip_cache_control(m) for m in body["messages"])]
            return held.system, messages, held.tools, _Thread(held.system, held.tools)
        system = system_text(body.get("system", ""))
        tools = [strip_cache_control(t) for t in body.get("tools") or []]
        messages = [strip_cache_control(m) for m in body["messages"]]
        thread = _Thread(system, tools) if thread_param is not None else None
        return system, messages, tools, thread

    def _thinking(self, body: dict[str, Any], messages: list[Message]) -> bool:
        """Whether the request enables thinking, after the API's checks of the setting and
        of the thinking blocks it sends back (a :class:`RequestError` when one fails)."""
        thinking = body.get("thinking")
        if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
            return False
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) \
                or budget < MIN_THINKING_BUDGET:
            raise RequestError(400, f"thinking.enabled.budget_tokens: Input should be greater "
                                    f"than or equal to {MIN_THINKING_BUDGET}")
        if int(body["max_tokens"]) <= budget:
            raise RequestError(400, "`max_tokens` must be greater than "
                                    "`thinking.budget_tokens`")
        problem = tool_round_problem(messages, self.issued)
        if problem:
            raise RequestError(400, problem)
        return True

    def _signed(self, block: dict[str, Any]) -> dict[str, Any]:
        if block.get("type") == "thinking":
            return {"type": "thinking", "thinking": block.get("thinking", ""),
                    "signature": self.sign(block.get("thinking", ""))}
        if block.get("type") == "redacted_thinking":
            with self._lock:
                self._redacted.add(str(block.get("data")))
        return block

    def issued(self, block: Block) -> bool:
        """Whether a thinking block is exactly as this server sent it (its signature, or a
        redacted block's ``data``, is one it issued)."""
        if block.get("type") == "thinking":
            return hmac.compare_digest(str(block.get("signature", "")),
                                       self.sign(str(block.get("thinking", ""))))
        with self._lock:
            return str(block.get("data")) in self._redacted

    @staticmethod
    def _prompt_tokens(system: str, messages: list[Message], tools: list[dict[str, Any]]) -> int:
        return (estimate_tokens(system) + estimate_tokens(tools)
                + sum(estimate_tokens(m) for m in messages))

    def _cached_usage(self, body: dict[str, Any], system: str, tools: list[dict[str, Any]],
                      usage: Usage) -> Usage:
        """Move the cached prefix's tokens from ``input_tokens`` to the cache fields."""
        marked_tools = any(isinstance(t, dict) and "cache_control" in t
                           for t in body.get("tools") or [])
        sys_field = body.get("system")
        marked_system = isinstance(sys_field, list) and any(
            isinstance(b, dict) and "cache_control" in b for b in sys_field)
        if not (marked_tools or marked_system) or usage.input_tokens <= 0:
            return usage
        prefix = estimate_tokens(tools) + (estimate_tokens(system) if marked_system else 0)
        prefix = min(prefix, usage.input_tokens)
        key = json.dumps([tools, system if marked_system else None], sort_keys=True)
        with self._lock:
            hit = key in self._cached_prefixes
            self._cached_prefixes.add(key)
        return Usage(usage.input_tokens - prefix, usage.output_tokens,
                     0 if hit else prefix, prefix if hit else 0)

    @staticmethod
    def _scripted_error(e: ScriptedError) -> tuple[int, dict[str, str], Any]:
        headers: dict[str, str] = {}
        if e.retry_after_s is not None:
            headers["retry-after"] = str(int(e.retry_after_s))
            if e.retry_after_s > 0:
                headers["retry-after-ms"] = f"{e.retry_after_s * 1000:g}"
        return e.status, headers, error_body(e.status, e.message)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeModelServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        parts = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = parse_json(raw or b"null")
        except JSONRefused:
            body = None
        headers = {k.lower(): ("<redacted>" if k.lower() in SECRET_HEADERS else v)
                   for k, v in self.headers.items()}
        with self.owner._lock:
            self.owner.requests.append(RecordedRequest(parts.path, parts.query, headers, body))
        status, extra, payload = self.owner.handle(parts.path, body)
        if isinstance(payload, ServerSentEvents):
            self._stream(payload)
            return
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake_{len(self.owner.requests):04d}")
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, sse: ServerSentEvents) -> None:
        """Send the events one chunk each (``Transfer-Encoding: chunked``), flushed, then
        the last chunk; with ``sse.abort``, announce one more chunk, send half of it and
        shut the socket instead, so the body is broken mid-chunk."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.send_header("request-id", f"req_fake_{len(self.owner.requests):04d}")
        self.end_headers()
        self.close_connection = True
        try:
            for event in sse.events:
                data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                if sse.gap_s:
                    time.sleep(sse.gap_s)
        except OSError:  # the client closed the stream (a cancelled call): count it
            with self.owner._lock:
                self.owner.streams_closed_early += 1
            return
        if sse.abort:
            self.wfile.write(b"400\r\nevent: content_block_delta\ndata: {\"type\"")
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silent: a line on stderr would fail a notebook cell."""


# ---------------------------------------------------------------------- wire helpers

def error_body(status: int, message: str, details: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """The API's error body for ``status``: ``{"type": "error", "error": {type, message}}``."""
    err: dict[str, Any] = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
    if details:
        err["details"] = details
    return {"type": "error", "error": err}


def message_json(reply: Reply, msg_id: str, model: str, usage: Usage | None = None
                 ) -> dict[str, Any]:
    """``reply`` as a Messages API response body (every field the SDK requires)."""
    content = [b if b.get("type") != "text" else {"type": "text", "text": b.get("text", "")}
               for b in reply.content]
    u = usage or reply.usage
    wire_usage: dict[str, Any] = {k: v for k, v in u.to_dict().items() if k != "thinking_tokens"}
    if u.thinking_tokens:  # the SDK 2.x shape: a breakdown of output_tokens
        wire_usage["output_tokens_details"] = {"thinking_tokens": u.thinking_tokens}
    body = {"id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": reply.stop_reason, "stop_sequence": None,
            "usage": wire_usage}
    if reply.stop_details is not None:  # (a refusal's category)
        body["stop_details"] = reply.stop_details
    return body


def system_text(system: Any) -> str:
    """The system prompt as one string (a list of text blocks is joined without separators,
    so ``[{"type": "text", "text": s}]`` gives back ``s``)."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system if isinstance(b, dict))
    raise RequestError(400, "system: Input should be a string or a list of text blocks")


def strip_cache_control(value: Any) -> Any:
    """``value`` without ``cache_control`` keys in it or its content blocks."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) if k == "content" else v
                for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def _reject(problems: list[str]) -> None:
    """Raise the API's 400 for the first of ``problems`` (as the API reports one)."""
    if problems:
        raise RequestError(400, problems[0])
