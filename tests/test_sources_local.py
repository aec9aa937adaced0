"""The trainer's run directories (run.yaml, metrics.jsonl, status.json), read incrementally."""

from __future__ import annotations

import json
import re
import shutil
import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder import load_recipe, runfiles
from ladder.cli import app
from ladder.config.plan import plan
from ladder.data.sources import ColumnMap, LocalSource, TableSource
from ladder.data.sources import local as local_source
from ladder.data.sources.pull import pull
from ladder.data.store import Store
from ladder.errors import LadderError

RUNGS = plan(load_recipe("micro-cpu")).rungs


def line(step: int, tokens_per_step: int, **metrics: float) -> str:
    """One line as the trainer's metrics sink writes it."""
    return json.dumps({"step": step, "tokens": step * tokens_per_step, "time": time.time(), **metrics}) + "\n"


def make_run(root, cfg, steps, state="finished", offset=0.0):
    run_dir = root / cfg.name
    run_dir.mkdir(parents=True)
    cfg.save(run_dir / runfiles.CONFIG_FILE)
    evals = set(cfg.eval_steps())
    with open(run_dir / runfiles.METRICS_FILE, "w") as f:
        for s in steps:
            f.write(line(s, cfg.tokens_per_step, **{"train/loss": offset + 5.0 + 1.0 / s, "grad/norm/total": 0.5}))
            if s in evals:
                f.write(line(s, cfg.tokens_per_step, **{"eval/loss": offset + 4.0 + 1.0 / s}))
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": state, "step": max(steps), "updated": time.time()}))
    return run_dir


def expected(cfg, steps, offset=0.0):
    out = {}
    for s in steps:
        out[("train/loss", s)] = offset + 5.0 + 1.0 / s
        out[("grad/norm/total", s)] = 0.5
        if s in set(cfg.eval_steps()):
            out[("eval/loss", s)] = offset + 4.0 + 1.0 / s
    return out


def pairs(h):
    return {(str(m), int(s)): float(v) for m, s, v in zip(h["metric"], h["step"], h["value"])}


def test_a_folder_of_run_directories(tmp_path):
    for cfg in RUNGS[:2]:
        make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    store = Store(tmp_path / "store")
    result = pull(store, LocalSource(tmp_path / "runs"))
    assert sorted(r.name for r in result.pulled) == sorted(c.name for c in RUNGS[:2])
    runs = store.runs().set_index("name")
    for cfg in RUNGS[:2]:
        row = runs.loc[cfg.name]
        assert row["run_id"] == f"micro-cpu/{cfg.name}" and row["role"] == "rung" and row["state"] == "finished"
        assert (row["active_params"], row["stop_after_steps"]) == (cfg.spec.active_params(), cfg.stop_after_steps)
        h = store.history(row["run_id"], include_nonfinite=True)
        assert pairs(h) == expected(cfg, range(1, cfg.stop_after_steps + 1))
        assert (h["tokens"] == h["step"] * cfg.tokens_per_step).all()
        assert (h["fraction"] == h["step"] / cfg.stop_after_steps).all()
        assert store.run_config(row["run_id"]) == cfg


def test_a_line_being_written_waits_and_the_run_is_topped_up(tmp_path):
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path, cfg, range(1, 31), state="running")
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write(line(31, cfg.tokens_per_step, **{"train/loss": 9.0})[:20])  # torn: no newline yet
    store = Store(tmp_path / "store")
    source = LocalSource(run_dir)
    first = pull(store, source).pulled[0]
    assert first.state == "running" and first.rows == len(expected(cfg, range(1, 31)))
    # The writer finishes that line and the rest of the run.
    text = (run_dir / runfiles.METRICS_FILE).read_text()
    rest = "".join(line(s, cfg.tokens_per_step, **{"train/loss": 5.0 + 1.0 / s, "grad/norm/total": 0.5})
                   + (line(s, cfg.tokens_per_step, **{"eval/loss": 4.0 + 1.0 / s}) if s in set(cfg.eval_steps()) else "")
                   for s in range(31, cfg.stop_after_steps + 1))
    (run_dir / runfiles.METRICS_FILE).write_text(text[: text.rindex("\n") + 1] + rest)
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": cfg.stop_after_steps}))
    second = pull(store, source).pulled[0]
    assert second.state == "finished"
    assert second.rows_read == len(expected(cfg, range(31, cfg.stop_after_steps + 1)))
    assert pairs(store.history(include_nonfinite=True)) == expected(cfg, range(1, cfg.stop_after_steps + 1))


def test_a_last_line_without_its_newline_is_left_for_the_next_pull_whatever_the_status(tmp_path):
    """A file still being copied (or a trainer that marked its run before flushing) ends in half a line: it is not
    read, and the next pull reads it from its start, not from where the earlier one stopped inside it. A run that
    marked itself ended, finished or crashed, writes no more: the pull that finds the half line says it is left out
    (it may be a line cut for good, which no pull reads)."""
    cfg = RUNGS[0]
    steps = range(1, cfg.stop_after_steps + 1)
    whole = make_run(tmp_path / "whole", cfg, steps)
    text = (whole / runfiles.METRICS_FILE).read_text()
    cut = text.index("\n", len(text) // 2) + 30  # thirty bytes into a line
    for state in ("finished", "crashed"):
        run_dir = make_run(tmp_path / state, cfg, steps, state=state)
        metrics = run_dir / runfiles.METRICS_FILE
        metrics.write_text(text[:cut])
        store = Store(tmp_path / f"{state}-store")
        (first,) = pull(store, LocalSource(run_dir)).pulled
        line_no = text[:cut].count("\n") + 1
        said = [f"{metrics}: the run says it {state}, but its last line (line {line_no}) has no newline: left unread "
                "(a file still being written or copied is read whole by the next pull; a line cut for good stays out)"]
        assert [m for m in first.messages if "has no newline" in m] == said
        assert not any("not a JSON object" in m for m in first.messages), first.messages
        metrics.write_text(text)  # the copy completes
        (second,) = pull(store, LocalSource(run_dir)).pulled
        assert not any("not a JSON object" in m or "no newline" in m for m in second.messages), second.messages
        assert pairs(store.history(include_nonfinite=True)) == expected(cfg, steps)
    # a writer that ends its file without a newline: a whole last line of an ended run is its last line, read
    run_dir = make_run(tmp_path / "unended", cfg, steps)
    (run_dir / runfiles.METRICS_FILE).write_text(text.rstrip("\n"))
    store = Store(tmp_path / "unended-store")
    (pulled,) = pull(store, LocalSource(run_dir)).pulled
    assert not any("no newline" in m for m in pulled.messages) and pairs(store.history(include_nonfinite=True)) == \
        expected(cfg, steps)


def test_values_that_are_not_numbers_are_counted_and_one_too_large_for_a_float_refuses_the_run(tmp_path):
    """true is a flag, not a loss of 1.0 (`import csv` refuses it too); text, lists and null are counted in one warning
    that names the first; 1e400 is no float (a run that logged inf writes Infinity) and skips the run, as in a CSV."""
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path / "odd", cfg, range(1, 11))
    lines = len((run_dir / runfiles.METRICS_FILE).read_text().splitlines())
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        for step, value in ((11, True), (12, "abc"), (13, [1, 2]), (14, None), (15, float("inf"))):
            f.write(json.dumps({"step": step, "train/loss": value}) + "\n")
    (pulled,) = pull(Store(tmp_path / "s"), LocalSource(run_dir)).pulled
    assert f"{run_dir / runfiles.METRICS_FILE}: 4 values that are not a number (true/false, text, a list, null) skipped " \
           f"(the first at line {lines + 1}, 'train/loss')" in pulled.messages
    logged = Store(tmp_path / "s").history(include_nonfinite=True)
    assert set(logged["step"]) == set(range(1, 11)) | {15}  # the inf logged as Infinity is a value
    big = make_run(tmp_path / "big", cfg, range(1, 11))
    with open(big / runfiles.METRICS_FILE, "a") as f:
        f.write('{"step": 11, "grad/norm/total": Infinity, "train/loss": 1e400}\n')
    with pytest.raises(LadderError, match=re.escape(
            f"{big / runfiles.METRICS_FILE}: line {lines + 1}: 'train/loss' 1e400 is too "
            "large for a float (write Infinity where the run logged inf)")):
        LocalSource(big).read(LocalSource(big).runs()[0])
    (big / runfiles.METRICS_FILE).write_text('{"step": 1, "tokens": -1E+400, "train/loss": 2.0}\n')
    with pytest.raises(LadderError, match=re.escape(f"{big / runfiles.METRICS_FILE}: line 1: tokens -1E+400 is too "
                                                    "large for a float")):
        LocalSource(big).read(LocalSource(big).runs()[0])


def test_a_running_status_that_stopped_changing_is_a_crash(tmp_path):
    """A trainer killed outright leaves status.json at running: once neither it nor the metrics
    changed for the window, the run counts as crashed; a fresh one is still running."""
    run_dir = make_run(tmp_path, RUNGS[0], range(1, 31), state="running")
    now = time.time()
    fresh = LocalSource(run_dir, clock=lambda: now + 600.0)  # ten quiet minutes: a long eval or checkpoint
    assert pull(Store(tmp_path / "a"), fresh).pulled[0].state == "running"
    stale = LocalSource(run_dir, clock=lambda: now + 3600.0)
    (crashed,) = pull(Store(tmp_path / "b"), stale).pulled
    assert crashed.state == "crashed"
    assert any(m.startswith(f"{run_dir}: its status.json says 'running', but it wrote nothing for 60 min (a live run "
                            "writes at least every 30 min): the trainer was killed or lost; marked crashed")
               for m in crashed.messages), crashed.messages
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": 30}))
    assert pull(Store(tmp_path / "c"), stale).pulled[0].state == "finished"
    # killed in the middle of a line: the cut line is said, as for a run that marked itself ended
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "running", "step": 30}))
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write('{"step": 31, "train/lo')
    (cut,) = pull(Store(tmp_path / "d"), stale).pulled
    assert cut.state == "crashed" and any("the run stopped writing (marked crashed), but its last line" in m
                                          for m in cut.messages), cut.messages


def test_a_pull_says_when_each_run_last_wrote_unchanged_runs_included(tmp_path):
    import os

    run_dir = make_run(tmp_path, RUNGS[0], range(1, 31), state="running")
    now = time.time()
    os.utime(run_dir / runfiles.METRICS_FILE, (now - 900, now - 900))
    os.utime(run_dir / runfiles.STATUS_FILE, (now - 600, now - 600))  # the newer of its two files
    store = Store(tmp_path / "store")
    first = pull(store, LocalSource(run_dir))
    (run_id,) = first.written
    assert first.written[run_id] == pytest.approx(now - 600, abs=1.0) and first.pulled[0].run_id == run_id
    again = pull(store, LocalSource(run_dir))
    assert again.unchanged == 1 and again.written == first.written


def test_a_status_that_cannot_be_read_or_a_finish_the_metrics_never_reach_is_said(tmp_path):
    run_dir = make_run(tmp_path, RUNGS[0], range(1, 31))
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": 60}))
    result = pull(Store(tmp_path / "a"), LocalSource(run_dir))
    assert result.pulled[0].state == "finished"
    [cut] = [m for m in result.messages if "metrics end" in m]
    assert "says it finished at step 60, but its metrics end at step 30" in cut
    (run_dir / runfiles.STATUS_FILE).write_text("{bad")
    result = pull(Store(tmp_path / "b"), LocalSource(run_dir, clock=lambda: time.time() + 3600.0))
    assert result.pulled[0].state == "crashed"  # unreadable: judged by its files' age, as a killed trainer's
    assert any("status.json: cannot be read" in m for m in result.messages), result.messages
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": 30}))
    assert not pull(Store(tmp_path / "c"), LocalSource(run_dir)).messages  # whole and finished: nothing to say


@pytest.mark.parametrize("status", [{"step": 30}, {"state": None, "step": 30}, {}])
def test_a_status_that_gives_no_state_leaves_the_run_to_its_files_age(tmp_path, status):
    """No state is no word from the run, as no status file is: running while it writes, crashed once it is quiet."""
    run_dir = make_run(tmp_path, RUNGS[0], range(1, 31))
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps(status))
    assert pull(Store(tmp_path / "a"), LocalSource(run_dir)).pulled[0].state == "running"
    (stale,) = pull(Store(tmp_path / "b"), LocalSource(run_dir, clock=lambda: time.time() + 3600.0)).pulled
    assert stale.state == "crashed"
    assert any(m.startswith(f"{run_dir}: its status.json gives no state, but it wrote nothing for 60 min")
               for m in stale.messages), stale.messages


def test_a_rewritten_file_is_read_again_from_the_start(tmp_path):
    """A resumed run truncates metrics.jsonl to its checkpoint: rows past it must go."""
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path, cfg, range(1, 51), state="crashed")
    store = Store(tmp_path / "store")
    pull(store, LocalSource(run_dir))
    (run_dir / runfiles.METRICS_FILE).unlink()
    make_run(tmp_path / "again", cfg, range(1, 41), state="running", offset=0.0)
    (tmp_path / "again" / cfg.name / runfiles.METRICS_FILE).replace(run_dir / runfiles.METRICS_FILE)
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write(line(41, cfg.tokens_per_step, **{"train/loss": 77.0}))
    result = pull(store, LocalSource(run_dir)).pulled[0]
    want = expected(cfg, range(1, 41)) | {("train/loss", 41): 77.0}
    assert pairs(store.history(include_nonfinite=True)) == want
    assert result.rows == len(want)


def test_a_resume_marker_is_no_data(tmp_path):
    """The line a resumed trainer writes after truncating to its checkpoint adds no rows."""
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path, cfg, range(1, 11))
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write(json.dumps({"step": 10, runfiles.RESUME_KEY: 10, "time": time.time()}) + "\n")
        f.write(line(11, cfg.tokens_per_step, **{"train/loss": 77.0}))
    store = Store(tmp_path / "store")
    (pulled,) = pull(store, LocalSource(run_dir)).pulled
    assert pairs(store.history(include_nonfinite=True)) == expected(cfg, range(1, 11)) | {("train/loss", 11): 77.0}
    assert not any("skipped" in m for m in pulled.messages)


def test_a_run_pulled_through_its_folder_or_the_parent_is_one_run(tmp_path):
    """The watcher pulls the hero from its own folder, a later pull sees it under runs/: one source.
    The same id from a CSV import or from another folder is still refused."""
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path / "runs", cfg, range(1, 31), state="running")
    store = Store(tmp_path / "store")
    pull(store, LocalSource(run_dir))
    new = {s: 5.0 + 1.0 / s for s in range(31, 41)}
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.writelines(line(s, cfg.tokens_per_step, **{"train/loss": v, "grad/norm/total": 0.5}) for s, v in new.items())
    (again,) = pull(store, LocalSource(tmp_path / "runs")).pulled
    assert again.rows_read == 2 * len(new)  # only the new lines: the first pull's cursor held
    want = expected(cfg, range(1, 31)) | {("train/loss", s): v for s, v in new.items()}
    want |= {("grad/norm/total", s): 0.5 for s in new}
    runs = store.runs()
    assert list(runs["source"]) == [f"local:{run_dir.resolve()}"]
    h = store.history(include_nonfinite=True)
    assert not h.duplicated(["run_id", "metric", "step"]).any() and pairs(h) == want
    assert pull(store, LocalSource(run_dir)).unchanged == 1

    run_id = runs.loc[0, "run_id"]
    table = tmp_path / "import.csv"
    table.write_text(f"run,step,loss\n{run_id},1,3.0\n")
    shutil.copytree(run_dir, tmp_path / "copy" / cfg.name)
    make_run(run_dir / "retry", cfg, range(1, 11))  # a run folder inside the run's own folder
    before = (store.root / "manifest.json").read_text()
    for other, where in [(TableSource(table, ColumnMap({"eval/loss": "loss"}, run="run", step="step")), f"csv:{table}"),
                         (LocalSource(tmp_path / "copy"), f"local:{tmp_path / 'copy' / cfg.name}"),
                         (LocalSource(run_dir / "retry"), f"local:{run_dir / 'retry' / cfg.name}")]:
        stored = re.escape(f"run id '{run_id}' is already in the store from local:{run_dir.resolve()} ")
        how = "the values of its run column" if where.startswith("csv:") else "`ladder plan PRESET --set name=OTHER`"
        with pytest.raises(LadderError, match=f"{stored}.*; {re.escape(where)} has a run with the same id.*--replace"
                                              f".*other ids .*{re.escape(how)}.*into another store"):
            pull(store, other)
    assert (store.root / "manifest.json").read_text() == before and len(store.runs()) == 1


def test_a_run_replacing_one_from_another_source_keeps_none_of_its_coordinates(tmp_path):
    """--replace with a table whose run has the id of a trained rung: the table gives no sizes, and the rung's are
    not its own (it is refused as into an empty store); given its own, it replaces the rung with them."""
    from ladder.data.sources.coords import CoordinateOverrides

    cfg = RUNGS[0]
    run_dir = make_run(tmp_path / "runs", cfg, range(1, 31))
    store = Store(tmp_path / "store")
    pull(store, LocalSource(run_dir))
    run_id = store.runs().loc[0, "run_id"]
    table = tmp_path / "import.csv"
    table.write_text(f"run,step,loss\n{run_id},1,3.0\n")
    source = TableSource(table, ColumnMap({"eval/loss": "loss"}, run="run", step="step"))
    with pytest.raises(LadderError, match="lacks 'active_params'"):
        pull(Store(tmp_path / "empty"), source)
    with pytest.raises(LadderError, match="lacks 'active_params'"):
        pull(store, source, replace=True)
    assert list(store.runs()["source"]) == [f"local:{run_dir.resolve()}"]  # nothing replaced
    own = CoordinateOverrides({"active_params": 5_000, "stop_after_steps": 10, "tokens_per_step": 64})
    pull(store, source, overrides=own, replace=True)
    (row,) = store.runs().to_dict("records")
    assert row["source"] == f"csv:{table}" and row["active_params"] == 5_000 and row["stop_after_steps"] == 10
    assert pd.isna(row["total_params"]) and pd.isna(row["fit_flops_per_token"])  # not the rung's


def test_a_project_moved_elsewhere_pulls_its_runs_on_from_their_new_folders(tmp_path):
    """A store copied with its run folders to another machine (or a project renamed): the stored folder is gone
    and one of the same name is where the pull looks; it is the same run, read on from its cursor, and the store
    says where it now reads it. A copy beside a folder still there stays another run (--replace)."""
    cfg = RUNGS[0]
    make_run(tmp_path / "a" / "runs", cfg, range(1, 31), state="running")
    pull(Store(tmp_path / "a" / "store"), LocalSource(tmp_path / "a" / "runs"))
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    with pytest.raises(LadderError, match="already in the store from local:.*--replace"):
        pull(Store(tmp_path / "copy" / "store"), LocalSource(tmp_path / "copy" / "runs"))  # /a is still there
    (tmp_path / "a").rename(tmp_path / "b")
    store, run_dir = Store(tmp_path / "b" / "store"), tmp_path / "b" / "runs" / cfg.name
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.writelines(line(s, cfg.tokens_per_step, **{"train/loss": 5.0}) for s in range(31, 36))
    (moved,) = pull(store, LocalSource(tmp_path / "b" / "runs")).pulled
    assert moved.rows_read == 5  # on from the cursor: the same run
    assert any(m.startswith(f"its folder moved: stored from local:{(tmp_path / 'a' / 'runs' / cfg.name).resolve()}, "
                            "which is gone") for m in moved.messages)
    assert list(store.runs()["source"]) == [f"local:{run_dir.resolve()}"] and int(store.runs()["last_step"][0]) == 35
    assert pull(store, LocalSource(run_dir)).unchanged == 1


def test_a_run_stored_under_the_folder_an_older_pull_was_given_is_the_same_run(tmp_path, monkeypatch):
    """Stores written before runs were identified by their own folder name the folder pulled."""
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path / "runs", cfg, range(1, 31))
    store = Store(tmp_path / "store")
    monkeypatch.setattr(local_source, "run_source", lambda d: f"local:{(tmp_path / 'runs').resolve()}")
    pull(store, LocalSource(tmp_path / "runs"))
    monkeypatch.undo()
    assert pull(store, LocalSource(run_dir)).unchanged == 1
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write(line(31, cfg.tokens_per_step, **{"train/loss": 9.0}))
    (again,) = pull(store, LocalSource(tmp_path / "runs")).pulled
    assert again.rows_read == 1 and store.run(cfg.name)["source"] == f"local:{run_dir.resolve()}"


def test_bad_lines_are_skipped_and_counted(tmp_path):
    cfg = RUNGS[0]
    run_dir = make_run(tmp_path, cfg, range(1, 11))
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write("not json\n")
        f.write(json.dumps({"step": "11", "train/loss": 1.0}) + "\n")
        f.write(json.dumps({"step": 12, "train/loss": float("nan"), "note": "text"}) + "\n")
    store = Store(tmp_path / "store")
    (pulled,) = pull(store, LocalSource(run_dir)).pulled
    assert any("2 lines that are not a JSON object with an integer step skipped (lines 11, 12)" in m
               for m in pulled.messages), pulled.messages
    assert any("train/loss: 1 NaN/inf value (first at step 12)" in m for m in pulled.messages)
    assert pairs(store.history()) == expected(cfg, range(1, 11))
    assert len(store.history(include_nonfinite=True)) == len(expected(cfg, range(1, 11))) + 1
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:
        f.write("{torn\n")
        f.write(line(13, cfg.tokens_per_step, **{"train/loss": 3.0}))
    (again,) = pull(store, LocalSource(run_dir)).pulled
    assert any("1 line that is not a JSON object with an integer step skipped (line 14)" in m
               for m in again.messages), again.messages


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_cli_not_a_run_directory(tmp_path, make):
    path = tmp_path / "nope"
    if make == "empty":
        (path / "sub").mkdir(parents=True)
    if make == "file":
        path.write_text("x")
    res = CliRunner().invoke(app, ["pull", "local", str(path), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "run directory" in res.output and "Traceback" not in res.output
    assert ("is a file, not a folder" in res.output) == (make == "file")
    assert ("no such directory" in res.output) == (make == "missing")
    assert not (tmp_path / "s").exists()  # a first pull that failed leaves no store behind


def test_cli_a_failed_pull_into_an_existing_store_keeps_it(tmp_path):
    cfg = RUNGS[1]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    assert CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")]).exit_code == 0
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "empty"), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and list(Store(tmp_path / "s").runs()["name"]) == [cfg.name]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "empty"), "--store", str(tmp_path / "other")])
    assert res.exit_code == 2 and [p.name for p in (tmp_path / "other").iterdir()] == ["notes.txt"]


def test_cli_pull_local(tmp_path):
    cfg = RUNGS[1]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert cfg.name in res.stdout and "1 new run, 0 unchanged" in res.stdout  # new to the store: not "updated"
    with open(tmp_path / "runs" / cfg.name / runfiles.METRICS_FILE, "a") as f:
        f.write(line(cfg.stop_after_steps + 1, cfg.tokens_per_step, **{"train/loss": 1.0}))
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")])
    assert res.exit_code == 0 and "1 run updated, 0 unchanged" in res.stdout, res.output
    res = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0 and cfg.name in res.stdout and "rung" in res.stdout


def test_cli_runs_skipped_are_said_one_a_line_after_the_count_of_those_pulled(tmp_path):
    good, *bad = RUNGS[:3]
    make_run(tmp_path / "runs", good, range(1, good.stop_after_steps + 1))
    for cfg in bad:
        with open(make_run(tmp_path / "runs", cfg, range(1, 4)) / runfiles.METRICS_FILE, "a") as f:
            f.write(json.dumps({"step": -5, "train/loss": 1.0}) + "\n")
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2, res.output
    assert "1 new run, 0 unchanged, 2 skipped (store " in res.stdout
    lines = res.stderr.splitlines()
    assert "error: 2 runs skipped (1 run pulled beside them):" in lines
    for cfg in bad:
        (said,) = [x for x in lines if x.startswith(f"  skipped {cfg.name} (")]
        assert "step -5" in said
    assert list(Store(tmp_path / "s").runs()["name"]) == [good.name]


def test_cli_coords_for_no_run_of_the_pull_are_named(tmp_path):
    cfg = RUNGS[1]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    coords = tmp_path / "coords.yaml"
    coords.write_text(f"{cfg.name.lower()}: {{group: g}}\n{cfg.name}: {{role: rung}}\nnobody: {{group: g}}\n")
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--coords", str(coords),
                                   "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    warnings = [x for x in res.output.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 2, res.output
    assert f"{cfg.name.lower()!r} is the name or id of no run of this pull" in warnings[0]
    assert f"did you mean {cfg.name!r}?" in warnings[0]
    assert "'nobody' is the name or id of no run of this pull" in warnings[1]
    near = tmp_path / "near.yaml"  # a run the file also names is not the one a near miss meant
    near.write_text(f"{cfg.name}: {{role: rung}}\n{cfg.name[:-1]}X: {{group: g}}\n")
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--coords", str(near),
                                   "--store", str(tmp_path / "s2")])
    (w,) = [x for x in res.output.splitlines() if x.startswith("warning:")]
    assert "is the name or id of no run of this pull" in w and "did you mean" not in w
    # pulled again, the run is unchanged and still matched by its name
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--coords", str(coords),
                                   "--store", str(tmp_path / "s")])
    assert res.exit_code == 0 and f": '{cfg.name}' is the name" not in res.output
    assert res.output.count("is the name or id of no run") == 2


@pytest.mark.parametrize("coord", ["group=", "role= "])
def test_cli_a_coordinate_without_a_value_is_refused(tmp_path, coord):
    cfg = RUNGS[1]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--coord", coord,
                                   "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert f"--coord {coord!r}: no value after '='" in res.output
    coords = tmp_path / "coords.yaml"
    coords.write_text(f"{cfg.name}: {{group: ''}}\n")
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--coords", str(coords),
                                   "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "'group' has no value" in res.output, res.output


def test_cli_a_rename_onto_a_key_the_run_logs_is_refused(tmp_path):
    cfg = RUNGS[1]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    args = ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")]
    for _ in range(2):  # the same command again is refused again
        res = CliRunner().invoke(app, [*args, "--rename", "eval/loss=train/loss"])
        assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
        assert "it logs 'train/loss' itself, and --rename eval/loss=train/loss would mix" in res.output
    res = CliRunner().invoke(app, [*args, "--rename", "eval/loss=eval/main"])
    assert res.exit_code == 0 and "no run in" not in res.output, res.output
    # a key no run logs (a typo): kept, and said at once
    res = CliRunner().invoke(app, [*args, "--rename", "eval/los=eval/other"])
    assert res.exit_code == 0 and "--rename eval/los=eval/other: no run in" in " ".join(res.output.split())
    store = Store(tmp_path / "s")
    assert store.settings().renames == {"eval/loss": "eval/main", "eval/los": "eval/other"}
    assert pairs(store.history()) == {(("eval/main" if m == "eval/loss" else m), s): v
                                      for (m, s), v in expected(cfg, range(1, cfg.stop_after_steps + 1)).items()}


def test_a_rename_added_on_a_later_pull_renames_what_the_store_holds_too(tmp_path):
    """As the pull's warning of a missing fit metric advises (pull with --rename KEY=eval/loss): the run is read
    again, so the metric is whole under its new name, not only from the steps logged since (nor, for a finished
    run, nowhere: "1 unchanged")."""
    cfg = RUNGS[1]
    half, whole = range(1, cfg.stop_after_steps // 2 + 1), range(1, cfg.stop_after_steps + 1)
    run_dir = make_run(tmp_path / "runs", cfg, half, state="running")
    args = ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")]
    assert CliRunner().invoke(app, args).exit_code == 0
    with open(run_dir / runfiles.METRICS_FILE, "a") as f:  # the run trains on, and finishes
        for step in whole[len(half):]:
            f.write(line(step, cfg.tokens_per_step, **{"train/loss": 5.0 + 1.0 / step, "grad/norm/total": 0.5}))
            if step in set(cfg.eval_steps()):
                f.write(line(step, cfg.tokens_per_step, **{"eval/loss": 4.0 + 1.0 / step}))
    (run_dir / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": whole[-1]}))
    res = CliRunner().invoke(app, [*args, "--rename", "eval/loss=eval/main"])
    assert res.exit_code == 0, res.output
    renamed = {(("eval/main" if m == "eval/loss" else m), s): v for (m, s), v in expected(cfg, whole).items()}
    assert pairs(Store(tmp_path / "s").history()) == renamed
    args[-1] = str(tmp_path / "s2")  # a finished run, pulled again with nothing new but the rename: renamed too
    assert CliRunner().invoke(app, args).exit_code == 0
    res = CliRunner().invoke(app, [*args, "--rename", "eval/loss=eval/main"])
    assert res.exit_code == 0 and "1 unchanged" not in res.output, res.output
    assert pairs(Store(tmp_path / "s2").history()) == renamed


def test_a_pull_that_finds_a_run_unchanged_says_its_stored_history_is_damaged(tmp_path):
    """A pull to refresh the store reads nothing of an unchanged run, so it checks that run's stored file as
    `ladder runs` does, rather than "1 unchanged" over a file no reader can open."""
    cfg = RUNGS[0]
    make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1))
    args = ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")]
    assert CliRunner().invoke(app, args).exit_code == 0
    (history,) = (tmp_path / "s" / "history").glob("*.parquet")
    history.write_bytes(history.read_bytes()[:300])  # cut short (a disk that filled, a copy stopped half way)
    res = CliRunner().invoke(app, args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 unchanged" in said, res.output
    assert f"damaged history file ({history}" in said and f"`ladder runs --repair --store {tmp_path / 's'}`" in said


def test_a_run_that_has_not_logged_yet_is_said_to_be_starting(tmp_path):
    cfg = RUNGS[0]
    (tmp_path / "runs" / cfg.name).mkdir(parents=True)
    cfg.save(tmp_path / "runs" / cfg.name / runfiles.CONFIG_FILE)
    res = CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and f"({cfg.name}) have logged no metrics.jsonl yet" in text and "pull again" in text


def test_a_stored_run_whose_folder_is_gone_is_named_at_the_next_pull(tmp_path):
    for cfg in RUNGS[:2]:
        make_run(tmp_path / "runs", cfg, range(1, 31), state="running")
    store = Store(tmp_path / "s")
    first = pull(store, LocalSource(tmp_path / "runs"))
    assert not [n for n in first.notes if "no longer there" in n]
    shutil.rmtree(tmp_path / "runs" / RUNGS[0].name)
    (note,) = [n for n in pull(store, LocalSource(tmp_path / "runs")).notes if "no longer there" in n]
    assert f"run {RUNGS[0].name!r}" in note and "(running at step 30)" in note


def test_the_runs_table_keeps_every_cell_whole_at_80_columns_and_says_a_shared_source_once(tmp_path, monkeypatch):
    """At 80 columns the table collapsed its run, id, group, role and state columns to nothing (the numbers kept
    whole took the width) and cut the values to "11,1…"; it now leaves out the columns that repeat what one line can
    say (one group, ids GROUP/NAME, each source one folder's entry of the run's name) and prints the rest whole, wider
    than the console where it must."""
    from ladder.cli.app import console

    hero = plan(load_recipe("micro-cpu")).hero
    for cfg in (*RUNGS, hero):
        make_run(tmp_path / "runs", cfg, range(1, cfg.stop_after_steps + 1, 7))
    store = tmp_path / "s"
    assert CliRunner().invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(store)]).exit_code == 0
    monkeypatch.setattr(console, "width", 80)
    res = CliRunner().invoke(app, ["runs", "--store", str(store)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "…" not in res.stdout and f"(group {RUNGS[0].group}; fit metric eval/loss)" in " ".join(res.stdout.split())
    for cfg in (*RUNGS, hero):
        (row,) = [x for x in lines if f"│ {cfg.name} " in x]
        assert row.split("│")[2].strip() == cfg.role and "finished" in row, res.stdout  # the role beside the name
    assert lines[-2:] == ["Each run's id: GROUP/RUN (`ladder history` takes either)",
                          f"Each run's source: local:{(tmp_path / 'runs').resolve()}/RUN"], res.stdout
