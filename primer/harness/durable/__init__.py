"""primer.harness.durable."""
