"""The whole loop on a laptop: plan the micro ladder, train it, predict the hero, train the hero while
watching it live, and score the prediction against what happened.

Everything lands under one folder (default ``demo/``): the plan and the runs (``plan/``), the store
(``store/``), the prediction and the watcher's alerts (``prediction/``), the figures, ``report.html``
and ``results.json``. A second run reuses every finished run and only redoes the cheap steps. It replaces only
what it wrote itself (``plan/demo-configs.json`` lists its configs): a user's runs or configs there are refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ladder import runfiles as keys
from ladder.config.plan import Plan, override, plan
from ladder.config.recipe import load_recipe
from ladder.config.runconfig import RunConfig
from ladder.data.sources import LocalSource
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.errors import LadderError
from ladder.files import write_text_atomic
from ladder.launch import is_done, mark_crashed, run_dir_of, same_config, start, train, trainer_stops_with
from ladder.output.display import show_prediction
from ladder.output.figures import draw_all, hero_actual
from ladder.output.report import write_report
from ladder.predict.adapter import PredictSettings, predict
from ladder.predict.prediction import WATCH_FILES, Prediction
from ladder.watch import AlertRules, JsonlSink, TerminalSink
from ladder.watch.monitor import Watcher, only_run
from ladder.watch.sinks import read_alerts
from ladder.watch.state import WatchState

PRESET = "micro-cpu"
QUICK = [
    "tpp=2",
    "seq_len=64",
    "batch_sequences=8",
    "step_multiple=10",
    "eval_every_fraction=0.1",
    "data.eval_sequences=32",
]
"""Overrides of the micro-cpu recipe for `--quick`: the same loop at a fraction of the compute."""


@dataclass(frozen=True)
class DemoResult:
    final_predicted: float
    final_actual: float
    final_error: float
    """Predicted / actual − 1 at the hero's last eval."""
    curve_mean_error: float
    """Mean |predicted / actual − 1| over the hero's evals from 10% of the run on."""
    curve_worst_error: float
    inside_90: float
    """Share of those evals inside the 90% band."""
    seconds: float
    """Wall seconds of the `ladder demo` that trained: this one where it trained a run, else (every run reused) those
    of the results.json it replaced. A demo stopped and run again counts its second part alone."""
    report: Path
    quick: bool = False
    n_boot: int = 200
    seconds_this_run: float = 0.0
    """Wall seconds of this `ladder demo` alone: a few where it reused every run."""

    def to_json(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def demo_plan(quick: bool) -> Plan:
    recipe = load_recipe(PRESET)
    return plan(override(recipe, sets=QUICK) if quick else recipe)


DEMO_CONFIGS = "demo-configs.json"
"""In the demo's plan folder: every run config the demo has written there (of each version and size that wrote one).
A plan YAML or run folder of one of them is the demo's own, replaced when the demo's plan changes; any other is a
user's, and the demo refuses to overwrite it."""


def write_plan(p: Plan, folder: Path, other: Plan | None = None, say=None) -> list[tuple[Path, RunConfig]]:
    """The plan's configs in `folder`. Every file is checked before any is written: a config or run folder of another
    config that the demo wrote there (an earlier version's, listed in `DEMO_CONFIGS`) is replaced, the run folders
    cleared (`say` names them); one of the `other` plan (the demo at its other size, whose runs have the same names)
    is refused, kept for that demo, and so is one the demo did not write (a user's ladder of the same preset)."""
    if other is not None:
        _refuse_other_size(p, other, folder)
    written = _demo_configs(folder)
    stale, new = [], []
    for cfg in p.runs():
        path = folder / f"{cfg.name}.yaml"
        run_dir = run_dir_of(path, cfg)
        found = _config_in(run_dir / keys.CONFIG_FILE)
        if run_dir.exists() and found != cfg:
            if found not in written and (found is not None or _holds_files(run_dir)):
                raise _not_the_demos(run_dir, "a run folder", "delete", folder)
            if found is not None:
                stale.append(run_dir)
        planned = _config_in(path)
        if planned != cfg:
            if path.exists() and planned not in written:
                raise _not_the_demos(path, "a run config", "overwrite", folder)
            new.append(cfg)
    unlisted = [cfg for cfg in p.runs() if cfg not in written]
    if unlisted:  # every config of the plan, listed before any is written: a demo stopped midway knows its own files
        _add_demo_configs(folder, unlisted)
    for run_dir in stale:
        if say is not None:
            say(f"{run_dir}: a run of an earlier config of the demo; cleared to train anew")
        shutil.rmtree(run_dir)
    for cfg in new:
        cfg.save(folder / f"{cfg.name}.yaml")
    return [(folder / f"{cfg.name}.yaml", cfg) for cfg in p.runs()]


def _refuse_other_size(p: Plan, other: Plan, folder: Path) -> None:
    theirs = {cfg.name: cfg for cfg in other.runs()}
    for cfg in p.runs():
        run_dir = run_dir_of(folder / f"{cfg.name}.yaml", cfg)
        if cfg.name in theirs and run_dir.exists() and same_config(run_dir, theirs[cfg.name]) \
                and not same_config(run_dir, cfg):
            raise LadderError(f"{folder.parent} holds the other size's demo (its run {run_dir} is of that plan), "
                              "which this one would delete: give this demo another --out (by default --quick "
                              "writes demo-quick/ and the full demo demo/)")


def _config_in(path: Path) -> RunConfig | None:
    """The run config in `path`, or None where it has none that this version reads."""
    try:
        return RunConfig.load(path, check_coordinates=False)
    except LadderError:
        return None


def _holds_files(run_dir: Path) -> bool:
    """Whether a run folder without a readable run.yaml holds anything but hidden files (a trainer's lock): a
    trainer writes run.yaml before anything else, so such files are none of its training."""
    return not run_dir.is_dir() or any(not f.name.startswith(".") for f in run_dir.iterdir())


def _not_the_demos(path: Path, what: str, would: str, folder: Path) -> LadderError:
    return LadderError(f"{path}: {what} the demo did not write (of another config than its plan, and not one it "
                       f"lists in {folder / DEMO_CONFIGS}), which it would {would}: give the demo another --out, or "
                       "move it away (delete it if an earlier demo left it)")


def _demo_configs(folder: Path) -> list[RunConfig]:
    """The configs `DEMO_CONFIGS` lists that this version reads (none where the demo wrote no file there)."""
    out = []
    for data in _demo_config_data(folder):
        try:
            out.append(RunConfig.from_dict(data, where=str(folder / DEMO_CONFIGS)))
        except LadderError:
            continue  # an earlier version's config that this one cannot read: its files are refused, not lost
    return out


def _demo_config_data(folder: Path) -> list:
    try:
        data = json.loads((folder / DEMO_CONFIGS).read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise LadderError(f"{folder / DEMO_CONFIGS}: cannot read the demo's list of the configs it wrote ({exc}); "
                          "give the demo another --out") from None
    return [x for x in data if isinstance(x, dict)] if isinstance(data, list) else []


def _add_demo_configs(folder: Path, configs: list[RunConfig]) -> None:
    data = _demo_config_data(folder) + [cfg.to_dict() for cfg in configs]
    write_text_atomic(folder / DEMO_CONFIGS, json.dumps(data, indent=1) + "\n")


DEMO_ENTRIES = ("plan", "store", "prediction", "figures", "report.html", "report_figures", "results.json")
"""What the demo writes in its folder."""


def check_demo_folder(out: Path) -> None:
    """Refuse a folder the demo would write into that holds what it did not write: it replaces its store's runs, its
    prediction, alerts, report and results. The demo's own folder is absent or empty, lists the configs the demo wrote
    (``plan/demo-configs.json``), or holds an earlier demo's ``results.json`` or plan (one stopped before its end)."""
    if not out.is_dir() or (out / "plan" / DEMO_CONFIGS).is_file() or (out / "results.json").is_file():
        return
    demos = [*demo_plan(False).runs(), *demo_plan(True).runs()]
    if any(_config_in(out / "plan" / f"{cfg.name}.yaml") == cfg for cfg in demos):
        return
    theirs = sorted(e.name for e in out.iterdir() if not e.name.startswith("."))
    if theirs:
        shown = ", ".join(theirs[:4]) + (", ..." if len(theirs) > 4 else "")
        raise LadderError(f"--out {out}: holds files the demo did not write ({shown}); it would replace its "
                          f"{', '.join(DEMO_ENTRIES)} there: give the demo an empty or new folder")


def run_demo(out: Path, quick: bool, console: Console, poll_seconds: float = 3.0, n_boot: int = 200) -> DemoResult:
    began = time.time()
    check_demo_folder(out)
    p = demo_plan(quick)
    runs = write_plan(p, out / "plan", other=demo_plan(not quick),
                      say=lambda line: console.print(line, style="yellow", highlight=False))
    console.rule(f"1. plan: {p.recipe.name}{' (quick)' if quick else ''}, {len(p.rungs)} rungs and a hero")
    _show_plan(console, p)

    console.rule("2. train the rungs (finished ones are skipped)")
    trained = _train_rungs(console, runs[:-1])

    console.rule("3. pull the rungs, fit, predict the hero")
    store = Store(out / "store")
    # the demo's store holds its own runs alone: a copy of its folder (or of the clone) reads them from the copy
    pull(store, LocalSource(out / "plan" / "runs"), replace=True)
    hero_path, hero = runs[-1]
    pred = predict(store, hero, PredictSettings(n_boot=n_boot))
    pred_dir = out / "prediction"
    # a fresh hero starts a fresh watch; a finished one is replayed against this prediction (an earlier
    # watch judged it against the prediction of an earlier demo, which may differ)
    for name in WATCH_FILES:
        (pred_dir / name).unlink(missing_ok=True)
    pred.save(pred_dir)
    show_prediction(console, pred)

    console.rule("4. train the hero while the watcher follows it")
    watcher = _hero_watcher(store, hero_path, hero, pred, pred_dir, console)
    if is_done(hero_path, hero):
        console.print(f"[dim]{escape(hero.name)}: finished already; checking it against the prediction[/]", markup=True)
    else:
        _train_watched(hero_path, watcher, poll_seconds)
        trained = True
    watcher.check()

    console.rule("5. predicted against actual")
    actual = hero_actual(store, pred)
    figures = draw_all(store, pred, out / "figures")
    verdicts = WatchState.load(pred_dir / "watch-state.json", pred.run_name).verdicts
    alerts = read_alerts(pred_dir / "alerts.jsonl", pred.run_name)
    report = write_report(out / "report.html", pred, figures, actual, alerts, verdicts,
                          title=f"Demo: {hero.name} predicted from {len(p.rungs)} rungs")
    this_run = time.time() - began
    seconds = this_run if trained else _seconds_trained(out / "results.json", quick, this_run)
    result = dataclasses.replace(score(pred, actual, seconds, report), quick=quick, n_boot=n_boot,
                                 seconds_this_run=this_run)
    write_text_atomic(out / "results.json", json.dumps(result.to_json(), indent=2))
    _show_result(console, result, pred, out)
    return result


def _seconds_trained(results: Path, quick: bool, this_run: float) -> float:
    """`DemoResult.seconds` for a demo that trained nothing: those of the earlier demo's `results` (this run's where
    it has none of the same size)."""
    try:
        earlier = json.loads(results.read_text())
    except (OSError, ValueError):
        return this_run
    seconds = earlier.get("seconds") if isinstance(earlier, dict) and earlier.get("quick") == quick else None
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    return float(seconds) if number and 0 < seconds < float("inf") else this_run


def _show_result(console: Console, result: DemoResult, pred: Prediction, out: Path) -> None:
    console.print(f"hero final {escape(pred.metric)}: predicted [bold]{result.final_predicted:.4f}[/], actual "
                  f"[bold]{result.final_actual:.4f}[/]: relative error [bold]{result.final_error:+.2%}[/]", markup=True)
    console.print(f"whole curve (from 10% of the run to its end): mean error {result.curve_mean_error:.2%}, worst "
                  f"{result.curve_worst_error:.2%}, {result.inside_90:.0%} of evals inside the 90% band")
    if not result.quick:
        console.print(f"seed noise: the hero's final loss moves by {HERO_SEED_SD:.2%} (one standard deviation over "
                      f"3 training seeds, benchmarks/demo_seeds.py); this error is {abs(result.final_error) / HERO_SEED_SD:.2g}× "
                      "that")
    else:
        console.print("quick: the rungs train 2 tokens per parameter for a few hundred steps, too little to predict a "
                      "hero from; this checks the loop, not the accuracy (`ladder demo` without --quick for that)")
    console.print(f"prediction: {out / 'prediction'}/ (parquet, CSV, JSON; the watcher's alerts.jsonl)")
    console.print(f"figures: {out / 'figures'}/ (PNG and SVG)")
    console.print(f"report:  {result.report}")
    took = f"{result.seconds_this_run:.0f} s"
    if result.seconds != result.seconds_this_run:
        took += f"; the demo that trained its runs took {result.seconds:.0f} s"
    console.print(f"results: {out / 'results.json'}   ({took})")


HERO_SEED_SD = 0.0173
"""Relative standard deviation of the full demo hero's final eval loss over training seeds 0, 1, 2
(1.1212, 1.0906, 1.1260), measured by benchmarks/demo_seeds.py on the micro-cpu preset."""


def score(pred: Prediction, actual, seconds: float, report: Path) -> DemoResult:
    """The hero's final eval and its curve from 10% of the run on, as `ladder score` scores them."""
    from ladder.predict.scoring import score_prediction

    if actual.empty:
        raise LadderError(f"{pred.run_name} logged no {pred.metric}; the demo cannot score its prediction")
    sc = score_prediction(pred, actual, start=0.1)
    return DemoResult(
        final_predicted=sc.last_predicted, final_actual=sc.last_actual, final_error=sc.last_error,
        curve_mean_error=sc.curve_mean_error, curve_worst_error=sc.curve_worst_error,
        inside_90=sc.inside_90, seconds=seconds, report=report,
    )


AGAIN = "run the same `ladder demo` command again"
"""How a stopped demo goes on: each run resumes from its last checkpoint."""


def _train_rungs(console: Console, runs: list[tuple[Path, RunConfig]]) -> bool:
    """Train the rungs not finished yet; whether any was trained."""
    trained = False
    for path, cfg in runs:
        if is_done(path, cfg):
            console.print(f"[dim]{escape(cfg.name)}: finished already, skipped[/]", markup=True)
            continue
        trained = True
        if train(path, resume=True, progress=console.is_terminal, again=AGAIN):
            raise LadderError(f"training {cfg.name} failed; see the trainer's message above, then run the demo again")
    return trained


def _hero_watcher(store: Store, hero_path: Path, hero: RunConfig, pred: Prediction, pred_dir: Path,
                 console: Console) -> Watcher:
    """The watcher of the hero's run folder. Its pulls replace a hero the store holds from another folder: in a copy of
    the demo whose hero folder was removed, step 3's pull kept the original's, and the hero trained here is the demo's."""
    return Watcher(store, only_run(LocalSource(run_dir_of(hero_path, hero)), hero.name), pred,
                   AlertRules(metric=pred.metric),
                   {"terminal": TerminalSink(console), "jsonl": JsonlSink(pred_dir / "alerts.jsonl", pred.run_name)},
                   pred_dir / "watch-state.json", replace=True)


def _train_watched(path: Path, watcher: Watcher, poll_seconds: float) -> None:
    run_dir = run_dir_of(path, RunConfig.load(path, check_coordinates=False))
    proc = start(path, resume=True, progress=False, again=AGAIN)
    try:
        with trainer_stops_with(proc):
            while proc.poll() is None:
                time.sleep(poll_seconds)
                if (run_dir / keys.METRICS_FILE).exists():
                    watcher.check()
    finally:
        if proc.returncode:  # stopped or failed: the store says so as its run folder does, not "running"
            mark_crashed(run_dir)  # killed: it could not
            with contextlib.suppress(LadderError):  # the error on its way says more
                pull(watcher.store, watcher.source, replace=watcher.replace)
    if proc.returncode:
        raise LadderError(f"the hero's training stopped with exit code {proc.returncode}; run the demo again to resume it")


def _show_plan(console: Console, p: Plan) -> None:
    from ladder.config.spec import format_count

    for run in p.runs():
        console.print(f"  {run.name:<18} {format_count(run.spec.active_params()):>6} active  "
                      f"{run.stop_after_steps:>6,} steps  C = {run.fit_flops:.3g} FLOPs  {run.schedule.describe()}",
                      highlight=False)
    biggest = max(r.fit_flops for r in p.rungs)
    console.print(f"  rungs span {biggest / min(r.fit_flops for r in p.rungs):.1f}x in compute; the hero is "
                  f"{p.hero.fit_flops / biggest:.1f}x the largest rung", highlight=False)
