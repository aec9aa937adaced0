"""How well each variant of the per-fraction law predicts the demo's hero, from the demo's own store.

Reads a folder written by `ladder demo` (default ``demo/``), predicts the hero again from its rungs
with the default settings and with the per-fraction law's basis size forced (2, 3, 4 terms in
log g, or free at every fraction), and scores each against the hero's logged evals: the final
eval's error (predicted / actual − 1), the mean and worst |error| from 10% of the run on, the share
of those evals inside the 90% band and the band's width at the end. Nothing is trained.

    .venv/bin/python benchmarks/demo_accuracy.py --demo demo --n-boot 200
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from ladder.config.runconfig import RunConfig
from ladder.data.store import Store
from ladder.demo import score
from ladder.output.figures import hero_actual
from ladder.predict.adapter import PredictSettings, predict

VARIANTS = {"default (auto)": "auto", "2 terms": 2, "3 terms": 3, "4 terms": 4, "free": None}


def score_variant(store: Store, hero: RunConfig, smooth, n_boot: int) -> dict[str, float]:
    """The demo's own scoring (`ladder.demo.score`) of one prediction, plus the band's width at the end."""
    pred = predict(store, hero, PredictSettings(n_boot=n_boot, smooth=smooth))
    result = score(pred, hero_actual(store, pred), seconds=0.0, report=Path())
    final = pred.final
    return {"final_error": result.final_error, "curve_mean_error": result.curve_mean_error,
            "curve_worst_error": result.curve_worst_error, "inside_90": result.inside_90,
            "band90_width": float((final["hi90"] - final["lo90"]) / final["median"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=Path("demo"), help="Folder written by `ladder demo`.")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    hero_path = next((args.demo / "plan").glob("hero*.yaml"), None)
    if hero_path is None or not (args.demo / "store").is_dir():
        parser.error(f"{args.demo}: no demo output here (plan/hero*.yaml and store/); run `ladder demo` first")
    hero, store = RunConfig.load(hero_path), Store(args.demo / "store")
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fits' own warnings are part of each prediction
        for name, smooth in VARIANTS.items():
            rows[name] = score_variant(store, hero, smooth, args.n_boot)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{hero.name} predicted from the rungs in {args.demo / 'store'} ({args.n_boot} bootstrap refits)")
    print(f"{'per-fraction law':<16}{'final':>9}{'mean':>8}{'worst':>8}{'in 90%':>8}{'90% width':>11}")
    for name, r in rows.items():
        print(f"{name:<16}{r['final_error']:>+9.2%}{r['curve_mean_error']:>8.2%}{r['curve_worst_error']:>8.2%}"
              f"{r['inside_90']:>8.0%}{r['band90_width']:>11.1%}")


if __name__ == "__main__":
    main()
