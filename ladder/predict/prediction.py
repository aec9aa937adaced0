"""`Prediction`: the predicted loss of one target run at each of its planned eval steps.

A prediction is a table (one row per planned eval step or checkpoint: step, tokens, fraction,
compute, median and the 50% / 90% band, the LR it assumes the run logs there) plus what it rests
on: the forms used and why, their parameters, and the assumptions it holds under. Rows past a
change the rungs did not make are flagged ``in_assumptions = False`` rather than silently
predicted as if nothing changed.

Written as ``prediction.parquet`` + ``prediction.csv`` (the table) and ``prediction.json`` (the
table too, plus everything else), atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.config.limits import positive_or_none
from ladder.config.schedule import ScheduleEdit
from ladder.errors import LadderError
from ladder.files import atomic_path

PREDICTION_FILES = ("prediction.parquet", "prediction.csv", "prediction.json")
"""What `Prediction.save` writes; ``prediction.json`` holds everything, the others the table."""
WATCH_FILES = ("watch-state.json", "alerts.jsonl")
"""What `ladder watch` keeps beside the prediction it follows: its state and its alerts."""
WATCH_ASIDE = "earlier-watch"
"""The prefix of the folder `retire_watch` moves a watch of a replaced prediction into (``earlier-watch-<UTC time>``)."""
CONFIG_WRITTEN = "config_written"
"""The key, in the schedule of a prediction saved beside the edited config a `ladder replan --out` wrote, of that
config's file name: what a later replan into the same folder may replace."""

COLUMNS = ["step", "tokens", "fraction", "fraction_edited", "compute", "median", "lo50", "hi50", "lo90", "hi90", "in_assumptions"]
LR, LR_LO, LR_HI = "lr", "lr_lo", "lr_hi"
"""The optional columns of the LR the prediction assumes the run logs at each step, and its least and largest since
the row before (a schedule that rises again between two rows, a rewarm, stays within them); blank where it knows none,
and none in a prediction of an earlier version. The watch compares the run's logged LR with them."""


@dataclass(frozen=True)
class FormUsed:
    """One fitted form that contributed to the prediction."""

    name: str
    why: str
    parameters: dict[str, float] = field(default_factory=dict)
    weight: float = 1.0
    """Share of this form in the combined median (1 when it is the only one)."""


def percent(f: float) -> str:
    """A fraction of the run as a percentage, to a tenth where it is no whole one (an eval at 9.92% is not "10%",
    where the scores' "from 10%" would take it in; two evals 1% apart are not both "62%")."""
    return f"{f:.0%}" if abs(100 * f - round(100 * f)) < 0.05 else f"{f:.1%}"


@dataclass(frozen=True)
class Prediction:
    run_name: str
    """The target run, as named by its config."""
    metric: str
    table: pd.DataFrame
    """Columns `COLUMNS`; sorted by step."""
    forms: tuple[FormUsed, ...] = ()
    assumptions: dict[str, str] = field(default_factory=dict)
    """What the prediction holds under: schedule, sequence length, data mix, valid range."""
    schedule: dict[str, Any] = field(default_factory=dict)
    """The target's schedule as data (to notice a later edit)."""
    planned_steps: int = 0
    warnings: tuple[str, ...] = ()
    method: str = ""
    """The law that predicts ("per-fraction", "multipower", "momentum", "ensemble", ...)."""
    why: str = ""
    """Why that law: its backtest score, or that the settings named it."""
    backtest: tuple[dict, ...] = ()
    """Each candidate predicting the ladder's held-out largest size from the smaller ones (`fits.predictor.Score`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings the prediction was made with (`ladder.predict.adapter.PredictSettings`): re-predictions reuse them."""
    rungs: tuple[str, ...] = ()
    """The names of the rungs it was made from (a prediction of an earlier version: none)."""
    target_params: float | None = None
    """The target's active parameters N, where known (the ladder figure's 6·N·D axis before the target is pulled)."""
    rung_data: dict[str, Any] = field(default_factory=dict)
    """The rungs' group and a digest of each one's stored data it was made from (`ladder.predict.stale`: a prediction
    whose rungs changed in the store since is said to be stale); none in a prediction of an earlier version."""

    def __post_init__(self) -> None:
        if "fraction_edited" not in self.table.columns and "fraction" in self.table.columns:
            object.__setattr__(self, "table", self.table.assign(fraction_edited=self.table["fraction"]))
        missing = [c for c in COLUMNS if c not in self.table.columns]
        if missing:
            raise LadderError(f"prediction table lacks columns {missing}")

    @property
    def started_with(self) -> float:
        """The target's planned steps when it started (before any edit): step ÷ fraction of the table."""
        t = self.table[self.table["fraction"] > 0]
        if t.empty:
            return float(self.planned_steps)
        return float(t["step"].iloc[-1]) / float(t["fraction"].iloc[-1])

    def schedule_edits(self, replaced: bool = False) -> list[ScheduleEdit]:
        """The target's schedule edits, and with `replaced` those a `ladder replan` replaced (recorded beside them);
        an entry this version does not read is left out."""
        out = []
        for e in [*(self.schedule.get("edits") or []), *((self.schedule.get("replaced") or []) if replaced else [])]:
            try:
                out.append(ScheduleEdit(**e))
            except TypeError:
                continue
        return out

    @property
    def band_too_narrow(self) -> bool:
        """Whether the prediction warned that its band is likely too narrow (`fits.predictor.own_band_missed`)."""
        from fits.predictor import TOO_NARROW

        return any(TOO_NARROW in w for w in self.warnings)

    def new_warnings(self, old: Prediction) -> list[str]:
        """This prediction's warnings that `old` (the one it replaces) lacks: what a new schedule brings."""
        return [w for w in self.warnings if w not in old.warnings]

    def same_until(self, old: Prediction) -> int:
        """The last step through which this prediction's table is `old`'s (every row up to it of the same step and
        the same fraction, median, bands, `in_assumptions` and LR); 0 where their first rows differ. What a watch
        judged there against `old` stands against this one: a `ladder replan` leaves the rows before its edit as
        they were, and a judged point reads no row past its own step."""
        a, b = self.table, old.table
        n = min(len(a), len(b))
        cols = ["step", *(c for c in ("fraction", "median", "lo50", "hi50", "lo90", "hi90", "in_assumptions", LR, LR_LO,
                                     LR_HI) if c in a.columns and c in b.columns)]
        same = np.ones(n, bool)
        for c in cols:  # a table loaded unchecked may hold anything: what is no number is no match, a blank a blank
            x, y = a[c].iloc[:n], b[c].iloc[:n]
            same &= ((pd.to_numeric(x, errors="coerce").to_numpy(float) == pd.to_numeric(y, errors="coerce").to_numpy(float))
                     | (x.isna().to_numpy() & y.isna().to_numpy()))
        k = n if same.all() else int(np.argmin(same))
        return int(a["step"].iloc[k - 1]) if k else 0

    def fraction_label(self, step: int, planned_now: float | None = None) -> str:
        """"40%", or "40% of the plan, 50% of the edited plan" where the plan in force at `step` was edited: the
        prediction's own (its table's fraction_edited), else `planned_now`."""
        f = step / max(self.started_with, 1.0)
        in_force = self._plan_at(step) or planned_now
        if in_force and abs(in_force - self.started_with) > 0.5:
            return f"{percent(f)} of the plan, {percent(step / in_force)} of the edited plan"
        return percent(f)

    def _plan_at(self, step: int) -> float | None:
        """The planned steps in force at `step` by the table (those of its last row at or before `step`; of its first
        before that), or None where the table has no fraction_edited."""
        t = self.table
        if "fraction_edited" not in t.columns or not t["fraction_edited"].notna().all():
            return None
        i = max(int(np.searchsorted(t["step"].to_numpy(), step, side="right")) - 1, 0)
        return float(t["step"].iloc[i] / t["fraction_edited"].iloc[i])

    @property
    def final(self) -> pd.Series:
        return self.table.iloc[-1]

    @property
    def last_predicted(self) -> pd.Series | None:
        """The last row the laws predict: the final, or where the prediction ends short of it (rungs whose evals
        end before their plans do); None where no row is predicted."""
        rows = self.table[np.isfinite(self.table["median"].to_numpy(dtype=float))]
        return rows.iloc[-1] if len(rows) else None

    def at(self, steps: np.ndarray | list[int]) -> pd.DataFrame:
        """Median and bands interpolated at arbitrary steps (log-linear in step between rows)."""
        s = np.asarray(steps, dtype=float)
        t = self.table
        x = np.log(t["step"].to_numpy(dtype=float))
        xs = np.log(np.maximum(s, 1.0))
        out = {"step": s}
        for col in ("median", "lo50", "hi50", "lo90", "hi90"):
            out[col] = np.interp(xs, x, t[col].to_numpy(dtype=float), left=np.nan, right=np.nan)
        flags = t["in_assumptions"].to_numpy(dtype=bool)
        idx = np.clip(np.searchsorted(t["step"].to_numpy(), s, side="left"), 0, len(t) - 1)
        out["in_assumptions"] = flags[idx] & np.isfinite(out["median"])  # no step without a prediction is in them
        return pd.DataFrame(out)

    # ---- files ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "run_name": self.run_name,
            "metric": self.metric,
            "planned_steps": self.planned_steps,
            "forms": [f.__dict__ for f in self.forms],
            "assumptions": self.assumptions,
            "schedule": self.schedule,
            "warnings": list(self.warnings),
            "method": self.method,
            "why": self.why,
            "backtest": list(self.backtest),
            "settings": self.settings,
            "rungs": list(self.rungs),
            "target_params": self.target_params,
            "rung_data": self.rung_data,
            "final": _row(self.final),
            "last_predicted": None if (last := self.last_predicted) is None else _row(last),
            "table": [{k: _plain(v) for k, v in row.items()} for row in self.table.to_dict("records")],
        }

    def json_text(self) -> str:
        """``prediction.json`` as `save` writes it (and `retire_watch` compares it)."""
        return json.dumps(self.to_json(), indent=2)

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        parquet, csv, js = (out / name for name in PREDICTION_FILES)
        kept = self.as_saved_in(out)
        with contextlib.ExitStack() as files:  # all three written aside, then renamed in at once: never a mix
            tmp_parquet, tmp_csv, tmp_js = (files.enter_context(atomic_path(p)) for p in (parquet, csv, js))
            kept.table.to_parquet(tmp_parquet, index=False)
            kept.table.to_csv(tmp_csv, index=False)
            tmp_js.write_text(kept.json_text())
        return [parquet, csv, js]

    def as_saved_in(self, out_dir: str | os.PathLike) -> Prediction:
        """This prediction as `save` writes it into `out_dir`: where the prediction it replaces there records the
        config a replan wrote beside it (`CONFIG_WRITTEN`) and that file is still there, the record stays (a watch's
        new prediction, or a `ladder predict`, does not make the replan's config a user's own)."""
        if CONFIG_WRITTEN in self.schedule or not self.schedule:  # (a target of no schedule has none to keep it in)
            return self
        try:
            old = json.loads((Path(out_dir) / "prediction.json").read_text(encoding="utf-8"))
            name = old["schedule"][CONFIG_WRITTEN]
        except (OSError, ValueError, KeyError, TypeError):
            return self
        if not isinstance(name, str) or not (Path(out_dir) / name).is_file():
            return self
        return replace(self, schedule={**self.schedule, CONFIG_WRITTEN: name})

    def beside_replan_config(self, out_dir: str | os.PathLike, made_from: str | os.PathLike | None = None) -> str:
        """Where saving this prediction into `out_dir` keeps the record of the config an earlier replan wrote there
        (`as_saved_in`), and this prediction was not made from that config (`made_from`: the config it was made
        from, if any), that said: the config is not this prediction's plan; else ""."""
        name = self.as_saved_in(out_dir).schedule.get(CONFIG_WRITTEN)
        if name is None or CONFIG_WRITTEN in self.schedule:
            return ""
        if made_from is not None and Path(made_from).resolve() == (Path(out_dir) / name).resolve():
            return ""
        return (f"{Path(out_dir) / name} is the edited config an earlier `ladder replan` wrote there, not this "
                "prediction's plan (a replan into that folder replaces it)")

    @classmethod
    def load(cls, path: str | os.PathLike, checked: bool = True) -> Prediction:
        """From a prediction directory or its ``prediction.json``; a table that is no prediction's (no rows, a
        column missing, values that are no numbers, steps out of order) is a `LadderError`, or with `checked` off
        is kept as it is (the watch judges what it can without one: a NaN loss is an alarm all the same)."""
        p = Path(path)
        if p.is_dir():
            p = p / "prediction.json"
        if p.name in PREDICTION_FILES and p.name != "prediction.json":  # its table alone: give its folder
            raise LadderError(f"{path}: the prediction's table; give its folder ({p.parent}) or its prediction.json")
        if not p.is_file():
            raise LadderError(f"{path}: no prediction here (expected prediction.json from `ladder predict`)")
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("it holds no JSON object")
            if not isinstance(data.get("table"), list) or not all(isinstance(r, dict) for r in data["table"]):
                raise ValueError("its table is not a list of rows" if "table" in data else "it has no table")
            _shaped(data)
            table = pd.DataFrame(data["table"])
            table = _checked(table) if checked else table.reindex(columns=_columns(table))
            return cls(
                run_name=data["run_name"],
                metric=data["metric"],
                table=table,
                forms=tuple(FormUsed(**f) for f in data.get("forms", [])),
                assumptions=dict(data.get("assumptions", {})),
                schedule=dict(data.get("schedule", {})),
                planned_steps=int(data.get("planned_steps", 0)),
                warnings=tuple(data.get("warnings", [])),
                method=str(data.get("method", "")),
                why=str(data.get("why", "")),
                backtest=tuple(data.get("backtest", [])),
                settings=dict(data.get("settings", {})),
                rungs=tuple(str(r) for r in data.get("rungs", [])),
                target_params=positive_or_none(data.get("target_params")),
                rung_data=dict(data.get("rung_data") or {}),
            )
        except KeyError as exc:
            raise LadderError(f"{p}: not a prediction file (it has no {exc.args[0]} field)") from None
        except json.JSONDecodeError as exc:
            raise LadderError(f"{p}: not a prediction file (not JSON: {exc.msg} at line {exc.lineno})") from None
        except UnicodeDecodeError as exc:  # a ValueError, whose text is the codec's
            raise LadderError(f"{p}: not a prediction file (not text: byte {exc.start} is no UTF-8)") from None
        except (TypeError, ValueError) as exc:
            raise LadderError(f"{p}: not a prediction file ({exc})") from None


SHAPES = {"schedule": dict, "settings": dict, "assumptions": dict, "forms": list, "warnings": list, "backtest": list,
          "rungs": list, "rung_data": dict}
"""The kind of each field of ``prediction.json`` that holds more than one value (the table aside)."""


def _shaped(data: dict) -> None:
    """A `ValueError` in words where a field of a saved prediction (`data`) is not of its kind (`SHAPES`), or a form
    not a `FormUsed`'s fields."""
    for key, kind in SHAPES.items():
        if key in data and not isinstance(data[key], kind):
            raise ValueError(f"its {key} is not {'an object' if kind is dict else 'a list'}")
    known = [f.name for f in fields(FormUsed)]
    for form in data.get("forms", []):
        if not isinstance(form, dict) or not {"name", "why"} <= form.keys() <= set(known):
            raise ValueError(f"its forms hold one that is no form (a form has {', '.join(known)}; name and why "
                             "at least)")


NEEDED = ("step", "median", "lo50", "hi50", "lo90", "hi90")
"""The columns every saved prediction has (the others, added since, are blank in an older one)."""


def _checked(table: pd.DataFrame) -> pd.DataFrame:
    """A saved prediction's table with its numbers as numbers (a blank value is NaN); a `ValueError` where it
    cannot be one: a column missing, no rows, a value that is no number, steps that do not rise."""
    if table.empty:
        raise ValueError("its table has no rows")
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise ValueError(f"its table has no column {missing[0]!r}")
    table = table.reindex(columns=_columns(table))
    numbers = [c for c in table.columns if c != "in_assumptions"]
    table[numbers] = table[numbers].apply(lambda col: pd.to_numeric(col, errors="raise")).astype(np.float64)
    steps = table["step"].to_numpy()
    if not (np.isfinite(steps).all() and (steps == np.round(steps)).all() and (np.diff(steps) > 0).all()):
        raise ValueError("its steps are not whole numbers rising from row to row")
    return table.assign(step=steps.astype(np.int64))


def _columns(table: pd.DataFrame) -> list[str]:
    """A saved table's columns as a prediction has them: `COLUMNS` (fraction_edited only where saved) and the LR's
    (`LR`, `LR_LO`, `LR_HI`) where saved; any other column dropped."""
    return [c for c in COLUMNS if c in table.columns or c != "fraction_edited"] + [
        c for c in (LR, LR_LO, LR_HI) if c in table.columns]


def _row(row: pd.Series) -> dict[str, Any]:
    return {k: _plain(v) for k, v in row.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not np.isfinite(value) else float(value)
    return value


def retire_watch(out_dir: str | os.PathLike, pred: Prediction) -> Path | None:
    """Before `pred` is saved into `out_dir`: move a watch of another prediction there (its state and alerts,
    `WATCH_FILES`) into ``earlier-watch-<UTC time>/`` with a copy of that prediction (`PREDICTION_FILES`), so that
    a new watch starts afresh and judges the run against `pred` while the old alerts keep the prediction they were
    judged against. Returns that folder, or None where there was nothing to move (or the same prediction)."""
    out = Path(out_dir)
    found = [out / name for name in WATCH_FILES if (out / name).exists()]
    old = out / "prediction.json"
    if not found or (old.is_file() and old.read_text() == pred.as_saved_in(out).json_text()):
        return None
    aside = keep_prediction(out, WATCH_ASIDE)
    for f in found:
        f.replace(aside / f.name)
    return aside


def keep_prediction(out_dir: str | os.PathLike, prefix: str) -> Path:
    """A copy of the prediction in `out_dir` (`PREDICTION_FILES`) in ``<prefix>-<UTC time>/`` there, before it is
    replaced: copied, so the folder keeps a whole prediction until the new one is saved. Returns that folder."""
    import shutil
    import time

    out = Path(out_dir)
    stamp = time.strftime(f"{prefix}-%Y%m%dT%H%M%SZ", time.gmtime())
    aside = out / stamp
    n = 1
    while aside.exists():  # two kept in one second: the first stays whole
        n += 1
        aside = out / f"{stamp}-{n}"
    aside.mkdir(parents=True)
    for name in PREDICTION_FILES:
        if (out / name).is_file():
            shutil.copy2(out / name, aside / name)
    return aside

