"""The planner: a `Recipe` becomes one `RunConfig` per rung plus the hero.

steps = round(TPP × N_act / (batch sequences × seq len)) (optionally to a multiple of
``step_multiple``); tokens = steps × batch × seq len, with N_act the published active count. Compute shares use fit compute (3 × forward FLOPs without the
head × tokens).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder import runfiles
from ladder.config.limits import MAX_BATCH, MAX_STEPS
from ladder.config.recipe import Recipe, RunShape
from ladder.config.runconfig import EvalConfig, ResourcesConfig, RunConfig
from ladder.config.schedule import Schedule
from ladder.config.yamlio import replace_paths
from ladder.errors import LadderError
from ladder.files import atomic_path, staged_folder, write_text_atomic

MIN_RUNGS = 4
"""The fewest rungs a plan warns below: 3 sizes for the per-fraction law, one more for its backtest."""
TPP_TOL = 0.05
"""How far (relative) rounding a run's steps may move its tokens per parameter from the recipe's unremarked."""
LAUNCH_FILE = "launch.sh"
LAUNCH_HEADER = ("#!/usr/bin/env bash",
                 "# One training command per run; rungs first, then the hero. Stops at the first failure; run it")
"""The first lines of every launch script the planner writes: how it knows one of its own, to write over."""


@dataclass(frozen=True)
class Plan:
    recipe: Recipe
    rungs: tuple[RunConfig, ...]
    hero: RunConfig

    @property
    def ladder_compute_fraction(self) -> float:
        """Fit compute of all rungs over the hero's."""
        return sum(r.fit_flops for r in self.rungs) / self.hero.fit_flops

    def runs(self) -> tuple[RunConfig, ...]:
        return self.rungs + (self.hero,)

    def summary(self, run: RunConfig) -> dict[str, Any]:
        spec = run.spec
        return {
            "name": run.name,
            "role": run.role,
            "d_model": spec.d_model,
            "n_layers": spec.n_layers,
            "active_params": spec.active_params(),
            "total_params": spec.total_params(),
            "active_params_exact": spec.active_params_exact(),
            "total_params_exact": spec.total_params_exact(),
            "tokens": run.tokens,
            "steps": run.stop_after_steps,
            "batch_size": run.batch_size,
            "seq_len": run.seq_len,
            "peak_lr": run.schedule.peak_lr,
            "fit_flops": run.fit_flops,
            "flops_with_head": run.flops_with_head,
            "flops_6nd": run.flops_6nd,
            "hero_compute_share": run.fit_flops / self.hero.fit_flops,
            "schedule": run.schedule.describe(),
        }

    def notes(self) -> list[str]:
        """What to know before training: the hero's batch against the power law in size through the rungs'."""
        from fits.runs import Run, batch_far_off

        def run(c: RunConfig) -> Run:
            return Run(c.name, c.fit_flops_per_token, c.tokens_per_step, c.stop_after_steps,
                       n_params=c.spec.active_params())

        off = batch_far_off([run(r) for r in self.rungs], run(self.hero))
        if off is None:
            return []
        return [f"the hero's batch ({self.hero.tokens_per_step:,} tokens per step) is {off:.2g}× the power law in "
                f"size through the rungs' batches: the ladder measures the recipe as its rungs scale the batch, and no "
                f"law here models a batch off that trend, so the hero's prediction cannot allow for it (it says so)"]

    def warnings(self) -> list[str]:
        """What is likely a mistake: a hero whose fit compute is not above the largest rung's; a run whose steps,
        rounded to `step_multiple`, move its tokens per parameter more than `TPP_TOL` off the recipe's."""
        out = []
        off = [(r.name, r.schedule.total_steps * r.tokens_per_step / r.spec.active_params())  # as planned, before edits
               for r in (*self.rungs, self.hero)]
        off = [(name, tpp) for name, tpp in off if abs(tpp / self.recipe.tpp - 1) > TPP_TOL]
        if off:
            shown = ", ".join(f"{name} {tpp:.3g}" for name, tpp in off[:4]) + (" ..." if len(off) > 4 else "")
            out.append(f"rounding steps to step_multiple={self.recipe.step_multiple:,} moves {len(off)} run"
                       f"{'s' if len(off) > 1 else ''} more than {TPP_TOL:.0%} off tpp={self.recipe.tpp:g} ({shown} "
                       "tokens per active parameter): the per-fraction law compares runs at one ratio; lower "
                       "step_multiple, or the batch")
        out += self._shape_warnings()
        top = max(self.rungs, key=lambda r: r.fit_flops, default=None)
        if top is None or self.hero.fit_flops > top.fit_flops:
            return out
        return out + [f"the hero {self.hero.name} ({self.hero.fit_flops:.3g} FLOPs) is not above the largest rung "
                      f"{top.name} ({top.fit_flops:.3g} FLOPs): a ladder predicts a run larger than its rungs; check "
                      "the hero's size"]

    def _shape_warnings(self) -> list[str]:
        """Too few rungs for any law; rungs whose LR schedule, in fraction of the run, is not the hero's (a run of a
        few dozen steps, whose warmup and decay land a step apart): the per-fraction law leaves those out."""
        from fits.runs import SHAPE_TOL, shape_distance
        from ladder.data.runview import from_config

        out = []
        if len(self.rungs) < MIN_RUNGS:
            out.append(f"{len(self.rungs)} rung{'s' if len(self.rungs) != 1 else ''}: predict chooses its law by "
                       "holding out the largest rung and predicting it from the rest, and the per-fraction law needs 3 "
                       f"sizes, so a ladder needs {MIN_RUNGS} rungs or more; add sizes with --widths and --depths, or "
                       "the recipe's shapes")

        hero = from_config(self.hero).as_run(with_evals=False)  # its plan's LRs, before its edits
        off = [(r, shape_distance(from_config(r).as_run(with_evals=False), hero)) for r in self.rungs]
        off = [(r, d) for r, d in off if d > SHAPE_TOL]
        if off:
            one = len(off) == 1
            shown = ", ".join(f"{r.name} ({r.schedule.total_steps:,} steps: {d:.1%})" for r, d in off[:4])
            out.append(f"the LR schedule of {'rung' if one else f'{len(off)} rungs'} {shown}{' ...' if len(off) > 4 else ''} "
                       f"lies further from the hero's at the same fraction of the run than the {SHAPE_TOL:.0%} the "
                       "per-fraction law allows (a step of warmup or decay is a large part of a short run): that law "
                       f"will leave {'it' if one else 'them'} out; give the short rungs more steps (a larger tpp, or "
                       "a smaller batch_sequences)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "preset": self.recipe.name,
            "tpp": self.recipe.tpp,
            "rungs": [self.summary(r) for r in self.rungs],
            "hero": self.summary(self.hero),
            "ladder_compute_fraction": self.ladder_compute_fraction,
            "notes": self.notes(),
            "warnings": self.warnings(),
        }

    def files(self) -> tuple[str, ...]:
        """The names of the files `write` writes: one run config per run, then the launch script."""
        return tuple(f"{run.name}.yaml" for run in self.runs()) + (LAUNCH_FILE,)

    def write(self, out_dir: str | os.PathLike) -> list[Path]:
        """One YAML per run plus ``launch.sh`` with one launch command per run. A folder that holds run
        configs of another plan is refused (nothing written): `ladder train --ladder` trains every one; so is
        a config that would change under a run trained from it (checkpoints or metrics in its run folder), and
        a ``launch.sh`` the planner did not write (a script of the user's own).

        ``launch.sh`` stops at the first run that fails, so the hero never starts after a failed rung, and
        can be run again: each run is started with ``--resume``, so a finished run is skipped and an
        interrupted one continues from its last checkpoint (a run without one starts afresh)."""
        out = Path(out_dir)
        runs = self.runs()
        other = sorted({p.name for p in out.glob("*.yaml")} - {f"{run.name}.yaml" for run in runs})
        if other:
            shown = ", ".join(other[:3]) + (", ..." if len(other) > 3 else "")
            raise LadderError(f"{out} holds run configs this plan does not have ({shown}); `ladder train --ladder` "
                              "would train them too: give --out an empty folder, or remove them (nothing was written)")
        _refuse_changing_trained_runs(out, runs)
        _refuse_foreign_launch_script(out / LAUNCH_FILE)
        # Staged whole, then renamed in, the record of what was written last: a write that fails (a full disk) leaves
        # the plan there before, not the new rungs beside the old hero.
        with staged_folder(out) as stage:
            paths = [run.save(stage / f"{run.name}.yaml") for run in runs]
            lines = [*LAUNCH_HEADER,
                     "# again to continue: finished runs are skipped, interrupted ones resume from their last checkpoint.",
                     "set -euo pipefail", 'cd "$(dirname "$0")"',
                     "# The interpreter that planned this ladder (trainer_jax is installed there); on a machine",
                     "# without it, python3 on PATH.",
                     f"PYTHON={shlex.quote(sys.executable)}", '[ -x "$PYTHON" ] || PYTHON=python3']
            lines += [f'"$PYTHON" -m trainer_jax {shlex.quote(p.name)} --resume' for p in paths]
            paths.append(_write_script(stage / LAUNCH_FILE, "\n".join(lines) + "\n"))
            _refuse_edited(out, stage)
            digests = {p.name: _digest(p) for p in paths}
        write_text_atomic(out / WRITTEN_FILE, json.dumps(digests, indent=1) + "\n")
        return [out / p.name for p in paths]


WRITTEN_FILE = ".ladder-plan.json"
"""What `Plan.write` wrote in its folder, file by file (a digest of each): a file that differs from it was edited
since, and a plan written again there refuses to replace the edit."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refuse_edited(out: Path, staged: Path) -> None:
    """The plan's files in `out` that were edited since `Plan.write` wrote them (`WRITTEN_FILE`) are refused, nothing
    written: planning again there would replace a hand edit (a peak LR, a line of launch.sh) without a word. A file
    that is already what this plan writes (`staged`: its files) is no edit (a write stopped before its record)."""
    try:
        written = json.loads((out / WRITTEN_FILE).read_text())
    except (OSError, ValueError):
        written = {}  # no record (a folder made by hand, or a plan's configs copied without it)
    written = written if isinstance(written, dict) else {}
    mine = [p.name for p in staged.glob("*.yaml") if (out / p.name).is_file() and p.name not in written
            and _digest(out / p.name) != _digest(p)]
    if mine:  # a config this plan writes, of that name, that no plan wrote here: the user's (a copy, a hand edit)
        shown = ", ".join(sorted(mine)[:3]) + (", ..." if len(mine) > 3 else "")
        one = len(mine) == 1
        it, they = ("it", "it differs") if one else ("them", "they differ")
        raise LadderError(f"{out}: {shown}: no record that `ladder plan` wrote {it} there ({WRITTEN_FILE} is missing "
                          f"or does not list {it}: configs copied without it, or a folder planned by an earlier "
                          f"version), and {they} from what this plan writes; planning would replace {it}: give --out "
                          f"another folder, or move {it} away (nothing was written)")
    edited = [name for name, digest in written.items() if isinstance(name, str) and "/" not in name
              and (out / name).is_file() and _digest(out / name) != digest
              and not ((staged / name).is_file() and _digest(staged / name) == _digest(out / name))]
    if edited:
        shown = ", ".join(edited[:3]) + (", ..." if len(edited) > 3 else "")
        raise LadderError(f"{out}: {shown} {'was' if len(edited) == 1 else 'were'} edited since `ladder plan` wrote "
                          f"{'it' if len(edited) == 1 else 'them'}; planning again would replace the edit{'s' if len(edited) > 1 else ''}: "
                          "give --out another folder, or move the edited files away (nothing was written)")


def _refuse_foreign_launch_script(path: Path) -> None:
    """A ``launch.sh`` in the way that does not open with `LAUNCH_HEADER` is the user's own: writing the plan
    would replace it without a word (as a stray run config is refused, so is it)."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        with path.open() as f:
            head = tuple(f.readline().rstrip("\n") for _ in LAUNCH_HEADER)
    except (OSError, UnicodeDecodeError):
        head = ()
    if head != LAUNCH_HEADER:
        raise LadderError(f"{path}: a launch script `ladder plan` did not write (it does not start with the plan's "
                          f"header); writing the plan would replace it: move it away, or give --out another folder "
                          "(nothing was written)")


def _write_script(path: Path, text: str) -> Path:
    """`text` as an executable script at `path`, atomically: executable wherever it is readable (the umask kept,
    0755 under the usual 022), so the plan's ``./launch.sh`` runs as its README says."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
        mode = tmp.stat().st_mode
        tmp.chmod(mode | (mode & 0o444) >> 2)
    return path


def _refuse_changing_trained_runs(out: Path, runs: tuple[RunConfig, ...]) -> None:
    """A config that would change while a run trained from it has left checkpoints or metrics: the
    trainer would refuse to resume that run from the new config, and its record would be lost."""
    for run in runs:
        path = out / f"{run.name}.yaml"
        if not path.is_file():
            continue
        try:
            old: RunConfig | None = RunConfig.load(path, check_coordinates=False)
        except LadderError:
            old = None
        if old == run:
            continue
        for cfg in (old, run):
            run_dir = cfg.resolved_run_dir(base=out) if cfg is not None else None
            if run_dir is not None and _trained(run_dir):
                raise LadderError(f"{path} would change, but the run {run.name} was trained from it ({run_dir} holds "
                                  f"its checkpoints or metrics): give --out another folder, or remove {run_dir} "
                                  "(nothing was written)")


def _trained(run_dir: Path) -> bool:
    checkpoints = run_dir / runfiles.CHECKPOINT_DIR
    return (run_dir / runfiles.METRICS_FILE).is_file() or (checkpoints.is_dir() and any(checkpoints.iterdir()))


def with_resources(p: Plan, per_run: ResourcesConfig, hero_hosts: int = 1) -> Plan:
    """The plan with every run asking a cluster for `per_run` (per process); the hero spreads over
    `hero_hosts` hosts, one trainer process and one `per_run` on each."""
    hero = dataclasses.replace(per_run, hosts=hero_hosts)
    return dataclasses.replace(
        p, rungs=tuple(r.replace(resources=per_run) for r in p.rungs), hero=p.hero.replace(resources=hero),
    )


def plan(recipe: Recipe) -> Plan:
    rungs = tuple(_shaped(recipe, shape, "rung", f"rungs[{i}]") for i, shape in enumerate(recipe.rungs))
    hero = _shaped(recipe, recipe.hero, "hero", "hero")
    names = [r.name for r in rungs + (hero,)]
    where = [f"rungs[{i}]" for i in range(len(rungs))] + ["hero"]
    shapes = [*recipe.rungs, recipe.hero]
    for j, name in enumerate(names):
        if name in names[:j]:
            i = names.index(name)
            same = shapes[i] == shapes[j]
            raise LadderError(
                f"{where[i]} and {where[j]} of the recipe plan runs of one name, {name} ("
                + (f"the same shape, d_model {shapes[i].d_model} and {shapes[i].n_layers} layers" if same else
                   f"d_model {shapes[i].d_model} × {shapes[i].n_layers} layers and {shapes[j].d_model} × "
                   f"{shapes[j].n_layers}, of one size by the name's rounding")
                + "): give each its own size, or leave one out")
    return Plan(recipe, rungs, hero)


def _shaped(recipe: Recipe, shape: RunShape, role: str, where: str) -> RunConfig:
    """`_run`, its error naming the recipe's entry it came from ("rungs[2] (d_model 50, n_layers 3): ...")."""
    try:
        return _run(recipe, shape, role)
    except LadderError as exc:
        raise LadderError(f"recipe {recipe.name!r}, {where} (d_model {shape.d_model}, n_layers {shape.n_layers}): "
                          f"{exc}") from None


def _run(recipe: Recipe, shape: RunShape, role: str) -> RunConfig:
    spec = recipe.arch.spec(shape.d_model, shape.n_layers)
    batch = recipe.batch_sequences * shape.batch_multiplier
    if not 0 < batch <= MAX_BATCH:
        raise LadderError(
            f"batch {recipe.batch_sequences} × multiplier {shape.batch_multiplier} = {batch} sequences: "
            f"must be between 1 and {MAX_BATCH:,}"
        )
    tokens_per_step = batch * recipe.seq_len
    m = recipe.step_multiple
    exact_steps = recipe.tpp * spec.active_params() / tokens_per_step
    if not exact_steps <= MAX_STEPS:
        raise LadderError(
            f"{spec.name()} would train {exact_steps:.3g} steps at tpp={recipe.tpp:g} with {tokens_per_step} "
            f"tokens per step, beyond the {MAX_STEPS:.0e} steps a plan allows: lower tpp or the model size"
        )
    steps = m * round(exact_steps / m)
    if steps < 10 and round(exact_steps) >= 10:
        raise LadderError(
            f"{spec.name()} would train {exact_steps:,.0f} steps, but rounded to a multiple of "
            f"step_multiple={m:,} that is {steps}: lower step_multiple"
        )
    if steps < 10:
        raise LadderError(
            f"{spec.name()} plans only {steps} steps at tpp={recipe.tpp} with {tokens_per_step} tokens "
            "per step: raise tpp or lower the batch"
        )
    rule = recipe.schedule
    peak = recipe.lr.peak_lr(steps * tokens_per_step, shape.d_model, tokens_per_step)
    schedule = Schedule(
        peak_lr=peak,
        total_steps=steps,
        warmup_steps=int(round(rule.warmup_fraction * steps)),
        decay=rule.decay,
        min_lr_ratio=rule.min_lr_ratio,
        cooldown_steps=max(1, int(round(rule.cooldown_fraction * steps))) if rule.decay == "wsd" else 0,
        cooldown_shape=rule.cooldown_shape or "linear",
        seq_phases=rule.seq_phases,
    )
    if role == "hero":
        for edit in recipe.hero_edits:
            at = int(round(edit.at_fraction * steps))
            to = int(round(edit.to_fraction * steps))
            if edit.kind == "shorten":
                schedule = schedule.shorten(at, to)
            else:
                schedule = schedule.early_cooldown(at, to - at, edit.shape)
    name = spec.name() if role == "rung" else f"hero-{spec.name()}"
    return RunConfig(
        name=name,
        spec=spec,
        seq_len=recipe.seq_len,
        batch_size=batch,
        schedule=schedule,
        optimizer=recipe.optimizer,
        moe=recipe.moe,
        data=recipe.data,
        eval=EvalConfig(every_fraction=recipe.eval_every_fraction),
        checkpoint=recipe.checkpoint,
        logging=recipe.logging,
        seed=recipe.seed,
        group=recipe.name,
        role=role,
        tpp=recipe.tpp,
        run_dir=f"runs/{name}",
    )


def override(
    recipe: Recipe,
    *,
    tpp: float | None = None,
    widths: list[int] | None = None,
    depths: list[int] | None = None,
    batch_multipliers: list[int] | None = None,
    seq_len: int | None = None,
    sets: list[str] | None = None,
) -> Recipe:
    """Apply command-line overrides: shortcuts for common fields, then ``--set path=value``."""
    changes: dict[str, Any] = {}
    if tpp is not None:
        changes["tpp"] = tpp
    if seq_len is not None:
        changes["seq_len"] = seq_len
    if widths is not None or depths is not None or batch_multipliers is not None:
        old = recipe.rungs
        w = widths if widths is not None else [r.d_model for r in old]
        d = depths if depths is not None else [r.n_layers for r in old]
        if len(w) != len(d):
            rungs = f"{len(w)} rung{'' if len(w) == 1 else 's'}"  # what was given, and what the recipe had
            wide = f"--widths gives {rungs}" if widths is not None else f"the recipe has {rungs}"
            deep = f"--depths gives {len(d)}" if depths is not None else f"the recipe has {len(d)} depths"
            flag = " (--depths)" if depths is None else " (--widths)" if widths is None else ""
            raise LadderError(f"{wide} but {deep}: give one depth per width{flag}")
        for flag, values in (("--widths", widths), ("--depths", depths), ("--racks", batch_multipliers)):
            bad = [v for v in values or [] if v <= 0]
            if bad:
                raise LadderError(f"{flag} {','.join(map(str, values))}: {bad[0]} is not positive; give positive "
                                  "whole numbers")
        m = batch_multipliers or [old[i].batch_multiplier if i < len(old) else 1 for i in range(len(w))]
        if len(m) != len(w):
            raise LadderError(f"--racks gives {len(m)} value{'' if len(m) == 1 else 's'} for {len(w)} "
                              f"rung{'' if len(w) == 1 else 's'}: give one batch multiplier per rung")
        changes["rungs"] = tuple(RunShape(a, b, c) for a, b, c in zip(w, d, m))
    recipe = dataclasses.replace(recipe, **changes)
    pairs = []
    for item in sets or []:
        if "=" not in item:
            raise LadderError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set arch.n_experts=64")
        key, value = item.split("=", 1)
        pairs.append((key.strip(), value.strip()))
    shortcuts = {"tpp": ("--tpp", tpp), "seq_len": ("--seq-len", seq_len), "rungs": ("--widths/--depths/--racks",
                 widths if widths is not None else depths if depths is not None else batch_multipliers)}
    for key, _ in pairs:
        flag, given = shortcuts.get(key.split(".")[0], ("", None))
        if given is not None:
            raise LadderError(f"--set {key}=... and {flag} both set {key.split('.')[0]}; give one of them")
    return replace_paths(recipe, pairs) if pairs else recipe
