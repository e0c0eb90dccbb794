"""The primer's agent library: one import for the lessons.

``from primer.agents import run_agent, AgentConfig, ScriptedLLM, tool, ...``

Importing this package loads only the loop and its parts; plotting, widgets, the
``anthropic`` SDK, OpenTelemetry, Dask and the async loop (``asyncio``) are imported by the
modules that need them, when they are used.
"""

from .agent_loop import continue_run, run_agent
from .checkpoint import (
    ApprovalDesk,
    CheckpointError,
    approve,
    list_checkpoints,
    read_checkpoint,
    reject,
    resume,
)
from .config import AgentConfig
from .cost import Prices, cost_usd
from .eval_results import pass_at_k, pass_hat_k, wilson_interval
from .evals import EvalReport, EvalRow, EvalSummary, EvalTask, run_evals, task_from_trace
from .exits import HANDOFF_TOOL_DEF, HANDOFF_TOOL_NAME, handoff_tool
from .fallback import FallbackLLM, usage_by_model
from .history import repair_history
from .hooks import Hooks
from .llm import (
    LLM,
    STOP_REASONS,
    Reply,
    ScriptedLLM,
    ScriptExhausted,
    Usage,
    estimate_tokens,
    text_reply,
    tool_reply,
)
from .messages import (
    assistant_message,
    text_block,
    text_of,
    tool_result_block,
    tool_use_block,
    tool_uses_of,
    user_message,
)
from .production import ToolRunner
from .replay import Divergence, ReplayLLM, ReplayResult, replay
from .result import AgentResult, format_trace_table
from .retry import ManualClock, RateLimited, RetryPolicy, ToolTimeout, TransientToolError
from .scorers import AnswerContains, CostUnder, ModelGraded, StopCauseIs, ToolsInOrder, Verdict
from .session import Session, SessionError, Turn
from .state import RunState, Step, Stop, StopCause
from .timeouts import in_subprocess, run_in_subprocess
from .tools import (
    Tool,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    execute_tools,
    result_text,
    tool,
)
from .trace import Trace, TraceError, TraceWriter, load_trace, redact

__all__ = [
    "HANDOFF_TOOL_DEF", "HANDOFF_TOOL_NAME", "LLM", "STOP_REASONS", "AgentConfig",
    "AgentResult", "Prices", "Reply", "RunState", "ScriptExhausted", "ScriptedLLM", "Step",
    "Stop", "StopCause", "Tool", "ToolError", "ToolExecution", "ToolRegistry", "Usage",
    "assistant_message", "continue_run", "cost_usd", "estimate_tokens", "execute_tools",
    "format_trace_table", "handoff_tool", "result_text", "run_agent", "text_block",
    "text_of", "text_reply", "tool", "tool_reply", "tool_result_block", "tool_use_block",
    "tool_uses_of", "user_message",
    "Divergence", "ReplayLLM", "ReplayResult", "Trace", "TraceError", "TraceWriter",
    "load_trace", "redact", "replay",
    "AnswerContains", "EvalReport", "EvalRow", "EvalSummary", "EvalTask", "StopCauseIs",
    "run_evals", "task_from_trace", "CostUnder", "ModelGraded", "ToolsInOrder", "Verdict",
    "pass_at_k", "pass_hat_k", "wilson_interval",
    "ManualClock", "RateLimited", "RetryPolicy", "ToolRunner", "ToolTimeout",
    "TransientToolError", "in_subprocess", "run_in_subprocess",
    "Hooks", "ToolOutput",
    "ApprovalDesk", "CheckpointError", "approve", "list_checkpoints", "read_checkpoint",
    "reject", "resume",
    "Session", "SessionError", "Turn", "repair_history",
    "FallbackLLM", "usage_by_model", "run_agent_async",
]

#: Names loaded on first use, so ``import primer.agents`` never imports an SDK.
_LAZY = {"ClaudeLLM": "claude", "AsyncClaudeLLM": "claude", "OpenAICompatLLM": "openai_compat",
         "run_agent_async": "async_loop",
         "FakeModelServer": "fake_server", "diagnose": "diagnosis", "Diagnosis": "diagnosis",
         "OTelSink": "otel", "SessionStore": "session_store"}


def __getattr__(name: str) -> object:
    """``primer.agents.ClaudeLLM`` and friends, imported from their module when first used."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
