"""Every notebook runs top to bottom (its own asserts check its numbers), shows its figures, and is stored without outputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NEEDS_DEMO = {"03_predict_and_watch_the_demo_hero"}
"""Notebooks that read a demo's output: `tests/test_demo.py` runs them after `ladder demo --quick`."""


def figures_missing(nb: nbformat.NotebookNode) -> list[int]:
    """The code cells that draw a figure (`plt.subplots`) but show no image."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "plt.subplots(" in c.source
            and not any("image/png" in o.get("data", {}) for o in c.outputs)]


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
    assert not figures_missing(nb), "a figure did not show"


@pytest.mark.slow
def test_plotting_modules_leave_a_kernels_backend():
    """Importing ladder's plotting modules (as notebook 03 does) keeps Jupyter's inline backend, so figures show."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import ladder.compare, ladder.output.figures\n"
        "from ladder.output.plots import use_agg_outside_ipython\n"
        "import matplotlib.pyplot as plt\n"
        "use_agg_outside_ipython()  # what `ladder.compare.draw` calls\n"
        "fig, ax = plt.subplots()\n"
        "ax.plot([0, 1]);")])
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    assert not figures_missing(nb)


def test_plotting_modules_draw_headless_outside_a_kernel():
    """A script or the CLI renders with Agg whatever backend it inherits, so no window ever opens."""
    code = "import matplotlib, ladder.output.plots; print(matplotlib.get_backend())"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MPLBACKEND": "svg"}, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().lower() == "agg"


def _first_code_cell(stem: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("where", ["outside the repository", "data elsewhere"])
def test_fit_notebook_says_where_it_looks_for_what_it_needs(where, tmp_path):
    """Notebook 02 started outside a clone, or pointed at a folder without the public data, stops at its
    first cell with a line saying what to do (before: a bare StopIteration, or a FileNotFoundError cells later)."""
    env = {**os.environ, "LADDER_DATA_DIR": str(tmp_path)} if where == "data elsewhere" else os.environ
    res = subprocess.run([sys.executable, "-c", _first_code_cell("02_fit_public_ladders")], capture_output=True,
                         text=True, timeout=120, env=env, cwd=ROOT if where == "data elsewhere" else tmp_path)
    assert res.returncode != 0
    said = res.stderr.strip().splitlines()[-1]
    if where == "data elsewhere":
        assert str(tmp_path) in said and "LADDER_DATA_DIR" in said
    else:
        assert "inside a clone of scaling-ladder" in said
