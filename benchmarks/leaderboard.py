"""One leaderboard: every prediction method on every public ladder in ../shared/data and the micro demo.

    .venv/bin/python benchmarks/leaderboard.py [--demo demo] [--out benchmarks/leaderboard.json]

Rows are methods; columns are tasks with a fixed protocol (what is fitted, what is predicted, at what
distance). Every curve task goes through `fits.predictor.predict`, the core `ladder predict` runs:
the ladder's runs as `fits.runs.Run` records (coordinates, LR of every step, evals), the target
with its own LR sequence. "default" is what `ladder predict` does with no options (the law, or the
mean of the laws, chosen by a backtest on the ladder, the band floored by that backtest's errors);
the other rows name the method and keep the same backtest floor for their band.

Tasks (curve): the target's logged evals from 10% of its run on are scored.
- olmo-3.2B-{0.5,1,2,5,10}xC: the four smaller OLMo sizes, every length (20 runs), predict the 3.2B
  run of that length (5.6× the largest rung's compute).
- marin-d2048: the 535B ladder's three finished rungs predict the fourth (crashed at 81%: its
  logged evals up to there).
- misfitting-1b-T{10000,20000}: every best-LR run of 12m–400m, predict the 1B runs.
- mpl-400M: the 25M and 100M curves under nine schedules, predict the nine 400M curves (2 sizes:
  no backtest is possible).
- demo-hero: the micro demo's four rungs predict its hero (horizon cut to 80% at half way), from
  the demo's store (`make demo` first; skipped when missing).
Tasks (endpoint, `ladder fit surface`): olmo2-13B and olmo2-7B from the whole OLMo ladder's final
losses; chinchilla-top: the 30 runs with the most compute predicted from the others; olmo-3.2B-finals:
the five 3.2B final losses from the 20 smaller runs'; misfitting-1b-finals: the 1B runs' final losses
from every best-LR run of 12m–400m. Rows: the default (the form a backtest on the runs chooses) and
each form by name; every band is widened by the form's backtest error carried to the target.

Metrics per task: final |error| (signed in brackets), mean |error| along the curve, and the share
of actual points inside the 90% band. Then, per method, the pooled summary, and the default's calibration
at the end: its final error in standard deviations of its own band, one draw per task (rms z; 1 if calibrated).
The 535B hero has no actual curve: its projection by each method is printed beside the published 2.039.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_datasets as ds  # noqa: E402
from benchmarks.fit_misfitting import best_lr_runs  # noqa: E402
from fits import FitError  # noqa: E402
from fits import predictor as core  # noqa: E402
from fits.candidates import Z90, Options  # noqa: E402
from fits.runs import Run, lrs_from_logged  # noqa: E402
from fits.surfacechoice import choose_surface  # noqa: E402

METHODS = ("default", "per-fraction", "per-fraction-free", "per-fraction-ladder-E", "multipower", "ensemble")
LADDER_E = "per-fraction-ladder-E"
"""The per-fraction law with E from the surface of every run's final loss (`--E ladder`), with its own backtest."""
ENDPOINT_METHODS = {"default (form by backtest)": "auto", "surface (free α, β)": "free", "surface, one exponent": "shared"}
SCORE_FROM = 0.1


@dataclass
class Task:
    name: str
    protocol: str
    runs: list[Run]
    targets: list[Run]
    """Each with its actual evals (steps, values) to score."""


# ---- datasets as runs ---------------------------------------------------------------------------------------


def olmo_runs() -> tuple[dict[tuple[str, float], Run], dict[str, float]]:
    """The OLMo ladder's runs by (size, length multiplier) with their logged LR (as `ladder import csv` stores
    it; seed reruns left out), and each run's peak LR by name."""
    lad, runs = ds.olmo_ladder()
    R = {}
    for _, r in runs.iterrows():
        g = lad[lad["run_id"] == r["run_id"]].sort_values("step")
        T = int(r["total_steps"])
        g = g[g["step"] <= T]
        R[(r["size"], float(r["length_multiplier_xC"]))] = Run(
            r["run_id"], float(g["flops_per_token"].iloc[0]), float(r["batch_size_tokens"]), T,
            g["step"].to_numpy(), g["loss"].to_numpy(), lrs_from_logged(g["step"].to_numpy(), g["lr"].to_numpy(), T),
            n_params=float(r["params_nonembed"]))
    return R, dict(zip(runs["run_id"], runs["peak_lr"].astype(float)))


def olmo_tasks() -> list[Task]:
    """Rungs with their logged LR; the 3.2B target with its declared schedule (as a target file gives it): the
    numbers `ladder predict --target` gives on the same data."""
    R, peaks = olmo_runs()
    rungs = [v for (s, _), v in R.items() if s != "3.2B"]
    tasks = []
    for m in ds.OLMO_MULTIPLIERS:
        target = R[("3.2B", m)]
        declared = olmo_schedule(peaks[target.name], target.planned_steps).lrs(0, target.planned_steps + 1)
        tasks.append(Task(f"olmo-3.2B-{m:g}xC", "4 smaller sizes × 5 lengths → 3.2B (5.6× compute)", rungs,
                          [replace(target, lrs=declared)]))
    return tasks


def olmo_schedule(peak_lr: float, total_steps: int):
    """The OLMo ladder's schedule as a target file declares it: warmup, cosine to 10% of the peak."""
    from ladder.config.schedule import Schedule

    return Schedule(peak_lr=peak_lr, total_steps=total_steps, warmup_steps=ds.OLMO_WARMUP["3.2B"], decay="cosine",
                    min_lr_ratio=0.1)


MARIN = ds.DATA / "marin_ladder"


def marin_lrs(row) -> np.ndarray:
    T = int(row["stop_after_steps"])
    w = max(int(round(float(row["warmup_fraction"]) * T)), 1)
    s = np.arange(T + 1, dtype=np.float64)
    peak, lo = float(row["peak_lr"]), float(row["min_lr_ratio"])
    decay = peak * (1 - (1 - lo) * (s - w) / max(T - w, 1))
    return np.where(s < w, peak * (s + 1) / w, decay)


def marin_runs() -> tuple[list[Run], Run]:
    runs = pd.read_csv(MARIN / "marin_ladder_runs.csv")
    evals = pd.read_csv(MARIN / "marin_ladder_evals.csv")
    out, hero = [], None
    for _, r in runs.iterrows():
        e = evals[evals["rung"] == r["rung"]].sort_values("step").drop_duplicates("step", keep="last")
        run = Run(r["name"], float(r["fit_flops_per_token"]), float(r["tokens_per_step"]), int(r["stop_after_steps"]),
                  e["step"].to_numpy(), e["loss"].to_numpy(), marin_lrs(r), finished=r["state"] == "finished",
                  n_params=float(r["active_params"]), ratio=791.0)
        if r["rung"] == "hero":
            hero = run
        else:
            out.append(run)
    return out, hero


def marin_tasks() -> list[Task]:
    rungs, _ = marin_runs()
    return [Task("marin-d2048", "3 finished rungs → the 4th (2.5× compute; crashed at 81%: its logged evals)",
                 rungs[:3], [rungs[3]])]


def misfitting_tasks() -> list[Task]:
    df = best_lr_runs(ds.misfitting())
    runs, big = [], {}
    for rid, g in df.groupby("run_id"):
        g = g.sort_values("step")
        T = int(g["total_steps"].iloc[0])
        n = float(g["params_nonembed"].iloc[0])
        tokens_per_step = float(g["tokens"].max()) / float(g["step"].max())
        keep = g["step"].to_numpy() <= T
        run = Run(rid, 6 * n, tokens_per_step, T, g["step"].to_numpy()[keep], g["loss"].to_numpy()[keep],
                  ds.misfitting_lrs(float(g["peak_lr"].iloc[0]), T), n_params=n)
        if g["model"].iloc[0] == "misfitting_1b":
            big[T] = run
        else:
            runs.append(run)
    return [Task(f"misfitting-1b-T{T}", "every best-LR run of 12m–400m (C = 6ND) → the 1B run", runs, [big[T]])
            for T in sorted(big) if T in (10000, 20000)]


def mpl_tasks() -> list[Task]:
    curves = ds.mpl_curves()
    as_run = [Run(c.name, 6 * c.scale, 1.0, int(len(c.lrs) - 1), c.steps, c.loss, c.lrs, n_params=c.scale) for c in curves]
    small = [r for r in as_run if not r.name.startswith("400M")]
    return [Task("mpl-400M", "25M + 100M under 9 schedules → the nine 400M curves (2 sizes: no backtest)", small,
                 [r for r in as_run if r.name.startswith("400M")])]


def demo_tasks(folder: Path) -> list[Task]:
    """The demo's rungs and hero from its store, as `ladder predict` reads them."""
    from ladder.config.runconfig import RunConfig
    from ladder.data.runview import from_config, rungs_from_store
    from ladder.data.store import Store

    store = Store(folder / "store")
    plan = folder / "plan"
    if not store.exists() or not plan.is_dir():
        return []
    hero_cfg = next((c for c in map(RunConfig.load, sorted(plan.glob("*.yaml"))) if c.role == "hero"), None)
    if hero_cfg is None:
        return []
    rungs = rungs_from_store(store, hero_cfg.group, "eval/loss")
    h = store.history([hero_cfg.name], ["eval/loss"]) if hero_cfg.name in set(store.runs()["name"]) else None
    if h is None or h.empty:
        return []
    h = h.sort_values("step")
    target = from_config(hero_cfg, h["step"].to_numpy(), h["value"].to_numpy()).as_run()
    return [Task("demo-hero", "4 micro rungs → the hero (6.3× compute, horizon cut at half way)",
                 [r.as_run() for r in rungs], [target])]


# ---- scoring ------------------------------------------------------------------------------------------------


def held_out(target: Run) -> tuple[Run, np.ndarray, np.ndarray]:
    """The target as a prediction is given it (no evals), and the steps and values of its evals from `SCORE_FROM`
    of its run on, which the prediction is scored against."""
    keep = target.fractions >= SCORE_FROM - 1e-9
    return replace(target, steps=np.zeros(0, np.int64), values=np.zeros(0)), target.steps[keep], target.values[keep]


def score_curve(task: Task, n_boot: int) -> dict[str, dict]:
    """{method: {final, mean_abs, inside, n}} pooled over the task's targets."""
    acc: dict[str, dict[str, list]] = {m: {"final": [], "err": [], "inside": []} for m in METHODS}
    chosen, widths, z = [], {"default": [], "multipower": []}, []
    for t in task.targets:
        blank, steps, actual = held_out(t)
        settings = core.Settings(candidates=("per-fraction", "multipower"),
                                 options=Options(n_boot=n_boot))
        res = core.predict(task.runs, blank, steps, settings)
        chosen.append(res.method)
        widths["default"].append(end_width(res.band))
        z.append(end_z(res.band, actual[-1]))
        if "multipower" in res.candidates:
            widths["multipower"].append(end_width(res.candidates["multipower"]))
        for m in METHODS:
            name = res.method if m == "default" else m
            if name in res.candidates:
                band = res.band if m == "default" else res.band_for(name)
            elif name == "per-fraction-free":  # not a default candidate: predicted on its own, no backtest floor
                try:
                    few = replace(settings, method=name, backtest=False, options=Options(n_boot=20))
                    band = core.predict(task.runs, blank, steps, few).band
                except FitError:  # a method that does not apply to the task is reported as n/a
                    continue
            elif name == LADDER_E:  # an option, not a default candidate: its own backtest floors its band
                try:
                    opts = Options(n_boot=n_boot, E_from="ladder")
                    one = core.Settings(method="per-fraction", candidates=("per-fraction",), options=opts)
                    band = core.predict(task.runs, blank, steps, one).band
                except FitError:
                    continue
            else:
                continue
            ok = np.isfinite(band.median)
            if not ok.any():
                continue
            err = band.median[ok] / actual[ok] - 1
            acc[m]["final"].append(err[-1])
            acc[m]["err"].append(err)
            acc[m]["inside"].append((band.lo90[ok] <= actual[ok]) & (actual[ok] <= band.hi90[ok]))
    out = {}
    for m, a in acc.items():
        if a["final"]:
            e, ins = np.concatenate(a["err"]), np.concatenate(a["inside"])
            out[m] = {"final": float(np.mean(a["final"])), "final_abs": float(np.mean(np.abs(a["final"]))),
                      "mean_abs": float(np.mean(np.abs(e))), "inside": int(ins.sum()), "n": int(ins.size)}
    out["_chosen"] = sorted(set(chosen))
    out["_width90"] = {k: np.mean(v, axis=0).tolist() for k, v in widths.items() if v}
    out["_z_final"] = z
    return out


def end_z(band, actual: float) -> float:
    """The default's final error in standard deviations of its own band: (median − actual) over the 90% band's
    reach on the side of the actual value ÷ z(0.95). A calibrated band gives z of mean square 1."""
    m = band.median[-1]
    reach = (band.hi90[-1] - m) if actual > m else (m - band.lo90[-1])
    return float((m - actual) / (reach / Z90)) if reach > 0 else float("nan")


def calibration(results: dict[str, dict]) -> str:
    """How wide the default's bands are against its own final errors, one draw per task (a curve's evals move
    together, so they are not independent draws)."""
    per_task = [np.mean(np.square(r["_z_final"])) for r in results.values() if r.get("_z_final")]
    held = sum(all(abs(x) <= Z90 for x in r["_z_final"]) for r in results.values() if r.get("_z_final"))
    n = len(per_task)
    if not n:
        return ""
    return (f"calibration of the default at the end: rms z = {np.sqrt(np.mean(per_task)):.2f} over {n} tasks "
            f"(final error ÷ the band's sd on its side; 1 when calibrated, under 1 when wide); the 90% band holds "
            f"the final at {held} of {n} tasks, which a calibrated band does at all {n} with probability "
            f"{0.9 ** n:.2f}")


def end_width(band) -> tuple[float, float]:
    """The 90% band's reach below and above its median at the last step, relative to the median."""
    m = band.median[-1]
    return 1 - band.lo90[-1] / m, band.hi90[-1] / m - 1


def width_note(widths: dict) -> str:
    """"90% band at the end −a / +b%", and the multi-power law's own band where it applies."""
    (lo, hi), own = widths["default"], widths.get("multipower")
    return f"90% band at the end −{lo:.2%} / +{hi:.2%}" + (
        f" (the multi-power law's own −{own[0]:.2%} / +{own[1]:.2%})" if own else "")


def endpoint_tasks() -> list[dict]:
    """Surface fits on final losses (N, D, loss; then the targets' N, D, loss)."""
    lad, _ = ds.olmo_ladder()
    finals = ds.olmo_finals(lad)
    out = []
    tg = ds.olmo_targets()
    for name, (N, D, actual) in tg.items():
        out.append(("olmo2-" + name, finals["N"].to_numpy(), finals["D"].to_numpy(), finals["loss"].to_numpy(),
                    np.array([N]), np.array([D]), np.array([actual])))
    small, big = finals[finals["N"] < 3e9], finals[finals["N"] >= 3e9]
    out.append(("olmo-3.2B-finals", small["N"].to_numpy(), small["D"].to_numpy(), small["loss"].to_numpy(),
                big["N"].to_numpy(), big["D"].to_numpy(), big["loss"].to_numpy()))
    df = best_lr_runs(ds.misfitting()).sort_values("step")
    fin = df.groupby("run_id").agg(N=("params_nonembed", "first"), D=("tokens", "max"), loss=("loss", "last"),
                                   model=("model", "first"))
    s, b = fin[fin["model"] != "misfitting_1b"], fin[fin["model"] == "misfitting_1b"]
    out.append(("misfitting-1b-finals", s["N"].to_numpy(), s["D"].to_numpy(), s["loss"].to_numpy(),
                b["N"].to_numpy(), b["D"].to_numpy(), b["loss"].to_numpy()))
    ch = ds.chinchilla()
    order = np.argsort(ch["flops"].to_numpy())
    fit_i, test_i = order[:-30], order[-30:]
    out.append(("chinchilla-top30", ch["params"].to_numpy()[fit_i], ch["tokens"].to_numpy()[fit_i],
                ch["loss"].to_numpy()[fit_i], ch["params"].to_numpy()[test_i], ch["tokens"].to_numpy()[test_i],
                ch["loss"].to_numpy()[test_i]))
    return out


def score_endpoint(task) -> dict[str, dict]:
    from fits import bootstrap

    name, N, D, y, Nt, Dt, yt = task
    rows = {}
    for label, form in ENDPOINT_METHODS.items():
        choice = choose_surface(N, D, y, form=form)
        pred = choice.fit.predict(Nt, Dt)
        band = choice.band(Nt, Dt, bootstrap(choice.fit, 200, seed=0))
        lo, hi = band.lo90, band.hi90
        err = pred / yt - 1
        rows[label] = {"final": float(np.mean(err)), "final_abs": float(np.mean(np.abs(err))),
                       "mean_abs": float(np.mean(np.abs(err))), "inside": int(np.sum((lo <= yt) & (yt <= hi))),
                       "n": int(yt.size)}
    return rows


# ---- the 535B hero ------------------------------------------------------------------------------------------


def published_marin(rungs: list[Run], hero: Run, E: float = 1.5) -> np.ndarray:
    """The published method: per fraction, log(L − 1.5) linear in log(C·g) across the rungs; the crashed
    rung completed by a straight line through its 60–80% evals, extrapolated, + 0.005. At 5%…100%."""
    g = np.round(np.arange(1, 21) * 0.05, 10)
    Y = []
    for r in rungs:
        fr = np.round(r.fractions / 0.05) * 0.05
        vals = {round(float(f), 2): float(v) for f, v in zip(fr, r.values)}
        if not r.finished:
            xs = np.array([0.6, 0.65, 0.7, 0.75, 0.8])
            a, b = np.polyfit(xs, [vals[round(x, 2)] for x in xs], 1)
            for x in g[g > 0.8 + 1e-9]:
                vals[round(float(x), 2)] = a * x + b + 0.005
        Y.append([vals.get(round(float(x), 2), np.nan) for x in g])
    Y = np.array(Y)
    C = np.array([r.compute for r in rungs])
    out = []
    for j, x in enumerate(g):
        slope, icpt = np.polyfit(np.log(C * x), np.log(Y[:, j] - E), 1)
        out.append(E + np.exp(icpt + slope * np.log(hero.compute * x)))
    return np.array(out)


def marin_hero(n_boot: int) -> list[str]:
    rungs, hero = marin_runs()
    g = np.round(np.arange(1, 21) * 0.05, 10)
    steps = np.round(g * hero.planned_steps).astype(np.int64)
    pub = published_marin(rungs, hero)
    res = core.predict(rungs, hero, steps, core.Settings(options=Options(n_boot=n_boot)))
    lines = [f"535B hero (no actual curve): published method {pub[-1]:.4f} at the end (published 2.039); "
             f"default ({res.method}) {res.band.median[-1]:.4f} [90% {res.band.lo90[-1]:.4f}–{res.band.hi90[-1]:.4f}]"]
    lines.append("  fraction  published  " + "  ".join(f"{m:>22}" for m in res.candidates))
    for j in (1, 3, 5, 9, 13, 17, 19):
        cells = []
        for m in res.candidates:
            b = res.band_for(m)
            cells.append(f"{b.median[j]:.4f} [{b.lo90[j]:.3f},{b.hi90[j]:.3f}]")
        lines.append(f"  {g[j]:>7.0%}  {pub[j]:>9.4f}  " + "  ".join(f"{c:>22}" for c in cells))
    lines.append("  backtest on the ladder: " + "; ".join(
        f"{s.method} {s.score:.2%}" if not s.failed else f"{s.method} failed ({s.failed[:60]})" for s in res.backtest))
    return lines


# ---- main ---------------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", type=Path, default=Path("demo"), help="a `ladder demo` folder (skipped when missing)")
    ap.add_argument("--n-boot", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON")
    ap.add_argument("--only", default="", help="comma-separated task name prefixes")
    args = ap.parse_args()
    t_start = time.perf_counter()
    tasks = olmo_tasks() + marin_tasks() + misfitting_tasks() + mpl_tasks() + demo_tasks(args.demo)
    if args.only:
        tasks = [t for t in tasks if any(t.name.startswith(p) for p in args.only.split(","))]
    results: dict[str, dict] = {}
    for task in tasks:
        t0 = time.perf_counter()
        results[task.name] = score_curve(task, args.n_boot)
        print(f"{task.name:<22} {task.protocol}  [{time.perf_counter() - t0:.0f} s; default chose "
              f"{', '.join(results[task.name]['_chosen'])}; {width_note(results[task.name]['_width90'])}]", flush=True)
    print()
    print_table(results, METHODS)
    print(calibration(results))
    ep = {}
    if not args.only:
        for task in endpoint_tasks():
            ep[task[0]] = score_endpoint(task)
        print("\nendpoint tasks (`ladder fit surface`):")
        print_table(ep, tuple(ENDPOINT_METHODS))
        print()
        for line in marin_hero(args.n_boot):
            print(line)
    print(f"\nleaderboard took {time.perf_counter() - t_start:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"curve": results, "endpoint": ep}, indent=2))


def print_table(results: dict[str, dict], methods) -> None:
    names = list(results)
    print(f"{'method':<20}" + "".join(f"{n:>24}" for n in names) + f"{'mean |final|':>14}{'mean signed':>13}"
          f"{'curve mean':>12}{'in 90%':>9}{'worst task':>11}")
    for m in methods:
        cells, finals, signed, means, inside, n, worst = [], [], [], [], 0, 0, 1.0
        for name in names:
            r = results[name].get(m)
            if r is None:
                cells.append(f"{'n/a':>24}")
                continue
            cov = r["inside"] / r["n"]
            cells.append(f"{r['final_abs']:>7.2%} ({r['final']:+.2%}) {r['mean_abs']:.2%} {cov:>4.0%}".rjust(24))
            finals.append(r["final_abs"])
            signed.append(r["final"])
            means.append(r["mean_abs"])
            inside += r["inside"]
            n += r["n"]
            worst = min(worst, cov)
        if finals:
            print(f"{m:<20}" + "".join(cells) + f"{np.mean(finals):>14.2%}{np.mean(signed):>+13.2%}"
                  f"{np.mean(means):>12.2%}{inside / n:>9.0%}{worst:>11.0%}")


if __name__ == "__main__":
    main()
