"""One self-contained HTML page: figures (inlined), the prediction table, the assumptions, alerts.

A team can post the file after each eval; it needs nothing beside it.
"""

from __future__ import annotations

import base64
import html
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.errors import LadderError
from ladder.files import write_text_atomic
from ladder.predict.prediction import Prediction, percent
from ladder.predict.scoring import failed_steps, judged_points, logged_per_step

GENERATOR = "<meta name='generator' content='scaling-ladder report'>"
"""Marks a page `ladder report` wrote: the one kind of existing page its --out replaces."""


def is_report(head: str) -> bool:
    """Whether a page's first characters are those of a report (the generator's mark, or the style every report
    carried before the mark)."""
    return GENERATOR in head or CSS.strip()[:120] in head


CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.warning { color: #b7791f; } .alarm { color: #c0392b; font-weight: bold; } .ok { color: #2f855a; }
.out { color: #999; } figure { margin: 1em 0; } img { max-width: 100%; }
.note { background: #fff8e1; padding: 0.5em 1em; border-left: 3px solid #e6a700; }
"""


SECTIONS = {
    "dynamics": (
        "Training dynamics projected to the hero",
        "Each of grad norm, MoE drop fraction and router losses that the rungs log, a panel each (thin lines: "
        "rolling medians over 2% of each run), at the same fraction of their planned runs, projected to the "
        "hero's fit compute: at each "
        "fraction a power law in compute across the rungs, or flat (the rungs' mean and spread) where the "
        "slope is not distinguishable from 0; bands are 50% and 90% prediction intervals for a run of the "
        "hero's size. The hero's own series in red. `ladder watch` warns when the hero's grad norm or drop "
        "fraction stays above the 90% band. Last panel: train-loss spikes per 1,000 steps against compute.",
    ),
}
"""Figures shown in a section of their own (heading and caption) rather than with the others."""


def _table(df: pd.DataFrame, formats: dict[str, str] | None = None, left: Sequence[str] = (),
           marks: dict[str, dict[str, str]] | None = None) -> str:
    """`df` as an HTML table; `marks`: per column, the CSS class of a cell that reads a given text."""
    formats, marks = formats or {}, marks or {}
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(str(c))}</th>' for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for col, v in zip(df.columns, rec):
            text = format(v, formats[col]) if col in formats and isinstance(v, (int, float)) else str(v)
            kind = " ".join(x for x in ("l" if col in left else "", marks.get(col, {}).get(text, "")) if x)
            cells.append(f'<td class="{kind}">{html.escape(text)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _figure(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(path.stem)}"></figure>'


def marks_of(every: float = 0.05) -> np.ndarray:
    """Every `every` of a run, as fractions of it: 0.05, 0.1, ..., 1."""
    return np.array(sorted({int(round(k * every * 1e6)) for k in range(1, int(round(1 / every)) + 1)})) / 1e6


def nearest(fractions: np.ndarray, marks: np.ndarray) -> np.ndarray:
    """The position of the fraction nearest each of `marks` (two marks may find one)."""
    return np.array([int(np.abs(fractions - m).argmin()) for m in marks], dtype=np.int64)


def prediction_rows(pred: Prediction, actual: pd.Series | None = None, every: float = 0.05) -> pd.DataFrame:
    """The prediction at (about) every `every` of the run; with `actual`, each row at the run's eval nearest it
    (within 1% of the plan: a run evaluates on its own cadence), predicted and actual at that eval's step."""
    t = pred.table
    marks = marks_of(every)
    rows, got = t.iloc[nearest(t["fraction"].to_numpy(float), marks)].copy(), None
    if actual is not None:  # the eval nearest each mark itself, not the one nearest the predicted step nearest it
        rows, got = _at_evals(pred, rows, actual, marks * pred.started_with)
    # two marks on one step: one row, the one that found the run's eval there (a mark between evals finds none)
    missing = np.zeros(len(rows), bool) if got is None else ~np.isfinite(got)
    order = pd.DataFrame({"step": rows["step"].to_numpy(), "missing": missing, "i": np.arange(len(rows))})
    once = np.sort(order.sort_values(["step", "missing", "i"]).drop_duplicates("step")["i"].to_numpy())
    rows, got = rows.iloc[once], (got[once] if got is not None else None)
    out = pd.DataFrame({
        "step": rows["step"].astype(int),
        "fraction": [percent(f) + (f" ({percent(e)} of the edited plan)" if abs(e - f) > 1e-9 else "")
                     for f, e in zip(rows["fraction"], rows["fraction_edited"])],
        "predicted": [_num(x) for x in rows["median"]],
        "50% band": [_span(a, b) for a, b in zip(rows["lo50"], rows["hi50"])],
        "90% band": [_span(a, b) for a, b in zip(rows["lo90"], rows["hi90"])],
    })
    if got is not None:
        out["actual"] = [_num(x) for x in got]
        out["error"] = [f"{(p / a - 1):+.2%}" if np.isfinite(a) and np.isfinite(p) else "–"
                        for a, p in zip(got, rows["median"])]  # predicted / actual − 1, as everywhere
        out["actual in"] = [_where(a, *band) for a, *band in zip(got, *(rows[k] for k in ("lo50", "hi50", "lo90", "hi90")))]
    # a step the laws give no value at (before the rungs' first shared eval) is not predicted, not past a change
    out["in assumptions"] = ["–" if not np.isfinite(m) else "yes" if x else "no"
                             for x, m in zip(rows["in_assumptions"], rows["median"].to_numpy(float))]
    return out


def _at_evals(pred: Prediction, rows: pd.DataFrame, actual: pd.Series,
              targets: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """`rows` moved to the eval of `actual` nearest each one's target step (where one is within 1% of the plan)
    with the prediction at that step, and the evals' values (NaN where none is near). A metric logged far more often
    than the prediction's steps (a per-step train loss) is read as `ladder score` and the watch judge it
    (`judged_points`): the mean of its values since the prediction's step before, beside the prediction's mean
    over the same steps."""
    actual = actual.dropna().sort_index()
    if actual.empty:
        return rows, np.full(len(rows), np.nan)
    at, judged, values, means = judged_points(actual, pred)
    at = at.astype(np.int64)
    steps = rows["step"].to_numpy(dtype=np.int64)
    got = np.full(len(steps), np.nan)
    if not at.size:
        return rows, got
    j = np.abs(at[None, :] - targets[:, None]).argmin(axis=1)
    near = np.abs(at[j] - targets) <= 0.01 * pred.started_with
    got[near] = values[j[near]]
    moved = np.where(near, at[j], steps)
    there = pred.at(moved)  # a row left where it was is a row of the table: the same values
    values_there = {c: there[c].to_numpy() for c in ("median", "lo50", "hi50", "lo90", "hi90", "in_assumptions")}
    if means is not None:
        for c in ("median", "lo50", "hi50", "lo90", "hi90"):
            values_there[c] = np.where(near, judged[c].to_numpy(dtype=float)[j], values_there[c])
    scale = moved / steps
    return rows.assign(step=moved, fraction=rows["fraction"] * scale, fraction_edited=rows["fraction_edited"] * scale,
                       **values_there), got


INSIDE_50, INSIDE_90, OUTSIDE = "the 50% band", "the 90% band", "neither band"
"""Where an actual value lies, as the table says it (the narrowest band that holds it)."""


def _where(actual: float, lo50: float, hi50: float, lo90: float, hi90: float) -> str:
    if not (np.isfinite(actual) and np.isfinite(lo90) and np.isfinite(hi90)):
        return "–"
    return INSIDE_50 if lo50 <= actual <= hi50 else INSIDE_90 if lo90 <= actual <= hi90 else OUTSIDE


def _num(x) -> str:
    return f"{x:.4f}" if pd.notna(x) else "–"


def _span(a, b) -> str:
    return f"{a:.4f}–{b:.4f}" if pd.notna(a) and pd.notna(b) else "–"


def _names(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names) if len(names) <= most else f"{', '.join(names[:2])}, … ({len(names)} runs)"


def _score(pred: Prediction, actual: pd.Series) -> str:
    """The run scored against the prediction so far, as `ladder score` scores it (from 10% of the plan); "" before
    it has an eval there."""
    from ladder.predict.scoring import score_prediction

    try:
        sc = score_prediction(pred, actual)
    except LadderError:
        return ""
    head = "score so far (as `ladder score`, from 10% of the plan)"
    return _table(pd.DataFrame(sc.rows(), columns=[head, ""]), left=[head])


def backtest_rows(pred: Prediction) -> pd.DataFrame:
    """Why this law: each candidate predicting the ladder's held-out largest size from the smaller ones."""
    rows = []
    several = any(len(r["held_out"]) > 1 for r in pred.backtest)  # then the mean signed error is not the score's
    for r in pred.backtest:
        pct = lambda x: "–" if x is None else f"{x:.2%}"  # noqa: E731
        signed = "–" if r["final_error"] is None else f"{r['final_error']:+.2%}"
        rows.append({
            "method": r["method"] + (" (chosen)" if r["method"] == pred.method else ""),
            "held out": _names(r["held_out"]),
            "size ratio (FLOPs per token)": f"{r['size_ratio']:.2f}×",  # as the laws count size; not 6·N·D's compute
            **({"final error (mean)": signed, "|final error| (mean)": pct(r.get("final_abs_error"))} if several
               else {"final error": signed}),
            "mean |error|": pct(r["mean_abs_error"]),
            "in its 90% band": pct(r["coverage90"]),
            "note": r.get("failed", ""),
        })
    return pd.DataFrame(rows)


def final_sentence(pred: Prediction, bold: tuple[str, str] = ("", ""), escape=lambda x: x) -> str:
    """The predicted final with its bands; where the laws stop short of the final step (rungs whose evals end
    before their plans do), that it is not predicted, and the last step that is."""
    fin = pred.final
    head = f"Predicted final {escape(pred.metric)} at step {int(fin['step']):,}: "
    last = pred.last_predicted
    if np.isfinite(fin["median"]) and not bool(fin["in_assumptions"]):
        valid = pred.assumptions.get("valid up to", "nowhere")
        return head + _with_bands(fin, bold) + f", outside the prediction's assumptions (valid up to {valid}: see them)"
    if np.isfinite(fin["median"]) or last is None:
        return head + (_with_bands(fin, bold) if np.isfinite(fin["median"]) else "not predicted")
    return (head + f"not predicted (the rungs' evals end before their plans do); the prediction ends at step "
            f"{int(last['step']):,} ({last['fraction']:.0%} of the plan): " + _with_bands(last, bold))


def _with_bands(row: pd.Series, bold: tuple[str, str]) -> str:
    return (f"{bold[0]}{row['median']:.4f}{bold[1]} (50% {row['lo50']:.4f}–{row['hi50']:.4f}, "
            f"90% {row['lo90']:.4f}–{row['hi90']:.4f})")


def write_report(
    out: str | os.PathLike,
    pred: Prediction,
    figures: Sequence[Path],
    actual: pd.Series | None = None,
    alerts: Sequence[dict] = (),
    verdicts: Sequence[dict] = (),
    extra_tables: dict[str, pd.DataFrame] | None = None,
    title: str | None = None,
    alerts_note: str | None = None,
    score_notes: Sequence[str] = (),
    not_stored: str | None = None,
) -> Path:
    """Write the report to `out` (atomically) and return its path. `alerts_note` is said under the alert history
    (why it holds none of the run's, where the watch beside the prediction followed another run); `score_notes`
    under the score (`ladder.predict.scoring.score_warnings`); `not_stored`, where the store holds no run of
    `pred.run_name`, what `ladder.watch.monitor.not_stored` says of it."""
    title = title or f"{pred.run_name}: prediction and progress"
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. Metric: <b>{html.escape(pred.metric)}</b> "
             "(nats per token).</p>"]
    parts.append(f"<p>{final_sentence(pred, ('<b>', '</b>'), html.escape)}.</p>")
    failed = failed_steps(actual) if actual is not None else np.array([], dtype=np.int64)
    logged = actual  # NaN and inf kept: the score counts them, as `ladder score` does
    if len(failed):
        actual = actual[np.isfinite(actual.to_numpy(float))]
        last = " (its latest eval)" if not len(actual) or failed.max() > actual.index.max() else ""
        parts.append(f'<p class="alarm">The run logged {len(failed)} eval{"" if len(failed) == 1 else "s"} that '
                     f"{'is' if len(failed) == 1 else 'are'} not a finite number (NaN or inf), the last at step "
                     f"{int(failed.max()):,}{last}: it has diverged, or its evals failed. The table and the figures "
                     "leave them out; the figure of the curve marks them along its top.</p>")
    if actual is not None and len(actual):
        last_step = int(actual.index.max())
        where = pred.fraction_label(last_step, pred.planned_steps)  # of the plan it started with, as the tables
        where = where if "plan" in where else f"{where} of the plan"
        latest = "latest finite eval" if len(failed) and failed.max() > last_step else "latest eval"
        parts.append(f"<p>Actual at its {latest}: {actual.loc[last_step]:.4f} at step {last_step:,} "
                     f"({html.escape(where)}).</p>")
        parts.append(_score(pred, logged))
        parts += [f'<p class="warning">{html.escape(w)}</p>' for w in score_notes]  # as `ladder score` warns
    if verdicts:
        last = verdicts[-1]
        parts.append(f'<p>Latest verdict: <span class="{last["verdict"]}">{last["verdict"].upper()}</span> '
                     f'at step {last["step"]:,}.</p>')
    for w in pred.warnings:
        parts.append(f'<p class="note">{html.escape(w)}</p>')
    pngs = [Path(p) for p in figures if Path(p).suffix == ".png" and Path(p).exists()]
    parts.append("<h2>Figures</h2>")
    parts += [_figure(p) for p in pngs if p.stem not in SECTIONS]
    for p in pngs:
        if p.stem in SECTIONS:
            heading, caption = SECTIONS[p.stem]
            parts.append(f"<h2>{html.escape(heading)}</h2><p>{html.escape(caption)}</p>{_figure(p)}")
    parts.append("<h2>Prediction every 5% of the run</h2>")
    if not_stored is not None:
        parts.append(f"<p>The store holds no run named {html.escape(pred.run_name)}{html.escape(not_stored)}: its "
                     "actual values and errors fill these columns once it is pulled (make the report again).</p>")
    elif actual is not None and not len(actual) and not len(failed):
        parts.append(f"<p>The run has logged no {html.escape(pred.metric)} yet: its actual values and errors fill "
                     "these columns as it trains (make the report again).</p>")
    if actual is not None and len(actual) and logged_per_step(pred, actual):
        parts.append(f"<p>{html.escape(pred.metric)} is logged far more often than the prediction's steps: each row at "
                     "the prediction's step nearest the mark (within 1% of the plan), the run's mean over the steps "
                     "since the prediction's step before beside the prediction's mean over the same steps, as `ladder "
                     "score` and the watch judge it.</p>")
    elif actual is not None and len(actual):
        parts.append("<p>Each row at the run's eval nearest the mark (within 1% of the plan), with the prediction at "
                     "that eval's step; `ladder predict` prints the prediction at its own steps.</p>")
    parts.append(_table(prediction_rows(pred, actual), {"predicted": ".4f", "actual": ".4f"},
                        marks={"actual in": {OUTSIDE: "alarm", INSIDE_90: "warning"}}))
    parts.append("<h2>Why this law</h2>")
    parts.append(f"<p>{html.escape(pred.method)}: {html.escape(pred.why)}</p>")
    bt = backtest_rows(pred)
    if len(bt):
        parts.append(_table(bt, left=["method", "held out", "note"]))
    parts.append("<h2>Forms used</h2>")
    for f in pred.forms:
        params = ", ".join(f"{k} = {v:.4g}" for k, v in f.parameters.items())
        parts.append(f"<p><b>{html.escape(f.name)}</b> (weight {f.weight:.2f}): {html.escape(f.why)}<br>"
                     f"<small>{html.escape(params)}</small></p>")
    parts.append("<h2>Assumptions</h2><ul>")
    parts += [f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in pred.assumptions.items()]
    parts.append("</ul>")
    for name, df in (extra_tables or {}).items():
        parts.append(f"<h2>{html.escape(name)}</h2>" + _table(df, left=[df.columns[0]]))
    parts.append("<h2>Alert history</h2>")
    if alerts:
        df = pd.DataFrame([{k: a.get(k, "") for k in ("step", "level", "rule", "message")}  # a line edited by hand
                           for a in alerts])
        parts.append(_table(df, left=["level", "rule", "message"]))
    else:
        parts.append("<p>No alerts.</p>")
    if alerts_note:
        parts.append(f'<p class="note">{html.escape(alerts_note)}</p>')
    page = f"<!doctype html><html><head><meta charset='utf-8'>{GENERATOR}<title>{html.escape(title)}</title>" \
           f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>"
    return write_text_atomic(out, page)
