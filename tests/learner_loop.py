"""A coding-round loop written from lesson 14's instructions alone (not from the solution)."""

import json


def my_loop(model, task, tools, *, max_steps, token_budget):
    messages = [{"role": "user", "content": task}]
    used = 0
    seen = {}
    last = max_steps
    for step in range(1, last + 1):
        reply = model(messages, tools.definitions)
        messages.append({"role": "assistant", "content": reply["content"]})
        used += reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"]
        if reply["stop_reason"] == "end_turn":
            text = " ".join(b["text"] for b in reply["content"] if b["type"] == "text")
            return {"answer": text, "stop_cause": "end_turn"}
        if reply["stop_reason"] in ("max_tokens", "refusal"):
            return {"answer": None, "stop_cause": reply["stop_reason"]}
        if used > token_budget:
            return {"answer": None, "stop_cause": "token_budget"}
        uses = [b for b in reply["content"] if b["type"] == "tool_use"]
        for u in uses:
            k = (u["name"], json.dumps(u["input"], sort_keys=True))
            seen[k] = seen.get(k, 0) + 1
            if seen[k] >= 3:
                return {"answer": None, "stop_cause": "loop_detected"}
        if step == last:
            break  # the step limit: no model call would read these tools' results
        results = []
        for u in uses:
            if u["name"] not in tools:
                results.append({"type": "tool_result", "tool_use_id": u["id"], "is_error": True,
                                "content": f"no tool {u['name']}; tools: {', '.join(tools)}"})
                continue
            try:
                out = tools[u["name"]](**u["input"])
                results.append({"type": "tool_result", "tool_use_id": u["id"],
                                "content": json.dumps(out)})
            except Exception as e:
                results.append({"type": "tool_result", "tool_use_id": u["id"], "is_error": True,
                                "content": f"{type(e).__name__}: {e}"})
        messages.append({"role": "user", "content": results})
    return {"answer": None, "stop_cause": "max_steps"}
