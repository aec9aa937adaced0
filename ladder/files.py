"""Atomic file writes: write a temporary file beside the target, then rename over it.

A reader (or a crash) sees the old file or the new one, never half of one. A set of files written
together (a folder of figures) is staged whole first, so an interrupted run leaves the old set.
One writer at a time: `held` refuses a second process a lock file the first holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed onto `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; the result is an ordinary file
    try:
        try:
            yield Path(tmp)
        except OSError as exc:  # a full disk as the file is written: named by the file, not its temporary one
            if exc.filename not in (None, tmp):
                raise
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        try:
            os.replace(tmp, target)
        except OSError as exc:  # say which file could not be written, not the temporary one
            raise OSError(exc.errno, exc.strerror, str(target)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


@contextlib.contextmanager
def staged_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder inside `folder`; on success every file in it is renamed into `folder`.

    Interrupted (an error, Ctrl-C), nothing in `folder` changes: what takes time (drawing, say) happens
    before the first rename, and the renames themselves take milliseconds."""
    target = Path(folder)
    made = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=target, prefix=".staged-"))
    try:
        yield stage
        for f in sorted(stage.iterdir()):
            if f.is_file():
                os.replace(f, target / f.name)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if made:  # the folder this made, left empty
            with contextlib.suppress(OSError):
                target.rmdir()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def held(lock: str | os.PathLike, busy: str, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock file `lock` (made where missing) for the block; where another process holds it, wait up to
    `wait` seconds for it, then a `LadderError` saying `busy`. The system releases it when the holder dies, so a
    killed process leaves nothing to clean up. Where the system has no file locks (Windows), nothing is held."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    from ladder.errors import LadderError

    path = Path(lock)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError as exc:
        raise LadderError(f"{path.parent}: cannot write there ({exc.strerror})") from None
    with handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise LadderError(busy) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
