"""Tools from an MCP server: ordinary Tools, through the loop's own validation, timeout and
errors; real stdio subprocesses and a real Streamable HTTP server on 127.0.0.1, including a
server that hangs, one that crashes and one that freezes."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import ScriptedLLM, tool_reply
from primer.loop.state import StopCause
from primer.providers.mcp import (
    MCPConnection,
    MCPConnectionError,
    mcp_http_tools,
    mcp_inprocess_tools,
    mcp_result_text,
    mcp_stdio_tools,
)
from primer.providers.mcp_server import mcp_server
from primer.scenarios import get_demo
from primer.scenarios.orders import make_tools

ROOT = Path(__file__).resolve().parent.parent
SERVE = [sys.executable, "-m", "primer", "mcp-serve", "orders"]
NO_RETRIES = AgentConfig(tool_retries=0)


def orders_server(**faults: str):
    return mcp_server(make_tools(), name="orders", faults=faults)


def executions(result):
    return [e for step in result.steps for e in step.executions]


def lookup_then_add():
    """A model that calls get_order, then the calculator, then answers."""
    return ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"})),
                        tool_reply(("calculator", {"expression": "2 + 2"})), "done"])


def canonical(messages):
    """``messages`` with the schema quoted in validation errors in sorted key order: the SDK
    may reorder a schema's keys (the same schema, as a dict) on the modern protocol."""
    out = json.loads(json.dumps(messages))
    for message in out:
        for block in message["content"] if isinstance(message["content"], list) else []:
            head, sep, schema = str(block.get("content", "")).partition("Expected input_schema: ")
            if sep:
                block["content"] = head + sep + json.dumps(json.loads(schema[:-1]), sort_keys=True)
    return out


def children() -> set[int]:
    """Pids of this process's child processes, zombies included (read from /proc)."""
    me, found = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` still exists, as a live process or an unreaped zombie."""
    return Path(f"/proc/{pid}").exists()


# ---------------------------------------------------------------- in-process

def test_importing_primer_agents_does_not_import_mcp():
    code = ("import primer, primer.loop.loop, sys; "
            "print(sorted(m for m in ('mcp', 'mcp_types') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_each_tool_has_the_name_description_and_input_schema_the_server_lists():
    with mcp_inprocess_tools(orders_server()) as tools:
        assert [t.definition() for t in tools] == [t.definition() for t in make_tools()]


def test_a_third_party_servers_schema_is_taken_exactly_as_listed():
    server = MCPServer("third-party")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int = 1) -> int:
        return a + b

    listed = anyio.run(server.list_tools)[0]
    with mcp_inprocess_tools(server) as tools:
        assert tools[0].definition() == {"name": "add", "description": "Add two integers.",
                                         "input_schema": listed.input_schema}
        assert tools[0](a=2, b=3) == "5"


def test_the_order_task_over_mcp_sends_the_model_the_same_messages_as_local_tools():
    scenario = get_demo("orders")
    local = scenario.run()
    with mcp_inprocess_tools(orders_server()) as tools:
        remote = run_production(scenario.make_llm(), scenario.task, tools, system=scenario.system,
                                config=scenario.config)
    assert remote.stop_cause is StopCause.END_TURN
    assert canonical(remote.messages) == canonical(local.messages)
    assert "5900.0" in remote.final_text


def test_the_calls_of_one_reply_share_one_connection_and_come_back_in_request_order():
    llm = ScriptedLLM([tool_reply(("calculator", {"expression": "1 + 1"}),
                                  ("get_order", {"order_id": "B456"}),
                                  ("calculator", {"expression": "3 * 3"})), "done"])
    with mcp_inprocess_tools(orders_server()) as tools:
        result = run_production(llm, "t", tools, config=NO_RETRIES)
    assert [e.content for e in executions(result)] == [
        "2", json.dumps(get_demo("orders").make_tools()[0].fn("B456")), "9"]


def test_bad_arguments_are_refused_against_the_listed_schema_before_anything_is_sent():
    server, calls = MCPServer("counting"), []

    @server.tool()
    def get_order(order_id: str) -> str:
        calls.append(order_id)
        return "found"

    llm = ScriptedLLM([tool_reply(("get_order", {"id": "A123"})), "ok"])
    with mcp_inprocess_tools(server) as tools:
        result = run_production(llm, "t", tools, config=NO_RETRIES)
    (e,) = executions(result)
    assert (e.is_error, e.error_kind) == (True, "invalid_input")
    assert "'order_id' is a required property" in e.content
    assert calls == []


def test_a_result_the_server_marks_is_error_is_an_error_result_with_the_servers_text():
    llm = ScriptedLLM([tool_reply(("get_order", {"order_id": "Z999"})), "no such order"])
    with mcp_inprocess_tools(orders_server()) as tools:
        result = run_production(llm, "t", tools, config=NO_RETRIES)
    (e,) = executions(result)
    assert (e.is_error, e.error_kind) == (True, "tool_error")
    assert e.content.startswith("No order with id 'Z999'")
    assert result.stop_cause is StopCause.END_TURN


def test_a_protocol_error_becomes_an_error_result_naming_its_code_and_message():
    async def list_tools(_ctx, _params):
        return types.ListToolsResult(tools=[types.Tool(
            name="lookup", description="Look up.", input_schema={"type": "object"})])

    async def call_tool(_ctx, _params):
        raise MCPError(types.INTERNAL_ERROR, "database offline")

    server = Server("broken", on_list_tools=list_tools, on_call_tool=call_tool)
    llm = ScriptedLLM([tool_reply(("lookup", {})), "the lookup service is down"])
    with mcp_inprocess_tools(server) as tools:
        result = run_production(llm, "t", tools, config=NO_RETRIES)
    (e,) = executions(result)
    assert e.is_error
    assert "protocol error -32603: database offline" in e.content
    assert result.final_text == "the lookup service is down"


def test_a_call_the_server_never_answers_is_a_timeout_result_and_the_run_goes_on():
    start = time.monotonic()
    with mcp_inprocess_tools(orders_server(get_order="hang"), timeout_s=0.5) as tools:
        result = run_production(lookup_then_add(), "t", tools, config=NO_RETRIES)
    hung, added = executions(result)
    assert (hung.is_error, hung.error_kind) == (True, "timeout")
    assert "timed out after 0.5 s" in hung.content
    assert (added.is_error, added.content) == (False, "4")
    assert result.stop_cause is StopCause.END_TURN
    assert time.monotonic() - start < 10


def test_a_timed_out_request_is_cancelled_on_the_server_too():
    cancelled = threading.Event()

    async def list_tools(_ctx, _params):
        return types.ListToolsResult(tools=[types.Tool(
            name="slow", description="Never ends.", input_schema={"type": "object"})])

    async def call_tool(_ctx, _params):
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    server = Server("slow", on_list_tools=list_tools, on_call_tool=call_tool)
    with mcp_inprocess_tools(server, timeout_s=0.3) as tools:
        result = run_production(ScriptedLLM([tool_reply(("slow", {})), "gave up"]), "t", tools,
                                config=NO_RETRIES)
        assert executions(result)[0].error_kind == "timeout"
        assert cancelled.wait(5), "the server's handler was never cancelled"


def test_side_effects_and_approval_are_marked_by_name_from_our_side_not_by_hints():
    with mcp_inprocess_tools(orders_server(), side_effecting={"calculator"},
                             needs_approval={"get_order"}) as tools:
        by_name = {t.name: t for t in tools}
        assert by_name["calculator"].side_effecting and not by_name["get_order"].side_effecting
        assert by_name["get_order"].needs_approval
        result = run_production(lookup_then_add(), "t", tools)
    assert result.stop_cause is StopCause.AWAITING_APPROVAL


def test_true_marks_every_tool_and_the_servers_hints_are_kept_for_reading():
    with MCPConnection.inprocess(orders_server(), needs_approval=True) as conn:
        assert all(t.needs_approval for t in conn.tools)
        assert not any(t.side_effecting for t in conn.tools)
        assert conn.annotations == {"get_order": {"readOnlyHint": True},
                                    "calculator": {"readOnlyHint": True}}
        assert conn.server_name == "orders"


def test_marking_a_tool_the_server_does_not_list_is_a_clear_error():
    conn = MCPConnection.inprocess(orders_server(), side_effecting={"get_ordr"})
    with pytest.raises(ValueError, match="'get_ordr', which MCP server .* does not list; it "
                                         "lists: get_order, calculator"):
        conn.open()
    assert conn.closed


def test_marks_are_a_collection_of_names_not_one_string():
    with pytest.raises(TypeError, match=r"needs_approval=\{'get_order'\}"):
        MCPConnection.inprocess(orders_server(), needs_approval="get_order")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), None, True, "5"])
def test_a_timeout_must_be_a_positive_number_of_seconds(bad):
    with pytest.raises(ValueError, match="timeout_s must be a number of seconds > 0"):
        MCPConnection.inprocess(orders_server(), timeout_s=bad)


def test_a_tool_name_a_model_cannot_call_is_left_out_with_the_reason():
    server = MCPServer("dotted")
    server.add_tool(lambda: "x", name="orders.get")
    server.add_tool(lambda: "y", name="orders_list")
    with MCPConnection.inprocess(server) as conn:
        assert [t.name for t in conn.tools] == ["orders_list"]
        assert "tool name 'orders.get' must be 1-64 letters" in conn.refused["orders.get"]


def test_a_tool_called_after_its_connection_closed_is_an_error_result():
    with mcp_inprocess_tools(orders_server()) as tools:
        pass
    result = run_production(ScriptedLLM([tool_reply(("get_order", {"order_id": "A123"})), "x"]),
                            "t", tools, config=NO_RETRIES)
    (e,) = executions(result)
    assert e.is_error and "is closed, so its tools cannot be called any more" in e.content


def test_result_text_joins_text_and_describes_what_is_not_text():
    result = types.CallToolResult(content=[
        types.TextContent(text="total: 5900"),
        types.ImageContent(data="aGVsbG8=", mime_type="image/png"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///r.txt",
                                                                   text="receipt"))])
    assert mcp_result_text(result) == ("total: 5900\n[image/png image, 8 base64 characters, not "
                                   "shown]\nreceipt")
    structured = types.CallToolResult(content=[], structured_content={"a": 1})
    assert mcp_result_text(structured) == '{"a": 1}'
    assert mcp_result_text(types.CallToolResult(content=[])) == "(no output)"


def test_an_http_url_must_start_with_http():
    with pytest.raises(ValueError, match="starts with http:// or https://"):
        MCPConnection.http("127.0.0.1:8000/mcp")


# ---------------------------------------------------------------- stdio subprocesses

def test_a_stdio_server_runs_the_order_task_and_is_stopped_when_the_block_ends():
    scenario, before = get_demo("orders"), children()
    with mcp_stdio_tools(SERVE[0], SERVE[1:]) as tools:
        (server,) = children() - before
        result = run_production(scenario.make_llm(), scenario.task, tools, system=scenario.system,
                                config=scenario.config)
    assert result.stop_cause is StopCause.END_TURN and "5900.0" in result.final_text
    assert not alive(server), "the server process (or its zombie) is still there"


def test_a_hung_stdio_server_is_a_timeout_result_and_its_process_is_cleaned_up():
    before, start = children(), time.monotonic()
    with MCPConnection.stdio(SERVE[0], [*SERVE[1:], "--hang", "get_order"],
                             timeout_s=0.5) as conn:
        (server,) = children() - before
        result = run_production(lookup_then_add(), "t", conn.tools, config=NO_RETRIES)
        deadline = time.monotonic() + 5  # the cancellation crosses the pipe to the server
        while "cancelled the call of get_order" not in conn.server_stderr():
            assert time.monotonic() < deadline, conn.server_stderr()
            time.sleep(0.05)
    hung, added = executions(result)
    assert (hung.error_kind, added.content) == ("timeout", "4")
    assert result.stop_cause is StopCause.END_TURN
    assert not alive(server)
    assert time.monotonic() - start < 30


def test_a_stdio_server_that_dies_mid_run_gives_error_results_not_a_hang():
    before, start = children(), time.monotonic()
    with MCPConnection.stdio(SERVE[0], [*SERVE[1:], "--crash", "get_order"]) as conn:
        (server,) = children() - before
        result = run_production(lookup_then_add(), "t", conn.tools, config=NO_RETRIES)
    crashed, after = executions(result)
    for e in (crashed, after):
        assert e.is_error and "is gone: the connection closed" in e.content
    assert "Its stderr ends: primer-orders: crashing on purpose on a call of get_order" in \
        crashed.content
    assert result.stop_cause is StopCause.END_TURN
    assert not alive(server)
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_a_frozen_stdio_server_times_out_and_is_killed_when_the_block_ends():
    before = children()
    with mcp_stdio_tools(SERVE[0], SERVE[1:], timeout_s=0.5) as tools:
        (server,) = children() - before
        os.kill(server, signal.SIGSTOP)  # it reads nothing and ignores SIGTERM from now on
        result = run_production(lookup_then_add(), "t", tools, config=NO_RETRIES)
        start = time.monotonic()
    assert [e.error_kind for e in executions(result)] == ["timeout", "timeout"]
    assert not alive(server)
    assert time.monotonic() - start < 15


@pytest.mark.slow
def test_an_unclosed_connection_neither_hangs_interpreter_exit_nor_leaves_its_server():
    # The server is frozen (SIGSTOP), so it would not exit on its own when our end of its
    # stdin closes: only the connection's exit hook can stop it.
    marker = f"primer-test-{os.getpid()}-{time.monotonic_ns()}"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from primer.providers.mcp import MCPConnection
        conn = MCPConnection.stdio(sys.executable, {SERVE[1:]!r},
                                   env={{"PRIMER_MARK": {marker!r}}}, timeout_s=0.5).open()
        (server,) = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat")
                     if int(p.read_text().rpartition(")")[2].split()[1]) == os.getpid()]
        os.kill(server, signal.SIGSTOP)
        try:
            conn.tools[0](order_id="A123")
        except Exception as e:
            print(type(e).__name__)
    """)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ToolTimeout"
    assert time.monotonic() - start < 30
    assert not [p for p in Path("/proc").glob("[0-9]*/environ") if _has(p, marker)]


def _has(environ: Path, marker: str) -> bool:
    try:
        return marker.encode() in environ.read_bytes()
    except OSError:
        return False


def test_a_command_that_does_not_exist_is_a_clear_connection_error():
    with pytest.raises(MCPConnectionError, match="could not connect to MCP server "
                                                 "no-such-mcp-server: .*No such file"):
        with mcp_stdio_tools("no-such-mcp-server"):
            pass


def test_a_server_that_exits_at_once_is_a_connection_error_quoting_its_stderr():
    code = "import sys; sys.exit('config file missing')"
    with pytest.raises(MCPConnectionError, match="Its stderr ends: config file missing"):
        with mcp_stdio_tools(sys.executable, ["-c", code], connect_timeout_s=20):
            pass


def test_a_server_that_never_answers_is_a_connection_error_within_the_bound():
    before, start = children(), time.monotonic()
    with pytest.raises(MCPConnectionError, match="did not answer within 0.5 s"):
        with mcp_stdio_tools(sys.executable, ["-c", "import time; time.sleep(60)"],
                             connect_timeout_s=0.5):
            pass
    assert time.monotonic() - start < 15
    assert not [p for p in children() - before if alive(p)]


# ---------------------------------------------------------------- Streamable HTTP

@pytest.fixture
def http_server():
    """Start ``mcp-serve orders --http 0`` with extra arguments; yield its URL; stop it."""
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> str:
        proc = subprocess.Popen([*SERVE, "--http", "0", *extra], cwd=ROOT, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(proc)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stderr.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            pytest.fail("the HTTP server did not announce its URL within 30 s")
        assert " at http://127.0.0.1:" in line, line
        return line.rsplit(" at ", 1)[1].strip()

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()


def test_an_http_server_runs_the_order_task(http_server):
    scenario = get_demo("orders")
    with mcp_http_tools(http_server()) as tools:
        result = run_production(scenario.make_llm(), scenario.task, tools, system=scenario.system,
                                config=scenario.config)
    assert canonical(result.messages) == canonical(scenario.run().messages)


def test_a_hung_http_server_is_a_timeout_result_and_the_run_goes_on(http_server):
    with mcp_http_tools(http_server("--hang", "get_order"), timeout_s=0.5) as tools:
        result = run_production(lookup_then_add(), "t", tools, config=NO_RETRIES)
    assert [e.error_kind for e in executions(result)] == ["timeout", None]


def test_an_http_server_that_dies_mid_run_gives_error_results_not_a_hang(http_server):
    start = time.monotonic()
    with mcp_http_tools(http_server("--crash", "get_order")) as tools:
        result = run_production(lookup_then_add(), "t", tools, config=NO_RETRIES)
    for e in executions(result):
        assert e.is_error and "is gone: the connection closed" in e.content
    assert result.stop_cause is StopCause.END_TURN
    assert time.monotonic() - start < 30
