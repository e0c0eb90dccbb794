#!/usr/bin/env python3
"""Write primer/data/diagnose_gallery/*.json: conversations the course's own runs did not make.

Each file is ``{"expected", "source", "tools", "messages"}`` (plus ``usage`` or ``system``
where the dump had them). ``expected`` is the verdict a person gives the conversation:
``"healthy"`` or the failure mode's name; ``"undetectable": "<why>"`` marks a case whose
fault ``diagnose`` cannot see from the record (it must then say it found no known failure
mode, not that the run is healthy). The verdicts were written before the detectors were
changed for this gallery.

Three dumps come from other frameworks and are converted here the way a user would, with
the small converters below: the OpenAI Agents SDK's ``result.to_input_list()`` items, and
LangGraph / LangChain message lists (``HumanMessage``, ``AIMessage.tool_calls``,
``ToolMessage``) dumped with ``message.model_dump()``. The Anthropic SDK's tool runner
keeps Messages-API messages already (``message.model_dump()``), so those are saved as they
are, extra fields included.

Usage: python3 scripts/make_diagnose_gallery.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "primer" / "data" / "diagnose_gallery"

# ---------------------------------------------------------------- building blocks


def tool_def(tool_name: str, /, **props: str) -> dict[str, Any]:
    return {"name": tool_name, "description": f"{tool_name} (see the service's docs).",
            "input_schema": {"type": "object",
                             "properties": {k: {"type": v} for k, v in props.items()},
                             "required": list(props)}}


class Convo:
    """A Messages-API conversation built call by call; ids are toolu_<n>."""

    def __init__(self, task: str) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        self.n = 0

    def call(self, *calls: tuple[str, dict[str, Any]], text: str = "") -> list[str]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        ids = []
        for name, inp in calls:
            self.n += 1
            ids.append(f"toolu_{self.n:02d}")
            blocks.append({"type": "tool_use", "id": ids[-1], "name": name, "input": inp})
        self.messages.append({"role": "assistant", "content": blocks,
                              "stop_reason": "tool_use"})
        return ids

    def results(self, ids: list[str], *contents: Any, error: bool = False) -> None:
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i,
             "content": c if isinstance(c, str) else json.dumps(c), "is_error": error}
            for i, c in zip(ids, contents, strict=True)]})

    def step(self, name: str, inp: dict[str, Any], result: Any, *, error: bool = False,
             text: str = "") -> None:
        self.results(self.call((name, inp), text=text), result, error=error)

    def answer(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}],
                              "stop_reason": "end_turn"})


# ---------------------------------------------------------------- converters


def from_openai_agents(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI Agents SDK ``to_input_list()`` items -> Messages-API messages."""
    out: list[dict[str, Any]] = []

    def push(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role and isinstance(out[-1]["content"], list):
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for it in items:
        kind = it.get("type", "message")
        if kind == "message" and it["role"] == "user":
            out.append({"role": "user", "content": it["content"]})
        elif kind == "message":
            text = "".join(c["text"] for c in it["content"] if c["type"] == "output_text")
            push("assistant", {"type": "text", "text": text})
        elif kind == "function_call":
            push("assistant", {"type": "tool_use", "id": it["call_id"], "name": it["name"],
                               "input": json.loads(it["arguments"])})
        elif kind == "function_call_output":
            push("user", {"type": "tool_result", "tool_use_id": it["call_id"],
                          "content": it["output"]})
    return out


def from_langchain(dumped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """LangGraph / LangChain messages (``model_dump()``) -> Messages-API messages."""
    out: list[dict[str, Any]] = []
    for m in dumped:
        if m["type"] == "human":
            out.append({"role": "user", "content": m["content"]})
        elif m["type"] == "ai":
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": m["content"]}] if m["content"] else [])
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                       for c in m.get("tool_calls", [])]
            out.append({"role": "assistant", "content": blocks})
        elif m["type"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                     "content": m["content"], "is_error": m.get("status") == "error"}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out


# ---------------------------------------------------------------- the gallery

GALLERY: dict[str, dict[str, Any]] = {}


def add(name: str, expected: str, source: str, convo: Convo | list[dict[str, Any]],
        tools: list[dict[str, Any]], **extra: Any) -> None:
    messages = convo.messages if isinstance(convo, Convo) else convo
    GALLERY[name] = {"expected": expected, "source": source, **extra, "tools": tools,
                     "messages": messages}


SHIP = [tool_def("find_order", email="string"), tool_def("get_shipment", order_id="string")]


def healthy_dates() -> None:
    for name, answer in (("healthy-date-day-month", "Your parcel (order 7731-X) ships with "
                          "DHL and should arrive on 4 March 2026."),
                         ("healthy-date-month-day", "Order 7731-X is with DHL; expected "
                          "delivery is March 4, 2026.")):
        c = Convo("When will my parcel arrive? My email is kim@example.com")
        c.step("find_order", {"email": "kim@example.com"}, {"order_id": "7731-X"})
        c.step("get_shipment", {"order_id": "7731-X"},
               {"carrier": "DHL", "eta": "2026-03-04", "status": "in_transit"})
        c.answer(answer)
        add(name, "healthy", "hand-written: 3 calls, the tool's ISO date written out in the "
            "answer", c, SHIP)


def healthy_reformatted() -> None:
    c = Convo("How much is invoice INV-88 and in what currency?")
    c.step("get_invoice", {"invoice_id": "INV-88"}, {"amount_cents": 129900, "currency": "USD"})
    c.answer("Invoice INV-88 is $1,299.00 (US dollars).")
    add("healthy-currency-cents", "healthy", "hand-written: cents from the tool, dollars in "
        "the answer", c, [tool_def("get_invoice", invoice_id="string")])

    c = Convo("How far is the depot from the Lyon store?")
    c.step("route", {"origin": "Lyon store", "destination": "depot"},
           {"distance_m": 4200, "duration_s": 540})
    c.answer("The depot is 4.2 km away, about 9 minutes by car.")
    add("healthy-units-metres-km", "healthy", "hand-written: metres and seconds from the "
        "tool, km and minutes in the answer", c,
        [tool_def("route", origin="string", destination="string")])

    c = Convo("What VAT rate applies to books in Ireland?")
    c.step("vat_rate", {"country": "IE", "category": "books"}, {"rate": 0.09})
    c.answer("Books in Ireland carry a reduced VAT rate of 9%.")
    add("healthy-rate-percent", "healthy", "hand-written: a rate 0.09 answered as 9%", c,
        [tool_def("vat_rate", country="string", category="string")])

    c = Convo("What is our EUR balance, roughly?")
    c.step("get_balance", {"currency": "EUR"}, {"balance": 1234.5678})
    c.answer("The EUR balance is about €1,234.57.")
    add("healthy-rounded-amount", "healthy", "hand-written: an amount rounded to cents", c,
        [tool_def("get_balance", currency="string")])

    c = Convo("How long did last night's backup take?")
    c.step("job_status", {"job": "nightly-backup"}, {"state": "done", "elapsed_s": 5400})
    c.answer("Last night's backup finished after 1.5 hours.")
    add("healthy-seconds-hours", "healthy", "hand-written: seconds answered as hours", c,
        [tool_def("job_status", job="string")])

    c = Convo("How many tickets does acme have open?")
    c.step("list_tickets", {"customer": "acme", "state": "open"},
           {"tickets": [{"id": "T-1"}, {"id": "T-7"}, {"id": "T-9"}]})
    c.answer("Acme has 3 open tickets: T-1, T-7 and T-9.")
    add("healthy-count-of-list", "healthy", "hand-written: the answer counts a list", c,
        [tool_def("list_tickets", customer="string", state="string")])


def healthy_shapes() -> None:
    c = Convo("Weather in Oslo, Lima and Pune right now?")
    ids = c.call(("weather", {"city": "Oslo"}), ("weather", {"city": "Lima"}),
                 ("weather", {"city": "Pune"}), text="Checking all three at once.")
    c.results(ids, {"temp_c": -3, "sky": "snow"}, {"temp_c": 19, "sky": "cloudy"},
              {"temp_c": 31, "sky": "clear"})
    c.answer("Oslo: -3 °C and snowing. Lima: 19 °C, cloudy. Pune: 31 °C, clear.")
    add("healthy-parallel-calls", "healthy", "hand-written: three calls in one turn", c,
        [tool_def("weather", city="string")])

    c = Convo("Summarise the 12-page audit report.")
    for page in range(1, 13):
        c.step("read_page", {"doc": "audit-2025", "page": page},
               f"Page {page} of 12. Section {page}: finding F{page} about control C{page}.")
    c.answer("The audit's 12 pages list one finding per section, F1 to F12, each tied to a "
             "control; none is rated critical.")
    add("healthy-long-productive", "healthy", "hand-written: 12 calls, each reading a new "
        "page", c, [tool_def("read_page", doc="string", page="integer")])

    c = Convo("Cancel order B-19.")
    c.step("cancel_order", {"order": "B-19"}, "unknown field 'order'; expected 'order_id'",
           error=True)
    c.step("cancel_order", {"order_id": "B-19"}, {"cancelled": True, "refund": "pending"})
    c.answer("Order B-19 is cancelled; the refund is pending.")
    add("healthy-recovers-from-error", "healthy", "hand-written: one is_error result, fixed "
        "on the next call", c, [tool_def("cancel_order", order_id="string")])

    c = Convo("Find the ticket about the broken login page.")
    c.step("search_tickets", {"query": "login broken"}, {"results": []})
    c.step("search_tickets", {"query": "sign-in error"},
           {"results": [{"id": "T-412", "title": "Sign-in page returns 500"}]})
    c.answer("That is T-412, 'Sign-in page returns 500'.")
    add("healthy-empty-then-found", "healthy", "hand-written: one empty search, refined, "
        "found", c, [tool_def("search_tickets", query="string")])

    c = Convo("Does bob@example.com have any open orders?")
    c.step("search_orders", {"email": "bob@example.com", "state": "open"}, {"orders": []})
    c.answer("No, bob@example.com has no open orders.")
    add("healthy-empty-is-the-answer", "healthy", "hand-written: an empty result that is "
        "the answer", c, [tool_def("search_orders", email="string", state="string")])


def from_frameworks() -> None:
    # Anthropic SDK tool runner: the messages as message.model_dump() gives them
    task = "What's the status of PR 4512 in acme/web?"
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    msgs.append({"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
                 "content": [{"type": "tool_use", "id": "toolu_A1", "name": "get_pr",
                              "input": {"repo": "acme/web", "number": 4512}}],
                 "stop_reason": "tool_use", "stop_sequence": None,
                 "usage": {"input_tokens": 610, "output_tokens": 48}})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_A1",
                 "content": [{"type": "text", "text": json.dumps(
                     {"state": "open", "checks": "passing", "approvals": 1,
                      "updated_at": "2026-01-15T09:12:00Z"})}]}]})
    msgs.append({"id": "msg_02", "type": "message", "role": "assistant", "model": "claude-x",
                 "content": [{"type": "text", "text": "PR 4512 is open, its checks pass and "
                              "it has 1 approval (last updated 15 January 2026)."}],
                 "stop_reason": "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 742, "output_tokens": 31}})
    add("anthropic-tool-runner-healthy", "healthy", "Anthropic SDK tool runner, messages "
        "saved with model_dump() (no conversion)", msgs,
        [tool_def("get_pr", repo="string", number="integer")])

    # Anthropic SDK tool runner, a tool that returns its failures as text
    msgs = [{"role": "user", "content": "Create an invoice for customer C-204 for 3 seats."}]
    for k, cust in enumerate(["C-204", "C204", "c-204", "204"], 1):
        msgs.append({"id": f"msg_{k}", "type": "message", "role": "assistant",
                     "model": "claude-x", "stop_reason": "tool_use",
                     "content": [{"type": "tool_use", "id": f"toolu_B{k}",
                                  "name": "create_invoice",
                                  "input": {"customer_id": cust, "seats": 3}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result",
                     "tool_use_id": f"toolu_B{k}",
                     "content": f"Error: customer '{cust}' not found in billing"}]})
    add("anthropic-tool-runner-errors-as-text", "errors_as_text", "Anthropic SDK tool "
        "runner: the tool catches its exception and returns the message as text (no "
        "is_error); the run was stopped after 4 calls", msgs,
        [tool_def("create_invoice", customer_id="string", seats="integer")])

    # OpenAI Agents SDK: result.to_input_list()
    items = [
        {"role": "user", "content": "Convert 250 GBP to JPY at today's rate."},
        {"type": "function_call", "call_id": "call_1", "name": "fx_rate",
         "arguments": json.dumps({"base": "GBP", "quote": "JPY"})},
        {"type": "function_call_output", "call_id": "call_1",
         "output": json.dumps({"rate": 191.42, "as_of": "2026-02-10"})},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "At 191.42 JPY per GBP (rate of 10 "
                      "February 2026), 250 GBP is ¥47,855."}]},
    ]
    add("openai-agents-healthy", "healthy", "OpenAI Agents SDK to_input_list(), converted "
        "with from_openai_agents()", from_openai_agents(items),
        [tool_def("fx_rate", base="string", quote="string")])

    items = [{"role": "user", "content": "Geocode these five store addresses."}]
    for k, q in enumerate(["12 Rue Oberkampf, Paris", "12 rue Oberkampf Paris",
                           "Rue Oberkampf 12, 75011", "12 Oberkampf, Paris",
                           "12 Rue Oberkampf"], 1):
        items.append({"type": "function_call", "call_id": f"call_{k}", "name": "geocode",
                      "arguments": json.dumps({"address": q})})
        items.append({"type": "function_call_output", "call_id": f"call_{k}",
                      "output": "HTTP 429 Too Many Requests: quota exceeded, retry later"})
    add("openai-agents-rate-limited", "rate_limited", "OpenAI Agents SDK to_input_list(), "
        "converted with from_openai_agents(): a 429 returned as the tool's output, retried "
        "with reworded addresses", from_openai_agents(items),
        [tool_def("geocode", address="string")])

    # LangGraph: create_react_agent's state["messages"], model_dump() of each
    lc = [{"type": "human", "content": "Is SKU KB-220 in stock in Berlin?"},
          {"type": "ai", "content": "", "tool_calls": [
              {"name": "stock_level", "args": {"sku": "KB-220", "site": "BER"},
               "id": "call_x1"}]},
          {"type": "tool", "content": json.dumps({"sku": "KB-220", "site": "BER",
                                                  "on_hand": 14, "reserved": 2}),
           "tool_call_id": "call_x1", "status": "success"},
          {"type": "ai", "content": "Yes: 14 on hand in Berlin, 2 of them reserved, so 12 "
           "can ship.", "tool_calls": []}]
    add("langgraph-healthy", "healthy", "LangGraph message list (model_dump()), converted "
        "with from_langchain(); the answer computes 14 - 2", from_langchain(lc),
        [tool_def("stock_level", sku="string", site="string")])

    lc = [{"type": "human", "content": "Which warehouse ships order 5512 for customer "
           "Dana Ruiz?"}]
    pairs = [("find_customer", {"name": "Dana Ruiz"}), ("list_orders", {"customer_id": "C-88"}),
             ("find_customer", {"name": "D. Ruiz"}), ("list_orders", {"customer_id": "C88"}),
             ("find_customer", {"name": "Ruiz, Dana"}), ("list_orders", {"customer_id": "c-88"}),
             ("find_customer", {"name": "dana ruiz"}), ("list_orders", {"customer_id": "88"})]
    for k, (name, args) in enumerate(pairs, 1):
        lc.append({"type": "ai", "content": "", "tool_calls": [
            {"name": name, "args": args, "id": f"call_{k}"}]})
        result = ({"customers": [{"id": "C-88", "name": "Dana Ruiz"}]}
                  if name == "find_customer" else {"orders": []})
        lc.append({"type": "tool", "content": json.dumps(result), "tool_call_id": f"call_{k}",
                   "status": "success"})
    add("langgraph-alternating", "alternation", "LangGraph message list, converted with "
        "from_langchain(): two lookups alternate with reworded inputs, the orders list "
        "always empty; stopped by the graph's recursion limit", from_langchain(lc),
        [tool_def("find_customer", name="string"), tool_def("list_orders",
                                                            customer_id="string")])

    lc = [{"type": "human", "content": "Refund order 77 for Sam."},
          {"type": "ai", "content": "", "tool_calls": [
              {"name": "get_order", "args": {"order_id": "77"}, "id": "call_r1"}]},
          {"type": "ai", "content": "The refund for order 77 is done.", "tool_calls": []}]
    add("langgraph-missing-tool-message", "unanswered_tool_use", "LangGraph message list, "
        "converted with from_langchain(): the ToolMessage was dropped when the state was "
        "trimmed", from_langchain(lc), [tool_def("get_order", order_id="string")])


def stuck() -> None:
    tools = [tool_def("get_price", sku="string")]
    c = Convo("What does SKU X-1 cost?")
    for _ in range(5):
        c.step("get_price", {"sku": "X-1"}, {"sku": "X-1", "price": 19.99, "currency": "EUR"},
               text="Let me double-check the price.")
    add("identical-repeats", "repeats", "hand-written: the same call 5 times, stopped from "
        "outside", c, tools)

    tools = [tool_def("lookup_customer", email="string"),
             tool_def("get_orders", customer_id="string")]
    c = Convo("List the orders of jo@example.com.")
    for k in range(5):
        c.step("lookup_customer", {"email": ["jo@example.com", "Jo@example.com",
                                             "jo@example.com ", "JO@EXAMPLE.COM",
                                             "jo@example.org"][k]},
               {"customer_id": "CU-5"})
        c.step("get_orders", {"customer_id": ["CU-5", "CU5", "cu-5", "5", "CU-05"][k]},
               {"orders": []})
    add("alternating-empty-orders", "alternation", "hand-written, the issue's case: 10 "
        "calls, two lookups alternating with slightly changed inputs, orders always "
        "{\"orders\": []}", c, tools)

    tools = [tool_def("search_flights", origin="string", destination="string", date="string")]
    c = Convo("Find me a flight from Porto to Riga on 2026-05-02.")
    for o, d, day in (("OPO", "RIX", "2026-05-02"), ("Porto", "Riga", "2026-05-02"),
                      ("OPO", "RIX", "02/05/2026"), ("LPPR", "EVRA", "2026-05-02"),
                      ("OPO", "RIX", "2026-5-2"), ("Porto", "RIX", "May 2 2026")):
        c.step("search_flights", {"origin": o, "destination": d, "date": day},
               {"flights": []})
    add("same-empty-result", "empty_results", "hand-written: six searches, each reworded, "
        "each {\"flights\": []}; the conversation ends on the last result", c, tools)

    c = Convo("Find the contract signed with Nordwind.")
    for q in ("Nordwind contract", "Nordwind GmbH", "contract Nordwind signed",
              "Nordwind agreement", "NW contract", "Nordwind 2025", "Nord wind"):
        c.step("search_docs", {"query": q}, {"hits": [], "total": 0})
    c.answer("I could not find a contract with Nordwind.")
    add("empty-results-then-gives-up", "empty_results", "hand-written: seven empty "
        "searches before giving up", c, [tool_def("search_docs", query="string")])

    c = Convo("Update the shipping address of order 9001.")
    for addr in ("5 Elm St", "5 Elm Street", "5 Elm St.", "Five Elm Street"):
        c.step("update_address", {"order_id": "9001", "address": addr},
               {"error": "database connection refused", "code": 503})
    add("errors-as-json-text", "errors_as_text", "hand-written: the tool returns "
        "{\"error\": ...} as a normal result (no is_error), 4 times", c,
        [tool_def("update_address", order_id="string", address="string")])

    c = Convo("Translate the release notes into German.")
    for chunk in (1, 1, 2, 2, 3):
        c.step("translate", {"chunk": chunk, "lang": "de"},
               {"status": 429, "message": "rate limit exceeded, retry after 30s"})
    add("rate-limit-json", "rate_limited", "hand-written: HTTP 429 in the result body, "
        "retried at once", c, [tool_def("translate", chunk="integer", lang="string")])

    c = Convo("Post the weekly summary to #ops.")
    for k in range(4):
        c.step("post_message", {"channel": "#ops", "text": f"Weekly summary (attempt {k + 1})"},
               "Too Many Requests. Please slow down.")
    add("rate-limit-plain-text", "rate_limited", "hand-written: 'Too Many Requests' as plain "
        "text, the message reworded each time", c,
        [tool_def("post_message", channel="string", text="string")])

    c = Convo("Why did the nightly job fail? Check the logs.")
    usage = []
    for k in range(1, 9):
        c.step("read_log", {"job": "nightly", "offset": k * 500},
               f"[log lines {k * 500}-{k * 500 + 499}] " + "INFO step ok; " * 60)
        usage.append({"input_tokens": 2_000 + 3_000 * k, "output_tokens": 60})
    add("growing-context", "runaway_cost", "hand-written with the usage the API reported: "
        "8 calls, each re-sending every log chunk read so far, no answer", c,
        [tool_def("read_log", job="string", offset="integer")], usage=usage)

    c = Convo("What is the balance of account 301?")
    c.step("get_account", {"account_id": "301"}, {"balance": 412.50, "currency": "USD"})
    c.answer("Account 301 has a balance of $421.50.")
    add("wrong-number", "silent_wrong_answer", "hand-written: digits swapped in the answer",
        c, [tool_def("get_account", account_id="string")])

    c = Convo("When will my parcel arrive? My email is kim@example.com")
    c.step("find_order", {"email": "kim@example.com"}, {"order_id": "7731-X"})
    c.step("get_shipment", {"order_id": "7731-X"},
           {"carrier": "DHL", "eta": "2026-03-04", "status": "in_transit"})
    c.answer("Your parcel ships with DHL and should arrive on 5 March 2026.")
    add("wrong-date", "silent_wrong_answer", "hand-written: the answer moves the tool's "
        "date by a day", c, SHIP)

    c = Convo("Is the ergonomic chair EC-3 in stock?")
    c.step("stock_level", {"sku": "EC-3"}, {"sku": "EC-3", "in_stock": False,
                                            "restock": "unknown"})
    c.answer("Yes, the EC-3 chair is in stock and can ship today.")
    add("wrong-words", "silent_wrong_answer", "hand-written: the answer says yes to a "
        "false in_stock", c, [tool_def("stock_level", sku="string")],
        undetectable="the answer contradicts the result in words, not in a number or a "
        "date; no detector compares meanings")

    c = Convo("Create a calendar event for Friday at 10.")
    c.step("create_calendar_event", {"title": "Sync", "when": "Friday 10:00"},
           "unknown tool create_calendar_event", error=True)
    c.step("add_event", {"title": "Sync", "start": "Friday 10:00"}, {"ok": True})
    c.answer("Done: 'Sync' is in your calendar on Friday at 10.")
    add("tool-not-offered", "tool_hallucination", "hand-written: the first call names a "
        "tool the run did not offer", c, [tool_def("add_event", title="string", start="string")])

    c = Convo("Restart the payments service.")
    for svc in ("payments", "payment", "payments-api", "svc-payments"):
        c.step("restart_service", {"service": svc}, f"no service named '{svc}'", error=True)
    add("errors-marked", "no_progress", "hand-written: four is_error results in a row, "
        "each guessing a new name", c, [tool_def("restart_service", service="string")])


def _turns(name: str, expected: str, source: str, task: str,
           turns: list[list[tuple[Any, ...]]], answer: str | None,
           tools: list[dict[str, Any]]) -> None:
    """A conversation from turns of parallel calls ``(tool, input, result[, is_error])``."""
    c = Convo(task)
    for turn in turns:
        ids = c.call(*[(t[0], t[1]) for t in turn])
        c.results(ids, *[t[2] for t in turn], error=any(len(t) > 3 and t[3] for t in turn))
    if answer is not None:
        c.answer(answer)
    add(name, expected, source, c, tools)


def edge_cases() -> None:
    """Runs that once fooled a detector: healthy ones whose data holds error words, empty
    results that are the answer, amounts written the way people write them; and stuck ones
    whose rate limits and errors do not use the usual words."""
    order = {"order_id": "A1", "total": 5900}
    get_order = [tool_def("get_order", id="string")]
    why = "hand-written edge case: "
    _turns("healthy-polling-until-done", "healthy", why + "one status polled until it "
           "changed to done", "Export my report and tell me when it is ready.",
           [[("start_export", {"report": "q3"}, {"job_id": "j-77", "status": "queued"})]]
           + [[("job_status", {"job_id": "j-77"}, {"status": "running"})]] * 3
           + [[("job_status", {"job_id": "j-77"}, {"status": "done",
                                                   "url": "https://x/r.csv"})]],
           "Your export is ready: https://x/r.csv",
           [tool_def("start_export", report="string"), tool_def("job_status", job_id="string")])
    _turns("healthy-retry-recovers", "healthy", why + "the same call retried after two "
           "marked timeouts, then it worked", "Get order A1",
           [[("get_order", {"id": "A1"}, "timeout", True)]] * 2
           + [[("get_order", {"id": "A1"}, order)]], "Order A1 totals 5,900.", get_order)
    for name, how, answer in [
            ("healthy-amount-french", "a space as the thousands separator",
             "La commande A1 s'élève à 5 900 €."),
            ("healthy-amount-arabic-digits", "Arabic-Indic digits", "مجموع الطلب ٥٩٠٠ روبية"),
            ("healthy-amount-k-suffix", "5.9k", "Order A1 totals 5.9k."),
            ("healthy-amount-german", "5.900,00 €", "Die Bestellung A1 kostet 5.900,00 €.")]:
        _turns(name, "healthy", why + how, "What is order A1's total?",
               [[("get_order", {"id": "A1"}, order)]], answer, get_order)
    _turns("healthy-amount-lakh", "healthy", why + "an amount grouped in lakhs",
           "What is the order's total?", [[("get_order", {"id": "A1"}, {"total": 590000})]],
           "The order totals ₹5,90,000.", get_order)
    _turns("healthy-date-german", "healthy", why + "a German date, '4. März 2026'",
           "Wann wird A1 geliefert?", [[("get_order", {"id": "A1"},
                                         {"delivery": "2026-03-04"})]],
           "A1 wird am 4. März 2026 geliefert.", get_order)
    _turns("healthy-percent-change", "healthy", why + "a percent change of two values",
           "How did sales change?", [[("sales", {"id": "q"}, {"q2": 80, "q3": 100})]],
           "Sales rose 25% from 80 to 100.", [tool_def("sales", id="string")])
    _turns("healthy-numbered-list", "healthy", why + "an answer as a numbered list",
           "What does X-1 cost?", [[("get_price", {"id": "X-1"}, {"price": 19.99})]],
           "1. The price is 19.99 EUR.\n2. Shipping is free.\n3. Taxes included.",
           [tool_def("get_price", id="string")])
    _turns("healthy-filtered-count", "healthy", why + "'2 of 3', a count of items that "
           "match", "How many of my orders shipped?",
           [[("orders", {"id": "c1"}, {"orders": [{"id": "A", "shipped": True},
                                                  {"id": "B", "shipped": True},
                                                  {"id": "C", "shipped": False}]})]],
           "2 of your 3 orders have shipped.", [tool_def("orders", id="string")])
    _turns("healthy-time-12h", "healthy", why + "18:00 written as 6 pm",
           "When does the store open?",
           [[("hours", {"id": "s1"}, {"opens": "09:30", "closes": "18:00"})]],
           "The store opens at 9:30 am and closes at 6 pm.", [tool_def("hours", id="string")])
    _turns("healthy-negative-balance", "healthy", why + "-42.5 said as 'owe 42.50'",
           "What is my balance?", [[("balance", {"id": "c"}, {"balance": -42.5})]],
           "Your balance is -42.50 (you owe 42.50).", [tool_def("balance", id="string")])
    _turns("healthy-link-checker", "healthy", why + "a 404 status as data",
           "Which of my links are broken?",
           [[("check_url", {"url": f"https://ex.com/{p}"},
              {"url": f"https://ex.com/{p}", "status": 404})] for p in "abc"]
           + [[("check_url", {"url": "https://ex.com/d"},
                {"url": "https://ex.com/d", "status": 200})]],
           "Three links are broken (/a, /b, /c); /d is fine.", [tool_def("check_url",
                                                                          url="string")])
    _turns("healthy-log-search", "healthy", why + "results that open with ERROR as data",
           "Any errors in the logs today?",
           [[("search_logs", {"q": f"svc{i}"}, f"ERROR lines for svc{i}: none")]
            for i in range(3)], "No errors in any of the 3 services.",
           [tool_def("search_logs", q="string")])
    _turns("healthy-lint-errors", "healthy", why + "an 'errors' list as data",
           "Lint my three files",
           [[("lint", {"file": f"f{i}.py"}, {"file": f"f{i}.py",
                                            "errors": ["E501 line too long"]})]
            for i in range(3)], "Each of the three files has one E501 (line too long) error.",
           [tool_def("lint", file="string")])
    _turns("healthy-failed-field", "healthy", why + "results that open with 'Failed' as data",
           "How many payments failed?",
           [[("payments", {"id": f"d{i}"}, f"Failed payments on day {i}: 0")]
            for i in range(1, 4)], "No payments failed in the last 3 days.",
           [tool_def("payments", id="string")])
    _turns("healthy-429-as-sku", "healthy", why + "429 as a SKU",
           "How many units of SKU 429 do we have and in store 7?",
           [[("stock", {"sku": "429", "store": st}, {"sku": 429, "on_hand": n})]
            for st, n in (("7", 12), ("8", 3), ("9", 0))],
           "Store 7 has 12 units of SKU 429.", [tool_def("stock", sku="string", store="string")])
    _turns("healthy-slow-down-in-data", "healthy", why + "'slow down' in the data",
           "Any traffic advisories?",
           [[("advisory", {"road": r}, {"road": r, "text": "Roadworks: slow down to 30"})]
            for r in ("A1", "A2")] + [[("advisory", {"road": "A3"},
                                        {"road": "A3", "text": "clear"})]],
           "Roadworks on A1 and A2 (limit 30); A3 is clear.",
           [tool_def("advisory", road="string")])
    tickets = [tool_def("tickets", id="string")]
    _turns("healthy-empty-for-each-customer", "healthy", why + "six lookups that each find "
           "nothing, and the answer says so", "Do any of my 6 customers have open tickets?",
           [[("tickets", {"id": f"c{i}"}, {"tickets": []})] for i in range(6)],
           "None of your 6 customers has an open ticket.", tickets)
    _turns("healthy-empty-parallel", "healthy", why + "the same six lookups in one turn",
           "Do any of my 6 customers have open tickets?",
           [[("tickets", {"id": f"c{i}"}, {"tickets": []}) for i in range(6)]],
           "None of your 6 customers has an open ticket.", tickets)
    _turns("healthy-deletes-return-nothing", "healthy", why + "six deletes, each returning ''",
           "Delete A1..A6.", [[("delete", {"id": f"A{i}"}, "")] for i in range(1, 7)],
           "Deleted all six.", [tool_def("delete", id="string")])
    _turns("rate-limit-throttling-exception", "rate_limited", why + "an AWS-style "
           "ThrottlingException returned as data, retried at once", "Get order A1",
           [[("get_order", {"id": "A1", "attempt": str(i)},
              {"__type": "ThrottlingException", "message": "Rate exceeded"})] for i in range(6)],
           "Sorry, I couldn't fetch it.", [tool_def("get_order", id="string", attempt="string")])
    _turns("rate-limit-exception-text", "rate_limited", why + "'TooManyRequestsException' "
           "as plain text", "Get orders A0 to A5",
           [[("get_order", {"id": f"A{i}"}, "TooManyRequestsException: RESOURCE_EXHAUSTED")]
            for i in range(6)], "Sorry, I couldn't fetch them.", get_order)
    _turns("errors-in-plain-words", "errors_as_text", why + "errors that never say 'error'",
           "Get order A1",
           [[("get_order", {"id": f"A{i}"}, t)] for i, t in enumerate(
               ["Unable to connect to database", "Request timed out",
                "Could not reach upstream", "Permission denied",
                "Unable to connect to database", "Request timed out"])],
           "Sorry, the order service is down.", get_order)
    _turns("empty-results-nested", "empty_results", why + "empty results nested one level "
           "down, and no answer", "Find my order",
           [[("search_orders", {"q": q}, {"data": {"orders": []}, "total": 0})]
            for q in ("smith", "Smith", "J Smith", "John Smith")], None,
           [tool_def("search_orders", q="string")])
    _turns("wrong-number-arabic-digits", "silent_wrong_answer", why + "a wrong total in "
           "Arabic-Indic digits", "What is order A1's total?",
           [[("get_order", {"id": "A1"}, order)]], "مجموع الطلب ٧٣٠٠ روبية", get_order)


def main() -> None:
    healthy_dates()
    healthy_reformatted()
    healthy_shapes()
    from_frameworks()
    stuck()
    edge_cases()
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.json"):
        old.unlink()
    for name, data in GALLERY.items():
        (OUT / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False, indent=1)
                                          + "\n", encoding="utf-8")
    print(f"wrote {len(GALLERY)} conversations to {OUT}")


if __name__ == "__main__":
    main()
