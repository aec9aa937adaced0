"""Pull runs from any source into the store: read what is new, resolve it, stage it, commit once.

Every source has ``key`` (where runs come from), ``runs()`` (a cheap listing) and
``read(ref, cursor)`` (rows new since the cursor). The pull gives each run the cursor its last pull
stored, so a second pull reads only what is new and tops up running runs. A run staged by a pull
that was cut off is not read again when the same pull runs again with the same flags.

Nothing is replaced silently: a run id already stored from another source, or stored with other
coordinates than the user now gives, refuses the whole pull before anything is read, unless
`replace` (the message then says what was replaced); a new rename onto a key a run logs itself
refuses it too, as that run is read. A run's source is its own (``RunRef.source``:
a local run's folder, the folder an offline run's ``wandb/`` is in), not the path a pull was given,
so one run reached through a parent folder or directly is the same run. A run that cannot be read (a
damaged file, a value out of range) is skipped: the others are committed and `PullSkipped` lists the
skipped ones; a table (`all_or_nothing`) is refused whole instead.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ladder import runfiles
from ladder.data.resolve import HISTORY_COLUMNS, MetricSettings, first_eval_share, resolve
from ladder.data.sources.coords import (
    FIELDS,
    ONE_ROW,
    SCHEDULE,
    CoordinateOverrides,
    Coordinates,
    MissingCoordinates,
    config_key_hint,
    replaced_by_coord,
    resolve_coordinates,
    unread_keys,
)
from ladder.data.sources.table import (
    FAR_PAST_PLAN,
    FAR_SHORT_OF_PLAN,
    SHORT_OF_PLAN,
    TABLE,
    RunRef,
    SourceRun,
    check_run_id,
    shown_source,
    step_key_hint,
)
from ladder.data.store import GIVEN_KEY, Store
from ladder.data.storewriter import StoreWriter
from ladder.errors import LadderError, NotYetWritten, SourceUnavailable


class Source(Protocol):
    @property
    def key(self) -> str: ...

    def runs(self) -> list[RunRef]: ...

    def read(self, ref: RunRef, cursor: dict[str, Any] | None = None) -> SourceRun: ...


@dataclass(frozen=True)
class RunPulled:
    run_id: str
    name: str
    state: str
    rows_read: int
    """Rows this pull read from the source."""
    rows: int
    """History rows stored for the run now."""
    last_step: int | None
    last_fraction: float | None
    messages: tuple[str, ...]
    new: bool = False
    """The store held no run of this id before this pull."""
    renamed: tuple[tuple[str, str, int], ...] = ()
    """(logged key, stored key, values) renamed as this pull's --rename asked (said once for all runs: `renames`)."""


@dataclass(frozen=True)
class PullResult:
    source: str
    pulled: tuple[RunPulled, ...]
    unchanged: int
    """Runs listed that had nothing new."""
    resumed: int
    """Runs staged by an earlier, interrupted run of this pull and committed now."""
    skipped: tuple[tuple[str, str], ...] = ()
    """(run, why) for runs that could not be read; nothing of them was stored."""
    notes: tuple[str, ...] = ()
    """What happened to the store beyond the runs pulled (runs replaced, staged runs discarded)."""
    written: dict[str, float] = dataclasses.field(default_factory=dict)
    """Run id → when the source last saw the run write (`SourceRun.last_write`), for the runs read whose source
    keeps that clock, unchanged ones included."""
    waiting: frozenset[str] = frozenset()
    """The runs of `skipped` that their source has not written anything of yet (`NotYetWritten`): read again later."""

    @property
    def messages(self) -> list[str]:
        return [*self.notes, *(f"{r.name}: {m}" for r in self.pulled for m in r.messages)]

    @property
    def renames(self) -> list[str]:
        """One line per key renamed, for every run of this pull at once (the user asked for it: no news per run)."""
        counts: dict[tuple[str, str], list[int]] = {}
        for r in self.pulled:
            for old, new, n in r.renamed:
                runs_values = counts.setdefault((old, new), [0, 0])
                runs_values[0] += 1
                runs_values[1] += n
        return [f"{old} stored as {new}: {values:,} value{'s' if values != 1 else ''} of {runs} "
                f"run{'s' if runs != 1 else ''}" for (old, new), (runs, values) in counts.items()]


class RenameClash(LadderError):
    """A rename this pull is given maps a key onto one the run logs itself: the whole pull is refused."""


class PullSkipped(LadderError):
    """Some runs could not be read; the others were committed. `result` says which is which."""

    def __init__(self, result: PullResult):
        self.result = result
        if {run for run, _ in result.skipped} <= result.waiting:  # only runs still starting: "try again"
            self.exit_code = NotYetWritten.exit_code
        others = len(result.pulled) + result.unchanged + result.resumed
        if len(result.skipped) == 1:
            ((run, why),) = result.skipped
            super().__init__(f"skipped {run}: {why}" + (f" ({_n_runs(others)} pulled beside it)" if others else ""))
            return
        # One line per run: joined on one line, a few skipped runs made an error nobody could read.
        beside = f" ({_n_runs(others)} pulled beside them)" if others else ""
        super().__init__(f"{_n_runs(len(result.skipped))} skipped{beside}:"
                         + "".join(f"\n  skipped {run}: {why}" for run, why in result.skipped))


def check_listed(source: Source, refs: list[RunRef], overrides: CoordinateOverrides,
                 stored: Callable[[str], dict[str, Any] | None]) -> None:
    """Refuse, before any history is read, a run of `refs` whose coordinates are known from the listing (a table's
    rows, a run folder's config) and missing or not counts, with what the source says may give them. `stored`: the
    store's row of a run id (what an earlier pull of it was given is kept)."""
    for ref in refs:
        if ref.config is None:
            continue
        prev = _own(stored(ref.run_id), ref.source or source.key)
        config = {**_config(prev), **ref.config}
        try:
            resolve_coordinates(ref.label, ref.run_id, _name(ref, None, config, prev), config, _coords(prev), overrides)
        except MissingCoordinates as exc:
            hint = overrides.near_entry(exc.run, ref.run_id) + (
                source.coordinate_hint(exc.fields) if hasattr(source, "coordinate_hint")
                else config_key_hint(ref.config, exc.fields))
            if not hint:
                raise
            raise exc.with_hint(hint) from None


def _n_runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def pull(
    store: Store,
    source: Source,
    *,
    overrides: CoordinateOverrides | None = None,
    settings: MetricSettings | None = None,
    full: bool = False,
    replace: bool = False,
) -> PullResult:
    """Read `source` into `store`; `settings` (when given) become the store's; `full` reads every run anew;
    `replace` lets this pull replace runs stored from another source or with other coordinates.

    Raises `PullSkipped` (after committing the rest) when some runs could not be read, and `RenameClash`
    (committing nothing) when a rename this pull adds maps a key onto one a run logs itself.
    """
    overrides = overrides or CoordinateOverrides()
    # What decides the rows and coordinates staged (`replace` does not: it only lets a clash through).
    flags = {"overrides": [overrides.all_runs, overrides.per_run], "settings": None if settings is None else
             [settings.fit_metric, settings.renames], "full": full, "source": getattr(source, "options", None)}
    with store.writer(source.key, flags) as writer:
        notes = list(writer.notes)
        # Renames kept from earlier pulls were accepted then; only those this pull adds are checked.
        new_renames = {} if settings is None else dict(settings.renames.items() - store.settings().renames.items())
        if settings is not None and settings != writer.settings():
            writer.set_settings(settings)
        settings = writer.settings()
        refs = source.runs()
        listed = {ref.run_id for ref in refs}
        names = _names(writer, refs)  # what a coordinates file may call a run of this pull; reads add theirs
        skipped = [(ref.label or ref.run_id, ref.problem) for ref in refs if ref.problem]
        refs = [ref for ref in refs if not ref.problem]
        _check_listing(refs, source.key)
        resumed = sum(ref.run_id in writer.staged for ref in refs)
        notes += _check_clashes(writer, refs, source.key, overrides, replace)
        notes += source.notes(overrides) if hasattr(source, "notes") else []
        check_listed(source, [ref for ref in refs if ref.run_id not in writer.staged], overrides, writer.stored)
        pulled, unchanged, written, waiting = [], 0, {}, set()
        for ref in refs:
            if ref.run_id in writer.staged:
                continue
            try:
                done = _pull_run(writer, source, ref, overrides, settings, full, names, new_renames, replace, written)
            except SourceUnavailable as exc:
                if writer.staged:
                    raise SourceUnavailable(
                        f"{exc} ({len(writer.staged)} run(s) read before this one are kept aside, "
                        "not committed; run the same pull again to continue from them)"
                    ) from None
                raise
            except RenameClash:
                raise
            except (LadderError, OSError) as exc:
                label = ref.label or ref.run_id
                if getattr(source, "all_or_nothing", False):
                    writer.discard()
                    raise LadderError(f"{label}: {_reason(exc, label)}; nothing of the file was imported "
                                      "(a table is imported whole)") from None
                skipped.append((label, _reason(exc, label)))
                if isinstance(exc, NotYetWritten):
                    waiting.add(label)
                continue
            if done is None:
                unchanged += 1
            else:
                pulled.append(done)
        writer.commit()
    notes += overrides.unmatched(names) + overrides.shadowed(names)
    runs = store.runs()
    notes += _twice(runs, {p.run_id for p in pulled}) + _id_is_a_name(runs, {p.run_id for p in pulled})
    notes += _odd_ratios(runs[runs["run_id"].isin({p.run_id for p in pulled})])
    if not getattr(source, "narrowed", False):  # a source narrowed to one run lists no other
        notes += _gone(runs, source.key, listed)
    result = PullResult(source.key, tuple(pulled), unchanged, resumed, tuple(skipped), tuple(notes), written,
                        frozenset(waiting))
    if skipped:
        raise PullSkipped(result)
    return result


def _odd_ratios(runs: pd.DataFrame) -> list[str]:
    """A note naming the runs (rows of the runs table) whose planned tokens per active parameter lie where no run
    trains (`RATIO_RANGE`): a count in other units (parameters in millions, tokens in billions) is likelier."""
    from fits.predictor import untrainable

    n, tokens = (pd.to_numeric(runs[c], errors="coerce").to_numpy(float) for c in ("active_params", "planned_tokens"))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = tokens / n
    odd = np.flatnonzero(untrainable(ratio))
    if not odd.size:
        return []
    i, names = odd[0], [str(x) for x in runs["name"].iloc[odd]]
    more = f" (and {len(odd) - 1} more)" if len(odd) > 1 else ""
    return [f"{names[0]}{more} plans {ratio[i]:.3g} tokens per parameter ({tokens[i]:.3g} tokens, active_params "
            f"{n[i]:.3g}), where no run trains: are its parameters or tokens in another unit (millions, billions)? "
            "Give counts, or the fits will say the same"]


def _gone(runs: pd.DataFrame, key: str, listed: set[str]) -> list[str]:
    """A line for the stored `runs` read from `key` (or a folder under it) that it no longer lists: deleted or
    moved. The store keeps them as they were, a run that was running included."""
    if runs.empty:
        return []
    src = runs["source"].astype(str)
    mine = runs[((src == key) | src.str.startswith(key.rstrip("/") + "/")) & ~runs["run_id"].isin(listed)]
    if mine.empty:
        return []
    r = mine.iloc[0]
    more = f" (and {len(mine) - 1} more)" if len(mine) > 1 else ""
    return [f"run {r['name']!r}{more}, stored from {r['source']}, is no longer there: the store keeps it as it was "
            f"({r['state']} at step {int(r['last_step']) if pd.notna(r['last_step']) else 0:,}); pull it from where "
            f"it went (--replace), keep it out of fits with --group/--role, or take it out of the store with "
            f"`ladder runs --remove {r['run_id']}`"]


def _twice(runs: pd.DataFrame, pulled: set[str]) -> list[str]:
    """A line where a run just pulled shares its group and name with a stored run (of `runs`) of another source:
    one run read from its folder and from its wandb files, which every fit would count twice."""
    if not pulled or runs.empty:
        return []
    out = []
    for (group, name), rows in runs.groupby(["group", "name"], sort=False):
        if len(rows) > 1 and rows["source"].nunique() > 1 and pulled & set(rows["run_id"]):
            shown = ", ".join(f"{r} ({s})" for r, s in zip(rows["run_id"], rows["source"]))
            out.append(f"run {name!r}{f' of group {group!r}' if group else ''} is in the store {len(rows)} times, "
                       f"from other sources: {shown}; one run pulled from its folder and its wandb files? Every "
                       "fit counts each: keep each run from one source (`ladder runs --remove ID` takes out the "
                       "unwanted copy)")
    return out


def _id_is_a_name(runs: pd.DataFrame, pulled: set[str]) -> list[str]:
    """A line where a run just pulled has as id another run's name, or as name another run's id: a command given
    that word takes the run whose id it is, so the other run is named by its id."""
    if not pulled or runs.empty:
        return []
    pairs = runs[["run_id", "name"]].merge(runs[["run_id"]], left_on="name", right_on="run_id", suffixes=("", "_id"))
    pairs = pairs[(pairs["run_id"] != pairs["run_id_id"]) & (pairs["run_id"].isin(pulled) | pairs["name"].isin(pulled))]
    return [f"run {named!r} is named {word!r}, which is another run's id: commands that take a run read {word!r} as "
            f"that id, so name this run by its id {named!r}" for named, word in zip(pairs["run_id"], pairs["name"])]


def _names(writer: StoreWriter, refs: list[RunRef]) -> set[str]:
    """The ids and names the listing and the store give the runs of `refs`."""
    names = set()
    for ref in refs:
        row = writer.staged.get(ref.run_id, {}).get("row") or writer.stored(ref.run_id) or {}
        names |= {n for n in (ref.run_id, ref.name, row.get("name")) if n}
    return names


def _reason(exc: BaseException, label: str) -> str:
    """Why the run `label` could not be read, without the label again where the message starts with it."""
    if isinstance(exc, OSError) and not isinstance(exc, LadderError):
        return f"{exc.filename or 'a file'}: cannot read it ({exc.strerror or exc})"
    return str(exc).removeprefix(f"run {label}: ")


def _check_listing(refs: list[RunRef], key: str) -> None:
    """Run ids are safe to keep and unique within one source (two runs under one id would merge)."""
    seen: dict[str, str] = {}
    for ref in refs:
        check_run_id(ref.run_id, f"{key}: run {ref.label or ref.run_id!r}")
        if ref.run_id in seen:
            raise LadderError(
                f"{key}: two runs have the id {ref.run_id!r} ({seen[ref.run_id]} and {ref.label}); "
                "give them different names or groups, or pull them one at a time into different stores"
            )
        seen[ref.run_id] = ref.label


def _how_ids(origin: str) -> str:
    """Where a source's run ids come from, to give a run another: a planned run's are its group and name."""
    if origin.startswith(("local:", "offline:")):
        return ("a planned run's id is its group and name: a ladder planned again from the same preset, at another "
                "--tpp say, gets ids of its own with `ladder plan PRESET --set name=OTHER`")
    if origin.startswith(TABLE):
        return "a table's run ids are the values of its run column (--run)"
    return "a wandb run's id is the one wandb gave it"


def _check_clashes(
    writer: StoreWriter, refs: list[RunRef], key: str, overrides: CoordinateOverrides, replace: bool
) -> list[str]:
    """Refuse (or, with `replace`, announce) runs that would replace a stored run from elsewhere."""
    clashes = []
    for ref in refs:
        prev = writer.stored(ref.run_id)
        if prev is None or ref.run_id in writer.staged:
            continue
        if not _same_source(prev["source"], ref.source or key):
            origin = ref.source or key
            copy = _same_folder_name(str(prev["source"]), origin)  # not moved here: the stored folder is still there
            clashes.append((ref.run_id, f"run id {ref.run_id!r} is already in the store from "
                                        f"{shown_source(prev['source'])} ({prev['rows']:,} rows); "
                                        f"{shown_source(origin)} has a run with the same id"
                                        + (" (a folder of the same name: a copy of it, or another ladder's run "
                                           "named alike)" if copy else ""), f"; its {prev['rows']:,} stored rows are "
                                        f"dropped"))
        else:
            moved = _coordinates_moved(ref, prev, _remembered(overrides, ref.run_id, prev["name"], prev))
            if moved:
                clashes.append((ref.run_id, f"run {ref.run_id!r} is stored with {moved}", ""))
    if clashes and not replace:
        more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
        tables = (refs[0].source or key).startswith(TABLE) and any(
            str(writer.stored(r)["source"]).startswith(TABLE) for r, _, _ in clashes)
        chunks = ("; a run exported in chunks, a new file each, is not continued by the next file: export it to one "
                  "file that grows, which each import reads anew") if tables else ""
        raise LadderError(
            f"{clashes[0][1]}{more}; nothing was pulled: pass --replace to replace the stored run(s) (their stored "
            f"rows are dropped, not kept beside the new ones), give the new run(s) other ids "
            f"({_how_ids(refs[0].source or key)}), or pull them into another store (`ladder compare --store-b` "
            f"compares two ladders of two stores){chunks}"
        )
    said = clashes if len(clashes) <= REPLACED_SAID else clashes[:REPLACED_SAID - 1]
    out = [f"replaced: {text}{dropped}" for _, text, dropped in said]
    if rest := [run_id for run_id, _, _ in clashes[len(said):]]:
        out.append(f"replaced {len(rest):,} more runs stored from another source or with other coordinates: "
                   + ", ".join(rest[:20]) + (", ..." if len(rest) > 20 else ""))
    return out


REPLACED_SAID = 3
"""A pull replacing more runs than this says the first ones in full and counts the others on one line."""


def _pull_run(
    writer: StoreWriter,
    source: Source,
    ref: RunRef,
    overrides: CoordinateOverrides,
    settings: MetricSettings,
    full: bool,
    names: set[str],
    new_renames: dict[str, str],
    replace: bool,
    written: dict[str, float],
) -> RunPulled | None:
    """Read and stage one run; adds the name its coordinates are looked up by to `names`, and when the source says
    when the run last wrote, that time to `written`. A rename
    in `new_renames` onto a key the run logs itself raises `RenameClash`; a table read again that lacks
    metrics or steps the store holds of the run is refused unless `replace`."""
    prev = writer.stored(ref.run_id)
    origin = ref.source or source.key
    earlier = _own(prev, origin)  # coordinates the user gave an earlier pull of this run still hold
    same = earlier is not None
    usable = same and not full and not new_renames  # a rename this pull adds renames what is stored too: read again
    if usable and _coordinates_moved(ref, prev, _remembered(overrides, ref.run_id, prev["name"], earlier)):
        usable = False  # every stored row's tokens and fraction change: read the run again
    got = source.read(ref, json.loads(prev["cursor_json"]) if usable and prev["cursor_json"] else None)
    if got.last_write is not None:
        written[ref.run_id] = got.last_write
    fresh = got.replace or not usable
    config = dict(got.config) if fresh else {**_config(prev), **got.config}
    name = _name(ref, got, config, prev)
    names.add(name)
    relocated = prev is not None and moved_here(prev["source"], origin)
    if not fresh and not len(got.rows) and got.state == prev["state"] and config == _config(prev) and not relocated:
        return None
    overrides = _remembered(overrides, ref.run_id, name, earlier)
    given = overrides.for_run(ref.run_id, name)
    schedule = given.get(SCHEDULE)
    if schedule is not None:  # a schedule from a coordinates file is kept with the run, where predictions read it
        config = {**config, SCHEDULE: schedule}
    if given:
        config = {**config, GIVEN_KEY: given}
    # a run replacing one of another source keeps none of its coordinates (`earlier`: the stored run, of this source)
    try:
        coords, labels = resolve_coordinates(ref.label, ref.run_id, name, config, _coords(earlier), overrides)
    except MissingCoordinates as exc:  # a run's own config, read now (a wandb file's): what in it may give them
        hint = "" if origin.startswith(TABLE) else config_key_hint(got.config, exc.fields)
        raise exc.with_hint(hint) if hint else exc from None
    moved = _moved(_coords(prev), coords.values()) if same else ""
    stored_report = None if fresh else writer.stored_report(ref.run_id)
    stored_history = None if fresh else writer.stored_history(ref.run_id)
    rows = got.rows
    if config.get(ONE_ROW):  # a table's one row of the run (its final loss): at its last step, known only now
        rows = rows.assign(step=np.full(len(rows), coords.stop_after_steps, dtype=np.int64))
    _check_renames(ref, rows, stored_history, new_renames)
    history, report = resolve(rows, coords, settings, stored_history, first_eval_share(config))
    if labels.get("role") == "prediction":  # a prediction logged to wandb holds bands, never the metric itself
        report = dataclasses.replace(report, missing_fit_metric="")
    if got.whole:
        _check_plan(source, ref, name, rows["step"].to_numpy(), coords)
    was = _table_before(writer, ref.run_id, replace) if got.whole and same else None  # a table read again
    if not replace:
        _check_nothing_lost(name, was, history)
    total = report.plus(stored_report)
    steps = history["step"].to_numpy()
    last_step = int(steps.max()) if len(steps) else None
    last_fraction = float(coords.fraction(np.array([last_step]))[0]) if last_step is not None else None
    row = {
        "run_id": ref.run_id,
        "name": str(given.get("name") or name),
        "group": str(given.get("group") or got.group or labels.get("group") or (prev or {}).get("group") or ""),
        "role": str(labels.get("role") or (prev or {}).get("role") or ""),
        **coords.values(),
        "state": got.state,
        "source": origin,
        "last_step": last_step,
        "last_fraction": last_fraction,
        "rows": len(history),
        "pulled_at": time.time(),
        "config_json": json.dumps(config, sort_keys=True, default=str),
        "report_json": json.dumps(total.to_json()),
        "cursor_json": json.dumps(got.cursor),
    }
    if usable and _as_stored(prev, row, was, history):
        return None  # a table imported again as it was (--full writes it anew)
    said = (_short_of_plan(source, got, config, last_step, last_fraction, coords)
            + tuple(unread_keys(config, overrides, row) + replaced_by_coord(got.config, overrides, ref.run_id, name)))
    writer.stage(row, history)
    return RunPulled(
        ref.run_id,
        row["name"],
        got.state,
        len(got.rows),
        len(history),
        last_step,
        last_fraction,
        tuple(got.warnings) + said + ((f"coordinates changed: {moved}",) if moved else ())
        + ((f"its folder moved: stored from {prev['source']}, which is gone; the store now reads it from {origin}",)
           if relocated else ())
        + _values_changed(was, history)
        + tuple(report.messages(stored_report, renames=False)),
        new=prev is None,
        renamed=report.renamed,
    )


def _table_before(writer: StoreWriter, run_id: str, replace: bool) -> pd.DataFrame | None:
    """The stored history of a run a table holds again, to compare with; with `replace`, a damaged one is None (the
    table replaces it whole)."""
    try:
        return writer.stored_history(run_id)
    except LadderError:
        if replace:
            return None
        raise


VALUES_SHOWN = 3
"""A table imported again with values changed says this many of them, and counts the rest."""


def _values_changed(stored: pd.DataFrame | None, history: pd.DataFrame) -> tuple[str, ...]:
    """What to say of a table imported again whose run holds other values at steps the store held: how many, the first
    `VALUES_SHOWN` (metric, step, stored → new), and that what was fitted on them before used the old ones."""
    if stored is None or not len(stored) or not len(history):
        return ()
    on = ["metric", "step"]
    both = stored[[*on, "value"]].astype({"metric": str, "step": np.int64}).merge(
        history[[*on, "value"]].astype({"metric": str, "step": np.int64}), on=on, suffixes=("_was", "_now"))
    was, now = both["value_was"].to_numpy(float), both["value_now"].to_numpy(float)
    moved = both[~((was == now) | (np.isnan(was) & np.isnan(now)))].sort_values(on)
    if moved.empty:
        return ()
    shown = "; ".join(f"{r.metric} at step {int(r.step):,}: {r.value_was:.6g} → {r.value_now:.6g}"
                      for r in moved.head(VALUES_SHOWN).itertuples())
    more = f"; and {len(moved) - VALUES_SHOWN:,} more" if len(moved) > VALUES_SHOWN else ""
    n = len(moved)
    return (f"{n:,} stored value{'s' if n > 1 else ''} changed ({shown}{more}): a fit or prediction made from this run "
            "before used the old one" + ("s" if n > 1 else "") + "; make it again",)


def _short_of_plan(source: Source, got: SourceRun, config: dict[str, Any], last_step: int | None,
                   last_fraction: float | None, coords: Coordinates) -> tuple[str, ...]:
    """What to say of a run that ends short of its plan where the source cannot know why: a table that gives no
    state, or a finished wandb run read with wandb's own step, which counts log calls. `last_fraction`: `last_step`
    as a fraction of the plan the run started with (`Coordinates.fraction`)."""
    if last_step is None or last_fraction is None:
        return ()
    if got.whole and not config.get("state") and last_fraction < SHORT_OF_PLAN:
        return (f"ends at step {last_step:,}, {last_fraction:.0%} of its plan, and the table gives no state: stored as "
                "finished; a run still training, or one that crashed, needs a column state (running, crashed)",)
    planned = coords.stop_after_steps  # the plan in force at the end: a horizon cut short is no reason to suspect _step
    by_log_calls = getattr(source, "step_key", None) == "_step"  # wandb's own step
    if got.state == "finished" and by_log_calls and last_step < FAR_SHORT_OF_PLAN * planned \
            and not _steps_count_tokens(got.rows, coords.tokens_per_step):
        return (step_key_hint(got.rows, last_step, planned),)
    return ()


def _steps_count_tokens(rows: pd.DataFrame, tokens_per_step: int) -> bool:
    """Whether the tokens a run logged are its steps × `tokens_per_step` (to 1%, where more than one step logs them):
    its step is then the optimizer step (a trainer that logs with ``step=``), whatever else ends it short."""
    if "tokens" not in rows.columns:
        return False
    logged = rows[["step", "tokens"]].dropna()
    logged = logged[logged["step"].to_numpy(np.float64) > 0]
    if logged["step"].nunique() < 2:
        return False
    ratio = logged["tokens"].to_numpy(np.float64) / (logged["step"].to_numpy(np.float64) * tokens_per_step)
    return bool(np.all(np.abs(ratio - 1) <= 0.01))


def _as_stored(prev: dict[str, Any], row: dict[str, Any], stored: pd.DataFrame | None, history: pd.DataFrame) -> bool:
    """Whether a run read again leaves the store as it is: every runs-table field but the pull's time, and every
    history row."""
    if stored is None or len(stored) != len(history):
        return False
    if any(not _same_value(prev.get(k), v) for k, v in row.items() if k != "pulled_at"):
        return False
    return all(_same_column(stored[c].to_numpy(), history[c].to_numpy()) for c in HISTORY_COLUMNS)


def _same_value(a: Any, b: Any) -> bool:
    missing = [x is None or (isinstance(x, float) and np.isnan(x)) for x in (a, b)]
    if any(missing):
        return all(missing)
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)):
        return float(a) == float(b)
    return a == b


def _same_column(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "fiu" and b.dtype.kind in "fiu":
        return np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True)
    return [str(x) for x in a] == [str(x) for x in b]


def _check_plan(source: Source, ref: RunRef, name: str, steps: np.ndarray, coords: Coordinates) -> None:
    """Refuse a table's run with rows far past its plan (`FAR_PAST_PLAN`): its fractions would be wrong, and a
    table, unlike a live run, holds the whole run at once."""
    last = int(steps.max()) if len(steps) else 0
    plan = int(coords.planned_steps_at(np.array([last]))[0])
    if last < FAR_PAST_PLAN * plan:
        return
    where = source.where_step(ref, last) if hasattr(source, "where_step") else f"run {name!r}"
    raise LadderError(f"{where}: run {name!r} reaches step {last:,}, {last / plan:.3g}× its plan of {plan:,} steps; "
                      "nothing of the run was imported: give the steps it was planned for (stop_after_steps, or its "
                      "schedule's total_steps), or check the step column (steps counted in tokens?)")


def _check_nothing_lost(name: str, stored: pd.DataFrame | None, history: pd.DataFrame) -> None:
    """Refuse a table read again whose run lacks metrics, or steps, that the store holds of it: replacing the run
    would drop them (a column left out of the import, or rows cut from the file)."""
    if stored is None or not len(stored):
        return
    gone = sorted(set(stored["metric"].astype(str)) - set(history["metric"].astype(str)))
    last, now = int(stored["step"].max()), int(history["step"].max()) if len(history) else -1
    pairs = stored[["metric", "step"]].astype({"metric": str, "step": np.int64})
    kept = history[["metric", "step"]].astype({"metric": str, "step": np.int64}).drop_duplicates()
    left = pairs.merge(kept, how="left", on=["metric", "step"], indicator=True)
    missing = sorted(set(left.loc[(left["_merge"] == "left_only") & ~left["metric"].isin(gone), "step"].tolist()))
    lost = [f"{', '.join(repr(m) for m in gone)} (not in this import)"] if gone else []
    if missing and missing[0] > now:
        lost.append(f"its steps after {now:,} (the store has them to step {last:,})")
    elif missing:
        shown = ", ".join(f"{s:,}" for s in missing[:5]) + (", ..." if len(missing) > 5 else "")
        lost.append(f"{len(missing):,} stored step{'s' if len(missing) > 1 else ''} that this file no longer holds "
                    f"(step {shown})")
    if lost:
        raise LadderError(f"run {name!r}: this import would drop {' and '.join(lost)} from the stored run; nothing of "
                          "it was replaced: pass --replace to replace it with what this file holds, or import the "
                          "file with the same columns (every --metric of the earlier import)")


def _check_renames(ref: RunRef, rows: pd.DataFrame, stored: pd.DataFrame | None, renames: dict[str, str]) -> None:
    """Refuse a rename whose target the run logs itself: its values would be mixed with the renamed ones."""
    logged = set(rows["metric"].astype(str)) if len(rows) else set()
    kept = set(stored["metric"].astype(str)) if stored is not None and len(stored) else set()
    for old, new in renames.items():
        if old in logged and (new in logged or new in kept):
            raise RenameClash(
                f"run {ref.label or ref.run_id}: it logs {new!r} itself, and --rename {old}={new} would mix its "
                f"{old!r} values into those; nothing was pulled: rename {old!r} to a key the run does not log, "
                f"or fit it as it is with --fit-metric {old}"
            )


def _remembered(overrides: CoordinateOverrides, run_id: str, name: str, prev: dict[str, Any] | None) -> CoordinateOverrides:
    """The user's coordinates for the run: those of earlier pulls (kept in `prev`'s config), then this pull's."""
    earlier = _config(prev).get(GIVEN_KEY) if prev else None
    if not earlier:
        return overrides
    return CoordinateOverrides(per_run={run_id: {**earlier, **overrides.for_run(run_id, name)}},
                               config_keys=overrides.config_keys)


def _same_source(stored: str, origin: str) -> bool:
    """Whether a run stored from `stored` comes from `origin` (a run's own source, `RunRef.source`).

    Runs pulled before local and offline runs were identified by their own folders are stored under
    the path that pull was given: a folder of runs above this run's folder, or for offline files also
    one of the run's own folders or files. Those are this run too; another run folder is not.
    """
    if stored == origin:
        return True
    kind, _, path = origin.partition(":")
    stored_kind, _, stored_path = stored.partition(":")
    if kind != stored_kind or kind not in ("local", "offline"):
        return False
    here, there = Path(path), Path(stored_path)
    if moved_here(stored, origin):
        return True
    if kind == "local":
        return here.is_relative_to(there) and not (there / runfiles.METRICS_FILE).is_file()
    return here.is_relative_to(there) or there.is_relative_to(here)


def moved_here(stored: str, origin: str) -> bool:
    """Whether a local or offline run stored from `stored` is the one now at `origin`, its folder moved: the stored
    folder is gone and the new one has its name (a project copied to another machine, or renamed). A copy beside a
    folder still there is another run, for the user to settle (--replace)."""
    if not _same_folder_name(stored, origin):
        return False
    return not Path(stored.partition(":")[2]).exists() and Path(origin.partition(":")[2]).exists()


def _same_folder_name(stored: str, origin: str) -> bool:
    """Whether two local or offline sources, not the same, are folders (or files) of the same name."""
    kind, _, path = origin.partition(":")
    stored_kind, _, stored_path = stored.partition(":")
    return (kind == stored_kind and kind in ("local", "offline") and stored != origin
            and Path(path).name == Path(stored_path).name)


def _name(ref: RunRef, got: SourceRun | None, config: dict[str, Any], prev: dict[str, Any] | None) -> str:
    return str((got.name if got else None) or ref.name or config.get("name") or (prev or {}).get("name") or ref.run_id)


def _coordinates_moved(ref: RunRef, prev: dict[str, Any], overrides: CoordinateOverrides) -> str:
    """The stored values the user now gives other values for ("" when none), e.g.
    ``stop_after_steps=100 (this pull gives 40)``."""
    given = overrides.for_run(ref.run_id, prev["name"])
    if not given:
        return ""
    config = {**_config(prev), **(ref.config or {})}
    coords, labels = resolve_coordinates(ref.label, ref.run_id, prev["name"], config, _coords(prev), overrides)
    now = {**coords.values(), **labels, "name": given.get("name", prev["name"])}
    before = {**_coords(prev), **{k: prev[k] for k in ("name", "group", "role")}}
    moved = [k for k in before if now.get(k, before[k]) != before[k]]
    return ", ".join(f"{k}={_shown(before[k])} (this pull gives {_shown(now[k])})" for k in moved)


def _shown(value: Any) -> str:
    """A stored value as a message gives it: an empty label or a missing count is "none", not nothing at all."""
    return "none" if value is None or value == "" or (isinstance(value, float) and np.isnan(value)) else str(value)


def _moved(before: dict[str, Any], now: dict[str, Any]) -> str:
    """``field old → new`` for each coordinate that differs ("" when none)."""
    return ", ".join(f"{k} {before[k]} → {now[k]}" for k in before if now.get(k) != before[k])


def _own(prev: dict[str, Any] | None, origin: str) -> dict[str, Any] | None:
    """The stored run `prev` where it was read from `origin`; None where it came from elsewhere (a run that replaces
    it keeps nothing of it)."""
    return prev if prev is not None and _same_source(prev["source"], origin) else None


def _config(prev: dict[str, Any] | None) -> dict[str, Any]:
    return json.loads(prev["config_json"]) if prev and prev.get("config_json") else {}


def _coords(prev: dict[str, Any] | None) -> dict[str, Any]:
    if not prev:
        return {}
    return {f: (None if pd.isna(prev[f]) else prev[f]) for f in FIELDS}
