"""Model FLOPs and the machine's matmul peak, for throughput and MFU.

Model FLOPs per token are 3 × the spec's analytic forward FLOPs *with* the output head (the compute
the step really does; the fits' C leaves the head out). MFU is model FLOP/s over the peak, as a
fraction in [0, 1]. Without a peak in the config, the peak is measured: the best of a few timed
float32 square matmuls on the first device, which is what the CPU can reach on dense work.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from ladder.config.runconfig import RunConfig


def model_flops_per_token(cfg: RunConfig) -> float:
    return 3.0 * cfg.forward_flops_per_token(include_head=True)


def measure_matmul_peak(n: int = 1024, repeats: int = 5, dtype: jnp.dtype = jnp.float32) -> float:
    """FLOP/s of the fastest of `repeats` timed n×n @ n×n matmuls (after one warm-up call)."""
    device = jax.local_devices()[0]
    a = jax.device_put(jnp.ones((n, n), dtype), device)
    b = jax.device_put(jnp.full((n, n), 0.5, dtype), device)
    matmul = jax.jit(jnp.matmul)
    matmul(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best
