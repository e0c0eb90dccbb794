"""primer.views."""
