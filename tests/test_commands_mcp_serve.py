"""``python -m primer mcp-serve``: the order world over stdio or HTTP; usage errors in one line."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from primer.__main__ import main
from primer.commands.mcp_serve import stdio_notice

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_list_names_the_order_world(capsys):
    assert main(["mcp-serve", "--list"]) == 0
    assert capsys.readouterr().out.startswith("orders")


@pytest.mark.parametrize("argv, says", [
    (["mcp-serve"], "give a WORLD to serve; choose one of orders"),
    (["mcp-serve", "shop"], "unknown world 'shop'; choose one of orders"),
    (["mcp-serve", "orders", "--hang", "refund"], "fault on 'refund', which is not one of"),
    (["mcp-serve", "orders", "--http", "70000"], "--http takes a port from 0 to 65535"),
])
def test_a_usage_error_is_one_line_and_exit_code_2(capsys, argv, says):
    assert says in one_line_error(capsys, argv)


def test_a_port_in_use_is_one_line_and_exit_code_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(capsys, ["mcp-serve", "orders", "--http", str(port)])
    assert line.startswith(f"mcp-serve: cannot serve on 127.0.0.1 port {port}: ")


def test_stdio_mode_prints_only_protocol_on_stdout_and_exits_0_when_stdin_closes():
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    done = subprocess.run([sys.executable, "-m", "primer", "mcp-serve", "orders"], cwd=ROOT,
                          input=json.dumps(initialize) + "\n", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    reply = json.loads(line)
    assert reply["id"] == 1
    assert reply["result"]["serverInfo"]["name"] == "primer-orders"
    assert "serving orders" not in done.stderr  # stdin is no terminal: no notice


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
@pytest.mark.parametrize("stop", ["ctrl-d", "ctrl-c"])
def test_on_a_terminal_stdio_mode_says_on_stderr_it_is_waiting_and_ctrl_d_or_c_stops_it(stop):
    controller, terminal = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "primer", "mcp-serve", "orders"], cwd=ROOT,
                            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(terminal)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "nothing on stderr within 60 s"
        line = proc.stderr.readline().decode()
        assert line == stdio_notice("orders") + "\n"
        assert "Ctrl-D or Ctrl-C stops it" in line and "on stdio" in line
        if stop == "ctrl-d":
            os.write(controller, b"\x04")  # end of input on the terminal
            assert proc.wait(timeout=30) == 0
        else:
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
            assert proc.wait(timeout=30) == 130
            assert proc.stderr.read().decode() == "mcp-serve: stopped (Ctrl-C)\n"
        assert proc.stdout.read() == b""  # stdout stays the protocol's alone
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
        proc.stdout.close()
        proc.stderr.close()


def readme_section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def test_the_readme_lists_mcp_serve_among_the_commands():
    assert "python -m primer mcp-serve orders " in readme_section("Other commands")


def test_the_readme_says_how_to_connect_claude_desktop_and_the_inspector():
    text = readme_section("Tools from an MCP server")
    assert '"args": ["-m", "primer", "mcp-serve", "orders"]' in text
    assert "npx @modelcontextprotocol/inspector .venv/bin/python -m primer mcp-serve orders" \
        in text


def test_the_readmes_mcp_example_prints_what_the_readme_says(capsys):
    text = readme_section("Tools from an MCP server")
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_mcp_example"})  # noqa: S102
    shown = re.search(r"prints `([^`]+)`", text).group(1)
    assert capsys.readouterr().out == shown + "\n"
