"""`ladder pull` commands (being built)."""
