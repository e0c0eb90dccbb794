"""primer.loop."""
