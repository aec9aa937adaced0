"""The files a watch reads and writes: its alerts file (appended in whole lines, a cut last line tolerated),
its state file (a damaged one refused in words) and the run folder it is given (one not made yet)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.cli.watch import _alerts_end, _source
from ladder.errors import LadderError
from ladder.watch import JsonlSink, WatchState
from ladder.watch.rules import Alert
from ladder.watch.sinks import read_alerts

ALERTS = [Alert("deviation", "warning", 92, "off by 0.6%"), Alert("spike", "alarm", 184, "loss jumped")]
CUT = b'{"time": 1796524000.0, "kind": "verd'


def _writes(monkeypatch) -> list[bytes]:
    """Every `os.write` the sinks make, recorded (and made)."""
    import ladder.watch.sinks as sinks

    made, real = [], os.write

    def write(fd: int, data) -> int:
        made.append(bytes(data))
        return real(fd, data)

    monkeypatch.setattr(sinks.os, "write", write)
    return made


def test_a_batch_of_alerts_is_one_write_of_whole_lines(tmp_path, monkeypatch):
    made = _writes(monkeypatch)
    JsonlSink(tmp_path / "alerts.jsonl", "hero").send(ALERTS, "alarm", "two alerts")
    assert len(made) == 1 and made[0].endswith(b"\n")
    rows = [json.loads(x) for x in made[0].decode().splitlines()]
    assert [r["kind"] for r in rows] == ["alert", "alert", "verdict"]
    assert (tmp_path / "alerts.jsonl").read_bytes() == made[0]


def test_a_cut_last_line_is_ended_before_the_next_batch_and_skipped_by_its_readers(tmp_path):
    path = tmp_path / "alerts.jsonl"
    sink = JsonlSink(path, "hero")
    sink.send(ALERTS[:1], "warning", "first")
    with path.open("ab") as f:
        f.write(CUT)  # a watch killed mid-write
    sink.send(ALERTS[1:], "alarm", "second")
    lines = path.read_bytes().split(b"\n")
    assert lines[2] == CUT and lines[-1] == b""  # the cut line alone on its line, the file ending whole
    assert [a["step"] for a in read_alerts(path, "hero")] == [92, 184]  # what `ladder report` shows
    assert _alerts_end(path) == "whole"


def test_a_quiet_watch_ends_a_cut_line_so_the_next_watch_finds_the_file_whole(tmp_path):
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(b'{"time": 1.0, "kind": "verdict"}\n' + CUT)
    assert _alerts_end(path) == "cut"
    JsonlSink(path).end_cut_line()
    assert path.read_bytes().endswith(CUT + b"\n") and _alerts_end(path) == "whole"
    JsonlSink(tmp_path / "none.jsonl").end_cut_line()
    assert not (tmp_path / "none.jsonl").exists()  # no file is made before there is something to write


def test_a_batch_the_disk_takes_only_part_of_is_taken_back(tmp_path, monkeypatch):
    import ladder.watch.sinks as sinks

    path = tmp_path / "alerts.jsonl"
    JsonlSink(path).send(ALERTS[:1], "warning", "first")
    before = path.read_bytes()
    real = os.write

    def full(fd: int, data) -> int:  # the first call takes half, the next finds the disk full
        if path.stat().st_size > len(before):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, bytes(data)[: len(data) // 2])

    monkeypatch.setattr(sinks.os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        JsonlSink(path).send(ALERTS, "alarm", "second")
    assert path.read_bytes() == before


@pytest.mark.parametrize("text, end", [
    (b"", "whole"),
    (b'{"time": 1.0, "kind": "verdict"}\n', "whole"),
    (b'{"run": "hero", "level": "warning"}\n', "whole"),  # earlier alerts of another writer
    (b'{"time": 1.0, "kind": "verdict"}\n' + CUT, "cut"),
    (b'{"time": 1.0, "kind": "verdict"}\n{"ti', "cut"),
    (CUT, "cut"),  # the first write of a watch, cut: its file has nothing else
    (b'{"time": 1.0, "kind": "verdict"}\n' + CUT + b"\n", "whole"),  # a cut line an earlier watch ended
    (CUT + b'\n{"time": 2.0, "kind": "verdict"}\n' + CUT, "cut"),  # cut twice
    (b"name: hero\nseed: 0\n", "foreign"),  # a YAML file
    (b"name: hero\n" + CUT, "foreign"),  # its first line is no JSON object: no alerts file
    (b"step,loss\n1,2.5\n", "foreign"),
    (b'{"time": 1.0, "kind": "verdict"}\n{"step": 3, "lo', "foreign"),  # cut, but no line the watch writes
    (b'{"time": 1.0, "kind": "verdict"}\nnot json\n' + CUT, "foreign"),
], ids=["empty", "verdict", "another-writer", "cut", "cut-early", "cut-alone", "ended", "cut-twice", "yaml",
        "yaml-then-cut", "csv", "cut-foreign-line", "not-json-then-cut"])
def test_the_end_of_an_alerts_file_tells_a_cut_line_from_a_file_of_something_else(tmp_path, text, end):
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(text)
    assert _alerts_end(path) == end


def test_a_cut_line_after_more_than_the_window_read_is_still_told(tmp_path):
    path = tmp_path / "alerts.jsonl"
    path.write_bytes(b"".join(json.dumps({"time": float(k), "kind": "verdict", "summary": "x" * 200}).encode() + b"\n"
                              for k in range(1000)) + CUT)
    assert _alerts_end(path) == "cut"


@pytest.mark.parametrize("verdicts", [
    [{"verdict": "ok"}],  # no step
    [{"step": 92}],  # no verdict
    [{"step": "92", "verdict": "ok"}],
    [{"step": 92.5, "verdict": "ok"}],
    [{"step": True, "verdict": "ok"}],
    [{"step": 92, "verdict": 1}],
    [92],
    {"92": "ok"},
])
def test_a_state_whose_verdicts_are_not_verdicts_is_refused_in_words(tmp_path, verdicts):
    path = tmp_path / "watch-state.json"
    path.write_text(json.dumps({"run": "hero", "last_step": 0, "sent": {}, "verdicts": verdicts}))
    with pytest.raises(LadderError, match="not a watch state file; delete it to start over"):
        WatchState.read(path)


def test_a_state_with_whole_verdicts_is_read(tmp_path):
    path = tmp_path / "watch-state.json"
    kept = [{"step": 92, "verdict": "ok", "time": 1.0}, {"step": 184.0, "verdict": "warning"}]
    path.write_text(json.dumps({"run": "hero", "last_step": 184, "sent": {}, "verdicts": kept}))
    assert WatchState.read(path).verdicts == kept


def test_a_run_folder_not_made_yet_is_refused_naming_the_folder_that_will_hold_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hero").mkdir()
    with pytest.raises(LadderError) as err:
        _source(None, Path("hero/runs/hero-1/wandb"), None)
    said = str(err.value)
    assert said.startswith("--offline hero/runs/hero-1/wandb: no such folder")
    assert said.endswith("or a folder that exists and will hold it: --offline hero")
    with pytest.raises(LadderError, match="will hold it: --local hero$"):
        _source(Path("hero/runs/hero-1"), None, None)
    with pytest.raises(LadderError, match=f"will hold it: --local {tmp_path / 'hero'}$"):
        _source(tmp_path / "hero" / "runs" / "hero-1", None, None)
    # the folder searched would be the current one, or the root: a typo, said without a folder to give instead
    for typo in (Path("typo/runs/hero-1"), tmp_path / "typo" / "runs" / "hero-1", Path("/nowhere-at-all/runs/x")):
        with pytest.raises(LadderError, match=r"no such folder; .* must exist\)$"):
            _source(typo, None, None)


@pytest.mark.parametrize("damage, says", [
    (lambda d: {**d, "table": "x"}, "its table is not a list of rows"),
    (lambda d: {k: v for k, v in d.items() if k != "table"}, "it has no table"),
    (lambda d: {k: v for k, v in d.items() if k != "run_name"}, "it has no run_name field"),
    (lambda d: [d], "it holds no JSON object"),
    (lambda d: {**d, "schedule": "linear"}, "its schedule is not an object"),
    (lambda d: {**d, "settings": [1]}, "its settings is not an object"),
    (lambda d: {**d, "assumptions": None}, "its assumptions is not an object"),
    (lambda d: {**d, "forms": {"name": "x"}}, "its forms is not a list"),
    (lambda d: {**d, "forms": [{"x": 1}]}, "its forms hold one that is no form (a form has name, why, parameters, "
                                           "weight; name and why at least)"),
    (lambda d: {**d, "forms": ["power law"]}, "its forms hold one that is no form (a form has name, why, parameters, "
                                              "weight; name and why at least)"),
    (lambda d: b"\xff" + json.dumps(d).encode(), "not text: byte 0 is no UTF-8"),
], ids=["table-text", "no-table", "no-run-name", "a-list", "schedule-text", "settings-list", "assumptions-null",
        "forms-object", "form-of-other-fields", "form-text", "not-utf8"])
def test_a_damaged_prediction_file_is_refused_in_words_not_python_s(tmp_path, damage, says):
    import pandas as pd

    from ladder.predict.prediction import Prediction

    table = pd.DataFrame({"step": [100, 200], "tokens": [1e5, 2e5], "fraction": [0.5, 1.0], "compute": [1e11, 2e11],
                          "median": [3.0, 2.9], "lo50": 2.8, "hi50": 3.1, "lo90": 2.7, "hi90": 3.2,
                          "in_assumptions": True})
    Prediction("hero", "eval/loss", table, planned_steps=200).save(tmp_path / "pred")
    path = tmp_path / "pred" / "prediction.json"
    damaged = damage(json.loads(path.read_text()))
    path.write_bytes(damaged if isinstance(damaged, bytes) else json.dumps(damaged).encode())
    res = CliRunner().invoke(app, ["watch", "--prediction", str(tmp_path / "pred"), "--store", str(tmp_path / "s"),
                                   "--once"])
    assert res.exit_code == 2, res.output
    assert " ".join(res.output.split()) == f"error: {path}: not a prediction file ({says})"
