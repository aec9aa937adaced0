"""`ladder train` commands (being built)."""
