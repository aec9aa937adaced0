"""A run's ladder coordinates: the numbers a fit needs from its config, and the fraction of each step.

The trainer writes them at the top level of the wandb config (`RunConfig.coordinates()`), in the
``coordinates`` block of ``run.yaml``, and under ``run_config`` with the whole config. A run from
elsewhere may lack them: the user supplies them per pull (``--coord FIELD=VALUE``) or per run (a YAML
file ``{RUN: {FIELD: VALUE}}``), and a missing one is an error that names the run and the field.

The fraction of a step is ``step / planned steps at that step``. When the run config holds the
schedule with its edits (a horizon cut at half way), the planned steps change at each edit: an eval
at the edit's step still belongs to the old plan, since no update of the new plan has run yet.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ladder.config.schedule import Schedule
from ladder.config.yamlio import at_line, build, line_of, load_yaml
from ladder.data.csvfile import number_hint
from ladder.errors import LadderError, meant

INT_FIELDS = ("active_params", "total_params", "stop_after_steps", "tokens_per_step", "planned_tokens")
FLOAT_FIELDS = ("fit_flops_per_token",)
FIELDS = ("active_params", "total_params", "fit_flops_per_token", "stop_after_steps", "tokens_per_step", "planned_tokens")
LABELS = ("name", "group", "role")
SCHEDULE = "schedule"
"""A run's LR schedule in a coordinates file: ``{peak_lr, total_steps, warmup_steps, decay, min_lr_ratio, ...}``
(the fields of `ladder.config.schedule.Schedule`); kept in the run's config, where predictions read it."""
OPTIONAL = ("total_params",)
"""Fields no law reads: stored as missing when not given."""
ROLES = ("rung", "hero", "single", "prediction")
"""A run's part in a ladder; "prediction" is a prediction logged to wandb (`ladder predict --to-wandb`), never fitted."""
UNKNOWN = "unknown"
MAY_BE_UNKNOWN = ("active_params", "total_params", "fit_flops_per_token")
"""Fields a user may declare unknown (stored as missing); steps and tokens cannot be."""

PLAN_FIELDS = ("stop_after_steps", "tokens_per_step", "planned_tokens")
"""Any two of these give the third."""
ONE_ROW = "one_row_per_run"
"""In a run's config from a table of one row per run and no step column (final losses): that row is the run's last,
at its last step, which its coordinates give. The value is the row's tokens (True where the table has no tokens
column): its planned tokens where the coordinates give no two of steps, tokens per step and tokens; its steps are 1
where they give none. These three are derived anew at every read, never taken from what a pull stored."""


class MissingCoordinates(LadderError):
    """A run whose config, stored coordinates and the user's lack coordinates a fit needs; says each of them and
    how to give them at once."""

    def __init__(self, run_label: str, run: str, fields: tuple[str, ...], hint: str = ""):
        if "active_params" in fields:  # with N, the FLOPs per token are 6·N where a law needs them
            fields = tuple(f for f in fields if f != "fit_flops_per_token")
        self.run_label, self.run, self.fields, self.hint = run_label, run, fields, hint
        plan = [f for f in fields if f in PLAN_FIELDS]
        asked = [f"'{f}'" for f in fields if f not in PLAN_FIELDS]
        if len(plan) == len(PLAN_FIELDS):
            asked.append("two of 'stop_after_steps', 'tokens_per_step', 'planned_tokens' (the third follows)")
        elif plan:
            asked.append(" or ".join(f"'{f}'" for f in plan) + " (with the one it has, the third follows)")
        wanted = [f for f in fields if f not in PLAN_FIELDS] + (plan[:-1] if len(plan) > 1 else plan)
        example = ", ".join(f"{f}: VALUE" for f in wanted)
        super().__init__(f"run {run_label}: its config lacks {' and '.join(asked)}; supply "
                         f"{'it' if len(wanted) == 1 else 'them'} with --coord {wanted[0]}=VALUE (every run of this "
                         f"pull) or --coords FILE.yaml ({{{run}: {{{example}}}}}){hint}")

    def with_hint(self, hint: str) -> MissingCoordinates:
        """This error with `hint` (another way to give the coordinates) added to its own."""
        return MissingCoordinates(self.run_label, self.run, self.fields, self.hint + hint)


CONFIG_NAMES = {
    "active_params": ("n_params", "num_params", "params", "n_parameters", "num_parameters", "active_params",
                      "n_active_params", "non_embedding_params", "params_nonembed", "model_size"),
    "total_params": ("total_params", "n_total_params", "num_total_params"),
    "fit_flops_per_token": ("flops_per_token", "fit_flops_per_token"),
    "stop_after_steps": ("total_steps", "max_steps", "train_steps", "num_steps", "max_iters", "num_train_steps",
                         "training_steps", "steps"),
    "tokens_per_step": ("tokens_per_step", "batch_tokens", "tokens_per_batch", "global_batch_tokens"),
    "planned_tokens": ("total_tokens", "max_tokens", "train_tokens", "num_tokens", "planned_tokens"),
}
"""Names a team's config may give a coordinate under (its last part, any case), for `config_key_hint`."""


def config_key_hint(config: dict[str, Any], fields: tuple[str, ...]) -> str:
    """Where a run's config holds a number under a name a missing coordinate goes by elsewhere (`CONFIG_NAMES`):
    the --coord-key that reads it ("" where it holds none)."""
    found = []
    for key, value in _flat(config):
        leaf = key.rsplit(".", 1)[-1].lower()
        for f in fields:
            if leaf in CONFIG_NAMES.get(f, ()) and isinstance(value, int | float) and not isinstance(value, bool):
                found.append(f"--coord-key {f}={key} ({value:g} there)")
    return f"; its config may give {'it' if len(found) == 1 else 'them'}: {', '.join(found[:4])}" if found else ""


def _flat(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every (dotted key, value) of a nested config, wandb's {"value": ...} unwrapped."""
    out = []
    for key, value in (config.items() if isinstance(config, dict) else ()):
        value = _unwrap(value)
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def with_job_type(config: dict[str, Any], job_type: str | None) -> dict[str, Any]:
    """A wandb run's config with its job type as its role where the config gives none and the job type is a role
    (``wandb.init(job_type="rung")``: the run is a rung, as ``role: rung`` in its config says)."""
    if job_type not in ROLES or config.get("role"):
        return config
    return {**config, "role": job_type}


def _check_role(role: str, where: str) -> None:
    """Refuse a role that is none of `ROLES`, naming where it was given."""
    if role not in ROLES:
        raise LadderError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")


def _plain_name(name: str) -> str:
    """A run's name in lower case with its separators ('-', '_', '.', ' ') made one."""
    return re.sub(r"[-_. ]+", "-", str(name).strip().lower())


@dataclass(frozen=True)
class CoordinateOverrides:
    """Coordinates the user gives, beating the run's config."""

    all_runs: dict[str, Any] = field(default_factory=dict)
    """FIELD -> value for every run of a pull; the value ``unknown`` stores a field as missing."""
    per_run: dict[str, dict[str, Any]] = field(default_factory=dict)
    """run name or id -> {FIELD: value}."""
    file: str = ""
    """The coordinates file `per_run` was read from, to name it in messages."""
    config_keys: dict[str, str] = field(default_factory=dict)
    """FIELD -> the key of each run's config that gives it (`--coord-key`, a dotted path into a nested config: the
    team's own name for it, ``model.n_params``); beaten by `all_runs` and `per_run`, beating the config's own."""

    def for_run(self, run_id: str, name: str) -> dict[str, Any]:
        return {**self.all_runs, **self.per_run.get(name, {}), **self.per_run.get(run_id, {})}

    def near_entry(self, *keys: str) -> str:
        """A hint where the coordinates file has an entry that is one of `keys` (a run's name or id) written another
        way: in another case, or with other separators (``Team_190M`` for ``team-190M``); its coordinates were not
        used there. Another run's entry (``team-190M-2xC`` beside ``team-190M-1xC``) is none."""
        entry = next((e for e in self.per_run for k in keys if k and e != k and _plain_name(e) == _plain_name(k)), None)
        return (f"; {self.file} has an entry {entry!r}, which is not the run's name {keys[0]!r} (names are matched "
                "as written, case included)") if entry else ""

    def unmatched(self, names: set[str]) -> list[str]:
        """One line for each run of the coordinates file that is none of `names` (the names and ids of a pull's runs)."""
        lines, plain = [], []
        free = sorted(n for n in names if n not in self.per_run)  # a run the file already names is no typo's target
        for run in self.per_run:
            if run not in names:
                close = next((n for n in sorted(names) if n.lower() == run.lower()), None) or meant(run, free)
                if close:
                    lines.append(f"{self.file}: {run!r} is the name or id of no run of this pull; its coordinates "
                                 f"were not used (did you mean {close!r}?)")
                else:
                    plain.append(run)
        if len(plain) > 2:  # a file for the whole ladder, a pull of some of its runs
            return lines + [f"{self.file}: {len(plain)} of its runs ({', '.join(map(repr, plain[:2]))}, ...) are in "
                            "no run of this pull; their coordinates were not used"]
        return lines + [f"{self.file}: {run!r} is the name or id of no run of this pull; its coordinates were not used"
                        for run in plain]

    def shadowed(self, names: set[str]) -> list[str]:
        """One line for each --coord FIELD=VALUE that the coordinates file's entry for a run of this pull (one of
        `names`) gives another value: the file names the run, so its value holds there."""
        lines = []
        for key, value in self.all_runs.items():
            runs = [f"{run} ({fields[key]})" for run, fields in self.per_run.items()
                    if run in names and key in fields and not same_given(fields[key], value)]
            if runs:
                lines.append(overridden(f"--coord {key}={value}", key, runs, self.file, "--coord"))
        return lines

    @classmethod
    def parse(cls, items: list[str] | None = None, file: str | os.PathLike | None = None,
              keys: list[str] | None = None, table: bool = False) -> CoordinateOverrides:
        """From ``FIELD=VALUE`` strings, a YAML file of ``{RUN: {FIELD: VALUE}}`` and ``FIELD=KEY`` strings
        (`config_keys`); `table`: for a table's runs, whose coordinates come from its columns too."""
        all_runs: dict[str, Any] = {}
        for item in items or []:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise LadderError(f"--coord {item!r}: expected FIELD=VALUE, e.g. --coord stop_after_steps=5000")
            _check_field(key, f"--coord {item}")
            if not value.strip():
                raise LadderError(f"--coord {item!r}: no value after '='; give one, e.g. --coord {key}=VALUE")
            if key in FIELDS:
                try:
                    coordinate_number(f"--coord {item}", key, value.strip())  # checked here, to name the flag
                except LadderError as exc:
                    named = value.strip()
                    if not re.search(r"[A-Za-z_]", named) or named.lower() == UNKNOWN or re.match(r"[-+.\d]", named):
                        raise  # a number written otherwise (190M, 1.3e9x) is no key
                    raise LadderError(f"{exc}; to read it from each run's config under the key {named!r}, give "
                                      f"--coord-key {key}={named}" + (
                                          f", or from the table's column {named!r}, --coord-column {key}={named}"
                                          if table else "")) from None
            if key == "role":  # here too, where a file's entries give every run one
                _check_role(value.strip(), f"--coord {item}")
            if all_runs.get(key, value.strip()) != value.strip():  # the last one silently won
                raise LadderError(f"--coord {key} given twice ({key}={all_runs[key]} and {key}={value.strip()}): "
                                  "keep one")
            all_runs[key] = value.strip()
        per_run: dict[str, dict[str, Any]] = {}
        if file is not None:
            data = load_yaml(Path(file))
            for run, fields in data.items():
                if not isinstance(fields, dict):
                    flat = str(run) in FIELDS + LABELS + (SCHEDULE,)  # one run's fields: a target file, or an entry unnested
                    hint = (f"; this file gives fields at its top level (a target file?): a coordinates file maps each "
                            f"run's name or id to its fields, {{RUN: {{{run}: {fields!r}}}}}") if flat else ""
                    with at_line(line_of(data, run)):
                        raise LadderError(f"{file}: {run}: expected a mapping of FIELD: VALUE, got {fields!r}{hint}")
                for key, value in fields.items():
                    with at_line(line_of(fields, key)):
                        _check_entry(str(key), value, f"{file}: {run}")
                per_run[str(run)] = {str(k): v for k, v in fields.items()}
        return cls(all_runs, per_run, "" if file is None else str(file), _config_keys(keys or []))


def _config_keys(items: list[str]) -> dict[str, str]:
    """``FIELD=KEY`` strings of --coord-key as {FIELD: KEY}."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, key = (part.strip() for part in item.partition("="))
        if not sep or not name or not key:
            raise LadderError(f"--coord-key {item!r}: expected FIELD=KEY, the key of the run's config that gives the "
                              "field, e.g. --coord-key active_params=model.n_params")
        _check_field(name, f"--coord-key {item}")
        if name == "name":  # a run's name is its source's, and what a coordinates file calls it by
            raise LadderError(f"--coord-key {item}: a run's name is its source's (the wandb run's, its folder's, its "
                              "file's); give a run another with --coords FILE.yaml ({RUN: {name: NEW}})")
        if out.get(name, key) != key:
            raise LadderError(f"--coord-key {name} given twice ({name}={out[name]} and {name}={key}): keep one")
        out[name] = key
    return out


def unread_keys(config: dict[str, Any], overrides: CoordinateOverrides, stored: dict[str, Any]) -> list[str]:
    """A warning for each --coord-key whose key a run's config gives no value under, where the run as stored (`stored`:
    its row) lacks the field or label it names: a group or role left empty keeps a rung out of its ladder unsaid."""
    lacking = []
    for f, key in overrides.config_keys.items():
        value = config_value(config, key)
        held = stored.get(f)
        if (value is None or (isinstance(value, float) and math.isnan(value))) and (
                held is None or held == "" or (isinstance(held, float) and math.isnan(held))):
            lacking.append(_unread_key(config, f, key, value))
    if not lacking:
        return []
    return [f"its config gives no value under {', nor '.join(lacking)}, and nothing else gave "
            f"{'it' if len(lacking) == 1 else 'them'}: stored without; check the key (a dotted key reaches into a nested "
            "config), or give the field with --coord or --coords"]


def replaced_by_coord(config: dict[str, Any], overrides: CoordinateOverrides, run_id: str, name: str) -> list[str]:
    """A line for each --coord (given for every run of a pull) that replaces a value the run's own config gives
    otherwise (its field by name, or by --coord-key): one value for every run can be right for none but one."""
    own, labels, _ = coordinates_from_config(config)
    own = {**own, **labels}
    for f, key in overrides.config_keys.items():
        if (value := config_value(config, key)) is not None:
            own[f] = value
    mine = {**overrides.per_run.get(name, {}), **overrides.per_run.get(run_id, {})}  # a file's entry for it: meant
    out = [f"--coord {f}={v} replaces the {own[f]} its config gives" for f, v in overrides.all_runs.items()
           if f not in mine and own.get(f) not in (None, "") and not same_given(own[f], v)]
    return [f"{'; '.join(out)} (--coord gives every run of the pull one value; a run's own goes in --coords "
            "FILE.yaml)"] if out else []


def _unread_key(config: dict[str, Any], f: str, key: str, value: Any) -> str:
    """What a run's config holds where a --coord-key looks for `f` under `key` and finds no value: nothing, a NaN, or a
    mapping of other keys (one of them is likelier meant)."""
    inner = [k for k, _ in _flat(config) if k.startswith(f"{key}.")]
    if value is not None:
        why = ": NaN there"
    elif inner:
        shown = ", ".join(k[len(key) + 1:] for k in inner[:5]) + (", ..." if len(inner) > 5 else "")
        why = f": a mapping there, of {shown}; name one of its keys, e.g. {inner[0]}"
    else:
        why = ""
    return f"{key!r} (--coord-key {f}={key}{why})"


def config_value(config: dict[str, Any], key: str) -> Any:
    """The value `config` holds under `key`: a key of its own (dots and all), or a path through its nested mappings
    (``model.n_params``, as `_flat` names it); None where it holds none there, or a mapping or list."""
    value = dict(_flat(config)).get(key)
    return None if value in (None, "") or isinstance(value, list) else value


@dataclass(frozen=True)
class Coordinates:
    """Where a run sits on the ladder. Parameters are active / total as DESIGN.md counts them."""

    stop_after_steps: int
    """Planned optimizer steps (with every schedule edit applied)."""
    tokens_per_step: int
    planned_tokens: int
    active_params: int | None = None
    total_params: int | None = None
    fit_flops_per_token: float | None = None
    """3 × forward FLOPs per token without the output head."""
    horizons: tuple[tuple[int, int], ...] = ()
    """(step of an edit, planned steps after it), in order; the plan before the first is `initial_steps`."""
    initial_steps: int = 0
    """Planned steps before any schedule edit (0: the same as `stop_after_steps`)."""

    def planned_steps_at(self, steps: np.ndarray) -> np.ndarray:
        return planned_steps_at(steps, self.initial_steps or self.stop_after_steps, self.horizons)

    def fraction(self, steps: np.ndarray) -> np.ndarray:
        """step / the planned steps the run started with (DESIGN.md's fraction)."""
        return np.asarray(steps, dtype=np.int64) / (self.initial_steps or self.stop_after_steps)

    def fraction_edited(self, steps: np.ndarray) -> np.ndarray:
        """step / the plan in force at that step: where the horizon was edited, shown beside `fraction`."""
        steps = np.asarray(steps, dtype=np.int64)
        return steps / self.planned_steps_at(steps)

    def past_plan(self, steps: np.ndarray) -> np.ndarray:
        """Whether each step lies past the plan in force at it."""
        steps = np.asarray(steps, dtype=np.int64)
        return steps > self.planned_steps_at(steps)

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def overridden(flag: str, field: str, runs: list[str], file: str, over: str) -> str:
    """The line that says the coordinates file's entries for `runs` override `flag` (a --coord, a --coord-column)."""
    shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
    return (f"{flag} is not used for {shown}: {file} gives {'their' if len(runs) > 1 else 'its'} {field}, and a run's "
            f"own entry wins over {over}")


def same_given(a: Any, b: Any) -> bool:
    """Whether two values a user gave for one field agree (as numbers where both read as numbers: 1e9 and
    1000000000 agree)."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).strip() == str(b).strip()


def planned_steps_at(steps: np.ndarray, initial: int, horizons: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The plan in force at each step: `initial`, then each edit's horizon after its step (an eval at the
    edit's step still belongs to the old plan)."""
    steps = np.asarray(steps, dtype=np.int64)
    planned = np.full(steps.shape, initial, dtype=np.int64)
    for at_step, horizon in horizons:
        planned = np.where(steps > at_step, horizon, planned)
    return planned


FLOPS_PER_PARAM = (2.0, 6000.0)
"""The fit FLOPs per token a run's active parameters allow, per parameter: at least a forward pass's 2 (the
fit counts 3 passes, 6·N, plus attention), and below 1,000× 6·N, which no attention reaches; outside, one of
the two is in other units (GFLOPs, billions)."""


def check_counts(where: str, flops: float | None, active: float | None, total: float | None = None) -> None:
    """A `LadderError` where a run's fit FLOPs per token and active parameters cannot both be counts
    (`FLOPS_PER_PARAM`), or its total parameters are fewer than its active ones."""
    if flops and active and not FLOPS_PER_PARAM[0] <= flops / active <= FLOPS_PER_PARAM[1]:
        raise LadderError(f"{where}: fit_flops_per_token {flops:.4g} is {flops / active:.3g} FLOPs per active "
                          f"parameter (active_params {active:.4g}), where a model runs about 6 plus attention: is one "
                          "of them in other units (GFLOPs, billions)? Give both as counts")
    if total and active and total < active:
        raise LadderError(f"{where}: total_params {total:.4g} is fewer than active_params {active:.4g}; a model's "
                          "active parameters are some of its total (give total_params, or leave it out)")


def coordinates_from_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], Schedule | None]:
    """Coordinate values, labels (name, group, role) and the schedule found in a run's config."""
    run_config = _unwrap(config.get("run_config"))
    places = [config, _unwrap(config.get("coordinates"))]
    if isinstance(run_config, dict):
        places += [_unwrap(run_config.get("coordinates")), run_config]
    found: dict[str, Any] = {}
    for name in (*FIELDS, *LABELS):
        for place in places:
            if isinstance(place, dict) and _unwrap(place.get(name)) not in (None, ""):
                found[name] = _unwrap(place[name])
                break
    labels = {k: str(found.pop(k)) for k in LABELS if k in found}
    schedule = _schedule(run_config.get("schedule") if isinstance(run_config, dict) else config.get("schedule"))
    return found, labels, schedule


def resolve_coordinates(
    run_label: str,
    run_id: str,
    name: str,
    config: dict[str, Any],
    stored: dict[str, Any],
    overrides: CoordinateOverrides,
) -> tuple[Coordinates, dict[str, str]]:
    """The run's coordinates and labels; a missing one raises a `LadderError` naming run and field.

    Precedence: the user's overrides, then the run's config, then what an earlier pull stored.
    """
    from_config, labels, schedule = coordinates_from_config(config)
    unread = []  # the --coord-key keys this run's config lacks
    for f, key in overrides.config_keys.items():
        value = config_value(config, key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            unread.append((f, _unread_key(config, f, key, value)))
        elif f in LABELS:
            labels[f] = str(value)
        else:
            from_config[f] = value
    given = overrides.for_run(run_id, name)
    if given.get(SCHEDULE) is not None:
        schedule = schedule_from(given[SCHEDULE], f"run {run_label}")
    values: dict[str, Any] = {}
    one_row = config.get(ONE_ROW)
    for f in FIELDS:
        for place in (given, from_config) if one_row and f in PLAN_FIELDS else (given, from_config, stored):
            v = place.get(f)
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                values[f] = v
                break
    for label in LABELS:
        if label in given:
            labels[label] = str(given[label])
    if labels.get("role"):
        _check_role(labels["role"], f"run {run_label}")
    clean = {f: coordinate_number(f"run {run_label}", f, v) for f, v in values.items()}
    if "stop_after_steps" not in clean and schedule is not None:
        clean["stop_after_steps"] = schedule.horizon
    derive_tokens(clean)
    if one_row and "stop_after_steps" not in clean:  # a table's one row of the run: its tokens, else one step
        if "planned_tokens" not in clean and not isinstance(one_row, bool):
            clean["planned_tokens"] = coordinate_number(f"run {run_label}", "planned_tokens", one_row)
            derive_tokens(clean)
        if "stop_after_steps" not in clean:
            clean["stop_after_steps"] = 1
            derive_tokens(clean)
    for f in ("planned_tokens", "tokens_per_step", "stop_after_steps"):
        if clean.get(f) is not None and not 0 < clean[f] < 2**63:
            raise LadderError(f"run {run_label}: '{f}' = {clean[f]} (derived from the other two) is out of range")
    if schedule is not None and schedule.horizon != clean["stop_after_steps"]:
        raise LadderError(
            f"run {run_label}: its schedule runs {schedule.horizon:,} steps but stop_after_steps is "
            f"{clean['stop_after_steps']:,}; make them agree (the schedule's total_steps, with its edits, is the plan)"
        )
    check_counts(f"run {run_label}", clean.get("fit_flops_per_token"), clean.get("active_params"), clean.get("total_params"))
    optional = OPTIONAL + (("fit_flops_per_token",) if clean.get("active_params") else ())
    for f in FIELDS:
        if f not in clean and f in optional:
            clean[f] = None  # no law needs it (FLOPs per token: 6·N is used, and said, where it is needed)
    missing = tuple(f for f in FIELDS if f not in clean)
    if missing:
        exc = MissingCoordinates(run_label, name or run_id, missing)
        lacks = [text for f, text in unread if f in exc.fields]  # the fields it asks for
        raise exc.with_hint(f"; its config gives no value under {', nor '.join(lacks)}") if lacks else exc
    initial, horizons = schedule_plan(schedule)
    coords = Coordinates(
        stop_after_steps=clean["stop_after_steps"],
        tokens_per_step=clean["tokens_per_step"],
        planned_tokens=clean["planned_tokens"],
        active_params=clean["active_params"],
        total_params=clean["total_params"],
        fit_flops_per_token=clean["fit_flops_per_token"],
        horizons=horizons,
        initial_steps=initial,
    )
    return coords, labels


def schedule_plan(schedule: Schedule | None) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(planned steps before the first edit, (step of an edit, planned steps after it) ...); (0, ()) unedited."""
    if schedule is None or not schedule.edits:
        return 0, ()
    return schedule.total_steps, tuple((e.at_step, e.horizon) for e in schedule.edits)


def planned_fraction(schedule: Schedule | None, steps: np.ndarray, planned: int) -> np.ndarray:
    """step / the plan in force at that step (`planned` until the schedule's first edit): the edited plan's
    fraction, shown beside the original's."""
    initial, edits = schedule_plan(schedule)
    steps = np.asarray(steps, dtype=np.int64)
    return steps / planned_steps_at(steps, initial or planned, edits)


def edited_fraction(config: dict[str, Any], steps: np.ndarray) -> np.ndarray | None:
    """A stored run's `planned_fraction`, from the schedule its `config` keeps; None where its plan was never
    edited."""
    schedule = coordinates_from_config(config)[2]
    return None if schedule is None or not schedule.edits else planned_fraction(schedule, steps, schedule.total_steps)


def derive_tokens(values: dict[str, Any]) -> None:
    """Any two of planned steps, tokens per step and planned tokens give the third."""
    steps, per_step, total = (values.get(k) for k in ("stop_after_steps", "tokens_per_step", "planned_tokens"))
    if total is None and steps is not None and per_step is not None:
        values["planned_tokens"] = steps * per_step
    elif per_step is None and steps and total is not None:
        values["tokens_per_step"] = round(total / steps)
    elif steps is None and per_step and total is not None:
        values["stop_after_steps"] = round(total / per_step)


def coordinate_number(where: str, name: str, value: Any) -> int | float | None:
    if isinstance(value, str) and value.strip().lower() == UNKNOWN:
        if name not in MAY_BE_UNKNOWN:
            raise LadderError(
                f"{where}: '{name}' cannot be unknown: the fraction and tokens of each step need it"
            )
        return None
    if isinstance(value, bool):  # YAML's true/yes: float() would read it as 1
        raise LadderError(f"{where}: '{name}' = {value!r} is not a number; give the number")
    try:
        number = float(value.replace("_", "") if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        hint = number_hint(value.strip()) if isinstance(value, str) else ""
        raise LadderError(f"{where}: '{name}' = {str(value)[:40]!r} is not a number in range{hint}") from None
    if not math.isfinite(number) or number <= 0:
        raise LadderError(f"{where}: '{name}' = {value!r} must be a positive number")
    if name in INT_FIELDS:
        if abs(number - round(number)) > 1e-6 * max(1.0, abs(number)):
            counts = (" (a count: 1.9e8, not 190.35 in millions)" if name in ("active_params", "total_params")
                      and number < 1e6 else "")
            raise LadderError(f"{where}: '{name}' = {value!r} must be a whole number{counts}")
        if number >= 2.0**63:
            raise LadderError(f"{where}: '{name}' = {value!r} is out of range (at most 2^63-1)")
        if round(number) < 1:
            raise LadderError(f"{where}: '{name}' = {value!r} must be at least 1")
        return int(round(number))
    return number


def _check_entry(key: str, value: Any, where: str) -> None:
    """One field of a run's entry in a coordinates file (`where`: the file and the run), checked as it will be read."""
    if key == SCHEDULE:
        schedule_from(value, where)
        return
    _check_field(key, where, also=(SCHEDULE,))
    if key in LABELS and (value is None or not str(value).strip()):
        raise LadderError(f"{where}: '{key}' has no value; give one or leave the field out")
    if key == "role":
        _check_role(str(value).strip(), where)
    if key in FIELDS:
        coordinate_number(where, key, value)


def _check_field(name: str, where: str, also: tuple[str, ...] = ()) -> None:
    known = FIELDS + LABELS + also
    if name not in known:
        raise LadderError(f"{where}: unknown coordinate '{name}' (known: {', '.join(known)})")


def _unwrap(value: Any) -> Any:
    """wandb's API may return config values as ``{"value": v, "desc": ...}``."""
    if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
        return value["value"]
    return value


def schedule_from(data: Any, where: str) -> Schedule:
    """A schedule the user gives (a coordinates file, a target file); a bad one is a `LadderError`."""
    if not isinstance(data, dict):
        raise LadderError(f"{where}: schedule must be a mapping like {{peak_lr: 3e-4, total_steps: 10000, "
                          f"warmup_steps: 500, decay: cosine, min_lr_ratio: 0.1}}, got {str(data)[:60]!r}")
    return build(Schedule, data, f"{where}: schedule")


def _schedule(data: Any) -> Schedule | None:
    data = _unwrap(data)
    if not isinstance(data, dict):
        return None
    try:
        return build(Schedule, data, "schedule")
    except LadderError:
        return None  # not a schedule of this tool; the planned steps come from stop_after_steps
