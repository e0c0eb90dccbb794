"""The small worlds the lessons run in: tools plus scripted models, all offline.

Each scenario module registers its runnable demos in :data:`DEMOS` with :func:`register`.
A :class:`Scenario` bundles everything one run needs; ``scenario.run()`` runs it through
:func:`primer.loop.loop.run_agent` with a fresh scripted model, so two runs never share state.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from primer.harness.production import run_production
from primer.loop.config import AgentConfig
from primer.loop.model import LLM
from primer.loop.result import AgentResult
from primer.loop.tools import Tool


@dataclass
class Scenario:
    """One runnable demo: a task, its tools, a scripted model and the run's limits.

    ``make_tools`` and ``make_llm`` build fresh tools and a fresh model for each run (tools
    may hold state, such as a ledger; scripted models count their calls). ``config`` holds
    the limits the lesson uses for this demo. ``make_tools_in``, if set, builds the tools
    for a run that has a checkpoint directory, keeping their durable state there (the refund
    ledger), so a resume that reads the checkpoint finds the same state: see :meth:`tools`.
    """

    name: str
    description: str
    task: str
    make_tools: Callable[[], list[Tool]]
    make_llm: Callable[[], LLM]
    config: AgentConfig = field(default_factory=AgentConfig)
    system: str = ""
    make_tools_in: Callable[[Path], list[Tool]] | None = None

    def tools(self, directory: str | Path | None = None) -> list[Tool]:
        """Fresh tools for one run; ``directory`` is the run's checkpoint directory, if any
        (tools that keep durable state keep it there when ``make_tools_in`` is set)."""
        if directory is not None and self.make_tools_in is not None:
            return self.make_tools_in(Path(directory))
        return self.make_tools()

    def run(self, config: AgentConfig | None = None, *, trace: Any = None,
            llm: LLM | None = None, **overrides: Any) -> AgentResult:
        """Run the demo; ``config`` replaces its limits, ``overrides`` change single fields;
        ``trace`` (a file path) records the run there (see :mod:`primer.harness.tracing.trace`);
        ``llm`` replaces the scripted model (e.g. a ``ClaudeLLM`` for the same task).
        A checkpoint the run writes records this demo's name, so ``python -m primer resume``
        finds the model and tools again."""
        cfg = replace(config or self.config, **overrides) if overrides else (config or self.config)
        return run_production(llm or self.make_llm(), self.task, self.tools(cfg.checkpoint_dir),
                              system=self.system, config=cfg, trace=trace, scenario=self.name)


#: name → Scenario, filled by the scenario modules listed in :data:`SCENARIO_MODULES`.
DEMOS: dict[str, Scenario] = {}

#: Modules of ``primer.scenarios`` that register demos (imported by :func:`all_demos`).
SCENARIO_MODULES = ["orders", "hr", "burner", "refunds", "inventory", "support"]


def register(scenario: Scenario) -> Scenario:
    """Add ``scenario`` to :data:`DEMOS`; ``ValueError`` when the name is taken."""
    if scenario.name in DEMOS and DEMOS[scenario.name] is not scenario:
        raise ValueError(f"a demo named {scenario.name!r} is already registered")
    DEMOS[scenario.name] = scenario
    return scenario


def all_demos() -> dict[str, Scenario]:
    """Every registered demo, after importing each module of :data:`SCENARIO_MODULES`."""
    for name in SCENARIO_MODULES:
        importlib.import_module(f"primer.scenarios.{name}")
    return dict(DEMOS)


def get_demo(name: str) -> Scenario:
    """The demo called ``name``; ``KeyError`` with the list of known names otherwise."""
    demos = all_demos()
    if name not in demos:
        raise KeyError(f"no demo named {name!r}; known demos: {', '.join(sorted(demos))}")
    return demos[name]
