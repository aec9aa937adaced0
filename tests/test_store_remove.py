"""Taking runs out of the store: `Store.remove` (one commit, the other runs untouched, safe at every crash
point) and `ladder runs --remove` (confirmation, --yes, one-line errors)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import ladder.data.store as store_module
from fits.synthetic import endpoint_losses
from ladder.cli import app
from ladder.data.sources import CoordinateOverrides
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.errors import LadderError
from tests.test_store import MemorySource, runs3, same, series, snapshot

runner = CliRunner()


def _manifest(store):
    return json.loads((store.root / "manifest.json").read_text())


def _files(store):
    """The store's parquet files on disk, relative to its root."""
    return {str(p.relative_to(store.root)) for p in store.root.rglob("*.parquet")}


def _named(store):
    manifest = _manifest(store)
    return {manifest["runs"], *manifest["history"].values()}


# ---- the store ----------------------------------------------------------------------------------
def test_removing_a_run_leaves_the_others_byte_identical_and_pulling_again_restores_it(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    before = _manifest(store)
    kept_bytes = {r: (tmp_path / before["history"][r]).read_bytes() for r in ("r1", "r3")}
    r2_file = tmp_path / before["history"]["r2"]
    original = store.history("r2")
    gone = store.remove("rung-2")
    assert list(gone["run_id"]) == ["r2"] and list(gone["rows"]) == [20] and list(gone["source"]) == ["memory:test"]
    assert "cursor_json" not in gone
    after = _manifest(store)
    assert after["generation"] == before["generation"] + 1
    assert after["history"] == {r: before["history"][r] for r in ("r1", "r3")}
    assert {r: (tmp_path / after["history"][r]).read_bytes() for r in ("r1", "r3")} == kept_bytes
    assert not r2_file.exists() and _files(store) == _named(store)
    assert list(store.runs()["run_id"]) == ["r1", "r3"]
    assert len(store.history()) == 10 + 30
    with pytest.raises(LadderError, match="no run 'r2'"):
        store.run("r2")
    source = MemorySource(runs3())
    result = pull(store, source)
    assert [r.run_id for r in result.pulled] == ["r2"] and result.unchanged == 2
    pd.testing.assert_frame_equal(store.history("r2"), original)
    assert list(store.runs()["run_id"]) == ["r1", "r2", "r3"]


def test_removing_several_runs_and_the_last_ones(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    gone = store.remove(["r3", "rung-1", "r1"])  # one run named twice is removed once
    assert sorted(gone["run_id"]) == ["r1", "r3"]
    assert list(store.runs()["name"]) == ["rung-2"] and len(store.history()) == 20
    store.remove("r2")
    assert store.exists() and store.runs().empty and store.history().empty
    assert _files(store) == _named(store) == {_manifest(store)["runs"]}


def test_an_ambiguous_or_unknown_run_removes_nothing(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    pull(store, MemorySource({"r4": ("rung-1", series(5))}))
    before = snapshot(store)
    with pytest.raises(LadderError, match="run name 'rung-1' is ambiguous.*r1, r4.*name it by its id"):
        store.remove("rung-1")
    with pytest.raises(LadderError, match="no run 'rung-9'"):
        store.remove(["r2", "rung-9"])
    assert same(snapshot(store), before)
    store.remove("r4")
    assert list(store.runs()["run_id"]) == ["r1", "r2", "r3"] and store.run("rung-1")["run_id"] == "r1"


def test_a_crash_before_the_manifest_is_replaced_leaves_the_store_as_it_was(tmp_path, crash_at_manifest):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    before = snapshot(store)
    crash_at_manifest.arm()
    with pytest.raises(KeyboardInterrupt):
        store.remove("r2")
    assert same(snapshot(store), before)
    assert len(_files(store)) == len(_named(store)) + 1  # the new runs table, which nothing names
    crash_at_manifest.disarm()
    store.remove("r2")
    assert list(store.runs()["run_id"]) == ["r1", "r3"] and _files(store) == _named(store)


def test_a_crash_after_the_commit_leaves_only_a_file_nothing_names(tmp_path, monkeypatch):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    r2_file = tmp_path / _manifest(store)["history"]["r2"]

    def crash(root, manifest):
        raise KeyboardInterrupt  # killed after the manifest was replaced, before the clean-up

    monkeypatch.setattr(store_module, "collect_garbage", crash)
    with pytest.raises(KeyboardInterrupt):
        store.remove("r2")
    monkeypatch.undo()
    assert list(store.runs()["run_id"]) == ["r1", "r3"] and len(store.history()) == 40
    assert r2_file.exists() and str(r2_file.relative_to(tmp_path)) not in _named(store)
    assert store.repair().dropped == () and list(store.runs()["run_id"]) == ["r1", "r3"]
    pull(store, MemorySource({"r5": ("rung-5", series(5))}))  # the next commit cleans up
    assert not r2_file.exists() and _files(store) == _named(store)


def test_a_pull_staged_before_a_removal_reads_the_removed_run_again(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    grown = {rid: (name, rows + [(len(rows) + 1, "eval/loss", 1.0)]) for rid, (name, rows) in runs3().items()}
    with pytest.raises(KeyboardInterrupt):
        pull(store, MemorySource(grown, fail_on="r3"), full=True)  # r1, r2 staged
    store.remove("r2")
    assert list(store.runs()["run_id"]) == ["r1", "r3"]
    source = MemorySource(grown)
    result = pull(store, source, full=True)
    assert source.reads == ["r2", "r3"] and result.resumed == 1  # r1 kept from the staged pull, r2 read anew
    assert dict(store.runs().set_index("run_id")["rows"]) == {"r1": 11, "r2": 21, "r3": 31}


def test_pull_notes_say_how_to_remove_a_copy(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    result = pull(store, MemorySource({"r1": ("rung-1", series(10)), "r2": ("rung-2", series(20))}))
    (note,) = [n for n in result.notes if "no longer there" in n]
    assert "run 'rung-3'" in note and "`ladder runs --remove r3`" in note
    other = MemorySource({"r1-copy": ("rung-1", series(10))})
    other.key = "memory:other"
    (note,) = [n for n in pull(store, other).notes if "in the store 2 times" in n]
    assert "r1 (memory:test)" in note and "r1-copy (memory:other)" in note
    assert "one source" in note and "`ladder runs --remove ID`" in note


# ---- the command --------------------------------------------------------------------------------
def _runs_cmd(store, *args, **kw):
    return runner.invoke(app, ["runs", "--store", str(store.root), *args], **kw)


def one_error_line(res, *fragments):
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert res.output.startswith("error:") and len(res.output.strip().splitlines()) == 1, res.output
    for f in fragments:
        assert f in text, text


def test_cli_remove_without_a_terminal_needs_yes(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    before = snapshot(store)
    one_error_line(_runs_cmd(store, "--remove", "rung-2"), "stdin is not a terminal", "add --yes", "rung-2")
    assert same(snapshot(store), before)
    res = _runs_cmd(store, "--remove", "rung-2", "--yes")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "removed run 'rung-2' (id r2, 20 values); pulling it again from memory:test restores it" in text
    assert "--coord" not in text  # it was pulled without coordinates given
    listed = _runs_cmd(store, "--format", "json")
    assert listed.exit_code == 0 and [r["run_id"] for r in json.loads(listed.stdout)] == ["r1", "r3"]


def test_cli_remove_asks_on_a_terminal(tmp_path, monkeypatch):
    import ladder.cli.pull as cli_pull

    store = Store(tmp_path)
    pull(store, MemorySource(runs3()), overrides=CoordinateOverrides(per_run={"rung-2": {"stop_after_steps": 40}}))
    before = snapshot(store)
    monkeypatch.setattr(cli_pull, "_interactive", lambda: True)
    res = _runs_cmd(store, "--remove", "rung-2", "--remove", "r2", input="n\n")
    assert res.exit_code == 0, res.output
    row = [line for line in res.output.splitlines() if "rung-2" in line]
    assert len(row) == 1 and all(w in row[0] for w in ("r2", "memory:test", "20"))
    assert "Remove 1 run and their histories? [y/N]" in res.output and "nothing removed" in res.output
    assert same(snapshot(store), before)
    res = _runs_cmd(store, "--remove", "rung-2", input="y\n")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "pulling it again from memory:test with the same --coord/--coords restores it" in text
    assert list(store.runs()["run_id"]) == ["r1", "r3"]


def test_cli_remove_errors(tmp_path):
    store = Store(tmp_path)
    pull(store, MemorySource(runs3()))
    pull(store, MemorySource({"r4": ("rung-1", series(5))}))
    before = snapshot(store)
    one_error_line(_runs_cmd(store, "--remove", "rung-9", "--yes"), "no run 'rung-9'", "`ladder runs --store")
    one_error_line(_runs_cmd(store, "--remove", "rung-1", "--yes"), "'rung-1' is ambiguous", "r1, r4", "name it by its id")
    one_error_line(_runs_cmd(store, "--remove", "r2", "--repair"), "--remove with --repair")
    one_error_line(_runs_cmd(store, "--remove", "r2", "--format", "json", "--yes"), "--remove with --format json")
    one_error_line(runner.invoke(app, ["runs", "--store", str(tmp_path / "none"), "--remove", "r2", "--yes"]),
                   "no store here")
    assert same(snapshot(store), before)
    assert _runs_cmd(store, "--remove", "r4", "--yes").exit_code == 0
    assert list(store.runs()["run_id"]) == ["r1", "r2", "r3"]


def _endpoint_table(runs):
    """Two rows per run, at its middle and last step: the last loss E + A·C^−α with C = 6·N·D."""
    params = np.geomspace(1e6, 1e8, len(runs)).astype(np.int64)
    per_step = params // 5  # 20 tokens per parameter over 100 steps
    loss = endpoint_losses(np.random.default_rng(0), 6.0 * params * 100 * per_step, 1.7, 2e3, 0.2, noise=0.0)
    last = pd.DataFrame({"run": runs, "name": runs, "step": 100, "tok": 100 * per_step, "loss": loss,
                         "params": params, "T": 100, "tps": per_step})
    middle = last.assign(step=50, tok=50 * per_step, loss=loss + 0.3)
    return pd.concat([middle, last]).sort_values(["run", "step"], kind="stable")


def test_a_copy_imported_from_a_second_table_is_removed_and_fits_count_each_run_once(tmp_path):
    names = [f"rung-{i}" for i in range(8)]
    _endpoint_table(names).to_csv(tmp_path / "ladder.csv", index=False)
    copy = _endpoint_table(names).query("run == 'rung-3'").assign(run="rung-3-copy")
    copy.to_csv(tmp_path / "copy.csv", index=False)
    store = tmp_path / "s"
    common = ["--run", "run", "--step", "step", "--tokens", "tok", "--metric", "eval/loss=loss",
              "--coord-column", "active_params=params", "--coord-column", "stop_after_steps=T",
              "--coord-column", "tokens_per_step=tps",
              "--coord", "total_params=unknown", "--coord", "fit_flops_per_token=unknown", "--coord", "role=rung",
              "--store", str(store)]
    for table in ("ladder.csv", "copy.csv"):
        res = runner.invoke(app, ["import", "csv", str(tmp_path / table), *common])
        assert res.exit_code == 0, res.output
    assert "ladder runs --remove ID" in " ".join(res.output.split())

    def fitted_runs():
        res = runner.invoke(app, ["fit", "endpoint", "--store", str(store), "--metric", "eval/loss", "--format", "json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["n_runs"]

    res = runner.invoke(app, ["fit", "endpoint", "--store", str(store), "--metric", "eval/loss"])
    assert res.exit_code == 2 and "runs 'rung-3' (rung-3) and 'rung-3-copy' (rung-3) log the very same eval/loss" in \
        " ".join(res.output.split())  # the fit refuses to count the copy: which one goes is the user's to say
    history = {r: Store(store).history(r) for r in names}
    res = runner.invoke(app, ["runs", "--store", str(store), "--remove", "rung-3-copy", "--yes"])
    assert res.exit_code == 0, res.output
    assert f"pulling it again from csv:{tmp_path / 'copy.csv'}" in " ".join(res.output.split())
    assert fitted_runs() == 8
    assert sorted(Store(store).runs()["run_id"]) == sorted(names)
    for r in names:
        pd.testing.assert_frame_equal(Store(store).history(r), history[r])
    listed = runner.invoke(app, ["runs", "--store", str(store)])
    assert listed.exit_code == 0 and "rung-3-copy" not in listed.output and "rung-7" in listed.output


def test_removing_from_no_store_makes_no_folder(tmp_path):
    with pytest.raises(LadderError, match="no store here; nothing to remove"):
        Store(tmp_path / "none").remove("r1")
    assert not (tmp_path / "none").exists()
