"""The thin JAX Mixture-of-Experts trainer: one planner `RunConfig` in, one finished run out.

Public API: `train` (the whole run), the model's pure functions (`init_params`, `forward`), the
data sources (`make_source`, `markov_chain`) and the mesh (`make_mesh`). Run it from the command
line as ``python -m trainer_jax RUN.yaml [--resume]``.
"""

from trainer_jax.data import DataSource, make_source, markov_chain
from trainer_jax.mesh import init_distributed, make_mesh
from trainer_jax.model import forward, init_params, param_count
from trainer_jax.train import TrainResult, check_config, train

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
