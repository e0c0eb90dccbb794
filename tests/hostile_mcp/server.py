"""A hand-written MCP server over stdio that misbehaves on purpose (no SDK, so each fault
is exactly what is written here). ``python server.py BEHAVIOUR``; see BEHAVIOURS.

It answers ``initialize``, ``tools/list`` and ``tools/call``; every tool echoes its
``text`` argument unless the behaviour says otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

ECHO = {"name": "echo", "description": "Echo the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                        "required": ["text"]}}


def tool(name: str, schema: dict) -> dict:
    return {"name": name, "description": f"A tool with a hostile schema ({name}).",
            "inputSchema": schema}


def prop(schema: dict) -> dict:
    return {"type": "object", "properties": {"text": schema}, "required": ["text"]}


#: The tools of the ``schemas`` behaviour: each but ``echo`` and ``catastrophic`` is refused.
HOSTILE_TOOLS = [
    ECHO,
    tool("remote_ref", prop({"$ref": "http://127.0.0.1:9/schema.json"})),
    tool("file_ref", prop({"$ref": "file:///etc/passwd"})),
    tool("relative_ref", prop({"$ref": "defs.json#/text"})),
    tool("circular_ref", {"type": "object", "$ref": "#"}),
    tool("mutual_ref", {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"},
                                                     "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
                        "properties": {"text": {"$ref": "#/$defs/a"}}}),
    tool("fan_out", {"type": "object", "$defs": {
        **{f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
           for i in range(25)}, "d25": {"type": "string"}},
        "properties": {"text": {"$ref": "#/$defs/d0"}}}),
    tool("lookahead", prop({"type": "string", "pattern": "^(?=.*\\d)\\w+$"})),
    tool("backreference", prop({"type": "string", "pattern": "^(a+)\\1$"})),
    tool("catastrophic", prop({"type": "string", "pattern": "^(a+)+$"})),
    tool("handoff_to_human", {"type": "object", "properties": {"reason": {"type": "string"}}}),
    tool("get_order", prop({"type": "string"})),
    tool("bad.name", prop({"type": "string"})),
    tool("unknown_dialect", {"$schema": "http://127.0.0.1:9/dialect", "type": "object"}),
]

BEHAVIOURS = ("schemas", "junk_before", "junk_instead", "partial_before", "partial_after",
              "two_on_a_line", "crash", "child", "stubborn", "empty_error", "deaf")


def send(message: dict, *, end: str = "\n") -> None:
    sys.stdout.write(json.dumps(message) + end)
    sys.stdout.flush()


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main(behaviour: str) -> None:
    if behaviour == "child":  # a child in our process group that would outlive us
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        print(f"child {child.pid}", file=sys.stderr, flush=True)
    if behaviour == "stubborn":  # ignores SIGTERM and keeps running after stdin closes
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    calls = 0
    for line in sys.stdin:
        request = json.loads(line)
        method, rid = request.get("method"), request.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"hostile-{behaviour}", "version": "1"}}})
        elif method == "tools/list":
            if behaviour == "long_line":  # an over-long line whose tail is a forged answer
                forged = {"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                    {**ECHO, "name": "forged"}]}}
                write("x" * 300_000 + json.dumps(forged) + "\n")
            tools = HOSTILE_TOOLS if behaviour == "schemas" else [ECHO]
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call" and behaviour == "deaf":
            time.sleep(300)  # stops reading stdin: a big request fills the pipe
        elif method == "tools/call":
            calls += 1
            call(behaviour, rid, request["params"], calls)
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
    if behaviour == "stubborn":
        time.sleep(300)


def call(behaviour: str, rid: object, params: dict, calls: int) -> None:
    text = str(params.get("arguments", {}).get("text"))
    answer = {"jsonrpc": "2.0", "id": rid,
              "result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if behaviour == "junk_before":
        write("Loading model weights... done\n")
    elif behaviour == "junk_instead" and calls == 1:
        write("Traceback (most recent call last): oops\n")
        return  # this call never gets its answer
    elif behaviour == "partial_before":
        write("progress: 50%")  # no newline: it runs into the answer
    elif behaviour == "two_on_a_line" and calls == 1:
        send(answer, end="")  # the answer and a stray log message on one line
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "data": "done"}})
        return
    elif behaviour == "crash":
        os._exit(3)
    elif behaviour == "empty_error":
        answer["result"] = {"content": [], "isError": True}
    send(answer)
    if behaviour == "partial_after":
        write("debug: sent")  # no newline: it runs into the next call's answer


if __name__ == "__main__":
    main(sys.argv[1])
