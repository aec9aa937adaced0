"""The package's public names: each one resolves, and none hides a submodule of the same name."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types

import ladder


def test_ladder_plan_is_the_planner_module_whichever_way_it_is_imported():
    import ladder.plan as by_import_as
    from ladder import plan as by_from_import

    module = sys.modules["ladder.plan"]
    assert isinstance(ladder.plan, types.ModuleType)
    assert ladder.plan is module and by_import_as is module and by_from_import is module
    assert importlib.import_module("ladder.plan") is module


def test_the_planner_functions_stay_reachable():
    from ladder.plan import Plan, override, plan, with_resources

    recipe = ladder.load_recipe("micro-cpu")
    planned = ladder.plan.plan(recipe)
    assert isinstance(planned, ladder.Plan) and ladder.Plan is Plan
    assert plan(override(recipe, tpp=40)).recipe.tpp == 40
    assert with_resources(planned, planned.rungs[0].resources, hero_hosts=2).hero.resources.hosts == 2


def test_every_public_name_resolves_and_no_name_hides_a_submodule():
    for name in ladder.__all__:
        assert hasattr(ladder, name), name
    submodules = {m.name for m in pkgutil.iter_modules(ladder.__path__)}
    for name in submodules & set(vars(ladder)):
        value = getattr(ladder, name)
        assert isinstance(value, types.ModuleType) and value.__name__ == f"ladder.{name}", (
            f"ladder.{name} is {value!r}, which hides the submodule ladder.{name}"
        )
