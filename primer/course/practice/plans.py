"""Lesson 11's exercise: run a plan step by step, check each result, stop at the first failure.

The learner writes ``execute_plan(plan, tools) -> (results, failure)``:

* ``plan`` is a list of steps, each ``{"tool": name, "input": {argument: value}}`` and
  optionally ``"check"``: a function of the step's result, true when the step did its job;
* ``tools`` maps names to plain functions; a step calls ``tools[name](**input)``;
* ``results`` are the results of the steps that succeeded, in order; ``failure`` is ``None``
  when every step did, else ``(k, reason)``: ``k`` the failed step's number counted from 1,
  ``reason`` a sentence saying why (the error's text, a check that failed, an unknown tool).

A failing step never raises out of ``execute_plan``, and no step after it runs: a plan is a
guess made before the first step, so the harness stops where the guess proved wrong (and a
planner may then write a new one). :func:`check_execute_plan` runs the learner's function on
plans and tools the learner did not write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from primer.course.checking import Case, ExerciseReport, Problem, run_cases, short


class _Stock:
    """A tiny stock room whose tools record every call (name and keyword arguments)."""

    def __init__(self, north: int = 1, *, strict: bool = True) -> None:
        self.units = {"north": north, "south": 4}
        self.strict = strict                 # False: reserve does not look at the stock
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> dict[str, Callable[..., Any]]:
        def check_stock(sku: str, warehouse: str) -> dict[str, Any]:
            self.calls.append(("check_stock", {"sku": sku, "warehouse": warehouse}))
            return {"sku": sku, "warehouse": warehouse, "units": self.units[warehouse]}

        def reserve(sku: str, warehouse: str) -> str:
            self.calls.append(("reserve", {"sku": sku, "warehouse": warehouse}))
            if self.strict and self.units[warehouse] < 1:
                raise RuntimeError(f"{sku} is out of stock at {warehouse}")
            self.units[warehouse] -= 1
            return f"reserved {sku} at {warehouse}"

        def ship(order_id: str, warehouse: str) -> str:
            self.calls.append(("ship", {"order_id": order_id, "warehouse": warehouse}))
            return f"shipped {order_id} from {warehouse}"

        return {"check_stock": check_stock, "reserve": reserve, "ship": ship}


def _has_units(result: Any) -> bool:
    return isinstance(result, dict) and result.get("units", 0) > 0


def _plan(warehouse: str = "south", *, check: bool = False) -> list[dict[str, Any]]:
    first: dict[str, Any] = {"tool": "check_stock",
                             "input": {"sku": "KB-1", "warehouse": warehouse}}
    if check:
        first["check"] = _has_units
    return [first,
            {"tool": "reserve", "input": {"sku": "KB-1", "warehouse": warehouse}},
            {"tool": "ship", "input": {"order_id": "A123", "warehouse": warehouse}}]


def _outcome(out: Any) -> tuple[list[Any], Any] | str:
    """``(results, failure)`` from the learner's return value, or what is wrong with it."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return (f"execute_plan returned {short(repr(out))}; return a pair "
                f"(results, failure), e.g. `return results, None`")
    results, failure = out
    if not isinstance(results, list):
        return (f"results is {type(results).__name__} {short(repr(results))}; make it the "
                f"list of the results of the steps that succeeded")
    return results, failure


def _failure(failure: Any, step: int, words: str) -> Problem:
    """``None`` when ``failure`` is ``(step, reason)`` and the reason mentions ``words``."""
    if failure is None:
        return (f"failure is None, but step {step} failed; return (step number, reason), "
                f"e.g. ({step}, 'step {step} (reserve) failed: ...')")
    if not isinstance(failure, (tuple, list)) or len(failure) != 2:
        return f"failure is {short(repr(failure))}; make it a pair (step number, reason)"
    k, reason = failure
    if k != step:
        hint = " (count steps from 1: enumerate(plan, start=1))" if k == step - 1 else ""
        return f"failure names step {short(repr(k))}; the step that failed is {step}{hint}"
    if not isinstance(reason, str) or words.lower() not in reason.lower():
        return (f"the reason {short(repr(reason), 70)} does not say {words!r}; put what went "
                f"wrong in it (the error's text, the check, the unknown name)")
    return None


def _ran(stock: _Stock) -> list[str]:
    return [name for name, _ in stock.calls]


def _probe_in_order(fn: Callable[..., Any]) -> Problem:
    stock = _Stock()
    out = _outcome(fn(_plan("south"), stock.tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    want = [{"sku": "KB-1", "warehouse": "south", "units": 4}, "reserved KB-1 at south",
            "shipped A123 from south"]
    if _ran(stock) != ["check_stock", "reserve", "ship"]:
        return (f"the tools ran as {_ran(stock)}; run every step once, in the plan's order, "
                f"as tools[step['tool']](**step['input'])")
    if failure is not None:
        return f"every step succeeded but failure is {short(repr(failure))}; return None"
    if results != want:
        return (f"results are {short(repr(results), 80)}; expected each step's return value, "
                f"in order: {short(repr(want), 80)}")
    return None


def _probe_raise_stops(fn: Callable[..., Any]) -> Problem:
    stock = _Stock(north=0)
    plan = _plan("north")[1:]                      # reserve (raises), then ship
    out = _outcome(fn(plan, stock.tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    if "ship" in _ran(stock):
        return ("ship ran after reserve had failed: stop at the first failure (return at "
                "once; no later step may run)")
    if results:
        return (f"results are {short(repr(results))}; no step succeeded, so return []: keep "
                f"a result only when its step succeeded")
    return _failure(failure, 1, "out of stock at north")


def _probe_later_step_fails(fn: Callable[..., Any]) -> Problem:
    stock = _Stock(north=0)
    out = _outcome(fn(_plan("north"), stock.tools()))   # no check: step 2 raises
    if isinstance(out, str):
        return out
    results, failure = out
    if "ship" in _ran(stock):
        return "ship (step 3) ran after step 2 had failed: stop at the first failure"
    if results != [{"sku": "KB-1", "warehouse": "north", "units": 0}]:
        return (f"results are {short(repr(results), 80)}; expected only step 1's result: "
                f"the failed step's error is not a result")
    return _failure(failure, 2, "out of stock at north")


def _probe_check_fails(fn: Callable[..., Any]) -> Problem:
    stock = _Stock(north=0, strict=False)    # only the check can stop this plan
    out = _outcome(fn(_plan("north", check=True), stock.tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    if _ran(stock) != ["check_stock"]:
        return (f"after step 1's check failed the tools still ran {_ran(stock)[1:]}; call "
                f"step['check'](result) when the step has one, and stop when it is false")
    if results:
        return (f"results are {short(repr(results), 80)}; step 1 failed its check, so it "
                f"did not succeed: return []")
    return _failure(failure, 1, "check")


def _probe_check_passes(fn: Callable[..., Any]) -> Problem:
    stock = _Stock()
    out = _outcome(fn(_plan("south", check=True), stock.tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    if failure is not None or len(results) != 3:
        return (f"with a check that is true the plan should run to the end; got failure "
                f"{short(repr(failure), 70)} after {len(results)} results: a step fails "
                f"only when its check returns something false")
    return None


def _probe_unknown_tool(fn: Callable[..., Any]) -> Problem:
    stock = _Stock()
    plan = [{"tool": "issue_refund", "input": {"order_id": "A123"}}, *_plan("south")[1:]]
    out = _outcome(fn(plan, stock.tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    if stock.calls:
        return f"steps after the unknown tool still ran: {_ran(stock)}; stop there"
    return _failure(failure, 1, "issue_refund")


def _probe_empty(fn: Callable[..., Any]) -> Problem:
    out = _outcome(fn([], _Stock().tools()))
    if isinstance(out, str):
        return out
    results, failure = out
    if results or failure is not None:
        return f"an empty plan returned ({short(repr(results))}, {short(repr(failure))}); " \
               f"return ([], None): nothing ran, nothing failed"
    return None


_CASES = (
    Case("in order", _probe_in_order,
         "three steps ran in the plan's order with their input; results in order, failure None"),
    Case("a step raises", _probe_raise_stops,
         "the first step raised: (1, reason with the error's text), nothing after it ran"),
    Case("a later step raises", _probe_later_step_fails,
         "step 2 raised: step 1's result kept, failure (2, ...), step 3 never ran"),
    Case("a check fails", _probe_check_fails,
         "check_stock answered 0 units without raising; its check stopped the plan at step 1"),
    Case("a check passes", _probe_check_passes,
         "a step whose check is true counts as done; the plan ran to the end"),
    Case("unknown tool", _probe_unknown_tool,
         "a step naming no tool is a failure with the name in the reason, not a KeyError"),
    Case("empty plan", _probe_empty, "an empty plan returns ([], None)"),
)


def check_execute_plan(fn: Callable[..., Any], *, show: bool = True) -> ExerciseReport:
    """Judge ``execute_plan(plan, tools) -> (results, failure)`` on seven plans it did not
    write (see the module docstring for the contract).

    Prints (when ``show``) and returns the :class:`~primer.course.checking.ExerciseReport`:
    one PASS/FAIL line per case and ``score: k/7``. An exception raised by ``fn`` is that
    case's failure. Raises ``TypeError`` only when ``fn`` is not callable.
    """
    return run_cases(fn, _CASES, what="execute_plan", show=show)
