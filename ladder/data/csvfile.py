"""CSV files a user brings: read once, checked, every cell as written, every row named by its line.

`ladder import csv` (`ladder.data.sources.tabular`) and the fits' `--csv` and `--predict-csv`
(`ladder.data.fitdata`, `ladder.data.endpointcsv`) read tables through here, so they agree on what a
readable CSV is: UTF-8 text (a byte-order mark is fine) without NUL bytes, separated by commas
(or by semicolons, with decimal commas, or by tabs, as spreadsheets save), a header with no empty
or repeated name (spaces around a name are ignored), and one value per column on every row. What
spreadsheets add when they save (a comma at the end of every line, rows of bare commas) is left
out. An error names the file and the line, and says what to do.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
from pathlib import Path

import pandas as pd

from ladder.errors import LadderError


def need_file(path: Path, how: str = "") -> None:
    """A `LadderError` unless `path` is a regular file; `how` says how to pass the right one."""
    hint = f"; {how}" if how else ""
    if not path.exists():
        raise LadderError(f"{path}: no such file{hint}")
    if path.is_dir():
        shown = "'' or ." if str(path) == "." else str(path)  # an empty path reads as the current folder
        raise LadderError(f"{shown}: a directory, not a CSV file{hint}")
    if not path.is_file():
        raise LadderError(f"{path}: not a regular file (a device or a pipe){hint}")


_NOT_CSV = ((b"PAR1", "a parquet file (`ladder import csv` reads one named .parquet)"), (b"PK\x03\x04", "a zip archive (an Excel workbook?)"),
            (b"\xd0\xcf\x11\xe0", "an old Excel or Office file"), (b"\xff\xfe", "UTF-16 text"),
            (b"\xfe\xff", "UTF-16 text"), (b"\x1f\x8b", "a gzip archive"))
"""Openings of files people save a table as that are not CSV text, and what each is."""


def text(path: Path) -> str:
    """The file's text; a NUL byte or bytes that are not UTF-8 are a `LadderError` with their line."""
    try:
        data = path.read_bytes()
    except OSError as exc:  # a device or a file system that will not be read: name the file
        raise LadderError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    kind = next((k for magic, k in _NOT_CSV if data.startswith(magic)), None)
    if kind:
        raise LadderError(f"{path}: {kind}, not a CSV; save it as a CSV (UTF-8, comma-separated)")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise LadderError(f"{path}: line {line}: a NUL byte; this is not a text table")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LadderError(f"{path}: line {line}: not UTF-8 text (byte {data[exc.start]:#04x}); save it as UTF-8 (a "
                          "spreadsheet's \"CSV UTF-8\")") from None


def records(path: Path, content: str) -> tuple[list[int], str]:
    """The line each data record starts on, and the text to read the table from, after checking the header and
    that every record has as many fields as the header. What spreadsheets add when they save is left out of
    that text: records with no value at all (``,,``), and columns with no name after the last named one whose
    cells are all empty (a comma at the end of every line). A file separated by semicolons, as spreadsheets
    save where the comma is the decimal mark, is read as one (``3,25`` is 3.25); by tabs, as one too."""
    sep = separator(content)
    reader = csv.reader(_lines_of(content), delimiter=sep)
    header, lines, kept, start, named, dropped = None, [], [], 1, 0, sep != ","
    try:
        for record in reader:
            line, start = start, reader.line_num + 1
            if not record:
                continue
            if header is None:
                header = [name.strip() for name in record]
                named = len(header)
                while named > 1 and not header[named - 1]:
                    named -= 1
                if any(not name for name in header[:named]):
                    raise LadderError(f"{path}: line {line}: the header has an empty column name")
                twice = sorted({name for name in header if header.count(name) > 1})
                if twice:
                    raise LadderError(f"{path}: line {line}: column {twice[0]!r} appears twice; rename one of them")
                kept.append(header[:named])
                continue
            if len(record) not in (len(header), named):
                if any("\n" in field for field in record):  # a quote opened here swallowed the lines after it
                    raise LadderError(f"{path}: line {line}: a quoted value opened here is never closed (it runs on to "
                                      f"line {max(reader.line_num, line + 1)}); add its closing quote (\")")
                raise LadderError(
                    f"{path}: line {line}: {len(record)} field{'s' if len(record) != 1 else ''} where the header has "
                    f"{named}; every row needs one value per column (an empty value is allowed)"
                )
            extra = [field for field in record[named:] if field.strip()]
            if extra:
                raise LadderError(f"{path}: line {line}: the value {extra[0].strip()!r} is in a column with no name; "
                                  f"name that column in the header (line 1) or remove the value")
            if not any(field.strip() for field in record):
                dropped = True
                continue
            lines.append(line)
            kept.append(record[:named] if sep != ";" else [_decimal_point(field) for field in record[:named]])
    except csv.Error as exc:
        raise LadderError(f"{path}: line {reader.line_num}: {exc}") from None
    if header is None or (named == len(header) and not dropped):
        return lines, content
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(kept)
    return lines, out.getvalue()


def separator(content: str) -> str:
    """The field separator of a CSV's text: a semicolon or a tab where its first line holds one and no comma,
    else a comma."""
    first = next((line for line in content.splitlines() if line.strip()), "")
    if "," not in first:
        for sep in (";", "\t"):
            if sep in first:
                return sep
    return ","


_DECIMAL_COMMA = re.compile(r"\s*[+-]?\d*,\d+([eE][+-]?\d+)?\s*")


def _decimal_point(field: str) -> str:
    """A number written with a decimal comma (``3,25``, ``1,5e-3``) with a decimal point; other text as it is."""
    return field.replace(",", ".") if _DECIMAL_COMMA.fullmatch(field) else field


def cells(path: str | Path, how: str = "") -> pd.DataFrame:
    """Every cell of the CSV at `path` as written (text; "NA" is text, an empty cell is ""), column names
    stripped of spaces, indexed by each row's line in the file; an empty table is a `LadderError`."""
    p = Path(path)
    need_file(p, how)
    content = text(p)
    lines, content = records(p, content)
    if not lines:
        raise LadderError(f"{p}: the CSV has no rows" + ("" if content.strip() else " (the file is empty)")
                          + (f"; {how}" if how else ""))
    df = frame(p, content, dtype=str, keep_default_na=False)
    df.columns = [str(c).strip() for c in df.columns]
    if len(df) != len(lines):  # quoting the two readers see differently: name rows by their number instead
        lines = list(range(1, len(df) + 1))
    df.index = pd.Index(lines, name="line")
    return df


def frame(path: Path, content: str, **options) -> pd.DataFrame:
    """`content` (the text of the CSV at `path`) read by pandas with `options`; what it cannot parse (a quote
    never closed) is a `LadderError` naming the file."""
    try:
        return pd.read_csv(_lines_of(content), index_col=False, **options)
    except pd.errors.ParserError as exc:
        first = str(exc).splitlines()[0]
        hint = "; a quoted value is never closed: add its closing quote" if "EOF inside string" in first else ""
        raise LadderError(f"{path}: cannot read it as a table ({first}){hint}") from None


def _lines_of(content: str) -> io.StringIO:
    """The text as a stream whose lines may end in \\n, \\r\\n or a bare \\r (a file saved by an old Mac tool)."""
    return io.StringIO(content, newline=None)


ALIASES = {"params": ("n", "n_params", "num_params", "nparams", "parameters", "params_nonembed", "non_embedding_params",
                      "n_active", "model_size"),
           "tokens": ("d", "n_tokens", "num_tokens", "ntokens", "data", "tokens_seen"),
           "loss": ("l", "final_loss", "eval_loss", "val_loss", "loss_final"),
           "compute": ("flops", "c", "fit_flops", "total_flops", "train_flops", "training_flops", "compute_flops")}
"""Other names a column the fits read by default goes by (lower case), for the hint of a file that lacks it."""


def shown_columns(names: list[str]) -> str:
    """A file's column names as an error lists them (the first 12)."""
    return ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")


def similar_column(column: str, names: list[str]) -> str | None:
    """The column of `names` that is `column` under another name (`ALIASES`) or in other case; None if none."""
    near = [c for c in names if c.strip().lower() == column.strip().lower()]
    alias = [c for c in names if c.strip().lower() in ALIASES.get(column, ())]
    return (near or alias or [None])[0]


def no_column(path, column: str, option: str, columns, role: str = "for") -> LadderError:
    """The error for a column the file lacks (`role` `option`: "for --loss-col", "mapped by --run"), with a
    hint where one of its columns differs only in case or the file looks separated by something other
    than commas."""
    names = [str(c) for c in columns]
    shown = shown_columns(names)
    hint = ""
    similar = similar_column(column, names)
    flag, _, key = option.partition(" ")
    typo = difflib.get_close_matches(column, names, n=1, cutoff=0.9)  # eval/los for the eval/loss column
    if flag.startswith("--") and key and key in names and not typo:  # --metric val_loss=eval/loss, the other way round
        hint = f"; {flag} takes KEY=COLUMN, the key stored and then the file's column: give {flag} {column}={key}"
    elif flag.startswith("--") and key and typo and similar is None:
        hint = f"; did you mean {typo[0]!r}? give {flag} {key}={typo[0]}"
    elif similar is not None and similar.strip().lower() == column.strip().lower():
        hint = f"; did you mean {similar!r}?"
    elif similar is not None and option.startswith("--"):  # "--metric eval/loss" maps a key: --metric eval/loss=COLUMN
        hint = f"; give {flag} {key}={similar}" if key else f"; give {option} {similar}"
    elif names and all(is_number(n) for n in names):
        hint = "; its first line holds numbers, not column names: add a header row naming the columns"
    elif len(names) == 1 and any(sep in names[0] for sep in "\t;|"):
        sep = next(s for s in "\t;|" if s in names[0])
        hint = f"; the file looks separated by {'tabs' if sep == chr(9) else repr(sep)}: save it with commas"
        shown = repr(names[0])
    return LadderError(f"{path}: no column {column!r} ({role} {option}); the file has {shown}{hint}")


def is_number(text: str) -> bool:
    """Whether `text` reads as a float (nan and inf too)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def number_hint(cell: str) -> str:
    """How a number written for people reads as one: thousands separators, or a suffix such as 1.4B."""
    if re.fullmatch(r"[+-]?\d{1,3}([,_ ]\d{3})+(\.\d*)?", cell):
        return " (write it without thousands separators)"
    if re.fullmatch(r"[+-]?\d+(\.\d*)?\s*[kKmMbBgGtT]", cell):
        return " (suffixes such as K, M, B are not read: write the count, e.g. 1.4e9)"
    return ""


def numbers(df: pd.DataFrame, col: str, where: str, positive: bool = True, most: float = math.inf,
            least: float = 0.0) -> pd.Series:
    """The column as floats; an empty cell, one that is not a number, infinite, negative, (with `positive`)
    0, below `least` or above `most` is a `LadderError` naming its line and the value as written."""
    raw = df[col].astype(str).str.strip()
    values = pd.to_numeric(raw, errors="coerce").astype("float64")
    bad = (~values.between(-math.inf, math.inf, inclusive="neither") | (values <= 0 if positive else values < 0)
           | (values > most) | (values < least))
    if bad.any():
        line = bad.idxmax()
        cell = raw.loc[line]
        if not cell:
            why = "an empty cell"
        elif pd.isna(values.loc[line]):
            why = f"{cell!r}, which is not a number{number_hint(cell)}"
        elif abs(values.loc[line]) == math.inf:
            why = f"{cell!r}, not a finite number"
        elif values.loc[line] > most:
            why = f"{cell!r}, above {most:g}, the most this column can hold (a typo, or another unit?)"
        elif values.loc[line] < 0 or (positive and values.loc[line] == 0):
            why = f"{cell!r}, a non-positive value (it must be above 0)" if positive else f"{cell!r}, a negative value"
        else:
            why = f"{cell!r}, below {least:g}, the least this column can hold (a count, not millions or billions?)"
        raise LadderError(f"{where}: line {line}: column {col!r} has {why}; fix or drop that row")
    return values
