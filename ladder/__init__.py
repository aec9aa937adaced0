"""scaling-ladder: plan a ladder of small runs, fit scaling laws, predict and watch the hero run.

`ladder.plan` is the planner module: ``ladder.plan.plan(recipe)`` plans a ladder, ``ladder.plan.override``
changes a recipe first (a function of the same name here would hide the module).
"""

from ladder import plan
from ladder.errors import LadderError
from ladder.plan import Plan
from ladder.recipe import (
    ArchRules,
    LRRule,
    PlannedEdit,
    Recipe,
    RunShape,
    ScheduleRule,
    load_recipe,
    preset_names,
)
from ladder.runconfig import (
    CheckpointConfig,
    DataConfig,
    EvalConfig,
    LoggingConfig,
    MoELossConfig,
    OptimizerConfig,
    RunConfig,
)
from ladder.schedule import Schedule, ScheduleEdit, SeqPhase
from ladder.spec import ModelSpec, format_count

__all__ = [
    "ArchRules",
    "CheckpointConfig",
    "DataConfig",
    "EvalConfig",
    "LadderError",
    "LRRule",
    "LoggingConfig",
    "ModelSpec",
    "MoELossConfig",
    "OptimizerConfig",
    "Plan",
    "PlannedEdit",
    "Recipe",
    "RunConfig",
    "RunShape",
    "Schedule",
    "ScheduleEdit",
    "ScheduleRule",
    "SeqPhase",
    "format_count",
    "load_recipe",
    "plan",
    "preset_names",
]
