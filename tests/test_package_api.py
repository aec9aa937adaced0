"""The package's public names: each one resolves, and none hides a submodule of the same name."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import types

import pytest

import ladder


def test_ladder_plan_is_the_planner_module_whichever_way_it_is_imported():
    import ladder.config.plan as by_import_as
    from ladder import plan as by_name
    from ladder.config import plan as by_from_import

    module = sys.modules["ladder.config.plan"]
    assert isinstance(ladder.plan, types.ModuleType)
    assert ladder.plan is module and by_name is module and by_import_as is module and by_from_import is module
    assert importlib.import_module("ladder.config.plan") is module


def test_the_planner_functions_stay_reachable():
    from ladder.config.plan import Plan, override, plan, with_resources

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


def test_the_trainer_package_loads_jax_only_when_a_name_is_used():
    """`python -m trainer_jax` installs its stop handlers before JAX loads (seconds), so a stop then marks
    the run crashed; every public name still resolves, and `train` stays the function."""
    import subprocess

    code = ("import sys, trainer_jax; assert 'jax' not in sys.modules; "
            "import trainer_jax.train as module_import; from trainer_jax import train, make_mesh, markov_chain; "
            "assert callable(train) and train is trainer_jax.train and train.__module__ == 'trainer_jax.train'; "
            "assert sorted(trainer_jax.__all__) == sorted(n for n in dir(trainer_jax) if n in trainer_jax.__all__); "
            "print('jax' in sys.modules, type(sys.modules['trainer_jax.train']).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["True", "module"], out.stderr
    import trainer_jax

    for name in trainer_jax.__all__:
        assert getattr(trainer_jax, name).__name__ == name
    with pytest.raises(AttributeError, match="no_such_name"):
        trainer_jax.__getattr__("no_such_name")
