"""primer.harness."""
