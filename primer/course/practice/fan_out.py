"""Lesson 06's exercise: run one reply's tool calls at the same time, send the results back
together.

The learner writes ``answer_tool_calls(messages, tools)``: ``messages`` is a conversation
whose last message is the assistant's reply (maybe a text block, then one or more
``tool_use`` blocks); ``tools`` maps a tool name to a Python function called with the
block's ``input`` as keyword arguments, returning a string. The function runs every call of
the reply concurrently (fan out) and appends ONE user message to ``messages`` holding one
``tool_result`` per call, in the order the calls were requested, whatever order they finish
in (fan in). A call that raises, or names a tool not in ``tools``, becomes a ``tool_result``
with ``"is_error": True`` and the reason as its content; it never escapes the function.

:func:`check_answer_tool_calls` judges it on six cases of its own. Its tools do not sleep
for chosen times and hope: the concurrency case gives each call a ``threading.Barrier`` that
opens only when every call of the reply is running at once (calls run one after another
find it closed after :data:`WAIT_S` seconds), and the order case makes the calls finish in
reverse order with events, so no case depends on the machine's speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short
from primer.course.practice.tool_results import content_text
from primer.harness.retry import ToolTimeout
from primer.harness.timeouts import call_with_timeout

#: Seconds a check's tool waits for its sibling calls before concluding they are not
#: running at the same time (a sequential solution costs this once per case that waits).
WAIT_S = 3.0
#: Seconds between two calls that the order case makes finish one after the other.
GAP_S = 0.05
#: Seconds the learner's function may take on one case before the case fails.
LIMIT_S = 20.0

_Tools = dict[str, Callable[..., Any]]
_Call = tuple[str, str, dict[str, Any]]  # (tool_use id, tool name, input)


def _calls(tag: str, *specs: tuple[str, dict[str, Any]]) -> list[_Call]:
    """Calls with ids ``toolu_<tag>1``, ``toolu_<tag>2``, … from (name, input) pairs."""
    return [(f"toolu_{tag}{k}", name, args) for k, (name, args) in enumerate(specs, start=1)]


def _conversation(calls: list[_Call]) -> list[dict[str, Any]]:
    """A user task, then an assistant reply with a text block and one tool_use per call."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "Let me look those up."}]
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": dict(x)} for i, n, x in calls]
    return [{"role": "user", "content": "Where are orders A123, B456 and C789?"},
            {"role": "assistant", "content": blocks}]


def _run(fn: Callable[..., Any], messages: list[dict[str, Any]], tools: _Tools) -> Any:
    """Call ``fn(messages, tools)`` with a limit of :data:`LIMIT_S` seconds
    (:func:`~primer.harness.timeouts.call_with_timeout`, the tool runner's own); re-raise
    what it raised (its traceback keeps the learner's frames)."""
    try:
        return call_with_timeout(lambda: fn(messages, tools), LIMIT_S)
    except ToolTimeout:
        raise TimeoutError(f"answer_tool_calls did not return within {LIMIT_S:g} s: does it "
                           f"wait for a result it never started?") from None


def _appended(fn: Callable[..., Any], calls: list[_Call], tools: _Tools
              ) -> tuple[list[Any], Any]:
    """Run the learner's function on a fresh conversation; what it appended, what it
    returned."""
    messages = _conversation(calls)
    before = len(messages)
    returned = _run(fn, messages, tools)
    return messages[before:], returned


def _nothing_appended(returned: Any) -> str:
    hint = (f" (it returned a {type(returned).__name__}: append the message to messages "
            f"instead of returning it)" if returned is not None else "")
    return ("appended nothing to messages" + hint + "; append one user message "
            "{'role': 'user', 'content': [tool_result, ...]}")


def _results(appended: list[Any]) -> list[dict[str, Any]]:
    """Every tool_result block in the appended messages, in order (wherever it sits)."""
    out = []
    for m in appended:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return out


def _ids(results: list[dict[str, Any]]) -> list[Any]:
    return [r.get("tool_use_id") for r in results]


def _by_id(results: list[dict[str, Any]], calls: list[_Call]) -> tuple[dict[str, Any], Problem]:
    """Each call's one result, or the problem (no result, two results, unknown ids)."""
    asked = [c[0] for c in calls]
    ids = _ids(results)
    for i, name, args in calls:
        if ids.count(i) == 0:
            what = (f"the results carry tool_use_ids {short(ids, 70)}" if results
                    else "no tool_result blocks were appended")
            return {}, (f"no tool_result for {i} ({name} {args}): {what}; give every call its "
                        f"own result with 'tool_use_id': block['id'] (keep a result per "
                        f"call, not per tool name)")
        if ids.count(i) > 1:
            return {}, (f"{ids.count(i)} tool_results for {i}; send exactly one per "
                        f"tool_use")
    extra = [x for x in ids if x not in asked]
    if extra:
        return {}, (f"tool_result for an id the reply never used: {short(extra, 60)}; copy "
                    f"the tool_use block's 'id' into 'tool_use_id'")
    return {r["tool_use_id"]: r for r in results}, None


def _is_error(result: dict[str, Any]) -> bool:
    return result.get("is_error") is True


def _text(result: dict[str, Any]) -> str:
    text = content_text(result.get("content"))
    return text if text is not None else str(result.get("content"))


def _order_tools() -> _Tools:
    def get_order(order_id: str) -> str:
        return f"order {order_id}: shipped"
    return {"get_order": get_order}


# ---------------------------------------------------------------- the cases

def _one_message(fn: Callable[..., Any]) -> Problem:
    calls = _calls("a", ("get_order", {"order_id": "A123"}),
                   ("get_order", {"order_id": "B456"}),
                   ("get_order", {"order_id": "C789"}))
    appended, returned = _appended(fn, calls, _order_tools())
    if not appended:
        return _nothing_appended(returned)
    if len(appended) > 1:
        return (f"appended {len(appended)} messages for one reply's 3 calls; put every "
                f"tool_result in ONE user message (the API pairs each tool_use with a "
                f"tool_result in the very next message)")
    m = appended[0]
    if not isinstance(m, dict) or m.get("role") != "user":
        return (f"appended {short(m, 60)}; the results go in a message with role 'user'")
    content = m.get("content")
    if not isinstance(content, list) or len(_results([m])) != len(calls):
        return (f"the user message's content is {short(content, 60)}; make it a list with one "
                f"{{'type': 'tool_result', 'tool_use_id': ..., 'content': ...}} per call")
    return None


def _every_call(fn: Callable[..., Any]) -> Problem:
    calls = _calls("b", ("get_order", {"order_id": "A123"}),
                   ("get_order", {"order_id": "B456"}),
                   ("get_pto_balance", {"employee": "alice"}))
    tools = _order_tools() | {"get_pto_balance": lambda employee: f"{employee}: 12 days"}
    appended, returned = _appended(fn, calls, tools)
    if not appended:
        return _nothing_appended(returned)
    found, problem = _by_id(_results(appended), calls)
    if problem:
        return problem
    expected = {"toolu_b1": "order A123: shipped", "toolu_b2": "order B456: shipped",
                "toolu_b3": "alice: 12 days"}
    for i, want in expected.items():
        got = _text(found[i])
        if got != want:
            return (f"the result for {i} is {short(got, 40)!r}, expected {want!r}: run each "
                    f"call with its own input, tools[block['name']](**block['input']), and "
                    f"put what it returns in 'content'")
    return None


def _request_order(fn: Callable[..., Any]) -> Problem:
    calls = _calls("c", ("lookup", {"key": "first"}),
                   ("lookup", {"key": "second"}),
                   ("lookup", {"key": "third"}))
    keys = [c[2]["key"] for c in calls]
    done = {k: threading.Event() for k in keys}
    gave_up = threading.Event()  # once one call waited in vain, the others do not wait
    finished: list[str] = []
    lock = threading.Lock()

    def lookup(key: str) -> str:
        """Finishes only after the call requested after it: third, second, first."""
        after = keys.index(key) + 1
        if after < len(keys) and not gave_up.is_set():
            if done[keys[after]].wait(WAIT_S):
                time.sleep(GAP_S)  # finish clearly later than the call it waited for
            else:
                gave_up.set()
        with lock:
            finished.append(calls[keys.index(key)][0])
        done[key].set()
        return f"{key} done"

    appended, returned = _appended(fn, calls, {"lookup": lookup})
    if not appended:
        return _nothing_appended(returned)
    results = _results(appended)
    ids = _ids(results)
    asked = [c[0] for c in calls]
    if ids == asked:
        return None
    if sorted(map(str, ids)) == sorted(asked):
        return (f"results in the order {', '.join(map(str, ids))} (the calls finished "
                f"{', '.join(finished)}); keep the order of the tool_use blocks, "
                f"{', '.join(asked)}: pool.map keeps it, as_completed does not")
    return (f"results in the order {short(ids, 60)}; expected {', '.join(asked)}, the order "
            f"of the tool_use blocks")


def _concurrent(fn: Callable[..., Any]) -> Problem:
    calls = _calls("d", ("slow_lookup", {"key": "x"}),
                   ("slow_lookup", {"key": "y"}),
                   ("slow_lookup", {"key": "z"}))
    barrier = threading.Barrier(len(calls))
    alone: list[str] = []
    ran: list[str] = []

    def slow_lookup(key: str) -> str:
        """Returns once every call of the reply is running at the same time."""
        ran.append(key)
        try:
            barrier.wait(WAIT_S)
        except threading.BrokenBarrierError:
            alone.append(key)
        return f"{key} done"

    appended, returned = _appended(fn, calls, {"slow_lookup": slow_lookup})
    if not ran:
        return ("no tool ran; call tools[block['name']](**block['input']) for each tool_use "
                "block of the last message")
    if alone:
        return (f"the calls did not all run at the same time: the first waited {WAIT_S:g} s "
                f"for its siblings to start; submit every call to a thread pool (as many "
                f"workers as calls) before waiting for any result")
    if not appended:
        return _nothing_appended(returned)
    return None


def _error_result(fn: Callable[..., Any]) -> Problem:
    calls = _calls("e", ("get_order", {"order_id": "A123"}),
                   ("get_order", {"order_id": "Z9"}),
                   ("get_order", {"order_id": "C789"}))
    reason = "no order 'Z9': order ids look like A123"

    def get_order(order_id: str) -> str:
        if order_id == "Z9":
            raise ValueError(reason)
        return f"order {order_id}: shipped"

    appended, returned = _appended(fn, calls, {"get_order": get_order})
    if not appended:
        return _nothing_appended(returned)
    found, problem = _by_id(_results(appended), calls)
    if problem:
        return problem + " (a call that raises gets an is_error result too)"
    bad = found["toolu_e2"]
    if not _is_error(bad):
        return (f"the failing call's result has is_error={bad.get('is_error')!r}; catch the "
                f"exception and set 'is_error': True so the model knows the call failed")
    if reason not in _text(bad):
        return (f"the failing call's content is {short(_text(bad), 50)!r}; put the "
                f"exception's message in it (str(e)) so the model can fix the call")
    for i, want in (("toolu_e1", "order A123: shipped"), ("toolu_e3", "order C789: shipped")):
        if _is_error(found[i]) or _text(found[i]) != want:
            return (f"the sibling {i} did not keep its normal result "
                    f"({short(_text(found[i]), 40)!r}); one failing call must not spoil "
                    f"the others")
    return None


def _unknown_tool(fn: Callable[..., Any]) -> Problem:
    calls = _calls("f", ("get_order", {"order_id": "A123"}),
                   ("issue_refund", {"order_id": "A123"}))
    appended, returned = _appended(fn, calls, _order_tools())
    if not appended:
        return _nothing_appended(returned)
    found, problem = _by_id(_results(appended), calls)
    if problem:
        return problem + " (a call to an unknown tool gets an is_error result too)"
    bad = found["toolu_f2"]
    if not _is_error(bad) or "issue_refund" not in _text(bad):
        return (f"the call to issue_refund, a tool not in tools, got {short(bad, 60)}; answer "
                f"it with 'is_error': True and a content naming the unknown tool")
    if _is_error(found["toolu_f1"]):
        return "the call to get_order got an error result; only the unknown tool's call fails"
    return None


CASES = (
    Case("one user message", _one_message,
         "three calls answered in one user message with three tool_result blocks"),
    Case("every call answered", _every_call,
         "one result per tool_use id, each with its own call's output (two calls to the same "
         "tool kept apart)"),
    Case("request order", _request_order,
         "the calls finished third, second, first; the results came back first, second, "
         "third"),
    Case("concurrent", _concurrent,
         "three calls were running at the same time (each waited for the others to start)"),
    Case("error as result", _error_result,
         "the call that raised became an is_error result with its message; the others kept "
         "theirs"),
    Case("unknown tool", _unknown_tool,
         "a call to a tool not in tools became an is_error result naming it"),
)


def check_answer_tool_calls(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge lesson 06's ``answer_tool_calls(messages, tools)`` on six cases.

    ``fn`` takes ``messages`` (list of Messages-API dicts; the last is an assistant reply
    with ``tool_use`` blocks) and ``tools`` (dict name → function called with the block's
    ``input`` as keyword arguments, returning ``str``) and must append one user message of
    ``tool_result`` blocks. Cases: one user message, every call answered (by id), request
    order (calls finish in reverse), concurrent (a barrier that opens only when all calls
    overlap; waits at most :data:`WAIT_S` s), error as result, unknown tool. Each call of
    ``fn`` may take :data:`LIMIT_S` s. Prints (when ``show``) and returns the
    :class:`ExerciseReport`; raises ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, CASES, what="answer_tool_calls", show=show)
