"""Rich tables and lines a person reads: a prediction at 5% steps, its forms, assumptions and warnings."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ladder.output.report import backtest_rows, final_sentence, prediction_rows
from ladder.predict.prediction import Prediction


def show_prediction(console: Console, pred: Prediction, actual: pd.Series | None = None) -> None:
    t = Table(title=f"{pred.run_name}: predicted {pred.metric} (nats/token)")
    rows = prediction_rows(pred, actual)
    for col in rows.columns:
        t.add_column(col, justify="right")
    for rec in rows.itertuples(index=False):
        t.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in rec])
    console.print(t)
    show_backtest(console, pred)
    console.print(final_sentence(pred, ("[bold]", "[/]"), escape), markup=True, highlight=False)
    for f in pred.forms:
        console.print(f"[bold]{escape(f.name)}[/]: {escape(f.why)}", markup=True)
    for k, v in pred.assumptions.items():
        console.print(f"  {k}: {v}", highlight=False)
    for w in pred.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, markup=True)


def show_backtest(console: Console, pred: Prediction) -> None:
    """Why this law: the backtest on the ladder, one row per candidate."""
    if pred.method:
        console.print(f"[bold]why this law[/]: {escape(pred.method)}: {escape(pred.why)}", highlight=False, markup=True)
    rows = backtest_rows(pred)
    if not len(rows):
        return
    t = Table(title="backtest: each law predicting the ladder's largest size from the smaller ones")
    for col in rows.columns:
        t.add_column(col, justify="left" if col in ("method", "held out", "note") else "right")
    for rec in rows.itertuples(index=False):
        t.add_row(*[str(v) for v in rec])
    console.print(t)
