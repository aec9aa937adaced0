"""Configs and plans: model spec, schedule, run config, recipe, planner, YAML in and out, the bounds a number
must keep, the shipped presets. The trainer imports from here."""
