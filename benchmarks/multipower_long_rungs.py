"""The multi-power law on a ladder of long rungs: `fits.predictor.predict` (what `ladder predict` runs)
on rungs of millions of steps, timed, against the same ladder under another revision of `fits/`.

    .venv/bin/python benchmarks/multipower_long_rungs.py [--steps 2e6] [--sizes 4] [--against REV] [--profile 25]

The ladder: `--sizes` sizes (N = 1e8 · 2^i), each with a cosine run at 20 tokens per parameter and a
WSD run at 40 (warmup 1% of the run, decay to 10% of the peak LR), from `--steps` steps (the smallest
size's cosine run) up to 5× that (tokens per step grow with the size); evals every 1% of each run;
losses from a multi-power law with known parameters and 0.2% noise per eval. The target: a cosine run
4× the largest size at 20 tokens per parameter, predicted at every 1% of its run.

Timed: the prediction with the multi-power candidate alone (its fit, floor profile, jackknife over
sizes and backtest), then with the default settings (per-fraction and multi-power candidates, and the
backtest that chooses), each from scratch. `--against REV` runs the same in a fresh process on the
`fits/` and `ladder/` of git revision REV (e.g. HEAD~1), and prints both side by side with the
ratio and how far the two predictions differ. `--profile N` prints the N costliest functions
(cumulative time) of the multi-power prediction under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fits import candidates as cand  # noqa: E402
from fits import multipower as mp  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.runs import Run  # noqa: E402
from fits.synthetic import known_law  # noqa: E402
from ladder import Schedule  # noqa: E402

TRUTH = known_law(mp.MultiPower, {"C": 2.0, "beta": 0.6, "gamma": 0.6},
                  {"L0": 1.8, "A": 0.8, "alpha": 0.45, "B": 300.0}, {"L0": -0.05, "A": -0.1, "B": -0.1},
                  scale_ref=1e8)
BASE_N = 1e8
PEAK = 3e-4
NOISE = 0.002
EVALS = 100


def schedule_lrs(decay: str, steps: int) -> np.ndarray:
    """LRs of a `decay` ("cosine" or "wsd", cooling down over the last 20%) run of `steps` steps."""
    wsd = {"cooldown_steps": steps // 5} if decay == "wsd" else {}
    return Schedule(peak_lr=PEAK, total_steps=steps, warmup_steps=steps // 100, decay=decay, min_lr_ratio=0.1,
                    **wsd).lrs()


def make_run(name: str, n: float, steps: int, ratio: float, decay: str, rng, noise: float) -> Run:
    """A run of `n` parameters and `steps` steps at `ratio` tokens per parameter, losses from TRUTH every 1%."""
    lrs = schedule_lrs(decay, steps)
    run = Run(name, 6 * n, ratio * n / steps, steps, lrs=lrs, n_params=n)
    evals = np.round(np.arange(1, EVALS + 1) / EVALS * steps).astype(np.int64)
    values = TRUTH.predict(evals, lrs, n) * np.exp(rng.normal(0.0, noise, evals.size))
    return dataclasses.replace(run, steps=evals, values=values)


def ladder(shortest: int, n_sizes: int, seed: int = 0) -> tuple[list[Run], Run]:
    """The rungs and the target (no evals), as the module docstring says."""
    rng = np.random.default_rng(seed)
    ns = BASE_N * 2.0 ** np.arange(n_sizes)
    grow = 5.0 ** (1 / max(2 * n_sizes - 1, 1))  # the 2·n_sizes rungs' lengths span 5×
    runs = []
    for i, n in enumerate(ns):
        short = int(round(shortest * grow ** (2 * i)))
        runs.append(make_run(f"n{i}-cosine", n, short, 20.0, "cosine", rng, NOISE))
        runs.append(make_run(f"n{i}-wsd", n, int(round(short * grow)), 40.0, "wsd", rng, NOISE))
    hero = make_run("hero", 4 * ns[-1], runs[-2].planned_steps, 20.0, "cosine", rng, 0.0)
    return runs, dataclasses.replace(hero, steps=np.zeros(0, np.int64), values=np.zeros(0))


def from_scratch(runs: list[Run], hero: Run, steps: np.ndarray, settings, profiler=None):
    """(prediction, seconds), with nothing kept from an earlier prediction."""
    cand._FITTED.clear()  # the curve laws' fits, shared by a ladder's targets
    recent = getattr(mp, "_RECENT", None)  # the binned terms of recent curves (revisions that keep them)
    if recent is not None:
        recent.clear()
    if profiler:
        profiler.enable()
    t0 = time.perf_counter()
    res = core.predict(runs, hero, steps, settings)
    secs = time.perf_counter() - t0
    if profiler:
        profiler.disable()
    return res, secs


def measure(args) -> dict:
    """Build the ladder and time both predictions; the timings, the medians and the ladder's shape."""
    t0 = time.perf_counter()
    runs, hero = ladder(int(args.steps), args.sizes)
    build = time.perf_counter() - t0
    steps = np.round(np.arange(1, EVALS + 1) / EVALS * hero.planned_steps).astype(np.int64)
    profiler = cProfile.Profile() if args.profile else None
    alone = core.Settings(method="multipower", candidates=("multipower",))
    res_mp, mp_s = from_scratch(runs, hero, steps, alone, profiler)
    res_all, all_s = from_scratch(runs, hero, steps, core.Settings())
    truth = TRUTH.predict(steps, hero.lrs, hero.n_params)
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)
    lengths = sorted(r.planned_steps for r in runs)
    return {"rungs": len(runs), "shortest": lengths[0], "longest": lengths[-1], "target": hero.planned_steps,
            "build_s": build, "multipower_s": mp_s, "default_s": all_s, "method": res_all.method,
            "median_multipower": res_mp.band.median.tolist(), "median_default": res_all.band.median.tolist(),
            "final_error": float(res_mp.band.median[-1] / truth[-1] - 1), "fits_at": str(Path(mp.__file__).parent)}


def measure_at(rev: str, args) -> dict:
    """`measure` in a fresh process on the `fits/` and `ladder/` of git revision `rev`."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", rev, "fits", "ladder"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        (Path(tmp) / "benchmarks").mkdir()
        script = Path(tmp) / "benchmarks" / Path(__file__).name
        script.write_text(Path(__file__).read_text())
        out = subprocess.run([sys.executable, str(script), "--steps", str(args.steps), "--sizes", str(args.sizes),
                              "--json"], cwd=tmp, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the benchmark at {rev} failed:\n{out.stderr[-3000:]}")
    base = json.loads(out.stdout.strip().splitlines()[-1])
    if not base["fits_at"].startswith(tmp):
        raise SystemExit(f"the benchmark at {rev} imported fits from {base['fits_at']}, not from the revision")
    return base


def report(ours: dict, base: dict | None, rev: str) -> None:
    print(f"ladder: {ours['rungs']} rungs of {ours['shortest']:,} .. {ours['longest']:,} steps, {EVALS} evals each; "
          f"target {ours['target']:,} steps; built in {ours['build_s']:.1f} s")
    print(f"{'predict':<40}{'this tree':>12}" + (f"{rev:>14}{'ratio':>9}" if base else ""))
    for key, label in (("multipower_s", "multi-power candidate alone"),
                       ("default_s", f"default settings (chose {ours['method']})")):
        line = f"{label:<40}{ours[key]:>10.1f} s"
        if base:
            line += f"{base[key]:>12.1f} s{base[key] / ours[key]:>8.1f}×"
        print(line)
    print(f"final error of the multi-power prediction against the truth: {ours['final_error']:+.3%}")
    if base:
        for key in ("median_multipower", "median_default"):
            a, b = np.array(ours[key]), np.array(base[key])
            print(f"largest relative difference of the predicted medians ({key[7:]}): {np.max(np.abs(a / b - 1)):.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=float, default=2e6, help="steps of the shortest rung (the longest: 5×)")
    ap.add_argument("--sizes", type=int, default=4)
    ap.add_argument("--against", metavar="REV", help="also time the fits/ and ladder/ of this git revision")
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions of the multi-power run")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # how --against reads a revision's run
    args = ap.parse_args()
    base = measure_at(args.against, args) if args.against else None
    ours = measure(args)
    if args.json:
        print(json.dumps(ours))
    else:
        report(ours, base, args.against or "")


if __name__ == "__main__":
    main()
