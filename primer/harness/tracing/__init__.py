"""primer.harness.tracing."""
