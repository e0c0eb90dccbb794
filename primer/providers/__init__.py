"""primer.providers."""
