"""A live hero whose LR is only logged, predicted with `ladder predict --target-run`, with and without its schedule.

    .venv/bin/python benchmarks/live_hero_lr.py [--n-boot 200]

The OLMo ladder's four smaller sizes are the rungs (logged LR, as the README's walkthrough imports them). The
3.2B at 1×C is the hero, still running, with its evals and LR logged to half its plan. It is predicted
three ways through the CLI: from the store alone (the LR logged to half way, carried on in the shape of the
rungs at its token ratio: the prediction says so in a warning); with its cosine schedule declared in a coordinates file (the run as planned);
and from a target file with that schedule (`--target`, the walkthrough's route). Printed beside the
3.2B's actual final loss.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from benchmarks.own_ladder_cli import ladder, write  # noqa: E402

HERO_SIZE, HERO_LENGTH = "3.2B", 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200)
    args = ap.parse_args()
    lad, runs = ds.olmo_ladder()
    hero = runs[(runs["size"] == HERO_SIZE) & (runs["length_multiplier_xC"] == HERO_LENGTH)].iloc[0]
    T, name = int(hero["total_steps"]), str(hero["run_id"])
    curve = lad[lad["run_id"] == name].sort_values("step")
    actual = float(curve["loss"].iloc[-1])
    evals = lad.merge(runs[["run_id", "total_steps"]], on="run_id")
    evals = evals[(evals["size"] != HERO_SIZE) | ((evals["run_id"] == name) & (evals["step"] <= T // 2))]
    evals = evals.assign(group="olmo", role=(evals["run_id"] == name).map({True: "hero", False: "rung"}),
                         state=(evals["run_id"] == name).map({True: "running", False: "finished"}))
    schedule = {"peak_lr": float(hero["peak_lr"]), "total_steps": T, "warmup_steps": ds.OLMO_WARMUP[HERO_SIZE],
                "decay": "cosine", "min_lr_ratio": 0.1}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        evals.to_csv(work / "olmo.csv", index=False)
        imported = ["import", "csv", str(work / "olmo.csv"), "--run", "run_id", "--step", "step", "--tokens", "tokens",
                    "--metric", "eval/loss=loss", "--metric", "optim/learning_rate=lr",
                    "--coord-column", "active_params=params_nonembed",
                    "--coord-column", "fit_flops_per_token=flops_per_token",
                    "--coord-column", "stop_after_steps=total_steps", "--coord-column", "tokens_per_step=batch_size_tokens",
                    "--coord-column", "group=group", "--coord-column", "role=role"]
        ladder(*imported, "--store", str(work / "logged"))
        coords = write(work / "coords.yaml", {name: {"schedule": schedule}})
        ladder(*imported, "--store", str(work / "declared"), "--coords", str(coords))
        g = curve.iloc[0]
        target = write(work / "hero.yaml", {"name": name, "group": "olmo", "active_params": int(hero["params_nonembed"]),
                                            "fit_flops_per_token": float(g["flops_per_token"]), "stop_after_steps": T,
                                            "tokens_per_step": int(hero["batch_size_tokens"]), "schedule": schedule})
        for how, store, given in (("--target-run, LR logged to half way", "logged", ["--target-run", name]),
                                  ("--target-run, schedule in --coords", "declared", ["--target-run", name]),
                                  ("--target FILE with the schedule", "logged", ["--target", str(target)])):
            start = time.perf_counter()
            out = json.loads(ladder("predict", *given, "--store", str(work / store), "--n-boot", str(args.n_boot),
                                    "--out", str(work / f"pred-{len(rows)}"), "--format", "json"))
            held = any("its LR is logged to step" in w for w in out["warnings"])
            rows.append((how, out["final"]["median"], out["method"], held, time.perf_counter() - start))
    print(f"{name}: {T:,} steps, logged to step {T // 2:,}; actual final eval/loss {actual:.4f}")
    print(f"{'how':38} {'final':>8} {'error':>8}  {'method':12} {'warned':>6} {'s':>4}")
    for how, final, method, held, secs in rows:
        print(f"{how:38} {final:8.4f} {final / actual - 1:+8.2%}  {method:12} {'yes' if held else 'no':>6} {secs:4.0f}")


if __name__ == "__main__":
    main()
