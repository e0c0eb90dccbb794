"""agent-loop primer: the library behind the notebook course on how an LLM agent loop works.

The teaching core is :mod:`primer.loop` (it imports nothing else of ``primer``); the
production harness around it is :mod:`primer.harness`; :mod:`primer.providers` holds the
model adapters and MCP; :mod:`primer.scenarios` the small worlds the lessons run in;
:mod:`primer.views` widgets and figures; :mod:`primer.course` the exercise checks.

For notebooks, the public names are re-exported here (``from primer import run_agent``),
each loaded from its own module on first use, so ``import primer.loop`` stays light.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_HOMES: dict[str, str] = {
    "ApprovalRules": "primer.harness.approval_rules",
    "run_agent_async": "primer.harness.async_loop",
    "ApprovalDesk": "primer.harness.durable.checkpoint",
    "approve": "primer.harness.durable.checkpoint",
    "edit": "primer.harness.durable.checkpoint",
    "list_checkpoints": "primer.harness.durable.checkpoint",
    "read_checkpoint": "primer.harness.durable.checkpoint",
    "reject": "primer.harness.durable.checkpoint",
    "respond": "primer.harness.durable.checkpoint",
    "CheckpointError": "primer.harness.durable.keystore",
    "resume": "primer.harness.durable.resume",
    "EvalRow": "primer.harness.evals.results",
    "EvalSummary": "primer.harness.evals.results",
    "pass_at_k": "primer.harness.evals.results",
    "pass_hat_k": "primer.harness.evals.results",
    "wilson_interval": "primer.harness.evals.results",
    "EvalReport": "primer.harness.evals.run",
    "EvalTask": "primer.harness.evals.run",
    "run_evals": "primer.harness.evals.run",
    "task_from_trace": "primer.harness.evals.run",
    "AnswerContains": "primer.harness.evals.scorers",
    "CostUnder": "primer.harness.evals.scorers",
    "ModelGraded": "primer.harness.evals.scorers",
    "StopCauseIs": "primer.harness.evals.scorers",
    "ToolsInOrder": "primer.harness.evals.scorers",
    "Verdict": "primer.harness.evals.scorers",
    "FallbackLLM": "primer.harness.fallback",
    "usage_by_model": "primer.harness.fallback",
    "Hooks": "primer.harness.hooks",
    "run_production": "primer.harness.production",
    "ManualClock": "primer.harness.retry",
    "RateLimited": "primer.harness.retry",
    "ToolTimeout": "primer.harness.retry",
    "TransientToolError": "primer.harness.retry",
    "ToolRunner": "primer.harness.runner",
    "Session": "primer.harness.sessions.session",
    "SessionError": "primer.harness.sessions.session",
    "Turn": "primer.harness.sessions.session",
    "SessionStore": "primer.harness.sessions.store",
    "StreamingScriptedLLM": "primer.harness.streaming",
    "in_subprocess": "primer.harness.timeouts",
    "run_in_subprocess": "primer.harness.timeouts",
    "Diagnosis": "primer.harness.tracing.diagnosis",
    "diagnose": "primer.harness.tracing.diagnosis",
    "OTelSink": "primer.harness.tracing.otel",
    "redact": "primer.harness.tracing.redaction",
    "Divergence": "primer.harness.tracing.replay",
    "ReplayLLM": "primer.harness.tracing.replay",
    "ReplayResult": "primer.harness.tracing.replay",
    "replay": "primer.harness.tracing.replay",
    "Trace": "primer.harness.tracing.trace",
    "TraceWriter": "primer.harness.tracing.trace",
    "load_trace": "primer.harness.tracing.trace",
    "TraceError": "primer.harness.tracing.trace_check",
    "HANDOFF_TOOL_DEF": "primer.loop.state",
    "HANDOFF_TOOL_NAME": "primer.loop.state",
    "handoff_tool": "primer.loop.state",
    "AgentConfig": "primer.loop.config",
    "RetryPolicy": "primer.loop.config",
    "Prices": "primer.loop.model",
    "cost_usd": "primer.loop.model",
    "continue_run": "primer.loop.loop",
    "drive": "primer.loop.loop",
    "run_agent": "primer.loop.loop",
    "start_run": "primer.loop.loop",
    "assistant_message": "primer.loop.messages",
    "repair_history": "primer.loop.messages",
    "text_block": "primer.loop.messages",
    "text_of": "primer.loop.messages",
    "tool_result_block": "primer.loop.messages",
    "tool_use_block": "primer.loop.messages",
    "tool_uses_of": "primer.loop.messages",
    "user_message": "primer.loop.messages",
    "run_mini": "primer.loop.mini",
    "ten_line_loop": "primer.loop.mini",
    "LLM": "primer.loop.model",
    "Reply": "primer.loop.model",
    "STOP_REASONS": "primer.loop.model",
    "ScriptExhausted": "primer.loop.model",
    "ScriptedLLM": "primer.loop.model",
    "Usage": "primer.loop.model",
    "estimate_tokens": "primer.loop.model",
    "text_reply": "primer.loop.model",
    "tool_reply": "primer.loop.model",
    "AgentResult": "primer.loop.result",
    "format_trace_table": "primer.loop.result",
    "RunInputs": "primer.loop.state",
    "RunState": "primer.loop.state",
    "Step": "primer.loop.state",
    "Stop": "primer.loop.state",
    "StopCause": "primer.loop.state",
    "ModelCall": "primer.loop.steps",
    "Sleep": "primer.loop.steps",
    "ToolCalls": "primer.loop.steps",
    "Tool": "primer.loop.tools",
    "ToolError": "primer.loop.tools",
    "ToolExecution": "primer.loop.tools",
    "ToolOutput": "primer.loop.tools",
    "ToolRegistry": "primer.loop.tools",
    "execute_tools": "primer.loop.steps",
    "result_text": "primer.loop.messages",
    "tool": "primer.loop.tools",
    "AsyncClaudeLLM": "primer.providers.claude",
    "ClaudeLLM": "primer.providers.claude",
    "FakeModelServer": "primer.providers.fake_server",
    "OpenAICompatLLM": "primer.providers.openai_compat",
    "Quiz": "primer.course.quiz",
    "QuizError": "primer.course.quiz",
    "load_quiz": "primer.course.quiz",
    "quiz_widget": "primer.views.quiz_widget",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> object:
    """``primer.run_agent`` and friends, imported from their module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (and the package's own), for tab completion: not its imports."""
    return sorted({*_HOMES, "__version__"})
