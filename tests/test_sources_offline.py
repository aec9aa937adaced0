"""wandb offline runs written by wandb itself, read back from their .wandb files into the store.

Four real runs (written once per session, in subprocesses so one can be killed with SIGKILL): the
micro-cpu hero, whose horizon is cut at half way; a rung that crashed and was resumed from an earlier
checkpoint; a run killed mid-training; a run logging nested dicts, NaN, inf and text.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder import load_recipe
from ladder.cli import app
from ladder.cli.pull import _fraction_cell
from ladder.config.plan import plan
from ladder.data.resolve import MetricSettings
from ladder.data.sources import CoordinateOverrides, OfflineSource
from ladder.data.sources.leveldb import BLOCK, HEADER_LEN, Stop, read_log
from ladder.data.sources.pull import PullSkipped, pull
from ladder.data.store import Store
from ladder.errors import LadderError

WRITER = r"""
import json, os, signal, sys
spec = json.load(open(sys.argv[1]))
import wandb
run = wandb.init(
    project="tests", dir=spec["dir"], id=spec["id"], name=spec.get("name"), group=spec.get("group"),
    job_type=spec.get("job_type"),
    mode="offline", resume="allow" if spec.get("resume") else None, config=spec["config"],
    settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
)
for step, metrics in spec["logs"]:
    run.log(metrics, step=step)
if spec.get("kill"):
    os.kill(os.getpid(), signal.SIGKILL)
run.finish(exit_code=spec.get("exit_code", 0))
"""

MICRO = plan(load_recipe("micro-cpu"))
HERO = MICRO.hero
RUNG = MICRO.rungs[0]
HERO_ROWS = HERO.stop_after_steps + len(HERO.eval_steps())  # one train row per step, one eval row per eval
RESUME_AT = 40  # the rung's second process restarts from its checkpoint at step 40
FIRST_STOP = 50  # ... after the first process had logged up to step 50 and crashed
KILLED_STEPS = 2000
PLAIN_COORDS = {
    "stop_after_steps": 5000, "tokens_per_step": 100, "active_params": 1000,
    "total_params": 4000, "fit_flops_per_token": 18000.0,
}


def trainer_config(cfg):
    """The wandb config the trainer logs: coordinates on top, the whole run config under run_config."""
    return {**cfg.coordinates(), "run_config": cfg.to_dict()}


def hero_logs():
    evals = set(HERO.eval_steps())
    return [
        (s, {"train/loss": 5.0 + 1.0 / s, **({"eval/loss": 4.0 + 1.0 / s} if s in evals else {})})
        for s in range(1, HERO.stop_after_steps + 1)
    ]


def rung_logs(first: bool):
    evals = set(RUNG.eval_steps())
    steps = range(1, FIRST_STOP + 1) if first else range(RESUME_AT + 1, RUNG.stop_after_steps + 1)
    base = 10.0 if first else 20.0
    return [(s, {"train/loss": base + s, **({"eval/loss": base - 5 + s} if s in evals else {})}) for s in steps]


def nested_logs():
    logs = []
    for s in range(1, 21):
        m = {"train": {"loss": 3.0 + 1.0 / s}, "note": f"step {s}"}
        if s % 5 == 0:
            m["eval"] = {"paloma": {"macro_loss": 2.0 + 1.0 / s}}
        if s in (6, 7, 8):
            m["weird"] = {6: float("nan"), 7: float("inf"), 8: float("-inf")}[s]
        elif s > 2:
            m["weird"] = float(s)
        logs.append((s, m))
    return logs


def unstepped_logs():
    """A trainer that logs every 250 steps its step under a key of its own, without wandb's step=: _step counts the
    20 log calls."""
    every = PLAIN_COORDS["stop_after_steps"] // 20
    return [(None, {"trainer/global_step": s, "train/loss": 3.0 + 1.0 / s}) for s in range(every, 5001, every)]


def _write(tmp: Path, name: str, spec: dict) -> int:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("WANDB_API_KEY", None)
    return subprocess.run([sys.executable, "-c", WRITER, str(path)], env=env, cwd=tmp, capture_output=True).returncode


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wandb")
    dirs = {k: tmp / k for k in ("hero", "resumed", "killed", "nested", "unstepped")}
    for d in dirs.values():
        d.mkdir()
    specs = {
        "hero": dict(dir=str(dirs["hero"]), id="hero0001", name=HERO.name, group=HERO.group,
                     config=trainer_config(HERO), logs=hero_logs()),
        "killed": dict(dir=str(dirs["killed"]), id="killed01", name="killed",
                       config=PLAIN_COORDS, logs=[(s, {"train/loss": 1.0 + s / 1e4}) for s in range(KILLED_STEPS)], kill=True),
        "nested": dict(dir=str(dirs["nested"]), id="nested01", name="nested",
                       config={**PLAIN_COORDS, "stop_after_steps": 20}, logs=nested_logs()),
        "unstepped": dict(dir=str(dirs["unstepped"]), id="unstep01", name="unstepped", config=PLAIN_COORDS,
                          logs=unstepped_logs(), job_type="rung"),  # its role given as wandb's job type alone
    }

    def resumed():
        base = dict(dir=str(dirs["resumed"]), id="rung0001", name=RUNG.name, group=RUNG.group, config=trainer_config(RUNG))
        first = _write(tmp, "resumed-1", {**base, "logs": rung_logs(True), "exit_code": 1})
        second = _write(tmp, "resumed-2", {**base, "logs": rung_logs(False), "resume": True})
        return first, second

    with ThreadPoolExecutor(5) as pool:
        jobs = {k: pool.submit(_write, tmp, k, s) for k, s in specs.items()}
        resumed_codes = pool.submit(resumed)
        codes = {k: j.result() for k, j in jobs.items()}
    assert codes == {"hero": 0, "killed": -signal.SIGKILL, "nested": 0, "unstepped": 0}
    assert resumed_codes.result() == (0, 0)
    return dirs


def _one_file(d: Path) -> Path:
    (f,) = [p for p in d.rglob("*.wandb") if "latest-run" not in p.parts]
    return f


def _pairs(history) -> dict[tuple[str, int], float]:
    return {(str(m), int(s)): float(v) for m, s, v in zip(history["metric"], history["step"], history["value"])}


def _aged(path: Path) -> float:
    """A clock reading long after the file's last write."""
    return path.stat().st_mtime + 3600.0


# ---- the finished hero ----------------------------------------------------------------------------
def test_finished_hero_lands_in_the_store_exactly(runs, tmp_path):
    store = Store(tmp_path / "store")
    result = pull(store, OfflineSource(runs["hero"]))
    assert [r.state for r in result.pulled] == ["finished"]
    row = store.run(HERO.name)
    coords = HERO.coordinates()
    for field in ("active_params", "total_params", "stop_after_steps", "tokens_per_step", "planned_tokens"):
        assert row[field] == coords[field], field
    assert row["fit_flops_per_token"] == pytest.approx(coords["fit_flops_per_token"], rel=1e-12)
    assert (row["run_id"], row["group"], row["role"], row["source"]) == (
        "hero0001", "micro-cpu", "hero", f"offline:{runs['hero'].resolve()}")
    rebuilt = json.loads(row["config_json"])["run_config"]
    assert rebuilt["schedule"]["edits"][0]["new_total_steps"] == HERO.stop_after_steps

    h = store.history()
    expected = {(k, s): v for s, m in hero_logs() for k, v in m.items()}
    assert len(h) == len(expected) == HERO.stop_after_steps + len(HERO.eval_steps())
    assert _pairs(h) == expected
    assert (h["tokens"] == h["step"] * HERO.tokens_per_step).all()


def test_fraction_is_of_the_plan_the_run_started_with(runs, tmp_path):
    """The hero's plan is cut short half way: the stored fraction stays step / the plan it started with
    (DESIGN.md); the edited plan's fraction stands beside it in `ladder history` and `ladder runs`."""
    store = Store(tmp_path / "store")
    pull(store, OfflineSource(runs["hero"]))
    evals = store.history(metrics="eval/loss")
    (edit,) = HERO.schedule.edits
    np.testing.assert_allclose(evals["fraction"], evals["step"] / HERO.schedule.total_steps, rtol=0, atol=1e-15)
    assert HERO.stop_after_steps < HERO.schedule.total_steps and evals["fraction"].iloc[-1] < 1.0
    assert json.loads(store.run(HERO.name)["report_json"]).get("past_plan", 0) == 0  # past neither plan

    out = CliRunner().invoke(app, ["history", HERO.name, "--format", "csv", "--store", str(store.root)])
    assert out.exit_code == 0, out.output
    shown = pd.read_csv(io.StringIO(out.output))
    assert list(shown.columns) == ["step", "tokens", "fraction", "fraction_edited", "metric", "value"]
    planned = np.where(shown["step"] > edit.at_step, HERO.stop_after_steps, HERO.schedule.total_steps)
    np.testing.assert_allclose(shown["fraction_edited"], shown["step"] / planned, rtol=0, atol=1e-12)
    np.testing.assert_allclose(shown["fraction"], shown["step"] / HERO.schedule.total_steps, rtol=0, atol=1e-12)
    assert shown["fraction_edited"].iloc[-1] == 1.0

    started = HERO.stop_after_steps / HERO.schedule.total_steps
    assert _fraction_cell(store.run(HERO.name)) == f"{started:.3f} (1.000 edited)"
    listed = CliRunner().invoke(app, ["runs", "--format", "json", "--store", str(store.root)])
    (row,) = [r for r in json.loads(listed.output) if r["name"] == HERO.name]
    assert row["last_fraction"] == pytest.approx(started) and row["last_fraction_edited"] == 1.0


# ---- resumed rung -----------------------------------------------------------------------------------
def test_resumed_run_is_one_run_and_the_restart_wins(runs, tmp_path):
    assert len(list(runs["resumed"].glob("wandb/offline-run-*"))) == 2
    store = Store(tmp_path / "store")
    result = pull(store, OfflineSource(runs["resumed"]))
    (pulled,) = result.pulled
    assert pulled.state == "finished"
    assert _pairs(store.history()) == resumed_expected()
    report = json.loads(store.run(RUNG.name)["report_json"])
    assert report["rewinds"] == [[FIRST_STOP, RESUME_AT + 1]]
    evals_dropped = sum(1 for s in RUNG.eval_steps() if RESUME_AT < s <= FIRST_STOP)
    assert report["dropped_by_rewind"] == (FIRST_STOP - RESUME_AT - 1) + evals_dropped
    assert report["relogged"] == 1  # train/loss at step 41, logged by both processes
    assert any("went back from 50 to 41" in m for m in pulled.messages)


def test_a_pull_of_one_folder_of_a_resumed_run_pulled_whole_keeps_the_stored_rows(runs, tmp_path):
    """The whole run, then the restart's folder alone (``wandb/latest-run``): reading it would replace the run's
    stored rows with the restart's, losing the first attempt's steps; it is refused and says how to go on."""
    first, second = sorted(runs["resumed"].glob("wandb/offline-run-*"))
    store = Store(tmp_path / "store")
    pull(store, OfflineSource(runs["resumed"]))
    with pytest.raises(PullSkipped) as skipped:
        pull(store, OfflineSource(second))
    result = skipped.value.result
    assert not result.pulled and [label for label, _ in result.skipped] == [f"rung0001 ({second})"]
    (reason,) = [why for _, why in result.skipped]
    assert f"rows of 1 folder(s) this pull does not read ({first.name})" in reason
    assert f"pull the folder above ({runs['resumed'].resolve() / 'wandb'})" in reason
    assert _pairs(store.history()) == resumed_expected()  # nothing of the first attempt lost
    assert pull(store, OfflineSource(runs["resumed"])).unchanged == 1


def resumed_expected() -> dict[tuple[str, int], float]:
    expected = {}
    for first in (True, False):
        for s, m in rung_logs(first):
            if first and s > RESUME_AT:
                continue  # logged before the crash, past the checkpoint the run restarted from
            expected.update({(k, s): v for k, v in m.items()})
    return expected


def test_a_run_pulled_through_one_of_its_folders_or_the_folder_above_is_one_run(runs, tmp_path):
    """A run is identified by the folder wandb ran in, not by the path pulled; a copy elsewhere is another run.
    The restart's folder alone, then the whole run: its first file comes before the one read, so all is read again."""
    first, second = sorted(runs["resumed"].glob("wandb/offline-run-*"))
    store = Store(tmp_path / "store")
    (alone,) = pull(store, OfflineSource(second)).pulled
    (w,) = [w for w in alone.messages if "beside the one read" in w]  # the first attempt is left out, and said
    assert f"1 other folder(s) of run rung0001 beside the one read ({first.name})" in w
    (again,) = pull(store, OfflineSource(runs["resumed"])).pulled
    assert not [w for w in again.messages if "beside the one read" in w]
    assert list(store.runs()["source"]) == [f"offline:{runs['resumed'].resolve()}"]
    assert _pairs(store.history()) == resumed_expected()
    assert pull(store, OfflineSource(runs["resumed"] / "wandb")).unchanged == 1
    shutil.copytree(runs["resumed"], tmp_path / "copy")
    with pytest.raises(LadderError, match="run id 'rung0001' is already in the store from offline:.*--replace"):
        pull(store, OfflineSource(tmp_path / "copy"))


def test_a_copy_of_a_run_folder_beside_it_is_skipped_not_read_as_a_restart(runs, tmp_path):
    """The folder above a run and a partial copy of it (a backup cut short): the same run id in two folders it ran
    in. They were read as one run restarted, the copy's steps replacing the finished run's in the store (exit 0). The
    run is skipped and said (exit 2); the other runs there are pulled; a copied latest-run link is no copy."""

    top = tmp_path / "runs"
    shutil.copytree(runs["hero"], top / "hero")  # its wandb/latest-run link copied as a folder
    assert (top / "hero" / "wandb" / "latest-run").is_dir() and not (top / "hero" / "wandb" / "latest-run").is_symlink()
    store = Store(tmp_path / "store")
    pull(store, OfflineSource(top / "hero"))
    before = store.history()
    shutil.copytree(runs["hero"], top / "hero-backup")
    cut = _one_file(top / "hero-backup")
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    shutil.copytree(runs["nested"], top / "nested")
    with pytest.raises(PullSkipped, match=r"skipped hero0001 .*: run id 'hero0001' is in 2 run folders \(.*/hero and "
                                          r".*/hero-backup\): a copy of a run's folder beside it.*1 run pulled beside"):
        pull(store, OfflineSource(top))
    res = CliRunner().invoke(app, ["pull", "offline", str(top), "--store", str(store.root)])
    assert res.exit_code == 2 and "move the copy away" in " ".join(res.output.split())
    hero = store.runs()[lambda r: r["run_id"] == "hero0001"]
    assert list(hero["state"]) == ["finished"] and set(store.runs()["run_id"]) == {"hero0001", "nested01"}
    pd.testing.assert_frame_equal(store.history(["hero0001"]), before)


# ---- killed with SIGKILL --------------------------------------------------------------------------
def test_killed_run_keeps_every_whole_record_and_is_crashed(runs, tmp_path):
    f = _one_file(runs["killed"])
    log = read_log(f)  # wandb flushes its buffer now and then; the kill lands anywhere in it
    assert log.stop in (Stop.PARTIAL, Stop.END) and log.end <= f.stat().st_size
    store = Store(tmp_path / "store")
    result = pull(store, OfflineSource(runs["killed"], clock=lambda: _aged(f)))
    (pulled,) = result.pulled
    assert pulled.state == "crashed"
    assert any("no exit record" in m and "killed" in m for m in pulled.messages)
    h = store.history()
    steps = h["step"].to_numpy()
    assert 0 < len(h) <= KILLED_STEPS  # how much wandb flushed before the kill is up to wandb
    np.testing.assert_array_equal(steps, np.arange(len(h)))  # a prefix, nothing skipped
    np.testing.assert_array_equal(h["value"].to_numpy(), 1.0 + steps / 1e4)
    assert _pairs(h) == _leet_history(f)


def test_a_file_still_being_written_is_running(runs):
    f = _one_file(runs["killed"])
    source = OfflineSource(runs["killed"], clock=lambda: f.stat().st_mtime + 5.0)
    (ref,) = source.runs()
    got = source.read(ref)
    assert got.state == "running" and got.last_write == f.stat().st_mtime  # when it last wrote, for `ladder watch`


# ---- nested dicts, NaN, inf, text -------------------------------------------------------------------
def test_nested_dicts_nonfinite_values_and_renames(runs, tmp_path):
    store = Store(tmp_path / "store")
    settings = MetricSettings(renames={"eval.paloma.macro_loss": "eval/loss"})
    result = pull(store, OfflineSource(runs["nested"]), settings=settings)
    (pulled,) = result.pulled
    assert set(store.history(include_nonfinite=True)["metric"]) == {"train.loss", "eval/loss", "weird"}
    finite = _pairs(store.history())
    everything = store.history(include_nonfinite=True)
    assert len(everything) - len(finite) == 3
    assert finite[("eval/loss", 10)] == 2.0 + 1.0 / 10
    assert ("weird", 6) not in finite and finite[("weird", 9)] == 9.0
    bad = everything[everything["metric"] == "weird"].set_index("step")["value"]
    assert math.isnan(bad[6]) and bad[7] == math.inf and bad[8] == -math.inf
    report = json.loads(store.run("nested")["report_json"])
    assert report["nonfinite"] == [["weird", 3, 6]]
    assert report["renamed"] == [["eval.paloma.macro_loss", "eval/loss", 4]]
    assert any("not numbers" in m and "note" in m for m in pulled.messages)
    # the rename asked for is said once for the pull, not as a warning of each run
    assert result.renames == ["eval.paloma.macro_loss stored as eval/loss: 4 values of 1 run"]
    assert not any("stored as" in m for m in result.messages)
    assert store.settings().renames == {"eval.paloma.macro_loss": "eval/loss"}


def test_a_number_too_large_for_a_float_refuses_the_run_and_a_boolean_is_no_value():
    """As in metrics.jsonl and in a CSV: 1e400 (a typo, a unit slip) names its record; wandb writes a logged inf as
    Infinity, which stays a value; true is a flag, skipped with the values that are not numbers."""
    from wandb.proto import wandb_internal_pb2 as pb

    from ladder.data.sources.offline import _Decoder

    def history(**values: str):
        return pb.HistoryRecord(step=pb.HistoryStep(num=3), item=[pb.HistoryItem(key=k, value_json=v)
                                                                  for k, v in values.items()])

    decoder = _Decoder("_step", "tokens")
    decoder._history(history(loss="2.5", flag="true", big="Infinity", low="-Infinity"), "f.wandb: record at byte 7")
    assert _pairs(decoder.take_rows()) == {("loss", 3): 2.5, ("big", 3): math.inf, ("low", 3): -math.inf}
    assert decoder.warnings() == ["values that are not numbers (true/false, tables, media, text) were skipped for: flag"]
    with pytest.raises(LadderError, match=r"^f\.wandb: record at byte 7: 'loss' 1e400 is too large for a float \(write "
                                          r"Infinity where the run logged inf\)$"):
        decoder._history(history(loss="1e400"), "f.wandb: record at byte 7")


def test_a_value_wandb_keeps_as_a_json_item_is_checked_as_one_kept_as_text():
    """wandb's newer history items hold a value in a typed field (number, integer, json): a json of 1e400 refuses the
    run with its record named, as the same text in value_json does, and a json of Infinity is the inf logged."""
    from wandb.proto import wandb_internal_pb2 as pb

    from ladder.data.sources.offline import _Decoder

    record = pb.HistoryRecord(step=pb.HistoryStep(num=4), item=[
        pb.HistoryItem(key="loss", number=2.5), pb.HistoryItem(key="seen", integer=7),
        pb.HistoryItem(key="big", json="Infinity"), pb.HistoryItem(key="hist", json='{"_type": "histogram"}')])
    decoder = _Decoder("_step", "tokens")
    decoder._history(record, "f.wandb: record at byte 9")
    assert _pairs(decoder.take_rows()) == {("loss", 4): 2.5, ("seen", 4): 7.0, ("big", 4): math.inf}
    typo = pb.HistoryRecord(step=pb.HistoryStep(num=5), item=[pb.HistoryItem(key="loss", json="-1e400")])
    with pytest.raises(LadderError, match=r"^f\.wandb: record at byte 9: 'loss' -1e400 is too large for a float"):
        decoder._history(typo, "f.wandb: record at byte 9")


def test_a_finished_run_far_short_of_its_plan_by_wandbs_step_suggests_the_key_of_its_own(runs, tmp_path):
    (pulled,) = pull(Store(tmp_path / "s"), OfflineSource(runs["unstepped"])).pulled
    assert (pulled.state, pulled.last_step) == ("finished", 19)
    assert ("finished at step 19, 0.4% of its 5,000 planned steps: wandb's own step (_step) counts log calls, not "
            "optimizer steps; if the run logs its optimizer step under a key, pull again with --full --step-key KEY "
            "(keys that look like it: 'trainer/global_step' (last 5,000))") in pulled.messages
    (right,) = pull(Store(tmp_path / "s"), OfflineSource(runs["unstepped"], step_key="trainer/global_step"),
                    full=True).pulled
    assert right.last_step == 5000 and not any("--step-key" in m for m in right.messages)
    (hero,) = pull(Store(tmp_path / "hero"), OfflineSource(runs["hero"])).pulled
    assert not any("--step-key" in m for m in hero.messages)  # it ran its plan, cut half way: not short of it


# ---- the reader against wandb's own ------------------------------------------------------------------
def _leet_history(f: Path) -> dict[tuple[str, int], float]:
    exe = shutil.which("wandb", path=str(Path(sys.executable).parent)) or shutil.which("wandb")
    proc = subprocess.run([exe, "leet", "inspect", "--json", str(f)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "No such command" in proc.stderr:
        pytest.skip("this wandb has no `leet inspect`")
    out = {}
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("type") != "history":
            continue
        item = rec["history"]["item"]
        step = int(item["_step"])
        for key, value in _flat(item).items():
            if not key.startswith("_") and isinstance(value, (int, float, str)):
                try:
                    out[(key, step)] = float(value)
                except ValueError:
                    continue  # text
    return out


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


@pytest.mark.parametrize("name", ["hero", "nested"])
def test_reader_agrees_with_wandb_leet_inspect(runs, name):
    f = _one_file(runs[name])
    source = OfflineSource(f)
    (ref,) = source.runs()
    got = source.read(ref).rows
    mine = {}
    for m, s, v in zip(got["metric"].astype(str), got["step"], got["value"]):
        mine[(m, int(s))] = float(v)
    theirs = _leet_history(f)
    assert mine.keys() == theirs.keys()
    for k, v in theirs.items():
        assert (math.isnan(v) and math.isnan(mine[k])) or mine[k] == v, k


# ---- damaged and growing files ----------------------------------------------------------------------
def inside_a_record(log) -> int:
    """A byte of the data of a record near the middle of the file: a record written as one chunk within one
    block, so that the byte is neither a chunk header nor a block's padding (the file's layout varies from
    one run to the next, so a fixed share of its length can land on either)."""
    n = len(log.ends)
    for i in sorted(range(1, n), key=lambda i: abs(i - n // 2)):
        start, end = log.ends[i - 1], log.ends[i]
        if BLOCK - start % BLOCK > HEADER_LEN and start // BLOCK == (end - 1) // BLOCK and end - start > HEADER_LEN + 2:
            return start + HEADER_LEN + 1
    raise AssertionError("the file has no record written as one chunk")


def test_truncated_copy_reads_what_is_whole(runs, tmp_path):
    f = _one_file(runs["hero"])
    full = read_log(f)
    cut = tmp_path / "offline-run-20260101_000000-cut" / "run-cut.wandb"
    cut.parent.mkdir()
    data = f.read_bytes()
    cut.write_bytes(data[: inside_a_record(full) + 1])  # mid-record
    log = read_log(cut)
    assert log.stop is Stop.PARTIAL and 0 < len(log.records) < len(full.records)
    assert log.records == full.records[: len(log.records)]
    source = OfflineSource(cut, clock=lambda: _aged(cut))
    (ref,) = source.runs()
    got = source.read(ref)
    assert got.state == "crashed" and any("ends inside" in w for w in got.warnings)


def test_corrupt_chunk_stops_the_file_without_wrong_data(runs, tmp_path):
    f = _one_file(runs["hero"])
    full = read_log(f)
    bad = tmp_path / "run-bad.wandb"
    data = bytearray(f.read_bytes())
    at = inside_a_record(full)
    data[at] ^= 0xFF
    bad.write_bytes(bytes(data))
    log = read_log(bad)
    assert log.stop is Stop.CORRUPT and "checksum" in log.problem
    assert 0 < len(log.records) < len(full.records)
    assert log.records == full.records[: len(log.records)]
    assert log.end <= at
    source = OfflineSource(bad, clock=lambda: _aged(bad))
    (ref,) = source.runs()
    got = source.read(ref)
    assert any("checksum mismatch" in w and "stopped reading" in w for w in got.warnings)
    truth = {(k, s): v for s, m in hero_logs() for k, v in m.items()}
    for m, s, v in zip(got.rows["metric"].astype(str), got.rows["step"], got.rows["value"]):
        assert truth[(m, int(s))] == v


def test_growing_file_is_read_once_and_topped_up(runs, tmp_path):
    f = _one_file(runs["hero"])
    data = f.read_bytes()
    live = tmp_path / "wandb" / "offline-run-20260101_000000-hero0001" / "run-hero0001.wandb"
    live.parent.mkdir(parents=True)
    live.write_bytes(data[: 3 * BLOCK + 1000])
    store = Store(tmp_path / "store")
    source = OfflineSource(tmp_path / "wandb")
    first = pull(store, source).pulled[0]
    assert first.state == "running" and 0 < first.rows < HERO_ROWS
    with open(live, "ab") as out:
        out.write(data[3 * BLOCK + 1000 :])
    second = pull(store, source).pulled[0]
    assert second.state == "finished"
    assert second.rows_read == HERO_ROWS - first.rows and second.rows == HERO_ROWS
    assert _pairs(store.history()) == {(k, s): v for s, m in hero_logs() for k, v in m.items()}
    report = json.loads(store.run(HERO.name)["report_json"])
    assert report["relogged"] == 0 and report["dropped_by_rewind"] == 0
    assert pull(store, source).unchanged == 1


# ---- the command line -------------------------------------------------------------------------------
def test_cli_pull_offline_runs_and_history(runs, tmp_path):
    runner = CliRunner()
    store = str(tmp_path / "store")
    res = runner.invoke(app, ["pull", "offline", str(runs["hero"]), "--store", store])
    assert res.exit_code == 0, res.output
    assert HERO.name in res.stdout and "finished" in res.stdout
    res = runner.invoke(app, ["runs", "--store", store, "--format", "json"])
    assert res.exit_code == 0, res.output
    (listed,) = json.loads(res.stdout)
    assert listed["name"] == HERO.name and listed["config"]["role"] == "hero" and listed["rows"] == HERO_ROWS
    res = runner.invoke(app, ["history", HERO.name, "--store", store, "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "step,tokens,fraction,fraction_edited,metric,value" and len(lines) == 1 + len(HERO.eval_steps())
    started = HERO.stop_after_steps / HERO.schedule.total_steps
    assert lines[-1].startswith(f"{HERO.stop_after_steps},{HERO.stop_after_steps * HERO.tokens_per_step},{started},1.0,eval/loss,")


def test_cli_missing_coordinate_names_run_and_field(tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    spec = dict(dir=str(bare), id="bare0001", name="bare",  # a config without coordinates under their names
                config={"lr": 1e-3, "model": {"n_params": 1000, "width": 64}, "train": {"max_steps": 20}},
                logs=[(s, {"eval/loss": 3.0 + 1.0 / s}) for s in range(1, 21)])
    assert _write(tmp_path, "bare", spec) == 0
    runner = CliRunner()
    res = runner.invoke(app, ["pull", "offline", str(bare), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert "bare0001" in res.output and "'active_params'" in res.output and "--coord active_params=" in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert res.output.split("bare0001")[1].startswith(" (") and ": its config lacks" in res.output
    assert res.output.count("bare0001 (") == 1  # the run is named once, not again by the reason
    assert not (tmp_path / "s").exists()  # nothing pulled: no store left behind
    said = " ".join(res.output.split())  # the config's own keys that may give them, and the option that reads them
    assert said.endswith("its config may give them: --coord-key active_params=model.n_params (1000 there), "
                         "--coord-key stop_after_steps=train.max_steps (20 there)"), said
    res = runner.invoke(app, ["pull", "offline", str(bare), "--store", str(tmp_path / "keyed"), "--coord-key",
                              "active_params=model.n_params", "--coord-key", "stop_after_steps=train.max_steps",
                              "--coord", "tokens_per_step=100"])
    assert res.exit_code == 0, res.output
    row = Store(tmp_path / "keyed").runs().iloc[0]
    assert (row["active_params"], row["stop_after_steps"], row["planned_tokens"]) == (1000, 20, 2000)
    coords = ["--coord", "stop_after_steps=20", "--coord", "tokens_per_step=100",
              "--coord", "active_params=unknown", "--coord", "total_params=unknown", "--coord", "fit_flops_per_token=unknown"]
    res = runner.invoke(app, ["pull", "offline", str(bare), "--store", str(tmp_path / "s"), *coords])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("make", ["missing", "not_a_run", "not_wandb", "empty", "cut_in_header"])
def test_cli_a_path_that_is_not_a_run(tmp_path, make):
    path = tmp_path / "x"
    if make == "not_a_run":
        path.mkdir()
        (path / "notes.txt").write_text("hello")
    elif make in ("not_wandb", "empty", "cut_in_header"):
        path = tmp_path / "run-x.wandb"
        path.write_bytes({"not_wandb": b"PK\x03\x04 not a wandb file", "empty": b"", "cut_in_header": b":W&B"}[make])
    res = CliRunner().invoke(app, ["pull", "offline", str(path), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert str(path) in res.output.replace("\n", "")
    said = {"not_wandb": "not a wandb run file", "empty": "empty (0 bytes): wandb has not written it yet",
            "cut_in_header": "cut short inside wandb's header (4 of its 7 bytes): wandb is writing it"}
    assert said.get(make, "") in " ".join(res.output.split())
    assert not (tmp_path / "s").exists()


def test_overrides_parse_and_unknown_fields(tmp_path):
    with pytest.raises(Exception, match="unknown coordinate 'params'"):
        CoordinateOverrides.parse(["params=3"])


def test_run_config_rebuilds_from_the_store(runs, tmp_path):
    store = Store(tmp_path / "store")
    pull(store, OfflineSource(runs["hero"]))
    pull(store, OfflineSource(runs["nested"]))
    assert store.run_config(HERO.name) == HERO
    assert store.run_config("nested") is None and store.config("nested")["stop_after_steps"] == 20


def test_a_run_read_on_with_another_step_key_is_refused_and_kept_as_stored(runs, tmp_path):
    """A run pulled with one --step-key and read on with another (a watch not given the pull's) would store its
    new rows at other steps beside the old ones: the read is refused, naming the key to give, the stored run
    kept; the same key reads on."""

    store = Store(tmp_path / "store")
    pull(store, OfflineSource(runs["hero"]))
    before = store.history(run_ids=[store.run(HERO.name)["run_id"]])
    with pytest.raises(PullSkipped, match="pulled with --step-key '_step', and this read gives 'global_step': give "
                                          "--step-key _step again"):
        pull(store, OfflineSource(runs["hero"], step_key="global_step"))
    pd.testing.assert_frame_equal(store.history(run_ids=[store.run(HERO.name)["run_id"]]), before)
    assert pull(store, OfflineSource(runs["hero"])).unchanged == 1
    from ladder.cli.watch import _source

    assert _source(None, runs["hero"], None, step_key="global_step").step_key == "global_step"  # watch --step-key
    with pytest.raises(LadderError, match="--step-key is for --offline and --wandb runs"):
        _source(tmp_path, None, None, step_key="global_step")


def test_a_run_wandb_has_just_started_is_waited_for_not_taken_for_one_without_coordinates(runs, tmp_path):
    """For its first seconds a run's offline file is wandb's 7-byte header alone, its config not yet written: the
    pull says so (and to pull again), not that the config lacks coordinates."""

    shutil.copytree(runs["hero"], tmp_path / "hero")
    for log in (tmp_path / "hero").rglob("*.wandb"):  # the file and the latest-run link to it
        if not log.is_symlink():
            log.write_bytes(log.read_bytes()[:7])
    with pytest.raises(PullSkipped, match="nothing is written in it yet, not even its config") as caught:
        pull(Store(tmp_path / "store"), OfflineSource(tmp_path / "hero"))
    assert "coord" not in str(caught.value)
    assert caught.value.result.waiting == {caught.value.result.skipped[0][0]}


def test_a_pull_that_waits_only_on_runs_still_starting_exits_75_not_2_as_a_usage_error(runs, tmp_path):
    """A script or cron job pulling a folder where a run has just started can tell "try again" (EX_TEMPFAIL, 75)
    from a usage error (2): the finished run beside it is pulled, and a run that cannot be read at all still
    makes the pull exit 2."""
    shutil.copytree(runs["hero"], tmp_path / "both" / "starting")
    for log in (tmp_path / "both" / "starting").rglob("*.wandb"):
        if not log.is_symlink():
            log.write_bytes(log.read_bytes()[:7])
    alone = CliRunner().invoke(app, ["pull", "offline", str(tmp_path / "both"), "--store", str(tmp_path / "s1")])
    assert alone.exit_code == 75 and "pull it again in a minute" in alone.output
    shutil.copytree(runs["killed"], tmp_path / "both" / "killed")
    beside = CliRunner().invoke(app, ["pull", "offline", str(tmp_path / "both"), "--store", str(tmp_path / "s2")])
    assert beside.exit_code == 75, beside.output
    assert list(Store(tmp_path / "s2").runs()["run_id"]) == [_one_file(runs["killed"]).stem.removeprefix("run-")]
    bad = tmp_path / "both" / "bad" / "wandb" / "offline-run-20260101_000000-bad00001" / "run-bad00001.wandb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a wandb file")
    worse = CliRunner().invoke(app, ["pull", "offline", str(tmp_path / "both"), "--store", str(tmp_path / "s3")])
    assert worse.exit_code == 2 and "not a wandb run file" in worse.output


def test_a_run_killed_before_wandb_wrote_a_record_is_skipped_as_holding_none_not_asked_for_coordinates(runs, tmp_path):
    """An old file of wandb's header alone: asking for its coordinates would store an empty run, so it is skipped by
    name, saying it holds no records, and the runs beside it are pulled; how long it lay unwritten reads in hours."""

    shutil.copytree(runs["hero"], tmp_path / "both" / "hero")
    dead = tmp_path / "both" / "dead" / "wandb" / "offline-run-20260101_000000-dead0001" / "run-dead0001.wandb"
    dead.parent.mkdir(parents=True)
    dead.write_bytes(_one_file(runs["hero"]).read_bytes()[:7])
    os.utime(dead, (dead.stat().st_mtime - 86400, dead.stat().st_mtime - 86400))  # not a run starting now
    store = Store(tmp_path / "store")
    later = dead.stat().st_mtime + 3 * 3600 + 12 * 60  # 3 h 12 min after its one write
    with pytest.raises(PullSkipped) as caught:
        pull(store, OfflineSource(tmp_path / "both", clock=lambda: later))
    ((skipped, why),) = caught.value.result.skipped
    assert skipped.startswith("dead0001 (")
    assert why == (f"{dead} holds no records, only wandb's header (no write for 3 h 12 min): the run was killed "
                   "before wandb wrote anything, so there is nothing to pull from it")
    assert list(store.runs()["run_id"]) == ["hero0001"]  # the run beside it is pulled, the empty one is not stored
    coords = [x for f in ("stop_after_steps=20", "tokens_per_step=100", "active_params=1000") for x in ("--coord", f)]
    res = CliRunner().invoke(app, ["pull", "offline", str(dead.parent), "--store", str(tmp_path / "s"), *coords])
    assert res.exit_code == 2 and "holds no records" in res.output  # coordinates given do not make it a run
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("seconds, shown", [
    (0, "0 s"), (119.4, "119 s"), (120, "2 min"), (3599, "60 min"), (7200, "2 h"), (3 * 3600 + 12 * 60, "3 h 12 min"),
    (47 * 3600 + 59 * 60, "47 h 59 min"), (2 * 86400, "2 days"), (796524115, "9,219 days"),
])
def test_a_span_of_time_in_a_message_reads_in_the_unit_that_fits_it(seconds, shown):
    from ladder.durations import span_text

    assert span_text(seconds) == shown


def test_a_file_unwritten_for_years_says_so_in_days_not_seconds(runs):
    f = _one_file(runs["killed"])
    source = OfflineSource(runs["killed"], clock=lambda: f.stat().st_mtime + 796524115)
    (ref,) = source.runs()
    got = source.read(ref)
    assert got.state == "crashed"
    assert any(f"{f}: no exit record and no write for 9,219 days: the run was killed or lost" in w for w in got.warnings)


def test_a_run_whose_tokens_follow_its_steps_is_not_suspected_of_counting_log_calls():
    """A finished run logged with `step=` that stopped at 40% of its plan was told its _step counts log calls; the
    tokens it logs are step × tokens per step, so its step is the optimizer step."""
    from types import SimpleNamespace

    import pandas as pd

    from ladder.data.sources.coords import Coordinates
    from ladder.data.sources.pull import _short_of_plan

    coords = Coordinates(stop_after_steps=5_000, tokens_per_step=1_000, planned_tokens=5_000_000)
    steps = np.arange(1, 2_001)
    source = SimpleNamespace(step_key="_step")

    def said(tokens: np.ndarray) -> tuple[str, ...]:
        rows = pd.DataFrame({"seq": steps, "step": steps, "metric": "train/loss", "value": 3.0, "tokens": tokens})
        got = SimpleNamespace(state="finished", rows=rows, whole=False)
        return _short_of_plan(source, got, {}, 2_000, 0.4, coords)

    assert said(steps * 1_000.0) == ()  # tokens = step × tokens per step: the optimizer step
    assert "counts log calls" in said(steps * 2_500.0)[0]  # a call every 2.5 steps' worth of tokens
    assert "counts log calls" in said(np.full(steps.size, np.nan))[0]  # no tokens logged: cannot tell


def test_a_watch_of_a_folder_of_offline_runs_finds_the_one_stored_under_the_predictions_name(runs, tmp_path):
    """wandb names an offline run only once its file is read: a watch of the hero by name in a folder of runs was
    refused ("point the source at the watched run's own folder"), though the store held the hero from it, with its
    id; and a state saved by a watch of its id (--target-run hero0001) refused a watch of it by name."""
    from ladder.watch.monitor import WrongRun, only_run
    from ladder.watch.state import WatchState

    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("hero", "nested"):
        shutil.copytree(runs[name], folder / name, symlinks=True)
    store = Store(tmp_path / "store")
    with pytest.raises(WrongRun, match="point the source at the watched run's own folder"):
        only_run(OfflineSource(folder), HERO.name, store=store).runs()  # nothing stored yet: its name is not known
    pull(store, OfflineSource(folder / "hero"))
    (ref,) = only_run(OfflineSource(folder), HERO.name, store=store).runs()
    assert ref.run_id == "hero0001"
    saved = tmp_path / "state.json"
    WatchState(run="hero0001", verdicts=[{"step": 10, "verdict": "ok"}]).save(saved)
    with pytest.raises(LadderError, match="belongs to run 'hero0001'"):
        WatchState.load(saved, HERO.name)
    assert WatchState.load(saved, HERO.name, same={HERO.name, "hero0001"}).run == HERO.name
    from types import SimpleNamespace

    from ladder.data.sources.table import RunRef
    from ladder.watch.monitor import Watcher

    many = SimpleNamespace(key="offline:/runs", runs=lambda: [RunRef(f"id{i}", "offline:/runs") for i in range(7)])
    with pytest.raises(WrongRun, match=r"holds id0, id1, id2, id3, id4 and 2 more: watch the run"):
        only_run(many, HERO.name, store=store).runs()  # none of them stored as the hero: each one counted
    for followed in ("hero0001", HERO.name):  # what the watch passes as `same`: the stored run's name and id
        watch = SimpleNamespace(store=store, prediction=SimpleNamespace(run_name=followed))
        assert Watcher._same_run(watch) == {HERO.name, "hero0001"}


def test_a_runs_wandb_job_type_is_its_role_where_its_config_gives_none(runs, tmp_path):
    store = Store(tmp_path / "store")
    pull(store, OfflineSource(runs["unstepped"], step_key="trainer/global_step"))
    pull(store, OfflineSource(runs["nested"]))
    roles = dict(zip(store.runs()["name"], store.runs()["role"]))
    assert roles == {"unstepped": "rung", "nested": ""}  # job_type="rung"; none given
