"""Public ladders through the CLI alone, against the leaderboard's rows for the same tasks.

    .venv/bin/python benchmarks/own_ladder_cli.py [--n-boot 200]

The OLMo ladder: the four smaller sizes imported with their logged LR (`ladder import csv`, as the
README's walkthrough does), the 3.2B run predicted at each of the five lengths from a target file
(`ladder predict --target`). The (Mis)Fitting ladder: every best-LR run of 12m–400m imported with its
cosine schedule declared in a coordinates file (nothing logged its LR), the 1B runs predicted from
target files. Each final prediction is printed beside the one `benchmarks/leaderboard.py` computes for
that task (`fits.predictor.predict` on the runs it builds itself). Both paths should give the same
numbers: one code path.
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
from benchmarks.fit_misfitting import best_lr_runs  # noqa: E402
from benchmarks.leaderboard import misfitting_tasks, olmo_tasks  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Options  # noqa: E402

LADDER = str(Path(sys.executable).parent / "ladder")
MISFITTING_WARMUP = 50


def ladder(*args: str) -> str:
    done = subprocess.run([LADDER, *args], capture_output=True, text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    if done.returncode:
        raise SystemExit(f"ladder {' '.join(args)} failed: {done.stderr or done.stdout}")
    return done.stdout


def olmo(work: Path):
    """Import the OLMo rungs; yield (task name, target file, planned steps)."""
    lad, runs = ds.olmo_ladder()
    evals = lad.merge(runs[["run_id", "total_steps"]], on="run_id")
    evals["role"] = (evals["size"] == "3.2B").map({True: "hero", False: "rung"})
    evals.assign(group="olmo").to_csv(work / "olmo.csv", index=False)
    ladder("import", "csv", str(work / "olmo.csv"), "--store", str(work / "olmo-store"), "--run", "run_id", "--step",
           "step", "--tokens", "tokens", "--metric", "eval/loss=loss", "--metric", "optim/learning_rate=lr",
           "--coord-column", "active_params=params_nonembed", "--coord-column", "fit_flops_per_token=flops_per_token",
           "--coord-column", "stop_after_steps=total_steps", "--coord-column", "tokens_per_step=batch_size_tokens",
           "--coord-column", "group=group", "--coord-column", "role=role")
    for _, r in runs[runs["size"] == "3.2B"].iterrows():
        name, T = f"olmo-3.2B-{float(r['length_multiplier_xC']):g}xC", int(r["total_steps"])
        g = lad[lad["run_id"] == r["run_id"]]
        target = {"name": r["run_id"], "group": "olmo", "active_params": int(r["params_nonembed"]),
                  "fit_flops_per_token": float(g["flops_per_token"].iloc[0]), "stop_after_steps": T,
                  "tokens_per_step": int(r["batch_size_tokens"]),
                  "schedule": {"peak_lr": float(r["peak_lr"]), "total_steps": T,
                               "warmup_steps": ds.OLMO_WARMUP["3.2B"], "decay": "cosine", "min_lr_ratio": 0.1}}
        yield name, write(work / f"{name}.yaml", target), work / "olmo-store", T


def misfitting(work: Path):
    """Import the (Mis)Fitting best-LR runs below 1B; yield (task name, target file, store, planned steps)."""
    df = best_lr_runs(ds.misfitting())
    df = df[df["step"] <= df["total_steps"]]
    df["role"] = (df["model"] == "misfitting_1b").map({True: "hero", False: "rung"})
    df.assign(group="misfitting").to_csv(work / "misfitting.csv", index=False)
    coords = {}
    for rid, g in df.groupby("run_id"):
        T = int(g["total_steps"].iloc[0])
        coords[rid] = {"active_params": float(g["params_nonembed"].iloc[0]), "stop_after_steps": T,
                       "tokens_per_step": float(g["tokens"].max() / g["step"].max()),
                       "schedule": {"peak_lr": float(g["peak_lr"].iloc[0]), "total_steps": T,
                                    "warmup_steps": MISFITTING_WARMUP, "decay": "cosine", "min_lr_ratio": 0.1}}
    write(work / "misfitting-coords.yaml", coords)
    ladder("import", "csv", str(work / "misfitting.csv"), "--store", str(work / "misfitting-store"), "--run", "run_id",
           "--step", "step", "--metric", "eval/loss=loss", "--coords", str(work / "misfitting-coords.yaml"),
           "--coord-column", "group=group", "--coord-column", "role=role")
    for rid, c in coords.items():
        if rid.startswith("misfitting_1b_") and c["stop_after_steps"] in (10000, 20000):
            name = f"misfitting-1b-T{c['stop_after_steps']}"
            yield name, write(work / f"{name}.yaml", {"name": rid, "group": "misfitting", **c}), \
                work / "misfitting-store", c["stop_after_steps"]


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()
    tasks = {t.name: t for t in olmo_tasks() + misfitting_tasks()}
    print(f"{'task':<22} {'CLI final':>10} {'leaderboard':>12} {'difference':>11} {'error':>8} {'CLI s':>6} {'core s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, target, store, T in [*olmo(work), *misfitting(work)]:
            t0 = time.time()
            out = json.loads(ladder("predict", "--target", str(target), "--store", str(store), "--out",
                                    str(work / name), "--n-boot", str(args.n_boot), "--format", "json"))
            t_cli = time.time() - t0
            t = tasks[name].targets[0]
            blank = dataclasses.replace(t, steps=np.zeros(0, np.int64), values=np.zeros(0))
            t0 = time.time()
            res = core.predict(tasks[name].runs, blank, np.array([T]), core.Settings(options=Options(n_boot=args.n_boot)))
            t_core = time.time() - t0
            cli, board = float(out["final"]["median"]), float(res.band.median[-1])
            print(f"{name:<22} {cli:>10.4f} {board:>12.4f} {cli - board:>+11.1e} {cli / float(t.values[-1]) - 1:>+8.2%} "
                  f"{t_cli:>6.0f} {t_core:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
