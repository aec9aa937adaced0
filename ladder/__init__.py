"""scaling-ladder: plan a ladder of small runs, fit scaling laws, predict and watch the hero run.

`ladder.plan` is the planner module (`ladder.config.plan`): ``ladder.plan.plan(recipe)`` plans a ladder,
``ladder.plan.override`` changes a recipe first (a function of the same name here would hide the module).

The package's folders: `config` (specs, schedules, run configs, recipes, the planner), `data` (metric sources,
the store, a run as the laws see it), `predict` (the adapter to `fits`' prediction core, predictions, replans),
`watch` (live monitoring), `output` (figures, reports, terminal tables), `cluster` (Ray), `cli` (the commands).
"""

from ladder.config import plan
from ladder.config.plan import Plan
from ladder.config.recipe import (
    ArchRules,
    LRRule,
    PlannedEdit,
    Recipe,
    RunShape,
    ScheduleRule,
    load_recipe,
    preset_names,
)
from ladder.config.runconfig import (
    CheckpointConfig,
    DataConfig,
    EvalConfig,
    LoggingConfig,
    MoELossConfig,
    OptimizerConfig,
    RunConfig,
)
from ladder.config.schedule import Schedule, ScheduleEdit, SeqPhase
from ladder.config.spec import ModelSpec, format_count
from ladder.errors import LadderError

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
