"""`ladder pull wandb|offline|local`, `ladder import csv`, `ladder runs` and `ladder history`."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from enum import StrEnum
from pathlib import Path

import numpy as np
import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from ladder.cli.app import Format, app, command, console, echo, err_console, json_text, print_json, warn
from ladder.config.spec import format_count
from ladder.data.resolve import MetricSettings
from ladder.data.sources import (
    ColumnMap,
    CoordinateOverrides,
    LocalSource,
    OfflineSource,
    TableSource,
    WandbSource,
)
from ladder.data.sources.coords import edited_fraction
from ladder.data.sources.pull import PullResult, PullSkipped, Source, check_listed, pull
from ladder.data.sources.table import shown_source
from ladder.data.store import DEFAULT_ROOT, GIVEN_KEY, Store
from ladder.errors import LadderError
from ladder.files import write_text_atomic
from ladder.outpaths import out_file

pull_app = typer.Typer(
    help=(
        "Pull runs' metrics into the local store (default .ladder/): wandb cloud projects, wandb "
        "offline folders, or the trainer's run directories. A second pull reads only what is new."
    ),
    no_args_is_help=True,
)
import_app = typer.Typer(help="Import metric tables (CSV, parquet) into the local store.", no_args_is_help=True)
app.add_typer(pull_app, name="pull")
app.add_typer(import_app, name="import")

STORE_HELP = "Store folder (created on first pull)."
COORD_HELP = (
    "Give a coordinate for every run of this pull: FIELD=VALUE with FIELD one of active_params, "
    "total_params, fit_flops_per_token, stop_after_steps, tokens_per_step, planned_tokens, name, group, "
    "role (repeatable); VALUE 'unknown' stores a parameter or FLOP count as missing. Kept with the runs: later "
    "pulls without it do not replace it with the run's config."
)
COORDS_HELP = ("YAML file of coordinates per run: {RUN_NAME_OR_ID: {FIELD: VALUE}}, FIELD as for --coord, plus "
               "schedule: {peak_lr, total_steps, warmup_steps, decay, min_lr_ratio} (README, 'Your own ladder'). A run's "
               "entry wins over --coord (and a table's --coord-column) for that run (a warning names each such run).")
RENAME_HELP = "Store a logged key under another name, OLD=NEW, e.g. eval/paloma/macro_loss=eval/loss (repeatable; kept for later pulls)."
FIT_HELP = "The metric fits read (kept in the store; default eval/loss)."
FULL_HELP = "Read every run again from the start instead of only what is new."
REPLACE_HELP = (
    "Replace stored runs that have the same id but come from another source, or that this pull gives "
    "other coordinates, or (a table imported again) that the file now holds without metrics or steps the "
    "store has of them (refused without it; the output says what was replaced)."
)


# The options every pull shares.
STORE = typer.Option(Path(DEFAULT_ROOT), "--store", help=STORE_HELP)
COORD = typer.Option([], "--coord", help=COORD_HELP)
COORDS = typer.Option(None, "--coords", help=COORDS_HELP)
COORD_KEY = typer.Option([], "--coord-key", help=(
    "FIELD=KEY: read a coordinate or label from each run's own config key, where the run names it its own way, e.g. "
    "active_params=model.n_params (a dotted key reaches into a nested config; repeatable). --coord and --coords beat it."))
RENAME = typer.Option([], "--rename", help=RENAME_HELP)
FIT_METRIC = typer.Option(None, "--fit-metric", help=FIT_HELP)
FULL = typer.Option(False, "--full", help=FULL_HELP)
REPLACE = typer.Option(False, "--replace", help=REPLACE_HELP)
STEP_KEY = typer.Option("_step", "--step-key", help="The history key that holds the optimizer step.")


class HistoryFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


# ---- pulls ------------------------------------------------------------------------------------------
@command("wandb", parent=pull_app)
def pull_wandb(
    project: str = typer.Argument(..., help="ENTITY/PROJECT on the wandb server set by WANDB_BASE_URL."),
    group: str | None = typer.Option(None, "--group", help="Only runs of this wandb group."),
    tag: str | None = typer.Option(None, "--tag", help="Only runs with this tag."),
    filter_json: str | None = typer.Option(None, "--filter", help='MongoDB-style run filter as JSON, e.g. \'{"config.role": "rung"}\'.'),
    keys_given: list[str] = typer.Option([], "--keys", help="Only these metric keys, comma-separated or the option once per key (each read in its own scan); default: every key."),
    step_key: str = STEP_KEY,
    store: Path = STORE,
    coord: list[str] = COORD,
    coords: Path | None = COORDS,
    coord_key: list[str] = COORD_KEY,
    rename: list[str] = RENAME,
    fit_metric: str | None = FIT_METRIC,
    full: bool = FULL,
    replace: bool = REPLACE,
) -> None:
    """Pull the runs of a wandb project through its API (WANDB_API_KEY from the environment).

    Histories are read with scan_history (every logged step, not a sample). Rate limits (HTTP 429)
    wait for the server's reset time; other network failures back off and retry. An interrupted
    pull changes nothing, and running it again continues where it stopped.
    """
    filters = _parse_filter(filter_json)
    keys = ",".join(keys_given) if keys_given else None
    key_list = [k.strip() for k in keys.split(",") if k.strip()] if keys is not None else None
    if key_list == []:
        raise LadderError(f"--keys {keys!r}: names no key; give keys separated by commas, e.g. eval/loss,train/loss, "
                          "or leave --keys out to read every key")
    source = WandbSource(project, group=group, tag=tag, filters=filters, keys=key_list, step_key=step_key,
                         say=warn)
    _run_pull(store, source, CoordinateOverrides.parse(coord, coords, coord_key), rename, fit_metric, full, replace)


@command("offline", parent=pull_app)
def pull_offline(
    path: Path = typer.Argument(..., help="A .wandb file, a wandb run folder, a wandb/ folder, or a folder of run directories."),
    step_key: str = STEP_KEY,
    store: Path = STORE,
    coord: list[str] = COORD,
    coords: Path | None = COORDS,
    coord_key: list[str] = COORD_KEY,
    rename: list[str] = RENAME,
    fit_metric: str | None = FIT_METRIC,
    full: bool = FULL,
    replace: bool = REPLACE,
) -> None:
    """Pull wandb offline runs (what WANDB_MODE=offline writes) by reading their .wandb files.

    Folders with the same run id are one run (a resumed run continues in a new folder). A run
    without an exit record is running while its file changed in the last 2 minutes, else crashed
    (killed): every whole record is kept. A corrupt chunk stops that file with a warning. A run
    started seconds ago, whose file holds nothing yet, is skipped; when no other run is skipped the
    pull exits 75 (try again), not 2, so a script can tell the two apart.
    """
    _run_pull(store, OfflineSource(path, step_key=step_key), CoordinateOverrides.parse(coord, coords, coord_key), rename,
              fit_metric, full, replace)


@command("local", parent=pull_app)
def pull_local(
    path: Path = typer.Argument(..., help="A trainer run directory (run.yaml, metrics.jsonl, status.json) or a folder of them."),
    store: Path = STORE,
    coord: list[str] = COORD,
    coords: Path | None = COORDS,
    coord_key: list[str] = COORD_KEY,
    rename: list[str] = RENAME,
    fit_metric: str | None = FIT_METRIC,
    full: bool = FULL,
    replace: bool = REPLACE,
) -> None:
    """Pull the trainer's own metrics files; the coordinates come from each run.yaml.

    A run whose status says running but whose metrics and status have not changed for 30 minutes was
    killed (a SIGKILL, out of memory) and is stored as crashed; `ladder watch --local` waits three times
    its --stale-minutes."""
    _run_pull(store, LocalSource(path), CoordinateOverrides.parse(coord, coords, coord_key), rename, fit_metric, full, replace)


@command("csv", parent=import_app)
def import_csv(
    files: list[Path] = typer.Argument(..., help="One or more .csv or .parquet files; for a folder of runs exported one per file, its files: runs/*.csv (a folder itself is not read)."),
    metric: list[str] = typer.Option([], "--metric", help="KEY=COLUMN: store COLUMN as metric KEY (repeatable), e.g. eval/loss=loss_c4_en."),
    run: str | None = typer.Option(None, "--run", help="Column of run ids (default: each file is one run, named by the file)."),
    step: str | None = typer.Option(None, "--step", help="Column of optimizer steps (default: each row is its run's final value, fraction 1)."),
    tokens: str | None = typer.Option(None, "--tokens", help="Column of tokens seen. Without --step, a run's steps are its tokens ÷ its tokens_per_step (from --coord, --coords or a column)."),
    coord_column: list[str] = typer.Option([], "--coord-column", help="FIELD=COLUMN: read a coordinate per run from a column, e.g. active_params=params_nonembed (repeatable); state=COLUMN reads each run's state (running, finished, crashed) from a column not named state."),
    store: Path = STORE,
    coord: list[str] = COORD,
    coords: Path | None = COORDS,
    coord_key: list[str] = typer.Option([], "--coord-key", help=(
        "FIELD=KEY: read a coordinate or label from a key of the config beside each file (run.json or run.yaml beside "
        "run.csv), where the trainer names it its own way, e.g. active_params=model.n_params (a dotted key reaches "
        "into a nested config; repeatable). --coord, --coords and --coord-column beat it.")),
    rename: list[str] = RENAME,
    fit_metric: str | None = FIT_METRIC,
    replace: bool = REPLACE,
) -> None:
    """Import a table of runs: one row per (run, step), metric columns side by side.

    Columns with one value per run become the run's config (so a column named stop_after_steps or
    active_params is read as that coordinate, and a column named state gives finished / crashed /
    running; without it every run counts as finished, and a run that ends short of its plan is named).
    Importing the file again replaces its runs; a run id already stored from another source is refused
    unless --replace. Every step, token count and value is checked (with its line) before anything is
    stored. Several files are read in the order given, each checked before any is stored.

    A trainer's config written beside a file under its name (run.json or run.yaml beside run.csv) is its
    runs' config: its keys named for a coordinate (active_params, stop_after_steps, tokens_per_step,
    schedule, group, role, ...) are read as such, and --coord-key reads one it names its own way.
    """
    columns = ColumnMap(
        metrics=ColumnMap.parse_pairs(metric, "--metric"),
        run=run,
        step=step,
        tokens=tokens,
        coords=ColumnMap.parse_pairs(coord_column, "--coord-column"),
    )
    given = CoordinateOverrides.parse(coord, coords, coord_key, table=True)  # a table of tokens without steps takes
    # tokens_per_step from them
    unique: dict[Path, Path] = {}
    for f in files:  # a file given twice (by two paths) is read once, where it is first given
        unique.setdefault(_same_file(f), f)
    sources = [TableSource(f, columns, given) for f in unique.values()]
    refs = [source.runs() for source in sources]  # every file checked before any is stored
    names = [{x for ref in each for x in (ref.run_id, ref.name)} for each in refs]
    _one_file_per_run(sources, refs)
    _check_every_file(Store(store), sources, refs, given, names)
    for i, source in enumerate(sources):
        try:
            _run_pull(store, source, _for_file(given, names, i), rename, fit_metric, False, replace)
        except LadderError as exc:
            if not i:
                raise
            done = ", ".join(str(s.path) for s in sources[:i])
            raise LadderError(f"{exc} (imported before it, and kept: {done}; run the command again with the files "
                              "from this one on)") from None
    beside = [path.name for path, _ in (s.beside() for s in sources) if path is not None]
    if beside:
        console.print(f"runs' config read from the file beside each table: {beside[0]}" + (
            f" and {len(beside) - 1} more" if len(beside) > 1 else "") + " (fields by name, others by --coord-key)",
            highlight=False)


def _check_every_file(store: Store, sources: list[TableSource], refs: list[list], given: CoordinateOverrides,
                      names: list[set[str]]) -> None:
    """Refuse an import of several files, before any is stored, where a run of any lacks its coordinates or gives
    ones that cannot be counts; the error says nothing was imported."""
    if len(sources) < 2:
        return
    rows = store.runs().set_index("run_id", drop=False) if store.exists() else None
    stored = (lambda run_id: None) if rows is None else (
        lambda run_id: rows.loc[run_id].to_dict() if run_id in rows.index else None)
    for i, (source, each) in enumerate(zip(sources, refs)):
        try:
            check_listed(source, each, _for_file(given, names, i), stored)
        except LadderError as exc:
            raise LadderError(f"{exc} (in {source.path}; nothing was imported)") from None


def _same_file(path: Path) -> Path:
    """What a file given twice (by two paths) is given as: its resolved path, where it exists."""
    try:
        return path.resolve() if path.exists() else path
    except OSError:
        return path


def _one_file_per_run(sources: list[TableSource], refs: list[list]) -> None:
    """Refuse a run id that two of the files hold (`refs`: each file's runs), before anything is stored: the second
    would replace the first."""
    where: dict[str, Path] = {}
    for source, each in zip(sources, refs):
        for ref in each:
            if ref.run_id in where:
                raise LadderError(f"run {ref.run_id!r} is in {where[ref.run_id]} and in {source.path}: a run's rows go in "
                                  "one file (join them), or give the runs of each file other ids; nothing was imported")
            where[ref.run_id] = source.path


def _for_file(given: CoordinateOverrides, names: list[set[str]], i: int) -> CoordinateOverrides:
    """The coordinates file's entries for the runs of file `i` of an import of several (`names`: each file's run names
    and ids); an entry that names no run of any file goes with the last file, whose pull says so once."""
    everyone = set().union(*names)
    last = i == len(names) - 1
    return dataclasses.replace(given, per_run={run: entry for run, entry in given.per_run.items()
                                               if run in names[i] or (last and run not in everyone)})


def _run_pull(
    store: Path,
    source: Source,
    overrides: CoordinateOverrides,
    rename: list[str],
    fit_metric: str | None,
    full: bool,
    replace: bool = False,
) -> None:
    if fit_metric is not None and not fit_metric.strip():
        raise LadderError("--fit-metric '': give the key fits read, e.g. eval/loss, or leave it out to keep the store's")
    target = Store(store)
    settings = None
    if rename or fit_metric:
        current = target.settings()
        settings = MetricSettings(
            fit_metric=fit_metric or current.fit_metric,
            renames={**current.renames, **MetricSettings.parse_renames(rename)},
        )
    made = not target.root.exists()
    fresh = made or not target.exists()  # no store in it yet
    try:
        result = pull(target, source, overrides=overrides, settings=settings, full=full, replace=replace)
    except PullSkipped as exc:
        if fresh:
            target.discard_if_unused(keep_folder=not made)
        _print_pull(exc.result, target)
        raise exc from None
    except BaseException:
        if fresh:
            target.discard_if_unused(keep_folder=not made)
        raise
    _print_pull(result, target)
    if fit_metric and fit_metric != current.fit_metric and not result.pulled:
        _warn_unlogged_fit_metric(target, fit_metric)
    if rename:
        _warn_unlogged_renames(target, MetricSettings.parse_renames(rename))


def _warn_unlogged_fit_metric(store: Store, metric: str) -> None:
    """A --fit-metric that no stored run logged (a typo, say) is said at once, not at a later full pull."""
    if store.history(metrics=[metric], include_nonfinite=True).empty:
        warn(f"--fit-metric {metric}: no run in {store.root}/ logged it, and the store's fits now read it; pull with the "
             "key the runs log (`ladder history RUN --metric all` lists them)")


def _warn_unlogged_renames(store: Store, renames: dict[str, str]) -> None:
    """A --rename OLD=NEW whose OLD no stored run logs (a typo, say) is said at once: it is kept for later pulls."""
    renamed = set()
    for text in store.runs()["report_json"]:
        renamed |= {str(r[0]) for r in json.loads(text or "{}").get("renamed", [])}
    for old, new in renames.items():
        if old not in renamed and store.history(metrics=[old], include_nonfinite=True).empty:  # renamed, or stored as is
            warn(f"--rename {old}={new}: no run in {store.root}/ logs {old!r}; the rename is kept for later pulls "
                 "(`ladder history RUN --metric all` lists the keys a run logs)")


def _warn_damaged(store: Store) -> None:
    """A warning for each run whose history file cannot be opened or is not named right (`Store.damaged`), and what
    to do."""
    for run_id, problem in store.damaged():
        warn(f"run {run_id}: {problem}; `ladder runs --repair --store {store.root}` mends it, or drops the run so it "
             "can be pulled again")


def _print_pull(result: PullResult, store: Store) -> None:
    if result.pulled:
        t = Table(title=f"Pulled from {shown_source(result.source)}")
        for col in ("run", "state", "values read", "values stored", "last step", "fraction"):  # one per metric and step
            t.add_column(col, justify="left" if col in ("run", "state") else "right")
        for r in result.pulled:
            t.add_row(
                r.name,
                r.state,
                f"{r.rows_read:,}",
                f"{r.rows:,}",
                "-" if r.last_step is None else f"{r.last_step:,}",
                "-" if r.last_fraction is None else f"{r.last_fraction:.3f}",
            )
        console.print(t)
    for message in result.messages:
        warn(message)
    for line in result.renames:  # what the user asked for, once for all runs: no warning
        console.print(f"renamed: {line}", highlight=False)
    if result.skipped and not (result.pulled or result.unchanged or result.resumed):
        return  # every run skipped: the error says it all
    added = sum(r.new for r in result.pulled)
    updated = len(result.pulled) - added
    parts = [f"{added} new run{'' if added == 1 else 's'}"] if added else []
    if updated or not added:
        parts.append(f"{updated} run{'' if updated == 1 else 's'} updated")
    parts.append(f"{result.unchanged} unchanged")
    if result.resumed:
        parts.append(f"{result.resumed} read by an interrupted run of this pull, committed now")
    if result.skipped:
        parts.append(f"{len(result.skipped)} skipped")
    console.print(f"{', '.join(parts)} (store {store.root}/)", highlight=False)
    if result.unchanged:  # their stored files were not read: a damaged one is said here, as `ladder runs` says it
        _warn_damaged(store)


def _parse_filter(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LadderError(f"--filter {text!r}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise LadderError(f"--filter {text!r}: expected a JSON object, e.g. '{{\"config.role\": \"rung\"}}'")
    return data


# ---- reading the store ------------------------------------------------------------------------------
@command("runs")
def runs_command(
    fmt: Format = typer.Option(Format.table, "--format", help="table (rich) or json (one list on stdout)."),
    store: Path = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder."),
    repair: bool = typer.Option(False, "--repair", help="Rebuild a damaged manifest or runs table from the run files, and drop runs whose own file is damaged (pull them again)."),
    remove: list[str] = typer.Option([], "--remove", help="Take this run (id or name, as `ladder history` takes it) and its history out of the store (repeatable); pulling it again from its source restores it."),
    yes: bool = typer.Option(False, "--yes", help="--remove without asking (needed when stdin is not a terminal)."),
) -> None:
    """List the runs in the store: ladder coordinates, state, steps and where each came from.

    Parameters: active and total as the planner counts them; C/token is fit compute per token in
    FLOPs (3 × forward FLOPs without the output head; 6·N where only N is known, as the fits count
    it); steps: the last step, of the step the run stops at (its edited plan's last, for a run cut
    short); fraction: the last step's, of the plan the run started with (of its edited plan beside
    it; last_fraction_edited in the JSON); values: the values the run holds, of every metric it
    logs. The id column is shown where some run's id is neither its name nor GROUP/NAME, the group
    column where runs differ in it, the source column where some run's is not one folder's
    entry of its name (else a line below the table says it). Runs are listed by group, then size
    and length. --remove takes runs out (a run pulled twice, from two sources), after
    asking.
    """
    if remove:
        if repair or fmt is Format.json:
            raise LadderError(f"--remove with {'--repair' if repair else '--format json'}: give them as two commands")
        _remove(store, remove, yes)
        return
    if repair:
        _repair(store)
        return
    target = _existing(store)
    runs = target.runs()
    _warn_damaged(target)
    if fmt is Format.json:
        records = []
        for row in runs.to_dict("records"):
            row = {k: (None if _missing(v) else v) for k, v in row.items()}
            row["last_fraction_edited"] = _edited_fraction(row)  # beside last_fraction, never in its place
            row["config"] = json.loads(row.pop("config_json") or "{}")
            row["report"] = json.loads(row.pop("report_json") or "{}")
            records.append(row)
        print_json(records)
        return
    from ladder.data.runview import six_n_note  # it loads fits: not at the CLI's start

    settings = target.settings()
    six_n = []  # the runs whose compute per token is 6·N, only N being known
    names, groups = runs["name"].astype(str), runs["group"].fillna("").astype(str)
    one_group = groups.nunique() == 1
    # a column that repeats the names (ids that are the names, or GROUP/NAME with one group) is left out
    ids = not ((runs["run_id"].astype(str) == names) | (runs["run_id"].astype(str) == groups + "/" + names)).all()
    source = _common_source(runs["source"].astype(str).map(shown_source), names)  # "local:/runs/" + each run's name: said once
    about = ([f"group {groups.iloc[0]}"] if one_group and groups.iloc[0] else []) + [f"fit metric {settings.fit_metric}"]
    t = Table(title=f"Runs in {target.root}/ ({'; '.join(about)})")
    numbers = ("active", "total", "C/token", "steps", "fraction", VALUES)
    least = {"run": 10, "id": 6, "group": 5, "role": 4, "state": 8, "source": 6}
    shown = ("run", *(("id",) if ids else ()), *(() if one_group else ("group",)), "role", "state", *numbers,
             *(() if source else ("source",)))
    for col in shown:
        if col in numbers:  # a number folded over two lines reads as two ("11,419/1" over "1,420")
            t.add_column(col, justify="right", no_wrap=True)
        else:  # a name or id cut short with "…" cannot be pasted into the next command
            t.add_column(col, justify="left", overflow="fold", min_width=least[col])
    order = runs.assign(_g=groups, _n=pd.to_numeric(runs["active_params"], errors="coerce"),
                        _t=pd.to_numeric(runs["stop_after_steps"], errors="coerce"))  # by group, then size and length
    for r in order.sort_values(["_g", "_n", "_t", "name"], na_position="last", kind="stable").to_dict("records"):
        cells = {
            "run": r["name"], "id": r["run_id"], "group": r["group"], "role": r["role"], "state": r["state"],
            "active": "?" if _missing(r["active_params"]) else format_count(int(r["active_params"])),
            "total": "?" if _missing(r["total_params"]) else format_count(int(r["total_params"])),
            "C/token": _per_token_cell(r, six_n),
            "steps": f"{_int(r['last_step'])}/{_int(r['stop_after_steps'])}",
            "fraction": _fraction_cell(r),
            VALUES: f"{r['rows']:,}",
            "source": shown_source(r["source"]),
        }
        t.add_row(*(cells[col] for col in shown))
    console.print(t)
    for line in six_n_note(six_n):
        console.print(line, highlight=False, soft_wrap=True)
    if not ids and (runs["run_id"].astype(str) != names).any():
        console.print("Each run's id: GROUP/RUN (`ladder history` takes either)", highlight=False, soft_wrap=True)
    if source:
        console.print(f"Each run's source: {source}RUN", highlight=False, soft_wrap=True)
    if settings.renames:
        console.print("Renames: " + ", ".join(f"{a} → {b}" for a, b in settings.renames.items()), highlight=False)


def _common_source(sources: pd.Series, names: pd.Series) -> str:
    """The one source every run came from under its own name ("local:/runs/" where each run's is that and its
    name), or "" where their sources differ otherwise."""
    heads = {src[:-len(name)] for src, name in zip(sources, names) if name and src.endswith(name)}
    fits_all = len(heads) == 1 and all(name and src.endswith(name) for src, name in zip(sources, names))
    return next(iter(heads)) if fits_all else ""


def _per_token_cell(run: dict, six_n: list[str]) -> str:
    """The runs table's fit FLOPs per token as every fit counts it (`runview.flops_per_token`): 6·N where only N is
    known (the run's name added to `six_n`); "?" where neither is."""
    from ladder.data.runview import SIX_N, flops_per_token

    try:
        flops, source = flops_per_token(str(run["name"]), run)
    except LadderError:
        return "?"
    if source != SIX_N:
        return f"{flops:.3g}"
    six_n.append(str(run["name"]))
    return f"{flops:.3g} (6·N)"


VALUES = "values"
"""The runs table's column of the values a run holds: of every metric it logs, not the fit metric's alone."""


def _fraction_cell(run: dict) -> str:
    """The last step's fraction of the plan the run started with, and of the edited plan beside it."""
    edited = _edited_fraction(run)
    if edited is None:
        return "-"
    shown = f"{run['last_fraction']:.3f}"
    if abs(edited - run["last_fraction"]) > 1e-9:
        shown += f" ({edited:.3f} edited)"
    return shown


def _edited_fraction(run: dict) -> float | None:
    """The last step's fraction of the plan in force at it (the plan it started with where it was never edited)."""
    if _missing(run["last_fraction"]) or _missing(run["last_step"]):
        return None
    edited = edited_fraction(json.loads(run["config_json"] or "{}"), [int(run["last_step"])])
    return float(run["last_fraction"]) if edited is None else float(edited[0])


@command("history")
def history_command(
    run: str = typer.Argument(..., help="Run id or name (see `ladder runs`)."),
    metric: list[str] = typer.Option([], "--metric", help="Metric key (repeatable); default: the fit metric; 'all' for every key."),
    fmt: HistoryFormat | None = typer.Option(None, "--format", help="table (the default without --out), csv or json."),
    out: Path | None = typer.Option(None, "--out", help="Write csv or json to this file instead of stdout (a .csv or .json suffix names the format when --format is not given; - is stdout, csv unless --format json)."),
    nonfinite: bool = typer.Option(False, "--nonfinite", help="Include NaN and ±inf values (left out by default, as fits leave them out). CSV writes them nan, inf, -inf (as `ladder import csv` reads them back); JSON as the strings \"NaN\", \"Infinity\", \"-Infinity\"."),
    tail: int = typer.Option(40, "--tail", help="table format: show the last this many rows."),
    store: Path = typer.Option(Path(DEFAULT_ROOT), "--store", help="Store folder."),
) -> None:
    """Print or export one run's metric series: step, tokens, fraction of the planned steps, value.

    The fraction is of the plan the run started with; where its plan was edited, fraction_edited (of the
    plan in force at each step) stands beside it. With --nonfinite, a NaN and an infinity stay apart in every
    format: CSV writes nan, inf and -inf, which `ladder import csv` reads back as the values logged (an empty
    cell would read as a value not logged); JSON, which has no such numbers, writes the strings "NaN",
    "Infinity" and "-Infinity" (JavaScript's and Python's names for them).
    """
    if out is not None and str(out) == "-":  # standard output, as many tools name it: CSV unless asked otherwise
        out, fmt = None, fmt or HistoryFormat.csv
    if out is not None:
        out = out_file(out, kinds=(".csv", ".json"), ours=(_is_history, "an export of `ladder history`"))
        fmt = _history_format(fmt, out)
    fmt = fmt or HistoryFormat.table
    if tail < 0:
        raise LadderError(f"--tail {tail}: must be 0 or more")
    target = _existing(store)
    info = target.run(run)
    metrics = None if "all" in metric else (metric or [target.settings().fit_metric])
    h = target.history([info["run_id"]], metrics, include_nonfinite=nonfinite)
    if metrics is not None and metric:
        _refuse_unlogged(target, info, metrics, h)
    h = h.drop(columns=["run_id"])
    edited = edited_fraction(json.loads(info["config_json"] or "{}"), h["step"].to_numpy())
    if edited is not None:  # DESIGN.md: the edited plan's fraction beside the fraction, never in its place
        h.insert(h.columns.get_loc("fraction") + 1, "fraction_edited", edited)
    if fmt is HistoryFormat.table:
        if out is not None:
            raise LadderError(f"--out {out}: the table is printed, not written to a file; give --format csv or json "
                              "to write the history there")
        if not len(h):
            shown = ", ".join(metrics or [])
            console.print(f"{info['name']}: no values of {shown} (try --metric all)", highlight=False)
            return
        t = Table(title=f"{info['name']} ({info['run_id']}), {info['state']}: {len(h):,} values")
        for col in h.columns:
            t.add_column(col, justify="left" if col == "metric" else "right")
        for r in h.tail(tail).to_dict("records"):
            t.add_row(*(f"{r[c]:,}" if c in ("step", "tokens") else f"{r[c]:.4f}" if c.startswith("fraction")
                        else f"{r[c]:.6g}" if c == "value" else str(r[c]) for c in h.columns))
        console.print(t)
        return
    text = _history_text(h, fmt)
    if out is None:
        echo(text)
    else:
        try:
            write_text_atomic(out, text)
        except OSError as exc:
            raise LadderError(f"--out {out}: cannot write it ({exc.strerror})") from None
        console.print(f"Wrote {len(h):,} rows to {out}", highlight=False)


NONFINITE_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How `ladder history --format json` writes a value JSON has no number for: as these strings, so that a NaN
(the run logged a NaN) and an infinity (it diverged) stay apart, where null would say neither."""


def _is_history(head: str) -> bool:
    """Whether a file's first characters are those of a `ladder history` export: CSV under its header, or a JSON
    list of its rows."""
    text = head.lstrip()
    if text.startswith("step,tokens,fraction,"):
        return True
    rows = text.lstrip("[").lstrip()  # a JSON list of rows, each opening with the CSV's first columns
    return text.startswith("[") and (rows.startswith("]") or re.match(
        r'\{\s*"step":[^,]*,\s*"tokens":[^,]*,\s*"fraction":', rows) is not None)


def _history_text(h: pd.DataFrame, fmt: HistoryFormat) -> str:
    """A run's series as CSV or JSON text, floats to the last digit, NaN and ±inf kept apart: CSV as nan, inf and
    -inf (what `ladder import csv` reads as logged values; an empty cell there is a value not logged), JSON as the
    strings of `NONFINITE_JSON`."""
    if fmt is HistoryFormat.csv:
        return h.to_csv(index=False, na_rep="nan")
    values = h["value"].to_numpy(np.float64)
    shown = h["value"].astype(object)
    for spelt, where in zip(NONFINITE_JSON.values(), (np.isnan(values), values == np.inf, values == -np.inf)):
        shown[where] = spelt
    return json_text(h.assign(value=shown).to_dict("records"), indent=1) + "\n"


def _history_format(fmt: HistoryFormat | None, out: Path) -> HistoryFormat | None:
    """The format an --out file is written in: the one its suffix names where --format is not given (or agrees)."""
    named = {".csv": HistoryFormat.csv, ".json": HistoryFormat.json}.get(out.suffix.lower())
    if named is None or fmt is named:
        return fmt
    if fmt is None:
        return named
    if fmt is HistoryFormat.table:
        raise LadderError(f"--out {out}: --format table prints to the terminal; give --format {named.value} (or leave "
                          "--format out) to write the file")
    raise LadderError(f"--out {out} is a {out.suffix} file but --format {fmt.value} writes {fmt.value.upper()}; "
                      f"give --format {named.value}, or an --out path ending in .{fmt.value}")


def _refuse_unlogged(target: Store, info: dict, metrics: list[str], h) -> None:
    """A --metric the run never logged (a typo) is refused, naming the keys it did log."""
    logged = set(h["metric"].astype(str))
    missing = [m for m in metrics if m not in logged]
    if not missing:
        return
    keys = sorted(set(target.history([info["run_id"]], None, include_nonfinite=True)["metric"].astype(str)))
    never = [m for m in missing if m not in keys]
    if never:
        raise LadderError(f"--metric {never[0]!r}: run {info['name']!r} never logged it; it logged "
                          f"{', '.join(keys[:12]) or 'nothing'}{', ...' if len(keys) > 12 else ''} (or give --metric all)")


def _repair(store: Path) -> None:
    target = Store(store)
    if not (target.root / "manifest.json").exists() and not (target.root / "history").is_dir():
        raise LadderError(f"no store at {store}/: nothing to repair")
    report = target.repair()
    for what in report.rebuilt:
        console.print(f"rebuilt the {what}", highlight=False)
    for run_id, why in report.dropped:
        err_console.print(f"[yellow]dropped[/] run {escape(run_id)}: {escape(why)}; pull it again", highlight=False,
                          soft_wrap=True, markup=True)
    if not report.rebuilt and not report.dropped:
        console.print(f"nothing to repair: {report.kept} runs in {target.root}/ read whole", highlight=False)
    else:
        console.print(f"{report.kept} run{'' if report.kept == 1 else 's'} kept in {target.root}/", highlight=False)


def _remove(store: Path, runs: list[str], yes: bool) -> None:
    target = _existing(store)
    found = pd.DataFrame([target.run(r) for r in runs]).drop_duplicates("run_id")
    count = f"{len(found)} run{'' if len(found) == 1 else 's'}"
    if not yes and not _interactive():
        raise LadderError(f"--remove {' '.join(found['name'])}: cannot ask to confirm removing {count} from "
                          f"{target.root}/ (stdin is not a terminal); add --yes to remove without asking")
    if not yes:
        t = Table(title=f"To remove from {target.root}/")
        for col in ("run", "id", "source", "values"):
            t.add_column(col, justify="right" if col == "values" else "left", overflow="fold")
        for r in found.to_dict("records"):
            t.add_row(r["name"], r["run_id"], shown_source(r["source"]), f"{r['rows']:,}")
        console.print(t)
        if not typer.confirm(f"Remove {count} and their histories?", default=False):
            console.print("nothing removed", highlight=False)
            return
    for r in target.remove(list(found["run_id"])).to_dict("records"):
        given = GIVEN_KEY in json.loads(r["config_json"] or "{}")
        console.print(f"removed run {r['name']!r} (id {r['run_id']}, {r['rows']:,} values); pulling it again from "
                      f"{shown_source(r['source'])}{' with the same --coord/--coords' if given else ''} restores it",
                      highlight=False, soft_wrap=True)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _existing(store: Path) -> Store:
    return Store(store).must_exist(f"pull runs first: `ladder pull local PLAN/runs --store {store}` for the runs "
                                   "`ladder train` wrote in a plan's folder, `ladder pull offline FOLDER` for wandb's "
                                   f"offline files, or import a table: `ladder import csv FILE.csv --store {store}`")


def _missing(value: object) -> bool:
    return value is None or (not isinstance(value, (str, dict, list)) and bool(pd.isna(value)))


def _int(value: object) -> str:
    return "-" if _missing(value) else f"{int(value):,}"
