"""The order-A123 world: what does order A123 cost in total with 18% GST?

Two tools, built with ``@tool``:

* ``get_order(order_id)``: order A123 is a keyboard, unit price 2500 rupees, quantity 2. An
  unknown id raises a :class:`~primer.loop.tools.ToolError` that shows what ids look like.
* ``calculator(expression)``: arithmetic by walking the Python ``ast`` syntax tree (numbers,
  ``+ - * / **``, unary minus, parentheses). It never calls ``eval``; anything else is a
  ``ToolError`` that says what is allowed.

Four scripted models answer the same task, one per exit of the loop (registered as demos):

* ``orders`` (the model that recovers): calls ``get_order`` with a wrong argument name
  (``id``), reads the schema error, fixes the call, computes ``2500 * 2 * 1.18`` with the
  calculator and answers 5900.0 rupees. Four model calls, three tool calls, ``end_turn``
  (limits: 6 steps, 3,000 tokens).
* ``orders-repeat``: sends the same broken call again after each error; the loop stops with
  ``loop_detected`` on the third identical request.
* ``orders-wander``: guesses a new wrong order id after each error; stops at the step limit
  (``max_steps`` = 4).
* ``orders-budget``: the recovering model under a 400-token budget; stops on ``token_budget``.

Each model is a decision function (:func:`decide`) of what the last tool result said, so the
same logic drives the production loop (:func:`make_llm`) and the stand-alone JSON-text loop of
:mod:`primer.loop.mini` (:func:`mini_model`).
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable
from typing import Any, cast

from primer.loop.config import AgentConfig
from primer.loop.messages import Message
from primer.loop.model import ScriptedLLM
from primer.loop.tools import Tool, ToolError, tool

from . import Scenario, register
from .policy import Action, Observation, action_reply, call_number, last_observations

TASK = "What does order A123 cost in total with 18% GST?"
SYSTEM = ("You answer questions about customer orders. Look orders up with get_order and do "
          "all arithmetic with calculator. Amounts are in Indian rupees.")
GST_RATE = 0.18

#: The order book: order id → order. Prices are rupees per unit.
ORDERS: dict[str, dict[str, Any]] = {
    "A123": {"order_id": "A123", "item": "keyboard", "unit_price": 2500, "quantity": 2,
             "currency": "INR"},
    "B456": {"order_id": "B456", "item": "monitor", "unit_price": 11000, "quantity": 1,
             "currency": "INR"},
}


@tool
def get_order(order_id: str) -> dict:
    """Look up one customer order by its id. Use it whenever a question names an order; it
    returns the item, the unit price in rupees and the quantity.

    Args:
        order_id: the order's id, a capital letter and three digits, e.g. "A123".
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"No order with id {order_id!r}. Order ids are a capital letter "
                        f"followed by three digits, for example 'A123'.")
    return dict(order)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_ALLOWED = "numbers, + - * / **, unary minus and parentheses"
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 100
#: The most digits an exact (integer) result may have. Checked *before* each ``**`` and
#: ``*`` is computed: a big-integer power runs in C holding the GIL, so no thread-based
#: timeout could stop ``(((9**99)**99)**99)**99`` once it started (lesson 09).
MAX_RESULT_DIGITS = 1000


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression, computed by walking its ``ast`` syntax tree.

    Allowed: int and float literals, ``+ - * / **``, unary ``-`` and ``+``, parentheses.
    Never calls ``eval``: a name, a call, an attribute or any other syntax is refused.
    Raises :class:`ToolError` saying what is allowed for anything else, for a division by
    zero, for an exponent larger than ``MAX_EXPONENT`` in size, for an exact result of more
    than ``MAX_RESULT_DIGITS`` digits (estimated before it is computed, so a huge power never
    starts), for a result too large for a float, and for expressions longer than
    ``MAX_EXPRESSION_CHARS`` characters.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"The expression is {len(expression)} characters long; keep it under "
                        f"{MAX_EXPRESSION_CHARS}.")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolError(f"Cannot parse {expression!r}. Write arithmetic with {_ALLOWED}, "
                        f"e.g. '2500 * 2 * 1.18'.") from None
    try:
        return _walk(tree.body)
    except ZeroDivisionError:
        raise ToolError(f"{expression!r} divides by zero.") from None
    except OverflowError:
        raise ToolError(f"{expression!r} is too large to compute.") from None


def _walk(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return cast(int | float, node.value)  # its type is int or float (checked)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _walk(node.left), _walk(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            shown = right if isinstance(right, float) or abs(right) < 10**12 \
                else f"a number of {_digits(right):,.0f} digits"
            raise ToolError(f"Exponents are limited to ±{MAX_EXPONENT}; got {shown}.")
        digits = _result_digits(node.op, left, right)
        if digits > MAX_RESULT_DIGITS:
            raise ToolError(f"{ast.unparse(node)!r} would have about {digits:,.0f} digits; "
                            f"results are limited to {MAX_RESULT_DIGITS:,} digits.")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_walk(node.operand))
    raise ToolError(f"{ast.unparse(node)!r} is not allowed in the calculator. Use only "
                    f"{_ALLOWED}, e.g. '2500 * 2 * 1.18'.")


def _digits(x: int | float) -> float:
    """Decimal digits of ``|x|`` (about), for an integer; 0 for a float (floats overflow
    quickly on their own, with an ``OverflowError``)."""
    if isinstance(x, float) or x == 0:
        return 0.0
    return math.log10(abs(x)) + 1


def _result_digits(op: ast.operator, left: int | float, right: int | float) -> float:
    """Digits the exact result of ``left op right`` would have, estimated without computing
    it: for ``a ** b`` about ``b × log10|a|``, for ``a * b`` the digits of both."""
    if isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int) \
            and right > 0 and abs(left) > 1:
        return right * math.log10(abs(left)) + 1
    if isinstance(op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
        return _digits(left) + _digits(right)
    return max(_digits(left), _digits(right)) + 1


@tool
def calculator(expression: str) -> float | int:
    """Evaluate an arithmetic expression exactly as written. Use it for every sum, product or
    percentage instead of computing in your head. Allowed: numbers, + - * / **, unary minus
    and parentheses.

    Args:
        expression: the arithmetic to evaluate, e.g. "2500 * 2 * 1.18".
    """
    value = evaluate(expression)
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(f"{expression!r} does not have a finite value.")
    return value


def make_tools() -> list[Tool]:
    """The order world's tools: ``[get_order, calculator]`` (stateless, safe to share)."""
    return [get_order, calculator]


def mini_tools() -> dict[str, Callable[..., Any]]:
    """The same two tools as plain functions in a dict, for :func:`primer.loop.mini.run_mini`."""
    return {t.name: t.fn for t in make_tools()}


# ---------------------------------------------------------------- the four models

#: The model kinds, each named after the exit it exercises.
KINDS = ("recover", "repeat", "wander", "budget")

#: Ids the wandering model tries, in order, after its first guess fails.
WRONG_GUESSES = ("A-123", "a123", "123", "A0123", "ORD-A123", "#A123")


def decide(kind: str, call_no: int, last: Observation | None) -> Action:
    """The next action of model ``kind`` on call ``call_no``, given the last tool result.

    ``kind`` is one of :data:`KINDS`; ``last`` is ``None`` on the first call. Returns an
    action dict (``{"tool", "input", "thought"}`` or ``{"answer"}``). Raises ``ValueError``
    for an unknown kind.

    - recover / budget: first ``get_order`` with the wrong argument name ``id``; after an
      error from ``get_order``, the corrected call; after the order, the calculator on
      unit price × quantity × 1.18; after the calculator, the answer quoting its result.
    - repeat: the same broken call again after every error.
    - wander: a new wrong id after every error (it never reads the hint about id format).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown order model {kind!r}; choose one of {', '.join(KINDS)}")
    if last is None:
        if kind == "wander":
            return _lookup({"order_id": WRONG_GUESSES[0]}, "Let me look up the order.")
        return _lookup({"id": "A123"}, "I need the order's price and quantity first.")
    if last.is_error:
        if kind == "repeat":
            return _lookup(last.input, "That failed; trying the same lookup again.")
        if kind == "wander":
            guess = (WRONG_GUESSES[call_no - 1] if call_no <= len(WRONG_GUESSES)
                     else f"A123-{call_no}")
            return _lookup({"order_id": guess}, "No such order; maybe the id is written "
                                                "differently.")
        if last.name == "calculator":
            return {"answer": f"I could not compute the total: {last.content}"}
        return _lookup({"order_id": "A123"}, "The error says the argument is order_id; "
                                             "fixing the call.")
    if last.name == "get_order":
        order = json.loads(last.content)
        expression = f"{order['unit_price']} * {order['quantity']} * {1 + GST_RATE}"
        return {"thought": "Total = unit price × quantity × (1 + GST).",
                "tool": "calculator", "input": {"expression": expression}}
    return {"answer": f"Order A123 costs {last.content} rupees in total with 18% GST."}


def _lookup(args: Any, thought: str) -> Action:
    return {"thought": thought, "tool": "get_order", "input": args}


def policy(kind: str) -> Callable[[list[Message]], Any]:
    """A :class:`ScriptedLLM` policy for model ``kind``: reads the last tool result, decides."""

    def respond(messages: list[Message]) -> Any:
        seen = last_observations(messages)
        return action_reply(decide(kind, call_number(messages), seen[-1] if seen else None))

    return respond


def make_llm(kind: str = "recover") -> ScriptedLLM:
    """A fresh scripted model of ``kind`` (see :func:`decide`) for :func:`run_agent`."""
    decide(kind, 1, None)  # validate the kind now, not on the first call
    return ScriptedLLM(policy(kind), name=f"order model ({kind})")


def mini_model(kind: str = "recover") -> Callable[..., str]:
    """The same model for the JSON-text loop of :mod:`primer.loop.mini`.

    Returns ``model(*, system, messages) -> str``: it reads the last observation the mini loop
    wrote and replies with the action as JSON text, e.g. ``{"tool": "get_order", "input":
    {...}}``. (It ignores the system prompt: its decisions are scripted.)
    """
    from primer.loop.mini import last_observation

    decide(kind, 1, None)

    def respond(*, system: str, messages: list[dict[str, str]]) -> str:
        seen = last_observation(messages)
        last = Observation(*seen) if seen else None
        # The mini list is the task, then two messages a step: call n sees 2n - 1 messages.
        return json.dumps(decide(kind, (len(messages) + 1) // 2, last), ensure_ascii=False)

    return respond


def _scenario(name: str, kind: str, description: str, config: AgentConfig) -> Scenario:
    return register(Scenario(name=name, description=description, task=TASK,
                             make_tools=make_tools, make_llm=lambda: make_llm(kind),
                             config=config, system=SYSTEM))


RECOVER_CONFIG = AgentConfig(max_steps=6, token_budget=3000)

_scenario("orders", "recover", "fixes a bad argument from its error, answers 5900.0 rupees",
          RECOVER_CONFIG)
_scenario("orders-repeat", "repeat", "repeats the same failing call; stops on loop_detected",
          RECOVER_CONFIG)
_scenario("orders-wander", "wander", "guesses a new wrong id each step; stops at max_steps",
          AgentConfig(max_steps=4, token_budget=3000))
_scenario("orders-budget", "budget", "the recovering model under a 400-token budget",
          AgentConfig(max_steps=6, token_budget=400))
