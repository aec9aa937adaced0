"""Predicting a metric logged at every step: read at the rungs' evals against fitted as logged.

OLMo's 1×C ladder (`../shared/data/olmo_ladder`) turned into a per-step train loss: each run's C4 eval
curve interpolated (log-linear in step) every 10 steps, times 3% noise a value, imported into a store
with its coordinates and no planned evals (so read every 1% of its plan). The 3.2B run is predicted from
the four smaller ones, with `ladder predict`'s code path, both ways in one run; the truth is its noise-free
curve at the prediction's steps.

    .venv/bin/python benchmarks/per_step_metric.py [--data ../shared/data] [--noise 0.03] [--demo demo]

With --demo, the same on the demo's micro ladder (its train loss logged every step, about 13% noise a step).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from ladder.cli import app
from ladder.data import dense
from ladder.data.runview import target_from_store
from ladder.data.store import Store
from ladder.predict.adapter import PredictSettings, predict

HERO = "olmo_ladder_3B-1xC"


def per_step_csv(data: Path, noise: float, out: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Write the per-step CSV; return each run's eval curve (steps, loss)."""
    runs = pd.read_csv(data / "olmo_ladder" / "ladder_runs.csv")
    ev = pd.read_csv(data / "olmo_ladder" / "ladder_tidy.csv")
    ev = ev[~ev["rerun"] & (ev["length_multiplier_xC"] == 1.0)].merge(runs[["run_id", "total_steps"]], on="run_id")
    rng = np.random.default_rng(0)
    parts, curves = [], {}
    for rid, g in ev.groupby("run_id"):
        g = g.sort_values("step")
        curves[rid] = (g["step"].to_numpy(float), g["loss"].to_numpy(float))
        steps = np.arange(10, int(g["step"].max()) + 1, 10)
        loss = np.exp(np.interp(np.log(steps), np.log(g["step"]), np.log(g["loss"])))
        first = g.iloc[0]
        parts.append(pd.DataFrame({
            "run_id": rid, "step": steps, "tokens": steps * first["batch_size_tokens"],
            "train_loss": loss * (1 + noise * rng.standard_normal(steps.size)), "lr": np.interp(steps, g["step"], g["lr"]),
            "params_nonembed": first["params_nonembed"], "flops_per_token": first["flops_per_token"],
            "total_steps": first["total_steps"], "batch_size_tokens": first["batch_size_tokens"], "group": "olmo",
            "role": "hero" if first["size"] == "3.2B" else "rung",
        }))
    pd.concat(parts).to_csv(out, index=False)
    return curves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--demo", type=Path, default=None, help="a `make demo` folder: its ladder's train loss too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "olmo_per_step.csv"
        curves = per_step_csv(args.data, args.noise, csv)
        store = Store(Path(tmp) / "store")
        imported = CliRunner().invoke(app, [
            "import", "csv", str(csv), "--store", str(store.root), "--run", "run_id", "--step", "step", "--tokens",
            "tokens", "--metric", "train/loss=train_loss", "--metric", "optim/learning_rate=lr",
            *[x for pair in (("active_params", "params_nonembed"), ("fit_flops_per_token", "flops_per_token"),
                             ("stop_after_steps", "total_steps"), ("tokens_per_step", "batch_size_tokens"),
                             ("group", "group"), ("role", "role")) for x in ("--coord-column", "=".join(pair))]])
        if imported.exit_code != 0:
            raise SystemExit(imported.output)
        target = target_from_store(store, HERO, "train/loss")
        steps, loss = curves[HERO]
        compare(store, target, lambda at: np.exp(np.interp(np.log(at), np.log(steps), np.log(loss))),
                f"OLMo 1×C as a per-step train loss ({args.noise:.0%} noise a value, every 10 steps): {HERO} from the "
                "four smaller sizes, against its noise-free curve")
    if args.demo is not None:
        demo_ladder(args.demo)


def demo_ladder(folder: Path) -> None:
    """The demo's micro ladder (`make demo`): its hero's train loss from the rungs', against the hero's own train
    loss read at the prediction's steps."""
    from ladder.config.runconfig import RunConfig

    store = Store(folder / "store")
    (hero_path,) = (folder / "plan").glob("hero-*.yaml")
    hero = RunConfig.load(hero_path)
    logged = store.history([f"{hero.group}/{hero.name}"], ["train/loss"]).sort_values("step")
    steps, values = logged["step"].to_numpy(np.int64), logged["value"].to_numpy(float)

    def truth(at: np.ndarray) -> np.ndarray:
        got, read, _ = dense.read_at(steps, values, at)
        return np.interp(at, got, read, left=np.nan, right=np.nan)

    compare(store, hero, truth, f"the demo's ladder ({folder}): {hero.name}'s train loss from the four rungs', against "
            "its own train loss read at the prediction's steps")


def compare(store: Store, target, truth, title: str) -> None:
    """Predict the target's train loss read at the rungs' evals and as logged, and print both rows."""
    print(title)
    print(f"{'read':<14} {'final error':>11} {'curve mean |error|':>18} {'in 90% band':>11} {'90% band at end':>15} "
          f"{'rise warnings':>13} {'time':>6}")
    default = dense.READ_PER
    for label, per in (("at the evals", default), ("as logged", 10**9)):
        dense.READ_PER = per
        t0 = time.perf_counter()
        pred = predict(store, target, PredictSettings(metric="train/loss"))
        took = time.perf_counter() - t0
        t = pred.table[pred.table["step"] <= pred.planned_steps]
        actual = truth(t["step"].to_numpy(np.int64))
        ok = np.isfinite(actual)
        err = t["median"].to_numpy()[ok] / actual[ok] - 1
        late = t["fraction"].to_numpy()[ok] >= 0.1
        inside = (t["lo90"].to_numpy()[ok] <= actual[ok]) & (actual[ok] <= t["hi90"].to_numpy()[ok])
        half = (t["hi90"].iloc[-1] - t["lo90"].iloc[-1]) / 2 / t["median"].iloc[-1]
        rises = sum("above its earlier lowest" in w for w in pred.warnings)
        print(f"{label:<14} {err[-1]:>+11.2%} {np.abs(err[late]).mean():>18.2%} {inside.mean():>11.0%} "
              f"{'±' + format(half, '.1%'):>15} {rises:>13} {took:>5.1f}s")
    dense.READ_PER = default


if __name__ == "__main__":
    main()
