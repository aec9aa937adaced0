"""`ladder watch`, `ladder plot` and `ladder report`: follow a live run against its prediction, and show it."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from datetime import datetime
from pathlib import Path

import typer
from rich.markup import escape

from ladder.cli.app import command, console, err_console, relative_seconds, seconds_until, warn
from ladder.config.limits import poll_seconds
from ladder.data.sources import CoordinateOverrides, LocalSource, OfflineSource, WandbSource
from ladder.data.sources.table import tables_instead
from ladder.data.store import DEFAULT_ROOT, PULL_FIRST, Store
from ladder.durations import span_text
from ladder.errors import LadderError
from ladder.outpaths import out_file
from ladder.output.report import is_report, write_report
from ladder.predict.prediction import Prediction
from ladder.predict.stale import stale_warning
from ladder.watch import AlertRules, JsonlSink, TerminalSink, WebhookSink
from ladder.watch.monitor import CheckResult, Watcher, not_stored, only_run
from ladder.watch.sinks import of_run, read_alerts
from ladder.watch.state import WatchState, only_watcher

PREDICTION = typer.Option(..., "--prediction", help="Folder (or prediction.json) written by `ladder predict`.")
TARGET_RUN = typer.Option(None, "--target-run", help="The run to follow, by name or id, when it differs from the prediction's target (e.g. a prediction made from a target file).")
STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder holding the rungs (the run is pulled into it too).")
SHOWN_STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help=(
    "Store folder holding the rungs and the run as far as it has been pulled (`ladder pull`, or `ladder watch`)."))


def _source(local: Path | None, offline: Path | None, wandb: str | None, quiet_s: float = 120.0,
            step_key: str = "_step"):
    """The run's source; a local or offline run that wrote nothing for `quiet_s` while it says it runs is taken
    for stopped (crashed): three times the watch's --stale-minutes, when the stale warning turns to an alarm."""
    given = [x for x in (local, offline, wandb) if x is not None]
    if len(given) > 1:
        raise LadderError("give at most one of --local RUN_DIR, --offline WANDB_DIR, --wandb ENTITY/PROJECT "
                          "(none: watch the run as the store holds it)")
    if step_key != "_step" and offline is None and wandb is None:
        raise LadderError("--step-key is for --offline and --wandb runs (a trainer's run folder logs its step)")
    if not given:
        return None
    if local is not None and (tables := tables_instead(local, "--local")):
        raise LadderError(f"{tables}, and watch it from the store with no --local (`ladder watch --prediction P "
                          "--store STORE`), importing the file again before each check (from cron, with --once)")
    for option, path in (("--local", local), ("--offline", offline)):
        if path is None or path.is_dir():
            continue
        if path.exists():
            raise LadderError(f"{option} {path}: is a file, not a folder; give the run's folder ({path.parent}, "
                              "which holds it?)")
        # a folder not written yet in one that exists is a run not started (cannot judge, exit 3), and so is one a
        # plan's run config names (its trainer makes the runs/ folder); else a typo
        if not path.absolute().parent.is_dir() and not (option == "--local" and _planned_run_dir(path)):
            holder = _nearest_holder(path)
            instead = "" if holder is None else f", or a folder that exists and will hold it: {option} {holder}"
            raise LadderError(f"{option} {path}: no such folder; give the run's folder (it, or the folder it will "
                              f"be written in, must exist){instead}")
    if local is not None:
        return LocalSource(local, running_window_s=quiet_s)
    if offline is not None:
        return OfflineSource(offline, running_window_s=quiet_s, step_key=step_key)
    return WandbSource(wandb, step_key=step_key, say=warn)


def _planned_run_dir(path: Path) -> bool:
    """Whether a run config of a plan (`<name>.yaml` in the nearest folder above `path` that exists, `ladder plan
    --out`'s folder) writes its run to `path`, which its trainer has not made yet."""
    from ladder.config.runconfig import RunConfig
    from ladder.launch import run_dir_of

    holder = next((q for q in path.absolute().parents if q.is_dir()), None)
    config = None if holder is None else holder / f"{path.name}.yaml"
    if config is None or not config.is_file():
        return False
    try:
        cfg = RunConfig.load(config, check_coordinates=False)
    except (LadderError, OSError):
        return False
    return run_dir_of(config, cfg).resolve() == path.resolve()


def _nearest_holder(path: Path) -> Path | None:
    """The nearest folder above `path` that exists, as `path` names it: given instead, it is searched for the run
    at every check, so a watch started before the trainer made the run's folder waits for it. None where that is
    the file system's root, the home folder or the current folder, whose search would reach far beyond the run."""
    holder = next((q for q in path.parents if q.is_dir()), None)
    try:
        home = {Path.home()}
    except RuntimeError:  # no home folder (a container's user)
        home = set()
    if holder is None or holder.absolute() in {Path(holder.anchor or "/"), Path.cwd(), *home}:
        return None
    return holder


@command("watch")
def watch_command(
    prediction: Path = PREDICTION,
    local: Path | None = typer.Option(None, "--local", help="The trainer's run folder (or a folder of them); one the run has not written yet is waited for (cannot judge until it has)."),
    offline: Path | None = typer.Option(None, "--offline", help="A wandb offline folder being written (wandb/); a run not written there yet is waited for (cannot judge until it has, said once)."),
    wandb: str | None = typer.Option(None, "--wandb", help="ENTITY/PROJECT on wandb (WANDB_API_KEY from the environment)."),
    store: Path = STORE,
    once: bool = typer.Option(False, "--once", help="Check once and exit: 0 on track, 3 cannot judge, 4 warning, 5 alarm (1 is a bug, 2 a usage error; for cron)."),
    poll: float = typer.Option(60.0, "--poll", help="Seconds between checks."),
    max_checks: int | None = typer.Option(None, "--max-checks", help="Stop after this many checks."),
    jsonl: Path | None = typer.Option(None, "--jsonl", help="Append alerts and verdicts here (default: alerts.jsonl beside the prediction)."),
    webhook: bool = typer.Option(False, "--webhook", help="POST new alerts as JSON to $LADDER_WEBHOOK_URL (chat incoming webhooks work); a deviation that persists at the same level is posted once."),
    state: Path | None = typer.Option(None, "--state", help="Watch state file (default: watch-state.json beside the prediction)."),
    deadline: str | None = typer.Option(None, "--deadline", help="When the run must finish: ISO time, or a time from now like 72h (or 90m, 2d) counted from the first watch given it (kept in --state, so a cron job's --once keeps the time): warns when throughput will miss it."),
    stale_minutes: float = typer.Option(30.0, "--stale-minutes", help="Warn when nothing new arrives for this long (a first watch counts from the run's last write: its files' time, its wandb heartbeat, or the last pull that brought the store something); alarm at three times it, when a --local or --offline run that still says it runs is taken for crashed."),
    step_key: str = typer.Option("_step", "--step-key", help="The history key that holds the optimizer step, for --offline and --wandb (as for `ladder pull`: give the one the run was pulled with)."),
    coord: list[str] = typer.Option([], "--coord", help="A coordinate the run's source does not give, FIELD=VALUE (as for `ladder pull`)."),
    coords: Path | None = typer.Option(None, "--coords", help="YAML file of coordinates for the run: {RUN: {FIELD: VALUE}} (as for `ladder pull`)."),
    coord_key: list[str] = typer.Option([], "--coord-key", help="FIELD=KEY: a coordinate from the run's own config key, e.g. active_params=model.n_params (as for `ladder pull`)."),
    target_run: str | None = TARGET_RUN,
    replace: bool = typer.Option(False, "--replace", help="Replace a stored run of the same id from another source, or with other coordinates, as `ladder pull wandb|offline|local --replace` does (refused without it)."),
) -> None:
    """Follow a live run and say at every eval whether it is on track with its prediction.

    The run comes from --local, --offline or --wandb (pulled into the store at every check), or,
    with none of them, from the store as it is (a run you keep fresh with `ladder pull` or `ladder
    import`).

    Rules: deviation beyond the band (warn past the 50% band's edge or 0.5%, alarm above the 90%
    band's edge or 1%, whichever is farther from the median; a loss below the 90% band warns: the
    prediction is off, not the run; so does every deviation of a prediction that warned its band is
    likely too narrow), slow drift (CUSUM),
    train-loss spikes (judged from the run's 150th logged train/loss value on), NaN/inf, grad-norm shape against the rungs, MoE drop fraction, stale telemetry, throughput against a deadline,
    a logged LR that departs from the LR the prediction assumed. A schedule edit in the run's config
    triggers a new prediction from the realised LR sequence. Alerts are never sent twice, also
    across restarts. A metric logged much more often than the prediction's steps (a per-step train
    loss) is judged once per predicted step, on its mean since the step before.

    Exit codes, of the last check (with --once, or when the run has ended), the worst verdict among
    the evals it judged (with no new eval, the last eval's), or where an earlier check of a follow
    warned or alarmed and the last is better, that one: 0 on track; 3 cannot
    judge (the prediction has no usable value at the eval, the run never logs the predicted metric,
    or the run cannot be read); 4 warning; 5 alarm. 2 is a usage error (a bad option or file) and 1
    a bug, so a cron job can tell a failing run from a typo.
    """
    _check_numbers(poll, max_checks, stale_minutes)
    pred = _load(prediction, target_run, checked=False)  # a damaged table: the rules that need none still run
    folder = prediction if prediction.is_dir() else prediction.parent
    source = _source(local, offline, wandb, 3 * stale_minutes * 60, step_key)
    st = Store(store)
    source = None if source is None else only_run(source, pred.run_name, given=target_run is not None, store=st)
    overrides = CoordinateOverrides.parse(coord, coords, coord_key)
    state = _watch_file(state or folder / "watch-state.json", "--state", "watch-state.json", store)
    kept = None if deadline is None else _deadline(deadline, state, pred.run_name)
    rules = AlertRules(metric=pred.metric, stale_after_s=stale_minutes * 60,
                       deadline=None if kept is None else kept["at"])
    jsonl = _watch_file(jsonl or folder / "alerts.jsonl", "--jsonl", "alerts.jsonl", store)
    if jsonl.absolute() == state.absolute():
        raise LadderError(f"--jsonl and --state are both {jsonl}; give each its own file")
    sinks = {"terminal": TerminalSink(console), "jsonl": JsonlSink(jsonl, pred.run_name)}
    if webhook:
        sinks["webhook"] = WebhookSink.from_env(console=err_console)  # its failures on stderr, as every warning
    if source is None:
        st.must_exist("give the run's source (--local, --offline or --wandb) or the store that holds it (--store)")
    new_store = source is not None and not st.exists()

    def say_new_store() -> None:  # once the first check worked: an error of that check is the one line shown
        if new_store:
            warn(f"--store {store} held no store: it holds the watched run alone, so the rules that compare it with "
                 "the rungs (grad norm, MoE drop fraction) are off; give the ladder's store to have them")

    def following(first: CheckResult) -> None:  # a follow says where the run stands at once, and how it goes on
        if "terminal" not in watcher.told:
            sinks["terminal"].send((), first.verdict, first.summary or "\n".join(first.lines))
        if not (first.finished and not first.crashed) and max_checks != 1:
            console.print(f"checking again every {span_text(poll)} until the run ends (Ctrl-C to stop)")
        say_new_store()

    def repredict(old: Prediction, config: dict, why: str) -> Prediction:
        from ladder.data.runview import target_from_store
        from ladder.predict.adapter import PredictSettings, predict  # scipy: only when the schedule changes

        target = target_from_store(st, old.run_name, old.metric)
        if target.schedule is None and isinstance(config.get("schedule"), dict):  # one that logs its LR alone
            from ladder.data.sources.coords import schedule_from  # (its plan, `_planned_by`)

            target = dataclasses.replace(target, schedule=schedule_from(config["schedule"], old.run_name))
        if target.schedule is None:
            return old
        said = (f"{escape(why)}: predicting again from its own schedule ({escape(target.schedule.describe())})" if why
                else f"[bold]schedule edited[/] ({escape(target.schedule.describe())}): predicting again from the new "
                     "LR sequence")
        console.print(said, markup=True)
        # exactly the settings the stored prediction was made with
        settings = PredictSettings.from_dict(old.settings) if old.settings else PredictSettings(metric=old.metric)
        return predict(st, target, settings)

    watcher = Watcher(st, source, pred, rules, sinks, state, repredict=repredict, prediction_dir=folder,
                      overrides=overrides, replace=replace, warn=warn, note=lambda s: console.print(escape(s)),
                      deadline=kept if _from_now(deadline) else None)
    with only_watcher(state, jsonl):
        sinks["jsonl"].end_cut_line()
        result = watcher.check() if once else watcher.run(poll, max_checks, after_first=following)
    if once:
        say_new_store()
    quiet = not result.lines and "terminal" not in watcher.told
    if quiet:  # it printed nothing new: where the run stands
        sinks["terminal"].send((), result.verdict, result.summary)
    if result.finished and not result.crashed and (ended := _how_it_ended(st, watcher.prediction)):
        console.print(escape(ended), highlight=False)
    if result.finished and not once and not quiet:  # a follow that ended with the run's last evals: said
        console.print(f"{escape(pred.run_name)} is no longer running ({'crashed' if result.crashed else 'finished'}): "
                      f"the watch ends, exit code {result.exit_code} ({_why_code(result)})")
    raise typer.Exit(result.exit_code)


def _how_it_ended(store: Store, pred: Prediction) -> str:
    """For a run that finished: its last eval against the prediction and how the curve held, as `ladder score` gives
    them ("" where it has nothing to score)."""
    from ladder.predict.scoring import score_prediction

    try:
        row = store.find(pred.run_name)
        if row is None:
            return ""
        actual = store.history([str(row["run_id"])], [pred.metric], include_nonfinite=True)
        sc = score_prediction(pred, actual.set_index("step")["value"].sort_index())
    except LadderError:
        return ""
    return (f"{pred.run_name} finished: its last eval (step {sc.last_step:,}) {sc.last_actual:.4f} against the "
            f"predicted {sc.last_predicted:.4f}, the prediction's error {sc.last_error:+.2%}; from 10% of the run on, "
            f"mean |error| {sc.curve_mean_error:.2%}, {sc.inside_90:.0%} of {sc.n} evals inside the 90% band "
            "(`ladder score` and `ladder report` give the rest)")


def _why_code(result: CheckResult) -> str:
    """What a follow's exit code is: its last check's verdict, or an earlier check's warning or alarm."""
    if result.exit_code > result.own_exit_code:
        return f"{'an' if result.earlier == 'alarm' else 'a'} {result.earlier} at an earlier check; the last check's verdict: " \
               f"{result.verdict.upper()}"
    return "the worst verdict of its last check"


def _watch_file(path: Path, option: str, own: str, store: Path) -> Path:
    """A file the watch writes (its state or its alerts): not a prediction's or a store's file, not the other
    watch file, not in a store, for the alerts a file of JSON lines where it exists (they are appended), and in
    a folder it can write, checked before any alert is sent."""
    from ladder.outpaths import can_write_in, kept_by
    from ladder.predict.prediction import WATCH_FILES

    p = Path(path)
    if p.is_dir():
        raise LadderError(f"{option} {p}: is a folder; give the path of the file to write")
    if p.exists():
        keeper = kept_by(p)
        if (keeper is not None or p.name in WATCH_FILES) and p.name != own:
            raise LadderError(f"{option} {p}: is a file of {keeper or 'another watch'}; give the path of another "
                              "file (writing into it would destroy it)")
        if own.endswith(".jsonl"):
            _check_alerts_file(p, option)
    if Path(store).absolute() in p.absolute().parents:  # the store may not exist yet: the watch makes it
        raise LadderError(f"{option} {p}: is in the metric store {store}; give a path outside it (files there "
                          "would mix with the store's)")
    folder = next((q for q in p.absolute().parents if q.exists()), None)
    if folder is None or not folder.is_dir():
        raise LadderError(f"{option} {p}: cannot write in {folder}; give a path in a folder you can write")
    can_write_in(folder, p, option)
    return p


def _check_numbers(poll: float, max_checks: int | None, stale_minutes: float) -> None:
    poll_seconds(poll)
    if max_checks is not None and max_checks < 1:
        raise LadderError(f"--max-checks {max_checks}: must be at least 1")
    if not math.isfinite(stale_minutes) or stale_minutes <= 0:
        raise LadderError(f"--stale-minutes {stale_minutes}: must be positive minutes")


def _deadline(deadline: str, state_path: Path, run: str) -> dict:
    """--deadline as {"given", "at"}. Hours count from the first watch given them: where the state file already
    holds the same hours for this run (a cron job's `--once` every few minutes), its time is kept, or the
    deadline would move on with every check and never be missed."""
    saved = WatchState.read(state_path) if _from_now(deadline) else None
    if saved is not None and saved.run == run and saved.deadline and saved.deadline["given"] == deadline.strip():
        at = saved.deadline["at"]
        console.print(f"--deadline {deadline.strip()}: counted from the first watch given it, so the run must finish "
                      f"by {_clock(at)} (give another time from now or an ISO time to move it)", highlight=False)
        return {"given": deadline.strip(), "at": at}
    return {"given": deadline.strip(), "at": time.time() + seconds_until(deadline)}


def _check_alerts_file(p: Path, option: str) -> None:
    """Refuse an existing file the alerts cannot be appended to (not JSON lines); warn where its last line was cut
    short (a watch killed mid-write, a full disk): it is the watch's own file, and the sink ends that line so that
    readers skip it."""
    end = _alerts_end(p)
    if end == "foreign":
        raise LadderError(f"{option} {p}: exists and its last line is not a JSON object, so it is no alerts "
                          "file; give the path of a new file or of earlier alerts (appending would spoil it)")
    if end == "cut":
        warn(f"{option} {p}: its last line was cut short (a watch stopped mid-write, or a full disk); that line is "
             "ended where it stops and ignored, and the alerts are appended after it")


SINK_LINE = b'{"time": '
"""How every line `JsonlSink` writes begins."""


def _alerts_end(p: Path) -> str:
    """How the file at `p` ends: "whole" (empty, or in a JSON object's line, or in a cut line an earlier watch
    ended), "cut" (in a line the watch began and a stop cut short, after the watch's lines) or "foreign" (it is no
    file of JSON lines)."""
    try:
        with open(p, "rb") as f:
            first = f.readline(1 << 20)
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - 65536, 0))
            lines = f.read().split(b"\n")
    except OSError:
        return "whole"  # unreadable: the writer says why
    cut = bool(lines[-1].strip())  # bytes after the last newline
    if size > 65536:
        lines = lines[1:]  # the window's first line may be the end of one that begins before it
    lines = [line for line in lines if line.strip()]
    if not lines or _json_object(lines[-1]):
        return "whole"
    last, earlier = lines[-1], (lines[-2] if len(lines) > 1 else first)
    if _begun_by_sink(last) and _watch_line(first) and _watch_line(earlier):
        return "cut" if cut else "whole"
    return "foreign"


def _watch_line(line: bytes) -> bool:
    """Whether `line` is one the watch wrote: a JSON object, or one it began and a stop cut short (a watch that
    went on after such a line ended it and left it there)."""
    return _json_object(line) or _begun_by_sink(line)


def _begun_by_sink(line: bytes) -> bool:
    line = line.rstrip(b"\n")
    return bool(line) and (line.startswith(SINK_LINE) or SINK_LINE.startswith(line))


def _json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _from_now(deadline: str | None) -> bool:
    """Whether --deadline is a time from now (72h, 90m, 2d), which counts from the first watch given it."""
    return deadline is not None and relative_seconds(deadline) is not None


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M %Z")


@command("plot")
def plot_command(
    prediction: Path = PREDICTION,
    store: Path = SHOWN_STORE,
    out: Path = typer.Option(Path("figures"), "--out", help="Folder for the PNG and SVG figures."),
    target_run: str | None = TARGET_RUN,
) -> None:
    """Draw the ladder fit, the predicted hero curve with its bands and the actual curve so far,
    collapsed curves, residuals and training diagnostics (PNG and SVG)."""
    # matplotlib and scipy: only for the commands that draw
    from ladder.output.figures import draw_all, figures_dir

    out = figures_dir(out)
    predicted = Prediction.load(prediction)
    pred = _following(predicted, target_run)
    st = _store(store, target_run)
    _say_what_is_not_drawn(st, pred, prediction)
    paths = draw_all(st, pred, out, predicted_as=predicted.run_name)
    console.print("Wrote " + ", ".join(str(p) for p in paths if p.suffix == ".png") + " (and SVG)")


@command("report")
def report_command(
    prediction: Path = PREDICTION,
    store: Path = SHOWN_STORE,
    out: Path = typer.Option(Path("report.html"), "--out", help="The HTML file to write (self-contained: the figures are inlined; their PNG and SVG files go to the folder <name>_figures/ beside it)."),
    alerts: Path | None = typer.Option(None, "--alerts", help="Alerts JSON lines (default: alerts.jsonl beside the prediction)."),
    target_run: str | None = TARGET_RUN,
) -> None:
    """One self-contained HTML page: figures, the prediction every 5%, the forms and assumptions, alerts."""
    from ladder.output.figures import draw_all, figures_dir, hero_actual

    predicted = Prediction.load(prediction)
    pred = _following(predicted, target_run)
    folder = prediction if prediction.is_dir() else prediction.parent
    out = out_file(out, kinds=(".html", ".htm"), ours=(is_report, "a page `ladder report` wrote"))
    if not out.suffix and not out.exists():  # `--out reports/` reaches here as `reports`
        raise LadderError(f"--out {out}: give the HTML file to write, e.g. {out / 'report.html'} (a name without "
                          ".html would be a page no browser opens as one)")
    if out.suffix.lower() not in (".html", ".htm") and not out.exists():
        raise LadderError(f"--out {out}: give a name ending in .html, e.g. {out.with_suffix('.html')} (a browser "
                          f"opens a {out.suffix} file as something else than a page)")
    st = _store(store, target_run)
    if alerts is not None and not alerts.is_file():
        what = "a folder" if alerts.is_dir() else "not a regular file" if alerts.exists() else "no such file"
        raise LadderError(f"--alerts {alerts}: {what}; give the alerts.jsonl `ladder watch` wrote")
    # read first: a bad file writes nothing
    every = read_alerts(alerts or folder / "alerts.jsonl")
    alert_rows, verdicts, note = of_run(every, pred.run_name), [], None
    others = sorted({str(a["run"]) for a in every if a.get("run")} - {pred.run_name}) if alerts else []
    if others and not alert_rows:
        raise LadderError(f"--alerts {alerts}: its alerts are of {', '.join(map(repr, others[:3]))}, none of "
                          f"{pred.run_name!r}; give the alerts.jsonl of this run's watch (or --target-run RUN)")
    state_file = folder / "watch-state.json"
    state = WatchState.read(state_file)
    if state is not None and state.run == pred.run_name:
        verdicts = state.verdicts
    elif state is not None:  # the watch beside the prediction followed another run
        if target_run is None and pred.run_name not in set(st.runs()["name"]):
            state.must_be_of(pred.run_name, state_file)  # its error says which --target-run to give
        alert_rows = [a for a in alert_rows if a.get("run") == pred.run_name]
        note = (f"The watch whose files sit beside the prediction followed '{state.run}', not '{pred.run_name}': "
                "its verdicts and alerts are not this run's and are left out.")
    _say_what_is_not_drawn(st, pred, prediction)
    figures = draw_all(st, pred, figures_dir(out.parent / f"{out.stem}_figures", "--out (its figures' folder)"),
                       predicted_as=predicted.run_name)
    again = out.exists()
    actual = hero_actual(st, pred, nonfinite=True)
    title = (None if pred.run_name == predicted.run_name else
             f"{pred.run_name}: progress against the prediction of {predicted.run_name}")
    written = write_report(out, pred, figures, actual, alert_rows, verdicts, title=title, alerts_note=note,
                           score_notes=_score_notes(st, predicted, pred.run_name, actual),
                           not_stored=not_stored(st, pred.run_name) or None)
    console.print(f"Wrote {written}" + (" (it replaces the page written there before; --out NAME.html keeps both)"
                                        if again else ""))


def _score_notes(st: Store, pred: Prediction, run: str, actual) -> list[str]:
    """What `ladder score` says with its score of `run` against `pred` (`actual`: its evals by step)."""
    from ladder.predict.scoring import score_warnings

    row = st.find(run)
    if row is None or not len(actual):
        return []
    return score_warnings(st, row, run, pred, actual.index.to_numpy())


def _say_what_is_not_drawn(st: Store, pred: Prediction, prediction: Path) -> None:
    """Warn where the store lacks some of the rungs the prediction was made from (the figures of the ladder need
    three finished ones), that they changed in the store since it was made (`stale_warning`), and where the run followed
    plans other steps than the prediction (another run?)."""
    stale = stale_warning(st, pred)
    if stale:
        warn(stale)
    runs = st.runs()
    stored = set(runs["name"])
    missing = [r for r in pred.rungs if r not in stored]
    if missing and len(missing) < len(pred.rungs):
        warn(f"{st.root} holds {len(pred.rungs) - len(missing)} of the {len(pred.rungs)} rungs the prediction was made "
             f"from (not {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}): the figures of the ladder (its "
             "fit, the collapsed curves, the dynamics) need 3 finished rungs; give the store the prediction was made "
             "with (--store)")
    import pandas as pd

    row = runs[runs["name"] == pred.run_name]
    if len(row) and str(row["role"].iloc[0]) == "prediction":
        warn(f"{pred.run_name!r} is a prediction read back from wandb (role: prediction), not a run that trains: it "
             f"logs predicted/{pred.metric}, not {pred.metric}, so the report has no actual curve; give the trained "
             "run's name with --target-run")
    if len(row) and pd.notna(row["stop_after_steps"].iloc[0]):
        from ladder.predict.scoring import plans_alike

        steps = int(row["stop_after_steps"].iloc[0])
        if not plans_alike(steps, pred):  # the plan, as edited or before an edit
            planned = int(round(pred.started_with))
            warn(f"{pred.run_name!r} plans {steps:,} steps and the prediction in {prediction} {planned:,}: is it the "
                 "run that was predicted? (its evals are compared with the prediction at their own steps, as "
                 "`ladder score` scores them)")


def _load(prediction: Path, target_run: str | None, checked: bool = True) -> Prediction:
    """The prediction, following `target_run` where given (as `ladder watch --target-run` did)."""
    return _following(Prediction.load(prediction, checked), target_run)


def _following(pred: Prediction, target_run: str | None) -> Prediction:
    """The prediction `pred` held to the run `target_run` where one is given (its `run_name` is the run followed)."""
    if target_run is None:
        return pred
    if not target_run.strip():
        raise LadderError("--target-run: give the run's name")
    return dataclasses.replace(pred, run_name=target_run)


def _store(path: Path, target_run: str | None = None) -> Store:
    """The store to draw from, holding the run `--target-run` names where one is given."""
    st = Store(path).must_exist(PULL_FIRST)
    if target_run is not None:
        st.run(target_run)  # a name not in the store: its error says which runs are
    return st

