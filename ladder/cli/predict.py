"""`ladder predict` and `ladder replan`: the hero's loss curve from the rungs, and what-if schedules."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.table import Table

from ladder import metrics as keys
from ladder.cli.app import Format, command, console, err_console, print_json, seconds_until, warn
from ladder.config.limits import MAX_TOKENS_PER_SECOND, resamples
from ladder.config.runconfig import RunConfig
from ladder.data.store import DEFAULT_ROOT, PULL_FIRST, Store
from ladder.errors import LadderError
from ladder.outpaths import file_part, foreign_prediction_file, out_dir
from ladder.output.display import show_prediction
from ladder.predict.prediction import CONFIG_WRITTEN, keep_prediction, retire_watch
from ladder.predict.replan import MAX_CUT, horizon_that_fits, shortened, superseded, with_cooldown

# `ladder.predict.adapter` and `fits` (scipy) load inside the commands that predict, not for `ladder --help`.
if TYPE_CHECKING:
    from ladder.predict.adapter import PredictSettings

STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder (from `ladder pull`).")
METRIC = typer.Option(keys.EVAL_LOSS, "--metric", help="Metric to predict (nats per token).")
N_BOOT = typer.Option(200, "--n-boot", help="Bootstrap refits over rungs for the per-fraction law's bands (20 to 10,000); the curve laws (multi-power, momentum) take theirs from a jackknife over sizes and the floor's posterior, which this leaves as they are.")
GROUP = typer.Option(None, "--group", help="The rungs' group (default: the target config's group).")
METHOD = typer.Option("auto", "--method", help=(
    "The law: auto (the one with the lowest backtest score on the ladder: the largest size predicted from "
    "the smaller ones; the ensemble of the laws that apply is one of the choices), per-fraction, "
    "per-fraction-free, multipower, momentum, or ensemble (the mean of the laws that apply)."))
PIN_E = typer.Option(None, "--E", show_default=False, help=(
    "The per-fraction law's irreducible loss: a number pins it (nats/token); 'ladder' takes it from the surface "
    "L(N, D) fitted to every rung's final loss, where the rungs train several token ratios and pin it (else "
    "fitted); 'fit' (the default) fits it to the rungs at the target's token ratio."))
FLOOR = typer.Option("profile", "--floor", help=(
    "The curve laws' floor under L0's power law in size: profile (its posterior median under a flat prior below "
    "the smallest loss, with its spread in the band) or zero (L0 a pure power law, which keeps falling)."))
RATIO_TOL = typer.Option(0.01, "--ratio-tol", help="Token ratios within this relative tolerance count as one ratio.")


def _settings(metric: str, n_boot: int, group: str | None, method: str = "auto", E: str | None = None,
              ratio_tol: float = 0.01, floor: str = "profile") -> PredictSettings:
    from fits.candidates import FLOORS
    from fits.predictor import METHODS
    from ladder.predict.adapter import PredictSettings

    resamples("--n-boot", n_boot, least=20, none_ok=False)
    if method not in ("auto",) + METHODS:
        raise LadderError(f"--method {method!r}: choose auto or one of {', '.join(METHODS)}")
    if floor not in FLOORS:
        raise LadderError(f"--floor {floor!r}: choose {' or '.join(FLOORS)}")
    pinned, E_from = _irreducible(E)
    if not (np.isfinite(ratio_tol) and 0 <= ratio_tol < 1):
        raise LadderError(f"--ratio-tol {ratio_tol}: give a relative tolerance in [0, 1), e.g. 0.01")
    return PredictSettings(metric=metric, n_boot=n_boot, group=group, method=method, E=pinned, E_from=E_from,
                           ratio_tol=ratio_tol, floor=floor)


def _irreducible(text: str | None) -> tuple[float | None, str]:
    """--E as (pinned value or None, where E comes from otherwise)."""
    if text is None or text.strip().lower() == "fit":
        return None, "fit"
    if text.strip().lower() == "ladder":
        return None, "ladder"
    try:
        E = float(text)
    except ValueError:
        E = float("nan")
    if not (np.isfinite(E) and E >= 0):
        raise LadderError(f"--E {text}: give the irreducible loss as a finite number ≥ 0 (nats/token), "
                          "or 'ladder' (from every rung's final loss), or 'fit'")
    return E, "fit"


def _existing_store(path: Path) -> Store:
    return Store(path).must_exist(PULL_FIRST)


TARGET_FILE = typer.Option(None, "--target", help=(
    "A target this tool did not plan: a YAML file with name, active_params and/or fit_flops_per_token, "
    "stop_after_steps, tokens_per_step, group and schedule (peak_lr, total_steps, warmup_steps, decay, "
    "min_lr_ratio); see README, 'Your own ladder'."))
TARGET_RUN = typer.Option(None, "--target-run", help="A run already in the store (e.g. the live hero), by name or id.")


def resolve_target(config: Path | None, target_file: Path | None, target_run: str | None, store: Path, metric: str):
    """The run to predict, from exactly one of a planner config, a target file or a run in the store at `store`."""
    from ladder.data.runview import from_config, target_from_file, target_from_store

    given = [x for x in (config, target_file, target_run) if x is not None]
    if len(given) != 1:
        raise LadderError("give the target as exactly one of: CONFIG.yaml (from `ladder plan --out`), "
                          "--target TARGET.yaml, or --target-run NAME (a run in the store)")
    if config is not None:
        return from_config(RunConfig.load(_yaml_file(config, "")))
    if target_file is not None:
        return target_from_file(_yaml_file(target_file, "--target "))
    return target_from_store(_existing_store(store), target_run, metric)


def _yaml_file(path: Path, option: str) -> Path:
    """`path`; a folder (a plan's, say) is refused with a YAML file in it to give instead (its hero's, if any)."""
    if path.is_dir():
        inside = sorted(path.glob("*.yaml"), key=lambda p: ("hero" not in p.name, p.name))
        hint = f", e.g. {inside[0]}" if inside else " (it holds none)"
        raise LadderError(f"{option}{path}: is a folder; give a YAML file in it{hint}")
    return path


@command("predict")
def predict_command(
    config: Path | None = typer.Argument(None, help="The target (hero) RunConfig YAML from `ladder plan --out`; or give --target / --target-run."),
    target_file: Path | None = TARGET_FILE,
    target_run: str | None = TARGET_RUN,
    store: Path = STORE,
    out: Path | None = typer.Option(None, "--out", help="Folder for prediction.parquet/.csv/.json (default: predictions/NAME)."),
    metric: str = METRIC,
    n_boot: int = N_BOOT,
    group: str | None = GROUP,
    method: str = METHOD,
    pin_e: str | None = PIN_E,
    ratio_tol: float = RATIO_TOL,
    floor: str = FLOOR,
    to_wandb: str | None = typer.Option(None, "--to-wandb", help=(
        "Also log the prediction to wandb as its own run, ENTITY/PROJECT (online with WANDB_API_KEY, or "
        "offline under WANDB_MODE=offline): predicted/<metric> and its _lo50/_hi50/_lo90/_hi90 bounds on the "
        "target's step axis, grouped with the target.")),
    fmt: Format = typer.Option(Format.table, "--format", help="table (rich, every 5%) or json."),
) -> None:
    """Predict the target run's loss at every planned eval step and checkpoint, with 50% and 90% bands.

    The target is a config from `ladder plan`, a target file (--target) for a run planned elsewhere,
    or a run already in the store (--target-run). The rungs are the store's runs with role 'rung'
    in the target's group (or --group): their coordinates, their LR (a declared schedule, or the
    logged optim/learning_rate series) and their evals.

    Every candidate law (the per-fraction law over the rungs that share the target's token ratio; the
    multi-power law over every curve of every size, the floor under its L0 at its posterior median) is
    backtested on the ladder itself: every run of the largest size is held out and predicted from the
    smaller ones (each law scored on the runs every law can predict). The law with the lowest error
    predicts, and its band is widened by the backtest's errors carried to
    the target's distance. "why this law" says what sets the band at the end (the law's own
    statistics, the backtest's carried error, the floor, the other laws) and its table shows the
    backtest. Where the target's schedule
    differs from the rungs' (a horizon cut, an early cooldown), the per-fraction law adds the
    difference the multi-power law says that schedule makes. Steps past a change no law models are
    flagged.
    """
    from ladder.predict.adapter import predict

    settings = _settings(metric, n_boot, group, method, pin_e, ratio_tol, floor)
    if to_wandb is not None:  # before the fits: a missing key is said at once, not after the work
        from ladder.output.towandb import check_ready

        check_ready(to_wandb)
    target = resolve_target(config, target_file, target_run, store, metric)
    folder = _prediction_folder(out or Path("predictions") / file_part(target.name))
    with err_console.status(f"predicting {target.name}: fitting each law and backtesting it on the ladder"):
        # shown on a terminal only: the backtest of a large ladder takes a while
        pred = predict(_existing_store(store), target, settings)
    retired = retire_watch(folder, pred)
    moved = _retire_wandb(folder, retired) if to_wandb is not None else None
    beside = pred.beside_replan_config(folder, config or target_file)
    written = pred.save(folder)
    logged = None
    if to_wandb is not None:
        from ladder.data.runview import SIX_N
        from ladder.output.towandb import log_prediction

        coords = {"active_params": target.active_params or "unknown", "stop_after_steps": target.stop_after_steps,
                  "tokens_per_step": target.tokens_per_step,
                  "fit_flops_per_token": target.flops_per_token if target.flops_from != SIX_N else "unknown"}
        if target.schedule is not None:  # its plan and its edits: the run read back gives the prediction's fractions
            from ladder.config.yamlio import to_dict

            coords["schedule"] = to_dict(target.schedule)
        try:
            logged = log_prediction(pred, to_wandb, group=target.group or None, root=folder, coords=coords)
        except LadderError as exc:  # the network, say: what was written stays, and is said
            raise LadderError(f"{exc}; the prediction itself is written: {', '.join(str(p) for p in written)}") from None
    said = [f"Wrote {', '.join(str(p) for p in written)}", *([beside] if beside else []),
            *([_retired(retired)] if retired else []),
            *([f"The wandb files of the prediction this one replaces (its logged run) moved to {moved / 'wandb'}/: "
               f"`ladder pull offline {folder / 'wandb'}` reads this one's run alone"] if moved else []),
            *([f"Logged the prediction to wandb: {logged}"] if logged else [])]
    if fmt is Format.json:  # standard output holds the JSON alone; what was written is said beside it
        print_json(pred.to_json())
        for line in said:
            err_console.print(line, highlight=False, soft_wrap=True)
        return
    show_prediction(console, pred)
    for line in said:
        console.print(line)


@command("score")
def score_command(
    prediction: Path = typer.Option(..., "--prediction", help="Folder (or prediction.json) written by `ladder predict`."),
    store: Path = STORE,
    run: str | None = typer.Option(None, "--run", "--target-run", help="The run to score against, by name or id (default: the prediction's target)."),
    start: float = typer.Option(0.1, "--from", help="Score the evals from this fraction of the plan on."),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json."),
) -> None:
    """Score a prediction against the run's actual evals: the final error (predicted / actual − 1), the
    mean and worst error along the curve, and how often the 50% and 90% bands held."""
    from ladder.predict.prediction import Prediction
    from ladder.predict.scoring import percent, score_prediction, score_warnings

    if not (np.isfinite(start) and 0 <= start < 1):
        raise LadderError(f"--from {start}: give a fraction in [0, 1), e.g. 0.1")
    pred = Prediction.load(prediction)
    st = _existing_store(store)
    name = run or pred.run_name
    row = st.run(name)  # a clear error when it is not there
    actual = st.history([name], [pred.metric], include_nonfinite=True)  # a NaN eval counts outside the bands
    warnings = score_warnings(st, row, name, pred, actual["step"].to_numpy(), start)
    try:
        sc = score_prediction(pred, actual.set_index("step")["value"].sort_index(), start, name)
    except LadderError:
        for w in warnings:  # often why the run has nothing to score (a rung, a run of another plan)
            warn(w)
        raise
    if fmt is Format.json:
        print_json({"run": name, **sc.to_json(), "warnings": warnings})
        return
    for w in warnings:
        warn(w)
    t = Table(title=f"{pred.run_name}: predicted {pred.metric} against {name}'s evals from {percent(start)} of the plan")
    for col in ("", "value"):
        t.add_column(col, justify="right" if col else "left")
    for label, value in sc.rows():
        t.add_row(label, value)
    console.print(t)


@command("replan")
def replan_command(
    config: Path | None = typer.Argument(None, help="The hero's RunConfig YAML; or give --target / --target-run."),
    target_file: Path | None = TARGET_FILE,
    target_run: str | None = TARGET_RUN,
    store: Path = STORE,
    at: int | None = typer.Option(None, "--at", help="Step where the edit applies (default: the hero's last step in the store)."),
    shorten_to: int | None = typer.Option(None, "--shorten-to", help="New total steps: cut the horizon (at most 25%) and re-aim the decay."),
    cooldown_steps: int | None = typer.Option(None, "--cooldown-steps", help="Branch an early cooldown of this many steps at --at."),
    throughput: float | None = typer.Option(None, "--tokens-per-second", help="Measured throughput (default: the hero's recent throughput in the store)."),
    deadline: str | None = typer.Option(None, "--deadline", help="When the run must be done: ISO time (2026-12-24T00:00) or a time from now (72h, 90m, 2d)."),
    out: Path | None = typer.Option(None, "--out", help="Write the edited plan (its RunConfig, or a target file where it has none) and its prediction here."),
    metric: str = METRIC,
    n_boot: int = N_BOOT,
    group: str | None = GROUP,
    fmt: Format = typer.Option(Format.table, "--format", help="table or json: the JSON (the edit, both plans' predicted curves and finals, what was written) on standard output, what is said beside it on standard error."),
) -> None:
    """What if the hero is cut short? Print the edited schedule and its predicted curve beside the old one.

    Give --shorten-to STEPS or --cooldown-steps K (with --at STEP), or give --deadline (and a
    throughput) to be told which horizon fits. An edit the plan holds at a later step, which the run
    (in the store) has not reached, is replaced by the new one, and the output says so.
    """
    from ladder.predict.adapter import predict

    say = err_console.print if fmt is Format.json else console.print  # standard output holds the JSON alone
    if shorten_to is not None and cooldown_steps is not None:
        raise LadderError("--shorten-to and --cooldown-steps are two different edits; give one of them")
    for flag, value, least in (("--shorten-to", shorten_to, 1), ("--cooldown-steps", cooldown_steps, 1), ("--at", at, 0)):
        if value is not None and value < least:
            raise LadderError(f"{flag} {value}: give a step count of {least} or more")
    if throughput is not None and deadline is None:
        raise LadderError("--tokens-per-second is read with --deadline (which horizon fits by then); give both, or "
                          "leave it out")
    if throughput is not None and not (math.isfinite(throughput) and 0 < throughput <= MAX_TOKENS_PER_SECOND):
        raise LadderError(f"--tokens-per-second {throughput:g}: must be a positive number up to "
                          f"{MAX_TOKENS_PER_SECOND:.0e} (the measured throughput), or leave it out to take the hero's "
                          "recent throughput from the store")
    seconds_left = seconds_until(deadline) if deadline is not None else None
    if out is not None:
        out = _prediction_folder(out)
    hero = resolve_target(config, target_file, target_run, store, metric)
    st = _existing_store(store)
    if out is not None:
        _check_replan_out(out / f"{file_part(hero.name)}.yaml", config or target_file)
    step = at if at is not None else _last_step(st, hero.name, deadline is not None and throughput is None)
    record: dict = {"run": hero.name, "metric": metric, "at": step, "deadline": None, "edit": None}
    if at is None and deadline is None and step >= hero.stop_after_steps:
        raise LadderError(f"{hero.name!r} is done (step {step:,} of {hero.stop_after_steps:,}): there is nothing left "
                          "to edit; give --at STEP to ask what an edit at an earlier step would have done")
    if deadline is not None:
        rate = throughput or _recent_throughput(st, hero.name)
        now = _reached(st, hero.name)  # the time left counts from where the run is, not from --at
        fit = horizon_that_fits(step if now is None else now, hero.stop_after_steps, hero.tokens_per_step, rate,
                                seconds_left)
        say(fit.message())
        record["deadline"] = {"seconds_left": seconds_left, "tokens_per_second": rate, "step": fit.step,
                              "reachable_steps": fit.reachable_steps, "planned_steps": fit.planned_steps,
                              "fits": fit.fits, "message": fit.message()}
        given = shorten_to is not None or cooldown_steps is not None  # the user's own edit: held to the deadline too
        if not given and now is not None and now < step and not fit.fits and fit.reachable_steps <= step:
            # (an edit given is said to end after the deadline; a run not in the store is taken to be at --at)
            raise LadderError(f"--at {step:,}: the run, at step {fit.step:,}, reaches only step "
                              f"{fit.reachable_steps:,} by the deadline, so an edit at step {step:,} comes too late; "
                              "give an earlier --at, or a later --deadline")
        if shorten_to is None and cooldown_steps is None and not fit.fits:
            if fit.fraction_of_plan >= 1 - MAX_CUT and fit.reachable_steps > step:
                shorten_to = fit.reachable_steps
            elif fit.reachable_steps > step:  # a cut that large is no plan: the early cooldown that ends in time is
                cooldown_steps = fit.reachable_steps - step
                say(f"the early cooldown that ends by the deadline: {cooldown_steps:,} steps from step {step:,}")
    if shorten_to is None and cooldown_steps is None:
        if deadline is None:
            raise LadderError("give --shorten-to STEPS, --cooldown-steps K or --deadline TIME")
        if out is not None:  # no edit, so no edited plan: said, not left for the user to find missing
            say(f"nothing written to {out}: " + ("the plan needs no edit" if fit.fits else "no edit proposed"))
        if fmt is Format.json:
            print_json(record | {"written": []})
        return
    settings = _settings(metric, n_boot, group)  # a bad option is refused before anything is said of the edit
    reached = _reached(st, hero.name) or 0
    if at is None and shorten_to is not None and shorten_to <= reached:  # (with --at before it: a what-if, said below)
        raise LadderError(f"--shorten-to {shorten_to:,}: the run is at step {reached:,} already; a new horizon lies past "
                          f"it (give --at STEP before step {shorten_to:,} to ask what that cut would have done)")
    replaced = superseded(hero, step)
    passed = [e for e in replaced if e.at_step <= reached]
    if passed:  # an edit the run has made stays: what is done is not replanned
        raise LadderError(f"--at {step:,}: the run is at step {reached:,}, past its edit {passed[0].describe()}; a new "
                          f"edit goes after step {passed[-1].at_step:,}, at step {passed[-1].at_step + 1:,} or later")
    edited = shortened(hero, step, shorten_to) if shorten_to is not None else with_cooldown(hero, step, cooldown_steps)
    if deadline is not None and given:  # said once the edit is known to be one
        edit = f"--shorten-to {shorten_to:,}" if shorten_to is not None else f"--cooldown-steps {cooldown_steps:,}"
        on_time, said = fit.edit_ends(edited.stop_after_steps, edit)
        (say if on_time else warn)(said)
    if step < reached:  # (said once the edit is known to be one: a bad --at is refused, not warned of first)
        warn(f"--at {step:,}: the run is at step {reached:,} already, so this is a what-if: an edited config cannot "
             f"resume it (its learning rates before step {reached:,} would differ from those it trained with)")
    old, new = predict(st, hero, settings), predict(st, edited, settings)
    if replaced:  # a watch keeps this plan while the run's config still holds them, not reached (`edits.plan_holds`)
        from ladder.config.yamlio import to_dict

        new = dataclasses.replace(new, schedule={**new.schedule, "replaced": [to_dict(e) for e in replaced]})
    say(f"old schedule: {hero.schedule.describe()}")
    say(f"new schedule: {edited.schedule.describe()}")
    record["edit"] = {"shorten_to": shorten_to, "cooldown_steps": cooldown_steps,
                      "old_schedule": hero.schedule.describe(), "new_schedule": edited.schedule.describe(),
                      "replaced": [e.describe() for e in replaced]}
    if replaced:
        say(f"the planned edit{'s' if len(replaced) > 1 else ''} not reached by step {step:,} "
            f"({'; '.join(e.describe() for e in replaced)}) {'are' if len(replaced) > 1 else 'is'} replaced "
            "by this one")
    t = Table(title=f"{hero.name}: predicted {metric}, old plan and new")
    for col in ("step", "old plan", "new plan", "difference (nats)"):
        t.add_column(col, justify="right")
    merged = old.table.set_index("step")["median"].to_frame("old").join(
        new.table.set_index("step")["median"].rename("new"), how="outer")
    from ladder.output.report import marks_of, nearest

    # every 5% of the plan the run started with, as the report's table, the last step before the edit, and each plan's
    # last step (the new plan's, where it is cut short, between two of the old's)
    at = merged.index.to_numpy(np.int64)
    rows = {*nearest(at / old.started_with, marks_of()).tolist(), int(np.searchsorted(at, step, side="right")) - 1,
            len(at) - 1, int(np.searchsorted(at, new.table["step"].iloc[-1]))}
    show = merged.iloc[sorted(i for i in rows if 0 <= i < len(at))]
    for s, row in show.iterrows():
        diff = row["new"] - row["old"] if np.isfinite(row["new"]) and np.isfinite(row["old"]) else float("nan")
        t.add_row(f"{s:,}", _fmt(row["old"]), _fmt(row["new"]), _fmt(diff, signed=True))
    if fmt is Format.json:  # every step of either plan, not the table's twenty
        record["steps"] = [{"step": int(s), "old": float(r["old"]), "new": float(r["new"]),
                            "difference": float(r["new"] - r["old"])} for s, r in merged.iterrows()]  # NaN: null
    else:
        console.print(t)
    fo, fn = old.final, new.final
    record["final"] = {label: {k: float(p[k]) for k in ("step", "median", "lo50", "hi50", "lo90", "hi90")}
                       for label, p in (("old", fo), ("new", fn))}
    if np.isfinite(fn["median"] / fo["median"]):
        say(f"final loss: old plan {fo['median']:.4f} at step {int(fo['step']):,}; new plan "
            f"[bold]{fn['median']:.4f}[/] at step {int(fn['step']):,} ({fn['median'] / fo['median'] - 1:+.2%}; "
            f"90% band {fn['lo90']:.4f}–{fn['hi90']:.4f})", markup=True)
    else:  # a plan whose final the laws do not predict (the rungs' evals end before it): where each ends
        from ladder.output.report import final_sentence

        for label, p in (("old plan", old), ("new plan", new)):
            say(f"{label}: {final_sentence(p)}", highlight=False)
    standing = _standing(st, hero.name, old, hero.stop_after_steps)
    if standing:
        say(standing, highlight=False)
    record["standing"] = standing or None
    record["warnings"] = [f"new plan: {w}" for w in new.new_warnings(old)]
    for w in record["warnings"]:  # what the edit brings (the plan's own warnings are `ladder predict`'s)
        warn(w)
    record["written"] = []
    if out is not None:
        from ladder.data.runview import save_target

        edited, home = _same_run_dir(edited, config, out)
        name = f"{file_part(edited.name)}.yaml"
        new = dataclasses.replace(new, schedule={**new.schedule, CONFIG_WRITTEN: name})  # a later replan's to replace
        retired = retire_watch(out, new)
        written = save_target(edited, out / name)
        record["written"] = [str(written), *(str(p) for p in new.save(out))]
        say(f"Wrote {written} and its prediction to {out}/")
        if home is not None and step >= reached:
            say(f"train it with `ladder train {written} --resume`: it continues the run in {home}")
        elif home is not None:  # the what-if said above: its learning rates differ where the run has trained
            say(f"a what-if: it cannot resume the run in {home}, which is past step {step:,}")
        if retired:
            say(_retired(retired))
    if fmt is Format.json:
        print_json(record)


def _same_run_dir(edited, config: Path | None, out: Path):
    """The edited plan with its run folder where the plan's own config puts it (a relative run_dir is read from the
    config's folder, so written elsewhere as it was, it would start a new run there), and that folder; as it was,
    and None, for a target that is no planner config."""
    if config is None or edited.config is None:
        return edited, None
    from ladder.launch import run_dir_of

    home = run_dir_of(config, edited.config).resolve()
    if Path(edited.config.run_dir or "").is_absolute():
        return edited, home
    try:  # from the folder as the system finds it: a link in --out's path leads ".." elsewhere
        kept = os.path.relpath(home, out.resolve())
    except ValueError:  # another drive: only the whole path reaches it
        kept = str(home)
    return dataclasses.replace(edited, config=edited.config.replace(run_dir=kept)), home


def _prediction_folder(out: Path) -> Path:
    """`out` as a folder to write a prediction into (`out_dir`), where no prediction file is a user's own: one that
    no prediction wrote is refused, not replaced."""
    folder = out_dir(out)
    foreign = foreign_prediction_file(folder)
    if foreign is not None:
        raise LadderError(f"--out {folder}: {foreign.name} there is no prediction's (a prediction replaces only its "
                          "own earlier files); give another folder, or move that file away first")
    return folder


def _check_replan_out(written: Path, given: Path | None) -> None:
    """Refuse to write the edited config over the file the replan edits, or over a YAML that is no earlier replan's
    (the prediction beside it does not name it as the config it wrote): a plan's config is what `ladder train
    --ladder` reads, and a copy of the hero's config kept beside its prediction is the user's."""
    if not written.exists():
        return
    if given is not None and given.exists() and written.resolve() == given.resolve():
        raise LadderError(f"{written} is the config this replan edits: --out would write over it; give --out another "
                          "folder (e.g. the prediction's own), and copy the edited config into the plan once it is "
                          "chosen (nothing was written)")
    beside = written.parent / "prediction.json"
    if not beside.is_file():
        raise LadderError(f"{written} exists and is no earlier replan's (no prediction beside it); "
                          "give --out another folder (nothing was written)")
    try:
        named = (json.loads(beside.read_text(encoding="utf-8")).get("schedule") or {}).get(CONFIG_WRITTEN)
    except (OSError, ValueError, AttributeError):
        named = None
    if named != written.name:
        raise LadderError(f"{written} exists, and the prediction beside it does not record writing it (a replan's "
                          "records the config it writes; `ladder predict` writes none); give --out another folder, or "
                          "move that file away first (nothing was written)")


def _retire_wandb(folder: Path, aside: Path | None) -> Path | None:
    """Before a prediction is logged to wandb from `folder` again: the wandb files an earlier one left there (its
    run, offline or online) moved beside a copy of that prediction (into `aside` where the watch's were moved), so
    that the folder's wandb/ holds the new run alone and reads back by its name. Returns where they went."""
    old = folder / "wandb"
    if not old.is_dir() or not any(old.glob("*run-*")):
        return None
    aside = aside or keep_prediction(folder, "earlier-wandb")
    old.replace(aside / "wandb")
    return aside


def _retired(folder: Path) -> str:
    return (f"The watch of the prediction this one replaces (its state and alerts, with a copy of that prediction) "
            f"moved to {folder}/; `ladder watch` judges the run against this one from there, and neither judges again "
            "nor sends again what it judged where this prediction is the one it replaces (a replan's steps before its "
            "edit)")


def _fmt(v: float, signed: bool = False) -> str:
    if not np.isfinite(v):
        return "–"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _last_step(store: Store, name: str, rate_too: bool) -> int:
    """The step an edit goes at when --at is not given: where the run is (`rate_too`: its throughput is wanted too)."""
    step = _reached(store, name)
    if step is None:
        more = " and --tokens-per-second (the throughput is read from the run too)" if rate_too else ""
        raise LadderError(f"{name!r} is not in the store yet; give --at STEP{more}")
    return step


def _standing(store: Store, name: str, pred, stop: int) -> str:
    """Where the run in the store stands against the old plan's prediction at its last value of the metric (read as
    the fits read it, `runview.last_as_read`), for a replan's reader to weigh both plans' finals by; "" where the
    run has none the prediction reaches."""
    from ladder.data.runview import last_as_read

    run = store.find(name)
    if run is None:
        return ""
    hist = store.fitted_history([str(run["run_id"])], pred.metric).sort_values("step")
    if not len(hist):
        return ""
    steps, values = hist["step"].to_numpy(np.int64), hist["value"].to_numpy(float)
    value = last_as_read(store, str(run["run_id"]), stop, steps, values, float(values[-1]))
    at = pred.at([int(steps[-1])]).iloc[0]
    if not np.isfinite(at["median"]):
        return ""
    where = ("inside its 50% band" if at["lo50"] <= value <= at["hi50"] else "inside its 90% band, outside the 50%"
             if at["lo90"] <= value <= at["hi90"] else "outside its 90% band")
    off = "" if where.startswith("inside its 50%") else (
        ": the run is off the trend both plans' curves follow, so their finals may be off alike (the difference "
        "between them rests on the rungs' schedules, not on where this run is)")
    return (f"the run so far: {pred.metric} {value:.4f} at step {int(steps[-1]):,}, where the old plan predicts "
            f"{at['median']:.4f} (error {at['median'] / value - 1:+.2%}, {where}){off}")


def _reached(store: Store, name: str) -> int | None:
    """The last step of run `name` in the store; None when it is not there (not started). A name the store holds
    twice is a `LadderError`: which copy has got how far is the user's to say."""
    run = store.find(name)
    return None if run is None else int(run["last_step"])


def _recent_throughput(store: Store, name: str) -> float:
    try:
        h = store.history([name], [keys.TOKENS_PER_SECOND])
    except LadderError:
        raise LadderError(f"{name!r} is not in the store, so no throughput is measured; give --tokens-per-second") from None
    if h.empty:
        raise LadderError(f"no {keys.TOKENS_PER_SECOND} logged for {name!r}; give --tokens-per-second")
    return float(h["value"].iloc[-50:].mean())


