"""A corpus of bad inputs to plan, spec, train, watch, report, plot, predict, replan and fit.

Each case runs in-process through typer's runner inside a fresh folder holding a small world (a
hero run config, its prediction, the hero's run folder, a CSV ladder and a few files to trip over)
and states the exit code it must get and the words its message must contain. No case may print a
traceback; a usage error (exit 2) is one line on stderr. Watch verdicts: 0 on track, 3 cannot
judge, 4 warning, 5 alarm.

`CASES` and `run_case` are what `tests/test_secrets.py` replays with secrets in the environment.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import Result
from typer.testing import CliRunner

from ladder.cli import app
from ladder.errors import LadderError
from tests.synthetic_ladder import micro_plan

HERO = micro_plan().hero
RUNG = micro_plan().rungs[0]
EVALS = np.array(HERO.eval_steps())
DEEP = "a: " + "[" * 5000 + "]" * 5000 + "\n"


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    args: tuple[str, ...]
    code: int
    words: tuple[str, ...] = ()
    files: dict[str, str | bytes] = field(default_factory=dict)
    """Extra files (path relative to the case's folder: text or bytes) written before the run."""
    world: str = ""
    """A change to the standard world (see `WORLDS`) made before the run."""

    @property
    def id(self) -> str:
        return f"{self.group}-{self.name}"


# ---- the world every case starts from ------------------------------------------------------------


def _prediction_rows(factor: float = 1.0, rel50: float = 0.002, rel90: float = 0.006,
                     steps: np.ndarray = EVALS) -> list[dict]:
    med = 2.0 * factor * np.ones(len(steps))
    return [{"step": int(s), "tokens": int(s) * HERO.tokens_per_step, "fraction": s / HERO.stop_after_steps,
             "compute": float(s) * 1e9, "median": m, "lo50": m * (1 - rel50), "hi50": m * (1 + rel50),
             "lo90": m * (1 - rel90), "hi90": m * (1 + rel90), "in_assumptions": True}
            for s, m in zip(steps, med)]


def write_prediction(root: Path, rows: list[dict], metric: str = "eval/loss", run_name: str = HERO.name) -> None:
    folder = root / "pred"
    folder.mkdir(parents=True, exist_ok=True)
    data = {"run_name": run_name, "metric": metric, "planned_steps": HERO.stop_after_steps, "forms": [],
            "assumptions": {}, "schedule": {}, "warnings": [], "final": rows[-1] if rows else {}, "table": rows}
    (folder / "prediction.json").write_text(json.dumps(data))


def write_hero(root: Path, factor: float, upto: float = 0.4, metric: str = "eval/loss") -> None:
    """The hero's run folder: its eval metric at `factor` × 2.0 up to `upto` of the run, still running."""
    run_dir = root / "runs" / HERO.name
    run_dir.mkdir(parents=True, exist_ok=True)
    HERO.save(run_dir / "run.yaml")
    last = int(upto * HERO.stop_after_steps)
    rows = []
    for s in EVALS[EVALS <= last]:
        rows.append({"step": int(s), "tokens": int(s) * HERO.tokens_per_step, "train/loss": 2.0 * factor})
        rows.append({"step": int(s), metric: 2.0 * factor})
    rows.append({"step": last + 1, "tokens": (last + 1) * HERO.tokens_per_step, "train/loss": 2.0 * factor})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": last + 1, "updated": time.time()}))


def _csv(root: Path) -> None:
    c = np.array([1e15, 3e15, 1e16, 3e16, 1e17])
    pd.DataFrame({"run_id": [f"r{i}" for i in range(5)], "step": 100, "compute": c,
                  "loss": 1.5 + 30 * c**-0.1}).to_csv(root / "ladder.csv", index=False)


def build_world(root: Path) -> None:
    HERO.save(root / "hero.yaml")
    RUNG.save(root / "rung.yaml")
    write_prediction(root, _prediction_rows())
    write_hero(root, factor=1.0)
    _csv(root)
    (root / "afile").write_text("not a folder\n")
    (root / "adir").mkdir()
    (root / "deep.yaml").write_text(DEEP)


def _nan_rows(columns=("median",), where=lambda s: True) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        rows = _prediction_rows()
        for r in rows:
            if where(r["step"]):
                r.update({c: None for c in columns})
        write_prediction(root, rows)
        write_hero(root, factor=1.6)

    return change


def _rows(rows_of: Callable[[], list[dict]], factor: float = 1.6, **kw) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        write_prediction(root, rows_of(), **kw)
        write_hero(root, factor=factor)

    return change


def _outside(rows: list[dict]) -> list[dict]:
    return [{**r, "in_assumptions": False} for r in rows]


def _text_values(rows: list[dict]) -> list[dict]:
    return [{**r, "median": "two"} for r in rows]


WORLDS: dict[str, Callable[[Path], None]] = {
    "on-track": lambda root: write_hero(root, factor=1.0),
    "warning": lambda root: write_hero(root, factor=1.007),
    "off-60%": lambda root: write_hero(root, factor=1.6),
    "off-57%-nan-prediction": _nan_rows(("median", "lo50", "hi50", "lo90", "hi90")),
    "off-75%-nan-median": _nan_rows(("median",)),
    "off-60%-nan-band": _nan_rows(("lo90",)),
    "off-60%-nan-later-rows": _nan_rows(("median",), where=lambda s: s > 0.2 * HERO.stop_after_steps),
    "off-60%-nan-early-rows": _nan_rows(("median",), where=lambda s: s < 0.5 * HERO.stop_after_steps),
    "off-60%-prediction-starts-late": _rows(lambda: _prediction_rows(steps=EVALS[EVALS > 0.5 * HERO.stop_after_steps])),
    "off-60%-prediction-for-another-metric": _rows(_prediction_rows, metric="eval/paloma/loss"),
    "off-60%-empty-prediction": _rows(lambda: []),
    "off-60%-prediction-out-of-assumptions": _rows(lambda: _outside(_prediction_rows())),
    "off-60%-prediction-of-text": _rows(lambda: _text_values(_prediction_rows())),
    "off-60%-prediction-unsorted": _rows(lambda: _prediction_rows()[::-1]),
    "nan-loss-empty-prediction": _rows(lambda: [], factor=float("nan")),
    "nan-loss": _rows(_prediction_rows, factor=float("nan")),
    "prediction-not-json": lambda root: (root / "pred" / "prediction.json").write_text("{not json"),
    "prediction-without-run": lambda root: (root / "pred" / "prediction.json").write_text('{"table": []}'),
    "prediction-for-another-run": _rows(_prediction_rows, factor=1.0, run_name="someone-else"),
    "state-of-another-run": lambda root: (root / "pred" / "watch-state.json").write_text(
        json.dumps({"run": "other", "last_step": 10, "sent": {}, "verdicts": [
            {"step": 10, "verdict": "ok", "time": 0.0, "value": 3.0}]})),
    "state-corrupt": lambda root: (root / "pred" / "watch-state.json").write_text("[1, 2"),
}


def run_case(case: Case, root: Path, env: dict[str, str] | None = None) -> Result:
    """Build the world in `root` (an empty folder), apply the case's change and run it there."""
    build_world(root)
    if case.world:
        WORLDS[case.world](root)
    for rel, content in case.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    before = Path.cwd()
    os.chdir(root)
    try:
        clean = {"LADDER_WEBHOOK_URL": None, "WANDB_API_KEY": None, "LADDER_DEBUG": None}  # None: unset
        return CliRunner().invoke(app, list(case.args), env={**clean, **(env or {})}, catch_exceptions=True)
    finally:
        os.chdir(before)


# ---- the corpus ------------------------------------------------------------------------------------


_PREDICTION = json.dumps({"run_name": "hero", "metric": "eval/loss", "final": {"median": 2.0}, "table": []})
"""The fields that make a file a prediction, as `ladder predict` writes prediction.json."""


def _plan(name, args, words, code=2, **kw) -> Case:
    return Case("plan", name, ("plan", *args), code, tuple(words), **kw)


def _spec(name, yaml_text, words, code=2, extra=()) -> Case:
    return Case("spec", name, ("spec", "model.yaml", *extra), code, tuple(words), files={"model.yaml": yaml_text})


def _model(**changes) -> str:
    base = {"d_model": 32, "n_layers": 2, "n_heads": 2, "head_dim": 16, "n_kv_heads_local": 1,
            "n_kv_heads_global": 1, "vocab_size": 256, "dense_width": 64}
    base.update(changes)
    return "".join(f"{k}: {v}\n" for k, v in base.items())


def _train(name, yaml_text, words, code=2) -> Case:
    return Case("train", name, ("train", "run.yaml"), code, tuple(words), files={"run.yaml": yaml_text})


def _run_yaml(path: str, value: str) -> str:
    """The hero's run config with the field at dotted `path` replaced by the YAML text `value`."""
    import yaml

    data = HERO.to_dict()
    if not path.startswith("coordinates."):  # the block, computed from the fields, warns of any edit of one: drop it
        del data["coordinates"]
    node = data
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    node[last] = "@@VALUE@@"
    return yaml.safe_dump(data, sort_keys=False).replace("'@@VALUE@@'", value)


def _watch(name, world, words, code, extra=()) -> Case:
    args = ("watch", "--prediction", "pred", "--local", f"runs/{HERO.name}", "--store", "store", "--once", *extra)
    return Case("watch", name, args, code, tuple(words), world=world)


CANNOT = "CANNOT-JUDGE"

PLAN = [
    _plan("tpp-inf", ["micro-cpu", "--tpp", "inf"], ["tpp=inf", "finite"]),
    _plan("tpp-1e308", ["micro-cpu", "--tpp", "1e308"], ["tpp=1e+308", "too large"]),
    _plan("tpp-nan", ["micro-cpu", "--tpp", "nan"], ["tpp=nan", "finite"]),
    _plan("tpp-negative", ["micro-cpu", "--tpp", "-5"], ["--tpp -5: tpp=-5 must be positive"]),
    _plan("tpp-zero", ["micro-cpu", "--tpp", "0"], ["tpp=0 must be positive"]),
    _plan("tpp-tiny", ["micro-cpu", "--tpp", "1e-9"], ["plans only", "raise tpp"]),
    _plan("tpp-1e9-steps", ["micro-cpu", "--tpp", "1e9"], ["steps a plan allows", "lower tpp"]),
    _plan("tpp-text", ["micro-cpu", "--tpp", "lots"], ["--tpp"]),
    _plan("width-1e9-depth-1000", ["micro-cpu", "--widths", "1000000000", "--depths", "1000"],
          ["width 1000000000", "at most 1,048,576 wide"]),
    _plan("depth-100000", ["micro-cpu", "--widths", "32", "--depths", "100000"], ["depth 100000", "10,000 deep"]),
    _plan("width-zero", ["micro-cpu", "--widths", "0", "--depths", "2"], ["--widths 0: 0 is not positive"]),
    _plan("depth-negative", ["micro-cpu", "--widths", "32", "--depths", "-2"], ["--depths -2: -2 is not positive"]),
    _plan("width-not-multiple-of-head", ["micro-cpu", "--widths", "33", "--depths", "2"],
          ["width 33", "multiple of 16"]),
    _plan("widths-depths-mismatch", ["micro-cpu", "--widths", "32,48", "--depths", "2"], ["--widths gives 2", "--depths gives 1"]),
    _plan("widths-text", ["micro-cpu", "--widths", "wide"], ["--widths 'wide'", "expected integers"]),
    _plan("widths-an-empty-item", ["micro-cpu", "--widths", "32,,48", "--depths", "2,2"],
          ["--widths '32,,48'", "expected integers"]),
    _plan("widths-huge-int", ["micro-cpu", "--widths", "1" + "0" * 30, "--depths", "2"], ["at most 1,048,576 wide"]),
    _plan("racks-zero", ["micro-cpu", "--racks", "0,1,1,1"], ["--racks 0,1,1,1: 0 is not positive"]),
    _plan("racks-count", ["micro-cpu", "--racks", "1,1"], ["--racks gives 2 values for 4 rungs"]),
    _plan("seq-len-zero", ["micro-cpu", "--seq-len", "0"], ["--seq-len 0: seq_len=0", "positive"]),
    _plan("wsd-without-cooldown", ["micro-cpu", "--set", "schedule.decay=wsd", "--set", "schedule.cooldown_fraction=0"],
          ["schedule.cooldown_fraction=0: a WSD schedule cools down at its end"]),
    _plan("two-rungs-of-one-shape", ["micro-cpu", "--set", "rungs=[{d_model: 32, n_layers: 2}, {d_model: 48, n_layers: 2}, "
                                     "{d_model: 48, n_layers: 2}]"],  # it listed every run's name, no position
          ["rungs[1] and rungs[2] of the recipe plan runs of one name, 77K-A31K (the same shape, d_model 48 and 2 "
           "layers): give each its own size, or leave one out"]),
    _plan("cooldown-for-cosine", ["micro-cpu", "--set", "schedule.decay=cosine", "--set",
                                  "schedule.cooldown_fraction=0.3"],  # planned without a cooldown, without a word
          ["schedule.cooldown_fraction=0.3 is read with decay: wsd only (this recipe's decay is cosine)"]),
    _plan("cooldown-shape-for-linear", ["micro-cpu", "--set", "schedule.cooldown_shape=cosine"],
          ["schedule.cooldown_shape=cosine is read with decay: wsd only (this recipe's decay is linear)"]),
    _plan("seq-len-huge", ["micro-cpu", "--seq-len", "999999999999"], ["seq_len=999,999,999,999", "too large",
                                                                       "at most 16,777,216"]),
    _plan("n-experts-zero", ["micro-cpu", "--set", "arch.n_experts=0"], ["arch.n_experts=0", "top_k=2", "0 experts"]),
    _plan("n-experts-negative", ["micro-cpu", "--set", "arch.n_experts=-1"], ["arch.n_experts=-1", "out of range"]),
    _plan("top-k-above-experts", ["micro-cpu", "--set", "arch.top_k=9"], ["top_k=9 must be between 1 and n_experts=8"]),
    _plan("top-k-zero", ["micro-cpu", "--set", "arch.top_k=0"], ["top_k=0 must be between 1 and n_experts=8: a token must use at least one expert"]),
    _plan("set-tpp-nan", ["micro-cpu", "--set", "tpp=.nan"], ["tpp", "nan", "not a finite number"]),
    _plan("set-tpp-inf", ["micro-cpu", "--set", "tpp=.inf"], ["tpp", "inf", "not a finite number"]),
    _plan("set-lr-nan", ["micro-cpu", "--set", "lr.coefficient=.nan"], ["lr.coefficient", "not a finite number"]),
    _plan("set-lr-negative", ["micro-cpu", "--set", "lr.coefficient=-1"], ["lr.coefficient=-1 must be positive"]),
    _plan("set-lr-exponent-huge", ["micro-cpu", "--set", "lr.tokens_exponent=1e6"], ["lr.tokens_exponent=1,000,000", "out of range"]),
    _plan("set-warmup-above-one", ["micro-cpu", "--set", "schedule.warmup_fraction=1.5"], ["schedule.warmup_fraction=1.5"]),
    _plan("set-min-lr-ratio", ["micro-cpu", "--set", "schedule.min_lr_ratio=2"], ["schedule.min_lr_ratio=2"]),
    _plan("set-decay-unknown", ["micro-cpu", "--set", "schedule.decay=sawtooth"], ["'sawtooth' is not one of"]),
    _plan("set-vocab-1e30", ["micro-cpu", "--set", "arch.vocab_size=1e30"], ["vocab_size", "64 bits"]),
    _plan("set-vocab-1e12", ["micro-cpu", "--set", "arch.vocab_size=1000000000000"], ["arch.vocab_size=1,000,000,000,000", "too large"]),
    _plan("set-head-dim-zero", ["micro-cpu", "--set", "arch.head_dim=0"], ["arch.head_dim=0", "positive"]),
    _plan("set-batch-zero", ["micro-cpu", "--set", "batch_sequences=0"], ["batch_sequences=0", "positive"]),
    _plan("set-seq-len-1e20", ["micro-cpu", "--set", "seq_len=1e20"], ["seq_len", "64 bits"]),
    _plan("set-step-multiple-zero", ["micro-cpu", "--set", "step_multiple=0"], ["step_multiple=0", "out of range"]),
    _plan("set-capacity-nan", ["micro-cpu", "--set", "arch.capacity_factor=.nan"], ["capacity_factor", "not a finite number"]),
    _plan("set-window-deep", ["micro-cpu", "--set", "arch.window=" + "[" * 5000 + "]" * 5000], ["arch.window", "not valid YAML"]),
    _plan("set-bad-yaml", ["micro-cpu", "--set", "arch.window=[1,"], ["arch.window", "not valid YAML"]),
    _plan("set-no-equals", ["micro-cpu", "--set", "arch.window"], ["expected FIELD=VALUE"]),
    _plan("set-unknown-field", ["micro-cpu", "--set", "arch.widht=3"], ["unknown field 'arch.widht'"]),
    _plan("set-hero-edit-inf", ["micro-cpu", "--set", "hero_edits=[{kind: shorten, at_fraction: 0.5, to_fraction: .inf}]"],
          ["hero_edits", "not a finite number"]),
    _plan("set-hero-edit-beyond-plan", ["micro-cpu", "--set", "hero_edits=[{kind: shorten, at_fraction: 0.5, to_fraction: 3}]"],
          ["to_fraction (3.0) <= 1"]),
    _plan("set-hero-edit-lengthens", ["micro-cpu", "--set", "hero_edits=[{kind: shorten, at_fraction: 0.5, to_fraction: 0.8}, "
                                                           "{kind: cooldown, at_fraction: 0.6, to_fraction: 0.9}]"],
          ["hero_edits[1]", "to_fraction=0.9 ends past 0.8 of the plan"]),
    _plan("hero-hosts-huge", ["micro-cpu", "--hero-hosts", "99999999999999999999"], ["--hero-hosts", "at most 100,000 hosts"]),
    _plan("set-seed-past-32-bits", ["micro-cpu", "--set", "seed=4294967296"], ["seed=4,294,967,296 is out of range"]),
    _plan("set-head-dim-odd", ["micro-cpu", "--widths", "30,45,60,75", "--set", "arch.head_dim=15"],
          ["arch.head_dim=15 must be even"]),
    _plan("unknown-preset", ["micro-gpu"], ["unknown preset 'micro-gpu'", "did you mean 'micro-cpu'"]),
    _plan("recipe-missing", ["nowhere.yaml"], ["nowhere.yaml: no such file"]),
    _plan("recipe-deep", ["deep.yaml"], ["deep.yaml", "nested too deeply"]),
    _plan("recipe-malformed", ["bad.yaml"], ["bad.yaml: malformed YAML at line 2"], files={"bad.yaml": "name: x\n  - y: [\n"}),
    _plan("recipe-a-list", ["list.yaml"], ["expected a YAML mapping"], files={"list.yaml": "- 1\n- 2\n"}),
    _plan("recipe-empty", ["empty.yaml"], ["expected a YAML mapping"], files={"empty.yaml": ""}),
    _plan("recipe-binary", ["bin.yaml"], ["not a text file"], files={"bin.yaml": b"\xff\xfe\x00\x81" * 10}),
    _plan("recipe-python-tag", ["tag.yaml"], ["tag.yaml: tag not allowed at line 1", "python/object/apply:os.system", "remove it"],
          files={"tag.yaml": "name: !!python/object/apply:os.system ['true']\n"}),
    _plan("recipe-huge-hero", ["huge.yaml"], ["huge.yaml: hero", "width 1000000000000000", "1,048,576 wide", "(line 5)"],
          files={"huge.yaml": "name: huge\narch: {vocab_size: 256, head_dim: 16}\nlr: {coefficient: 0.001}\n"
                              "rungs: [{d_model: 32, n_layers: 2}]\nhero: {d_model: 1e15, n_layers: 4}\n"}),
    _plan("recipe-tpp-nan-with-line", ["nan.yaml"], ["nan.yaml: tpp", "not a finite number", "(line 4)"],
          files={"nan.yaml": "name: n\narch: {vocab_size: 256, head_dim: 16}\nlr: {coefficient: 0.001}\n"
                             "tpp: .nan\nrungs: [{d_model: 32, n_layers: 2}]\nhero: {d_model: 64, n_layers: 2}\n"}),
    _plan("out-is-a-file", ["micro-cpu", "--out", "afile"], ["--out afile", "is a file, not a folder"]),
    _plan("out-under-a-file", ["micro-cpu", "--out", "afile/plan"], ["--out afile/plan", "is a file, not a folder"]),
    _plan("out-cannot-be-written", ["micro-cpu", "--out", "/proc/plan"], ["--out /proc/plan", "cannot write in /proc"]),
    _plan("format-unknown", ["micro-cpu", "--format", "xml"], ["--format"]),
]

SPEC = [
    _spec("d-model-33-two-heads-of-16", _model(d_model=33), ["n_heads=2 × head_dim=16 = 32 must equal d_model=33", "(line 3)"]),
    _spec("three-heads-over-one-kv-at-32", _model(n_heads=3), ["n_heads=3 × head_dim=16 = 48 must equal d_model=32"]),
    _spec("d-model-1e15", _model(d_model="1e15"), ["d_model=1,000,000,000,000,000 is too large"]),
    _spec("vocab-1e30", _model(vocab_size="1e30"), ["vocab_size", "64 bits", "(line 7)"]),
    _spec("vocab-1e12", _model(vocab_size=10**12), ["vocab_size=1,000,000,000,000 is too large"]),
    _spec("layers-zero", _model(n_layers=0), ["n_layers=0 must be positive"]),
    _spec("moe-without-expert-width", _model(n_experts=4, top_k=1), ["expert_width=0 must be positive: an MoE layer",
                                                                      "a field left out reads as 0"]),
    _spec("layers-negative", _model(n_layers=-3), ["n_layers=-3 must be positive"]),
    _spec("head-dim-zero", _model(head_dim=0), ["head_dim=0 must be positive"]),
    _spec("kv-heads-not-dividing", _model(n_heads=4, head_dim=8, n_kv_heads_local=3), ["n_kv_heads_local=3", "divide n_heads=4"]),
    _spec("top-k-above-experts", _model(n_experts=2, top_k=3, expert_width=8), ["top_k=3 must be between 1 and n_experts=2"]),
    _spec("top-k-of-zero-experts", _model(top_k=2), ["top_k=2 with n_experts=0"]),
    _spec("window-zero", _model(window=0), ["window=0 must be positive"]),
    _spec("window-inf", _model(window=".inf"), ["window", "expected an integer"]),
    _spec("capacity-nan", _model(n_experts=2, top_k=1, expert_width=8, capacity_factor=".nan"), ["capacity_factor", "not a finite number"]),
    _spec("dense-layer-out-of-range", _model(dense_layers="[5]", dense_width=8), ["dense_layers=[5]"]),
    _spec("unknown-field", _model(d_modle=32), ["unknown field 'd_modle'", "did you mean 'd_model'"]),
    _spec("d-model-text", _model(d_model="wide"), ["d_model", "expected an integer, got 'wide'"]),
    _spec("d-model-bool", _model(d_model="true"), ["d_model", "expected an integer, got True (YAML reads yes, no, on, off"]),
    _spec("experts-huge", _model(n_experts=10**6, top_k=1, expert_width=8), ["n_experts=1000000 is too large"]),
    _spec("deep", DEEP, ["nested too deeply"]),
    _spec("seq-len-zero", _model(), ["--seq-len 0"], extra=("--seq-len", "0")),
    _spec("seq-len-negative", _model(), ["--seq-len -4"], extra=("--seq-len", "-4")),
    _spec("seq-len-huge", _model(), ["--seq-len 10000000000"], extra=("--seq-len", "10000000000")),
    Case("spec", "missing-file", ("spec", "nowhere.yaml"), 2, ("nowhere.yaml: no such file",)),
    Case("spec", "a-preset", ("spec", "micro-cpu"), 2, ("a preset is a recipe, which `ladder plan micro-cpu` plans",)),
    Case("spec", "a-recipe", ("spec", "r.yaml"), 2, ("r.yaml: a recipe (it has rungs)", "`ladder plan r.yaml`"),
         files={"r.yaml": "name: r\nrungs: [{d_model: 32, n_layers: 2}]\n"}),
    Case("plan", "a-run-config", ("plan", "run.yaml"), 2, ("run.yaml: a run config (it has spec), not a recipe",
                                                            "`ladder spec run.yaml`"), files={"run.yaml": _run_yaml("seed", "0")}),
    Case("plan", "a-folder", ("plan", "."), 2, (".: is a folder; give a recipe .yaml file or a preset",)),
    _plan("out-empty", ["micro-cpu", "--out", ""], ["--out '': an empty path; give a file or folder", "`ladder plan --help`"]),
    _plan("out-empty-joined", ["micro-cpu", "--out="], ["--out '': an empty path"]),
    Case("plan", "out-empty-after-debug", ("--debug", "plan", "micro-cpu", "--out", ""), 2,
         ("--out '': an empty path", "`ladder plan --help`")),
    Case("predict", "out-empty", ("predict", "hero.yaml", "--out", " "), 2, ("--out ' ': an empty path",)),
    _plan("set-and-tpp", ["micro-cpu", "--tpp", "12", "--set", "tpp=20"], ["--set tpp=... and --tpp both set tpp"]),
    _plan("seq-len-and-set", ["micro-cpu", "--set", "seq_len=256", "--seq-len", "64"],
          ["--set seq_len=... and --seq-len both set seq_len"]),
    *[Case(cmd, "a-prediction" + ("-as-target" if "--target" in args else ""), (cmd, *args), 2, ("p/prediction.json: a prediction (`ladder predict` writes it), not " + what,
                                                   "--prediction p"), files={"p/prediction.json": _PREDICTION})
      for cmd, args, what in (("plan", ("p/prediction.json",), "a recipe"), ("spec", ("p/prediction.json",), "a run config"),
                              ("predict", ("p/prediction.json",), "a run config"),
                              ("predict", ("--target", "p/prediction.json"), "a target file"))],
    Case("spec", "a-target-file", ("spec", "t.yaml"), 2, ("t.yaml: a target file (a run's coordinates: it has active_params)",
                                                         "holds no model"),
         files={"t.yaml": "name: hero\nactive_params: 3000000000\nstop_after_steps: 1000\ntokens_per_step: 4000000\n"}),
    Case("spec", "run-config-peak-lr-nan", ("spec", "run.yaml"), 2, ("peak_lr", "not a finite number"),
         files={"run.yaml": _run_yaml("schedule.peak_lr", ".nan")}),
    Case("spec", "valid-run-config", ("spec", "hero.yaml", "--format", "json"), 0, ("active_params",)),
]

TRAIN = [
    _train("peak-lr-nan", _run_yaml("schedule.peak_lr", ".nan"), ["schedule.peak_lr", "nan is not a finite number"]),
    _train("peak-lr-inf", _run_yaml("schedule.peak_lr", ".inf"), ["schedule.peak_lr", "inf is not a finite number"]),
    _train("peak-lr-negative", _run_yaml("schedule.peak_lr", "-0.001"), ["peak_lr=-0.001 must be positive"]),
    _train("peak-lr-zero", _run_yaml("schedule.peak_lr", "0"), ["peak_lr=0 must be positive"]),
    _train("peak-lr-huge", _run_yaml("schedule.peak_lr", "1e30"), ["peak_lr=1e+30 is too large"]),
    _train("batch-zero", _run_yaml("batch_size", "0"), ["batch_size=0 must be positive"]),
    _train("batch-negative", _run_yaml("batch_size", "-4"), ["batch_size=-4 must be positive"]),
    _train("batch-1e30", _run_yaml("batch_size", "1e30"), ["batch_size", "64 bits"]),
    _train("batch-1e9", _run_yaml("batch_size", "1000000000"), ["batch_size=1,000,000,000 is too large"]),
    _train("steps-zero", _run_yaml("schedule.total_steps", "0"), ["total_steps=0 must be positive"]),
    _train("steps-1e12", _run_yaml("schedule.total_steps", "1000000000000"), ["total_steps=1,000,000,000,000 is too large"]),
    _train("steps-nan", _run_yaml("schedule.total_steps", ".nan"), ["total_steps", "expected an integer"]),
    _train("seq-len-zero", _run_yaml("seq_len", "0"), ["seq_len=0 must be positive"]),
    _train("eps-nan", _run_yaml("optimizer.eps", ".nan"), ["optimizer.eps", "not a finite number"]),
    _train("min-lr-ratio-nan", _run_yaml("schedule.min_lr_ratio", ".nan"), ["schedule.min_lr_ratio", "not a finite number"]),
    _train("eval-every-zero", _run_yaml("eval.every_fraction", "0"), ["eval.every_fraction=0", "out of range"]),
    _train("eval-every-1e-9", _run_yaml("eval.every_fraction", "1e-9"), ["eval.every_fraction=1e-09", "out of range"]),
    _train("checkpoint-keep-negative", _run_yaml("checkpoint.keep", "-1"), ["checkpoint.keep=-1", "out of range"]),
    _train("log-every-zero", _run_yaml("logging.log_every", "0"), ["logging.log_every=0", "out of range"]),
    _train("beta2-one", _run_yaml("optimizer.beta2", "1.0"), ["optimizer.beta2=1", "out of range"]),
    _train("eval-sequences-negative", _run_yaml("data.eval_sequences", "-1"), ["data.eval_sequences=-1 must be positive"]),
    _train("tpp-inf", _run_yaml("tpp", ".inf"), ["tpp", "not a finite number"]),
    _train("unknown-field", _run_yaml("optimizer.beta1", "0.9\n  betta1: 0.9"), ["unknown field 'betta1'"]),
    _train("seed-past-32-bits", _run_yaml("seed", "4294967296"), ["seed=4,294,967,296 is out of range", "(line "]),
    _train("data-seed-negative", _run_yaml("data.seed", "-1"), ["data.seed=-1 is out of range"]),
    _train("hosts-huge", _run_yaml("resources.hosts", "1000000"), ["resources.hosts=1000000 is too large"]),
    Case("spec", "edited-coordinates", ("spec", "run.yaml"), 0,
         ("warning:", "coordinates.stop_after_steps: 1 is not what the config gives", "never read"),
         files={"run.yaml": _run_yaml("coordinates.stop_after_steps", "1")}),
    _train("deep", DEEP, ["nested too deeply"]),
    Case("train", "no-config", ("train",), 2, ("either one RUN.yaml or --ladder DIR",)),
    Case("train", "missing-config", ("train", "nowhere.yaml"), 2, ("nowhere.yaml: no such file",)),
    Case("train", "ladder-missing", ("train", "--ladder", "nowhere"), 2, ("--ladder nowhere: no such folder",)),
    Case("train", "ladder-empty", ("train", "--ladder", "adir"), 2, ("no run config",)),
]

WATCH = [
    _watch("on-track", "on-track", ["step", "OK"], 0),
    _watch("warning", "warning", ["WARNING", "the prediction's error (predicted / actual − 1) is -0.70%"], 4),  # predicted / actual − 1
    _watch("alarm-60%-off", "off-60%", ["ALARM", "the prediction's error (predicted / actual − 1) is -37.50%"], 5),
    _watch("nan-prediction-57%-off", "off-57%-nan-prediction", ["prediction is unusable", "no row has a finite median"], 3),
    _watch("nan-median-75%-off", "off-75%-nan-median", ["prediction is unusable"], 3),
    _watch("nan-band", "off-60%-nan-band", ["prediction is unusable"], 3),
    # the evals the prediction covers alarm; the later ones cannot be judged; the worst of the check sets the exit
    _watch("nan-later-rows", "off-60%-nan-later-rows", ["ALARM", "outside the prediction's steps", CANNOT], 5),
    _watch("prediction-starts-late", "off-60%-prediction-starts-late", ["outside the prediction's steps", CANNOT], 3),
    # rows without a value before the rungs' first shared eval: the range said is where the prediction has values
    _watch("nan-early-rows", "off-60%-nan-early-rows",
           [f"outside the prediction's steps {int(EVALS[EVALS >= 0.5 * HERO.stop_after_steps].min()):,}–", CANNOT], 3),
    _watch("prediction-for-another-metric", "off-60%-prediction-for-another-metric",
           ["logs no eval/paloma/loss", "eval/loss", CANNOT], 3),
    _watch("empty-prediction", "off-60%-empty-prediction", ["prediction is unusable", "no rows"], 3),
    # without a usable prediction the rules that need none still run: a NaN loss is an alarm
    _watch("nan-loss", "nan-loss", ["[non_finite]", "eval/loss is nan", "ALARM"], 5),
    _watch("nan-loss-empty-prediction", "nan-loss-empty-prediction", ["prediction is unusable", "non_finite", "ALARM"], 5),
    _watch("prediction-out-of-assumptions", "off-60%-prediction-out-of-assumptions", ["prediction is unusable"], 3),
    _watch("prediction-of-text", "off-60%-prediction-of-text", ["not numbers"], 3),
    _watch("prediction-unsorted", "off-60%-prediction-unsorted", ["not positive and increasing"], 3),
    _watch("prediction-not-json", "prediction-not-json", ["not a prediction file"], 2),
    _watch("prediction-without-run", "prediction-without-run", ["not a prediction file"], 2),
    _watch("another-run", "prediction-for-another-run", ["the prediction is for 'someone-else'"], 2),
    _watch("state-of-another-run", "state-of-another-run", ["belongs to run 'other'"], 2),
    _watch("state-corrupt", "state-corrupt", ["not a watch state file"], 2),
    replace(_watch("jsonl-a-yaml-file", "on-track", ["--jsonl r.yaml", "not a JSON object"], 2,
                               ("--jsonl", "r.yaml")), files={"r.yaml": "name: hero\nseed: 0\n"}),
    replace(_watch("jsonl-earlier-alerts", "on-track", ["step", "OK"], 0, ("--jsonl", "old.jsonl")),
                        files={"old.jsonl": '{"run": "hero", "level": "warning"}\n'}),
    _watch("jsonl-in-the-store", "on-track", ["--jsonl store/pending/a.jsonl", "in the metric store"], 2,
           ("--jsonl", "store/pending/a.jsonl")),
    _watch("state-in-the-store", "on-track", ["--state store/state.json", "in the metric store"], 2,
           ("--state", "store/state.json")),
    _watch("poll-zero", "", ["--poll 0.0"], 2, ("--poll", "0")),
    _watch("poll-nan", "", ["--poll nan"], 2, ("--poll", "nan")),
    _watch("poll-inf", "", ["--poll inf"], 2, ("--poll", "inf")),
    _watch("poll-negative", "", ["--poll -1.0"], 2, ("--poll", "-1")),
    _watch("max-checks-zero", "", ["--max-checks 0"], 2, ("--max-checks", "0")),
    _watch("stale-nan", "", ["--stale-minutes nan"], 2, ("--stale-minutes", "nan")),
    _watch("deadline-nan", "", ["--deadline 'nanh'"], 2, ("--deadline", "nanh")),
    _watch("deadline-inf", "", ["--deadline 'infh'"], 2, ("--deadline", "infh")),
    _watch("deadline-text", "", ["--deadline 'soon'"], 2, ("--deadline", "soon")),
    _watch("deadline-far", "", ["more than 100 years away"], 2, ("--deadline", "2999-01-01T00:00")),
    _watch("webhook-without-url", "", ["LADDER_WEBHOOK_URL"], 2, ("--webhook",)),
    _watch("webhook-without-url-on-an-alarm", "off-60%", ["LADDER_WEBHOOK_URL"], 2, ("--webhook",)),
    Case("watch", "no-source-no-store", ("watch", "--prediction", "pred", "--once"), 2,
         ("no store here", "give the run's source")),
    Case("watch", "two-sources", ("watch", "--prediction", "pred", "--local", "runs", "--offline", "runs", "--once"), 2,
         ("give at most one of",)),
    Case("watch", "local-missing", ("watch", "--prediction", "pred", "--local", "nowhere/run", "--once"), 2,
         ("--local nowhere/run: no such folder",)),
    # a folder not written yet where its parent exists: a run that has not started, waited for
    Case("watch", "local-not-started", ("watch", "--prediction", "pred", "--local", "nowhere", "--once"), 3,
         ("no such directory yet", "UNREADABLE")),
    Case("watch", "local-is-a-file", ("watch", "--prediction", "pred", "--local", "afile", "--once"), 2,
         ("--local afile: is a file, not a folder; give the run's folder (., which holds it?)",)),
    Case("watch", "local-is-a-table", ("watch", "--prediction", "pred", "--local", "hero.csv", "--once"), 2,
         ("--local hero.csv: a table, not a trainer's run folder", "`ladder import csv hero.csv --store STORE ...`",
          "watch it from the store with no --local"), files={"hero.csv": "step,loss\n10,3.2\n"}),
    Case("watch", "local-holds-tables", ("watch", "--prediction", "pred", "--local", "exported", "--once"), 2,
         ("--local exported: holds tables (hero.csv), not a trainer's run folder",
          "`ladder import csv exported/*.csv --store STORE ...`"), files={"exported/hero.csv": "step,loss\n10,3.2\n"}),
    Case("watch", "local-starting-beside-notes", ("watch", "--prediction", "pred", "--local", "launched", "--once"), 3,
         ("a run that is starting", "UNREADABLE"),  # its run.yaml says a run: no table, however its notes are named
         files={"launched/run.yaml": "name: hero\n", "launched/cmd.csv": "step,loss\n"}),
    Case("pull", "local-holds-tables", ("pull", "local", "exported", "--store", "s2"), 2,
         ("exported: holds tables (hero.csv), not a trainer's run folder", "exported/*.csv --store STORE ...`"),
         files={"exported/hero.csv": "step,loss\n10,3.2\n"}),
    Case("watch", "offline-missing", ("watch", "--prediction", "pred", "--offline", "nowhere/wandb", "--once"), 2,
         ("--offline nowhere/wandb: no such folder",)),
    _watch("jsonl-is-a-folder", "", ["--jsonl adir: is a folder"], 2, ("--jsonl", "adir")),
    _watch("jsonl-on-a-file-system-that-takes-no-files", "", ["--jsonl /proc/alerts.jsonl: cannot write in /proc"], 2,
           ("--jsonl", "/proc/alerts.jsonl")),
    _plan("eval-every-1e-9", ["micro-cpu", "--set", "eval_every_fraction=1e-9"], ["eval_every_fraction=1e-09", "out of range"]),
    Case("watch", "prediction-missing", ("watch", "--prediction", "nowhere", "--local", "runs", "--once"), 2,
         ("nowhere: no prediction here",)),
]

OUTPUTS = [
    Case("report", "prediction-missing", ("report", "--prediction", "nowhere"), 2, ("no prediction here",)),
    Case("report", "prediction-table", ("report", "--prediction", "pred/prediction.csv"), 2,
         ("pred/prediction.csv: the prediction's table; give its folder (pred) or its prediction.json",)),
    Case("report", "out-is-a-folder", ("report", "--prediction", "pred", "--out", "adir"), 2, ("--out adir", "is a folder")),
    Case("report", "out-under-a-file", ("report", "--prediction", "pred", "--out", "afile/r.html"), 2,
         ("is a file, not a folder",)),
    Case("report", "store-missing", ("report", "--prediction", "pred", "--store", "nowhere"), 2, ("no store here",)),
    Case("plot", "out-is-a-file", ("plot", "--prediction", "pred", "--out", "afile"), 2, ("--out afile", "is a file")),
    Case("plot", "out-is-stdout", ("plot", "--prediction", "pred", "--out", "-"), 2,
         ("--out -: this command writes files, not to standard output; give a folder",)),
    Case("report", "out-is-stdout", ("report", "--prediction", "pred", "--out", "-"), 2,
         ("--out -: this command writes files, not to standard output; give the path of the file",)),
    Case("predict", "out-is-stdout", ("predict", "hero.yaml", "--out", "-"), 2, ("--out -: this command writes files",)),
    Case("predict", "out-is-a-file", ("predict", "hero.yaml", "--out", "afile"), 2, ("--out afile", "is a file, not a folder")),
    Case("predict", "config-missing", ("predict", "nowhere.yaml"), 2, ("nowhere.yaml: no such file",)),
    Case("predict", "a-target-file-as-config", ("predict", "t.yaml"), 2,
         ("t.yaml: a target file (a run's coordinates: it has active_params)", "with --target t.yaml",
          "`ladder check` and `ladder compare` with --hero t.yaml"),
         files={"t.yaml": "name: big\nactive_params: 1e8\nstop_after_steps: 1000\ntokens_per_step: 40000\n"}),
    Case("predict", "config-deep", ("predict", "deep.yaml"), 2, ("nested too deeply",)),
    Case("predict", "store-missing", ("predict", "hero.yaml", "--store", "nowhere"), 2, ("no store here",)),
    Case("predict", "n-boot-text", ("predict", "hero.yaml", "--n-boot", "many"), 2, ("--n-boot",)),
    Case("predict", "floor-unknown", ("predict", "hero.yaml", "--floor", "lowest"), 2, ("--floor 'lowest'", "profile or zero")),
    Case("replan", "store-missing", ("replan", "hero.yaml", "--store", "nowhere", "--shorten-to", "100"), 2,
         ("no store here",)),
    Case("replan", "config-nan", ("replan", "run.yaml"), 2, ("peak_lr", "not a finite number"),
         files={"run.yaml": _run_yaml("schedule.peak_lr", ".nan")}),
]

FIT = [
    # an option of one value given twice: click keeps the last without a word
    Case("fit", "csv-twice", ("fit", "surface", "--csv", "ladder.csv", "--csv", "other.csv"), 2,
         ("--csv given twice (--csv ladder.csv and --csv other.csv): it takes one value; give one",)),
    Case("fit", "form-twice", ("fit", "surface", "--csv", "ladder.csv", "--form", "free", "--form=shared"), 2,
         ("--form given twice (--form free and --form shared)",)),
    Case("fit", "csv-without-header", ("fit", "surface", "--csv", "bare.csv"), 2,
         ("no column 'loss' (for --loss-col)", "its first line holds numbers, not column names: add a header row"),
         files={"bare.csv": "190354176,38076416000,3.34\n190354176,3812622336,3.61\n"}),
    # a table of one row per run given to the curve fit: the fits that read one
    Case("fit", "curve-of-finals", ("fit", "curve", "--csv", "finals.csv", "--total-steps-col", "T"), 2,
         ("no column 'run_id' (for --run-col)", "`ladder fit surface` (N and D) or `ladder fit endpoint` (compute)"),
         files={"finals.csv": "params,tokens,T,loss\n1e8,2e9,1000,3.1\n2e8,4e9,1000,2.9\n"}),
    Case("fit", "curve-without-runs", ("fit", "curve", "--csv", "ladder.csv", "--run-col", ""), 2,
         ("--run-col '': whole curves need a column naming each row's run", "`ladder fit endpoint` (compute)")),
    Case("fit", "one-value-twice-the-same", ("fit", "endpoint", "--csv", "ladder.csv", "--format", "table", "--format",
                                             "table", "--at", "1e30", "--at", "1e31"), 0, ("C = 1e+30", "C = 1e+31")),
    Case("fit", "level-above-one", ("fit", "endpoint", "--csv", "ladder.csv", "--level", "2"), 2, ("--level 2.0",)),
    Case("fit", "one-column-twice", ("fit", "surface", "--csv", "ladder.csv", "--params-col", "tokens"), 2,
         ("--params-col and --tokens-col both name column 'tokens'",)),
    Case("fit", "loss-read-as-compute", ("fit", "endpoint", "--csv", "ladder.csv", "--loss-col", "compute"), 2,
         ("--loss-col and --compute-col both name column 'compute'",)),
    # a value not among an option's choices, in click's words (not pydantic's "Value error, ...")
    Case("fit", "form-unknown", ("fit", "surface", "--csv", "ladder.csv", "--form", "bogus"), 2,
         ("Invalid value for '--form': 'bogus' is not one of 'auto'",)),
    Case("fit", "level-nan", ("fit", "endpoint", "--csv", "ladder.csv", "--level", "nan"), 2, ("--level nan",)),
    Case("fit", "bootstrap-negative", ("fit", "endpoint", "--csv", "ladder.csv", "--bootstrap", "-1"), 2, ("--bootstrap -1",)),
    Case("fit", "at-text", ("fit", "endpoint", "--csv", "ladder.csv", "--at", "big"), 2, ("--at 'big'",)),
    Case("fit", "csv-missing", ("fit", "endpoint", "--csv", "nowhere.csv"), 2, ("nowhere.csv",)),
    Case("fit", "csv-column-missing", ("fit", "endpoint", "--csv", "ladder.csv", "--loss-col", "nll"), 2, ("nll",)),
    Case("fit", "store-missing", ("fit", "endpoint", "--store", "nowhere"), 2, ("nowhere",)),
    Case("fit", "surface-column-missing", ("fit", "surface", "--csv", "ladder.csv", "--at", "x"), 2, ("no column 'params'",)),
    Case("fit", "curve-every-zero", ("fit", "curve", "--csv", "ladder.csv", "--every", "0"), 2, ("--every 0:", "must be in [0.005, 0.5]")),
    Case("fit", "curve-every-nan", ("fit", "curve", "--csv", "ladder.csv", "--every", "nan"), 2, ("--every nan",)),
    Case("fit", "backtest-holdout-text", ("backtest", "--csv", "ladder.csv", "--holdout", "one"), 2, ("--holdout",)),
]

CASES: list[Case] = PLAN + SPEC + TRAIN + WATCH + OUTPUTS + FIT


def check(case: Case, res: Result) -> None:
    """The case's exit code and words, no traceback, and one line for a usage error."""
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == case.code, f"exit {res.exit_code}, expected {case.code}: {out}"
    flat = " ".join(out.split())
    for word in case.words:
        assert word in flat, f"{word!r} not in: {flat}"
    if case.code == 2:  # the parser's own usage errors too
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "this is a bug" not in flat


@pytest.mark.parametrize("args, words", [
    (("predict", "--bogus", "x"), ("No such option: --bogus", "(see `ladder predict --help`)")),
    (("fit", "surfac"), ("No such command 'surfac'. Did you mean 'surface'?", "(see `ladder fit --help`)")),
    (("fit", "surface", "--level", "abc"), ("Invalid value for '--level': 'abc' is not a number",
                                            "(see `ladder fit surface --help`)")),
    (("check", "--hero-compute", "2e2x"), ("Invalid value for '--hero-compute': '2e2x' is not a number",)),
    (("check", "--hero-compute=1e", "--hero-compute", "2e2x"), ("--hero-compute given twice (--hero-compute 1e and "
                                                                "--hero-compute 2e2x): it takes one value; give one",)),
    (("compare", "a", "b", "--bootstrap", "1.5"), ("Invalid value for '--bootstrap': '1.5' is not a whole number",)),
    (("fit", "surface", "--csv"), ("Option '--csv' requires an argument", "(see `ladder fit surface --help`)")),
    (("predict", "--n-boot"), ("Option '--n-boot' requires an argument", "(see `ladder predict --help`)")),
    (("pull", "csv", "runs.csv"), ("No such command 'csv'; `ladder import csv` has it", "(see `ladder pull --help`)")),
])
def test_the_parsers_own_usage_errors_are_one_line_as_every_other(args, words):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(w in res.stderr for w in words), res.stderr


def test_an_unknown_option_is_offered_only_options_of_a_close_name():
    far, near = (CliRunner().invoke(app, ["predict", o, "x"]) for o in ("--bogus", "--tagret-run"))
    assert "Possible options" not in far.stderr  # click compares with the dashes: every long option looked close
    assert "(Possible options: --target, --target-run)" in near.stderr


def test_a_group_alone_shows_its_help_and_help_exits_0():
    alone, helped = CliRunner().invoke(app, ["fit"]), CliRunner().invoke(app, ["fit", "--help"])
    assert alone.exit_code == 2 and "Usage: ladder fit" in alone.output and "surface" in alone.output
    assert helped.exit_code == 0 and "Usage: ladder fit" in helped.stdout


def test_the_corpus_is_large_and_has_no_duplicates():
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, tmp_path):
    check(case, run_case(case, tmp_path))


# ---- the edge itself --------------------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_exit_1_and_debug_shows_it(tmp_path, monkeypatch):
    import ladder.cli.plan as plan_cli

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero in the planner")

    monkeypatch.setattr(plan_cli, "plan", broken)
    runner = CliRunner()
    res = runner.invoke(app, ["plan", "micro-cpu"])
    assert res.exit_code == 1 and "Traceback" not in res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: ZeroDivisionError: division by zero in the planner; this is a bug: rerun with `--debug` "
        "(`ladder --debug COMMAND ...` or LADDER_DEBUG=1) for the traceback"]
    res = runner.invoke(app, ["--debug", "plan", "micro-cpu"])
    assert isinstance(res.exception, ZeroDivisionError)
    res = runner.invoke(app, ["plan", "micro-cpu"], env={"LADDER_DEBUG": "1"})
    assert isinstance(res.exception, ZeroDivisionError)


def test_a_message_never_carries_a_secret(monkeypatch):
    import ladder.cli.plan as plan_cli

    def leaky(*args, **kwargs):
        raise LadderError("server said no to https://hooks.example/T0/SECRET-HOOK with key key-123456")

    monkeypatch.setattr(plan_cli, "plan", leaky)
    env = {"LADDER_WEBHOOK_URL": "https://hooks.example/T0/SECRET-HOOK", "WANDB_API_KEY": "key-123456"}
    res = CliRunner().invoke(app, ["plan", "micro-cpu"], env=env)
    assert res.exit_code == 2
    assert "SECRET-HOOK" not in res.stderr and "key-123456" not in res.stderr
    assert "$LADDER_WEBHOOK_URL" in res.stderr and "$WANDB_API_KEY" in res.stderr


def test_a_value_that_looks_like_markup_is_printed_as_written(tmp_path):
    res = run_case(Case("plan", "markup", ("plan", "[/bold]x.yaml"), 2), tmp_path)
    assert res.exit_code == 2 and "[/bold]x.yaml" in res.stderr


def test_the_trainer_refuses_bad_numbers_before_compiling(tmp_path):
    from trainer_jax.train import check_config

    check_config(HERO)  # the planned config passes
    for path, value, words in [(("schedule", "peak_lr"), float("nan"), "peak_lr=nan"),
                               (("schedule", "peak_lr"), -1.0, "peak_lr=-1.0"),
                               (("schedule", "total_steps"), 0, "total_steps=0"),
                               (("batch_size",), 0, "batch_size=0"),
                               (("optimizer", "eps"), float("inf"), "optimizer.eps=inf")]:
        cfg = micro_plan().hero
        holder = cfg
        for part in path[:-1]:
            holder = getattr(holder, part)
        object.__setattr__(holder, path[-1], value)  # past the config's own checks, as a changed object would be
        with pytest.raises(LadderError, match=words.replace(".", r"\.").replace("(", r"\(")):
            check_config(cfg)


def test_the_trainer_command_line_says_one_line(tmp_path, capsys):
    from trainer_jax.__main__ import main

    (tmp_path / "run.yaml").write_text(_run_yaml("schedule.peak_lr", ".nan"))
    assert main([str(tmp_path / "run.yaml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "not a finite number" in err


def test_watch_help_documents_the_exit_codes():
    res = CliRunner().invoke(app, ["watch", "--help"], env={"COLUMNS": "400"})
    flat = " ".join(res.stdout.split())
    for words in ("0 on track", "3 cannot judge", "4 warning", "5 alarm", "2 is a usage error", "1 a bug"):
        assert words in flat, words


# ---- generated YAML: any value in any field is a config or one LadderError -------------------------

try:
    import hypothesis
    from hypothesis import strategies as st
except ModuleNotFoundError:  # a dev extra; the examples above still run without it
    hypothesis = None

EXAMPLES = int(os.environ.get("LADDER_FUZZ_EXAMPLES", "100"))
"""Generated values per property (more: LADDER_FUZZ_EXAMPLES=2000)."""

if hypothesis is None:

    @pytest.mark.skip(reason="hypothesis is not installed (pip install -e '.[dev]')")
    def test_generated_yaml():
        pass

else:
    SCALARS = st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
        st.sampled_from([".nan", ".inf", "-.inf", "1e30", "1e15", "0x10", "1_000", "~", "[]", "{}", "!!str 3"]),
    )
    VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                          max_leaves=8)
    SPEC_FIELDS = ["d_model", "n_layers", "n_heads", "head_dim", "n_kv_heads_local", "n_kv_heads_global", "vocab_size",
                   "window", "global_every", "n_experts", "top_k", "expert_width", "n_shared_experts", "shared_width",
                   "latent_dim", "dense_layers", "dense_width", "capacity_factor", "router", "tied_embeddings"]
    RUN_FIELDS = ["seq_len", "batch_size", "schedule.peak_lr", "schedule.total_steps", "schedule.warmup_steps",
                  "schedule.min_lr_ratio", "schedule.decay", "schedule.edits", "schedule.seq_phases", "optimizer.eps",
                  "optimizer.clip_norm", "eval.every_fraction", "tpp", "spec.d_model", "spec.vocab_size", "spec.top_k",
                  "logging.peak_flops", "checkpoint.keep", "role", "name"]


    def _yaml_value(value) -> str:
        import yaml

        return value if isinstance(value, str) and value.startswith(("!!", ".", "~")) else yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("LADDER_FUZZ_RANDOM") is None)
    @hypothesis.given(field=st.sampled_from(SPEC_FIELDS), value=VALUES)
    def test_any_value_in_a_spec_field_builds_or_is_one_ladder_error(tmp_path_factory, field, value):
        from ladder.config.spec import ModelSpec
        from ladder.config.yamlio import build, load_yaml

        path = tmp_path_factory.mktemp("spec") / "model.yaml"
        text = _model(dense_width=64) + f"{field}: {_yaml_value(value)}\n"
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{field}:")] + [text.splitlines()[-1]]
        path.write_text("\n".join(lines) + "\n")
        try:
            spec = build(ModelSpec, load_yaml(path), where=str(path))
        except LadderError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000
        else:
            assert spec.active_params() > 0 and np.isfinite(spec.forward_flops_per_token(128))


    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("LADDER_FUZZ_RANDOM") is None)
    @hypothesis.given(field=st.sampled_from(RUN_FIELDS), value=VALUES)
    def test_any_value_in_a_run_config_field_loads_or_is_one_ladder_error(tmp_path_factory, field, value):
        from ladder.config.runconfig import RunConfig

        path = tmp_path_factory.mktemp("run") / "run.yaml"
        path.write_text(_run_yaml(field, _yaml_value(value)))
        try:
            cfg = RunConfig.load(path)
        except LadderError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000
        else:
            assert cfg.schedule.peak_lr > 0 and np.isfinite(cfg.fit_flops) and cfg.fit_flops > 0


def test_a_reader_that_leaves_the_pipe_is_not_a_bug(tmp_path):
    # `ladder ... | head`: the reader closes the pipe before the table is printed
    import subprocess
    import sys

    csv = tmp_path / "runs.csv"
    N = np.repeat(np.geomspace(5e7, 5e9, 4), 3)
    D = N * np.tile([10.0, 20.0, 40.0], 4)
    pd.DataFrame({"params": N, "tokens": D, "loss": 1.8 + 400 / N**0.34 + 400 / D**0.28}).to_csv(csv, index=False)
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.run([sys.executable, "-c", "from ladder.cli import main; main()", "fit", "surface", "--csv", str(csv)],
                          stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert proc.returncode == 141 and proc.stderr == ""


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_reader_that_leaves_in_the_middle_of_a_long_export_ends_it_with_141(tmp_path, fmt):
    # `ladder history --format csv | head`: the reader takes the first bytes, then leaves while the rest is written;
    # a write larger than the pipe, cut short so, returns without an error: the command must not say it all went out
    import subprocess
    import sys

    csv = tmp_path / "long.csv"
    steps = np.arange(1, 20_001)
    pd.DataFrame({"step": steps, "loss": 3.0 + 1.0 / steps}).to_csv(csv, index=False)
    res = CliRunner().invoke(app, ["import", "csv", str(csv), "--step", "step", "--metric", "eval/loss=loss",
                                   "--coord", "stop_after_steps=20000", "--coord", "tokens_per_step=10",
                                   "--coord", "active_params=1000", "--coord", "total_params=unknown",
                                   "--coord", "fit_flops_per_token=unknown", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    proc = subprocess.Popen([sys.executable, "-c", "from ladder.cli import main; main()", "history", "long", "--store",
                             str(tmp_path / "s"), "--format", fmt], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(100)
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and stderr == b""


@pytest.mark.parametrize("full", ["returns None", "raises BlockingIOError"])
def test_a_non_blocking_pipe_that_is_full_is_waited_for_not_taken_for_a_reader_that_left(monkeypatch, full):
    # a non-blocking stdout with a slow reader: a raw write that would block returns None, a buffered one raises
    # BlockingIOError with what it kept; either is written on once there is room, never ended as a broken pipe
    import errno
    import sys

    from ladder.cli.app import echo

    class Full:
        def __init__(self):
            self.got, self.tries, self.flushed = b"", 0, 0

        def write(self, data):
            self.tries += 1
            if self.tries == 2:  # the first write takes 4 bytes, the second finds the pipe full
                if full == "returns None":
                    return None
                self.got += bytes(data[:3])
                raise BlockingIOError(errno.EAGAIN, "write could not complete without blocking", 3)
            self.got += bytes(data[:4])
            return min(4, len(data))

        def flush(self):
            self.flushed += 1

    class Stdout:
        encoding, errors, buffer = "utf-8", "strict", Full()

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Stdout())
    echo("step,loss\n1,2.5\n")
    assert Stdout.buffer.got == b"step,loss\n1,2.5\n" and Stdout.buffer.flushed


def _signalled_mid_command(tmp_path, signum: int, slow_body: str, ignoring: str = "") -> tuple[int, str, str]:
    """`ladder score` with the prediction's load replaced by `slow_body` (after it prints "loading"), sent a real
    `signum` once it loads: its exit code, stdout and stderr. `ignoring`: a signal (HUP) it is started ignoring, as
    `nohup` starts a command (by a shell's trap: a `preexec_fn` would fork the JAX-loaded test process)."""
    import subprocess
    import sys
    import time

    script = ("import time\nimport ladder.predict.prediction as p\n"
              "def slow(*a, **k):\n    print('loading', flush=True)\n" + slow_body +
              "p.Prediction.load = staticmethod(slow)\nfrom ladder.cli import main\nmain()")
    command = [sys.executable, "-c", script, "score", "--prediction", str(tmp_path)]
    if ignoring:
        command = ["sh", "-c", f'trap "" {ignoring}; exec "$@"', "sh", *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "loading"
    time.sleep(0.2)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_ctrl_c_says_how_to_go_on_and_exits_130(tmp_path):
    # a real SIGINT in the middle of a command: one line on stderr, the shell's code, no traceback
    import signal

    code, _, err = _signalled_mid_command(tmp_path, signal.SIGINT, "    time.sleep(60)\n")
    assert code == 130, err
    assert err.strip().startswith("interrupted; run the same command again") and "Traceback" not in err


@pytest.mark.parametrize("signame, want", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_scheduler_s_stop_says_how_to_go_on_and_exits_as_the_shell_would(tmp_path, signame, want):
    # SIGTERM (a scheduler, `kill`) or SIGHUP (a closed terminal) mid-command stops it as Ctrl-C does: the finally
    # blocks run (a store's lock let go), one line on stderr, 128 + the signal's number
    import signal

    code, out, err = _signalled_mid_command(tmp_path, getattr(signal, signame), "    try:\n        time.sleep(60)\n"
                                            "    finally:\n        print('let go', flush=True)\n")
    assert code == want and out.strip() == "let go", err
    assert err.strip().startswith(f"stopped ({signame}); run the same command again") and "Traceback" not in err


def test_a_stop_the_process_ignores_stays_ignored(tmp_path):
    # `nohup ladder pull ...`: SIGHUP ignored from the start, so a terminal that closes does not stop the command
    import signal

    code, out, err = _signalled_mid_command(tmp_path, signal.SIGHUP, "    time.sleep(1.5)\n    print('done', flush=True)\n"
                                            "    raise SystemExit(0)\n", ignoring="HUP")
    assert code == 0 and out.strip() == "done" and "stopped" not in err, (out, err)


def test_ctrl_c_while_the_command_line_loads_exits_130_without_a_traceback():
    # the entry point the `ladder` script runs, stopped by a real SIGINT while it imports the command line
    import signal
    import subprocess
    import sys
    import time

    script = ("import sys, time\n"
              "class Slow:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'ladder.cli':\n"
              "            print('importing', flush=True)\n"
              "            time.sleep(60)\n"
              "sys.meta_path.insert(0, Slow())\n"
              "from ladder.entry import main\nmain()")
    proc = subprocess.Popen([sys.executable, "-c", script, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "importing"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted before the command started; nothing was done"


def test_a_command_line_that_cannot_load_says_so_in_one_line():
    """A damaged module (here one that raises as it loads): one line, exit 1, every command; the traceback on ask."""
    import os
    import subprocess
    import sys

    script = ("import sys\n"
              "class Damaged:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'ladder.cli':\n"
              "            raise IndentationError('unexpected indent (monitor.py, line 103)')\n"
              "sys.meta_path.insert(0, Damaged())\n"
              "from ladder.entry import main\nmain()")
    env = {k: v for k, v in os.environ.items() if k != "LADDER_DEBUG"}
    done = subprocess.run([sys.executable, "-c", script, "pull", "--help"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == ("error: IndentationError: unexpected indent (monitor.py, line 103); the command line "
                                   "could not load, nothing was done: this is a bug or a damaged install (rerun with "
                                   "LADDER_DEBUG=1 for the traceback)")
    shown = subprocess.run([sys.executable, "-c", script, "pull"], capture_output=True, text=True,
                           env={**env, "LADDER_DEBUG": "1"}, timeout=60)
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "IndentationError" in shown.stderr


def test_the_ladder_script_runs_the_guarded_entry_point():
    from importlib.metadata import entry_points

    [script] = [e for e in entry_points(group="console_scripts") if e.name == "ladder"]
    assert script.value == "ladder.entry:main"


def test_json_output_has_no_nan_or_infinity(capsys):
    from ladder.cli.app import print_json

    print_json({"loss": float("inf"), "band": np.array([np.nan, 1.5]), "ok": np.float64(2.0)})
    text = capsys.readouterr().out

    def refuse(word):
        raise ValueError(word)

    assert json.loads(text, parse_constant=refuse) == {"loss": None, "band": [None, 1.5], "ok": 2.0}
