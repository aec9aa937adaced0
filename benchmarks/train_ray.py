"""Wall time of training the micro-cpu ladder's four rungs one after another, and with `--ray`.

Plans the rungs twice (two folders, nothing shared, no compilation cache) and trains them:

1. one after another, each with `ladder train RUN.yaml` (what `ladder train --ladder` does), timing
   each run's process;
2. all at once with `ladder train --ladder DIR --rungs-only --ray --ray-cpus N` on a local Ray
   instance, timing the whole command (Ray's start and stop included).

It checks that both give every rung the same final eval loss, and prints one table: each rung's
time alone, the two totals, and what the ladder would take with one device per rung (the longest
rung alone plus Ray's own overhead, as measured here).

    .venv/bin/python benchmarks/train_ray.py                 # 2 CPUs for Ray
    .venv/bin/python benchmarks/train_ray.py --cpus 4 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ladder.launch import final_eval_loss, ladder_runs, run_dir_of

LADDER = Path(sys.executable).parent / "ladder"


def plan_rungs(folder: Path) -> None:
    subprocess.run([str(LADDER), "plan", "micro-cpu", "--out", str(folder)], check=True, capture_output=True)
    for hero in folder.glob("hero-*.yaml"):
        hero.unlink()


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    if res.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=2, help="CPUs the local Ray instance offers.")
    parser.add_argument("--out", type=Path, default=None, help="Keep the two ladders here (default: a temporary folder).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON too.")
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="train_ray_"))
    sequential, on_ray = root / "sequential", root / "ray"
    for folder in (sequential, on_ray):
        if folder.exists():
            sys.exit(f"{folder} exists: give an --out folder without earlier results")
        plan_rungs(folder)

    alone = {}
    for path, cfg in ladder_runs(sequential, rungs_only=True):
        alone[cfg.name] = timed([str(LADDER), "train", str(path), "--no-progress"])
        print(f"{cfg.name}: {alone[cfg.name]:.1f} s alone", flush=True)
    ray_wall = timed([str(LADDER), "train", "--ladder", str(on_ray), "--rungs-only", "--ray", "--ray-cpus",
                      str(args.cpus), "--format", "json"])
    print(f"--ray on {args.cpus} CPUs: {ray_wall:.1f} s", flush=True)

    losses = {}
    for (pa, ca), (pb, cb) in zip(ladder_runs(sequential, True), ladder_runs(on_ray, True)):
        a, b = final_eval_loss(run_dir_of(pa, ca)), final_eval_loss(run_dir_of(pb, cb))
        if a is None or b is None or abs(a - b) > 1e-5:
            sys.exit(f"{ca.name}: final eval/loss {a} one after another but {b} with --ray")
        losses[ca.name] = a
    total = sum(alone.values())
    ray_overhead = ray_start_stop(args.cpus)
    one_device_each = max(alone.values()) + ray_overhead
    rows = [(name, f"{t:.1f} s", f"{losses[name]:.4f}") for name, t in alone.items()]
    print("\n| run | alone | final eval/loss (both) |\n|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\n| how | wall time | vs one after another |\n|---|---:|---:|")
    print(f"| one after another (`ladder train RUN.yaml` × {len(alone)}) | {total:.1f} s | 1.00× |")
    print(f"| `--ray` on {args.cpus} CPUs | {ray_wall:.1f} s | {total / ray_wall:.2f}× |")
    print(f"| one device per rung (longest rung + Ray start/stop {ray_overhead:.1f} s) | {one_device_each:.1f} s | "
          f"{total / one_device_each:.2f}× |")
    if args.json:
        print(json.dumps({"alone_s": alone, "sequential_s": total, "ray_s": ray_wall, "ray_cpus": args.cpus,
                          "ray_start_stop_s": ray_overhead, "one_device_per_rung_s": one_device_each,
                          "final_eval_loss": losses}))


def ray_start_stop(cpus: int) -> float:
    """Seconds to start a local Ray instance, run one empty task and shut it down."""
    code = (f"import logging, ray; ray.init(num_cpus={cpus}, include_dashboard=False, logging_level=logging.ERROR); "
            "ray.get(ray.remote(lambda: 0).remote()); ray.shutdown()")
    return timed([sys.executable, "-c", code])


if __name__ == "__main__":
    main()
