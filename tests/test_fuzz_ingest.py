"""Hostile inputs to `ladder import`, `ladder pull`, `ladder runs` and `ladder history`, and kills timed
into pulls: every case ends in one readable line and the exit code it should, no traceback, and a store
that lost nothing.

Each corpus case builds its inputs in a fresh copy of one store holding two trained rungs (pulled from
the trainer's run folders), runs the command in-process and checks:

- the exit code, and the words the output must contain;
- no traceback, and for exit 2 exactly one ``error:`` line;
- when the command fails, the store's runs, row counts and manifest are exactly as before;
- when it succeeds, every run stored before still has all its rows (unless the case replaces it on
  purpose with ``--replace``).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from ladder import runfiles
from ladder.cli import app
from ladder.data.sources import CoordinateOverrides, LocalSource, TableSource
from ladder.data.sources.leveldb import BLOCK, FILE_HEADER, IDENT, MAGIC, VERSION
from ladder.data.sources.pull import pull
from ladder.data.sources.tabular import ColumnMap
from ladder.data.store import Store
from ladder.errors import LadderError

COORDS = {"stop_after_steps": 100, "tokens_per_step": 10, "active_params": 1000, "total_params": 5000,
          "fit_flops_per_token": 6000.0}
COORD_FLAGS = [x for k, v in COORDS.items() for x in ("--coord", f"{k}={v}")]
TRAINED = "micro-cpu/169K-A81K"
OTHER = "micro-cpu/50K-A20K"
STEPS = 100


# ---- writing inputs ---------------------------------------------------------------------------------
def metric_lines(steps, tokens_per_step=10) -> list[str]:
    out = []
    for s in steps:
        out.append(json.dumps({"step": s, "tokens": s * tokens_per_step, "train/loss": 5.0 + 1.0 / s}))
        if s % 10 == 0:
            out.append(json.dumps({"step": s, "tokens": s * tokens_per_step, "eval/loss": 4.0 + 1.0 / s}))
    return out


def run_dir(root: Path, name: str, lines: list[str], group: str = "micro-cpu", config: dict | None = None) -> Path:
    d = root / re.sub(r"[^\w.-]", "_", name)
    d.mkdir(parents=True, exist_ok=True)
    cfg = {"name": name, "group": group, "role": "rung", "coordinates": COORDS} if config is None else config
    (d / runfiles.CONFIG_FILE).write_text(json.dumps(cfg))  # JSON is YAML
    (d / runfiles.METRICS_FILE).write_text("".join(x + "\n" for x in lines))
    (d / runfiles.STATUS_FILE).write_text(json.dumps({"state": "finished", "step": STEPS}))
    return d


def write_csv(path: Path, rows: list[list], header=("run", "step", "loss")) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        if header is not None:
            w.writerow(header)
        w.writerows(rows)
    return path


def wandb_file(root: Path, run_id: str, payloads: list[bytes]) -> Path:
    """A .wandb file in wandb's record log format holding `payloads` (one FULL chunk each)."""
    path = root / "wandb" / f"offline-run-20250101_000000-{run_id}" / f"run-{run_id}.wandb"
    path.parent.mkdir(parents=True)
    out = bytearray(FILE_HEADER.pack(IDENT, MAGIC, VERSION))
    for payload in payloads:
        left = BLOCK - len(out) % BLOCK
        if left < 7 + len(payload):
            out += b"\0" * left
        out += struct.pack("<IHB", zlib.crc32(payload, zlib.crc32(bytes([1]))), len(payload), 1) + payload
    path.write_bytes(bytes(out))
    return path


def history(step: int | None, **items) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    record = pb.HistoryRecord(item=[pb.HistoryItem(key=k, value_json=json.dumps(v)) for k, v in items.items()])
    if step is not None:
        record.step.num = step
    return pb.Record(history=record).SerializeToString()


def exit_record(code: int = 0) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    return pb.Record(exit=pb.RunExitRecord(exit_code=code)).SerializeToString()


def good_wandb(root: Path, run_id: str = "good") -> Path:
    return wandb_file(root, run_id, [history(s, **{"eval/loss": 4.0 + 1.0 / s}) for s in range(1, 11)] + [exit_record()])


# ---- the store every case starts from --------------------------------------------------------------
@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A store with two trained rungs, pulled from run folders that stay where they are."""
    root = tmp_path_factory.mktemp("base")
    run_dir(root / "runs", TRAINED.split("/")[1], metric_lines(range(1, STEPS + 1)))
    run_dir(root / "runs", OTHER.split("/")[1], metric_lines(range(1, STEPS + 1)))
    pull(Store(root / "store"), LocalSource(root / "runs"))
    return root


def snapshot(store: Path) -> dict:
    s = Store(store)
    runs = s.runs()
    rows = {r: len(s.history(r, include_nonfinite=True)) for r in runs["run_id"]}
    return {"runs": dict(zip(runs["run_id"], zip(runs["source"], runs["rows"]))), "rows": rows,
            "manifest": (store / "manifest.json").read_text()}


# ---- the corpus ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path, Path], list[str]]
    """(scratch folder, store) -> the command line after `ladder`."""
    code: int
    words: tuple[str, ...] = ()
    replaces: bool = False
    """The case replaces the trained rung on purpose (--replace)."""
    changes_store: bool = False
    """A failing case that still commits other runs (a pull that skipped one run)."""
    check: Callable[[Path], None] | None = field(default=None, compare=False)
    """More checks on the store after the command."""


CASES: list[Case] = []


def case(name, code, *words, replaces=False, changes_store=False, check=None):
    def register(build):
        CASES.append(Case(name, build, code, tuple(words), replaces, changes_store, check))
        return build
    return register


def csv_import(path: Path, store: Path, *extra: str, step: bool = True) -> list[str]:
    given = {x.partition("=")[0] for x in extra}  # a coordinate the case gives replaces the default (one value each)
    coords = [x for flag, value in zip(COORD_FLAGS[::2], COORD_FLAGS[1::2]) if value.partition("=")[0] not in given
              for x in (flag, value)]
    args = ["import", "csv", str(path), "--run", "run", "--metric", "eval/loss=loss", *coords, "--store", str(store)]
    return args + (["--step", "step"] if step else []) + list(extra)


def one_csv(rows, header=("run", "step", "loss"), *extra):
    return lambda tmp, store: csv_import(write_csv(tmp / "t.csv", rows, header), store, *extra)


def raw_csv(text: str | bytes, *extra):
    def build(tmp, store):
        path = tmp / "t.csv"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return csv_import(path, store, *extra)
    return build


GOOD = [["new-run", 10, 3.5], ["new-run", 20, 3.2]]

# -- import csv: what the issue found --
case("csv/good", 0, "1 new run")(one_csv(GOOD))
def _one_run_of_two_rows(store: Path) -> None:
    assert len(Store(store).history("new-run")) == 2


# spaces around a run id's cell are no part of its name: one run, found by its name
case("csv/run-id-padded", 0, "1 new run", check=_one_run_of_two_rows)(
    one_csv([[" new-run ", 10, 3.5], ["new-run", 20, 3.2]]))
case("csv/id-of-a-trained-rung", 2, "already in the store from local:", "110 rows", "csv:", "--replace")(
    one_csv([[TRAINED, 1, 3.0], [TRAINED, 2, 2.9]]))
case("csv/id-of-a-trained-rung-replace", 0, "replaced", "local:", replaces=True)(
    one_csv([[TRAINED, 1, 3.0], [TRAINED, 2, 2.9]], ("run", "step", "loss"), "--replace"))
case("csv/two-runs-one-clashing", 2, "already in the store", TRAINED)(
    one_csv([["fresh", 1, 3.0], [TRAINED, 2, 2.9]]))
case("csv/non-numeric-step", 2, "line 3", "step", "'abc'", "not a number")(
    one_csv([["r", 1, 3.0], ["r", "abc", 2.9]]))
case("csv/header-only", 2, "no rows")(one_csv([]))
case("csv/empty-file", 2, "cannot read it as a table")(raw_csv(""))
case("csv/negative-step", 2, "line 2", "-5", "out of range")(one_csv([["r", -5, 3.0]]))
case("csv/step-1e30", 2, "line 2", "1e+30", "out of range")(one_csv([["r", "1e30", 3.0]]))
case("csv/step-2^63", 2, "line 2", "out of range")(one_csv([["r", 2**63, 3.0]]))
case("csv/step-fraction", 2, "line 3", "2.5", "not a whole number")(one_csv([["r", 1, 3.0], ["r", 2.5, 3.0]]))
case("csv/step-empty", 2, "line 2", "empty step")(one_csv([["r", "", 3.0]]))
case("csv/step-inf", 2, "line 2", "inf")(one_csv([["r", "inf", 3.0]]))
case("csv/ragged-long", 2, "line 3", "4 fields", "header has 3")(raw_csv("run,step,loss\nr,1,3.0\nr,2,2.9,7\n"))
case("csv/ragged-short", 2, "line 4", "2 fields")(raw_csv("run,step,loss\nr,1,3.0\nr,2,2.9\nr,3\n"))
case("csv/ragged-first-row", 2, "line 2", "4 fields")(raw_csv("run,step,loss\nr,1,3.0,9\n"))
case("csv/duplicated-column", 2, "'loss' appears twice")(raw_csv("run,step,loss,loss\nr,1,3.0,3.1\n"))
case("csv/empty-column-name", 2, "empty column name")(raw_csv("run,step,,loss\nr,1,x,3.0\n"))
case("csv/nul-byte", 2, "line 3", "NUL")(raw_csv(b"run,step,loss\nr,1,3.0\nr\x00,2,2.9\n"))
case("csv/utf16", 2, "t.csv: UTF-16 text, not a CSV", "save it as a CSV (UTF-8")(
    raw_csv("run,step,loss\nr,1,3.0\n".encode("utf-16")))
case("csv/parquet-named-csv", 2, "t.csv: a parquet file", "reads one named .parquet")(raw_csv(b"PAR1\x00\x01garbage"))
case("csv/not-utf8", 2, "line 2", "not UTF-8", "save it as UTF-8")(raw_csv(b"run,step,loss\nr\xff\xfe,1,3.0\n"))
case("csv/unclosed-quote", 2, "t.csv")(raw_csv('run,step,loss\n"r,1,3.0\nr,2,2.9\n'))
case("csv/dotdot-run-id", 2, "line 2", "looks like a file path")(one_csv([["../../etc/x", 1, 3.0]]))
case("csv/dot-run-id", 2, "looks like a file path")(one_csv([["a/./b", 1, 3.0]]))
case("csv/absolute-run-id", 2, "looks like a file path")(one_csv([["/etc/passwd", 1, 3.0]]))
case("csv/newline-in-run-id", 2, "line 2", "control character")(one_csv([["a\nb", 1, 3.0]]))
case("csv/tab-in-run-id", 2, "control character")(one_csv([["a\tb", 1, 3.0]]))
case("csv/empty-run-id", 2, "line 3", "empty run id")(one_csv([["r", 1, 3.0], ["", 2, 3.0]]))
case("csv/long-run-id", 2, "at most 512")(one_csv([["x" * 600, 1, 3.0]]))
case("csv/text-value", 2, "line 3", "'oops'", "not a number")(one_csv([["r", 1, 3.0], ["r", 2, "oops"]]))
case("csv/nan-text-is-a-logged-nan", 0, "NaN/inf", check=lambda s: _rows_of(s, "r", 2))(
    one_csv([["r", 1, 3.0], ["r", 2, "nan"]]))
case("csv/inf-value-kept-out-of-fits", 0, "NaN/inf")(one_csv([["r", 1, 3.0], ["r", 2, "inf"]]))
case("csv/repeated-step-later-kept", 0, "logged again")(one_csv([["r", 1, 3.0], ["r", 1, 2.0]]))
case("csv/tokens-negative", 2, "tokens", "-100", "out of range")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", [["r", 1, 3.0, -100]], ("run", "step", "loss", "tok")),
                                  store, "--tokens", "tok"))
case("csv/tokens-1e30", 2, "tokens", "out of range")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", [["r", 1, 3.0, "1e30"]], ("run", "step", "loss", "tok")),
                                  store, "--tokens", "tok"))
case("csv/tokens-text", 2, "tokens", "'many'", "not a number")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", [["r", 1, 3.0, "many"]], ("run", "step", "loss", "tok")),
                                  store, "--tokens", "tok"))
case("csv/step-times-tokens-per-step-overflows", 2, "tokens per step", "2^63-1")(
    one_csv([["r", 10**15, 3.0]], ("run", "step", "loss"), "--coord", "tokens_per_step=100000"))
case("csv/coord-1e26", 2, "active_params", "1e26", "out of range")(
    one_csv(GOOD, ("run", "step", "loss"), "--coord", "active_params=1e26"))
case("csv/coord-1e26-as-integer", 2, "active_params", "out of range")(
    one_csv(GOOD, ("run", "step", "loss"), "--coord", f"active_params={10**26}"))
case("csv/coord-zero", 2, "stop_after_steps", "positive")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "stop_after_steps=0"))
case("csv/coord-negative", 2, "stop_after_steps", "positive")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "stop_after_steps=-5"))
case("csv/coord-nan", 2, "fit_flops_per_token", "positive")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "fit_flops_per_token=nan"))
case("csv/coord-inf", 2, "fit_flops_per_token", "positive")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "fit_flops_per_token=inf"))
case("csv/coord-text", 2, "active_params", "not a number")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "active_params=lots"))
case("csv/coord-fraction", 2, "stop_after_steps", "whole number")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "stop_after_steps=10.5"))
case("csv/coord-unknown-field", 2, "unknown coordinate 'width'")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "width=3"))
case("csv/coord-no-equals", 2, "expected FIELD=VALUE")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "active_params"))
case("csv/coord-bad-role", 2, "role 'boss'")(one_csv(GOOD, ("run", "step", "loss"), "--coord", "role=boss"))
@case("csv/coord-column-1e26", 2, "active_params", "out of range")
def _(tmp, store):
    path = write_csv(tmp / "t.csv", [["r", 1, 3.0, "1e26"]], ("run", "step", "loss", "n"))
    given = [x for k, v in COORDS.items() if k != "active_params" for x in ("--coord", f"{k}={v}")]
    return ["import", "csv", str(path), "--run", "run", "--step", "step", "--metric", "eval/loss=loss",
            "--coord-column", "active_params=n", *given, "--store", str(store)]


case("csv/missing-mapped-column", 2, "no column 'steps'")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", GOOD), store, "--step", "steps", step=False))
case("csv/no-metric-mapped", 2, "map at least one metric")(
    lambda tmp, store: ["import", "csv", str(write_csv(tmp / "t.csv", GOOD)), "--store", str(store)])
case("csv/no-such-file", 2, "no such file")(lambda tmp, store: csv_import(tmp / "missing.csv", store))
case("csv/a-folder", 2, "a directory, not a CSV file; give the files in it, e.g.", "(it holds 1: t.csv)")(
    lambda tmp, store: csv_import(write_csv(_folder(tmp / "runs") / "t.csv", GOOD).parent, store))
case("csv/a-folder-of-parquet-files", 2, "give the files in it, e.g.", "*.parquet (it holds 1: t.parquet)")(
    lambda tmp, store: csv_import(_parquet(_folder(tmp / "tables") / "t.parquet").parent, store))
case("csv/a-pattern-that-matched-nothing", 2, "no such file; no file matches this pattern")(
    lambda tmp, store: csv_import(tmp / "runs" / "*.csv", store))
case("csv/store-is-a-file", 2, "not a store folder", "is a file")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", GOOD), _write(tmp / "f.txt", "x")))
case("csv/rename-malformed", 2, "expected OLD=NEW")(one_csv(GOOD, ("run", "step", "loss"), "--rename", "eval/loss"))
case("csv/coords-file-a-list", 2, "coords.yaml")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", GOOD), store, "--coords", str(_write(tmp / "coords.yaml", "- 1\n- 2\n"))))
case("csv/coords-file-a-target-file", 2, "this file gives fields at its top level (a target file?)", "{RUN: {name: 'hero'}}")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", GOOD), store, "--coords",
                                  str(_write(tmp / "hero.yaml", "name: hero\nactive_params: 3170000000\n"))))
case("csv/coords-file-bad-value", 2, "active_params", "out of range")(
    lambda tmp, store: csv_import(write_csv(tmp / "t.csv", GOOD), store, "--coords",
                                  str(_write(tmp / "coords.yaml", "new-run: {active_params: 1.0e+40}\n"))))
case("csv/truncated-parquet", 2, "cannot read it as a table")(
    lambda tmp, store: csv_import(_write(tmp / "t.parquet", b"PAR1\x00\x01garbage"), store))


def _rows_of(store: Path, run_id: str, n: int) -> None:
    assert len(Store(store).history(run_id, include_nonfinite=True)) == n


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


# -- pull local --
def local(lines: list[str], name="micro-cpu/fresh", group="micro-cpu", config=None, *extra):
    def build(tmp, store):
        run_dir(tmp / "runs", name, lines, group=group, config=config)
        return ["pull", "local", str(tmp / "runs"), "--store", str(store), *extra]
    return build


GOOD_LINES = metric_lines(range(1, 21))
BACK = [*metric_lines(range(1, 21)), *metric_lines(range(5, 9))]


case("local/good", 0, "1 new run")(local(GOOD_LINES, "fresh"))
case("local/negative-step", 2, "line 3", "step -5", "out of range", "skipped fresh")(
    local([*GOOD_LINES[:2], json.dumps({"step": -5, "train/loss": 1.0}), *GOOD_LINES[2:]], "fresh"))
case("local/step-goes-back-without-marker", 2, "line 23", "step 5 goes back from step 20", "resume marker")(
    local(BACK, "fresh"))
case("local/step-goes-back-after-marker", 0, "restart")(
    local([*metric_lines(range(1, 21)), json.dumps({"step": 4, runfiles.RESUME_KEY: 4}), *metric_lines(range(5, 9))],
          "fresh"))
case("local/goes-below-the-marker", 2, "step 3 goes back from step 4")(
    local([*metric_lines(range(1, 21)), json.dumps({"step": 4, runfiles.RESUME_KEY: 4}), *metric_lines(range(3, 6))],
          "fresh"))
case("local/marker-negative", 2, runfiles.RESUME_KEY, "-1", "out of range")(
    local([*GOOD_LINES, json.dumps({"step": 4, runfiles.RESUME_KEY: -1})], "fresh"))
case("local/step-10^30", 2, "line 1", "step", "out of range")(local([json.dumps({"step": 10**30, "train/loss": 1.0})], "fresh"))
case("local/value-10^400", 2, "line 2", "too large for a float")(
    local([GOOD_LINES[0], json.dumps({"step": 2, "train/loss": 10**400})], "fresh"))
case("local/tokens-1e30", 2, "line 1", "tokens", "out of range")(
    local([json.dumps({"step": 1, "tokens": 1e30, "train/loss": 1.0})], "fresh"))
case("local/tokens-negative", 2, "tokens", "-10", "out of range")(
    local([json.dumps({"step": 1, "tokens": -10, "train/loss": 1.0})], "fresh"))
case("local/deep-json-line-skipped", 0, "1 line that is not a json object", "(line 2)")(
    local([GOOD_LINES[0], "[" * 100_000 + "]" * 100_000, *GOOD_LINES[1:]], "fresh"))
case("local/garbage-lines-skipped", 0, "2 lines", "lines 1, 3")(
    local(["{not json", GOOD_LINES[0], json.dumps({"step": True, "train/loss": 1.0}), *GOOD_LINES[1:]], "fresh"))
case("local/empty-metrics", 0, "no finite eval/loss")(local([], "fresh"))
case("local/id-of-a-trained-rung-elsewhere", 2, "already in the store from local:", "--replace")(
    local(GOOD_LINES, TRAINED.split("/")[1]))
case("local/id-of-a-trained-rung-replace", 0, "replaced", replaces=True)(
    local(GOOD_LINES, TRAINED.split("/")[1], "micro-cpu", None, "--replace"))
case("local/nul-in-name", 2, "control character")(local(GOOD_LINES, "a\x00b"))
case("local/dotdot-group", 2, "looks like a file path")(local(GOOD_LINES, "x", group="../.."))
case("local/no-coordinates", 2, "its config lacks 'active_params'", "--coord")(
    local(GOOD_LINES, "fresh", config={"name": "fresh", "group": "micro-cpu"}))
case("local/coordinate-1e26-in-run-yaml", 2, "active_params", "out of range")(
    local(GOOD_LINES, "fresh", config={"name": "fresh", "coordinates": {**COORDS, "active_params": 1e26}}))
case("local/no-such-folder", 2, "no such directory")(lambda tmp, store: ["pull", "local", str(tmp / "nope"), "--store", str(store)])
case("local/store-is-a-file", 2, "is a file")(
    lambda tmp, store: local(GOOD_LINES, "fresh")(tmp, store)[:3] + ["--store", str(_write(tmp / "s.txt", "x"))])


@case("local/two-runs-one-id", 2, "two runs have the id 'micro-cpu/twin'")
def _(tmp, store):
    run_dir(tmp / "runs" / "a", "twin", GOOD_LINES)
    run_dir(tmp / "runs" / "b", "twin", GOOD_LINES)
    return ["pull", "local", str(tmp / "runs"), "--store", str(store)]


def _one_good_run_added(store: Path) -> None:
    s = Store(store)
    assert len(s.history("micro-cpu/good", include_nonfinite=True)) == len(GOOD_LINES)
    assert "micro-cpu/bad" not in set(s.runs()["run_id"])


@case("local/one-bad-run-beside-a-good-one", 2, "skipped bad", "step -5", "1 run pulled beside it",
      changes_store=True, check=_one_good_run_added)
def _(tmp, store):
    run_dir(tmp / "runs", "good", GOOD_LINES)
    run_dir(tmp / "runs", "bad", [*GOOD_LINES[:3], json.dumps({"step": -5, "train/loss": 1.0})])
    return ["pull", "local", str(tmp / "runs"), "--store", str(store)]


def appended(*lines: str):
    """A run pulled into the store with 20 steps, then `lines` appended to its metrics file."""
    def build(tmp, store):
        d = run_dir(tmp / "runs", "grown", metric_lines(range(1, 21)))
        pull(Store(store), LocalSource(tmp / "runs"))
        with open(d / runfiles.METRICS_FILE, "a") as f:
            f.writelines(x + "\n" for x in lines)
        return ["pull", "local", str(tmp / "runs"), "--store", str(store)]
    return build


case("local/negative-step-appended-to-a-stored-run", 2, "line 24", "step -5", "out of range")(
    appended(json.dumps({"step": 21, "train/loss": 1.0}), json.dumps({"step": -5, "train/loss": 1.0})))
case("local/step-back-appended-to-a-stored-run", 2, "line 24", "step 3 goes back from step 21")(
    appended(json.dumps({"step": 21, "train/loss": 1.0}), json.dumps({"step": 3, "train/loss": 1.0})))
case("local/marked-restart-appended-to-a-stored-run", 0, "steps went back from 21 to 4",
     check=lambda s: _rows_of(s, "micro-cpu/grown", 4))(  # steps 1-4; later ones abandoned
    appended(json.dumps({"step": 21, "train/loss": 1.0}), json.dumps({"step": 3, runfiles.RESUME_KEY: 3}),
             json.dumps({"step": 4, "train/loss": 2.0})))


@case("local/malformed-run-yaml-beside-a-good-run", 2, "skipped bad", "run.yaml", "1 run pulled beside it",
      changes_store=True, check=_one_good_run_added)
def _(tmp, store):
    run_dir(tmp / "runs", "good", GOOD_LINES)
    bad = run_dir(tmp / "runs", "bad", GOOD_LINES)
    (bad / runfiles.CONFIG_FILE).write_text("name: [unclosed\n")
    return ["pull", "local", str(tmp / "runs"), "--store", str(store)]


@case("local/malformed-run-yaml-alone", 2, "skipped", "run.yaml")
def _(tmp, store):
    bad = run_dir(tmp / "runs", "bad", GOOD_LINES)
    (bad / runfiles.CONFIG_FILE).write_text("[" * 5000)
    return ["pull", "local", str(bad), "--store", str(store)]


@case("local/corrected-coordinates-of-a-stored-run", 2, "is stored with stop_after_steps=100", "gives 50", "--replace")
def _(tmp, store):
    return ["pull", "local", _base_runs(store), "--store", str(store), "--coord", "stop_after_steps=50"]


@case("local/re-pull-reads-nothing-new", 0, "0 runs updated, 2 unchanged")
def _(tmp, store):
    return ["pull", "local", _base_runs(store), "--store", str(store)]


def _base_runs(store: Path) -> str:
    """The folder of run folders the base store was pulled from (a run's source names its own folder)."""
    return str(Path(Store(store).runs()["source"].iloc[0].removeprefix("local:")).parent)


# -- pull offline --
def offline(*files: Callable[[Path], Path], extra=()):
    def build(tmp, store):
        for f in files:
            f(tmp)
        return ["pull", "offline", str(tmp / "wandb"), "--store", str(store), *COORD_FLAGS, *extra]
    return build


def _garbage_beside_good(store: Path) -> None:
    s = Store(store)
    assert len(s.history("good")) == 10 and len(s.history("junk", include_nonfinite=True)) == 0


case("offline/good", 0, "1 new run")(offline(good_wandb))
case("offline/garbage-protobuf-valid-crc", 0, "not a wandb record", check=_garbage_beside_good)(
    offline(good_wandb, lambda tmp: wandb_file(tmp, "junk", [b"\xff\xff\xff\xff garbage \x00\x01" * 3])))
case("offline/garbage-after-good-records", 0, "record 4", "not a wandb record")(
    offline(lambda tmp: wandb_file(tmp, "r", [history(1, **{"eval/loss": 4.0}), history(2, **{"eval/loss": 3.9}),
                                              history(3, **{"eval/loss": 3.8}), b"\xff\xfe\xfd" * 9])))
case("offline/custom-step-key-1e30", 2, "1e+30", "out of range", "history record at byte")(
    offline(lambda tmp: wandb_file(tmp, "r", [history(None, my_step=1e30, **{"eval/loss": 3.0})]),
            extra=("--step-key", "my_step")))
# a --step-key no row has: the run is skipped, not stored empty (a later pull with the right key would find it unchanged)
case("offline/step-key-no-row-has", 2, "none of its 10 history rows has the step key 'nope'", "'eval/loss'",
     "nothing of it was stored")(offline(good_wandb, extra=("--step-key", "nope")))
case("offline/negative-step", 2, "step -5", "out of range")(
    offline(lambda tmp: wandb_file(tmp, "r", [history(-5, **{"eval/loss": 3.0})])))
case("offline/not-a-wandb-file", 2, "not a wandb run file")(
    offline(lambda tmp: _write(_mk(tmp / "wandb" / "run-x.wandb"), b"hello world, not wandb")))
case("offline/bad-header-beside-good", 2, "skipped", "not a wandb run file", "1 run pulled beside it", changes_store=True)(
    offline(good_wandb, lambda tmp: _write(_mk(tmp / "wandb" / "run-x.wandb"), b"garbage")))
case("offline/byte-flipped-read-to-the-damage", 0, "checksum mismatch")(
    offline(lambda tmp: _flip(good_wandb(tmp), 200)))
case("offline/truncated-read-to-the-damage", 0, "running", check=lambda s: _rows_of(s, "good", 4))(
    offline(lambda tmp: _truncate(good_wandb(tmp), 150)))
case("offline/empty-folder", 2, "no .wandb file")(offline(lambda tmp: _mk(tmp / "wandb" / "x" / "y").parent))
case("offline/id-of-a-run-from-a-run-folder", 2, "run id 'clash' is already in the store from local:", "offline:")(
    lambda tmp, store: _offline_clash(tmp, store))
case("offline/not-a-wandb-path", 2, "not a wandb run")(
    lambda tmp, store: ["pull", "offline", str(_write(tmp / "x.txt", "x")), "--store", str(store)])


def _offline_clash(tmp: Path, store: Path) -> list[str]:
    # A wandb run file whose id is the trained rung's id (the offline run id is the file's).
    good_wandb(tmp, "clash")
    s = Store(store)
    with s.writer("test") as w:  # a run "clash" stored from a local folder
        w.stage({**s.runs().iloc[0].to_dict(), "run_id": "clash", "cursor_json": "{}"},
                s.history(TRAINED, include_nonfinite=True).drop(columns=["run_id"]))
        w.commit()
    return ["pull", "offline", str(tmp / "wandb"), "--store", str(store), *COORD_FLAGS]


def _mk(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _flip(path: Path, at: int) -> Path:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _truncate(path: Path, size: int) -> Path:
    path.write_bytes(path.read_bytes()[:size])
    return path


# -- runs, history and the store's own files --
def _manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


def _history_file(store: Path, run_id: str = TRAINED) -> Path:
    return store / _manifest(store)["history"][run_id]


def damage(how: Callable[[Path], None], *args: str):
    def build(tmp, store):
        how(store)
        return [*args, "--store", str(store)]
    return build


case("runs/healthy", 0, "169K-A81K", "50K-A20K")(damage(lambda s: None, "runs"))
case("runs/truncated-runs-table", 2, "damaged runs table", "runs --repair")(
    damage(lambda s: _truncate(s / _manifest(s)["runs"], 40), "runs"))
case("runs/missing-runs-table", 2, "runs table is missing", "--repair")(
    damage(lambda s: (s / _manifest(s)["runs"]).unlink(), "runs"))
case("runs/manifest-a-json-list", 2, "damaged store manifest", "a JSON list", "runs --repair")(
    damage(lambda s: (s / "manifest.json").write_text("[1, 2]"), "runs"))
case("runs/manifest-garbage", 2, "damaged store manifest", "--repair")(
    damage(lambda s: (s / "manifest.json").write_text("{\"format\": 1, \"hist"), "runs"))
case("runs/manifest-deep", 2, "damaged store manifest")(
    damage(lambda s: (s / "manifest.json").write_text("[" * 100_000 + "]" * 100_000), "runs"))
case("runs/manifest-escapes-the-store", 2, "not a file of this store")(
    damage(lambda s: (s / "manifest.json").write_text(json.dumps({**_manifest(s), "history": {"x": "../../etc/passwd"}})), "runs"))
case("runs/manifest-history-a-list", 2, "history is not an object")(
    damage(lambda s: (s / "manifest.json").write_text(json.dumps({**_manifest(s), "history": []})), "runs"))
case("runs/manifest-bad-settings", 2, "settings")(
    damage(lambda s: (s / "manifest.json").write_text(json.dumps({**_manifest(s), "settings": {"fit_metric": ""}})), "runs"))
case("runs/manifest-missing", 2, "manifest.json: missing", "2 run files in history/", "runs --repair")(
    damage(lambda s: (s / "manifest.json").unlink(), "runs"))
case("runs/manifest-an-empty-object", 2, "damaged store manifest (no format)", "runs --repair")(
    damage(lambda s: (s / "manifest.json").write_text("{}"), "runs"))
case("pull/into-a-store-whose-manifest-is-missing", 2, "manifest.json: missing", "--repair")(
    lambda tmp, store: damage(lambda s: (s / "manifest.json").unlink(), "runs")(tmp, store)[:0]
    + local(GOOD_LINES, "fresh")(tmp, store))
case("runs/manifest-other-format", 2, "store format 99")(
    damage(lambda s: (s / "manifest.json").write_text(json.dumps({**_manifest(s), "format": 99})), "runs"))
case("runs/damaged-history-warned-others-listed", 0, "damaged history file", "--repair", "50K-A20K")(
    damage(lambda s: _truncate(_history_file(s), 30), "runs"))
case("runs/store-is-a-file", 2, "is a file")(lambda tmp, store: ["runs", "--store", str(_write(tmp / "f", "x"))])
case("runs/no-store", 2, "no store here")(lambda tmp, store: ["runs", "--store", str(tmp / "none")])
case("history/truncated-history-file", 2, "damaged history of run", TRAINED, "--repair")(
    damage(lambda s: _truncate(_history_file(s), 30), "history", TRAINED))
case("history/missing-history-file", 2, "missing", "--repair")(
    damage(lambda s: _history_file(s).unlink(), "history", TRAINED))
case("history/other-run-unharmed", 0, "values")(damage(lambda s: _truncate(_history_file(s), 30), "history", OTHER))
case("history/manifest-a-json-list", 2, "damaged store manifest")(
    damage(lambda s: (s / "manifest.json").write_text("[]"), "history", TRAINED))
case("history/out-a-folder", 2, "is a folder")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(tmp), "--store", str(store)])
case("history/out-under-a-file", 2, "is a file, not a folder")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(_write(tmp / "f", "x") / "h.csv"),
                        "--store", str(store)])
case("history/out-over-the-store-manifest", 2, "is a file of the metric store")(
    lambda tmp, store: ["history", TRAINED, "--format", "json", "--out", str(store / "manifest.json"), "--store", str(store)])
case("history/out-over-a-file-of-another-kind", 2, "is not a .csv or .json file")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(_write(tmp / "run.yaml", "x: 1")),
                        "--store", str(store)])
case("history/out-over-a-csv-of-the-user", 2, "exists and is not an export of `ladder history`", "move that one away")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(_write(tmp / "run.csv", "Step,Loss\n1,2\n")),
                        "--store", str(store)])
case("history/out-over-its-own-earlier-export", 0, "Wrote")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out",
                        str(_write(tmp / "h.csv", "step,tokens,fraction,metric,value\n1,2,0.1,eval/loss,3\n")),
                        "--store", str(store)])
case("history/out-over-an-empty-file", 0, "Wrote")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(_write(tmp / "made.csv", "")),
                        "--store", str(store)])
case("history/out-over-a-json-list-of-the-user", 2, "exists and is not an export of `ladder history`")(
    lambda tmp, store: ["history", TRAINED, "--format", "json", "--out",
                        str(_write(tmp / "mine.json", '[{"step": 1, "loss": 2.5}]')), "--store", str(store)])
case("history/out-over-its-own-earlier-json", 0, "Wrote")(
    lambda tmp, store: ["history", TRAINED, "--format", "json", "--out", str(_write(
        tmp / "h.json", '[\n {\n  "step": 1,\n  "tokens": 40,\n  "fraction": 0.01,\n  "metric": "m",\n  "value": 3\n }\n]\n')),
                        "--store", str(store)])
case("history/out-table-format", 2, "h.txt: the table is printed, not written to a file; give --format csv or json")(
    lambda tmp, store: ["history", TRAINED, "--out", str(tmp / "h.txt"), "--store", str(store)])
def _pull_again(*extra: str):
    """Pull the base store's trained run again from its own folder (nothing new to read)."""
    def build(tmp, store):
        source = Store(store).run(TRAINED)["source"]
        return ["pull", "local", source.split(":", 1)[1], "--store", str(store), *extra]
    return build


case("pull/up-to-date-with-a-fit-metric-no-run-logged", 0, "0 runs updated", "--fit-metric nope: no run in",
     changes_store=True)(_pull_again("--fit-metric", "nope"))
def _fit_metric_is(metric: str):
    def check(store: Path) -> None:
        assert Store(store).settings().fit_metric == metric
    return check


case("pull/up-to-date-with-a-fit-metric-the-runs-log", 0, "0 runs updated", changes_store=True,
     check=_fit_metric_is("train/loss"))(_pull_again("--fit-metric", "train/loss"))
case("history/format-from-out-suffix", 0, "Wrote")(
    lambda tmp, store: ["history", TRAINED, "--out", str(tmp / "h.json"), "--store", str(store)])
case("history/out-csv-with-format-table", 2, "--format table prints to the terminal; give --format csv")(
    lambda tmp, store: ["history", TRAINED, "--format", "table", "--out", str(tmp / "h.csv"), "--store", str(store)])
case("history/out-suffix-against-format", 2, "is a .json file but --format csv writes CSV")(
    lambda tmp, store: ["history", TRAINED, "--format", "csv", "--out", str(tmp / "h.json"), "--store", str(store)])
case("history/metric-never-logged", 2, "--metric 'nope'", "never logged it")(
    lambda tmp, store: ["history", TRAINED, "--metric", "nope", "--store", str(store)])
case("history/tail-negative", 2, "--tail -1")(lambda tmp, store: ["history", TRAINED, "--tail", "-1", "--store", str(store)])
case("history/unknown-run", 2, "no run 'nope'")(lambda tmp, store: ["history", "nope", "--store", str(store)])
case("history/csv-out", 0, "Wrote 110 rows")(
    lambda tmp, store: ["history", TRAINED, "--metric", "all", "--format", "csv", "--out", str(tmp / "h.csv"), "--store", str(store)])
case("pull/into-a-damaged-runs-table", 2, "damaged runs table", "--repair")(
    lambda tmp, store: damage(lambda s: _truncate(s / _manifest(s)["runs"], 40), "runs")(tmp, store)[:0]
    + local(GOOD_LINES, "fresh")(tmp, store))
case("pull/into-a-manifest-that-is-a-folder", 2, "manifest.json", "expected a file, found a folder; move that folder out")(
    lambda tmp, store: _swap_manifest_for_folder(store) + local(GOOD_LINES, "fresh")(tmp, store))


def _swap_manifest_for_folder(store: Path) -> list[str]:
    shutil.move(store / "manifest.json", store.parent / "manifest.saved")
    (store / "manifest.json").mkdir()
    return []


REPAIRS = [
    ("manifest-a-json-list", lambda s: (s / "manifest.json").write_text("[1]"), "rebuilt the manifest", {TRAINED, OTHER}),
    ("manifest-missing", lambda s: (s / "manifest.json").unlink(), "rebuilt the manifest", {TRAINED, OTHER}),
    ("manifest-an-empty-object", lambda s: (s / "manifest.json").write_text("{}"), "rebuilt the manifest", {TRAINED, OTHER}),
    ("runs-table-truncated", lambda s: _truncate(s / _manifest(s)["runs"], 40), "rebuilt the runs table", {TRAINED, OTHER}),
    ("history-truncated", lambda s: _truncate(_history_file(s), 30), "dropped run micro-cpu/169K-A81K", {OTHER}),
    ("healthy", lambda s: None, "nothing to repair", {TRAINED, OTHER}),
    ("manifest-lost-an-entry", lambda s: _without_entry(s, TRAINED),
     f"rebuilt the manifest's entry of run {TRAINED} (its history file history/", {TRAINED, OTHER}),
    ("runs-table-lost-a-row", lambda s: _without_row(s, TRAINED),
     f"rebuilt the runs table's row of run {TRAINED} (from its history file)", {TRAINED, OTHER}),
    ("history-files-swapped", lambda s: _swap_files(s, TRAINED, OTHER), f"rebuilt the manifest's entry of run {TRAINED} "
     "(it named history/", {TRAINED, OTHER}),
    ("manifest-lost-an-entry-and-runs-table-truncated", lambda s: (_without_entry(s, TRAINED),
                                                                    _truncate(s / _manifest(s)["runs"], 40)),
     f"rebuilt the manifest's entry of run {TRAINED}", {TRAINED, OTHER}),
    ("manifest-names-no-runs-table", lambda s: _set_manifest(s, runs=None),
     "rebuilt the runs table (its rows read back from the history files)", {TRAINED, OTHER}),
]
"""(name, damage, what the repair says, the runs it keeps): a damage that leaves every run's history file whole
keeps every run, with every row (a repair that dropped one would lose a run for a wrong line of the manifest)."""


def _without_entry(store: Path, run_id: str) -> None:
    manifest = _manifest(store)
    del manifest["history"][run_id]
    (store / "manifest.json").write_text(json.dumps(manifest))


def _set_manifest(store: Path, **fields) -> None:
    (store / "manifest.json").write_text(json.dumps({**_manifest(store), **fields}))


def _without_row(store: Path, run_id: str) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = store / _manifest(store)["runs"]
    table = pq.read_table(path)
    pq.write_table(table.filter(pc.not_equal(table["run_id"], run_id)).replace_schema_metadata(table.schema.metadata),
                   path)


def _swap_files(store: Path, a: str, b: str) -> None:
    first, second = _history_file(store, a), _history_file(store, b)
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)


# ---- running the corpus -----------------------------------------------------------------------------
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_corpus(c: Case, base: Path, tmp_path: Path):
    store = tmp_path / "work" / "store"
    shutil.copytree(base / "store", store)
    before = snapshot(store)
    scratch = tmp_path / "in"
    scratch.mkdir()
    args = c.build(scratch, store)
    files = tree(store)
    res = CliRunner().invoke(app, args)
    out = res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), f"{c.name}: {res.exception!r}\n{out}"
    assert "Traceback" not in out, out
    assert res.exit_code == c.code, f"{c.name}: exit {res.exit_code}\n{out}"
    for word in c.words:
        assert word.lower() in out.lower(), f"{c.name}: {word!r} not in\n{out}"
    if c.code == 2:
        assert [line.startswith("error:") for line in res.stderr.splitlines()].count(True) == 1, res.stderr
    if c.code != 0 and not c.changes_store:
        assert tree(store) == files, f"{c.name}: the store changed"
    elif _readable(store):
        after = snapshot(store)
        for run_id, rows in before["rows"].items():
            if c.replaces and run_id == TRAINED:
                continue
            assert after["rows"].get(run_id) == rows, f"{c.name}: {run_id} lost rows"
    if c.check is not None:
        c.check(store)


def tree(store: Path) -> dict[str, bytes]:
    """Every file of the store and its bytes (the lock file aside)."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and p.name != ".lock"}


def _readable(store: Path) -> bool:
    try:
        snapshot(store)
        return True
    except LadderError:
        return False


@pytest.mark.parametrize("name, how, words, left", REPAIRS, ids=[r[0] for r in REPAIRS])
def test_repair(name, how, words, left, base: Path, tmp_path: Path):
    store = tmp_path / "store"
    shutil.copytree(base / "store", store)
    before = snapshot(store)
    how(store)
    res = CliRunner().invoke(app, ["runs", "--repair", "--store", str(store)])
    assert res.exit_code == 0 and words in res.output, res.output
    s = Store(store)
    assert set(s.runs()["run_id"]) == left
    for run_id in left:  # every run kept has every row it had, and its coordinates
        assert len(s.history(run_id, include_nonfinite=True)) == before["rows"][run_id]
        assert s.run(run_id)["active_params"] == COORDS["active_params"]
    res = CliRunner().invoke(app, ["runs", "--store", str(store)])
    assert res.exit_code == 0 and "damaged" not in res.output and "warning" not in res.output, res.output


@pytest.mark.parametrize("name, how, said", [(r[0], r[1], w) for r, w in zip(REPAIRS[-5:-2], (
    f"run {TRAINED}: the store's manifest names no history file for it",
    f"run {TRAINED}: its row in the runs table is lost",
    f"run {TRAINED}: damaged history file",
))], ids=[r[0] for r in REPAIRS[-5:-2]])
def test_a_store_whose_files_disagree_is_said_to_need_a_repair_before_it(name, how, said, base: Path, tmp_path: Path):
    store = tmp_path / "store"
    shutil.copytree(base / "store", store)
    how(store)
    res = CliRunner().invoke(app, ["runs", "--store", str(store)])
    assert res.exit_code == 0 and said in " ".join(res.output.split()) and "ladder runs --repair" in res.output, res.output
    if name == "manifest-lost-an-entry":  # its history cannot be read: one line that says what to do, not a bug
        res = CliRunner().invoke(app, ["history", TRAINED, "--store", str(store)])
        assert res.exit_code == 2 and "names no history file for it" in res.stderr and "--repair" in res.stderr


def test_the_corpus_is_big_enough():
    assert len(CASES) + len(REPAIRS) >= 80
    assert sum(c.code == 2 for c in CASES) >= 60


# ---- kills timed into pulls, then a rerun with other flags ------------------------------------------
def _table(tmp: Path, n: int) -> Path:
    return write_csv(tmp / "ladder.csv", [[f"r{i:03d}", s, 3.0 + i / 1000 + 1 / s] for i in range(n) for s in (10, 20)])


def _kill_after(monkeypatch, n_reads: int) -> None:
    real = TableSource.read
    count = {"n": 0}

    def read(self, ref, cursor=None):
        count["n"] += 1
        if count["n"] > n_reads:
            raise KeyboardInterrupt
        return real(self, ref, cursor)

    monkeypatch.setattr(TableSource, "read", read)


COLUMNS = ColumnMap(metrics={"eval/loss": "loss"}, run="run", step="step")


def test_import_killed_after_100_of_305_then_rerun_with_corrected_coordinates(tmp_path, monkeypatch):
    path, store = _table(tmp_path, 305), Store(tmp_path / "store")
    old = CoordinateOverrides(all_runs={**{k: str(v) for k, v in COORDS.items()}, "active_params": "1000"})
    new = CoordinateOverrides(all_runs={**{k: str(v) for k, v in COORDS.items()}, "active_params": "2000"})
    _kill_after(monkeypatch, 100)
    with pytest.raises(KeyboardInterrupt):
        pull(store, TableSource(path, COLUMNS), overrides=old, full=True)
    assert not store.exists()
    monkeypatch.undo()
    result = pull(store, TableSource(path, COLUMNS), overrides=new, full=True)
    assert result.resumed == 0 and len(result.pulled) == 305
    assert any("100 runs staged by an interrupted pull discarded (its flags differ from these" in m
               for m in result.messages)
    runs = store.runs()
    assert len(runs) == 305 and set(runs["active_params"]) == {2000}
    assert len(store.history()) == 610


@pytest.mark.parametrize("point", ["read", "stage", "runs-table", "manifest", "after-manifest"])
def test_a_kill_at_any_point_then_other_flags_ends_in_the_new_state(point, tmp_path, monkeypatch):
    import ladder.data.storefiles as store_files
    import ladder.data.storewriter as store_writer

    path, store = _table(tmp_path, 12), Store(tmp_path / "store")
    flags = {"old": CoordinateOverrides(all_runs={k: str(v) for k, v in COORDS.items()}),
             "new": CoordinateOverrides(all_runs={**{k: str(v) for k, v in COORDS.items()}, "stop_after_steps": "40"})}
    pull(store, TableSource(write_csv(tmp_path / "first.csv", [["keep", 5, 3.0]]), COLUMNS), overrides=flags["old"])
    kill = {"read": lambda: _kill_after(monkeypatch, 6),
            "stage": lambda: monkeypatch.setattr(store_writer.StoreWriter, "_journal", _boom_on_run(store_writer.StoreWriter._journal, 7)),
            "runs-table": lambda: monkeypatch.setattr(store_files.pq, "write_table", _boom_on(store_files.pq.write_table, "/runs-")),
            "manifest": lambda: monkeypatch.setattr(store_files, "write_text_atomic", _boom_on(store_files.write_text_atomic, "manifest")),
            "after-manifest": lambda: monkeypatch.setattr(store_writer.StoreWriter, "_drop_pending", _raise)}
    kill[point]()
    with pytest.raises(KeyboardInterrupt):
        pull(store, TableSource(path, COLUMNS), overrides=flags["old"], full=True)
    monkeypatch.undo()
    if point != "after-manifest":
        assert set(store.runs()["run_id"]) == {"keep"}  # wholly old
    result = pull(store, TableSource(path, COLUMNS), overrides=flags["new"], full=True, replace=True)
    runs = store.runs().set_index("run_id")
    assert len(runs) == 13 and (runs.drop(index="keep")["stop_after_steps"] == 40).all()
    assert runs.loc["keep", "stop_after_steps"] == 100 and len(store.history()) == 25
    h = store.history()
    assert (h.loc[h["run_id"] != "keep", "fraction"] == h.loc[h["run_id"] != "keep", "step"] / 40).all()
    assert not list((store.root / "pending").glob("*")) and not list(store.root.rglob("*.tmp"))
    assert result.messages is not None


def _raise(*args, **kwargs):
    raise KeyboardInterrupt


def _boom_on(real, needle):
    def wrapped(*args, **kwargs):
        if any(needle in str(a) for a in args):
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    return wrapped


def _boom_on_run(real, n):
    count = {"n": 0}

    def wrapped(self, entry):
        if "run_id" in entry:
            count["n"] += 1
            if count["n"] == n:
                raise KeyboardInterrupt
        return real(self, entry)
    return wrapped


def test_a_journal_left_by_a_crash_never_blocks_the_next_pull(tmp_path):
    path, store = _table(tmp_path, 3), Store(tmp_path / "store")
    overrides = CoordinateOverrides(all_runs={k: str(v) for k, v in COORDS.items()})
    pull(store, TableSource(path, COLUMNS), overrides=overrides, full=True)
    key = TableSource(path, COLUMNS).key
    with store.writer(key, None) as w:
        journal = w._pending_path
    journal.parent.mkdir(exist_ok=True)
    flags = _flags_of(store, path, overrides)
    journal.write_text("\n".join([
        json.dumps({"key": key, "flags": flags}),
        "{torn",
        json.dumps({"key": key, "run_id": "r000", "row": {"run_id": "r000", "active_params": 10**26}, "history": "history/x.parquet", "base": None}),
        json.dumps({"key": key, "run_id": "r001", "row": {"run_id": "r001"}, "history": "../../etc/passwd", "base": None}),
        json.dumps([1, 2]),
        json.dumps({"key": key, "settings": {"fit_metric": ""}}),
    ]) + "\n")
    result = pull(store, TableSource(path, COLUMNS), overrides=overrides, full=True)
    assert any("damaged line(s)" in m for m in result.messages)
    assert len(store.runs()) == 3 and len(store.history()) == 6
    assert not journal.exists()


def _flags_of(store, path, overrides):
    """The digest a pull of `path` with `overrides` writes (read back from a journal it leaves)."""
    from ladder.data.storewriter import StoreWriter

    real = StoreWriter.commit
    try:
        StoreWriter.commit = _raise
        with pytest.raises(KeyboardInterrupt):
            pull(store, TableSource(path, COLUMNS), overrides=overrides, full=True)
    finally:
        StoreWriter.commit = real
    journal = next((store.root / "pending").glob("*.jsonl"))
    return json.loads(journal.read_text().splitlines()[0])["flags"]


def test_stale_temporary_files_are_cleaned_on_the_next_write(tmp_path):
    path, store = _table(tmp_path, 2), Store(tmp_path / "store")
    overrides = CoordinateOverrides(all_runs={k: str(v) for k, v in COORDS.items()})
    pull(store, TableSource(path, COLUMNS), overrides=overrides, full=True)
    left = [store.root / ".manifest.json.abc123.tmp", store.root / "runs-9-deadbeef.parquet.tmp",
            store.root / "history" / "r000-0123456789ab.parquet.tmp"]
    for f in left:
        f.write_text("half written")
    assert Store(store.root).runs().shape[0] == 2  # readers ignore them
    pull(store, TableSource(path, COLUMNS), overrides=overrides, full=True)
    assert not any(f.exists() for f in left)


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _parquet(path: Path) -> Path:
    pd.DataFrame({"run": ["r"], "step": [1], "loss": [3.0]}).to_parquet(path)
    return path

