"""primer.harness.sessions."""
