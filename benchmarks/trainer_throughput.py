"""Training throughput of every run of a ladder plan beside the machine's measured matmul peak.

For each run (rungs, then the hero) it compiles the trainer's real train step, runs a few warm-up
steps, then times `--steps` steps the way the train loop runs them (each step's metrics fetched
while the next step runs) and prints tokens/s, model FLOP/s (3 × forward FLOPs per token with the
output head × tokens/s) and their ratio to the float32 matmul peak measured in the same process
(our CPU MFU), plus the compile time and the time of one evaluation of the held-out set (as
trained and dropless). No files are written.

`--baseline DIR` compares with the trainer of another checkout of this repository (for example
``git worktree add /tmp/before HEAD``): every run is measured in fresh processes, alternating
between DIR's trainer and this one, `--rounds` times each, and the table gives the medians and the
speedup. Timings on a shared machine drift from minute to minute; alternating keeps both sides
under the same conditions.

    .venv/bin/python benchmarks/trainer_throughput.py                      # micro-cpu, 20 steps each
    .venv/bin/python benchmarks/trainer_throughput.py --steps 10 --set tpp=2 --json
    .venv/bin/python benchmarks/trainer_throughput.py --baseline /tmp/before --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ladder.config.plan import override, plan
from ladder.config.recipe import load_recipe
from ladder.config.runconfig import RunConfig
from trainer_jax.checkpoint import abstract_like
from trainer_jax.data import make_source
from trainer_jax.mesh import batch_sharding, make_mesh, replicated, tree_shardings
from trainer_jax.model import init_params, param_count
from trainer_jax.throughput import measure_matmul_peak, model_flops_per_token
from trainer_jax.train import Evaluator, make_optimizer, make_train_step


def tune_host() -> None:
    """The trainer process's host settings (`python -m trainer_jax` applies them), where this
    checkout's trainer has them: a baseline checkout may predate them."""
    try:
        from trainer_jax.host import reuse_freed_memory
    except ImportError:
        return
    reuse_freed_memory()


def bench_run(cfg: RunConfig, steps: int, dtype: str = "float32", warmup: int = 3) -> dict[str, float]:
    mesh = make_mesh(cfg.spec, cfg.batch_size)
    optimizer = make_optimizer(cfg)

    def init_state(key: jax.Array) -> dict:
        params = init_params(cfg.spec, key)
        return {"params": params, "opt_state": optimizer.init(params), "step": jnp.zeros((), jnp.int32)}

    shapes = jax.eval_shape(init_state, jax.random.key(0))
    state_sh = tree_shardings(shapes, mesh)
    state = jax.jit(init_state, out_shardings=state_sh)(jax.random.key(0))
    batch_sh = batch_sharding(mesh)
    batch_shape = jax.ShapeDtypeStruct((cfg.batch_size, cfg.seq_len + 1), jnp.int32, sharding=batch_sh)
    t0 = time.perf_counter()
    step = jax.jit(make_train_step(cfg, mesh, optimizer, jnp.dtype(dtype)), in_shardings=(state_sh, batch_sh),
                   out_shardings=(state_sh, replicated(mesh)), donate_argnums=0,
                   ).lower(abstract_like(shapes, state_sh), batch_shape).compile()
    compile_seconds = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    tokens = jax.device_put(
        rng.integers(0, cfg.spec.vocab_size, (cfg.batch_size, cfg.seq_len + 1), dtype=np.int32), batch_sh)
    for _ in range(warmup):
        state, metrics = step(state, tokens)
    jax.block_until_ready(metrics)
    t0 = time.perf_counter()
    for _ in range(steps):
        state, latest = step(state, tokens)
        jax.device_get(metrics)  # the train loop fetches each step's metrics while the next one runs
        metrics = latest
    jax.device_get(metrics)
    dt = (time.perf_counter() - t0) / steps
    tps = cfg.tokens_per_step / dt

    t0 = time.perf_counter()
    evaluator = Evaluator(cfg, mesh, make_source(cfg), abstract_like(shapes["params"], state_sh["params"]))
    eval_compile_seconds = time.perf_counter() - t0
    evaluator(state["params"])
    t0 = time.perf_counter()
    evaluator(state["params"])
    eval_seconds = time.perf_counter() - t0
    return {
        "name": cfg.name,
        "active_params": cfg.spec.active_params(),
        "total_params_exact": param_count(shapes["params"]),
        "tokens_per_step": cfg.tokens_per_step,
        "seconds_per_step": dt,
        "tokens_per_second": tps,
        "model_flops_per_second": tps * model_flops_per_token(cfg),
        "planned_steps": cfg.stop_after_steps,
        "planned_train_seconds": dt * cfg.stop_after_steps,
        "compile_seconds": compile_seconds,
        "eval_compile_seconds": eval_compile_seconds,
        "eval_seconds": eval_seconds,
    }


def compare(args: argparse.Namespace, names: list[str]) -> None:
    """Alternate fresh processes of the baseline checkout's trainer and this one, run by run."""
    here = Path(__file__).resolve()
    sides = {"before": str(Path(args.baseline).resolve()), "after": str(here.parents[1])}
    common = [sys.executable, str(here), "--preset", args.preset, "--steps", str(args.steps), "--dtype", args.dtype,
              "--json", *[x for s in args.sets for x in ("--set", s)]]
    keys = ("seconds_per_step", "tokens_per_second", "compile_seconds", "eval_seconds")
    rows = []
    for name in names:
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                out = subprocess.run([*common, "--only", name], env={**os.environ, "PYTHONPATH": sides[side]},
                                     cwd=sides[side], capture_output=True, text=True, check=True)
                runs[side].append(json.loads(out.stdout)["runs"][0])
        med = {side: {k: float(np.median([x[k] for x in v])) for k in keys} for side, v in runs.items()}
        b, a = med["before"], med["after"]
        rows.append({"name": name, "before": b, "after": a, "speedup": b["seconds_per_step"] / a["seconds_per_step"]})
        if not args.json:
            print(f"{name:<18} tok/s {b['tokens_per_second']:>9,.0f} → {a['tokens_per_second']:>9,.0f} "
                  f"({rows[-1]['speedup']:.2f}×)   compile {b['compile_seconds']:.1f} → {a['compile_seconds']:.1f} s"
                  f"   eval {b['eval_seconds']:.2f} → {a['eval_seconds']:.2f} s", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="micro-cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="Recipe override, e.g. tpp=2.")
    parser.add_argument("--only", default=None, help="Benchmark only the run with this name.")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="Compute dtype of the forward pass (master weights stay float32).")
    parser.add_argument("--peak", type=float, default=None,
                        help="The chip's peak FLOP/s for MFU (e.g. 989e12 for H100/H200 dense bf16); "
                        "default: the measured matmul peak.")
    parser.add_argument("--baseline", default=None,
                        help="Another checkout of this repository to compare with, in alternating processes.")
    parser.add_argument("--rounds", type=int, default=3, help="Processes per side and run with --baseline.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object instead of a table.")
    args = parser.parse_args()
    p = plan(override(load_recipe(args.preset), sets=args.sets))
    names = [cfg.name for cfg in p.runs() if args.only in (None, cfg.name)]
    if args.baseline:
        compare(args, names)
        return
    tune_host()
    matmul_dtype = jnp.dtype(args.dtype)
    peak_before = measure_matmul_peak(dtype=matmul_dtype)
    rows = [bench_run(cfg, args.steps, args.dtype) for cfg in p.runs() if cfg.name in names]
    measured = max(peak_before, measure_matmul_peak(dtype=matmul_dtype))
    peak = args.peak or measured
    for r in rows:
        r["mfu"] = r["model_flops_per_second"] / peak
    out = {"backend": jax.default_backend(), "devices": jax.device_count(), "dtype": args.dtype,
           "matmul_peak_flops": measured, "mfu_peak_flops": peak,
           "peak_method": f"best of 5 {args.dtype} 1024x1024 matmuls, before and after the runs", "runs": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"backend {out['backend']} × {out['devices']}, {args.dtype}; measured matmul peak "
          f"{measured / 1e9:.1f} GFLOP/s; MFU against {peak / 1e9:.1f} GFLOP/s")
    print(f"{'run':<18}{'active':>9}{'tok/step':>9}{'s/step':>9}{'tok/s':>10}{'GFLOP/s':>9}{'MFU':>7}{'plan s':>8}"
          f"{'compile':>9}{'eval s':>8}")
    for r in rows:
        print(f"{r['name']:<18}{r['active_params']:>9,}{r['tokens_per_step']:>9,}{r['seconds_per_step']:>9.4f}"
              f"{r['tokens_per_second']:>10,.0f}{r['model_flops_per_second'] / 1e9:>9.2f}{r['mfu']:>7.1%}"
              f"{r['planned_train_seconds']:>8.0f}{r['compile_seconds']:>9.1f}{r['eval_seconds']:>8.2f}")


if __name__ == "__main__":
    main()
