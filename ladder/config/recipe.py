"""`Recipe`: the rules a ladder is built from (architecture, shapes, token ratio, batch, LR, schedule).

Presets ship as YAML files in ``ladder/presets``; a user's own recipe is a YAML file of the same
form. Every field can be overridden from the command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from ladder.config.limits import (
    MAX_BATCH,
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MAX_VOCAB,
    MAX_WIDTH,
    MIN_EVAL_FRACTION,
    check_seed,
    in_range,
    positive,
)
from ladder.config.runconfig import (
    CheckpointConfig,
    DataConfig,
    LoggingConfig,
    MoELossConfig,
    OptimizerConfig,
    refuse_prediction,
)
from ladder.config.schedule import Decay, SeqPhase, Shape
from ladder.config.spec import ModelSpec
from ladder.config.yamlio import build, load_yaml
from ladder.errors import LadderError


@dataclass(frozen=True)
class ArchRules:
    """How a (width, depth) pair becomes a `ModelSpec`. Ratios are of d_model."""

    vocab_size: int
    head_dim: int = 128
    """heads = d_model / head_dim, which must divide evenly."""
    kv_local_divisor: int = 4
    """KV heads on sliding-window layers = heads // this (at least 1)."""
    kv_global_divisor: int = 8
    """KV heads on global layers = heads // this (at least 1)."""
    window: int | None = 2048
    global_every: int = 4
    n_experts: int = 384
    """Routed experts per MoE layer; 0 builds a dense model."""
    top_k: int = 8
    expert_width_ratio: float = 0.5
    latent_ratio: float | None = 0.5
    """Route in a latent space of this width; null routes on the full width."""
    n_shared_experts: int = 2
    shared_width_ratio: float = 0.5
    dense_layers: tuple[int, ...] = ()
    dense_width_ratio: float = 4.0
    capacity_factor: float = 1.15
    router: Literal["softmax", "sigmoid"] = "softmax"
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for name, hi in (("vocab_size", MAX_VOCAB), ("head_dim", MAX_WIDTH), ("kv_local_divisor", MAX_HEADS),
                         ("kv_global_divisor", MAX_HEADS), ("global_every", MAX_LAYERS)):
            positive(f"arch.{name}", getattr(self, name), hi)
        if self.head_dim % 2:
            raise LadderError(f"arch.head_dim={self.head_dim} must be even for rotary embeddings (they turn features "
                              "in pairs); give an even head size, e.g. 16")
        if self.window is not None:
            positive("arch.window", self.window, MAX_SEQ_LEN)
        in_range("arch.n_experts", self.n_experts, 0, MAX_EXPERTS, "0 builds a dense model")
        if self.n_experts == 0 and self.top_k != 0:
            raise LadderError(
                f"arch.n_experts=0 with arch.top_k={self.top_k}: a token cannot use {self.top_k} of 0 experts; "
                "for a dense model set arch.top_k=0 too, for an MoE give n_experts >= top_k"
            )
        if self.n_experts and not 1 <= self.top_k <= self.n_experts:
            why = ("a token must use at least one expert (for a dense model set arch.n_experts=0 too)"
                   if self.top_k < 1 else "a token cannot use more experts than the layer has")
            raise LadderError(f"arch.top_k={self.top_k} must be between 1 and n_experts={self.n_experts}: {why}")
        in_range("arch.n_shared_experts", self.n_shared_experts, 0, MAX_EXPERTS)
        for name in ("expert_width_ratio", "shared_width_ratio", "dense_width_ratio", "capacity_factor"):
            positive(f"arch.{name}", getattr(self, name), 1e3)
        if self.latent_ratio is not None:
            positive("arch.latent_ratio", self.latent_ratio, 1.0, "null routes on the full width")
        if any(i < 0 for i in self.dense_layers):
            raise LadderError(f"arch.dense_layers={list(self.dense_layers)} must be layer numbers from 0")

    def spec(self, d_model: int, n_layers: int) -> ModelSpec:
        _check_shape(d_model, n_layers)
        if d_model % self.head_dim:
            raise LadderError(
                f"width {d_model} is not divisible by the head size {self.head_dim}: "
                f"use a multiple of {self.head_dim}"
            )
        heads = d_model // self.head_dim
        kv_local = max(1, heads // self.kv_local_divisor)
        kv_global = max(1, heads // self.kv_global_divisor)
        # The published rule gives kv counts that may not divide the heads (e.g. 6 heads // 4);
        # grouped-query attention needs them to, so round down to a divisor.
        kv_local = max(k for k in range(1, kv_local + 1) if heads % k == 0)
        kv_global = max(k for k in range(1, kv_global + 1) if heads % k == 0)
        moe = self.n_experts > 0
        return ModelSpec(
            d_model=d_model,
            n_layers=n_layers,
            n_heads=heads,
            head_dim=self.head_dim,
            n_kv_heads_local=kv_local,
            n_kv_heads_global=kv_global,
            vocab_size=self.vocab_size,
            window=self.window,
            global_every=self.global_every,
            n_experts=self.n_experts,
            top_k=self.top_k if moe else 0,
            expert_width=_width(self.expert_width_ratio, d_model) if moe else 0,
            n_shared_experts=self.n_shared_experts if moe else 0,
            shared_width=_width(self.shared_width_ratio, d_model) if moe else 0,
            latent_dim=_width(self.latent_ratio, d_model) if moe and self.latent_ratio else None,
            dense_layers=tuple(i for i in self.dense_layers if i < n_layers),
            dense_width=_width(self.dense_width_ratio, d_model),
            capacity_factor=self.capacity_factor,
            router=self.router,
            tied_embeddings=self.tied_embeddings,
        )


def _check_shape(d_model: int, n_layers: int) -> None:
    if d_model <= 0 or n_layers <= 0:
        raise LadderError(f"width {d_model} and depth {n_layers} must be positive")
    if d_model > MAX_WIDTH or n_layers > MAX_LAYERS:
        raise LadderError(f"width {d_model} and depth {n_layers}: at most {MAX_WIDTH:,} wide and {MAX_LAYERS:,} deep")


def _width(ratio: float, d_model: int) -> int:
    return max(1, int(round(ratio * d_model)))


@dataclass(frozen=True)
class RunShape:
    """One model of the ladder: width, depth and its batch multiplier ('racks')."""

    d_model: int
    n_layers: int
    batch_multiplier: int = 1
    """Batch in sequences = recipe.batch_sequences × this."""

    def __post_init__(self) -> None:
        _check_shape(self.d_model, self.n_layers)
        positive("batch multiplier", self.batch_multiplier, MAX_BATCH)


@dataclass(frozen=True)
class LRRule:
    """Peak LR = coefficient · T^tokens_exponent · d^width_exponent · (tokens per batch)^batch_exponent.

    T is the run's planned tokens, d its width.
    """

    coefficient: float
    tokens_exponent: float = 0.0
    width_exponent: float = 0.0
    batch_exponent: float = 0.0

    def __post_init__(self) -> None:
        positive("lr.coefficient", self.coefficient)
        for name in ("tokens_exponent", "width_exponent", "batch_exponent"):
            in_range(f"lr.{name}", getattr(self, name), -10.0, 10.0)

    def peak_lr(self, tokens: float, d_model: int, batch_tokens: float) -> float:
        return (
            self.coefficient
            * tokens**self.tokens_exponent
            * d_model**self.width_exponent
            * batch_tokens**self.batch_exponent
        )


@dataclass(frozen=True)
class ScheduleRule:
    """Schedule shape shared by every run of the ladder; steps follow from each run's length."""

    decay: Decay = "linear"
    warmup_fraction: float = 0.01
    min_lr_ratio: float = 0.05
    cooldown_fraction: float | None = None
    """WSD only: the final cooldown's share of the run (0.2 where not given)."""
    cooldown_shape: Shape | None = None
    """WSD only: the final cooldown's shape (linear where not given)."""
    seq_phases: tuple[SeqPhase, ...] = ()

    def __post_init__(self) -> None:
        in_range("schedule.warmup_fraction", self.warmup_fraction, 0.0, 0.99)
        in_range("schedule.min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        if self.decay != "wsd":  # a cooldown given for another decay was planned without one, without a word
            given = [f"schedule.{k}={v}" for k, v in (("cooldown_fraction", self.cooldown_fraction),
                                                       ("cooldown_shape", self.cooldown_shape)) if v is not None]
            if given:
                raise LadderError(f"{given[0]} is read with decay: wsd only (this recipe's decay is {self.decay}); "
                                  "leave it out, or give decay: wsd")
            return
        object.__setattr__(self, "cooldown_fraction", 0.2 if self.cooldown_fraction is None else self.cooldown_fraction)
        object.__setattr__(self, "cooldown_shape", self.cooldown_shape or "linear")
        in_range("schedule.cooldown_fraction", self.cooldown_fraction, 0.0, 1.0)
        if self.cooldown_fraction <= 0:  # the planner would make it one step, without a word
            raise LadderError(f"schedule.cooldown_fraction={self.cooldown_fraction:g}: a WSD schedule cools down at "
                              "its end; give its share of the run, e.g. 0.2 (or another decay for none)")


@dataclass(frozen=True)
class PlannedEdit:
    """A schedule edit planned for the hero, placed by fractions of its planned steps.

    shorten: at `at_fraction`, cut the horizon to `to_fraction` of the plan and re-aim the decay.
    cooldown: at `at_fraction`, branch a cooldown lasting `to_fraction - at_fraction` of the plan.
    """

    kind: Literal["shorten", "cooldown"]
    at_fraction: float
    to_fraction: float
    shape: Shape = "linear"

    def __post_init__(self) -> None:
        if not 0.0 < self.at_fraction < self.to_fraction <= 1.0:
            raise LadderError(
                f"hero edit: need 0 < at_fraction ({self.at_fraction}) < to_fraction ({self.to_fraction}) <= 1"
            )


@dataclass(frozen=True)
class Recipe:
    name: str
    arch: ArchRules
    rungs: tuple[RunShape, ...]
    hero: RunShape
    lr: LRRule
    description: str = ""
    tpp: float = 791.0
    """Planned tokens per active parameter (published convention), shared by every run."""
    seq_len: int = 4096
    batch_sequences: int = 1024
    """Sequences per batch for a batch multiplier of 1."""
    step_multiple: int = 1
    """Round planned steps to a multiple of this (20 puts an eval every 5% exactly on a step)."""
    schedule: ScheduleRule = field(default_factory=ScheduleRule)
    hero_edits: tuple[PlannedEdit, ...] = ()
    """Schedule edits the hero makes and the rungs do not (e.g. a shortened horizon)."""
    eval_every_fraction: float = 0.05
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    moe: MoELossConfig = field(default_factory=MoELossConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    seed: int = 0

    def __post_init__(self) -> None:
        if not str(self.name).strip():  # "" is the group of runs that have none (--group '')
            raise LadderError("name: empty; the recipe's name is its runs' group: give one, e.g. name: my-ladder")
        positive("tpp", self.tpp, 1e9, "tokens per active parameter, e.g. 791")
        if not self.rungs:
            raise LadderError("a recipe needs at least one rung")
        positive("seq_len", self.seq_len, MAX_SEQ_LEN)
        positive("batch_sequences", self.batch_sequences, MAX_BATCH)
        in_range("eval_every_fraction", self.eval_every_fraction, MIN_EVAL_FRACTION, 1.0, "e.g. 0.05 for every 5%")
        in_range("step_multiple", self.step_multiple, 1, MAX_STEPS)
        check_seed("seed", self.seed)
        _refuse_lengthening_edits(self.hero_edits)


def _refuse_lengthening_edits(edits: tuple[PlannedEdit, ...]) -> None:
    """Refuse a hero edit that ends past the horizon the edits before it leave (a shorten to 0.8 of the plan, then
    a cooldown to 0.9): an edit only cuts the run, and a longer one is planned with a larger tpp. Said here in the
    recipe's fractions; `Schedule` refuses the same in steps."""
    horizon = 1.0
    for i, edit in enumerate(edits):
        if edit.to_fraction > horizon:
            raise LadderError(
                f"hero_edits[{i}]: a {edit.kind} to to_fraction={edit.to_fraction} ends past {horizon} of the plan, "
                f"where the edits before it end the run; an edit only cuts the run: give to_fraction at most {horizon}"
            )
        horizon = edit.to_fraction


PRESETS_PACKAGE = "ladder.config.presets"


def preset_names() -> list[str]:
    files = resources.files(PRESETS_PACKAGE).iterdir()
    return sorted(f.name[: -len(".yaml")] for f in files if f.name.endswith(".yaml"))


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """A shipped preset by name, or a recipe YAML file by path."""
    text = str(name_or_path)
    path = Path(text)
    if path.is_dir() and not text.endswith((".yaml", ".yml")):  # a plan's folder; dir.yaml: load_yaml says
        raise LadderError(f"{path}: is a folder; give a recipe .yaml file or a preset ({', '.join(preset_names())})")
    if text.endswith((".yaml", ".yml")) or path.is_file():
        data = load_yaml(path)
        refuse_prediction(path, data, "a recipe")
        if isinstance(data, dict) and "spec" in data and "rungs" not in data:
            raise LadderError(f"{path}: a run config (it has spec), not a recipe: `ladder spec {path}` shows its model, "
                              f"`ladder train {path}` trains it; `ladder plan` takes a recipe or a preset")
        return build(Recipe, data, where=str(path))
    names = preset_names()
    if text not in names:
        import difflib

        close = difflib.get_close_matches(text, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise LadderError(
            f"unknown preset '{text}': {hint}presets are {', '.join(names)} (or give a recipe .yaml path)"
        )
    with resources.as_file(resources.files(PRESETS_PACKAGE) / f"{text}.yaml") as p:
        return build(Recipe, load_yaml(p), where=f"preset {text}")
