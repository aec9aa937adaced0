"""The thin JAX Mixture-of-Experts trainer: one planner `RunConfig` in, one finished run out.

Public API: `train` (the whole run), the model's pure functions (`init_params`, `forward`), the
data sources (`make_source`, `markov_chain`) and the mesh (`make_mesh`). Run it from the command
line as ``python -m trainer_jax RUN.yaml [--resume]``.

Each name is imported when first used, so ``python -m trainer_jax`` takes its stop signals before
JAX loads (seconds), and a run interrupted then is marked crashed, not left running.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

_WHERE = {
    "DataSource": "data",
    "make_source": "data",
    "markov_chain": "data",
    "init_distributed": "mesh",
    "make_mesh": "mesh",
    "forward": "model",
    "init_params": "model",
    "param_count": "model",
    "TrainResult": "train",
    "check_config": "train",
    "train": "train",
}

if TYPE_CHECKING:
    from trainer_jax.data import DataSource, make_source, markov_chain
    from trainer_jax.mesh import init_distributed, make_mesh
    from trainer_jax.model import forward, init_params, param_count
    from trainer_jax.train import TrainResult, check_config, train


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'trainer_jax' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trainer_jax.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


class _Package(types.ModuleType):
    """Importing the submodule `trainer_jax.train` sets the package's `train` to it; the function stays."""

    def __setattr__(self, name: str, value) -> None:
        if name == "train" and isinstance(value, types.ModuleType):
            value = value.train
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "DataSource",
    "TrainResult",
    "check_config",
    "forward",
    "init_distributed",
    "init_params",
    "make_mesh",
    "make_source",
    "markov_chain",
    "param_count",
    "train",
]
