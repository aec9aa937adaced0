"""YAML in and out of the frozen config dataclasses, strictly.

Every config record (`ModelSpec`, `Schedule`, `RunConfig`, recipes, ...) is built from plain YAML
data by `build`, which checks field names (with a "did you mean" hint), types and literal choices
and reports the first problem as a `LadderError` naming the field's full path. YAML is only ever
read with `yaml.safe_load`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from ladder.errors import LadderError
from ladder.files import write_text_atomic

T = TypeVar("T")


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML mapping from `path` with `safe_load`; any problem is a `LadderError`."""
    p = Path(path)
    if not p.is_file():
        raise LadderError(f"{p}: no such file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise LadderError(f"{p}: malformed YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise LadderError(f"{p}: not a text file") from None
    if not isinstance(data, dict):
        raise LadderError(f"{p}: expected a YAML mapping of fields, got {type(data).__name__}")
    return data


def dump_yaml(data: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write `data` as YAML, atomically."""
    return write_text_atomic(path, yaml.safe_dump(data, sort_keys=False))


def to_dict(obj: Any) -> Any:
    """A dataclass (recursively) as plain YAML-able data: tuples become lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def build(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass `cls` from YAML data, checking names, types and choices."""
    return _convert(cls, data, where or cls.__name__)


def replace_path(obj: T, dotted: str, raw_value: str, where: str = "--set") -> T:
    """Return `obj` with the field at `dotted` (e.g. ``arch.n_experts``) set from a string.

    The string is parsed as YAML (so ``8``, ``0.5``, ``[1, 2]`` and ``null`` work) and then
    checked against the field's type like any other input.
    """
    try:
        value = yaml.safe_load(raw_value)
    except yaml.YAMLError:
        raise LadderError(f"{where} {dotted}={raw_value}: value is not valid YAML") from None
    data = to_dict(obj)
    node = data
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict) or part not in node:
            known = sorted(node) if isinstance(node, dict) else []
            raise LadderError(
                f"{where} {dotted}: unknown field '{'.'.join(parts[: i + 1])}'"
                + _suggest(part, known)
            )
        if i == len(parts) - 1:
            node[part] = value
        else:
            node = node[part]
    return build(type(obj), data, where=f"{where} {dotted}")


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (known fields: {', '.join(known)})" if known else ""


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except LadderError as exc:
                errors.append(str(exc))
        raise LadderError(errors[0] if errors else f"{where}: must not be empty")
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            shown = ", ".join(repr(c) for c in choices)
            raise LadderError(f"{where}: {value!r} is not one of {shown}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise LadderError(f"{where}: expected a list, got {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_convert(item_tp, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise LadderError(f"{where}: expected a mapping, got {value!r}")
        _, val_tp = get_args(tp) or (Any, Any)
        return {str(k): _convert(val_tp, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise LadderError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool):
            raise LadderError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                as_float = float(value.replace("_", ""))
            except ValueError:
                as_float = None
            if as_float is not None and as_float.is_integer():
                return int(as_float)
        raise LadderError(f"{where}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise LadderError(f"{where}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads `1e-3` as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise LadderError(f"{where}: expected a number, got {value!r}")
    if tp is str:
        if not isinstance(value, str):
            raise LadderError(f"{where}: expected text, got {value!r}")
        return value
    raise TypeError(f"configio cannot convert to {tp!r}")  # a programming error


def _build_dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise LadderError(f"{where}: expected a mapping of fields, got {value!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in value:
        if key not in fields:
            raise LadderError(f"{where}: unknown field '{key}'" + _suggest(str(key), sorted(fields)))
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _convert(hints[name], value[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise LadderError(f"{where}: missing required field '{name}'")
    try:
        return cls(**kwargs)
    except LadderError as exc:
        raise LadderError(f"{where}: {exc}") from None
