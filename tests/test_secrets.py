"""No secret leaves the environment: every case of the fuzz corpora runs with canary values in
`WANDB_API_KEY` and `LADDER_WEBHOOK_URL`, and neither canary may appear in what the command prints
or in any file it writes.

A corpus module takes part by exposing `CASES` (each with an `id` or `name`) and
`run_case(case, root, env=...)`, which builds what the case needs inside the empty folder `root`,
runs it there and returns typer's `Result`; `tests/test_fuzz_cli.py` does. The ingest corpus
(`tests/test_fuzz_ingest.py`) is replayed through its own shape: each case's `build(scratch, store)`
gives the command line, run against a copy of the store its `base` fixture makes.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ladder.cli import app

WANDB_CANARY = "canary0wandb0key0d41d8cd98f00b204e9800998ecf8427e"
HOOK_CANARY = "http://127.0.0.1:9/canary-hook-7f3b9c2e1a"
ENV = {"WANDB_API_KEY": WANDB_CANARY, "LADDER_WEBHOOK_URL": HOOK_CANARY, "WANDB_MODE": "offline"}
CORPORA = ("tests.test_fuzz_cli", "tests.test_fuzz_ingest")


def _corpora() -> list[tuple[str, object, object]]:
    found = []
    for name in CORPORA:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that corpus is not written (yet)
                continue
            raise
        if hasattr(module, "CASES") and hasattr(module, "run_case"):
            found += [(name.rsplit(".", 1)[-1], module, case) for case in module.CASES]
    return found


ALL = _corpora()

try:  # the ingest corpus and its store fixture (imported here so that pytest provides it)
    from tests import test_fuzz_ingest as _ingest
    from tests.test_fuzz_ingest import base  # noqa: F401
except ImportError:
    _ingest = None
INGEST_CASES = [] if _ingest is None or hasattr(_ingest, "run_case") else [  # with run_case it is in ALL
    c for c in getattr(_ingest, "CASES", []) if hasattr(c, "build")]


def _case_id(case: object, i: int) -> str:
    return str(getattr(case, "id", None) or getattr(case, "name", None) or i)


def _leaks(root: Path, texts: list[str]) -> list[str]:
    found = []
    for canary in (WANDB_CANARY, HOOK_CANARY):
        found += [f"output holds {canary[:12]}..." for t in texts if canary in t]
        needle = canary.encode()
        for path in root.rglob("*"):
            if path.is_file() and needle in path.read_bytes():
                found.append(f"{path.relative_to(root)} holds {canary[:12]}...")
    return found


def test_the_corpora_are_there():
    assert len([c for c in ALL if c[0] == "test_fuzz_cli"]) >= 80


@pytest.mark.parametrize("module,case", [(m, c) for _, m, c in ALL],
                         ids=[f"{n}-{_case_id(c, i)}" for i, (n, _, c) in enumerate(ALL)])
def test_no_canary_in_any_output_or_file(module, case, tmp_path):
    res = module.run_case(case, tmp_path, env=ENV)
    texts = [res.stdout, res.stderr, repr(res.exception) if res.exception else ""]
    assert _leaks(tmp_path, texts) == []


@pytest.mark.parametrize("case", INGEST_CASES, ids=[f"test_fuzz_ingest-{c.name}" for c in INGEST_CASES])
def test_no_canary_in_any_output_or_file_of_the_ingest_corpus(case, base, tmp_path):  # noqa: F811
    store = tmp_path / "work" / "store"
    shutil.copytree(base / "store", store)
    scratch = tmp_path / "in"
    scratch.mkdir()
    res = CliRunner().invoke(app, case.build(scratch, store), env=ENV)
    texts = [res.stdout, res.stderr, repr(res.exception) if res.exception else ""]
    assert _leaks(tmp_path, texts) == []


def test_the_check_sees_a_canary_in_output_and_in_a_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "log.bin").write_bytes(b"\x00" + HOOK_CANARY.encode() + b"\x00")
    assert len(_leaks(tmp_path, [f"key {WANDB_CANARY}"])) == 2
