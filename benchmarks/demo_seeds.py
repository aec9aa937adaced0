"""How noisy the demo's hero is: its final eval loss over training seeds.

    .venv/bin/python benchmarks/demo_seeds.py --demo demo --seeds 1,2 [--out demo-seeds]

Trains copies of the demo's hero config (`demo/plan/*.yaml`, role hero) with other seeds (the model's
initialisation and the data order; the data itself is the same), each in its own run folder under
--out (resumed, not retrained, when a run there finished already), and prints each final eval loss
beside the demo's own hero (seed 0, read from its run folder), with their mean and standard deviation.
Wandb is off for these runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ladder import launch  # noqa: E402
from ladder.config.runconfig import RunConfig  # noqa: E402
from ladder.errors import LadderError  # noqa: E402


def hero_config(demo: Path) -> tuple[Path, RunConfig]:
    for path in sorted((demo / "plan").glob("*.yaml")):
        cfg = RunConfig.load(path)
        if cfg.role == "hero":
            return path, cfg
    raise LadderError(f"{demo}/plan: no hero config; run `make demo` first")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", type=Path, default=Path("demo"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--out", type=Path, default=Path("demo-seeds"))
    args = ap.parse_args()
    try:
        path, hero = hero_config(args.demo)
    except LadderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = launch.final_eval_loss(launch.run_dir_of(path, hero))
    finals = {0: base}
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        cfg = dataclasses.replace(hero, seed=seed, run_dir=str((args.out / f"seed{seed}").resolve()),
                                  logging=dataclasses.replace(hero.logging, wandb="disabled"))
        cfg_path = args.out / f"hero-seed{seed}.yaml"
        args.out.mkdir(parents=True, exist_ok=True)
        cfg.save(cfg_path)
        run_dir = launch.run_dir_of(cfg_path, cfg)
        if not launch.is_done(cfg_path, cfg):
            t0 = time.perf_counter()
            code = launch.train(cfg_path, resume=(run_dir / "status.json").exists(), progress=False)
            if code != 0:
                print(f"error: seed {seed} exited {code}", file=sys.stderr)
                return code
            print(f"seed {seed}: trained in {time.perf_counter() - t0:.0f} s", flush=True)
        finals[seed] = launch.final_eval_loss(run_dir)
    values = np.array([v for v in finals.values() if v is not None])
    for seed, v in finals.items():
        print(f"seed {seed}: final eval loss {v:.4f}" if v is not None else f"seed {seed}: no final eval")
    sd = float(np.std(values, ddof=1)) if values.size > 1 else float("nan")
    print(f"mean {values.mean():.4f}, standard deviation {sd:.4f} ({sd / values.mean():.2%} of the mean) over "
          f"{values.size} seeds")
    (args.out / "seeds.json").write_text(json.dumps({"finals": finals, "sd": sd, "mean": float(values.mean())}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
