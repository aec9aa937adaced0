"""Files that grow while a run writes them: where a read stopped, and whether that point still holds.

A cursor keeps a byte offset and the last bytes before it. The next read continues at the offset if
those bytes are still there; if the file shrank or they changed, the file was rewritten (a resumed
run truncated it) and must be read again from the start.
"""

from __future__ import annotations

from pathlib import Path

_CHECK_BYTES = 16


def tail_check(path: Path, offset: int) -> str:
    """The (hex) bytes just before `offset`: what `still_valid` compares."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, offset - _CHECK_BYTES))
            return f.read(min(offset, _CHECK_BYTES)).hex()
    except FileNotFoundError:
        return ""


def still_valid(path: Path, offset: int, check: str | None) -> bool:
    """The file still holds what was read up to `offset`: it only grew since."""
    try:
        return path.stat().st_size >= offset and tail_check(path, offset) == (check or "")
    except OSError:
        return False
