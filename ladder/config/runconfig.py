"""`RunConfig`: everything one training run needs, written as YAML by the planner, read by the trainer.

Steps count optimizer updates. Metrics are logged at ``step`` = updates completed, so the final eval
of a run sits at ``step == stop_after_steps`` and fraction 1.0. Tokens per step stay fixed over a run
(``batch_size × seq_len``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ladder.config.limits import (
    MAX_BATCH,
    MAX_HOSTS,
    MAX_PER_PROCESS,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MIN_EVAL_FRACTION,
    check_seed,
    in_range,
    positive,
)
from ladder.config.schedule import Schedule
from ladder.config.spec import ModelSpec
from ladder.config.yamlio import build, dump_yaml, load_yaml, to_dict
from ladder.errors import LadderError, LadderWarning
from ladder.outpaths import name_problem


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW settings; the LR comes from the schedule."""

    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    """Decoupled weight decay, multiplied by the scheduled LR (optax convention)."""
    clip_norm: float | None = 1.0
    """Global gradient-norm clip; null disables clipping."""

    def __post_init__(self) -> None:
        in_range("optimizer.beta1", self.beta1, 0.0, 0.999999)
        in_range("optimizer.beta2", self.beta2, 0.0, 0.999999)
        positive("optimizer.eps", self.eps, 1.0)
        in_range("optimizer.weight_decay", self.weight_decay, 0.0, 1e3)
        if self.clip_norm is not None:
            positive("optimizer.clip_norm", self.clip_norm, what="or null for no clipping")


@dataclass(frozen=True)
class MoELossConfig:
    """Coefficients of the auxiliary losses added to the cross-entropy."""

    load_balancing: float = 0.01
    router_z: float = 0.001
    logit_z: float = 0.0
    """z-loss on the output logits (log of the softmax normaliser, squared)."""

    def __post_init__(self) -> None:
        for name in ("load_balancing", "router_z", "logit_z"):
            in_range(f"moe.{name}", getattr(self, name), 0.0, 1e3)


BYTE_VOCAB = 256
"""Token ids of ``data.source=stdlib_text`` are the text's bytes: a model reading it needs this vocabulary."""


@dataclass(frozen=True)
class DataConfig:
    """Training data that needs no download."""

    source: Literal["stdlib_text", "markov"] = "stdlib_text"
    """Bytes of the Python standard library's source files, or an order-1 Markov chain with known entropy."""
    seed: int = 0
    """Seed of the data order (and of the Markov chain's transition matrix)."""
    markov_concentration: float = 0.2
    """Dirichlet concentration of the Markov chain's rows (smaller: lower entropy)."""
    eval_sequences: int = 128
    """Sequences in the fixed held-out eval set."""

    def __post_init__(self) -> None:
        check_seed("data.seed", self.seed, "the seed of the data order: the model seed's range")
        positive("data.markov_concentration", self.markov_concentration, 1e6)
        positive("data.eval_sequences", self.eval_sequences, MAX_BATCH)

    def check_vocab(self, vocab_size: int) -> None:
        """Refuse a model vocabulary too small for this source's token ids: the one rule `RunConfig` (so the
        planner, which builds them) and the trainer's data both apply."""
        if self.source == "stdlib_text" and vocab_size < BYTE_VOCAB:
            raise LadderError(
                f"spec.vocab_size={vocab_size}: data.source=stdlib_text is bytes and needs vocab_size >= "
                f"{BYTE_VOCAB}: raise arch.vocab_size (spec.vocab_size in a run config) "
                "or use data.source=markov"
            )


@dataclass(frozen=True)
class EvalConfig:
    every_fraction: float = 0.05
    """Evaluate every this fraction of the planned steps (and always at the end)."""

    def __post_init__(self) -> None:
        in_range("eval.every_fraction", self.every_fraction, MIN_EVAL_FRACTION, 1.0, "e.g. 0.05 for every 5%")


@dataclass(frozen=True)
class CheckpointConfig:
    every_steps: int = 0
    """Save every this many steps; 0 saves at every eval."""
    keep: int = 2
    """Checkpoints kept on disk (the newest)."""

    def __post_init__(self) -> None:
        in_range("checkpoint.every_steps", self.every_steps, 0, MAX_STEPS, "0: at every eval")
        in_range("checkpoint.keep", self.keep, 1, 10_000)


@dataclass(frozen=True)
class LoggingConfig:
    wandb: Literal["auto", "online", "offline", "disabled"] = "auto"
    """auto: online when WANDB_API_KEY is set, else offline; WANDB_MODE overrides."""
    project: str = "scaling-ladder"
    entity: str | None = None
    log_every: int = 1
    """Log train metrics every this many steps."""
    peak_flops: float | None = None
    """Peak FLOP/s of the hardware for MFU; null measures a matmul peak on the CPU."""

    def __post_init__(self) -> None:
        in_range("logging.log_every", self.log_every, 1, MAX_STEPS)
        if self.peak_flops is not None:
            positive("logging.peak_flops", self.peak_flops, what="or null to measure it")


@dataclass(frozen=True)
class ResourcesConfig:
    """What one trainer process asks of a cluster scheduler (`ladder train --ray`); a plain
    `ladder train` ignores it. A multi-host run asks this much on each of its hosts."""

    cpus: float = 1.0
    """CPU cores per process."""
    gpus: float = 0.0
    """GPUs per process (Ray gives the process exactly these through CUDA_VISIBLE_DEVICES)."""
    custom: dict[str, float] = field(default_factory=dict)
    """Other resources per process, by the cluster's names: ``{TPU: 4}``, ``{TPU-v5p-16-head: 1}``."""
    hosts: int = 1
    """Trainer processes, one per host, joined by ``jax.distributed`` into one mesh."""

    def __post_init__(self) -> None:
        amounts = {"cpus": self.cpus, "gpus": self.gpus} | {f"custom.{k}": v for k, v in self.custom.items()}
        for name, value in amounts.items():
            if not 0 <= value < float("inf"):  # NaN fails too
                raise LadderError(f"resources.{name}={value} must be a finite number >= 0")
        for name in ("cpus", "gpus"):
            if getattr(self, name) > MAX_PER_PROCESS:
                raise LadderError(f"resources.{name}={getattr(self, name)} is too large: at most {MAX_PER_PROCESS:,} per "
                                  f"process (`ladder plan --{name}-per-run N` sets it)")
        if self.hosts < 1:
            raise LadderError(f"resources.hosts={self.hosts} must be at least 1")
        if self.hosts > MAX_HOSTS:
            raise LadderError(f"resources.hosts={self.hosts} is too large: at most {MAX_HOSTS:,} hosts (one trainer "
                              "process each; `ladder plan --hero-hosts N` sets it)")
        for name, field_name in (("CPU", "cpus"), ("GPU", "gpus")):  # Ray's own names, which it takes only as these
            if name in self.custom:
                raise LadderError(f"resources.custom.{name}: CPUs and GPUs are asked for by resources.{field_name} "
                                  f"(`ladder plan --{field_name}-per-run N`), not as a custom resource")

    @property
    def asks_nothing(self) -> bool:
        """Every amount is 0: Ray runs such a process anywhere, but cannot place it as one bundle of a placement
        group, which is how a run of several hosts gets one process on each."""
        return not any(v > 0 for v in (self.cpus, self.gpus, *self.custom.values()))


def recipe_mark(data: Any) -> str:
    """The key that makes parsed YAML a recipe, not one run's or model's config ("rungs" or "arch"; "" when it is
    neither): what `ladder plan` reads, given where a run config goes."""
    if not isinstance(data, dict) or "spec" in data:
        return ""
    return next((key for key in ("rungs", "arch") if key in data), "")


def refuse_prediction(path: str | os.PathLike, data: Any, what: str) -> None:
    """A `LadderError` where parsed YAML (or JSON) is a prediction from `ladder predict` (prediction.json), given
    where `what` goes."""
    if isinstance(data, dict) and {"run_name", "table", "final"} <= data.keys():
        folder = Path(path).parent
        raise LadderError(f"{path}: a prediction (`ladder predict` writes it), not {what}; `ladder watch`, `ladder "
                          f"score` and `ladder report` take its folder with --prediction {folder}, and `ladder "
                          "predict` the run config or target file it was made for")


def target_mark(data: Any) -> str:
    """The key that makes parsed YAML a target file (a run's coordinates, `ladder predict --target`), not a run
    config ("active_params" or "fit_flops_per_token"; "" when it is not one)."""
    if not isinstance(data, dict) or "spec" in data:
        return ""
    return next((key for key in ("active_params", "fit_flops_per_token") if key in data), "")


@dataclass(frozen=True)
class RunConfig:
    name: str
    spec: ModelSpec
    seq_len: int
    """Tokens per sequence (the first phase, when the schedule switches lengths)."""
    batch_size: int
    """Sequences per optimizer step."""
    schedule: Schedule
    """LR schedule; its horizon is the planned number of steps (``stop_after_steps``)."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    moe: MoELossConfig = field(default_factory=MoELossConfig)
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    seed: int = 0
    """Seed of the model's initialisation."""
    group: str = ""
    """The ladder this run belongs to (wandb group)."""
    role: Literal["rung", "hero", "single"] = "single"
    tpp: float = 0.0
    """Tokens per active parameter the plan aimed at (0 when not planned)."""
    run_dir: str = ""
    """Where checkpoints and the local metrics file go; empty: runs/<name>."""
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    """What each trainer process asks of a cluster (`ladder train --ray`); not part of the training."""

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem:
            raise LadderError(f"name={self.name!r} {problem}; give the run a plain name")
        positive("seq_len", self.seq_len, MAX_SEQ_LEN)
        positive("batch_size", self.batch_size, MAX_BATCH, "sequences per optimizer step")
        in_range("tpp", self.tpp, 0.0, 1e9, "0 when not planned")
        check_seed("seed", self.seed)
        self.data.check_vocab(self.spec.vocab_size)
        if not 0.0 < self.eval.every_fraction <= 1.0:
            raise LadderError(f"eval.every_fraction={self.eval.every_fraction} must be in (0, 1]")

    # ---- ladder coordinates ---------------------------------------------------------------------
    @property
    def stop_after_steps(self) -> int:
        return self.schedule.horizon

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def tokens(self) -> int:
        return self.stop_after_steps * self.tokens_per_step

    def forward_flops_per_token(self, include_head: bool = False) -> float:
        """Forward FLOPs per token averaged over the sequence-length phases."""
        steps = self.stop_after_steps
        if not self.schedule.seq_phases:  # the same arithmetic as below, without a step array
            return steps * self.spec.forward_flops_per_token(self.seq_len, include_head) / steps
        lens = self.schedule.seq_len_at(np.arange(steps), self.seq_len)
        values, counts = np.unique(lens, return_counts=True)
        return sum(
            int(c) * self.spec.forward_flops_per_token(int(v), include_head)
            for v, c in zip(values, counts)
        ) / steps

    @property
    def fit_flops_per_token(self) -> float:
        """3 × forward FLOPs per token without the head: the C of every fit."""
        return 3.0 * self.forward_flops_per_token()

    @property
    def fit_flops(self) -> float:
        return self.fit_flops_per_token * self.tokens

    @property
    def flops_with_head(self) -> float:
        return 3.0 * self.forward_flops_per_token(include_head=True) * self.tokens

    @property
    def flops_6nd(self) -> float:
        return 6.0 * self.spec.active_params() * self.tokens

    def eval_steps(self) -> list[int]:
        """Steps (updates completed) after which the run evaluates: every fraction, and the end."""
        T = self.stop_after_steps
        planned = self.schedule.total_steps
        every = self.eval.every_fraction
        n = int(round(1.0 / every))
        steps = {max(1, int(round(k * every * planned))) for k in range(1, n + 1)}
        return sorted({s for s in steps if s < T} | {T})

    def coordinates(self) -> dict[str, Any]:
        """The numbers a ladder fit reads from a run's config (logged to wandb and the metrics file)."""
        spec = self.spec
        return {
            "name": self.name,
            "group": self.group,
            "role": self.role,
            "stop_after_steps": self.stop_after_steps,
            "tokens_per_step": self.tokens_per_step,
            "planned_tokens": self.tokens,
            "seq_len": self.seq_len,
            "batch_size": self.batch_size,
            "active_params": spec.active_params(),
            "total_params": spec.total_params(),
            "active_params_exact": spec.active_params_exact(),
            "total_params_exact": spec.total_params_exact(),
            "fit_flops_per_token": self.fit_flops_per_token,
            "flops_per_token_with_head": 3.0 * self.forward_flops_per_token(include_head=True),
            "tpp": self.tpp,
            "peak_lr": self.schedule.peak_lr,
            "schedule": self.schedule.describe(),
        }

    def resolved_run_dir(self, base: str | os.PathLike | None = None) -> Path:
        """The run directory; a relative one is taken relative to `base` (e.g. the config's folder)
        when given, else to the working directory."""
        path = Path(self.run_dir) if self.run_dir else Path("runs") / self.name
        return path if base is None or path.is_absolute() else Path(base) / path

    # ---- YAML ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = to_dict(self)
        data["coordinates"] = self.coordinates()
        return data

    def save(self, path: str | os.PathLike) -> Path:
        return dump_yaml(self.to_dict(), path)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "RunConfig", check_coordinates: bool = False,
                  stacklevel: int = 2) -> RunConfig:
        """The config in `data`; its ``coordinates`` block is written for readers and always recomputed. With
        `check_coordinates` (a file a person may have edited), a block that disagrees with the config is warned of
        (a `LadderWarning`): an edit there changes nothing, and would otherwise do so without a word. It is not
        refused: a config whose fields were edited (the way to change a run) keeps its old block until it is
        written again, and a version that counts a coordinate otherwise must still read older configs."""
        data = copy.copy(data)  # a copy of its kind: a mapping read from YAML keeps the lines of its keys
        written = data.pop("coordinates", None)
        cfg = build(cls, data, where)
        said = _edited_coordinates(cfg, written, where) if check_coordinates and written is not None else ""
        if said:
            import warnings

            warnings.warn(said, LadderWarning, stacklevel=stacklevel)
        return cfg

    @classmethod
    def load(cls, path: str | os.PathLike, check_coordinates: bool = True) -> RunConfig:
        """The run config in the YAML file `path`; `check_coordinates`: warn of a coordinates block that disagrees
        (a file a person may have edited; not for the tool's own reads of files it wrote or is about to write)."""
        data = load_yaml(path)
        refuse_prediction(path, data, "a run config")
        mark = recipe_mark(data)
        if mark:
            raise LadderError(f"{path}: a recipe (it has {mark}), not a run config; `ladder plan {path} --out DIR` "
                              "writes one per run (DIR/NAME.yaml, the hero's too)")
        mark = target_mark(data)
        if mark:
            raise LadderError(f"{path}: a target file (a run's coordinates: it has {mark}), not a run config from "
                              f"`ladder plan`; `ladder predict` and `ladder replan` take it with --target {path}, "
                              f"`ladder check` and `ladder compare` with --hero {path}")
        return cls.from_dict(data, where=str(path), check_coordinates=check_coordinates, stacklevel=3)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)


COORDINATES_REL_TOL = 1e-6
"""How far (relative) a float in a written coordinates block may sit from the value the config gives: YAML writes
floats in full, so only a hand edit (or a rounded copy) moves one further."""
PROSE_COORDINATES = ("schedule",)
"""Coordinates that are prose for a reader (`Schedule.describe`), not numbers: its wording may change between
versions, and the schedule block itself says the same."""


def _edited_coordinates(cfg: RunConfig, written: Any, where: str) -> str:
    """What a written ``coordinates`` block holds that `cfg` does not give (the first such entry; a block of other
    keys, or no mapping, too), or "": the block is computed from the config's fields and never read."""
    fix = ("the coordinates block is computed from the config's fields and never read (change a run through them: "
           "schedule.total_steps, batch_size, seq_len, spec, ...); it is written again with the run")
    if not isinstance(written, dict):
        return f"{where}: coordinates: expected a mapping, got {type(written).__name__}; {fix}"
    computed = cfg.coordinates()
    lines = getattr(written, "lines", {})
    for key, value in written.items():
        line = f" (line {lines[key]})" if key in lines else ""
        if key not in computed:
            return f"{where}: coordinates.{key}: not a coordinate (they are {', '.join(computed)}); {fix}{line}"
        if key not in PROSE_COORDINATES and not _agrees(value, computed[key]):
            return f"{where}: coordinates.{key}: {value!r} is not what the config gives ({computed[key]!r}); {fix}{line}"
    return ""


def _agrees(written: Any, computed: Any) -> bool:
    """Whether a written coordinate is the computed one: text the same, an integer exactly, a float within
    `COORDINATES_REL_TOL` (YAML 1.1 reads ``1e9`` as text: a number written so counts as that number)."""
    if isinstance(computed, str) or isinstance(written, bool):
        return written == computed
    if isinstance(written, int) and isinstance(computed, int):
        return written == computed  # exactly, past the 2**53 a float holds too
    try:
        number = float(written)
    except (TypeError, ValueError, OverflowError):
        return False
    if isinstance(computed, int):
        return number == computed
    return math.isclose(number, computed, rel_tol=COORDINATES_REL_TOL)
