"""Property-based fuzzing of the harness with hypothesis: hostile replies and damaged files.

``test_run_agent_holds_its_promises_for_any_reply`` generates at least
:data:`MIN_REPLIES` model replies per run of the suite (scripts of 3 to 6 replies, every
shape a broken provider or an attacker has sent: wrong types everywhere, absurd usage,
broken or deep tool input, lone surrogates, unknown blocks and tools, floods of calls) and
runs each script through ``run_production`` against tools that can misbehave too. For every run:

* ``run_production`` returns (never raises) and the run has a stop cause;
* no tool runs that the model did not name exactly, with input that was a JSON object;
* no call that needs approval runs (nothing is approved here), and a predicate-gated call
  runs only when its predicate says it needs none;
* no call of a ``max_tokens`` reply runs;
* every ``tool_use`` in the transcript has exactly one ``tool_result``;
* every request the model received is valid for the Messages API
  (:func:`primer.harness.request_check.request_problems`).

The two file tests mutate a recorded trace and a paused checkpoint at random and check that
every command reading them exits 0, 1 or 2 (for this input) with at most one line on stderr,
and never raises. ``derandomize=True``: the same examples on every run, so CI is repeatable.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primer.__main__ import main
from primer.harness.production import run_production
from primer.harness.request_check import messages_problems, request_problems
from primer.harness.retry import TransientToolError
from primer.loop.config import AgentConfig
from primer.loop.model import STOP_REASONS, Reply, Usage
from primer.loop.state import StopCause
from primer.loop.text import MAX_INPUT_DEPTH, json_problem
from primer.loop.tools import ToolError, tool
from primer.scenarios import get_demo

#: Generated replies per run of the suite, at least (the test asserts it).
MIN_REPLIES = 10_000
EXAMPLES = int(os.environ.get("PRIMER_FUZZ_EXAMPLES", 2_500))  # x 3 to 6 replies each
SETTINGS = dict(derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))

# ---------------------------------------------------------------- the tools


class World:
    """The tools, recording every call that really ran; :meth:`reset` before each run (the
    tools are built once: building a tool checks its schema, which costs milliseconds)."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict]] = []
        self.results: list = ["ok"]

    def reset(self, results: list) -> World:
        self.ran, self.results = [], results or ["ok"]
        return self

    def outcome(self, name: str, args: dict):
        self.ran.append((name, dict(args)))
        value = self.results[len(self.ran) % len(self.results)]
        if isinstance(value, BaseException):
            raise value
        return value

    def tools(self):
        world = self

        @tool
        def lookup(q: str) -> str:
            """Look something up."""
            return world.outcome("lookup", {"q": q})

        @tool(side_effecting=True)
        def pay(amount: int, idempotency_key: str) -> str:
            """Pay (keyed)."""
            return world.outcome("pay", {"amount": amount})

        @tool(side_effecting=True)
        def send(to: str) -> str:
            """Send (no key)."""
            return world.outcome("send", {"to": to})

        @tool(side_effecting=True, needs_approval=True)
        def refund(amount: int) -> str:
            """Refund: always needs approval."""
            return world.outcome("refund", {"amount": amount})

        @tool(side_effecting=True, needs_approval=lambda args: args["amount"] > 100)
        def big_refund(amount: int) -> str:
            """Refund: approval over 100."""
            return world.outcome("big_refund", {"amount": amount})

        return [lookup, pay, send, refund, big_refund]


NAMES = ["lookup", "pay", "send", "refund", "big_refund"]
WORLD = World()
TOOLS = WORLD.tools()
SEEN: Counter[str] = Counter()  # what the fuzz run reached, for its report

# ---------------------------------------------------------------- the strategies


def weighted(*choices):
    """One of ``(weight, strategy)`` pairs, drawn in proportion to the weights: ``one_of``
    treats its strategies alike and counts one listed twice once, so each gets ``weight``
    distinct copies (``.map`` of the identity)."""
    return st.one_of(*(s.map(_same_value) for w, s in choices for _ in range(w)))


def _same_value(x):
    return x


json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
nasty_scalar = st.one_of(
    st.just(float("nan")), st.just(float("inf")), st.just(10**400), st.just("\ud800"),
    st.just(b"bytes"), st.just({1, 2}), st.builds(object), st.just("\x00"), st.just(""))


def nested(depth: int):
    value: dict = {"q": "x"}
    for _ in range(depth):
        value = {"q": value}
    return value


good_inputs = st.one_of(
    st.fixed_dictionaries({"q": st.text(max_size=6)}),
    st.fixed_dictionaries({"amount": st.integers(-5, 500)}),
    st.fixed_dictionaries({"amount": st.integers(-5, 500)}),
    st.fixed_dictionaries({"to": st.sampled_from(["a", "b"])}),
    st.dictionaries(st.sampled_from(["q", "amount", "to", "x"]), json_scalar, max_size=3))
bad_inputs = st.one_of(
    st.sampled_from(['{"q": "x",}', '{"amount": 5}{"amount": 6}', '{"q": ', "[1, 2]", "null",
                     '{"amount": 50}', "", "nope"]),
    st.lists(json_scalar, max_size=3), json_scalar, nasty_scalar,
    st.builds(nested, st.sampled_from([70, 500, 2000])),
    st.dictionaries(st.sampled_from(["q", "amount"]), nasty_scalar, min_size=1, max_size=2))

ids = st.one_of(st.sampled_from(["toolu_a", "toolu_b", "toolu_a", "id with space", "",
                                 "x" * 200]), st.none(), st.integers(), st.text(max_size=6))
names = weighted((8, st.sampled_from(NAMES)),
                 (2, st.sampled_from(["handoff_to_human", "unknown", "pay ", "ＰＡＹ", "x" * 80])),
                 (1, st.none()), (1, st.integers()))

tool_use = st.builds(
    lambda i, n, inp, extra: {"type": "tool_use", "id": i, "name": n, "input": inp, **extra},
    ids, names, weighted((2, good_inputs), (1, bad_inputs)),
    weighted((5, st.just({})), (1, st.fixed_dictionaries({"caller": json_scalar}))))
text = st.builds(lambda t: {"type": "text", "text": t},
                 st.one_of(st.text(max_size=20), st.sampled_from(["", "  ", "\ud800 hi"]),
                           st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2)))
other_block = st.one_of(
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "sig"},
              st.text(max_size=10)),
    st.just({"type": "redacted_thinking", "data": "abc"}),
    st.just({"type": "tool_result", "tool_use_id": "toolu_a", "content": "forged"}),
    st.just({"type": "image"}), st.just({"type": None}), st.just({}),
    nasty_scalar, json_scalar)
block = weighted((3, tool_use), (2, text), (1, other_block))


def _flood(calls: list[dict], n: int, odd_ids: list[tuple[int, object]]) -> list[dict]:
    """``n`` calls: ``calls`` repeated under ids of their own, then some ids replaced with
    ``odd_ids`` (position, id): another call's id, a malformed or missing one."""
    flood = [{**calls[k % len(calls)], "id": f"toolu_flood_{k}"} for k in range(n)]
    for place, odd in odd_ids:
        flood[place % n]["id"] = odd
    return flood


#: 33 to 40 calls in one reply, past the default limit of 32, built from up to 6 drawn calls
#: (drawing every one of 40 calls took a quarter of the fuzz run), with duplicate, malformed
#: or missing ids among them.
another_calls_id = st.integers(0, 32).map("toolu_flood_{}".format)  # every flood has it
flood = st.builds(_flood, st.lists(tool_use, min_size=1, max_size=6), st.integers(33, 40),
                  st.lists(st.tuples(st.integers(0, 39),
                                     weighted((1, ids), (2, another_calls_id))), max_size=4))
content = weighted((20, st.lists(block, max_size=5)), (3, flood),
                   (1, st.text(max_size=10)), (1, block), (1, st.none()), (1, st.integers()))

count = st.integers(0, 400)
good_usage = st.builds(Usage, count, count)
bad_usage = st.one_of(
    st.builds(Usage, count, count, count, count),
    st.fixed_dictionaries({"input_tokens": count, "output_tokens": count}),
    st.fixed_dictionaries({"input_tokens": st.one_of(count, nasty_scalar, st.integers(-10**9, -1),
                                                     st.just(10**309), st.floats()),
                           "output_tokens": st.one_of(count, st.just(None), st.text(max_size=3))}),
    st.builds(Usage, st.one_of(st.integers(-10**9, -1), st.just(10**309)), count),
    st.none(), st.text(max_size=3))
usage = weighted((8, good_usage), (1, bad_usage))
stop_reason = weighted((6, st.just("tool_use")), (1, st.just("end_turn")),
                       (1, st.just("max_tokens")), (1, st.sampled_from(STOP_REASONS)),
                       (1, st.one_of(st.sampled_from(["", "stop", "weird"]), st.none(),
                                     st.integers())))
model = weighted((4, st.just("m")), (1, st.one_of(st.none(), st.integers(), st.text(max_size=4))))
a_reply = st.builds(Reply, content, stop_reason, usage, model)
#: A reply the run goes on from (a call of a registered tool, a usage it can trust), with any
#: other blocks beside it: these keep the runs going, so later replies are sent too.
call = st.builds(lambda i, n, inp: {"type": "tool_use", "id": i, "name": n, "input": inp},
                 st.text("abcdefgh_", min_size=1, max_size=8), st.sampled_from(NAMES),
                 weighted((3, good_inputs), (1, bad_inputs)))
going_on = st.builds(lambda c, rest, u: Reply([c, *rest], "tool_use", u, "m"),
                     call, st.lists(block, max_size=3), good_usage)
#: Most generated replies are Reply objects a run can go on from, so runs go deep; the rest
#: are not replies at all.
reply = weighted((10, going_on), (5, a_reply),
                 (1, st.one_of(st.none(), st.text(max_size=5),
                               st.dictionaries(st.text(max_size=3), json_scalar, max_size=2))))
tool_result_values = st.lists(st.one_of(
    st.just("ok"), st.just("fine \ud800"), st.just(b"\xff\xfe"), st.just(None),
    st.just({"a": float("nan")}), st.just({"deep": nested(200)}), st.just(10**5000),
    st.just(ToolError("no such thing")), st.just(TransientToolError("503")),
    st.just(TimeoutError("read timed out")), st.just(ValueError("boom"))), max_size=4)
configs = st.fixed_dictionaries({
    "max_steps": st.integers(2, 8),
    "repeat_threshold": st.sampled_from([None, None, 2, 3]),
    "max_tool_calls_per_reply": st.sampled_from([None, 1, 3, 32]),
    "max_tool_calls_per_run": st.sampled_from([None, 2, 5]),
    "token_budget": st.sampled_from([None, None, None, 400, 50_000]),
    "budget_check": st.sampled_from(["after", "before"]),
    "no_progress_window": st.sampled_from([None, None, 3]),
    "offer_handoff": st.booleans(),
    "tool_timeout_s": st.sampled_from([None, None, None, 30.0]),
    "tool_retries": st.sampled_from([0, 1]),
})

# ---------------------------------------------------------------- the model


class FuzzModel:
    """Returns the script's replies in order (then "done"), checking every request."""

    def __init__(self, script: list) -> None:
        self.script = script
        self.calls = 0
        self.invalid: list[list[str]] = []

    def __call__(self, *, system, messages, tools, max_tokens):
        SEEN["replies sent"] += self.calls < len(self.script)
        body = {"model": "m", "max_tokens": max_tokens, "messages": messages, "tools": tools,
                "system": system}
        problems = request_problems(body)
        if problems:
            self.invalid.append(problems)
        self.calls += 1
        if self.calls <= len(self.script):
            return self.script[self.calls - 1]
        return Reply([{"type": "text", "text": "done"}], "end_turn", Usage(1, 1))


def check_run(script: list, settings_: dict, results: list, tmp: Path | None) -> None:
    world = WORLD.reset(results)
    llm = FuzzModel(script)
    config = AgentConfig(**settings_, retry={"base_s": 0.0, "max_delay_s": 0.0},
                         checkpoint_dir=str(tmp) if tmp else None)
    result = run_production(llm, "do the task", TOOLS, config=config)

    assert isinstance(result.stop_cause, StopCause)
    assert llm.invalid == [], llm.invalid[0]
    assert messages_problems(result.messages) == []
    # every tool_use in the transcript has exactly one tool_result, except on the reply a
    # run paused on: its results are kept for the resumed run, all in one message
    last = len(result.messages) - 1
    for i, m in enumerate(result.messages):
        if m["role"] != "assistant" or not isinstance(m["content"], list):
            continue
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        answers = ([b["tool_use_id"] for b in result.messages[i + 1]["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
                   if i + 1 < len(result.messages)
                   and isinstance(result.messages[i + 1]["content"], list) else [])
        paused_on = i == last and result.stop_cause is StopCause.AWAITING_APPROVAL
        for u in uses:
            assert answers.count(u) == (0 if paused_on else 1), (u, answers)
    # no tool ran that the model did not name exactly, with a JSON object it sent
    asked = [(b.get("name"), b.get("input")) for s in script if isinstance(s, Reply)
             for b in (s.content if isinstance(s.content, list) else [s.content])
             if isinstance(b, dict) and b.get("type") == "tool_use"]  # (one block: content)
    for name, args in world.ran:
        assert any(n == name and isinstance(i, dict) and _same(i, args)
                   and json_problem(i, text=True, max_depth=MAX_INPUT_DEPTH) is None
                   for n, i in asked)
        assert name != "refund"  # always needs approval, and nothing here approves
        assert not (name == "big_refund" and args["amount"] > 100)
    # no call of a max_tokens reply ran
    for s in result.steps:
        if s.reply.stop_reason == "max_tokens":
            assert all(e.error_kind == "not_run" for e in s.executions)


def _same(sent: dict, ran: dict) -> bool:
    return sent.keys() == ran.keys() and all(sent[k] == v for k, v in ran.items())


@pytest.mark.slow
def test_run_agent_holds_its_promises_for_any_reply(tmp_path_factory):
    seen = SEEN
    seen.clear()

    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(script=st.lists(reply, min_size=3, max_size=6), config=configs,
           results=tool_result_values, journal=st.integers(0, 19))
    def one_run(script, config, results, journal):
        seen["runs"] += 1
        seen["replies"] += len(script)
        tmp = tmp_path_factory.mktemp("ck") if journal == 0 else None  # 1 run in 20
        check_run(script, config, results, tmp)

    one_run()
    print(f"\nfuzz: {seen['runs']:,} runs, {seen['replies']:,} replies generated, "
          f"{seen['replies sent']:,} of them sent into the loop")
    assert seen["replies"] >= MIN_REPLIES, seen
    assert seen["replies sent"] >= MIN_REPLIES // 3, seen  # runs go deep, not one call each


# ---------------------------------------------------------------- damaged files


def cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, err.getvalue()


def mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    for position, cut, insert in edits:
        at = position % (len(data) + 1)
        data = data[:at] + insert + data[at + cut:]
    return data


edits = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 40),
                           st.one_of(st.binary(max_size=6),
                                     st.sampled_from([b"\n", b"[" * 200, b"9" * 5000, b"\xff",
                                                      b'"', b"NaN", b"-", b"{}", b"\x00"]))),
                 min_size=1, max_size=3)


@pytest.fixture(scope="module")
def good_files(tmp_path_factory):
    where = tmp_path_factory.mktemp("good")
    trace = where / "orders.jsonl"
    get_demo("orders").run(trace=str(trace))
    paused = get_demo("refund").run(checkpoint_dir=str(where / "ck"))
    return trace.read_bytes(), Path(paused.checkpoint).read_bytes()


@pytest.mark.slow
def test_a_damaged_trace_never_gets_a_traceback_from_any_reader(good_files, tmp_path):
    trace, _ = good_files
    path = tmp_path / "t.jsonl"

    @settings(max_examples=250, **SETTINGS)
    @given(edits)
    def one(e):
        path.write_bytes(mutate(trace, e))
        for args in (["trace", "show", str(path)], ["replay", str(path)]):
            code, err = cli(*args)
            assert code in (0, 1, 2) and err.count("\n") <= 1, err

    one()


@pytest.mark.slow
def test_a_damaged_checkpoint_never_gets_a_traceback_and_never_runs_a_refund(good_files,
                                                                            tmp_path,
                                                                            monkeypatch):
    _, journal = good_files
    monkeypatch.setenv("PRIMER_REFUND_LEDGER", str(tmp_path / "ledger.sqlite"))
    path = tmp_path / "run-001.jsonl"

    @settings(max_examples=150, **SETTINGS)
    @given(edits)
    def one(e):
        path.write_bytes(mutate(journal, e))
        for args in (["approvals", "list", str(path)], ["resume", str(path)]):
            code, err = cli(*args)
            assert code in (0, 2) and err.count("\n") <= 1, err
        from primer.scenarios.refunds import RefundLedger

        assert RefundLedger(tmp_path / "ledger.sqlite").refunds() == []  # never approved

    one()


def test_the_fuzz_strategies_reach_every_shape_they_name():
    """The generators are not quietly narrow: a sample holds each hostile shape. (Floods are
    counted in a sample of reply contents: hypothesis's draws also depend on the constants of
    the modules loaded, so a sample of 300 replies can hold none in one test order.)"""
    kinds = Counter()

    @settings(max_examples=300, **SETTINGS)
    @given(reply)
    def one(r):
        if not isinstance(r, Reply):
            kinds["not a reply"] += 1
            return
        for b in r.content if isinstance(r.content, list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                kinds["text input" if isinstance(b["input"], str) else "tool_use"] += 1
                kinds["deep input"] += json_problem(b["input"]) is not None
        kinds["usage not a Usage"] += not isinstance(r.usage, Usage)
        kinds["bad stop_reason"] += r.stop_reason not in STOP_REASONS

    @settings(max_examples=300, **SETTINGS)
    @given(content)
    def one_content(c):
        if not (isinstance(c, list) and len(c) > 32):
            return
        kinds["flood"] += 1
        flood_ids = [b.get("id") for b in c if isinstance(b, dict)]
        kinds["flood with a repeated id"] += len(set(map(repr, flood_ids))) < len(flood_ids)
        kinds["flood with an odd id"] += any(not isinstance(i, str) or not i.startswith("toolu_")
                                             for i in flood_ids)

    one()
    one_content()
    assert all(kinds[k] for k in ("not a reply", "text input", "tool_use", "deep input",
                                  "flood", "flood with a repeated id", "flood with an odd id",
                                  "usage not a Usage", "bad stop_reason")), kinds
