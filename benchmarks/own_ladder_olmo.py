"""The OLMo ladder through the CLI alone, against the leaderboard's rows for the same tasks.

    .venv/bin/python benchmarks/own_ladder_olmo.py [--n-boot 200]

Imports the four smaller OLMo sizes with their logged LR (`ladder import csv`, as the README's
walkthrough does), predicts the 3.2B run at each of the five lengths from a target file (`ladder
predict --target`), and prints each final prediction beside the one `benchmarks/leaderboard.py`
computes for that task (`fits.predictor.predict` on the runs it builds itself). Both paths should
give the same numbers: one code path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from benchmarks.leaderboard import olmo_tasks  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402

LADDER = str(Path(sys.executable).parent / "ladder")


def ladder(*args: str) -> str:
    done = subprocess.run([LADDER, *args], capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    if done.returncode:
        raise SystemExit(f"ladder {' '.join(args)} failed: {done.stderr or done.stdout}")
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()
    lad, runs = ds.olmo_ladder()
    tasks = {t.name: t for t in olmo_tasks()}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        evals = lad.merge(runs[["run_id", "total_steps"]], on="run_id")
        evals["role"] = (evals["size"] == "3.2B").map({True: "hero", False: "rung"})
        evals.assign(group="olmo").to_csv(work / "olmo.csv", index=False)
        ladder("import", "csv", str(work / "olmo.csv"), "--store", str(work / "store"), "--run", "run_id", "--step", "step",
               "--tokens", "tokens", "--metric", "eval/loss=loss", "--metric", "optim/learning_rate=lr",
               "--coord-column", "active_params=params_nonembed", "--coord-column", "fit_flops_per_token=flops_per_token",
               "--coord-column", "stop_after_steps=total_steps", "--coord-column", "tokens_per_step=batch_size_tokens",
               "--coord-column", "group=group", "--coord-column", "role=role")
        print(f"{'task':<18} {'CLI final':>10} {'leaderboard':>12} {'difference':>11} {'error':>8} {'CLI s':>6} {'core s':>7}")
        for _, r in runs[runs["size"] == "3.2B"].iterrows():
            m = float(r["length_multiplier_xC"])
            name = f"olmo-3.2B-{m:g}xC"
            T = int(r["total_steps"])
            g = lad[lad["run_id"] == r["run_id"]]
            target = {"name": r["run_id"], "group": "olmo", "active_params": int(r["params_nonembed"]),
                      "fit_flops_per_token": float(g["flops_per_token"].iloc[0]), "stop_after_steps": T,
                      "tokens_per_step": int(r["batch_size_tokens"]),
                      "schedule": {"peak_lr": float(r["peak_lr"]), "total_steps": T,
                                   "warmup_steps": ds.OLMO_WARMUP["3.2B"], "decay": "cosine", "min_lr_ratio": 0.1}}
            (work / f"{name}.yaml").write_text(yaml.safe_dump(target))
            t0 = time.time()
            out = json.loads(ladder("predict", "--target", str(work / f"{name}.yaml"), "--store", str(work / "store"),
                                    "--out", str(work / name), "--n-boot", str(args.n_boot), "--format", "json"))
            t_cli = time.time() - t0
            task = tasks[name]
            t = task.targets[0]
            blank = dataclasses.replace(t, steps=np.zeros(0, np.int64), values=np.zeros(0))
            t0 = time.time()
            res = core.predict(task.runs, blank, np.array([T]), core.Settings(options=Options(n_boot=args.n_boot)))
            t_core = time.time() - t0
            cli, board = float(out["final"]["median"]), float(res.band.median[-1])
            actual = float(t.values[-1])
            print(f"{name:<18} {cli:>10.4f} {board:>12.4f} {cli - board:>+11.1e} {cli / actual - 1:>+8.2%} "
                  f"{t_cli:>6.0f} {t_core:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
