"""agent-loop primer: the library behind the notebook course on how an LLM agent loop works."""

__version__ = "0.1.0"
