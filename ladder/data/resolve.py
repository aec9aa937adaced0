"""The one place that settles what real runs log, before anything is stored or fitted.

Rows arrive in the shared raw format (`ladder.data.sources.table`), in log order, after the run's stored
history (in step order). Resolving them:

1. **Renames** map logged keys onto the keys fits read (``eval/paloma/macro_loss`` → ``eval/loss``);
   where a run logs both at one step, the renamed value wins, counted.
2. **Rewinds**: a value logged at step s after values at higher steps means the run restarted from a
   checkpoint at s; every value logged earlier at a step above s belongs to the abandoned branch and
   is dropped, even when the restarted run has not reached that step again.
3. **Repeats**: a metric logged again at the same step keeps its last value; repeats with a different
   value are counted (identical ones, such as a re-read of the last step, are not).
4. **Tokens and fraction**: tokens come from the source when it logs them, else step × tokens per
   step; the fraction is step / the planned steps the run started with (DESIGN.md; an edited plan's
   fraction is `Coordinates.fraction_edited`, shown beside it).
5. **NaN and ±inf** are kept in the store, counted per metric, and left out of what fits read
   (`Store.history` drops them unless asked).

The result is one value per (metric, step), sorted by metric and step, and a `ResolveReport` whose
messages the user reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ladder import metrics as keys
from ladder.data.sources.coords import Coordinates
from ladder.data.sources.table import concat_rows, empty_rows
from ladder.errors import LadderError
from ladder.metrics import DEFAULT_FIT_METRIC

HISTORY_COLUMNS = ("step", "tokens", "fraction", "metric", "value")


@dataclass(frozen=True)
class MetricSettings:
    """Which metric is fitted, and how logged keys map onto stored ones."""

    fit_metric: str = DEFAULT_FIT_METRIC
    """The key fits read (nats per token), e.g. eval/loss."""
    renames: dict[str, str] = field(default_factory=dict)
    """Logged key -> stored key, applied when rows are pulled, e.g. {eval/paloma/macro_loss: eval/loss}."""

    def __post_init__(self) -> None:
        if not self.fit_metric:
            raise LadderError("the fit metric must not be empty (default: eval/loss)")
        for old, new in self.renames.items():
            if not old or not new or old == new:
                raise LadderError(f"rename {old!r} -> {new!r}: need two different, non-empty keys")
            if new in self.renames:
                raise LadderError(f"rename {old!r} -> {new!r}: {new!r} is itself renamed; renames do not chain")

    @classmethod
    def parse_renames(cls, items: list[str]) -> dict[str, str]:
        """``OLD=NEW`` strings (from ``--rename``) as a mapping."""
        out = {}
        for item in items:
            old, sep, new = item.partition("=")
            if not sep:
                raise LadderError(f"--rename {item!r}: expected OLD=NEW, e.g. eval/paloma/macro_loss=eval/loss")
            out[old.strip()] = new.strip()
        return out


@dataclass(frozen=True)
class ResolveReport:
    """What resolving found. Event counts add up over pulls; the rest describe the stored history."""

    rows_read: int = 0
    relogged: int = 0
    """Values logged again at a (metric, step) already logged, with a different value; the later kept."""
    first_relogged: tuple = ()
    """(metric, step, the value logged first, the value kept) of the first value logged again with another value."""
    rewinds: tuple[tuple[int, int], ...] = ()
    """(highest step before, step it went back to) for each restart."""
    dropped_by_rewind: int = 0
    renamed: tuple[tuple[str, str, int], ...] = ()
    """(logged key, stored key, values renamed)."""
    rename_conflicts: int = 0
    nonfinite: tuple[tuple[str, int, int], ...] = ()
    """(metric, NaN/inf values, first step with one)."""
    not_positive: tuple[tuple[str, int, int], ...] = ()
    """(metric, values of 0 or below, first step with one) of the fit metric and the losses: no loss."""
    above_nats: tuple[tuple[str, int, int], ...] = ()
    """(metric, values above `MOST_NATS`, first step with one) of the fit metric and the losses: a perplexity?"""
    past_plan: int = 0
    """Values at steps past the plan in force at them."""
    step_like: str = ""
    """Where values lie past the plan: a logged key named like a step whose values rise with the steps and stay
    within the plan (the optimizer step, logged beside another step key)."""
    missing_fit_metric: str = ""
    """The fit metric, when the run has no finite value of it."""
    tokens_off: tuple[int, int, int] = ()
    """(step, tokens logged there, step × tokens per step) at the last step with logged tokens, where the two
    differ by more than `TOKENS_TOL`."""

    def plus(self, earlier: ResolveReport | None) -> ResolveReport:
        """This pull's report with the events of earlier pulls added."""
        if earlier is None:
            return self
        renamed: dict[tuple[str, str], int] = {}
        for old, new, n in (*earlier.renamed, *self.renamed):
            renamed[(old, new)] = renamed.get((old, new), 0) + n
        return dataclasses.replace(
            self,
            rows_read=earlier.rows_read + self.rows_read,
            relogged=earlier.relogged + self.relogged,
            first_relogged=tuple(earlier.first_relogged) or self.first_relogged,
            rewinds=earlier.rewinds + self.rewinds,
            dropped_by_rewind=earlier.dropped_by_rewind + self.dropped_by_rewind,
            renamed=tuple((o, n, c) for (o, n), c in renamed.items()),
            rename_conflicts=earlier.rename_conflicts + self.rename_conflicts,
        )

    def messages(self, earlier: ResolveReport | None = None, renames: bool = True) -> list[str]:
        """Sentences for the user: this pull's events (the keys renamed too, with `renames`), and facts that changed
        since `earlier`."""
        out = []
        if self.relogged:
            first = ""
            if len(self.first_relogged) == 4:
                metric, step, was, kept = self.first_relogged
                first = f" (the first: {metric} at step {step:,}, {was:.6g} then {kept:.6g})"
            out.append(f"{_n(self.relogged, 'value')} logged again at steps already logged with another value (a "
                       f"resumed run); the later value kept{first}")
        for high, low in self.rewinds:
            out.append(f"steps went back from {high} to {low} (a restart from a checkpoint)")
        if self.dropped_by_rewind:
            out.append(f"{_n(self.dropped_by_rewind, 'value')} logged before the restart, past the step it restarted "
                       "from, dropped: the run logged those steps again from its checkpoint")
        for old, new, n in self.renamed if renames else ():
            out.append(f"{old} stored as {new} ({_n(n, 'value')})")
        if self.rename_conflicts:
            out.append(f"{_n(self.rename_conflicts, 'step')} logged both a renamed key and its target; the renamed value kept")
        before = dict((m, c) for m, c, _ in earlier.nonfinite) if earlier else {}
        for metric, count, first in self.nonfinite:
            if before.get(metric) != count:
                out.append(f"{metric}: {_n(count, 'NaN/inf value')} (first at step {first}), kept out of fits")
        before = dict((m, c) for m, c, _ in earlier.not_positive) if earlier else {}
        for metric, count, first in self.not_positive:
            if before.get(metric) != count:
                out.append(f"{metric}: {_n(count, 'value')} of 0 or below (first at step {first}): no loss, kept out "
                           "of fits (a metric logged as log-probability or reward? store the loss)")
        before = dict((m, c) for m, c, _ in earlier.above_nats) if earlier else {}
        for metric, count, first in self.above_nats:
            if before.get(metric) != count:
                out.append(f"{metric}: {_n(count, 'value')} above {MOST_NATS:g} (first at step {first}), more than the "
                           "cross-entropy in nats of a uniform guess over 400 million tokens: a loss logged as "
                           "perplexity? The fits read the loss in nats (ln of the perplexity); a run that diverged "
                           "logs such values too")
        if self.past_plan and (earlier is None or earlier.past_plan != self.past_plan):
            also = (f", or whether the optimizer step is the logged '{self.step_like}', whose values stay within the "
                    "plan (read the step from it: --step-key for wandb runs, --step for tables)") if self.step_like else ""
            out.append(f"{_n(self.past_plan, 'value')} past the planned steps: check stop_after_steps{also}")
        if self.tokens_off and (earlier is None or earlier.tokens_off != self.tokens_off):
            step, logged, computed = self.tokens_off
            out.append(f"at step {step:,} the logged tokens ({logged:,}) are {logged / computed:.3g}× step × tokens per "
                       f"step ({computed:,}): check the tokens column or key and tokens_per_step (the same units, "
                       "counts); fits by tokens (`ladder fit`) and predictions by steps (`ladder predict`) read them")
        if self.missing_fit_metric and (earlier is None or not earlier.missing_fit_metric):
            out.append(
                f"no finite {self.missing_fit_metric} (the fitted metric) logged so far; "
                f"if the run logs it under another key, pull with --rename KEY={self.missing_fit_metric} (an "
                f"import names its column with --metric {self.missing_fit_metric}=COLUMN)"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResolveReport:
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        for key in ("rewinds", "renamed", "nonfinite", "not_positive", "above_nats"):
            data[key] = tuple(tuple(x) for x in data.get(key, ()))
        data["tokens_off"] = tuple(data.get("tokens_off", ()))
        data["first_relogged"] = tuple(data.get("first_relogged", ()))
        return cls(**data)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def resolve(
    rows: pd.DataFrame,
    coords: Coordinates,
    settings: MetricSettings,
    stored: pd.DataFrame | None = None,
    evals_by: float = 0.0,
) -> tuple[pd.DataFrame, ResolveReport]:
    """Stored history (columns `HISTORY_COLUMNS`) plus new raw rows → resolved history and report; `evals_by`: the
    share of its plan by which the run's config says it evaluates first (0: not said, `EVALS_BY` is taken)."""
    renamed, conflicts, names = _rename(rows, settings.renames)
    raw = concat_rows([_as_raw(stored), renamed]) if stored is not None and len(stored) else renamed
    if not len(raw):
        out = _history_frame(empty_rows(), coords)
        return out, ResolveReport(missing_fit_metric=settings.fit_metric)
    step = raw["step"].to_numpy()
    later_min = np.append(np.minimum.accumulate(step[::-1])[::-1][1:], np.iinfo(np.int64).max)
    dropped = later_min < step
    earlier_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], step[:-1]]))
    back = (step < earlier_max) & (step < np.concatenate([[step[0]], step[:-1]]))
    rewinds = tuple((int(h), int(low)) for h, low in zip(earlier_max[back], step[back]))
    kept = raw[~dropped]
    last, relogged, first_relogged = _last_per_key(kept)
    history = _history_frame(last, coords)
    past = coords.past_plan(history["step"].to_numpy())
    report = ResolveReport(
        rows_read=len(rows),
        relogged=relogged,
        first_relogged=first_relogged,
        rewinds=rewinds,
        dropped_by_rewind=int(dropped.sum()),
        renamed=names,
        rename_conflicts=conflicts,
        nonfinite=_nonfinite(history),
        not_positive=_not_positive(history, settings.fit_metric),
        above_nats=_above_nats(history, settings.fit_metric),
        past_plan=int(past.sum()),
        step_like=_step_like(history, coords) if past.any() else "",
        missing_fit_metric=_missing(history, settings.fit_metric, coords, max(EVALS_BY, evals_by)),
        tokens_off=_tokens_off(kept, coords),
    )
    return history, report


def _step_like(history: pd.DataFrame, coords: Coordinates) -> str:
    """The first logged key named like a step ("step" in it) whose values rise with the stored steps and stay within
    the planned steps; "" when none does."""
    names = history["metric"].astype(str)
    for name in sorted({m for m in names.unique() if "step" in m.lower()}):
        values = history.loc[names == name].sort_values("step")["value"].to_numpy(np.float64)
        values = values[np.isfinite(values)]
        if len(values) >= 2 and values[-1] > values[0] and np.all(np.diff(values) >= 0) \
                and values[-1] <= coords.stop_after_steps:
            return name
    return ""


TOKENS_TOL = 0.05
"""How far logged tokens may stray from step × tokens per step (a batch ramp, a last partial step) unremarked."""


def _tokens_off(rows: pd.DataFrame, coords: Coordinates) -> tuple[int, int, int]:
    """(step, logged tokens, step × tokens per step) at the last step with logged tokens, where they disagree."""
    logged = rows[np.isfinite(rows["tokens"].to_numpy(np.float64)) & (rows["step"].to_numpy() > 0)]
    if not len(logged):
        return ()
    last = logged.loc[logged["step"].idxmax()]
    step, tokens = int(last["step"]), float(last["tokens"])
    computed = step * coords.tokens_per_step
    if abs(tokens / computed - 1) <= TOKENS_TOL:
        return ()
    return step, int(round(tokens)), int(computed)


def _rename(rows: pd.DataFrame, renames: dict[str, str]) -> tuple[pd.DataFrame, int, tuple]:
    if not renames or not len(rows):
        return rows, 0, ()
    metric = rows["metric"].astype(str)
    hit = metric.isin(list(renames))
    if not hit.any():
        return rows, 0, ()
    names = tuple((old, new, int((metric == old).sum())) for old, new in renames.items() if (metric == old).any())
    targets = set(renames.values())
    new_metric = metric.where(~hit, metric.map(renames))
    # A target logged natively at a step where a renamed key also sits: the renamed value wins.
    native = new_metric.isin(targets) & ~hit
    conflicts = 0
    if native.any():
        renamed_keys = set(zip(new_metric[hit], rows["step"][hit]))
        clash = native & pd.Series(
            [(m, s) in renamed_keys for m, s in zip(new_metric, rows["step"])], index=rows.index
        )
        conflicts = int(clash.sum())
        rows, new_metric = rows[~clash], new_metric[~clash]
    out = rows.assign(metric=pd.Categorical(new_metric))
    return out, conflicts, names


def _as_raw(history: pd.DataFrame) -> pd.DataFrame:
    """Stored rows in step order, as raw rows that come before anything new."""
    h = history.sort_values(["step"], kind="stable")
    return pd.DataFrame(
        {
            "seq": np.arange(len(h), dtype=np.int64),
            "step": h["step"].to_numpy(np.int64),
            "metric": pd.Categorical(h["metric"].astype(str)),
            "value": h["value"].to_numpy(np.float64),
            "tokens": h["tokens"].to_numpy(np.float64),
        }
    )


def _last_per_key(rows: pd.DataFrame) -> tuple[pd.DataFrame, int, tuple]:
    """The last row of each (metric, step), how many earlier rows there held another value, and the first of them
    (metric, step, its value, the value kept; () where none)."""
    codes = rows["metric"].cat.codes.to_numpy()
    step = rows["step"].to_numpy()
    order = np.lexsort((rows["seq"].to_numpy(), step, codes))
    c, s = codes[order], step[order]
    is_last = np.ones(len(order), dtype=bool)
    is_last[:-1] = (c[1:] != c[:-1]) | (s[1:] != s[:-1])
    value = rows["value"].to_numpy()[order]
    group = np.cumsum(np.concatenate([[True], is_last[:-1]])) - 1
    final = value[np.flatnonzero(is_last)][group]
    same = (value == final) | (np.isnan(value) & np.isnan(final))
    again = np.flatnonzero(~is_last & ~same)
    relogged = int(again.size)
    first = ()
    if again.size:
        i = int(again[np.argmin(s[again])])  # the earliest step with a value logged again
        first = (str(rows["metric"].cat.categories[c[i]]), int(s[i]), float(value[i]), float(final[i]))
    last = rows.iloc[order[is_last]]
    known = ~np.isnan(last["tokens"].to_numpy())
    if known.any() and not known.all():
        # Tokens logged with any value at a step hold for every value at that step.
        tok = last.loc[known, ["step", "tokens"]].drop_duplicates("step", keep="last").set_index("step")["tokens"]
        last = last.assign(tokens=last["step"].map(tok).to_numpy())
    return last, relogged, first


def _history_frame(rows: pd.DataFrame, coords: Coordinates) -> pd.DataFrame:
    step = rows["step"].to_numpy(np.int64)
    tokens = rows["tokens"].to_numpy(np.float64)
    if len(step) and float(step.max()) * coords.tokens_per_step >= 2.0**63:
        raise LadderError(
            f"step {int(step.max()):,} × {coords.tokens_per_step:,} tokens per step is more tokens than the store "
            "holds (2^63-1): check the step column or key and tokens_per_step"
        )
    if np.isfinite(tokens).any() and (np.nanmax(tokens) >= 2.0**63 or np.nanmin(tokens) < 0):
        raise LadderError("a logged token count is out of range (0 to 2^63-1): check the tokens column or key")
    computed = step * np.int64(coords.tokens_per_step)
    tokens = np.where(np.isnan(tokens), computed, np.round(tokens)).astype(np.int64)
    out = pd.DataFrame(
        {
            "step": step,
            "tokens": tokens,
            "fraction": coords.fraction(step) if len(step) else np.zeros(0),
            "metric": pd.Categorical(rows["metric"].astype(str)),
            "value": rows["value"].to_numpy(np.float64),
        }
    )
    return out.sort_values(["metric", "step"], kind="stable").reset_index(drop=True)


def _nonfinite(history: pd.DataFrame) -> tuple[tuple[str, int, int], ...]:
    return _counted(history, ~np.isfinite(history["value"].to_numpy()))


MOST_NATS = 20.0
"""A loss above this many nats per token is none a language model logs short of diverging: ln(4e8) is 19.8, the
loss of a uniform guess over 400 million tokens (a perplexity of 20 is 3.0 nats)."""


def _losses(history: pd.DataFrame, fit_metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Which rows are of the fit metric or a loss, and every row's value."""
    losses = history["metric"].astype(str).isin([fit_metric, keys.EVAL_LOSS, keys.TRAIN_LOSS]).to_numpy()
    return losses, history["value"].to_numpy()


def _not_positive(history: pd.DataFrame, fit_metric: str) -> tuple[tuple[str, int, int], ...]:
    losses, values = _losses(history, fit_metric)
    return _counted(history, losses & np.isfinite(values) & (values <= 0))  # -inf is told with the NaN/inf values


def _above_nats(history: pd.DataFrame, fit_metric: str) -> tuple[tuple[str, int, int], ...]:
    losses, values = _losses(history, fit_metric)
    return _counted(history, losses & np.isfinite(values) & (values > MOST_NATS))


def _counted(history: pd.DataFrame, bad: np.ndarray) -> tuple[tuple[str, int, int], ...]:
    """(metric, how many, first step) of the rows `bad` marks, by metric."""
    if not bad.any():
        return ()
    sub = history[bad].groupby("metric", observed=True)["step"].agg(["size", "min"])
    return tuple((str(m), int(r["size"]), int(r["min"])) for m, r in sub.iterrows())


EVALS_BY = 0.10
"""A run's first eval comes by this share of its plan: a run without one past it is told of the metric it lacks."""


def _missing(history: pd.DataFrame, metric: str, coords: Coordinates, by: float = EVALS_BY) -> str:
    """`metric` where the run (with rows) has no finite value of it past the share `by` of its plan (until then, its
    first eval may not be due yet), else ""."""
    values = history["value"].to_numpy()[(history["metric"] == metric).to_numpy()]
    if np.isfinite(values).any():
        return ""
    last = int(history["step"].max()) if len(history) else 0
    planned = float(coords.planned_steps_at(np.array([last]))[0])
    return metric if last > by * planned or last >= planned else ""  # a run that evaluates at its end alone, ended


def first_eval_share(config: dict) -> float:
    """The share of its plan by which a run evaluates first, as its config says it (the trainer's
    ``eval.every_fraction``); 0 where it does not say."""
    every = config.get("eval", {}).get("every_fraction") if isinstance(config.get("eval"), dict) else None
    return float(every) if isinstance(every, (int, float)) and not isinstance(every, bool) and 0 < every <= 1 else 0.0
