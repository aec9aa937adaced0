"""`ladder plan` and `ladder spec`: the planner and the parameter / FLOP accounting on the command line."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from ladder.cli.app import Format, command, console, parse_int_list, print_json, warn
from ladder.config.limits import MAX_HOSTS, MAX_PER_PROCESS, MAX_SEQ_LEN
from ladder.config.plan import Plan, override, plan, with_resources
from ladder.config.recipe import load_recipe, preset_names
from ladder.config.runconfig import ResourcesConfig, RunConfig, recipe_mark, refuse_prediction, target_mark
from ladder.config.spec import ModelSpec, format_count
from ladder.config.yamlio import build, load_yaml
from ladder.errors import LadderError
from ladder.outpaths import out_dir


@command("plan")
def plan_command(
    recipe: str = typer.Argument(
        "marin-moe-hero",
        help=f"A preset ({', '.join(preset_names())}) or the path of a recipe YAML file.",
    ),
    tpp: float | None = typer.Option(None, "--tpp", help="Tokens per active parameter (default: the recipe's, 791 for the published one)."),
    widths: list[str] = typer.Option([], "--widths", help="Rung widths (d_model), comma-separated, e.g. 768,1024,1536 (or the option once per width)."),
    depths: list[str] = typer.Option([], "--depths", help="Rung depths (layers), one per width, comma-separated (or the option once per depth)."),
    racks: list[str] = typer.Option([], "--racks", help="Batch multipliers, one per rung (batch = batch_sequences × racks), comma-separated (or the option once per rung)."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Tokens per sequence."),
    sets: list[str] = typer.Option([], "--set", help="Override any recipe field: --set arch.n_experts=64 (repeatable)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table (rich) or json (one object on stdout)."),
    out: Path | None = typer.Option(None, "--out", help="Write one RunConfig YAML per run and launch.sh here."),
    cpus_per_run: float = typer.Option(1.0, "--cpus-per-run", help="CPU cores each trainer process asks of a cluster (`ladder train --ray`)."),
    gpus_per_run: float = typer.Option(0.0, "--gpus-per-run", help="GPUs each trainer process asks of a cluster (per host for the hero)."),
    resource_per_run: list[str] = typer.Option(
        [], "--resource-per-run", help="Another cluster resource per process, NAME=AMOUNT, e.g. TPU=4 (repeatable)."),
    hero_hosts: int = typer.Option(1, "--hero-hosts", help="Hosts the hero trains on: one trainer process per host, joined by jax.distributed, when `ladder train --ladder DIR --ray` starts it (launch.sh and a plain `ladder train` start one process)."),
) -> None:
    """Plan a ladder: rung and hero run configs from a recipe, with sizes, tokens, LR and compute.

    Steps = TPP × active params / tokens per step, rounded to the nearest multiple of the recipe's
    step_multiple (1: whole steps; --set step_multiple=N changes it). Compute is fit compute
    (3 × forward FLOPs per token without the output head × tokens); 6·N_act·D is in the JSON.

    Planning again into an --out folder replaces the plan's own files there; a config or launch.sh
    edited since it was written, a config a run was trained from, run configs of another plan, a YAML
    at a config's name that no plan wrote there and a launch.sh the plan did not write are refused
    (nothing is written); other files are left alone.
    """
    _check_hero_hosts(hero_hosts)
    if out is not None:
        out_dir(out)
    base = load_recipe(recipe)
    try:
        r = override(
            base,
            tpp=tpp,
            widths=parse_int_list(widths, "--widths"),
            depths=parse_int_list(depths, "--depths"),
            batch_multipliers=parse_int_list(racks, "--racks"),
            seq_len=seq_len,
            sets=sets,
        )
    except LadderError as exc:  # the recipe's check names its field: named by the option given for it
        raise LadderError(_by_option(str(exc), {"tpp": ("--tpp", tpp), "seq_len": ("--seq-len", seq_len)})) from None
    try:
        planned = plan(r)
    except LadderError as exc:  # a shape the recipe gives ("recipe 'x', rungs[0] (d_model 768, ...)"): its file named
        raise LadderError(f"{recipe}: {exc}" if recipe not in preset_names() else str(exc)) from None
    p = with_resources(planned, _resources(cpus_per_run, gpus_per_run, resource_per_run, hero_hosts), hero_hosts)
    if out is not None:
        out_dir(out, files=p.files())  # a folder where a file goes: refused before any file is written
    written = p.write(out) if out else []
    for warning in p.warnings():
        warn(warning)
    if fmt is Format.json:
        print_json(p.to_json())
        return
    console.print(plan_table(p))
    console.print(
        f"Ladder fit compute: {sum(x.fit_flops for x in p.rungs):.3g} FLOPs = "
        f"[bold]{p.ladder_compute_fraction:.2%}[/] of the hero's {p.hero.fit_flops:.3g} "
        f"(with head: {p.hero.flops_with_head:.3g}; 6·N_act·D: {p.hero.flops_6nd:.3g})", markup=True
    )
    for note in p.notes():
        console.print(f"note: {note}")
    if written:
        console.print(f"Wrote {len(written)} files to {out}/ (one RunConfig per run, launch.sh)")


def _by_option(message: str, options: dict[str, tuple[str, object]]) -> str:
    """A recipe's refusal of a field (``seq_len=0 must be ...``) headed by the option that gave the value."""
    for field, (flag, value) in options.items():
        if value is not None and message.startswith(f"{field}="):
            return f"{flag} {value:g}: {message}" if isinstance(value, float) else f"{flag} {value}: {message}"
    return message


def _check_hero_hosts(hosts: int) -> None:
    """Refuse a host count no cluster has: the hero's config would hold it, and later commands refuse it."""
    if hosts < 1:
        raise LadderError(f"--hero-hosts {hosts}: give 1 or more hosts")
    if hosts > MAX_HOSTS:
        raise LadderError(f"--hero-hosts {hosts}: at most {MAX_HOSTS:,} hosts; give the hosts the hero trains on")


def _resources(cpus: float, gpus: float, custom: list[str], hero_hosts: int) -> ResourcesConfig:
    """What each trainer process asks of a cluster; refused where Ray could not place the hero's processes."""
    for option, amount, what in (("--cpus-per-run", cpus, "CPU cores"), ("--gpus-per-run", gpus, "GPUs")):
        if not (math.isfinite(amount) and 0 <= amount <= MAX_PER_PROCESS):
            raise LadderError(f"{option} {amount:g}: give 0 to {MAX_PER_PROCESS:,} {what}")
    amounts = {}
    for item in custom:
        name, _, amount = item.partition("=")
        try:
            amounts[name.strip()] = float(amount)
        except ValueError:
            raise LadderError(f"--resource-per-run {item!r}: expected NAME=AMOUNT, e.g. TPU=4") from None
        if not name.strip():
            raise LadderError(f"--resource-per-run {item!r}: the resource needs a name, e.g. TPU=4")
    per_run = ResourcesConfig(cpus=cpus, gpus=gpus, custom=amounts)
    if hero_hosts > 1 and per_run.asks_nothing:
        raise LadderError(f"--cpus-per-run {cpus:g} --hero-hosts {hero_hosts}: the hero's processes would ask for no "
                          "resource, and Ray places one on each host by what it asks for; give --cpus-per-run 1 (or a "
                          "--gpus-per-run or --resource-per-run above 0)")
    return per_run


def plan_table(p: Plan) -> Table:
    hero = p.hero.schedule
    edited = f"{p.hero.name}: {hero.describe()}" if hero.edits else None  # its steps and tokens are the cut plan's
    t = Table(title=f"Ladder plan: {p.recipe.name}, {p.recipe.tpp:g} tokens per active parameter", caption=edited)
    for col in ("run", "width", "depth", "active", "total", "tokens", "steps", "batch", "peak LR", "fit compute (FLOPs)", "of hero"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for run in p.runs():
        s = p.summary(run)
        t.add_row(
            s["name"],
            str(s["d_model"]),
            str(s["n_layers"]),
            format_count(s["active_params"]),
            format_count(s["total_params"]),
            format_count(s["tokens"]),
            f"{s['steps']:,}",
            f"{s['batch_size']:,}×{s['seq_len']}",
            f"{s['peak_lr']:.3g}",
            f"{s['fit_flops']:.3g}",
            f"{s['hero_compute_share']:.3%}",
            end_section=run is p.rungs[-1],
        )
    return t


@command("spec")
def spec_command(
    config: Path = typer.Argument(..., help="A RunConfig YAML (from `ladder plan --out`) or a ModelSpec YAML."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Sequence length for FLOPs and for a run's fit compute C "
                                  "(default: the run's, averaged over its seq-len phases; 4096 for a ModelSpec)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json."),
) -> None:
    """Parameter and FLOP breakdown of one model, in the published and the exact conventions."""
    from ladder.config.recipe import preset_names

    if not config.exists() and str(config) in preset_names():
        raise LadderError(f"{config}: a preset is a recipe, which `ladder plan {config}` plans; `ladder spec` reads one "
                          f"model: a run config it writes (`ladder plan {config} --out DIR`, then DIR/NAME.yaml)")
    data = load_yaml(config)
    refuse_prediction(config, data, "a run config or a ModelSpec")
    mark = recipe_mark(data)
    if mark:
        raise LadderError(f"{config}: a recipe (it has {mark}), which `ladder plan {config}` plans; `ladder spec` reads "
                          "one model: a run config the plan writes, or a ModelSpec")
    mark = target_mark(data)
    if mark and "spec" not in data:
        raise LadderError(f"{config}: a target file (a run's coordinates: it has {mark}), which holds no model to "
                          "break down; `ladder spec` reads a run config the plan writes, or a ModelSpec")
    run = RunConfig.from_dict(data, where=str(config), check_coordinates=True) if _run_config(data) else None
    spec = run.spec if run else build(ModelSpec, data, where=str(config))
    seq = seq_len if seq_len is not None else (run.seq_len if run else 4096)
    if not 0 < seq <= MAX_SEQ_LEN:
        raise LadderError(f"--seq-len {seq} must be between 1 and {MAX_SEQ_LEN:,} tokens")
    groups = {
        (kind, conv): spec.param_breakdown(kind, conv)
        for kind in ("active", "total")
        for conv in ("published", "exact")
    }
    flops = spec.flops_breakdown(seq)
    # Per token: the run's own (averaged over its seq-len phases), or all at `seq` when --seq-len is given.
    phases = run is not None and seq_len is None and bool(run.schedule.seq_phases)
    fwd, fwd_head = ((run.forward_flops_per_token(), run.forward_flops_per_token(include_head=True))
                     if run and seq_len is None else
                     (spec.forward_flops_per_token(seq), spec.forward_flops_per_token(seq, include_head=True)))
    if fmt is Format.json:
        out = {
            "name": spec.name(),
            "seq_len": seq,
            "active_params": spec.active_params(),
            "total_params": spec.total_params(),
            "active_params_exact": spec.active_params_exact(),
            "total_params_exact": spec.total_params_exact(),
            "params": {f"{k}_{c}": v for (k, c), v in groups.items()},
            "forward_flops_per_token": flops,
            "fit_flops_per_token": 3 * fwd,
        }
        if phases:  # seq_len and the breakdown are of the first phase; fit_flops_per_token is averaged over them all
            out["seq_phases"] = [{"start_fraction": 0.0, "seq_len": seq}] + [
                {"start_fraction": p.start_fraction, "seq_len": p.seq_len} for p in run.schedule.seq_phases]
        if run:
            out |= {"tokens": run.tokens, "fit_flops": 3 * fwd * run.tokens, "flops_with_head": 3 * fwd_head * run.tokens,
                    "flops_6nd": run.flops_6nd}
        print_json(out)
        return
    t = Table(title=f"{spec.name()} parameters (published: K,V at the larger KV head count, no norms)")
    t.add_column("group")
    for kind, conv in groups:
        t.add_column(f"{kind} {conv}", justify="right")
    names = list(groups[("total", "exact")])
    for g in names:
        t.add_row(g, *(f"{groups[k].get(g, 0):,}" for k in groups))
    t.add_row("sum", *(Text(f"{sum(v.values()):,}", style="bold") for v in groups.values()), end_section=True)
    console.print(t)
    f = Table(title=f"Forward FLOPs per token at seq len {seq}")
    f.add_column("group")
    f.add_column("FLOPs", justify="right")
    for g, v in flops.items():
        f.add_row(g, f"{v:,.0f}")
    f.add_row("forward without head", Text(f"{spec.forward_flops_per_token(seq):,.0f}", style="bold"), end_section=True)
    f.add_row("fit compute per token (3×" + (", averaged over the seq-len phases)" if phases else ")"), f"{3 * fwd:,.0f}")
    f.add_row("6·N_act", f"{6 * spec.active_params():,}")
    console.print(f)
    if run:
        at = f" at seq len {seq}" if seq_len is not None else ""
        console.print(
            f"{run.name}: {run.tokens:,} tokens, fit compute C{at} = {3 * fwd * run.tokens:.4g} FLOPs "
            f"(with head {3 * fwd_head * run.tokens:.4g}; 6·N_act·D {run.flops_6nd:.4g})"
        )


RUN_CONFIG_KEYS = frozenset(f.name for f in dataclasses.fields(RunConfig)) | {"coordinates"}
"""Keys of a run config (a ModelSpec has none of them)."""


def _run_config(data: dict) -> bool:
    """Whether parsed YAML is a run config: it has ``spec``, or any other key of one (name, schedule, ...), so
    one whose ``spec:`` block is missing is told so, as `ladder train` does, not that ``name`` is no model field."""
    return bool(RUN_CONFIG_KEYS & set(data))
