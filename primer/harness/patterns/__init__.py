"""primer.harness.patterns."""
