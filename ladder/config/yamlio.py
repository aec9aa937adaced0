"""YAML in and out of the frozen config dataclasses, strictly.

Every config record (`ModelSpec`, `Schedule`, `RunConfig`, recipes, ...) is built from plain YAML
data by `build`, which checks field names (with a "did you mean" hint), types and literal choices
and reports the first problem as a `LadderError` naming the field's full path. YAML is only ever
read with `yaml.SafeLoader` (plain data only, nesting bounded).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from ladder.errors import LadderError
from ladder.files import write_text_atomic

T = TypeVar("T")


INT64 = 2**63
"""Integers must fit in a signed 64-bit integer (what numpy, parquet and JAX hold)."""


class _Lines(dict):
    """A YAML mapping that remembers the line (from 1) each key's value starts on."""

    line: int = 0
    lines: dict[Any, int]


MAX_DEPTH = 100
"""Nesting deeper than this is not a config (and would exhaust the stack)."""


class _TooDeep(Exception):
    pass


class _SafeLineLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` (no tags beyond plain data) whose mappings know their lines, and which stops
    at `MAX_DEPTH` levels of nesting."""

    _depth = 0

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _SafeLineLoader, node: yaml.MappingNode) -> Any:
    data = _Lines()
    data.line, data.lines = node.start_mark.line + 1, {}
    yield data
    _refuse_duplicates(loader, node)
    data.update(loader.construct_mapping(node))  # flattens merge keys into node.value first
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            data.lines.setdefault(loader.construct_object(key_node), value_node.start_mark.line + 1)


def _refuse_duplicates(loader: _SafeLineLoader, node: yaml.MappingNode) -> None:
    """A key given twice in one mapping is an error (YAML would keep the last silently). Keys a merge
    (``<<: *base``) brings in may be given again: that is what a merge is for."""
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        if key in first:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} is given twice (first at line {first[key]}): keep one",
                key_node.start_mark)
        first[key] = key_node.start_mark.line + 1


_SafeLineLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
yaml.SafeDumper.add_representer(_Lines, yaml.SafeDumper.represent_dict)  # what was read can be written back


def _not_a_script(p: Path, text: str) -> None:
    """A file that is no YAML mapping and starts with #! is a script (the plan's launch.sh) given for a YAML file:
    a `LadderError` that says so."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
    if first.startswith("#!"):
        raise LadderError(f"{p}: a script ({first}), not a YAML file; give a YAML file, or run the script itself")


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML mapping from `path` with a safe loader; any problem is a `LadderError`.

    Mappings remember the line of each key, so a bad value is reported with its line."""
    p = Path(path)
    if p.is_dir():
        raise LadderError(f"{p}: is a folder, not a file; give the path of a YAML file")
    if not p.is_file():
        raise LadderError(f"{p}: no such file")
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise LadderError(f"{p}: not a text file") from None
    except OSError as exc:  # a device or a file system that will not be read: name the file
        raise LadderError(f"{p}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = yaml.load(text, Loader=_SafeLineLoader)  # noqa: S506 - a SafeLoader subclass
    except (RecursionError, _TooDeep):
        raise LadderError(f"{p}: YAML nested too deeply to be a config (more than {MAX_DEPTH} levels)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "could not determine a constructor for the tag" in problem:
            raise LadderError(f"{p}: tag not allowed{where}: {problem.split('tag ', 1)[1]} (config files are read as "
                              "plain YAML, with no tags that build objects); remove it") from None
        _not_a_script(p, text)
        raise LadderError(f"{p}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        _not_a_script(p, text)
    if data is None:
        raise LadderError(f"{p}: the file is empty (or only comments); expected a YAML mapping of fields")
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


def build(cls: type[T], data: Any, where: str = "", sep: str = ": ") -> T:
    """Build dataclass `cls` from YAML data, checking names, types, choices and that every number
    is finite and every integer fits in 64 bits. A problem is reported as `where`, `sep` and the
    field's path: ``run.yaml: schedule.peak_lr: ...``."""
    where = where or cls.__name__
    try:
        return _convert(cls, data, "")
    except LadderError as exc:
        text = str(exc).removeprefix(": ")  # a problem of the whole record has no field path
        raise type(exc)(f"{where}{sep}{text}") from None
    except RecursionError:
        raise LadderError(f"{where}: nested too deeply to be a config") from None


def replace_paths(obj: T, items: list[tuple[str, str]], where: str = "--set") -> T:
    """Return `obj` with each field at a dotted path (e.g. ``arch.n_experts``) set from a string, all of them
    before the result is checked (``arch.n_experts=1`` then ``arch.top_k=1`` holds in either order).

    Each string is parsed as YAML (so ``8``, ``0.5``, ``[1, 2]`` and ``null`` work) and then checked against the
    field's type like any other input.
    """
    data = to_dict(obj)
    for dotted, raw_value in items:
        try:
            value = yaml.load(raw_value, Loader=_SafeLineLoader)  # noqa: S506 - a SafeLoader subclass
        except (yaml.YAMLError, RecursionError, _TooDeep):
            raise LadderError(f"{where} {dotted}={_short(raw_value)}: value is not valid YAML") from None
        value = to_dict(value)  # plain mappings: the lines of a one-line value would only confuse a message
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
    return build(type(obj), data, where=where, sep=" ")


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
        return _convert_union(get_args(tp), value, where)
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            shown = ", ".join(repr(c) for c in choices)
            raise LadderError(f"{where}: {_short(value)} is not one of {shown}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise LadderError(f"{where}: expected a list, got {_short(value)}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_convert(item_tp, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise LadderError(f"{where}: expected a mapping, got {_short(value)}")
        _, val_tp = get_args(tp) or (Any, Any)
        return {str(k): _convert(val_tp, v, _child(where, k)) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise LadderError(f"{where}: expected true or false, got {_short(value)}")
        return value
    if tp is int:
        return _to_int(value, where)
    if tp is float:
        return _to_float(value, where)
    if tp is str:
        if not isinstance(value, str):
            raise LadderError(f"{where}: expected text, got {_short(value)}")
        return value
    raise TypeError(f"configio cannot convert to {tp!r}")  # a programming error


def _convert_union(options: tuple[Any, ...], value: Any, where: str) -> Any:
    """`value` as the first of `options` that takes it; None where the union holds None."""
    if value is None and type(None) in options:
        return None
    errors: list[LadderError] = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _convert(option, value, where)
        except LadderError as exc:
            errors.append(exc)
    raise errors[0] if errors else LadderError(f"{where}: must not be empty")


def _to_int(value: Any, where: str) -> int:
    """An integer from an int, a whole float or text such as ``1_000`` or ``1e6``; never a bool."""
    if isinstance(value, bool):
        raise LadderError(f"{where}: expected an integer, got {_yes_no(value)}")
    number = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            as_float = float(value.replace("_", ""))
        except ValueError:
            as_float = None
        if as_float is not None and as_float.is_integer():
            number = int(as_float)
    if number is None:
        raise LadderError(f"{where}: expected an integer, got {_short(value)}")
    if not -INT64 <= number < INT64:
        raise LadderError(f"{where}: {_short(value)} is too large: integers must fit in 64 bits")
    return number


def _to_float(value: Any, where: str) -> float:
    """A finite float from a number or text (YAML 1.1 reads ``1e-3`` as text); never a bool."""
    if isinstance(value, bool):
        raise LadderError(f"{where}: expected a number, got {_yes_no(value)}")
    number = None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            number = float("inf")
    elif isinstance(value, str):  # YAML 1.1 reads `1e-3` as a string
        try:
            number = float(value)
        except ValueError:
            pass
    if number is None:
        raise LadderError(f"{where}: expected a number, got {_short(value)}")
    if not math.isfinite(number):
        raise LadderError(f"{where}: {_short(value)} is not a finite number")
    return number


def _build_dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise LadderError(f"{where}: expected a mapping of fields, got {_short(value)}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    lines = getattr(value, "lines", {})
    for key in value:
        if key not in fields:
            raise _at(LadderError(f"{where}: unknown field '{key}'" + _suggest(str(key), sorted(fields))),
                      lines.get(key))
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            try:
                kwargs[name] = _convert(hints[name], value[name], _child(where, name))
            except LadderError as exc:
                raise _at(exc, lines.get(name)) from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _at(LadderError(f"{where}: missing required field '{name}'"), getattr(value, "line", None))
    try:
        return cls(**kwargs)
    except LadderError as exc:
        # The record's own check names the field it refused (``d_model=33 ...``): point at that line.
        text = str(exc)
        named = sorted((text.find(f"{k}="), lines[k]) for k in lines if isinstance(k, str) and f"{k}=" in text)
        line = named[0][1] if named else getattr(value, "line", None)  # the field the message names first
        said = not where or text.startswith(f"{where}.")  # "arch.top_k=0 ..." names its record already
        raise _at(LadderError(text if said else f"{where}: {text}"), line) from None


def _child(where: str, name: Any) -> str:
    """The path of field `name` of the record at path `where` ("" at the top)."""
    return f"{where}.{name}" if where else str(name)


class _Located(LadderError):
    """A config error whose message already ends with the line it came from."""


def _at(exc: LadderError, line: int | None) -> LadderError:
    if isinstance(exc, _Located) or not line:
        return exc
    return _Located(f"{exc} (line {line})")


def line_of(data: Any, key: Any) -> int | None:
    """The line of `key` in the mapping `data` as `load_yaml` read it; None where not known."""
    return getattr(data, "lines", {}).get(key)


@contextmanager
def at_line(line: int | None) -> Iterator[None]:
    """A `LadderError` raised inside ends with `line` (of the YAML file it names), where one is given."""
    try:
        yield
    except LadderError as exc:
        raise _at(exc, line) from None


def _yes_no(value: bool) -> str:
    """A yes-or-no value as the user may have written it: YAML reads yes, no, on and off as true and false."""
    return f"{value} (YAML reads yes, no, on, off, true and false as a yes-or-no value)"


def _short(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it, cut short when it is long (a 5,000-deep list, a huge number)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # ints beyond Python's printing limit, deep nests
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
