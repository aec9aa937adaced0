"""`ladder fit` commands (being built)."""
