"""Every notebook runs top to bottom (its own asserts check its numbers) and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
NEEDS_DEMO = {"03_predict_and_watch_the_demo_hero"}
"""Notebooks that read a demo's output: `tests/test_demo.py` runs them after `ladder demo --quick`."""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip outputs before committing"


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem not in NEEDS_DEMO],
                         ids=[p.stem for p in NOTEBOOKS if p.stem not in NEEDS_DEMO])
def test_notebook_runs(path, shared_data):
    nb = nbformat.read(path, as_version=4)
    # Its kernel starts in the repository's root, as some editors start it, not in notebooks/ as Jupyter does:
    # a notebook finds the repository from either.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parents[1])}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
