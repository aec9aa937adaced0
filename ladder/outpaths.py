"""Checks on where a command is told to write, made before any work is done.

`--out plan.yaml` naming an existing file where a folder is wanted (or a folder where a file is
wanted) is a usage error with one clear line, not a traceback after the work is done.
"""

from __future__ import annotations

import os
from pathlib import Path

from ladder.errors import LadderError


def out_dir(path: str | os.PathLike, option: str = "--out") -> Path:
    """`path` as a folder to write into: absent (it will be made) or a folder."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise LadderError(f"{option} {p}: is a file, not a folder; give a folder to write into")
    _parents_are_folders(p, option)
    return p


def out_file(path: str | os.PathLike, option: str = "--out") -> Path:
    """`path` as a file to write: absent or a file (replaced), in a folder that is not a file."""
    p = Path(path)
    if p.is_dir():
        raise LadderError(f"{option} {p}: is a folder; give the path of the file to write")
    _parents_are_folders(p, option)
    return p


def _parents_are_folders(p: Path, option: str) -> None:
    for parent in p.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise LadderError(f"{option} {p}: {parent} is a file, not a folder")
            return
