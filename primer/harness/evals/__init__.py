"""primer.harness.evals."""
