"""primer.course."""
