"""The parquet store: exact tables, lookups, atomic commits at every interruption point, clean-up."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ladder.data.sources.pull import pull
from ladder.data.sources.table import RunRef, SourceRun, raw_frame
from ladder.data.store import RUNS_COLUMNS, Store
from ladder.errors import LadderError

COORDS = {"stop_after_steps": 100, "tokens_per_step": 10, "active_params": 1000, "total_params": 5000,
          "fit_flops_per_token": 6.5e3}


class MemorySource:
    """A source holding runs in memory: {run_id: (name, [(step, metric, value), ...])}."""

    key = "memory:test"

    def __init__(self, runs, fail_on=None):
        self.data, self.fail_on, self.reads = runs, fail_on, []

    def runs(self):
        return [RunRef(rid, self.key, label=rid, name=name, config={**COORDS, "group": "g", "role": "rung"})
                for rid, (name, _) in self.data.items()]

    def read(self, ref, cursor=None):
        self.reads.append(ref.run_id)
        if ref.run_id == self.fail_on:
            raise KeyboardInterrupt
        done = (cursor or {}).get("n", 0)
        rows = self.data[ref.run_id][1][done:]
        frame = raw_frame([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
        return SourceRun(ref.run_id, self.key, frame, {"n": done + len(rows)}, "finished",
                         config=ref.config, name=ref.config and self.data[ref.run_id][0], replace=cursor is None)


def series(n, metric="eval/loss", base=3.0):
    return [(s, metric, base + 1.0 / s) for s in range(1, n + 1)]


def runs3():
    return {"r1": ("rung-1", series(10)), "r2": ("rung-2", series(20)), "r3": ("rung-3", series(30))}


def snapshot(store):
    return store.runs(), store.history(include_nonfinite=True), (store.root / "manifest.json").read_text()


def same(a, b):
    return a[0].equals(b[0]) and a[1].equals(b[1]) and a[2] == b[2]


def test_empty_store_has_the_documented_columns(tmp_path):
    store = Store(tmp_path / "none")
    assert not store.exists()
    assert list(store.runs().columns) == list(RUNS_COLUMNS) and len(store.runs()) == 0
    assert list(store.history().columns) == ["run_id", "step", "tokens", "fraction", "metric", "value"]


def test_tables_hold_exactly_what_was_pulled(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    runs = store.runs()
    assert list(runs.columns) == list(RUNS_COLUMNS)
    assert {c: str(t) for c, t in runs.dtypes.items()} == {c: ("str" if t == "str" else t) for c, t in RUNS_COLUMNS.items()}
    assert list(runs["name"]) == ["rung-1", "rung-2", "rung-3"] and list(runs["rows"]) == [10, 20, 30]
    assert list(runs["planned_tokens"]) == [1000] * 3 and list(runs["last_step"]) == [10, 20, 30]
    h = store.history()
    assert list(h.columns) == ["run_id", "step", "tokens", "fraction", "metric", "value"]
    assert len(h) == 60 and not h.duplicated(["run_id", "metric", "step"]).any()
    r2 = h[h["run_id"] == "r2"]
    np.testing.assert_array_equal(r2["step"], np.arange(1, 21))
    np.testing.assert_array_equal(r2["value"], 3.0 + 1.0 / np.arange(1, 21))
    np.testing.assert_array_equal(r2["tokens"], 10 * np.arange(1, 21))
    np.testing.assert_array_equal(r2["fraction"], np.arange(1, 21) / 100)


def test_a_repair_of_a_lost_manifest_keeps_the_stores_renames_and_fit_metric(tmp_path):
    from ladder.data.resolve import MetricSettings
    from ladder.data.storerepair import repair

    store = Store(tmp_path)
    settings = MetricSettings(fit_metric="eval/mine", renames={"eval/loss": "eval/mine"})
    pull(store, MemorySource(runs3()), settings=settings)
    (tmp_path / "manifest.json").write_text('{"format": ')  # damaged
    report = repair(store)
    assert report.rebuilt == ("manifest (settings read back from the last runs table: fit metric eval/mine, renames "
                              "eval/loss=eval/mine)",)
    assert store.settings() == settings and len(store.history(metrics="eval/mine")) == 60


def test_lookups_by_id_and_name(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    assert store.run("r2")["name"] == "rung-2" and store.run("rung-3")["run_id"] == "r3"
    assert len(store.history(["rung-1", "r3"])) == 40
    assert set(store.history(metrics=["train/loss"])["run_id"]) == set()
    with pytest.raises(LadderError, match="no run 'rung-9'"):
        store.run("rung-9")
    with pytest.raises(LadderError, match="no run 'Rung-2' in .*; did you mean 'rung-2'\\? `ladder runs"):
        store.run("Rung-2")  # a name in another case, or a typo of one, is pointed to
    with pytest.raises(LadderError, match="no run 'rung2' in .*; did you mean 'rung-2'\\?"):
        store.run("rung2")
    pull(store, MemorySource({"r4": ("rung-1", series(5))}))
    with pytest.raises(LadderError, match="run name 'rung-1' is ambiguous.*r1, r4"):
        store.history("rung-1")


def test_interrupted_read_leaves_the_store_as_it_was_and_resumes(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource({"r0": ("older", series(7))}))
    before = snapshot(store)
    data = {"r0": ("older", series(7)), **runs3()}
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource(data, fail_on="r3"))
    assert same(snapshot(store), before)
    source = MemorySource(data)
    result = pull(store, source)
    assert source.reads == ["r0", "r3"]  # r1, r2 were staged by the cut-off pull
    assert result.resumed == 2 and result.unchanged == 1
    assert len(store.history()) == 7 + 10 + 20 + 30


def test_crash_while_committing_leaves_the_store_as_it_was(tmp_path, crash_at_manifest):
    store = Store(tmp_path)
    pull(store, MemorySource({"r0": ("older", series(7))}))
    before = snapshot(store)
    crash_at_manifest.arm()
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource({"r0": ("older", series(7)), **runs3()}))
    assert same(snapshot(store), before)
    crash_at_manifest.disarm()
    source = MemorySource({"r0": ("older", series(7)), **runs3()})
    assert pull(store, source).resumed == 3 and source.reads == ["r0"]
    assert len(store.history()) == 67


def test_torn_journal_line_is_ignored(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource(runs3(), fail_on="r3"))
    (journal,) = (tmp_path / "pending").glob("*.jsonl")
    with open(journal, "a") as f:
        f.write('{"key": "memory:test", "run_id": "r3", "row": {"run')  # killed mid-line
    source = MemorySource(runs3())
    pull(store, source)
    assert source.reads == ["r3"] and len(store.history()) == 60


def test_an_interrupted_first_pull_says_to_run_it_again(tmp_path):
    from typer.testing import CliRunner

    from ladder.cli import app

    store = Store(tmp_path / "s")
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource(runs3(), fail_on="r3"))  # stopped before its first commit
    res = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "stopped before committing; run that command again" in res.output
    pull(store, MemorySource(runs3()))
    assert CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "s")]).exit_code == 0


def test_commit_removes_files_nothing_names(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    grown = {rid: (name, rows + [(len(rows) + 1, "eval/loss", 1.0)]) for rid, (name, rows) in runs3().items()}
    pull(store, MemorySource(grown), full=True)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    on_disk = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet")}
    assert on_disk == {manifest["runs"], *manifest["history"].values()}
    assert len(store.history()) == 63


def test_one_writer_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr("ladder.data.store.STORE_WAIT", 0.3)
    store = Store(tmp_path)
    with store.writer("a"):
        start = time.monotonic()
        with pytest.raises(LadderError, match=r"another pull is writing to this store \(waited 0 s for it\)"):
            with store.writer("b"):
                pass
        assert time.monotonic() - start >= 0.3
    with store.writer("b"):
        pass


def test_a_pull_waits_for_another_to_finish(tmp_path):
    store, holding, done = Store(tmp_path), threading.Event(), threading.Event()

    def first():
        with store.writer("a"):
            holding.set()
            time.sleep(0.6)
        done.set()

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    pull(store, MemorySource(runs3()))  # waits for the first writer instead of being refused
    assert done.is_set() and len(store.runs()) == 3
    thread.join()


def test_nonfinite_values_are_stored_but_left_out_of_fits(tmp_path):
    store = Store(tmp_path)
    rows = series(5) + [(6, "eval/loss", float("nan")), (7, "eval/loss", float("inf"))]
    pull(store, MemorySource({"r1": ("rung-1", rows)}))
    assert len(store.history()) == 5 and len(store.history(include_nonfinite=True)) == 7
    report = json.loads(store.run("r1")["report_json"])
    assert report["nonfinite"] == [["eval/loss", 2, 6]]


def test_settings_persist(tmp_path):
    from ladder.data.resolve import MetricSettings

    store = Store(tmp_path)
    pull(store, MemorySource({"r1": ("rung-1", series(3, metric="loss_c4"))}),
         settings=MetricSettings(fit_metric="eval/c4", renames={"loss_c4": "eval/c4"}))
    assert store.settings() == MetricSettings(fit_metric="eval/c4", renames={"loss_c4": "eval/c4"})
    assert set(store.history()["metric"]) == {"eval/c4"}
    assert isinstance(store.history()["metric"].dtype, pd.CategoricalDtype)


def test_a_staged_run_committed_meanwhile_by_another_pull_is_read_again(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource(runs3(), fail_on="r3"))  # r1, r2 staged
    other = MemorySource({"r1": ("rung-1", series(10, base=9.0))})
    other.key = "memory:other"
    pull(store, other)  # commits r1 from another source
    before = snapshot(store)
    with pytest.raises(LadderError, match="run id 'r1' is already in the store from memory:other .10 rows.*--replace"):
        pull(store, MemorySource(runs3()))
    assert same(snapshot(store), before)
    source = MemorySource(runs3())
    result = pull(store, source, replace=True)
    assert result.resumed == 1 and source.reads == ["r1", "r3"]  # r2 reused; r1 read again
    assert any("replaced: run id 'r1'" in m and "memory:other" in m for m in result.messages)
    h = store.history("r1")
    np.testing.assert_array_equal(h["value"], 3.0 + 1.0 / np.arange(1, 11))


def test_many_runs_replaced_are_said_in_full_up_to_a_few_and_counted_past_them(tmp_path):
    from ladder.data.sources.pull import REPLACED_SAID

    store = Store(tmp_path)
    many = {f"r{i}": (f"rung-{i}", series(5)) for i in range(REPLACED_SAID + 4)}
    other = MemorySource(many)
    other.key = "memory:other"
    pull(store, other)
    told = [m for m in pull(store, MemorySource(many), replace=True).messages if m.startswith("replaced")]
    assert len(told) == REPLACED_SAID
    assert all(m.startswith("replaced: run id 'r") for m in told[:-1])
    assert told[-1] == (f"replaced 5 more runs stored from another source or with other coordinates: "
                        f"{', '.join(f'r{i}' for i in range(REPLACED_SAID - 1, REPLACED_SAID + 4))}")
    few = {k: v for k, v in list(many.items())[:REPLACED_SAID]}
    told = [m for m in pull(store, MemorySource(few), replace=True).messages if m.startswith("replaced")]
    assert told == []  # the same source: nothing replaced
    third = MemorySource(few)
    third.key = "memory:third"
    told = [m for m in pull(store, third, replace=True).messages if m.startswith("replaced")]
    assert len(told) == REPLACED_SAID and all("memory:third has a run with the same id" in m for m in told)


def test_corrected_coordinates_apply_to_stored_rows(tmp_path):
    from ladder.data.sources import CoordinateOverrides

    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    source = MemorySource(runs3())
    assert pull(store, source).unchanged == 3 and source.reads == ["r1", "r2", "r3"]
    fixed = CoordinateOverrides(per_run={"rung-2": {"stop_after_steps": 40}})
    before = snapshot(store)
    with pytest.raises(LadderError, match=r"run 'r2' is stored with stop_after_steps=100 \(this pull gives 40\).*--replace"):
        pull(store, MemorySource(runs3()), overrides=fixed)
    assert same(snapshot(store), before)
    result = pull(store, MemorySource(runs3()), overrides=fixed, replace=True)
    assert "rung-2: coordinates changed: stop_after_steps 100 → 40" in result.messages
    assert [r.run_id for r in result.pulled] == ["r2"] and result.unchanged == 2
    h = store.history("r2")
    assert store.run("r2")["stop_after_steps"] == 40 and len(h) == 20
    np.testing.assert_array_equal(h["fraction"], np.arange(1, 21) / 40)
    assert json.loads(store.run("r2")["report_json"])["relogged"] == 0
    # later pulls without the correction keep it: the run's own config (100 steps) does not replace it
    for full in (False, True):
        again = pull(store, MemorySource(runs3()), full=full)
        assert not any("coordinates changed" in m for m in again.messages)
        assert store.run("r2")["stop_after_steps"] == 40 and store.run("r1")["stop_after_steps"] == 100
    np.testing.assert_array_equal(store.history("r2")["fraction"], np.arange(1, 21) / 40)
    assert "ladder_given" not in store.config("r2")  # kept beside the run's own config, not in it
    # a new value given later is a change like the first (refused without --replace)
    with pytest.raises(LadderError, match=r"stop_after_steps=40 \(this pull gives 20\)"):
        pull(store, MemorySource(runs3()), overrides=CoordinateOverrides(per_run={"r2": {"stop_after_steps": 20}}))


def test_cli_reading_a_missing_store_or_run(tmp_path):
    from typer.testing import CliRunner

    from ladder.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["runs", "--store", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no store here" in res.output and len(res.output.strip().splitlines()) == 1
    pull(Store(tmp_path / "s"), MemorySource(runs3()))
    res = runner.invoke(app, ["history", "rung-7", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "no run 'rung-7'" in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(app, ["history", "rung-2", "--store", str(tmp_path / "s"), "--format", "json"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 20
    as_csv = runner.invoke(app, ["history", "rung-2", "--store", str(tmp_path / "s"), "--format", "csv"])
    import io

    import pandas as pd
    table = pd.read_csv(io.StringIO(as_csv.stdout))  # the JSON holds every digit the CSV holds, as plain JSON
    assert [r["value"] for r in json.loads(res.stdout)] == table["value"].tolist()
    assert "\\/" not in res.stdout
    for fmt, same in (([], as_csv), (["--format", "json"], res)):  # --out -: standard output, CSV by default
        dash = runner.invoke(app, ["history", "rung-2", "--store", str(tmp_path / "s"), "--out", "-", *fmt])
        assert dash.exit_code == 0 and dash.stdout == same.stdout, dash.output
    assert not (tmp_path / "-").exists() and not Path("-").exists()
    bad = tmp_path / "coords.yaml"
    bad.write_text("rung-1: [unclosed\n")
    res = runner.invoke(app, ["pull", "local", str(tmp_path), "--coords", str(bad), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "malformed YAML" in res.output and len(res.output.strip().splitlines()) == 1


# ---- one damaged history file ---------------------------------------------------------------------
def _history_path(store, run_id):
    return store.root / json.loads((store.root / "manifest.json").read_text())["history"][run_id]


def _rewrite(path, change):
    import pyarrow.parquet as pq

    pq.write_table(change(pq.read_table(path)), path)


def _as_folder(path):
    path.unlink()
    path.mkdir()


DAMAGES = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:30]),
    "empty": lambda p: p.write_bytes(b""),
    "a folder": _as_folder,
    "no value column": lambda p: _rewrite(p, lambda t: t.drop(["value"])),
    "values as text": lambda p: _rewrite(p, lambda t: t.set_column(
        4, "value", t["value"].cast("string"))),
    "plain metric names": lambda p: _rewrite(p, lambda t: t.set_column(
        3, "metric", t["metric"].combine_chunks().dictionary_decode())),
    "steps as 32-bit": lambda p: _rewrite(p, lambda t: t.set_column(0, "step", t["step"].cast("int32"))),
}


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_history_file_is_named_with_the_way_out(tmp_path, how):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    path = _history_path(store, "r2")
    DAMAGES[how](path)
    with pytest.raises(LadderError) as err:
        store.history()
    message = str(err.value)
    assert message.startswith(f"{path}: damaged history of run 'rung-2' (id r2) (")
    assert f"`ladder runs --repair --store {tmp_path}` drops that run" in message
    assert "pull it again from memory:test" in message and "\n" not in message
    assert len(store.history(["r1", "r3"])) == 40  # the other runs read as before
    assert [r for r, _ in store.damaged()] == ["r2"]
    report = store.repair()
    assert [r for r, _ in report.dropped] == ["r2"] and report.kept == 2
    pull(store, MemorySource(runs3()))
    assert len(store.history()) == 60


def test_a_missing_history_file_is_named(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    path = _history_path(store, "r2")
    path.unlink()
    with pytest.raises(LadderError) as err:
        store.history()
    assert str(err.value).startswith(f"{path}: a history file the store names is missing; ")
    assert "--repair" in str(err.value)


def test_a_fit_over_a_damaged_run_stops_with_one_line_naming_the_file(tmp_path):
    from typer.testing import CliRunner

    from ladder.cli import app

    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    path = _history_path(store, "r2")
    DAMAGES["values as text"](path)
    before = path.read_bytes()
    res = CliRunner().invoke(app, ["fit", "endpoint", "--store", str(tmp_path), "--metric", "eval/loss"])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error: {path}: damaged history of run 'rung-2'") and "--repair" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert path.read_bytes() == before  # reading never changes the store


def test_a_pull_skips_a_run_whose_stored_history_is_damaged_and_full_reads_it_anew(tmp_path):
    from ladder.data.sources.pull import PullSkipped

    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    path = _history_path(store, "r2")
    DAMAGES["no value column"](path)
    grown = {**runs3(), "r2": ("rung-2", series(25)), "r3": ("rung-3", series(35))}
    with pytest.raises(PullSkipped) as err:
        pull(store, MemorySource(grown))
    message = str(err.value)
    assert message.startswith(f"skipped r2: {path}: damaged history file (no column 'value'); read the run anew (`ladder pull` with --full")
    assert "--repair" in message
    assert _history_path(store, "r2") == path  # left as it was, not replaced by the new rows alone
    assert len(store.history(["r3"])) == 35  # the runs beside it were pulled
    pull(store, MemorySource(grown), full=True)
    h = store.history()
    assert len(h) == 10 + 25 + 35 and not path.exists()
