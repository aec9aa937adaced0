"""The record log inside wandb's ``.wandb`` run files, read with every check it offers.

A ``.wandb`` file is a 7-byte header (``b":W&B"``, the uint16 magic 0xBEE1 and a uint8 version 0,
little-endian) followed by the LevelDB log format: the file is cut into 32 KiB blocks counted from
the first byte of the file (its header included). Each record is stored as one FULL chunk, or as a
FIRST chunk, any number of MIDDLE chunks and a LAST chunk that may cross blocks. A chunk has a 7-byte
header: CRC-32 (uint32), payload length (uint16), chunk type (uint8). When fewer than 7 bytes are
left in a block, the writer pads them with zeros and starts the next chunk in the next block.

The checksum is zlib's CRC-32 (IEEE polynomial) of the type byte followed by the payload, the way
wandb's writer computes it; LevelDB's own masked CRC-32C is not used.

wandb buffers whole blocks, so a run that dies leaves a file that ends inside a record: `read_log`
returns every whole record before that point and says so, and a chunk whose checksum fails stops the
read there. Reads start at any record boundary a previous read returned, so a file that grows is read
once.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ladder.errors import LadderError

FILE_HEADER = struct.Struct("<4sHB")
IDENT = b":W&B"
MAGIC = 0xBEE1
VERSION = 0
BLOCK = 32 * 1024
CHUNK_HEADER = struct.Struct("<IHB")
HEADER_LEN = CHUNK_HEADER.size  # 7, the same size as the file header

FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
# CRC-32 of each type byte, the seed that the payload's CRC continues from.
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}


class Stop(StrEnum):
    END = "end"
    """Every byte was read and the last record is whole."""
    PARTIAL = "partial"
    """The file ends inside a record: the run is still writing, or it died mid-write."""
    CORRUPT = "corrupt"
    """A chunk failed its checks; nothing from it or after it was returned."""


@dataclass(frozen=True)
class LogRead:
    records: list[bytes]
    """Whole records, in file order."""
    end: int
    """Byte offset just past the last whole record: where the next read continues."""
    size: int
    """File size when it was read."""
    stop: Stop
    problem: str = ""
    """What was wrong, for PARTIAL and CORRUPT, with the byte offset."""
    ends: tuple[int, ...] = ()
    """Byte offset just past each record, in order (where a read may continue after it)."""
    start: int = 0
    """Byte offset the read started at."""

    def cut(self, n: int, problem: str) -> LogRead:
        """The first `n` records only, stopped as CORRUPT before record `n` (one that did not parse)."""
        end = self.ends[n - 1] if n else self.start
        return LogRead(self.records[:n], end, self.size, Stop.CORRUPT, problem, self.ends[:n], self.start)


def check_header(path: Path) -> None:
    """Raise a `LadderError` unless `path` starts with the header of a ``.wandb`` file."""
    try:
        with open(path, "rb") as f:
            head = f.read(FILE_HEADER.size)
    except OSError as exc:
        raise LadderError(f"{path}: cannot read it ({exc.strerror})") from None
    if not head:
        raise LadderError(f"{path}: empty (0 bytes): wandb has not written it yet (a run just started: pull it again "
                          "in a minute), or the run was killed before it wrote")
    if len(head) < FILE_HEADER.size and head[:4] == IDENT[:len(head)]:
        raise LadderError(f"{path}: cut short inside wandb's header ({len(head)} of its {FILE_HEADER.size} bytes): "
                          "wandb is writing it (pull it again in a minute), or the file was copied or cut short")
    if len(head) < FILE_HEADER.size or head[:4] != IDENT:
        raise LadderError(f"{path}: not a wandb run file (it does not start with the ':W&B' header)")
    _, magic, version = FILE_HEADER.unpack(head)
    if magic != MAGIC or version != VERSION:
        raise LadderError(
            f"{path}: unsupported .wandb format (magic {magic:#06x}, version {version}; "
            f"this reader knows magic {MAGIC:#06x}, version {VERSION})"
        )


def read_log(path: str | os.PathLike, start: int = 0) -> LogRead:
    """Whole records from byte `start` (0, or an `end` a previous read returned) to the end of the file."""
    path = Path(path)
    check_header(path)
    start = max(start, FILE_HEADER.size)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    return _scan(data, start, start + len(data))


def _scan(data: bytes, base: int, size: int) -> LogRead:
    records: list[bytes] = []
    ends: list[int] = []
    parts: list[bytes] = []  # chunks of the record being assembled
    end = base  # offset after the last whole record
    pos = base  # absolute offset of the next chunk header
    unpack = CHUNK_HEADER.unpack_from
    crc32 = zlib.crc32
    while True:
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < HEADER_LEN:
            pos += left_in_block  # zero padding at the end of a block
            continue
        i = pos - base
        if i + HEADER_LEN > len(data):
            if i >= len(data) and not parts:
                return LogRead(records, end, size, Stop.END, "", tuple(ends), base)
            return LogRead(records, end, size, Stop.PARTIAL, f"the file ends inside a record at byte {size}", tuple(ends), base)
        crc, length, kind = unpack(data, i)
        if crc == 0 and length == 0 and kind == 0:
            # A zero-filled tail: space the writer reserved but has not written yet.
            return LogRead(records, end, size, Stop.PARTIAL, f"zero-filled bytes from byte {pos} on", tuple(ends), base)
        if kind not in _TYPE_CRC or length > left_in_block - HEADER_LEN:
            return _corrupt(records, ends, base, size, pos, f"invalid chunk header (type {kind}, length {length})")
        j = i + HEADER_LEN
        if j + length > len(data):
            return LogRead(records, end, size, Stop.PARTIAL, f"the file ends inside a chunk at byte {size}", tuple(ends), base)
        payload = data[j : j + length]
        if crc32(payload, _TYPE_CRC[kind]) != crc:
            return _corrupt(records, ends, base, size, pos, "checksum mismatch")
        pos += HEADER_LEN + length
        if kind == FULL:
            if parts:
                return _corrupt(records, ends, base, size, pos, "a whole record inside an unfinished one")
            records.append(payload)
            end = pos
            ends.append(end)
        elif kind == FIRST:
            if parts:
                return _corrupt(records, ends, base, size, pos, "a record starts inside an unfinished one")
            parts.append(payload)
        else:
            if not parts:
                return _corrupt(records, ends, base, size, pos, "a record continues without its start")
            parts.append(payload)
            if kind == LAST:
                records.append(b"".join(parts))
                parts = []
                end = pos
                ends.append(end)


def _corrupt(records: list[bytes], ends: list[int], base: int, size: int, pos: int, what: str) -> LogRead:
    end = ends[-1] if ends else base
    return LogRead(records, end, size, Stop.CORRUPT, f"{what} in the chunk at byte {pos}", tuple(ends), base)
