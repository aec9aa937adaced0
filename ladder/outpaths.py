"""Checks on where a command is told to write, made before any work is done.

`--out plan.yaml` naming an existing file where a folder is wanted (or a folder where a file is
wanted) is a usage error with one clear line, not a traceback after the work is done. So is a file
to write that would destroy another: a prediction's or a metric store's own file, or an existing
file of another kind than the one written (an earlier output of the same kind is replaced).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ladder.errors import LadderError


def name_problem(name: str, as_file: bool = True) -> str:
    """Why a run's name cannot name a file or folder of its own ('' when it can): empty, a path ('/', '\\', '.',
    '..'), or holding a control character. Without `as_file` (a name whose files are named by `file_part`), a
    path is a name too."""
    if not name.strip():
        return "is empty"
    if as_file and ("/" in name or "\\" in name or name in (".", "..")):
        return "is a path ('/', '\\', '.' or '..'), and the run's files are named after it"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "holds a control character (a newline, a tab, ...)"
    return ""


def file_part(name: str) -> str:
    """`name` as one file or folder name: as it is where it can be one, else made of its letters and digits (a
    run named in a store by another tool, `a/b` say, never writes outside the folder given)."""
    if not name_problem(name):
        return name
    import re

    return re.sub(r"[^\w.-]+", "-", name).strip("-.") or "run"


def out_dir(path: str | os.PathLike, option: str = "--out", files: tuple[str, ...] = (),
            ours: tuple[Callable[[Path], bool], str] | None = None) -> Path:
    """`path` as a folder to write into: absent (it will be made) or a folder, where none of the `files` it will
    hold is a folder, nor a file that `ours` (a test of an existing file, and what passes it: "a figure `ladder
    plot` drew") finds is no earlier output of this command's: an empty one holds nothing to destroy. Checked
    before anything is written, so a refusal leaves no file half the outputs."""
    p = Path(path)
    _not_stdout(p, option, "a folder to write into")
    if p.exists() and not p.is_dir():
        raise LadderError(f"{option} {p}: is a file, not a folder; give a folder to write into")
    _parents_are_folders(p, option)
    store = _store_at(p)
    if store is not None:
        raise LadderError(f"{option} {p}: is {'' if store == p else 'in '}the metric store {store}; give a folder of its "
                          "own (outputs there would mix with the store's files)")
    blocked = [name for name in files if (p / name).is_dir()]
    if blocked:
        raise LadderError(f"{option} {p}: {blocked[0]} there is a folder, where this writes a file; move it, or give "
                          "another folder")
    foreign = not_ours(p, files, ours[0]) if ours is not None else []
    if foreign:
        raise LadderError(f"{option} {p}: {foreign[0]} there is not {ours[1]}; move it, or give another folder "
                          "(writing over it would destroy it)")
    return p


def out_file(path: str | os.PathLike, option: str = "--out", kinds: tuple[str, ...] = (),
             ours: tuple[Callable[[str], bool], str] | None = None) -> Path:
    """`path` as a file to write, in a folder that is not a file: absent, or a file that is replaced when it is
    of one of `kinds` (suffixes such as ".html"; any, when none are given), no prediction or store keeps it, and
    `ours` (a test of the file's first characters, and what passes it: "a page `ladder report` wrote") finds it is
    an earlier output of this command's: a user's file of the same suffix is not."""
    p = Path(path)
    _not_stdout(p, option, "the path of the file to write")
    if p.is_dir():
        raise LadderError(f"{option} {p}: is a folder; give the path of the file to write")
    store = _store_at(p.absolute().parent)
    if store is not None and not p.exists():
        raise LadderError(f"{option} {p}: is in the metric store {store}; give a path outside it (outputs there would "
                          "mix with the store's files)")
    if p.exists():
        keeper = kept_by(p)
        if keeper is not None:
            raise LadderError(f"{option} {p}: is a file of {keeper}; give the path of another file "
                              "(writing over it would destroy it)")
        if kinds and p.suffix.lower() not in kinds:
            raise LadderError(f"{option} {p}: exists and is not a {' or '.join(kinds)} file; give the path of a "
                              "new file (writing over it would destroy it)")
        head = _head(p) if ours is not None and p.is_file() else ""
        if head.strip() and not ours[0](head):  # an empty file (`mktemp`'s) holds nothing to destroy
            raise LadderError(f"{option} {p}: exists and is not {ours[1]}; give the path of a new file, or move that "
                              "one away first (writing over it would destroy it)")
    _parents_are_folders(p, option)
    return p


def not_ours(folder: Path, names, ours: Callable[[Path], bool]) -> list[str]:
    """The `names` in `folder` that are files holding something (an empty one holds nothing to destroy) which the
    test `ours` does not find to be an earlier output of the command's."""
    return [n for n in names if (folder / n).is_file() and (folder / n).stat().st_size and not ours(folder / n)]


def _not_stdout(p: Path, option: str, give: str) -> None:
    """`-`, the usual name of standard output, is refused where a command writes files: a file or folder named `-`
    left in the working folder is not what it asks for."""
    if str(p) == "-":
        raise LadderError(f"{option} -: this command writes files, not to standard output; give {give}")


def _head(p: Path, size: int = 8192) -> str:
    """The first `size` characters of the file `p` ("" where it cannot be read as text)."""
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            return f.read(size)
    except OSError:
        return ""


def foreign_prediction_file(folder: Path) -> Path | None:
    """A file in `folder` under a prediction's name that no prediction wrote (a prediction.json that holds none, or
    its table beside no prediction.json), or None: `ladder predict --out` replaces its own earlier files only."""
    from ladder.predict.prediction import PREDICTION_FILES  # pandas: only when a file is there

    js = folder / "prediction.json"
    head = _head(js, 1 << 16).lstrip() if js.is_file() else ""
    if head:
        return None if head.startswith("{") and '"run_name"' in head and '"metric"' in head else js
    # no prediction.json, or an empty one (which holds nothing to destroy, nor says whose the tables beside it are)
    tables = [n for n in PREDICTION_FILES if n != js.name]
    return next((folder / n for n in tables if (folder / n).exists() and (folder / n).stat().st_size), None)


def kept_by(p: Path) -> str | None:
    """What keeps the existing file `p` (a prediction: its files and its watch's; a metric store), or None."""
    from ladder.predict.prediction import PREDICTION_FILES, WATCH_FILES  # pandas: only when a file is there

    folder = p.absolute().parent
    if p.name in PREDICTION_FILES + WATCH_FILES and (folder / "prediction.json").is_file():
        return f"the prediction in {folder}"
    store = _store_at(folder)
    return None if store is None else f"the metric store {store}"


def _store_at(folder: Path) -> Path | None:
    """The metric store that `folder` is or lies in, at any depth, whether `folder` exists yet or not (a new
    folder inside a store would mix outputs with its files as an existing one does)."""
    folder = Path(folder)
    above = (folder, *folder.parents, *(() if folder.is_absolute() else Path.cwd().parents))  # named as given
    return next((root for root in above if (root / "manifest.json").is_file() and (root / "history").is_dir()), None)


def _parents_are_folders(p: Path, option: str) -> None:
    """The nearest existing folder at or above `p` is a folder this process can write in (checked before any
    work, which an unwritable --out would otherwise lose at the end)."""
    for parent in ((p.absolute(),) if p.is_dir() else ()) + tuple(p.absolute().parents):
        if parent.exists():
            if not parent.is_dir():
                raise LadderError(f"{option} {p}: {parent} is a file, not a folder")
            can_write_in(parent, p, option)
            return


def can_write_in(folder: Path, p: Path, option: str) -> None:
    """Refuse `option` `p` unless a file can be made in `folder` (made and dropped: permissions alone miss a
    read-only or special file system)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise LadderError(f"{option} {p}: cannot write in {folder} ({exc.strerror or exc}); give a "
                          "folder you can write to") from None
