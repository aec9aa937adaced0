"""CSV / parquet tables through a column mapping, including published datasets from ../shared/data."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.data.sources import ColumnMap, CoordinateOverrides, TableSource
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.errors import LadderError


def small_table():
    rows = []
    for run, params in (("a", 1000), ("b", 2000)):
        for step in (10, 20, 30, 40):
            rows.append({"run": run, "step": step, "tok": step * 50, "loss": 3.0 + params / 1e4 + 1.0 / step,
                         "bpb": np.nan if step == 20 else 1.0 / step, "params": params, "T": 40, "lr": 1e-3})
    return pd.DataFrame(rows)


COLUMNS = ColumnMap(metrics={"eval/loss": "loss", "eval/bpb": "bpb"}, run="run", step="step", tokens="tok",
                    coords={"active_params": "params", "stop_after_steps": "T"})
UNKNOWN = {"total_params": "unknown", "fit_flops_per_token": "unknown"}


def _overrides():
    from ladder.data.sources import CoordinateOverrides

    return CoordinateOverrides(all_runs=UNKNOWN)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_table_rows_coordinates_and_config(tmp_path, suffix):
    path = tmp_path / f"t{suffix}"
    table = small_table()
    table.to_csv(path, index=False) if suffix == ".csv" else table.to_parquet(path)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    runs = store.runs().set_index("run_id")
    assert list(runs.index) == ["a", "b"]
    assert runs.loc["b", "active_params"] == 2000 and runs.loc["b", "tokens_per_step"] == 50
    assert pd.isna(runs.loc["b", "total_params"]) and pd.isna(runs.loc["b", "fit_flops_per_token"])
    assert json.loads(runs.loc["a", "config_json"])["lr"] == 1e-3  # one value per run: config
    h = store.history()
    assert len(h) == 2 * (4 + 3)  # the empty bpb cell is a value not logged
    got = {(r, m, s): v for r, m, s, v in zip(h["run_id"], h["metric"], h["step"], h["value"])}
    for r in table.itertuples():
        assert got[(r.run, "eval/loss", r.step)] == r.loss
        assert (r.run, "eval/bpb", r.step) not in got if np.isnan(r.bpb) else got[(r.run, "eval/bpb", r.step)] == r.bpb
    assert (h["tokens"] == h["step"] * 50).all() and (h["fraction"] == h["step"] / 40).all()


def _imported(tmp_path):
    """The small table written as a CSV and imported into a new store: (its path, the table, the store)."""
    path = tmp_path / "t.csv"
    table = small_table()
    table.to_csv(path, index=False)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    return path, table, store


def test_reimport_replaces_its_runs(tmp_path):
    path, table, store = _imported(tmp_path)
    table.loc[table["step"] == 40, "loss"] = 9.0
    table.to_csv(path, index=False)
    pull(store, TableSource(path, COLUMNS), overrides=_overrides(), full=True)
    h = store.history(metrics="eval/loss")
    assert len(h) == 8 and (h.loc[h["step"] == 40, "value"] == 9.0).all()


def test_a_table_imported_again_as_it_was_leaves_its_runs_unchanged(tmp_path):
    path, table, store = _imported(tmp_path)
    generation = store._manifest()["generation"]
    again = pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert again.unchanged == 2 and not again.pulled and store._manifest()["generation"] == generation
    table.loc[(table["run"] == "b") & (table["step"] == 40), "loss"] = 9.0  # one value edited: that run is read anew
    table.to_csv(path, index=False)
    edited = pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert [p.run_id for p in edited.pulled] == ["b"] and edited.unchanged == 1
    h = store.history("b", metrics="eval/loss")
    assert h.loc[h["step"] == 40, "value"].tolist() == [9.0]


def test_a_table_imported_again_with_values_changed_says_which_and_that_fits_made_before_used_the_old_ones(tmp_path):
    path, table, store = _imported(tmp_path)
    b = table["run"] == "b"
    table.loc[b & (table["step"] == 40), "loss"] = 9.0
    table.loc[b & (table["step"] == 20), "bpb"] = 0.05  # a value where there was none: new, not changed
    table.loc[b & (table["step"] == 10), ["loss", "bpb"]] = [4.5, 0.2]
    table.to_csv(path, index=False)
    edited = pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    said = [m for m in edited.messages if "changed" in m]
    assert said == ["b: 3 stored values changed (eval/bpb at step 10: 0.1 → 0.2; eval/loss at step 10: 3.3 → 4.5; "
                    "eval/loss at step 40: 3.225 → 9): a fit or prediction made from this run before used the old "
                    "ones; make it again"], edited.messages
    table.loc[b & table["step"].isin([20, 30]), "loss"] = 7.0
    table.to_csv(path, index=False)
    again = pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert [m for m in again.messages if "changed" in m] == [
        "b: 2 stored values changed (eval/loss at step 20: 3.25 → 7; eval/loss at step 30: 3.23333 → 7): a fit or "
        "prediction made from this run before used the old ones; make it again"]
    table.loc[table["run"] == "a", "loss"] += 1.0
    table.to_csv(path, index=False)
    (many,) = [m for m in pull(store, TableSource(path, COLUMNS), overrides=_overrides()).messages if "changed" in m]
    assert many.startswith("a: 4 stored values changed (eval/loss at step 10: 3.2 → 4.2; ") and "; and 1 more)" in many


def test_replace_counts_only_the_runs_it_changes(tmp_path):
    path, table, store = _imported(tmp_path)
    table.loc[(table["run"] == "a") & (table["step"] == 40), "loss"] = 9.0
    table.to_csv(path, index=False)
    edited = pull(store, TableSource(path, COLUMNS), overrides=_overrides(), replace=True)
    assert [p.run_id for p in edited.pulled] == ["a"] and edited.unchanged == 1
    assert store.history("a", metrics="eval/loss").query("step == 40")["value"].tolist() == [9.0]


def test_a_reimport_that_would_drop_stored_metrics_or_steps_is_refused_unless_replace(tmp_path):
    path, table, store = _imported(tmp_path)
    loss_only = ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step", tokens="tok", coords=COLUMNS.coords)
    with pytest.raises(LadderError) as info:
        pull(store, TableSource(path, loss_only), overrides=_overrides())
    assert "would drop 'eval/bpb' (not in this import)" in str(info.value) and "--replace" in str(info.value)
    table[table["step"] <= 30].to_csv(path, index=False)  # rows cut from the file
    with pytest.raises(LadderError) as info:
        pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert "its steps after 30 (the store has them to step 40)" in str(info.value)
    assert len(store.history(metrics="eval/bpb")) == 2 * 3 and store.history()["step"].max() == 40  # nothing lost
    table[table["step"] > 10].to_csv(path, index=False)  # the file rewritten from a later step (a resumed trainer)
    with pytest.raises(LadderError) as info:
        pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert "1 stored step that this file no longer holds (step 10)" in str(info.value)
    assert store.history()["step"].min() == 10  # nothing lost
    table[table["step"] <= 30].to_csv(path, index=False)
    pull(store, TableSource(path, loss_only), overrides=_overrides(), replace=True)
    h = store.history()
    assert set(h["metric"]) == {"eval/loss"} and h["step"].max() == 30


def test_missing_mapped_column_is_one_line(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    res = CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step",
                                   "--metric", "eval/loss=c4_loss", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "no column 'c4_loss' (mapped by --metric eval/loss)" in res.output and "run, step, tok" in res.output
    # a column named like the one mapped is given in the option's own form, which then imports
    renamed = tmp_path / "renamed.csv"
    small_table().rename(columns={"loss": "eval_loss"}).to_csv(renamed, index=False)
    args = ["import", "csv", str(renamed), "--run", "run", "--step", "step", "--coord", "active_params=1000",
            "--coord", "stop_after_steps=40", "--coord", "tokens_per_step=50", "--store", str(tmp_path / "s")]
    res = CliRunner().invoke(app, [*args, "--metric", "eval/loss=loss"])
    assert res.exit_code == 2 and "give --metric eval/loss=eval_loss" in " ".join(res.output.split())
    res = CliRunner().invoke(app, [*args, "--metric", "eval/loss=eval_los"])  # a typo of the column: not a swap
    assert res.exit_code == 2 and "did you mean 'eval_loss'? give --metric eval/loss=eval_loss" in res.output
    res = CliRunner().invoke(app, [*args, "--metric", "eval_loss=eval/loss"])  # the pair written the other way round
    assert res.exit_code == 2 and "--metric takes KEY=COLUMN, the key stored and then the file's column: give " \
        "--metric eval/loss=eval_loss" in " ".join(res.output.split())
    assert CliRunner().invoke(app, [*args, "--metric", "eval/loss=eval_loss"]).exit_code == 0
    with pytest.raises(LadderError, match="no step column") as refused:
        TableSource(path, ColumnMap(metrics={"l": "loss"}, run="run")).runs()
    assert "tokens without steps" not in str(refused.value)
    with pytest.raises(LadderError, match=r"or give the tokens per step \(--coord tokens_per_step=N\)"):
        TableSource(path, ColumnMap(metrics={"l": "loss"}, run="run", tokens="tok")).runs()


def test_misfitting_checkpoints_repeats_and_steps_past_the_plan(shared_data, tmp_path):
    """Li et al. 2025: 240 runs; some checkpoints appear twice with different losses (the later row
    wins and is counted), and two runs end at step 256 of a 250-step plan (warned)."""
    path = shared_data / "misfitting_li2025" / "misfitting_tidy.csv"
    res = CliRunner().invoke(app, [
        "import", "csv", str(path), "--run", "run_id", "--step", "step", "--tokens", "tokens",
        "--metric", "eval/loss=loss", "--coord-column", "stop_after_steps=total_steps",
        "--coord-column", "planned_tokens=total_tokens", "--coord-column", "active_params=params_nonembed",
        "--coord-column", "total_params=params", "--coord", "fit_flops_per_token=unknown",
        "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    raw = pd.read_csv(path)
    want = raw.drop_duplicates(["run_id", "step"], keep="last")
    store = Store(tmp_path / "s")
    h = store.history()
    assert store.runs()["run_id"].nunique() == 240 and len(h) == len(want)
    merged = want.merge(h, on=["run_id", "step"], suffixes=("", "_stored"))
    assert len(merged) == len(want)
    np.testing.assert_array_equal(merged["value"], merged["loss"])
    np.testing.assert_allclose(merged["fraction"], merged["frac_of_schedule"], rtol=0, atol=1e-9)
    assert (merged["tokens_stored"] == merged["tokens"]).all()
    reports = [json.loads(x) for x in store.runs()["report_json"]]
    dup = raw[raw.duplicated(["run_id", "step"], keep=False)]
    # every earlier row of a repeated checkpoint whose loss differs from the last one's
    differing = sum(int((g["loss"].iloc[:-1] != g["loss"].iloc[-1]).sum()) for _, g in dup.groupby(["run_id", "step"]))
    assert sum(r["relogged"] for r in reports) == differing > 0
    assert sum(r["past_plan"] > 0 for r in reports) == 2
    assert "value past the planned steps: check stop_after_steps" in " ".join(res.output.split())


def test_chinchilla_final_losses_one_row_per_run(shared_data, tmp_path):
    path = shared_data / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv"
    store = Store(tmp_path / "s")
    from ladder.data.sources import CoordinateOverrides

    columns = ColumnMap(metrics={"train/loss": "loss"}, run="run_id", tokens="tokens",
                        coords={"total_params": "params"})
    pull(store, TableSource(path, columns),
         overrides=CoordinateOverrides(all_runs={"active_params": "unknown", "fit_flops_per_token": "unknown"}))
    raw = pd.read_csv(path)
    h = store.history()
    assert len(store.runs()) == len(raw) == len(h) == 245
    assert (h["fraction"] == 1.0).all()
    got = h.set_index("run_id")
    np.testing.assert_array_equal(got.loc[raw["run_id"], "value"], raw["loss"])
    np.testing.assert_array_equal(got.loc[raw["run_id"], "tokens"], np.round(raw["tokens"]).astype(np.int64))


# A metric cell spelt as a non-finite number is a value the run logged (a diverged loss): kept, counted
# and left out of fits, as from every other source. Only an empty cell (or a missing-value marker) is a
# value not logged.
@pytest.mark.parametrize("cell, stored", [
    ("nan", np.nan), ("NaN", np.nan), ("-nan", np.nan), (" nan ", np.nan), ("inf", np.inf), ("Infinity", np.inf),
    ("-inf", -np.inf), ("", None), ("NA", None), ("null", None),
])
def test_a_nonfinite_metric_cell_is_a_logged_value_counted_and_kept_out_of_fits(tmp_path, cell, stored):
    path = tmp_path / "t.csv"
    path.write_text(f"run,step,loss\nr,1,3.0\nr,2,{cell}\nr,3,2.5\n")
    res = CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step",
                                   "--metric", "eval/loss=loss", "--coord", "stop_after_steps=3",
                                   "--coord", "tokens_per_step=10", "--coord", "active_params=1000",
                                   "--store", str(tmp_path / "s"),
                                   *(x for k, v in UNKNOWN.items() for x in ("--coord", f"{k}={v}"))])
    assert res.exit_code == 0, res.output
    store = Store(tmp_path / "s")
    h = store.history(include_nonfinite=True)
    if stored is None:
        assert list(h["step"]) == [1, 3] and "NaN/inf" not in res.output
    else:
        assert list(h["step"]) == [1, 2, 3] and np.array_equal(h["value"], [3.0, stored, 2.5], equal_nan=True)
        assert "eval/loss: 1 NaN/inf value (first at step 2), kept out of fits" in res.output
        assert json.loads(store.runs()["report_json"][0])["nonfinite"] == [["eval/loss", 1, 2]]
    assert list(store.history()["step"]) == [1, 3]  # what fits read


def test_parquet_nulls_are_not_logged_and_nans_are(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"run": ["r"] * 4, "step": [1, 2, 3, 4], "loss": [3.0, float("nan"), None, float("inf")],
                             "bpb": ["1.5", "nan", None, ""]}), path)
    store = Store(tmp_path / "s")
    columns = ColumnMap(metrics={"eval/loss": "loss", "eval/bpb": "bpb"}, run="run", step="step")
    coords = {"stop_after_steps": 4, "tokens_per_step": 10, "active_params": 1000, **UNKNOWN}
    pull(store, TableSource(path, columns), overrides=CoordinateOverrides(all_runs=coords))
    h = store.history(include_nonfinite=True)
    loss, bpb = h[h["metric"] == "eval/loss"], h[h["metric"] == "eval/bpb"]
    assert list(loss["step"]) == [1, 2, 4] and np.array_equal(loss["value"], [3.0, np.nan, np.inf], equal_nan=True)
    assert list(bpb["step"]) == [1, 2] and np.array_equal(bpb["value"], [1.5, np.nan], equal_nan=True)


@pytest.mark.parametrize("column", ["step", "loss"])
def test_a_parquet_boolean_column_is_no_number(tmp_path, column):
    """true is a flag, not 1.0: refused in a parquet column as "true" is in a CSV."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    values = {"step": [1, 2, 3], "loss": [3.0, 2.5, None]}
    values[column] = [True, False, None] if column == "loss" else [True, False, True]
    pq.write_table(pa.table({"run": ["r"] * 3, **values}), path)
    source = TableSource(path, ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step"))
    what = "value (column 'loss') 'True'" if column == "loss" else "step (column 'step') True"
    with pytest.raises(LadderError, match=re.escape(f"{path}: row 1: {what} is not a number")):
        source.read(source.runs()[0])


def test_history_exports_nan_and_inf_so_that_an_import_reads_them_back_and_json_keeps_them_apart(tmp_path):
    """`ladder history --nonfinite`: a NaN eval written as an empty cell would come back as a value never logged."""
    path = tmp_path / "t.csv"
    path.write_text("run,step,loss\nr,1,3.0\nr,2,nan\nr,3,2.5\nr,4,inf\nr,5,-inf\nr,6,2.25\n")
    coords = [x for k, v in {"stop_after_steps": 6, "tokens_per_step": 10, "active_params": 1000, **UNKNOWN}.items()
              for x in ("--coord", f"{k}={v}")]
    runner = CliRunner()
    first = runner.invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric",
                                "eval/loss=loss", "--store", str(tmp_path / "s"), *coords])
    assert first.exit_code == 0, first.output
    export = tmp_path / "export.csv"
    res = runner.invoke(app, ["history", "r", "--nonfinite", "--out", str(export), "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    again = runner.invoke(app, ["import", "csv", str(export), "--step", "step", "--tokens", "tokens", "--metric",
                                "eval/loss=value", "--store", str(tmp_path / "rt"), *coords])
    assert again.exit_code == 0, again.output
    h = Store(tmp_path / "rt").history(include_nonfinite=True)
    assert list(h["step"]) == [1, 2, 3, 4, 5, 6]
    assert np.array_equal(h["value"], [3.0, np.nan, 2.5, np.inf, -np.inf, 2.25], equal_nan=True)
    res = runner.invoke(app, ["history", "r", "--nonfinite", "--format", "json", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert [r["value"] for r in json.loads(res.output)] == [3.0, "NaN", 2.5, "Infinity", "-Infinity", 2.25]


def test_a_metric_cell_that_is_no_number_names_its_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("run,step,loss\nr,1,3.0\nr,2,nan\nr,3,n/a?\n")
    with pytest.raises(LadderError, match=r"t\.csv: line 4: value \(column 'loss'\) 'n/a\?' is not a number"):
        TableSource(path, ColumnMap(metrics={"l": "loss"}, run="run", step="step")).runs()


def test_a_metric_cell_too_large_for_a_float_names_its_line(tmp_path):
    """1e400 reads as inf, but no run logged it as inf: a typo is refused, not stored as a diverged loss."""
    path = tmp_path / "t.csv"
    path.write_text("run,step,loss\nr,1,3.0\nr,2,inf\nr,3,-1e400\n")
    with pytest.raises(LadderError, match=r"t\.csv: line 4: value \(column 'loss'\) '-1e400' is too large for a float"):
        TableSource(path, ColumnMap(metrics={"l": "loss"}, run="run", step="step")).runs()


@pytest.mark.parametrize("tokens", ["planned_tokens", "tokens"], ids=["coord-column", "tokens-column"])
def test_a_table_of_final_losses_puts_each_at_its_runs_last_step_as_its_coordinates_give_it(tmp_path, tokens):
    """One row per run, no step column, the tokens of each run and the tokens per step given: each final loss is
    stored at steps = tokens ÷ tokens per step and at the run's tokens (it was stored at step 1, at 1,000 tokens, and
    the fits read compute 20,000× too small for the smallest run, 80,000× for the largest). Without the tokens per
    step, each run is one step of all its tokens, as before; the tokens per step given in a later import replace
    that (the steps, tokens per step and tokens an earlier import stored are derived anew)."""
    path = tmp_path / "finals.csv"
    path.write_text("run,loss,N,D\na,3.0,1e6,2e7\nb,2.8,2e6,4e7\nc,2.6,4e6,8e7\n")
    mapped = ["--coord-column", "planned_tokens=D"] if tokens == "planned_tokens" else ["--tokens", "D"]
    args = ["import", "csv", str(path), "--run", "run", "--metric", "eval/loss=loss", "--coord-column",
            "active_params=N", *mapped, "--store", str(tmp_path / "s")]
    D = {"a": 20_000_000, "b": 40_000_000, "c": 80_000_000}
    for per_step in (None, 1000, 2000):  # first without the tokens per step, then given, then corrected
        more = [] if per_step is None else ["--coord", f"tokens_per_step={per_step}", "--replace"]
        res = CliRunner().invoke(app, [*args, *more])
        assert res.exit_code == 0, res.output
        store = Store(tmp_path / "s")
        runs = store.runs().set_index("run_id")
        for run, d in D.items():
            steps = 1 if per_step is None else d // per_step
            assert (runs.at[run, "planned_tokens"], runs.at[run, "tokens_per_step"]) == (d, per_step or d)
            assert runs.at[run, "stop_after_steps"] == runs.at[run, "last_step"] == steps
        h = store.history().set_index("run_id")
        assert [h.at[r, "tokens"] for r in D] == list(D.values()) and (h["fraction"] == 1.0).all()


def test_a_run_of_one_row_without_its_tokens_names_its_line(tmp_path):
    path = tmp_path / "finals.csv"
    path.write_text("run_id,params,tokens,loss\na,1e8,2e9,3.1\nb,2e8,,3.0\n")
    cols = ColumnMap(metrics={"eval/loss": "loss"}, run="run_id", tokens="tokens", coords={"active_params": "params"})
    with pytest.raises(LadderError, match=r"finals\.csv: line 3: run 'b' has no tokens \(column 'tokens' is empty\)"):
        TableSource(path, cols).runs()


def test_the_laws_refuse_an_lr_for_more_steps_than_a_run_may_have():
    from fits import FitError
    from fits.runs import lrs_from_logged

    assert lrs_from_logged(np.array([10.0, 20.0]), np.array([1e-3, 1e-3]), 30).shape == (31,)
    with pytest.raises(FitError, match="counted in tokens"):
        lrs_from_logged(np.array([10.0, 20.0]), np.array([1e-3, 1e-3]), 2 * 10**9)


def test_an_interrupted_import_of_a_file_edited_since_reads_it_again(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    store = Store(tmp_path / "s")
    real = TableSource.read

    def cut(self, ref, cursor=None):
        if ref.run_id == "b":
            raise KeyboardInterrupt
        return real(self, ref, cursor)

    monkeypatch.setattr(TableSource, "read", cut)
    with pytest.raises(KeyboardInterrupt):
        pull(store, TableSource(path, COLUMNS), overrides=_overrides())  # run a is staged, not committed
    monkeypatch.setattr(TableSource, "read", real)
    small_table().assign(loss=lambda t: t["loss"] + 1).to_csv(path, index=False)  # edited before the rerun
    result = pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    assert result.resumed == 0 and any("discarded (its flags differ from these, or its source changed since: a file "
                                       "edited)" in n for n in result.notes), result.notes
    a = store.history("a", ["eval/loss"])
    np.testing.assert_allclose(a["value"], small_table().query("run == 'a'")["loss"] + 1)


def test_a_coordinate_column_that_varies_within_a_run_is_named(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(tokens_per_step=[50] * 4 + [50, 50, 64, 50]).to_csv(path, index=False)
    with pytest.raises(LadderError, match=r"run 'b': column 'tokens_per_step' holds several values in its rows "
                                          r"\(50, 64\); a run has one tokens_per_step"):
        TableSource(path, COLUMNS).runs()


def test_a_mapped_coordinate_column_that_varies_within_a_run_is_refused_with_its_line(tmp_path):
    """--coord-column active_params=params is held to what a column named active_params is: one value per run."""
    path = tmp_path / "t.csv"
    small_table().assign(params=[1000] * 4 + [2000, 2000, 3000, 2000]).to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert (f"{path}: line 8: run 'b': column 'params' holds several values in its rows (2000, 3000); a run has "
            "one active_params: fix the column, or give it with --coord active_params=VALUE") in said
    assert not Store(tmp_path / "s").exists()


def test_a_group_name_or_role_that_reads_like_a_missing_value_is_kept_as_written(tmp_path):
    """A data mix called "NA" (or "nan", "null") was read by pandas as a missing value: its runs were stored in no
    group, and `ladder check --group NA` found none. Labels are text as written; an empty cell is still no label."""
    path = tmp_path / "t.csv"
    small_table().assign(group=["NA"] * 4 + ["nan"] * 4, name=["null"] * 4 + [""] * 4,
                         role=["rung"] * 4 + [""] * 4).to_csv(path, index=False)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    runs = store.runs().set_index("run_id")
    assert runs.loc["a", "group"] == "NA" and runs.loc["b", "group"] == "nan"
    assert runs.loc["a", "name"] == "null" and runs.loc["b", "name"] == "b"  # no name: the run id
    assert runs.loc["a", "role"] == "rung"


def test_a_mapped_coordinate_column_is_read_past_its_empty_cells(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(params=[np.nan, 1000, np.nan, 1000, np.nan, np.nan, 2000, np.nan]).to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    assert res.exit_code == 0, res.output
    runs = Store(tmp_path / "s").runs().set_index("run_id")
    assert runs.loc["a", "active_params"] == 1000 and runs.loc["b", "active_params"] == 2000


def test_a_mapped_coordinate_column_empty_for_a_run_is_said_to_be_empty_not_to_be_mapped(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(params=[1000] * 4 + [np.nan] * 4).to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    said = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert said.startswith("error: run b (t.csv): its config lacks 'active_params'")
    assert said.endswith("column 'params' (--coord-column active_params=params) is empty in every row of run 'b': "
                         "fill it in, or give the value as above")
    assert "read it from the table's columns" not in said
    coords = tmp_path / "c.yaml"
    coords.write_text("b: {active_params: 2000}\n")
    res = _import(path, tmp_path / "s", "--coords", str(coords))
    assert res.exit_code == 0, res.output
    assert Store(tmp_path / "s").runs().set_index("run_id").loc["b", "active_params"] == 2000


def test_missing_coordinates_are_named_together_with_the_columns_that_seem_to_hold_them(tmp_path):
    path = tmp_path / "t.csv"
    small_table().rename(columns={"T": "total_steps"}).assign(batch_size_tokens=50).to_csv(path, index=False)
    bare = ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step")
    with pytest.raises(LadderError) as exc:
        pull(Store(tmp_path / "s"), TableSource(path, bare))
    assert str(exc.value).endswith(
        "its config lacks 'active_params' and two of 'stop_after_steps', 'tokens_per_step', 'planned_tokens' (the "
        "third follows); supply them with --coord active_params=VALUE (every run of this pull) or --coords FILE.yaml "
        "({a: {active_params: VALUE, stop_after_steps: VALUE, tokens_per_step: VALUE}}); or read them from the table's "
        "columns: --coord-column active_params=params --coord-column stop_after_steps=total_steps --coord-column "
        "tokens_per_step=batch_size_tokens")
    small_table().drop(columns=["params"]).to_csv(path, index=False)  # no column looks like N
    with pytest.raises(LadderError, match=r"lacks 'active_params'; supply it .*; or read a coordinate from a column of "
                                          r"the table: --coord-column FIELD=COLUMN$"):
        pull(Store(tmp_path / "s"), TableSource(path, bare), overrides=CoordinateOverrides.parse(["stop_after_steps=40",
                                                                                                 "tokens_per_step=50"]))
    assert Store(tmp_path / "s").runs().empty


def test_a_table_whose_steps_run_far_past_the_plan_is_refused_with_its_line(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(step=lambda t: t["step"] * 2**20, tok=lambda t: t["step"] * 50).to_csv(path, index=False)
    with pytest.raises(LadderError, match=r"t.csv: line 5: run 'a' reaches step 41,943,040, 1.05e\+06× its plan of 40 "
                                          r"steps; nothing of the run was imported.*steps counted in tokens\?"):
        pull(Store(tmp_path / "s"), TableSource(path, COLUMNS), overrides=_overrides())
    # one run far past its plan refuses the file: a table is imported whole, as a bad cell refuses it
    small_table().assign(step=lambda t: t["step"] * np.where(t["run"] == "b", 2**20, 1),
                         tok=lambda t: t["step"] * 50).to_csv(path, index=False)
    with pytest.raises(LadderError, match=r"run 'b' reaches step .*; nothing of the file was imported"):
        pull(Store(tmp_path / "s1"), TableSource(path, COLUMNS), overrides=_overrides())
    assert Store(tmp_path / "s1").runs().empty
    assert not list((tmp_path / "s1" / "pending").glob("*"))  # nothing left staged for a later import to take over
    small_table().assign(step=lambda t: t["step"] + 1, tok=lambda t: t["step"] * 50).to_csv(path, index=False)
    done = pull(Store(tmp_path / "s2"), TableSource(path, COLUMNS), overrides=_overrides())  # one step past: kept
    assert [m for r in done.pulled for m in r.messages if "past the planned steps" in m]


def test_steps_far_past_the_plan_are_taken_for_tokens_before_any_fit(tmp_path, monkeypatch):
    """A live source (wandb, a trainer's files) stores what its run logged; the fits refuse it."""
    from ladder.data.runview import from_store

    monkeypatch.setattr("ladder.data.sources.pull._check_plan", lambda *args: None)  # as for a source of live runs
    path = tmp_path / "t.csv"
    small_table().assign(step=lambda t: t["step"] * 2**20, tok=lambda t: t["step"] * 50).to_csv(path, index=False)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())  # stored as logged, with a warning
    row = store.runs().iloc[0]
    with pytest.raises(LadderError, match=r"its last eval is at step 41,943,040, 1,048,576× its 40 planned steps; "
                                          r"are its steps counted in tokens\?"):
        from_store(store, row, "eval/loss")


def test_columns_named_for_a_coordinate_are_said_to_be_read_as_one(tmp_path):
    path = tmp_path / "t.csv"
    small_table().rename(columns={"params": "active_params"}).to_csv(path, index=False)
    mapped = ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step", tokens="tok", coords={"stop_after_steps": "T"})
    result = pull(Store(tmp_path / "s"), TableSource(path, mapped), overrides=_overrides())
    (note,) = [n for n in result.notes if "read as each run's coordinate" in n]
    assert "column 'active_params'" in note and "--coord-column FIELD=COLUMN" in note
    assert Store(tmp_path / "s").runs().set_index("run_id").loc["b", "active_params"] == 2000
    named = ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step", tokens="tok",
                      coords={"stop_after_steps": "T", "active_params": "active_params"})
    again = pull(Store(tmp_path / "s2"), TableSource(path, named), overrides=_overrides())
    assert not [n for n in again.notes if "read as each run's coordinate" in n]  # mapped: the user said so


def test_one_run_pulled_from_two_sources_is_named(tmp_path):
    table = small_table()
    table[table["run"] == "a"].assign(name="x", group="g").to_csv(tmp_path / "one.csv", index=False)
    table[table["run"] == "a"].assign(run="a-wandb", name="x", group="g").to_csv(tmp_path / "two.csv", index=False)
    store = Store(tmp_path / "s")
    first = pull(store, TableSource(tmp_path / "one.csv", COLUMNS), overrides=_overrides())
    assert not [n for n in first.notes if "in the store 2 times" in n]
    second = pull(store, TableSource(tmp_path / "two.csv", COLUMNS), overrides=_overrides())
    (note,) = [n for n in second.notes if "in the store 2 times" in n]
    assert "run 'x' of group 'g'" in note and "a (" in note and "a-wandb (" in note and "one source" in note


def test_a_run_whose_name_is_another_runs_id_is_named_at_import_whichever_came_first(tmp_path):
    table = small_table()
    table[table["run"] == "a"].assign(name="hero").to_csv(tmp_path / "named.csv", index=False)
    table[table["run"] == "b"].assign(run="hero").to_csv(tmp_path / "id.csv", index=False)
    for first, second in (("named", "id"), ("id", "named")):
        store = Store(tmp_path / f"s-{first}")
        assert not [n for n in pull(store, TableSource(tmp_path / f"{first}.csv", COLUMNS),
                                    overrides=_overrides()).notes if "another run's id" in n]
        notes = pull(store, TableSource(tmp_path / f"{second}.csv", COLUMNS), overrides=_overrides()).notes
        assert [n for n in notes if "another run's id" in n] == [
            "run 'a' is named 'hero', which is another run's id: commands that take a run read 'hero' as that id, so "
            "name this run by its id 'a'"], notes
        assert store.run("hero")["run_id"] == "hero" and store.run("a")["name"] == "hero"


def test_run_names_with_brackets_print_as_they_are(tmp_path):
    """Names are text, not markup: "run[lr=3e-4]" keeps its brackets in every table, and a name holding "[/]"
    does not break the output."""
    table = small_table()
    table["run"] = table["run"].map({"a": "run[lr=3e-4]", "b": "x[/]y [bold]z"})
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    runner = CliRunner()
    listed = runner.invoke(app, ["runs", "--store", str(store.root)])
    assert listed.exit_code == 0, listed.output
    assert "run[lr=3e-4]" in listed.output and "x[/]y [bold]z" in listed.output
    history = runner.invoke(app, ["history", "x[/]y [bold]z", "--store", str(store.root)])
    assert history.exit_code == 0 and "x[/]y [bold]z" in history.output, history.output


def test_the_runs_table_lists_by_size_keeps_its_numbers_on_one_line_and_no_column_of_names_twice(tmp_path, monkeypatch):
    from ladder.cli.app import console

    table = small_table()
    table["run"] = table["run"].map({"a": "z-small", "b": "a-large"})  # by name the larger would come first
    table["T"] = 1_234_567  # steps "40/1,234,567": folded at a narrow width it read as two numbers
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    store = Store(tmp_path / "s")
    pull(store, TableSource(path, COLUMNS), overrides=_overrides())
    monkeypatch.setattr(console, "width", 110)  # a terminal narrower than the table wants
    listed = CliRunner().invoke(app, ["runs", "--store", str(store.root)])
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.stdout.splitlines() if "40/1,234,567" in line]
    assert len(rows) == 2 and "z-small" in rows[0] and "a-large" in rows[1], listed.stdout
    header = next(line for line in listed.stdout.splitlines() if "run" in line and "role" in line)
    assert " id " not in header  # each run's id is its name


def _import(path, store, *extra: str):
    return CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step", "--tokens", "tok",
                                    "--metric", "eval/loss=loss", "--coord-column", "active_params=params",
                                    "--coord-column", "stop_after_steps=T", "--coord", "total_params=unknown",
                                    "--coord", "fit_flops_per_token=unknown", "--store", str(store), *extra])


def test_token_counts_in_billions_are_refused_and_a_float_rounding_is_not(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(tok=lambda t: t["step"] * 50 / 1e9).to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    assert res.exit_code == 2 and "line 2: tokens (column 'tok') 5e-07 is not a whole number" in res.output
    assert "in millions or billions? multiply the column by 1e6 or 1e9" in res.output and not (tmp_path / "s").exists()
    small_table().assign(tok=lambda t: t["step"] * 50 * (1 + 1e-12)).to_csv(path, index=False)
    assert _import(path, tmp_path / "s2").exit_code == 0
    assert Store(tmp_path / "s2").history(["a"], ["eval/loss"])["tokens"].tolist() == [500, 1000, 1500, 2000]


def test_a_state_the_tool_does_not_know_is_refused_not_read_as_a_crash(tmp_path):
    path = tmp_path / "t.csv"
    small_table().assign(state="done").to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    assert res.exit_code == 2 and "line 2: run 'a': state 'done' is not one of finished, running" in res.output
    small_table().assign(state="Finished").to_csv(path, index=False)
    assert _import(path, tmp_path / "s").exit_code == 0
    assert set(Store(tmp_path / "s").runs()["state"]) == {"finished"}


def test_a_run_that_ends_short_of_its_plan_without_a_state_is_said_to_be_stored_as_finished(tmp_path):
    path = tmp_path / "t.csv"
    small_table().query("run == 'a' or step <= 20").to_csv(path, index=False)  # b: 20 of its 40 steps
    res = _import(path, tmp_path / "s")
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "b: ends at step 20, 50% of its plan, and the table gives no state: stored as " \
        "finished" in text, res.output
    assert "a: ends at step" not in text
    small_table().query("run == 'a' or step <= 20").assign(state="running").to_csv(path, index=False)
    res = _import(path, tmp_path / "s2")
    assert res.exit_code == 0 and "gives no state" not in res.output
    assert Store(tmp_path / "s2").runs().set_index("run_id").at["b", "state"] == "running"
    # a logger's own name for the column, named with --coord-column state=COLUMN
    small_table().query("run == 'a' or step <= 20").assign(status="RUNNING").to_csv(path, index=False)
    res = _import(path, tmp_path / "s3", "--coord-column", "state=status")
    assert res.exit_code == 0 and "gives no state" not in res.output, res.output
    assert Store(tmp_path / "s3").runs().set_index("run_id").at["b", "state"] == "running"


def test_a_running_runs_row_still_being_written_is_left_unread_and_a_finished_runs_last_line_read(tmp_path):
    """A live run's log caught while its trainer writes a row: the last line, without its newline, holds a value
    cut short (3.1 of 3.1234) or lacks a field; it is left unread, said, and read whole by the next import."""
    whole = small_table().query("run == 'b'").assign(state="running")[["run", "step", "tok", "params", "T", "state",
                                                                         "loss"]]
    text = whole.to_csv(index=False)
    path = tmp_path / "t.csv"
    for cut in (text.rstrip("\n")[:-4], text.rstrip("\n").rpartition(",")[0]):  # a value cut short; a field unwritten
        path.write_text(cut)
        res = _import(path, tmp_path / "s", "--replace")
        assert res.exit_code == 0 and "t.csv: line 5 has no newline yet" in " ".join(res.output.split()), res.output
        history = Store(tmp_path / "s").history("b")
        assert list(history["step"]) == [10, 20, 30]
    path.write_text(text)
    assert _import(path, tmp_path / "s", "--replace").exit_code == 0
    assert list(Store(tmp_path / "s").history("b")["value"]) == list(whole["loss"])
    own = text.replace("state", "status")  # the state in a column of the logger's own name (--coord-column state=)
    path.write_text(own.rstrip("\n")[:-4])
    res = _import(path, tmp_path / "own", "--coord-column", "state=status")
    assert res.exit_code == 0 and "t.csv: line 5 has no newline yet" in " ".join(res.output.split()), res.output
    assert list(Store(tmp_path / "own").history("b")["step"]) == [10, 20, 30]
    path.write_text(text.replace("running", "finished").rstrip("\n"))  # a finished run's file saved without one
    res = _import(path, tmp_path / "s2")
    assert res.exit_code == 0 and "no newline" not in res.output
    assert list(Store(tmp_path / "s2").history("b")["value"]) == list(whole["loss"])
    ended = text.rstrip("\n").rpartition("running")  # its last row says it ended: whole, though without a newline
    path.write_text(ended[0] + "finished" + ended[2])
    res = _import(path, tmp_path / "s3")
    assert res.exit_code == 0 and "no newline" not in res.output
    assert list(Store(tmp_path / "s3").history("b")["value"]) == list(whole["loss"])
    assert Store(tmp_path / "s3").run("b")["state"] == "finished"
    two = pd.concat([whole.iloc[:2], whole.iloc[2:].assign(run="a", state="finished")])  # the last row another run's
    path.write_text(two.to_csv(index=False).rstrip("\n"))
    res = _import(path, tmp_path / "s4")
    assert res.exit_code == 0 and "no newline" not in res.output
    assert len(Store(tmp_path / "s4").history("a")) == 2 and len(Store(tmp_path / "s4").history("b")) == 2


def test_a_loss_of_zero_or_below_is_said_at_import_and_left_out_of_fits_as_a_nan_is(tmp_path):
    from ladder.data.runview import from_store

    path = tmp_path / "t.csv"
    small_table().assign(loss=lambda t: t["loss"].mask((t["run"] == "a") & (t["step"] == 20), 0.0)
                         .mask((t["run"] == "b") & (t["step"] >= 30), -1.2)).to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    text = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "a: eval/loss: 1 value of 0 or below (first at step 20): no loss, kept out of fits" in text
    assert "b: eval/loss: 2 values of 0 or below (first at step 30)" in text
    small_table().assign(loss=lambda t: t["loss"].mask((t["run"] == "a") & (t["step"] == 20), -np.inf)
                         .mask((t["run"] == "a") & (t["step"] == 30), -1.0)).to_csv(tmp_path / "inf.csv", index=False)
    text = " ".join(_import(tmp_path / "inf.csv", tmp_path / "s3").output.split())
    # -inf is told once, with the NaN/inf values, and not again among those of 0 or below
    assert "a: eval/loss: 1 NaN/inf value (first at step 20)" in text, text
    assert "a: eval/loss: 1 value of 0 or below (first at step 30)" in text, text
    store = Store(tmp_path / "s")
    assert len(store.history(["a", "b"], ["eval/loss"])) == 8  # stored as logged
    assert store.fitted_history(["a", "b"], "eval/loss")["step"].tolist() == [10, 30, 40, 10, 20]
    run = from_store(store, store.runs().query("run_id == 'a'").iloc[0], "eval/loss")
    assert run.steps.tolist() == [10, 30, 40] and (run.values > 0).all()


def test_tokens_that_disagree_with_steps_times_tokens_per_step_are_named(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)  # 50 tokens per step in the table
    res = _import(path, tmp_path / "s", "--coord", "tokens_per_step=100")
    assert res.exit_code == 0
    assert "a: at step 40 the logged tokens (2,000) are 0.5× step × tokens per step (4,000)" in res.output
    assert "b: at step 40" in res.output
    assert "logged tokens" not in _import(path, tmp_path / "s2").output


def test_rows_with_no_value_of_any_metric_are_counted(tmp_path):
    path = tmp_path / "t.csv"
    table = small_table().assign(loss=lambda t: t["loss"].where((t["run"] != "a") | (t["step"] < 30)))
    table.drop(columns="bpb").to_csv(path, index=False)
    res = _import(path, tmp_path / "s")
    assert res.exit_code == 0 and "a: 2 rows with no value of eval/loss (empty cells): read as not logged" in res.output
    assert "b: " not in res.output.split("eval/loss (empty cells)")[0].splitlines()[-1]
    table.to_csv(path, index=False)  # those rows hold bpb, a column not imported: rows of another metric, not empty
    res = _import(path, tmp_path / "s2")
    assert res.exit_code == 0 and "empty cells" not in res.output


def test_a_table_saved_by_a_spreadsheet_imports_as_the_clean_one(tmp_path):
    clean, saved = tmp_path / "t.csv", tmp_path / "saved.csv"
    small_table().to_csv(clean, index=False)
    lines = clean.read_text().splitlines()
    saved.write_text("".join(f"{line},\n" for line in lines) + ",,,,,,,,\n , ,,,,,,,\n")
    assert _import(clean, tmp_path / "a").exit_code == 0
    res = _import(saved, tmp_path / "b")
    assert res.exit_code == 0, res.output
    for run in ("a", "b"):
        assert Store(tmp_path / "a").history(run).equals(Store(tmp_path / "b").history(run))
    lines[2] += ",x"  # a value past the named columns names its line
    (tmp_path / "bad.csv").write_text("\n".join(line + ("" if line.endswith("x") else ",") for line in lines))
    res = _import(tmp_path / "bad.csv", tmp_path / "c")
    assert res.exit_code == 2 and "line 3: the value 'x' is in a column with no name" in res.output


def test_a_table_saved_with_semicolons_and_decimal_commas_imports_as_the_comma_one(tmp_path):
    small_table().to_csv(tmp_path / "t.csv", index=False)
    small_table().to_csv(tmp_path / "semi.csv", sep=";", decimal=",", index=False)
    assert _import(tmp_path / "t.csv", tmp_path / "a").exit_code == 0
    res = _import(tmp_path / "semi.csv", tmp_path / "b")
    assert res.exit_code == 0, res.output
    for run in ("a", "b"):
        assert Store(tmp_path / "a").history(run).equals(Store(tmp_path / "b").history(run))


def test_runs_exported_one_per_file_import_in_one_command_and_a_bad_file_stores_none(tmp_path):
    table = small_table()
    for run, rows in table.groupby("run"):  # as a run's chart exports: no run column, the file names the run
        rows.drop(columns="run").to_csv(tmp_path / f"{run}.csv", index=False)
    common = ["import", "csv", "--step", "step", "--tokens", "tok", "--metric", "eval/loss=loss",
              "--coord-column", "active_params=params", "--coord-column", "stop_after_steps=T",
              "--coord", "total_params=unknown", "--coord", "fit_flops_per_token=unknown"]
    (tmp_path / "bad.csv").write_text((tmp_path / "b.csv").read_text().replace("\n40,", "\nforty,"))
    res = CliRunner().invoke(app, [*common, str(tmp_path / "a.csv"), str(tmp_path / "bad.csv"), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "bad.csv: line 5" in res.output and "'forty'" in res.output
    assert not Store(tmp_path / "s").exists()  # the good file first is not stored either
    coords = tmp_path / "coords.yaml"  # one file for the whole ladder: each entry goes with its file's run
    coords.write_text("a: {group: mine}\nb: {group: mine}\nzzz: {group: mine}\n")
    res = CliRunner().invoke(app, [*common, str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--coords", str(coords),
                                   "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert res.output.count("is the name or id of no run of this pull") == 1 and "'zzz' is the name" in res.output
    stored = Store(tmp_path / "s")
    assert sorted(stored.runs()["name"]) == ["a", "b"] and set(stored.runs()["group"]) == {"mine"}
    table.to_csv(tmp_path / "t.csv", index=False)  # the same runs in one table, with a run column
    assert _import(tmp_path / "t.csv", tmp_path / "one").exit_code == 0
    for run in ("a", "b"):
        ours, theirs = stored.history(run), Store(tmp_path / "one").history(run)
        assert np.array_equal(ours["value"], theirs["value"]) and np.array_equal(ours["step"], theirs["step"])


def test_a_later_file_whose_run_lacks_coordinates_or_gives_odd_ones_stores_none_of_the_files(tmp_path):
    table = small_table()
    for run, rows in table.groupby("run"):
        rows.drop(columns=["run", "params", "T"]).to_csv(tmp_path / f"{run}.csv", index=False)
    common = ["import", "csv", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--step", "step", "--tokens", "tok",
              "--metric", "eval/loss=loss", "--store", str(tmp_path / "s")]
    plan = {run: (int(rows["params"].iloc[0]), int(rows["T"].iloc[0])) for run, rows in table.groupby("run")}
    coords = tmp_path / "coords.yaml"
    coords.write_text(f"a: {{active_params: {plan['a'][0]}, stop_after_steps: {plan['a'][1]}}}\n")  # b's left out
    res = CliRunner().invoke(app, [*common, "--coords", str(coords)])
    assert res.exit_code == 2 and "run b" in res.output and "lacks 'active_params'" in res.output
    assert "nothing was imported" in res.output and not Store(tmp_path / "s").exists()  # a.csv, first, is not kept
    coords.write_text(f"a: {{active_params: {plan['a'][0]}, stop_after_steps: {plan['a'][1]}}}\n"
                      f"b: {{active_params: {plan['b'][0]}, stop_after_steps: {plan['b'][1]}, fit_flops_per_token: "
                      f"{plan['b'][0] * 1e6:g}}}\n")  # b's FLOPs per token in other units than its N
    res = CliRunner().invoke(app, [*common, "--coords", str(coords)])
    assert res.exit_code == 2 and "FLOPs per active parameter" in res.output and "nothing was imported" in res.output
    assert not Store(tmp_path / "s").exists()


def test_a_config_beside_each_file_gives_its_runs_coordinates_its_own_keys_by_coord_key(tmp_path):
    table = small_table()
    for run, rows in table.groupby("run"):  # a trainer's export: metrics in run.csv, its config in run.json beside it
        rows[["step", "tok", "loss"]].to_csv(tmp_path / f"{run}.csv", index=False)
        (tmp_path / f"{run}.json").write_text(json.dumps({"model": {"n_params": int(rows["params"].iloc[0])},
                                                          "train": {"steps": 40}, "group": "mine"}))
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    common = ["import", "csv", *files, "--step", "step", "--tokens", "tok", "--metric", "eval/loss=loss",
              "--coord", "total_params=unknown", "--coord", "fit_flops_per_token=unknown", "--store", str(tmp_path / "s")]
    res = CliRunner().invoke(app, common)  # the keys named the trainer's way: which ones may give them, said
    flat = " ".join(res.output.split())
    assert res.exit_code == 2 and "its config beside it (a.json) may give them: --coord-key active_params=model.n_params" \
        " (1000 there), --coord-key stop_after_steps=train.steps (40 there)" in flat, flat
    res = CliRunner().invoke(app, [*common, "--coord-key", "active_params=model.n_params",
                                   "--coord-key", "stop_after_steps=train.steps"])
    assert res.exit_code == 0, res.output
    assert "runs' config read from the file beside each table: a.json and 1 more" in " ".join(res.output.split())
    assert "warning" not in res.output  # said once, as what was read, not as a warning of each file
    runs = Store(tmp_path / "s").runs().set_index("name")
    assert runs.loc["a", "active_params"] == 1000 and runs.loc["b", "active_params"] == 2000
    res = CliRunner().invoke(app, [*common[:-1], str(tmp_path / "one"), "--coord-key", "stop_after_steps=train.steps",
                                   "--coord-key", "active_params=model.n_params", "--coord", "active_params=1000"])
    # one value for every run: said where it replaces a run's own
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and flat.count("replaces the") == 1, flat
    assert "b: --coord active_params=1000 replaces the 2000 its config gives (--coord gives every run of the pull one " \
           "value; a run's own goes in --coords FILE.yaml)" in flat
    assert set(runs["stop_after_steps"]) == {40} and set(runs["group"]) == {"mine"}  # a key named for a label: read
    (tmp_path / "b.yaml").write_text("group: mine\n")
    res = CliRunner().invoke(app, common)
    assert res.exit_code == 2 and "b.json and b.yaml beside it: which is its runs' config? keep one" in res.output
    (tmp_path / "b.yaml").unlink()
    (tmp_path / "b.json").rename(tmp_path / "b.JSON")  # a name in capitals is its config too
    res = CliRunner().invoke(app, [*common, "--coord-key", "active_params=model.n_params",
                                   "--coord-key", "stop_after_steps=train.steps", "--replace"])
    assert res.exit_code == 0 and "b.JSON" not in res.output, res.output  # a.json and 1 more
    (tmp_path / "b.JSON").rename(tmp_path / "b.json")
    (tmp_path / "b.json").write_text("{\"model\": ")  # a config that does not parse: an error, as any input's
    common[-1] = str(tmp_path / "fresh")  # a store that holds none of them yet
    res = CliRunner().invoke(app, [*common, "--coord-key", "active_params=model.n_params",
                                   "--coord-key", "stop_after_steps=train.steps"])
    flat = " ".join(res.output.split())
    assert res.exit_code == 2 and f"{tmp_path / 'b.json'}: the config beside the table does not read as JSON" in flat
    assert not Store(tmp_path / "fresh").exists()
    (tmp_path / "b.json").write_text("[1, 2]")  # a file of that name that is no mapping: the import goes on without it
    (tmp_path / "coords.yaml").write_text("b: {active_params: 2000, stop_after_steps: 40}\n")
    res = CliRunner().invoke(app, [*common, "--coord-key", "active_params=model.n_params", "--coords",
                                   str(tmp_path / "coords.yaml"), "--coord-key", "stop_after_steps=train.steps"])
    assert res.exit_code == 0, res.output
    assert "b.json beside b.csv is not read as its runs' config: it holds a list, not a mapping" in \
        " ".join(res.output.split())


def test_a_config_beside_a_table_of_several_runs_is_not_read_as_each_ones(tmp_path):
    small_table().to_csv(tmp_path / "ladder.csv", index=False)
    (tmp_path / "ladder.json").write_text(json.dumps({"name": "sweep", "state": "crashed", "group": "g"}))
    res = _import(tmp_path / "ladder.csv", tmp_path / "s")
    assert res.exit_code == 0, res.output
    assert "ladder.json beside ladder.csv is not read as its runs' config: the table holds 2 runs" in \
        " ".join(res.output.split())
    runs = Store(tmp_path / "s").runs()
    assert sorted(runs["name"]) == ["a", "b"] and set(runs["state"]) == {"finished"} and set(runs["group"]) == {""}
    table = small_table()
    table[table["run"] == "a"].drop(columns="run").to_csv(tmp_path / "a.csv", index=False)
    (tmp_path / "a.json").write_text(json.dumps({"state": "training"}))  # one run's: read, and named where refused
    res = CliRunner().invoke(app, ["import", "csv", str(tmp_path / "a.csv"), "--step", "step", "--tokens", "tok",
                                   "--metric", "eval/loss=loss", "--coord-column", "active_params=params",
                                   "--coord-column", "stop_after_steps=T", "--coord", "total_params=unknown",
                                   "--coord", "fit_flops_per_token=unknown", "--store", str(tmp_path / "t")])
    assert res.exit_code == 2 and f"{tmp_path / 'a.json'}: run 'a': state 'training'" in " ".join(res.output.split())


def test_the_coordinates_file_beside_a_table_of_its_name_is_not_read_as_its_runs_config(tmp_path):
    small_table().to_csv(tmp_path / "ladder.csv", index=False)
    (tmp_path / "ladder.yaml").write_text("a: {group: one}\nb: {group: two}\n")
    res = _import(tmp_path / "ladder.csv", tmp_path / "s", "--coords", str(tmp_path / "ladder.yaml"))
    assert res.exit_code == 0 and "config read from" not in res.output, res.output
    stored = Store(tmp_path / "s")
    assert dict(zip(stored.runs()["name"], stored.runs()["group"])) == {"a": "one", "b": "two"}
    assert "b" not in stored.config("a")  # the other runs' entries are no part of a run's config


def test_a_table_of_tokens_without_steps_reads_its_steps_from_the_tokens_per_step_given(tmp_path):
    small_table().to_csv(tmp_path / "t.csv", index=False)
    small_table().drop(columns="step").to_csv(tmp_path / "tokens.csv", index=False)  # 50 tokens per step
    assert _import(tmp_path / "t.csv", tmp_path / "a").exit_code == 0
    tokens_only = ["import", "csv", str(tmp_path / "tokens.csv"), "--run", "run", "--tokens", "tok",
                   "--metric", "eval/loss=loss", "--coord-column", "active_params=params",
                   "--coord-column", "stop_after_steps=T", "--coord", "total_params=unknown",
                   "--coord", "fit_flops_per_token=unknown"]
    res = CliRunner().invoke(app, [*tokens_only, "--store", str(tmp_path / "b")])
    assert res.exit_code == 2 and "give the tokens per step (--coord tokens_per_step=N)" in res.output
    assert not Store(tmp_path / "b").exists()
    res = CliRunner().invoke(app, [*tokens_only, "--coord", "tokens_per_step=50", "--store", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "not a whole step" not in res.output
    res = CliRunner().invoke(app, [*tokens_only, "--coord", "tokens_per_step=47", "--store", str(tmp_path / "d")])
    assert res.exit_code == 0 and "tokens.csv: line 2: run 'a': 500 tokens are 10.64 steps of 47 tokens, not a " \
        "whole step (4 of its 4 rows)" in " ".join(res.output.split()) and "steps are rounded to the nearest; check tokens_per_step" in \
        " ".join(res.output.split()), res.output
    assert " ".join(res.output.split()).count("not a whole step") == 1  # once a table
    for run in ("a", "b"):
        ours, theirs = Store(tmp_path / "b").history(run), Store(tmp_path / "a").history(run)
        assert np.array_equal(ours["step"], theirs["step"]) and np.array_equal(ours["value"], theirs["value"])
    res = CliRunner().invoke(app, [*tokens_only, "--coord", "tokens_per_step=1000", "--store", str(tmp_path / "c")])
    assert res.exit_code == 2 and "tokens.csv: line 4 and line 5: run 'a': their tokens fall on the same step (step 2, at 1,000" in res.output


def test_a_table_imported_again_by_the_command_is_unchanged(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    assert "2 new runs, 0 unchanged (store " in _import(path, tmp_path / "s").output  # new to the store: not "updated"
    assert "0 runs updated, 2 unchanged" in _import(path, tmp_path / "s").output


def test_a_flag_the_coordinates_file_overrides_for_a_run_is_named(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    coords = tmp_path / "c.yaml"
    coords.write_text("a: {group: mine, stop_after_steps: 40}\nb: {stop_after_steps: 80}\n")
    res = _import(path, tmp_path / "s", "--coord", "group=theirs", "--coords", str(coords))
    assert res.exit_code == 0, res.output
    text = "".join(res.output.split())  # rich wraps long lines anywhere, paths included

    def said(words: str) -> bool:
        return "".join(words.split()) in text

    assert said("--coord group=theirs is not used for a (mine): ") and said("c.yaml gives its group")
    assert said("--coord-column stop_after_steps=T is not used for b (80 for 40)")
    assert not said("a (40 for 40)")  # the same value, said two ways, is no conflict
    runs = Store(tmp_path / "s").runs().set_index("run_id")
    assert runs.loc["a", "group"] == "mine" and runs.loc["b", "group"] == "theirs"


def test_a_column_named_for_a_coordinate_the_coordinates_file_overrides_is_named(tmp_path):
    """A column read by its name (tokens_per_step) whose value the coordinates file replaces for a run is said,
    as a --coord-column's is; and a tpp column, read as each run's declared ratio, is named with the others."""
    path = tmp_path / "t.csv"
    small_table().assign(tokens_per_step=50, tpp=3).to_csv(path, index=False)
    coords = tmp_path / "c.yaml"
    coords.write_text("a: {tokens_per_step: 500}\nb: {tokens_per_step: 50}\n")
    res = _import(path, tmp_path / "s", "--coords", str(coords))
    assert res.exit_code == 0, res.output
    text = "".join(res.output.split())
    assert "".join("column 'tokens_per_step' is not used for a (500 for 50)".split()) in text
    assert "b(50for50)" not in text
    assert "".join("column 'tpp' read as each run's coordinate".split()) in text


def test_a_column_the_coordinates_file_overrides_is_named_for_runs_exported_one_per_file(tmp_path):
    rows = small_table().query("run == 'a'").drop(columns="run")
    rows.to_csv(tmp_path / "a.csv", index=False)
    coords = tmp_path / "c.yaml"
    coords.write_text("a: {active_params: 1500, stop_after_steps: 40}\n")
    res = CliRunner().invoke(app, ["import", "csv", str(tmp_path / "a.csv"), "--step", "step", "--tokens", "tok", "--metric",
                                   "eval/loss=loss", "--coord-column", "active_params=params", "--coord-column",
                                   "stop_after_steps=T", "--coord", "total_params=unknown", "--coord",
                                   "fit_flops_per_token=unknown", "--coords", str(coords), "--store", str(tmp_path / "s")])
    text = "".join(res.output.split())
    assert res.exit_code == 0 and "--coord-columnactive_params=paramsisnotusedfora(1500for1000)" in text, res.output
    assert "stop_after_steps=Tisnotused" not in text  # the same value, said twice, is no conflict
    assert Store(tmp_path / "s").runs().set_index("run_id").at["a", "active_params"] == 1500


def test_counts_in_other_units_are_said_at_import(tmp_path):
    """Counts that cannot all be counts: a token ratio no run trains at is one warning for the pull (naming the
    first run and how many more); FLOPs per token below 2 per parameter, or total parameters fewer than active,
    are refused with the run named, and nothing is stored."""
    path = tmp_path / "t.csv"
    small_table().assign(T=8_000_000).to_csv(path, index=False)  # 4e8 tokens for 1,000 and 2,000 parameters
    res = _import(path, tmp_path / "s")
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and said.count("where no run trains") == 1
    assert "a (and 1 more) plans 4e+05 tokens per parameter (4e+08 tokens, active_params 1e+03)" in said
    small_table().to_csv(path, index=False)
    assert "where no run trains" not in _import(path, tmp_path / "ok").output
    base = ["import", "csv", str(path), "--run", "run", "--step", "step", "--tokens", "tok", "--metric", "eval/loss=loss",
            "--coord-column", "active_params=params", "--coord-column", "stop_after_steps=T"]
    for coord, words in (("fit_flops_per_token=1", "fit_flops_per_token 1 is 0.001 FLOPs per active parameter"),
                         ("total_params=10", "total_params 10 is fewer than active_params 1000")):
        res = CliRunner().invoke(app, [*base, "--coord", coord, "--store", str(tmp_path / "bad")])
        assert res.exit_code == 2 and "run a" in res.output and words in " ".join(res.output.split()), res.output
        assert not Store(tmp_path / "bad").exists()


def test_a_coordinates_entry_in_another_case_is_named_when_the_run_lacks_coordinates(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    coords = tmp_path / "c.yaml"
    coords.write_text("A: {active_params: 1000, stop_after_steps: 40, tokens_per_step: 50}\n"
                      "b: {active_params: 2000, stop_after_steps: 40, tokens_per_step: 50}\n")
    res = CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric",
                                   "eval/loss=loss", "--coords", str(coords), "--store", str(tmp_path / "s")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "run a " in said and "has an entry 'A', which is not the run's name 'a'" in said
    assert not Store(tmp_path / "s").exists()
    from ladder.data.sources.coords import CoordinateOverrides

    near = CoordinateOverrides(per_run={"Team_190M-1xC": {}, "team-370M-1xC": {}}, file="c.yaml")  # a character apart
    assert near.near_entry("team-190M-1xC") == ("; c.yaml has an entry 'Team_190M-1xC', which is not the run's name "
                                                "'team-190M-1xC' (names are matched as written, case included)")
    assert near.near_entry("team-1B-1xC") == "" and near.near_entry("team-370M-1xC") == ""
    assert near.near_entry("team-370M-2xC") == "" and near.near_entry("team-190M-1xC-retry") == ""  # other runs


def test_a_coordinates_file_for_the_whole_ladder_is_one_line_for_the_runs_not_pulled(tmp_path):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    coords = tmp_path / "c.yaml"
    coords.write_text("".join(f"other-{i}: {{group: g}}\n" for i in range(5)))
    res = _import(path, tmp_path / "s", "--coords", str(coords))
    assert res.exit_code == 0
    assert "c.yaml:5ofitsruns('other-0','other-1',...)areinnorunofthispull" in "".join(res.output.split())


def test_a_run_in_two_of_the_files_is_refused_before_any_is_imported(tmp_path):
    table = small_table()
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    table[table["step"] <= 20].to_csv(first, index=False)  # one export split in two files
    table[table["step"] > 20].to_csv(second, index=False)
    res = CliRunner().invoke(app, ["import", "csv", str(first), str(second), "--run", "run", "--step", "step",
                                   "--tokens", "tok", "--metric", "eval/loss=loss", "--coord-column", "active_params=params",
                                   "--coord-column", "stop_after_steps=T", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert (f"run 'a' is in {first} and in {second}: a run's rows go in one file (join them)"
            in " ".join(res.output.split()))
    assert not (tmp_path / "s").exists()  # nothing imported


def test_one_file_given_by_two_paths_is_read_once(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["import", "csv", "t.csv", str(path), "--run", "run", "--step", "step", "--tokens",
                                   "tok", "--metric", "eval/loss=loss", "--coord-column", "active_params=params",
                                   "--coord-column", "stop_after_steps=T", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert sorted(Store(tmp_path / "s").runs()["run_id"]) == ["a", "b"]



def test_a_parquet_table_with_list_and_struct_columns_keeps_them_as_text_labels(tmp_path):
    """Tags, histograms or a nested config in a parquet export (list and struct columns no option maps) were a bug
    (unhashable cells): they are kept as JSON text, a run's label where they hold one value."""
    rows = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "step": [100, 200, 300] * 2,
                         "loss": [4.0, 3.5, 3.2, 4.1, 3.6, 3.3]})
    rows["tags"] = [[1, 2]] * 3 + [[3]] * 3
    rows["cfg"] = [{"lr": 1e-3, "sizes": [1.5, 2.0]}] * 3 + [{"lr": 1e-3, "sizes": [1.5]}, None, {"lr": 2e-3, "sizes": []}]
    path = tmp_path / "runs.parquet"
    rows.to_parquet(path)
    res = CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric",
                                   "eval/loss=loss", "--coord", "active_params=1e6", "--coord", "stop_after_steps=300",
                                   "--coord", "tokens_per_step=1000", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    store = Store(tmp_path / "s")
    config = {r["run_id"]: json.loads(r["config_json"]) for _, r in store.runs().iterrows()}
    assert config["a"]["tags"] == "[1, 2]" and config["b"]["tags"] == "[3]"
    assert json.loads(config["a"]["cfg"]) == {"lr": 1e-3, "sizes": [1.5, 2.0]} and "cfg" not in config["b"]  # varies
    h = store.history().sort_values(["run_id", "step"])
    np.testing.assert_array_equal(h["value"], rows["loss"])


def test_a_table_imported_again_with_replace_replaces_a_damaged_history_file(tmp_path):
    """The damaged-history hint names what works for an import (its --replace; --full is pull's), and --replace reads
    the run anew over the damaged file (it failed on that file as without it)."""
    path = tmp_path / "t.csv"
    path.write_text("run,step,loss\na,100,4.0\na,300,3.0\nb,100,4.1\nb,300,3.1\n")
    args = ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric", "eval/loss=loss", "--coord",
            "active_params=1e6", "--coord", "stop_after_steps=300", "--coord", "tokens_per_step=1000", "--store",
            str(tmp_path / "st")]
    assert CliRunner().invoke(app, args).exit_code == 0
    (damaged,) = (tmp_path / "st" / "history").glob("a-*")
    damaged.write_bytes(damaged.read_bytes()[:300])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "read the run anew (`ladder pull` with --full, `ladder import` with --replace)" in \
        " ".join(res.stderr.split()), res.output
    res = CliRunner().invoke(app, [*args, "--replace"])
    assert res.exit_code == 0, res.output
    h = Store(tmp_path / "st").history().sort_values(["run_id", "step"])
    assert h["value"].tolist() == [4.0, 3.0, 4.1, 3.1]


def test_a_loss_logged_as_perplexity_is_warned_of(tmp_path):
    path = tmp_path / "ppl.csv"
    path.write_text("run,step,loss\na,100,800\na,200,120\na,300,30.5\na,500,19.9\n")  # perplexity, then a loss in nats
    res = CliRunner().invoke(app, ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric",
                                   "eval/loss=loss", "--coord", "active_params=1e6", "--coord", "stop_after_steps=500",
                                   "--coord", "tokens_per_step=1000", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert "a: eval/loss: 3 values above 20 (first at step 100), more than the cross-entropy in nats of a uniform " \
           "guess over 400 million tokens: a loss logged as perplexity?" in " ".join(res.stderr.split()), res.output
    assert Store(tmp_path / "s").history()["value"].tolist() == [800, 120, 30.5, 19.9]  # kept as logged


def _stored_losses(store) -> pd.DataFrame:
    h = Store(store).history()
    return h[h["metric"] == "eval/loss"].sort_values(["run_id", "step"])[["run_id", "step", "value"]].reset_index(drop=True)


def _import_long(path, store, *extra: str):
    return CliRunner().invoke(app, ["import", "csv", str(path), "--step", "step", "--tokens", "tok",
                                    "--metric", "eval/loss=value", "--coord-column", "active_params=params",
                                    "--coord-column", "stop_after_steps=T", "--coord", "total_params=unknown",
                                    "--coord", "fit_flops_per_token=unknown", "--store", str(store), *extra])


@pytest.mark.parametrize("every", [1, 2], ids=["every metric at every step", "the loss at every other step"])
def test_a_long_table_is_refused_with_the_pivot_that_imports_it_as_the_wide_one(tmp_path, every):
    """One row per run, step and metric (the metric named in a column): read as it was, the rows of a step were
    taken for a resumed run's and merged, the last metric's value stored as the loss, with exit 0."""
    wide = small_table().drop(columns="bpb")
    wide.to_csv(tmp_path / "wide.csv", index=False)
    assert _import(tmp_path / "wide.csv", tmp_path / "wide").exit_code == 0
    long = wide.melt(id_vars=["run", "step", "tok", "params", "T"], value_vars=["loss", "lr"], var_name="metric")
    long = long[(long["metric"] == "lr") | (long["step"] % (10 * every) == 0)]  # a loss logged less often than the LR
    long.sort_values(["run", "step", "metric"]).to_csv(tmp_path / "long.csv", index=False)
    res = _import_long(tmp_path / "long.csv", tmp_path / "long", "--run", "run")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and not (tmp_path / "long").exists()
    first = 10 * every
    assert f"run 'a' has 2 rows at step {first} whose values differ, told apart by column 'metric' ('loss', 'lr')" in said
    pivot = re.search(r"df\.(pivot\(.*?\))\.reset_index\(\)", said).group(1)
    df = pd.read_csv(tmp_path / "long.csv")
    eval("df." + pivot, {"df": df}).reset_index().to_csv(tmp_path / "pivoted.csv", index=False)  # as a user pastes it
    assert _import(tmp_path / "pivoted.csv", tmp_path / "pivoted").exit_code == 0
    losses = _stored_losses(tmp_path / "wide")
    pd.testing.assert_frame_equal(_stored_losses(tmp_path / "pivoted"),
                                  losses[losses["step"] % first == 0].reset_index(drop=True))


def test_a_table_of_several_runs_imported_without_its_run_column_is_pointed_to_it(tmp_path):
    wide = small_table().drop(columns="bpb").rename(columns={"loss": "value"})
    wide.to_csv(tmp_path / "runs.csv", index=False)
    res = _import_long(tmp_path / "runs.csv", tmp_path / "s")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "told apart by column 'run' ('a', 'b')" in said
    assert "; or, where each run is a run of its own, map it with --run run; or, where they are a run's steps logged " \
           "again (a restart), drop column 'run' from the table" in said


@pytest.mark.parametrize("apart", ["time", "commit", "iteration"])
def test_a_resumed_run_whose_rows_a_time_or_commit_tells_apart_is_merged_not_taken_for_a_long_table(tmp_path, apart):
    """A run restarted from an earlier checkpoint logs a third of its steps again, other values, each row with the
    time, the commit or the attempt's own iteration count that logged it: its steps logged again are merged (the
    later value kept), as before."""
    steps = np.arange(10, 1010, 10)
    again = np.arange(300, 2010, 10)
    cells = {"time": [f"2026-01-0{d}T{s // 60:02d}:{s % 60:02d}:00" for d, ss in ((1, steps), (2, again)) for s in ss],
             "commit": ["a1b2c3"] * len(steps) + ["d4e5f6"] * len(again),
             "iteration": np.r_[steps, again - 300]}[apart]
    pd.DataFrame({"step": np.r_[steps, again], "value": np.r_[3 - steps / 1e4, 3.01 - again / 1e4], apart: cells,
                  "tok": np.r_[steps, again] * 50, "params": 1000, "T": 2000}).to_csv(tmp_path / "hero.csv", index=False)
    res = _import_long(tmp_path / "hero.csv", tmp_path / "s")
    said = " ".join(res.output.split())
    assert res.exit_code == 0, said
    assert "71 values logged again at steps already logged with another value (a resumed run); the later value kept" in said
    h = Store(tmp_path / "s").history()
    assert h.loc[h["step"] == 500, "value"].item() == pytest.approx(3.01 - 0.05)


def test_a_steps_train_and_eval_rows_named_in_a_column_are_merged_cell_by_cell(tmp_path):
    """A text column that tells a step's rows apart is no long table where each row fills its own metrics."""
    wide = small_table().drop(columns="bpb")
    wide.to_csv(tmp_path / "wide.csv", index=False)
    assert _import(tmp_path / "wide.csv", tmp_path / "wide").exit_code == 0
    split = pd.concat([wide.assign(split="eval", lr=np.nan), wide.assign(split="train", loss=np.nan)])
    split.sort_values(["run", "step"], kind="stable").to_csv(tmp_path / "split.csv", index=False)
    res = _import(tmp_path / "split.csv", tmp_path / "split")
    assert res.exit_code == 0, res.output
    pd.testing.assert_frame_equal(_stored_losses(tmp_path / "split"), _stored_losses(tmp_path / "wide"))


def test_a_long_table_of_final_values_one_step_per_run_is_refused_too(tmp_path):
    """One row per run and metric at its last step (a table of final values): no resumed run logs one step over
    and over with other values in a column that names them."""
    rows = [{"run": r, "step": 40, "tok": 2000, "params": p, "T": 40, "metric": m, "value": v}
            for r, p in (("a", 1000), ("b", 2000)) for m, v in (("loss", 3.1), ("acc", 0.6), ("ppl", 22.2))]
    pd.DataFrame(rows).to_csv(tmp_path / "finals.csv", index=False)
    res = _import_long(tmp_path / "finals.csv", tmp_path / "s", "--run", "run")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "run 'a' has 3 rows at step 40 whose values differ, told apart by column 'metric' " \
                                  "('loss', 'acc', 'ppl')" in said


def test_a_run_resumed_late_with_its_attempts_own_iteration_count_is_merged(tmp_path):
    """Resumed from its checkpoint at 80%, each row with the iteration count of the attempt that logged it (0 again
    from the resume): every count comes back twice, each pair 800 steps apart, so any two overlap over most of the
    run; a counter's values are many, no metric's names."""
    first, again = np.arange(0, 901, 10), np.arange(800, 1001, 10)
    pd.DataFrame({"step": np.r_[first, again], "value": np.r_[3 - first / 1e4, 3.01 - again / 1e4],
                  "iteration": np.r_[first, again - 800], "tok": np.r_[first, again] * 50, "params": 1000,
                  "T": 1000}).to_csv(tmp_path / "hero.csv", index=False)
    res = _import_long(tmp_path / "hero.csv", tmp_path / "s")
    assert res.exit_code == 0, res.output
    assert "11 values logged again at steps already logged with another value (a resumed run)" in " ".join(res.output.split())


@pytest.mark.parametrize("extra, said", [
    (("--metric", "eval/loss=bpb"), "--metric eval/loss given twice (eval/loss=loss and eval/loss=bpb): keep one"),
    (("--coord-column", "active_params=T"),
     "--coord-column active_params given twice (active_params=params and active_params=T): keep one"),
    (("--coord", "total_params=5000"),
     "--coord total_params given twice (total_params=unknown and total_params=5000): keep one"),
])
def test_an_option_given_twice_with_two_values_is_refused_not_the_last_one_taken(tmp_path, extra, said):
    """The last of two values silently won: a copy-paste slip imported another metric's column as eval/loss."""
    path = tmp_path / "t.csv"
    small_table().to_csv(path, index=False)
    res = _import(path, tmp_path / "s", *extra)
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {said}", res.output
    assert not (tmp_path / "s").exists()
    assert _import(path, tmp_path / "s", "--metric", "eval/loss=loss").exit_code == 0  # the same twice: one


def test_a_run_exported_in_chunks_is_told_that_replace_drops_the_stored_rows(tmp_path):
    """Refused, a second chunk's import offered --replace, which dropped the stored evals with no word of them."""
    table = small_table()
    first, second = tmp_path / "chunk1.csv", tmp_path / "chunk2.csv"
    table[table["step"] <= 20].to_csv(first, index=False)
    table[table["step"] > 20].to_csv(second, index=False)
    assert _import(first, tmp_path / "s").exit_code == 0
    res = _import(second, tmp_path / "s")
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "pass --replace to replace the stored run(s) (their stored rows are dropped, not " \
        "kept beside the new ones)" in said and "a run exported in chunks, a new file each, is not continued by the " \
        "next file: export it to one file that grows, which each import reads anew" in said, res.output
    res = _import(second, tmp_path / "s", "--replace")
    assert res.exit_code == 0 and f"csv:{second.resolve()} has a run with the same id; its 2 stored rows are " \
        "dropped" in " ".join(res.stderr.split()), res.output
    assert Store(tmp_path / "s").history(["a"], ["eval/loss"])["step"].tolist() == [30, 40]


def test_a_parquet_table_is_named_parquet_wherever_its_source_is_shown(tmp_path, monkeypatch):
    """The store keys every table "csv:PATH"; `ladder runs`, `import` and a clash with another source say parquet."""
    from ladder.cli.app import console

    monkeypatch.setattr(console, "width", 200)
    path = tmp_path / "ladder.parquet"
    small_table().to_parquet(path, index=False)
    store = tmp_path / "s"
    first = _import(path, store)
    title = "".join(first.stdout.split("┏")[0].split())  # the table's title, folded to the table's width
    assert first.exit_code == 0 and title == f"Pulledfromparquet:{path}", first.output
    listed = CliRunner().invoke(app, ["runs", "--store", str(store)])
    assert listed.exit_code == 0 and f"parquet:{path}" in listed.stdout and "csv:" not in listed.stdout, listed.output
    assert Store(store).runs()["source"].tolist() == [f"csv:{path}"] * 2  # the key stores hold, unchanged
    other = tmp_path / "other.csv"
    small_table().to_csv(other, index=False)
    clash = _import(other, store)
    assert clash.exit_code == 2, clash.output
    assert f"is already in the store from parquet:{path}" in clash.output and f"csv:{other} has a run" in clash.output
