"""The device mesh (`data` × `expert` axes), where each array lives on it, and multi-host start-up.

Every device holds a slice of the batch (the batch is split over both axes); routed experts are
split over the `expert` axis and every other parameter is replicated. The mesh is a property of
the machine, not of the run: the same run gives the same losses on any mesh, because MoE capacity
is per sequence (see `model.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ladder.config.spec import ModelSpec
from ladder.errors import LadderError

DATA_AXIS = "data"
EXPERT_AXIS = "expert"
BATCH_AXES = (DATA_AXIS, EXPERT_AXIS)
"""The batch (its leading dimension) is split over every device."""
EXPERT_KEY = "experts"
"""Parameter subtrees under this key hold routed experts, stacked on their leading dimension."""


def default_expert_parallel(n_devices: int, spec: ModelSpec) -> int:
    """The largest device count that divides both the devices and the experts (1 for dense)."""
    if not spec.n_experts:
        return 1
    return max(k for k in range(1, n_devices + 1) if n_devices % k == 0 and spec.n_experts % k == 0)


def make_mesh(
    spec: ModelSpec, batch_size: int, expert_parallel: int | None = None, devices: Sequence[Any] | None = None
) -> Mesh:
    """A (data, expert) mesh over `devices` (default: all), checked against the run's shapes."""
    devices = list(devices if devices is not None else jax.devices())
    n = len(devices)
    ep = default_expert_parallel(n, spec) if expert_parallel is None else expert_parallel
    if ep <= 0 or n % ep:
        raise LadderError(f"expert parallelism {ep} must be positive and divide the {n} devices")
    if spec.n_experts and spec.n_experts % ep:
        raise LadderError(
            f"n_experts={spec.n_experts} is not divisible by the expert-parallel size {ep}: "
            f"choose an expert-parallel size that divides both {spec.n_experts} and {n}"
        )
    if not spec.n_experts and ep != 1:
        raise LadderError(f"a dense model (n_experts=0) cannot be split over {ep} expert devices")
    if batch_size % n:
        raise LadderError(
            f"batch_size={batch_size} is not divisible by the {n} devices the batch is split over: "
            f"use a multiple of {n}"
        )
    return Mesh(np.array(devices).reshape(n // ep, ep), BATCH_AXES)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def tree_shardings(tree: Any, mesh: Mesh) -> Any:
    """Shardings for a parameter-shaped tree (params, optimizer state): experts split, rest replicated."""

    def place(path: tuple[Any, ...], leaf: Any) -> NamedSharding:
        keys = {getattr(k, "key", None) for k in path}
        if EXPERT_KEY in keys and getattr(leaf, "ndim", 0) >= 1:
            return NamedSharding(mesh, P(EXPERT_AXIS))
        return NamedSharding(mesh, P())

    return jax.tree_util.tree_map_with_path(place, tree)


def init_distributed(coordinator: str | None, num_processes: int, process_id: int) -> None:
    """Join a multi-process job (one process per host); nothing to do for a single process.

    Arguments win over the environment (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID).
    """
    flagged = bool(coordinator)  # given on the command line, not by the environment
    where = "--coordinator" if flagged else "JAX_COORDINATOR_ADDRESS"
    coordinator = coordinator or os.environ.get("JAX_COORDINATOR_ADDRESS")
    num_processes = num_processes or _env_int("JAX_NUM_PROCESSES", 1)
    if num_processes <= 1:
        flags = [f"--process-id {process_id}"] * (process_id > 0) + [f"--coordinator {coordinator}"] * flagged
        if flags:  # a flag of a multi-process run, for one process: it would be passed over
            raise LadderError(f"{' and '.join(flags)} {'are' if len(flags) > 1 else 'is'} for a multi-process run, and "
                              f"this one has {max(num_processes, 1)} process: give --num-processes N (2 or more), or "
                              f"leave {'them' if len(flags) > 1 else 'it'} out to train as one process")
        return
    if not coordinator:
        raise LadderError(f"{num_processes} processes need a coordinator address (host:port)")
    _check_address(where, coordinator)
    pid = process_id if process_id >= 0 else _env_int("JAX_PROCESS_ID", -1)
    if not 0 <= pid < num_processes:
        raise LadderError(f"process id {pid} must be in 0..{num_processes - 1}")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=pid)


def _check_address(where: str, address: str) -> None:
    """`address` is host:port (an IPv6 host in brackets), the form JAX's coordinator takes."""
    host, colon, port = address.rpartition(":")
    if not colon or not host.strip("[]"):
        raise LadderError(f"{where} {address!r}: expected host:port, e.g. 10.0.0.1:8476 (process 0's address)")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise LadderError(f"{where} {address!r}: port {port!r} must be a number from 1 to 65535")


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        raise LadderError(f"{name}={text!r} must be an integer") from None
