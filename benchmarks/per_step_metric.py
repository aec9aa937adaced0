"""Predicting a metric logged at every step: read at the rungs' evals against fitted as logged.

OLMo's 1×C ladder (`../shared/data/olmo_ladder`) turned into a per-step train loss: each run's C4 eval
curve interpolated (log-linear in step) every 10 steps, times 3% noise a value, imported into a store
with its coordinates and no planned evals (so read every 1% of its plan). The 3.2B run is predicted from
the four smaller ones, with `ladder predict`'s code path, both ways in one run; the truth is its noise-free
curve at the prediction's steps.

    .venv/bin/python benchmarks/per_step_metric.py [--data ../shared/data] [--noise 0.03] [--demo demo]

Then a ladder imported as a team with its own trainer would bring it: a known truth (a Chinchilla-like surface in
tokens seen, less an annealing bonus as a cosine LR decays), four rungs of 20M–300M parameters whose train loss is
logged every 10 steps (1% noise a value) and whose evals every 2.5% of the run; the 1.2B target predicted from
them. Its small rungs log 3–4 train values per 1% of their plan: read at the run's own evals, every 1% of the
plan (too few values there: left as logged), and as logged.

With --demo, the same on the demo's micro ladder (its train loss logged every step, about 13% noise a step).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from ladder.cli import app
from ladder.data import dense, runview
from ladder.data.runview import target_from_file, target_from_store
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
        print()
        imported_ladder(Path(tmp))
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


SURFACE = dict(E=1.80, A=406.4, B=410.7, alpha=0.34, beta=0.28, anneal=0.10)
"""The imported ladder's truth: E + A/N^α + B/D^β at the tokens seen, less `anneal` × the LR's decay so far."""


def _truth(n: float, steps: np.ndarray, tps: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    """The loss and LR at `steps` of a run of `n` parameters: 5% warmup, cosine decay to 10% of a peak that falls
    with size."""
    s = SURFACE
    peak, warm = 3e-3 * (n / 20e6) ** -0.25, round(0.05 * total)
    t = np.asarray(steps, float)
    lr = np.where(t < warm, peak * t / warm,
                  peak * (0.1 + 0.45 * (1 + np.cos(np.pi * np.clip((t - warm) / (total - warm), 0, 1)))))
    loss = s["E"] + s["A"] / n ** s["alpha"] + s["B"] / (np.maximum(t, 1) * tps) ** s["beta"]
    return loss - np.where(t >= warm, s["anneal"] * (1 - lr / peak), 0.0), lr


def imported_ladder(tmp: Path) -> None:
    """The known-truth ladder as a CSV with its coordinates, imported, and its 1.2B target predicted three ways."""
    import yaml

    rng = np.random.default_rng(0)
    sizes = {"r20m": (20e6, 131072), "r50m": (50e6, 262144), "r120m": (120e6, 262144), "r300m": (300e6, 524288),
             "hero1b": (1.2e9, 1048576)}
    parts, coords = [], {}
    for name, (n, tps) in sizes.items():
        total = round(20 * n / tps)
        train = np.arange(10, total + 1, 10)
        evals = np.unique(np.r_[np.arange(total // 40, total + 1, total // 40), total])
        loss, lr = _truth(n, train, tps, total)
        at_evals, _ = _truth(n, evals, tps, total)
        rows = pd.DataFrame({"run": name, "step": train, "train_loss": loss * (1 + 0.01 * rng.standard_normal(train.size)),
                             "lr": lr}).merge(pd.DataFrame({"step": evals, "val_loss": at_evals * (
                                 1 + 0.003 * rng.standard_normal(evals.size))}), on="step", how="outer")
        if name != "hero1b":
            parts.append(rows.assign(run=name, tokens=rows["step"] * tps))
        coords[name] = {"active_params": n, "stop_after_steps": total, "tokens_per_step": tps, "group": "syn",
                        "role": "rung", "schedule": {"peak_lr": 3e-3 * (n / 20e6) ** -0.25, "total_steps": total,
                                                     "warmup_steps": round(0.05 * total), "decay": "cosine",
                                                     "min_lr_ratio": 0.1}}
    hero = coords.pop("hero1b") | {"name": "hero1b"}
    hero.pop("role")
    (tmp / "rungs.csv").write_text(pd.concat(parts).to_csv(index=False))
    (tmp / "coords.yaml").write_text(yaml.safe_dump(coords))
    (tmp / "hero.yaml").write_text(yaml.safe_dump(hero))
    store = Store(tmp / "imported")
    got = CliRunner().invoke(app, ["import", "csv", str(tmp / "rungs.csv"), "--store", str(store.root), "--run", "run",
                                   "--step", "step", "--tokens", "tokens", "--metric", "eval/loss=val_loss",
                                   "--metric", "train/loss=train_loss", "--coords", str(tmp / "coords.yaml")])
    if got.exit_code != 0:
        raise SystemExit(got.output)
    n, tps = sizes["hero1b"]

    def every_1pct(store, run_id, stop, cfg):  # the reading before: every 1% of the plan, whatever the run logged
        every = max(1, round(stop / 100))
        return np.arange(every, stop + 1, every, dtype=np.int64)

    compare(store, target_from_file(tmp / "hero.yaml"), lambda at: _truth(n, at, tps, hero["stop_after_steps"])[0],
            "An imported ladder with a known truth: train loss every 10 steps (1% noise), evals every 2.5%; the 1.2B "
            "target from four rungs of 20M–300M, against its noise-free curve",
            rows={"at its evals": {}, "every 1% of plan": {"grid": every_1pct}, "as logged": {"per": 10**9}})


@contextlib.contextmanager
def _reading(per: int | None = None, grid=None):
    """Dense metrics read with `per` values an interval (`dense.READ_PER`) and at `grid` (`runview.eval_grid`)."""
    saved = dense.READ_PER, runview.eval_grid
    dense.READ_PER, runview.eval_grid = per or saved[0], grid or saved[1]
    try:
        yield
    finally:
        dense.READ_PER, runview.eval_grid = saved


def compare(store: Store, target, truth, title: str, rows: dict | None = None) -> None:
    """Predict the target's train loss each way of `rows` (label: `_reading`'s settings; by default read at the
    rungs' evals and as logged), and print a row each."""
    print(title)
    print(f"{'read':<16} {'final error':>11} {'curve mean |error|':>18} {'in 90% band':>11} {'90% band at end':>15} "
          f"{'rise warnings':>13} {'time':>6}")
    for label, how in (rows or {"at the evals": {}, "as logged": {"per": 10**9}}).items():
        t0 = time.perf_counter()
        with _reading(**how):
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
        print(f"{label:<16} {err[-1]:>+11.2%} {np.abs(err[late]).mean():>18.2%} {inside.mean():>11.0%} "
              f"{'±' + format(half, '.1%'):>15} {rises:>13} {took:>5.1f}s")


if __name__ == "__main__":
    main()
