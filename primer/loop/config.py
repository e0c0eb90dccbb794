"""``AgentConfig``: every limit and price of a run, each setting documented where it is declared.

The settings are checked when a config is made: :data:`RULES` is the table of what each
numeric setting must be (an integer or a number, its bounds, whether ``None`` turns it off,
its unit), and :func:`rule_problems` applies it. A bad setting is a ``ValueError`` that names
every setting that cannot work, so a config is either usable or refused whole.

A config travels as JSON in traces and checkpoints (:meth:`AgentConfig.to_dict`,
:meth:`AgentConfig.from_dict`); the settings that hold functions (``clock``, ``sleep``,
``summarizer``,
``context_editor``) stay behind.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .messages import Message
from .model import Prices, Usage
from .tools import ToolRegistry

#: A summariser: older messages in, summary text out (optionally with the usage it cost).
Summarizer = Callable[[list[Message]], "str | tuple[str, Usage]"]
#: A context editor: ``editor(messages, tools)`` (the run's registry) returns the edited
#: messages (a valid history: every ``tool_use`` answered), or ``None`` for no change.
ContextEditor = Callable[[list[Message], ToolRegistry], "list[Message] | None"]

#: AgentConfig fields that hold functions: not part of its JSON form.
CALLABLE_SETTINGS = frozenset({"clock", "sleep", "summarizer", "context_editor"})
#: Settings left out of the JSON form while they hold these defaults (added after traces
#: and journals were first written, so those stay as they were).
QUIET_DEFAULTS: dict[str, Any] = {"wrap_up": False, "wrap_up_max_tokens": 512}


def seconds_asked(retry_after_s: object) -> float | None:
    """A service's ``retry_after_s`` as seconds to wait, when it is a finite number >= 0;
    else ``None`` (it is then ignored: a provider's header is outside input)."""
    if isinstance(retry_after_s, (int, float)) and not isinstance(retry_after_s, bool) \
            and 0 <= retry_after_s < 1e18:  # (an int too big for a float is no wait either)
        return float(retry_after_s)
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before each retry: exponential backoff with seeded jitter.

    Before retry ``k`` (1 for the first retry) the wait is ``min(base_s × factor^(k-1) ×
    (1 + jitter × u), max_delay_s)`` seconds, with ``u`` uniform in [0, 1) from a generator
    seeded with ``seed`` and the call's key: the cap applies after the jitter, so the
    backoff never waits longer than ``max_delay_s``. If the service sent a ``retry_after_s``
    that is longer, the wait is that instead, even above the cap (the server's word wins),
    but a wait longer than ``max_wait_s`` is not waited at all: the caller gives up instead
    (:meth:`why_not_wait`). A ``retry_after_s`` that is not a number of seconds >= 0 (``NaN``,
    infinity, a string) is ignored. Defaults: 1 s, 2 s, 4 s, ... each up to 10 % longer,
    never more than 60 s; a server may ask for up to 300 s. How *many* retries is the
    caller's setting (``tool_retries``, ``model_retries`` of :class:`AgentConfig`).

    Raises ``ValueError`` for a negative base or jitter, a factor below 1, a cap below the
    base or a ``max_wait_s`` below the cap. Source: exponential backoff with jitter as in
    Marc Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog (2015); the 1 s /
    2 s / 4 s figures are the course's.
    """

    base_s: float = 1.0
    factor: float = 2.0
    jitter: float = 0.1
    max_delay_s: float = 60.0
    seed: int = 0
    #: The longest single wait (seconds): a service asking for more ends the retries.
    max_wait_s: float = 300.0

    def __post_init__(self) -> None:
        problems = []
        if self.base_s < 0:
            problems.append(f"base_s must be >= 0 seconds (got {self.base_s})")
        if self.factor < 1:
            problems.append(f"factor must be >= 1 (got {self.factor})")
        if self.jitter < 0:
            problems.append(f"jitter must be a fraction >= 0 (got {self.jitter})")
        if self.max_delay_s < self.base_s:
            problems.append(f"max_delay_s ({self.max_delay_s}) must be >= base_s "
                            f"({self.base_s})")
        if not self.max_wait_s >= self.max_delay_s:
            problems.append(f"max_wait_s ({self.max_wait_s}) must be >= max_delay_s "
                            f"({self.max_delay_s})")
        if problems:
            raise ValueError("RetryPolicy: " + "; ".join(problems))

    def rng(self, key: str) -> random.Random:
        """The jitter generator for one call: seeded with ``seed`` and the call's ``key``."""
        return random.Random(f"{self.seed}:{key}")

    def backoff_s(self, retry: int) -> float:
        """The wait before retry ``retry`` (1-based) without jitter, in seconds (capped)."""
        if retry < 1:
            raise ValueError(f"retry numbers start at 1 (got {retry})")
        return min(self.base_s * self.factor ** (retry - 1), self.max_delay_s)

    def delay_s(self, retry: int, rng: random.Random,
                retry_after_s: float | None = None) -> float:
        """The wait before retry ``retry`` (seconds): the backoff with jitter from ``rng``,
        capped at ``max_delay_s``, or ``retry_after_s`` when the service asked for longer."""
        delay = min(self.backoff_s(retry) * (1 + self.jitter * rng.random()), self.max_delay_s)
        asked = seconds_asked(retry_after_s)
        return max(delay, asked) if asked is not None else delay

    def delay_at(self, retry: int, key: str, retry_after_s: float | None = None) -> float:
        """The wait before retry ``retry`` (1-based) of the call ``key`` (seconds): its
        generator seeded afresh and advanced past the retries before, so each wait is the
        same whichever loop, thread or process computes it."""
        rng = self.rng(key)
        for _ in range(retry - 1):
            rng.random()
        return self.delay_s(retry, rng, retry_after_s)

    def why_not_wait(self, delay_s: float, time_left_s: float | None = None) -> str | None:
        """Why a retry should not wait ``delay_s`` seconds (:meth:`delay_at`) but give up:
        the wait is longer than ``max_wait_s``, or than the run's ``time_left_s``; else
        ``None``."""
        if delay_s > self.max_wait_s:
            return f"the service asked to wait {delay_s:.3g} s, more than max_wait_s " \
                   f"({self.max_wait_s:g} s)"
        if time_left_s is not None and delay_s > time_left_s:
            return f"a wait of {delay_s:.3g} s would pass the run's wall-clock limit " \
                   f"({max(time_left_s, 0.0):.3g} s left)"
        return None

    def delays(self, retries: int, key: str = "") -> list[float]:
        """The first ``retries`` waits (seconds) of a call with ``key``, as its retries see them."""
        rng = self.rng(key)
        return [self.delay_s(k, rng) for k in range(1, retries + 1)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class AgentConfig:
    """Every limit and price of a run; each field's docstring says what it limits, in what unit.

    Raises ``ValueError`` naming each setting that cannot work (see :data:`RULES`).
    """

    max_steps: int = 10
    """Model calls the run may make."""
    token_budget: int | None = 50_000
    """Tokens (prompt + output, cache reads and writes included) the run may use; ``None``:
    no limit."""
    budget_check: Literal["after", "before"] = "after"
    """``"after"``: stop at the first call whose reported usage takes a running total past a
    budget (it can overshoot by one call). ``"before"``: stop before a call that could cross
    it, counting the prompt's estimated size plus ``max_tokens`` of output (the prompt priced
    as a cache write when that costs more), so the loop's own model calls never overspend.
    Usage that arrives another way (retried failed attempts, sub-agents inside tools,
    summaries) is counted when it arrives and can pass the budget by that much; the next call
    is then refused."""
    cost_budget_usd: float | None = None
    """Dollars (USD) the run may spend at ``prices``; ``None``: no limit."""
    prices: Prices = field(default_factory=Prices)
    """USD per million tokens (default 5 input / 25 output)."""
    model_prices: Mapping[str, Prices] = field(default_factory=dict)
    """Prices of particular models, by the model id a reply names (``Reply.model``): a reply
    from a model listed here is priced at its own prices, any other at ``prices`` (so a run
    whose fallback model answered some calls costs what each model charged). The budget
    check before a call assumes ``prices``. Read-only once the config is made (a copy is
    kept), like every other setting."""
    repeat_threshold: int | None = 3
    """Stop when the same tool with the same input (key order ignored, 1.0 read as 1) has
    been requested this many times; ``None`` turns loop detection off."""
    wall_clock_s: float | None = None
    """Seconds the run may take, checked before each model call; ``None``: no limit."""
    no_progress_window: int | None = None
    """Stop when this many tool results in a row were errors; ``None``: off."""
    context_window: int = 200_000
    """The model's context window (tokens)."""
    context_stop_share: float = 0.8
    """Stop before a call whose prompt would pass this share of ``context_window``."""
    max_tokens: int = 1024
    """Output tokens allowed per reply."""
    max_parallel_tools: int = 16
    """Cap on the threads running one reply's calls."""
    max_tool_calls_per_reply: int | None = 32
    """Tool calls one reply may ask for. A reply asking for more runs none of them: each gets
    an error result saying the limit (``error_kind`` ``"too_many_calls"``) and the model
    may ask again with fewer; ``None``: no limit."""
    max_tool_calls_per_run: int | None = None
    """Tool calls the whole run may make. A reply whose calls would take the run past it runs
    none of them: each gets an error result saying the limit is used up (``error_kind``
    ``"too_many_calls"``), so the model can still answer with what it has; ``None``: no limit
    (the step limit and the per-reply limit still bound a run)."""
    offer_handoff: bool = True
    """Offer the model the ``handoff_to_human`` tool."""
    checkpoint_dir: str | None = None
    """A directory for checkpoint journals (:mod:`primer.harness.durable.journal`): a pause for
    approval, and every reply with a side-effecting call, is recorded there so the run can
    resume in another process. ``None``: a pause keeps ``pending`` in the result, writes no
    file, and nothing in the paused reply runs."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    """The clock of the wall-clock limit (seconds; injectable for tests)."""
    tool_timeout_s: float | None = 30.0
    """Seconds one tool attempt may take (a tool's own ``timeout_s`` wins); ``None``: no
    limit, and nothing watches the calls."""
    tool_retries: int = 2
    """Retries of a transient tool error after the first attempt."""
    model_retries: int = 2
    """Retries of a transient model error after the first attempt."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """The backoff between retries (1 s, 2 s, 4 s ... with seeded jitter)."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    """How the run waits (seconds; injectable, e.g. ``ManualClock().sleep``). The async loop
    awaits ``asyncio.sleep`` in place of the default ``time.sleep``."""
    compact_share: float | None = 0.6
    """Once the prompt passes this share of ``context_window``, summarise older turns with
    ``summarizer`` before the next call (see :mod:`primer.loop.loop`); ``None``: off."""
    compact_keep_turns: int = 2
    """Replies (with their results) a compaction keeps word for word."""
    summarizer: Summarizer | None = field(default=None, repr=False, compare=False)
    """What compacts older turns; compaction is off while this is ``None``."""
    output_retries: int = 1
    """Corrective turns a final answer that fails ``run_agent``'s ``output_model`` gets
    before the run stops with ``invalid_output``."""
    wrap_up: bool = False
    """At a step, token, dollar or wall-clock limit, make one more model call with tools off
    that asks for a best-effort answer (:func:`~primer.loop.steps.wrap_up`): the stop cause
    stays the limit's, ``AgentResult.wrapped_up`` marks the answer. With
    ``budget_check="before"`` every call keeps room for it in the budgets; it is made only
    when its worst case fits in what is left, so it never takes a budget past its limit."""
    wrap_up_max_tokens: int = 512
    """Output tokens the wrap-up call may write (and the budgets keep room for)."""
    context_editor: ContextEditor | None = field(default=None, repr=False, compare=False)
    """What edits the context once the prompt passes ``compact_share`` of the window, before
    any summary (e.g. :class:`primer.harness.context_editing.ClearToolResults`, which clears
    old tool results); ``None``: off."""

    def __post_init__(self) -> None:
        # (frozen: a config is a run's input; dicts read back from JSON become their types)
        if isinstance(self.prices, dict):
            object.__setattr__(self, "prices", Prices(**self.prices))
        if not isinstance(self.model_prices, Mapping):
            raise ValueError(f"AgentConfig: model_prices must be a dict of model id to Prices "
                             f"(got {type(self.model_prices).__name__})")
        object.__setattr__(self, "model_prices", MappingProxyType(
            {m: Prices(**p) if isinstance(p, dict) else p for m, p in self.model_prices.items()}))
        if isinstance(self.retry, dict):
            object.__setattr__(self, "retry", RetryPolicy(**self.retry))
        problems = rule_problems(self)
        if problems:
            raise ValueError("AgentConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        """Every setting but the functions (and ``model_prices`` when empty, and the
        :data:`QUIET_DEFAULTS` at their defaults), JSON-ready (for traces and checkpoints)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__
             if k not in CALLABLE_SETTINGS}
        d["prices"] = asdict(self.prices)
        if self.model_prices:  # (left out when empty: older traces and journals stay as they are)
            d["model_prices"] = {m: asdict(p) for m, p in self.model_prices.items()}
        else:
            del d["model_prices"]
        d["retry"] = asdict(self.retry)
        for name, default in QUIET_DEFAULTS.items():  # (older traces stay as they are)
            if d[name] == default:
                del d[name]
        return d

    def __getstate__(self) -> dict[str, Any]:  # pickle (a process pool's runs): a plain dict
        return {**self.__dict__, "model_prices": dict(self.model_prices)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, model_prices=MappingProxyType(state["model_prices"]))

    def prices_for(self, model: str) -> Prices:
        """The prices of ``model`` (a model id): its ``model_prices`` entry, else ``prices``."""
        return self.model_prices.get(model, self.prices) if self.model_prices else self.prices

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentConfig:
        """Inverse of :meth:`to_dict`; ``ValueError`` names an unknown or bad setting."""
        known = set(cls.__dataclass_fields__) - CALLABLE_SETTINGS
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"AgentConfig: unknown settings {sorted(unknown)}")
        return cls(**d)


# ---------------------------------------------------------------- the rules


@dataclass(frozen=True)
class Rule:
    """What one numeric setting must be: ``kind`` (``int`` or ``float``, where an int also
    passes), finite, ``>= low`` (``> low`` when ``above``) and ``<= high``; ``optional``:
    ``None`` is allowed (it turns the limit off); ``unit`` names the unit in the message."""

    kind: type
    low: float
    above: bool = False
    high: float = math.inf
    optional: bool = False
    unit: str = ""

    def problem(self, name: str, value: Any) -> str | None:
        """``None`` when ``value`` passes, else one sentence naming ``name`` and the bound."""
        if value is None and self.optional:
            return None
        ok_type = isinstance(value, int if self.kind is int else int | float) \
            and not isinstance(value, bool)
        if ok_type and math.isfinite(value) and (value > self.low if self.above
                                                 else value >= self.low) and value <= self.high:
            return None
        bound = f"> {self.low:g}" if self.above else f">= {self.low:g}"
        if self.high < math.inf:
            bound += f" and <= {self.high:g}"
        kind = "an integer" if self.kind is int else "a number"
        unit = f" {self.unit}" if self.unit else ""
        return (f"{name} must be {kind} {bound}{unit}{' or None' if self.optional else ''} "
                f"(got {value!r})")


_PRICE_UNIT = "(USD per million tokens)"

#: One row per numeric setting of :class:`AgentConfig` (``prices.*`` are its Prices' fields).
RULES: dict[str, Rule] = {
    "max_steps": Rule(int, 1),
    "token_budget": Rule(int, 0, above=True, optional=True, unit="tokens"),
    "cost_budget_usd": Rule(float, 0, above=True, optional=True, unit="USD"),
    "repeat_threshold": Rule(int, 2, optional=True),
    "wall_clock_s": Rule(float, 0, above=True, optional=True, unit="seconds"),
    "no_progress_window": Rule(int, 1, optional=True),
    "context_window": Rule(int, 1, unit="tokens"),
    "context_stop_share": Rule(float, 0, above=True, high=1),
    "max_tokens": Rule(int, 1, unit="tokens"),
    "max_parallel_tools": Rule(int, 1),
    "max_tool_calls_per_reply": Rule(int, 1, optional=True),
    "max_tool_calls_per_run": Rule(int, 1, optional=True),
    "tool_timeout_s": Rule(float, 0, above=True, optional=True, high=86_400 * 365,
                           unit="seconds"),
    "tool_retries": Rule(int, 0),
    "model_retries": Rule(int, 0),
    "compact_share": Rule(float, 0, above=True, optional=True, high=0.999999),
    "compact_keep_turns": Rule(int, 1),
    "output_retries": Rule(int, 0),
    "wrap_up_max_tokens": Rule(int, 1, unit="tokens"),
    "prices.input_per_mtok": Rule(float, 0, unit=_PRICE_UNIT),
    "prices.output_per_mtok": Rule(float, 0, unit=_PRICE_UNIT),
    "prices.cache_write_multiplier": Rule(float, 0),
    "prices.cache_read_multiplier": Rule(float, 0),
}

#: The settings that take one of a few words.
CHOICES: dict[str, tuple[str, ...]] = {"budget_check": ("after", "before")}


def rule_problems(config: AgentConfig) -> list[str]:
    """Every setting of ``config`` that breaks its row of :data:`RULES` or :data:`CHOICES`."""
    problems = []
    for name, rule in RULES.items():
        owner, _, attr = name.rpartition(".")
        value = getattr(config.prices if owner == "prices" else config, attr)
        problem = rule.problem(name, value)
        if problem:
            problems.append(problem)
    for model, prices in config.model_prices.items():  # each model's Prices, row by row
        if not isinstance(prices, Prices):
            problems.append(f"model_prices[{model!r}] must be a Prices (got "
                            f"{type(prices).__name__})")
            continue
        for name, rule in RULES.items():
            owner, _, attr = name.rpartition(".")
            if owner == "prices":
                problem = rule.problem(f"model_prices[{model!r}].{attr}", getattr(prices, attr))
                if problem:
                    problems.append(problem)
    for name, words in CHOICES.items():
        value = getattr(config, name)
        if value not in words:
            problems.append(f"{name} must be {' or '.join(map(repr, words))} (got {value!r})")
    return problems


#: The config of a run given none, built once (a config is frozen, so one can be shared).
DEFAULT_CONFIG = AgentConfig()
