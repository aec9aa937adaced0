"""Shipped recipe presets (YAML files)."""
