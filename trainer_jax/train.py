"""The train loop: one `RunConfig` in, one finished run directory out (layout of `ladder.runfiles`).

Order of work at every step s (0-based): train on batch s, so `s + 1` updates are complete; log the
train metrics at step s + 1 (fetched while step s + 2 runs, see `_TrainLog`); when s + 1 is an eval
step, evaluate the held-out set as trained and dropless and log that at the same step; when it is a
checkpoint step, save. A checkpoint at step k therefore follows every line of metrics up to k, and
a resume truncates the metrics file to k.

Everything that can be wrong with a config is checked before anything is compiled.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ladder import metrics as keys
from ladder import runfiles
from ladder.config.runconfig import RunConfig
from ladder.config.spec import ModelSpec
from ladder.errors import LadderError
from ladder.files import held, write_text_atomic
from ladder.launch import finished_in, how_to_continue, mark_crashed, run_state, run_step
from trainer_jax.checkpoint import Checkpointer, abstract_like, check_compatible, checkpoint_meta
from trainer_jax.data import DataSource, make_source
from trainer_jax.mesh import batch_sharding, make_mesh, replicated, tree_shardings
from trainer_jax.model import cross_entropy, forward, init_params, param_count
from trainer_jax.progress import NullProgress, ProgressBar
from trainer_jax.sinks import (
    NullSink,
    Sink,
    check_wandb_login,
    make_sinks,
    truncate_metrics,
    wandb_mode,
)
from trainer_jax.throughput import measure_matmul_peak, model_flops_per_token

MANIFEST_FILE = "data_manifest.json"
LOGIT_Z_LOSS = "train/logit_z_loss"
ROUTER_ENTROPY = "moe/router_entropy"
LOAD_MAX = "moe/load_max_over_mean"
LOAD_MIN = "moe/load_min_over_mean"
MODEL_FLOPS = "throughput/model_flops_per_second"
EVAL_DROP_FRACTION = "eval/drop_fraction"
ENTROPY_FLOOR = "data/entropy_floor"


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    steps: int
    """Updates completed (the run's stop_after_steps when it finished)."""
    eval_loss: float | None
    eval_dropless_loss: float | None
    train_losses: tuple[float, ...]
    """train/loss of every logged step this call ran."""
    resumed_from: int | None
    """The checkpoint step this call continued from (None: it started from scratch)."""
    wall_seconds: float
    """Training and evaluation time of this call, compile time excluded."""


# ---- checks -------------------------------------------------------------------------------------
def check_config(cfg: RunConfig) -> None:
    """Reject what the trainer cannot run, with a message that says what to change (before anything
    is compiled or written)."""
    _check_numbers(cfg)
    if cfg.schedule.seq_phases:
        raise LadderError(
            f"{cfg.name}: sequence-length phases are not supported by trainer_jax: "
            "remove schedule.seq_phases (train at one seq_len)"
        )
    if cfg.spec.head_dim % 2:
        raise LadderError(f"head_dim={cfg.spec.head_dim} must be even for rotary embeddings")
    if cfg.logging.log_every <= 0:
        raise LadderError(f"logging.log_every={cfg.logging.log_every} must be at least 1")
    if cfg.checkpoint.every_steps < 0:
        raise LadderError(f"checkpoint.every_steps={cfg.checkpoint.every_steps} must be >= 0 (0: at every eval)")
    if cfg.optimizer.clip_norm is not None and cfg.optimizer.clip_norm <= 0:
        raise LadderError(f"optimizer.clip_norm={cfg.optimizer.clip_norm} must be positive, or null for no clipping")
    if cfg.logging.peak_flops is not None and cfg.logging.peak_flops <= 0:
        raise LadderError(f"logging.peak_flops={cfg.logging.peak_flops} must be positive, or null to measure it")


def _check_numbers(cfg: RunConfig) -> None:
    """The config's own checks run when it is built; these hold even for one changed in place."""
    sizes = {"batch_size": cfg.batch_size, "seq_len": cfg.seq_len, "schedule.total_steps": cfg.schedule.total_steps,
             "stop_after_steps": cfg.stop_after_steps}
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise LadderError(f"{cfg.name}: {name}={value!r} must be a positive integer")
    peak = cfg.schedule.peak_lr
    if not (isinstance(peak, (int, float)) and math.isfinite(peak) and peak > 0):
        raise LadderError(f"{cfg.name}: schedule.peak_lr={peak!r} must be a positive finite number")
    lrs = cfg.schedule.lrs()
    if not np.isfinite(lrs).all() or (lrs < 0).any():
        bad = int(np.argmax(~np.isfinite(lrs) | (lrs < 0)))
        raise LadderError(f"{cfg.name}: the schedule gives LR {lrs[bad]} at step {bad}: every LR must be finite and >= 0")
    o, m = cfg.optimizer, cfg.moe
    numbers = {"optimizer.beta1": o.beta1, "optimizer.beta2": o.beta2, "optimizer.eps": o.eps,
               "optimizer.weight_decay": o.weight_decay, "moe.load_balancing": m.load_balancing,
               "moe.router_z": m.router_z, "moe.logit_z": m.logit_z}
    for name, value in numbers.items():
        if not math.isfinite(value) or value < 0:
            raise LadderError(f"{cfg.name}: {name}={value} must be finite and >= 0")
    if not (o.beta1 < 1 and o.beta2 < 1 and o.eps > 0):
        raise LadderError(f"{cfg.name}: need optimizer.beta1 and beta2 below 1 and eps above 0 "
                          f"(got {o.beta1}, {o.beta2}, {o.eps})")


def make_run_dir(run_dir: Path) -> None:
    """Create the run directory (and its parents), or say why it cannot be one."""
    if run_dir.exists() and not run_dir.is_dir():
        raise LadderError(f"run_dir {run_dir}: is a file, not a folder; give a folder (new or holding this run)")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=run_dir).close()  # writable, for this process
    except OSError as exc:
        raise LadderError(
            f"run_dir {run_dir}: cannot create or write it ({exc.strerror or exc}); give a folder you can write to"
        ) from None


def checkpoint_steps(cfg: RunConfig) -> set[int]:
    T = cfg.stop_after_steps
    every = cfg.checkpoint.every_steps
    steps = set(cfg.eval_steps()) if every == 0 else set(range(every, T + 1, every))
    return steps | {T}


# ---- the step functions ---------------------------------------------------------------------------
def make_optimizer(cfg: RunConfig) -> optax.GradientTransformation:
    """AdamW at the schedule's LR for each update; norms are not decayed; optional global-norm clip."""
    lr_table = jnp.asarray(cfg.schedule.lrs(), jnp.float32)  # [stop_after_steps]

    def learning_rate(count: jax.Array) -> jax.Array:
        return lr_table[jnp.minimum(count, lr_table.shape[0] - 1)]

    o = cfg.optimizer
    adamw = optax.adamw(
        learning_rate, b1=o.beta1, b2=o.beta2, eps=o.eps, weight_decay=o.weight_decay,
        mask=lambda params: jax.tree.map(lambda x: x.ndim >= 2, params),
    )
    return adamw if o.clip_norm is None else optax.chain(optax.clip_by_global_norm(o.clip_norm), adamw)


def make_loss(cfg: RunConfig, mesh: Any, compute_dtype: Any = jnp.float32) -> Callable:
    """Total loss and train metrics. With a `compute_dtype` such as bfloat16 the float32 master
    parameters are cast for the forward pass (norms, softmaxes, router and logits stay float32)."""
    spec, c = cfg.spec, cfg.moe

    def loss_fn(params: Any, tokens: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        params = jax.tree.map(lambda p: p.astype(compute_dtype), params)
        logits, stats = forward(params, tokens[:, :-1], spec, mesh=mesh)  # [B, S, vocab]
        ce, lse = cross_entropy(logits, tokens[:, 1:])
        ce = jnp.mean(ce)
        logit_z = jnp.mean(lse**2)
        total = ce + c.load_balancing * stats["load_balancing"] + c.router_z * stats["router_z"] + c.logit_z * logit_z
        metrics = {keys.TRAIN_LOSS: total, keys.TRAIN_CE: ce, LOGIT_Z_LOSS: logit_z}
        if spec.n_moe_layers:
            metrics |= {
                keys.LOAD_BALANCING_LOSS: stats["load_balancing"],
                keys.ROUTER_Z_LOSS: stats["router_z"],
                keys.DROP_FRACTION: stats["drop_fraction"],
                ROUTER_ENTROPY: stats["router_entropy"],
                LOAD_MAX: stats["load_max_over_mean"],
                LOAD_MIN: stats["load_min_over_mean"],
            }
        return total, metrics

    return loss_fn


def make_train_step(
    cfg: RunConfig, mesh: Any, optimizer: optax.GradientTransformation, compute_dtype: Any = jnp.float32
) -> Callable:
    loss_fn = make_loss(cfg, mesh, compute_dtype)
    lr_table = jnp.asarray(cfg.schedule.lrs(), jnp.float32)

    def train_step(state: dict[str, Any], tokens: jax.Array) -> tuple[dict[str, Any], dict[str, jax.Array]]:
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["params"], tokens)
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        metrics[keys.GRAD_NORM] = optax.tree.norm(grads)  # before clipping
        metrics[keys.LEARNING_RATE] = lr_table[state["step"]]
        new = {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state, "step": state["step"] + 1}
        return new, metrics

    return train_step


def make_eval_step(cfg: RunConfig, mesh: Any, dropless: bool) -> Callable:
    def eval_step(params: Any, tokens: jax.Array, weight: jax.Array) -> dict[str, jax.Array]:
        logits, stats = forward(params, tokens[:, :-1], cfg.spec, dropless=dropless, mesh=mesh)
        ce, _ = cross_entropy(logits, tokens[:, 1:])  # [B, S]
        return {"ce_sum": jnp.sum(ce * weight[:, None]), "drop": stats["drop_fraction"]}

    return eval_step


# ---- the run --------------------------------------------------------------------------------------
STOP = threading.Event()
"""Set by the trainer's SIGTERM handler (`python -m trainer_jax`): the loop stops before its next step, as Ctrl-C
would, saves a checkpoint there (one process) and marks the run crashed."""
STEPPING = threading.Event()
"""Set while the training loop runs (where `STOP` is looked at)."""
SAVING = threading.Event()
"""Set while a checkpoint is written: a second stop waits for it (cut there, the run would resume from the checkpoint
before, its steps since lost)."""


def _save(ckpt: Checkpointer, step: int, state: Any, meta: dict[str, Any]) -> None:
    SAVING.set()
    try:
        ckpt.save(step, state, meta)
    finally:
        SAVING.clear()


def train(
    cfg: RunConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    expert_parallel: int | None = None,
    devices: Sequence[Any] | None = None,
    progress: bool = True,
    peak_flops: float | None = None,
) -> TrainResult:
    """Train `cfg` into `run_dir` (default: the config's), continuing from its last checkpoint when
    `resume` is set. `expert_parallel` sets the mesh's expert axis (default: as many devices as
    divide the experts); `devices` defaults to all. `peak_flops` overrides the config's peak."""
    check_config(cfg)
    is_writer = jax.process_index() == 0
    wandb = wandb_mode(cfg.logging.wandb)
    if is_writer:
        check_wandb_login(cfg.logging.wandb, wandb)
    run_dir = Path(run_dir) if run_dir is not None else cfg.resolved_run_dir()
    mesh = make_mesh(cfg.spec, cfg.batch_size, expert_parallel, devices)
    source = make_source(cfg)
    make_run_dir(run_dir)
    lock = run_dir / TRAINER_LOCK
    with held(lock, f"{run_dir}: another trainer is training this run (it holds {lock}); wait for it to end, or stop "
                    "it and train again (with --resume; `ladder train --ladder` resumes by itself): two trainers in "
                    "one folder would overwrite each other's checkpoints and metrics"
              ) if is_writer else contextlib.nullcontext():
        try:
            return _train(cfg, run_dir, mesh, source, wandb, is_writer, resume, progress, peak_flops)
        except OSError as exc:  # the system's error (a full disk), not the trainer's: said in one line
            raise _unwritable(run_dir, exc, _reads_crashed(run_dir) if is_writer else None) from exc


TRAINER_LOCK = ".trainer.lock"
"""Held in the run folder by the trainer training it (its first process), as long as it trains."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""The system's errors for a disk with no room left (or a quota used up)."""


def _unwritable(run_dir: Path, exc: OSError, marked: bool | None = None) -> LadderError:
    """A file of the run that the system refused (a full disk, above all) in one line: the run folder, why, whether
    the run could be marked crashed (`marked`; None: its status was not touched), and what to do. The system's error
    is no bug of the trainer, and a traceback (orbax's above all) would bury the one thing to do."""
    what = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    full = exc.errno in DISK_FULL
    said = f"run_dir {run_dir}: {'the disk is full' if full else 'a file there cannot be written'} ({what})"
    if marked:
        said += "; the run is marked crashed"
    elif marked is False:
        said += (f"; even its {runfiles.STATUS_FILE} could not be written, so the run still reads as running, though "
                 "no trainer trains it")
    fix = "free space there" if full else "make it writable"
    return LadderError(f"{said}; {fix}, then {how_to_continue()}")


def _reads_crashed(run_dir: Path) -> bool | None:
    """Whether the run's status now says crashed, marked so here where it still says running (the training loop marks
    it as it fails, but a full disk may have refused that, and an error before the loop leaves it to this); None
    where it says neither."""
    state = run_state(run_dir)
    if state == "running":
        return mark_crashed(run_dir)
    return True if state == "crashed" else None


def _train(cfg: RunConfig, run_dir: Path, mesh: Any, source: DataSource, wandb: str, is_writer: bool, resume: bool,
           progress: bool, peak_flops: float | None) -> TrainResult:
    T = cfg.stop_after_steps

    optimizer = make_optimizer(cfg)
    key = jax.random.key(cfg.seed)
    init_state = functools.partial(_init_state, cfg.spec, optimizer)
    shapes = jax.eval_shape(init_state, key)
    n_params = param_count(shapes["params"])
    meta = checkpoint_meta(cfg, source.info, n_params)
    # Everything about resuming is settled before compiling anything.
    ckpt = Checkpointer(run_dir / runfiles.CHECKPOINT_DIR, cfg.checkpoint.keep)
    latest = _resume_point(ckpt, meta, cfg, run_dir, resume)
    start = latest or 0
    if start == T:
        ckpt.close()
        return _already_finished(cfg, run_dir, is_writer)

    flops_per_token = model_flops_per_token(cfg)
    peak = peak_flops or cfg.logging.peak_flops or measure_matmul_peak()
    extra = {**source.info, "n_params_tree": n_params, "model_flops_per_token": flops_per_token,
             "peak_flops": peak, "mesh": dict(mesh.shape), "devices": len(mesh.devices.flat)}
    if is_writer:
        _begin_files(cfg, run_dir, source, start)

    state_sh = tree_shardings(shapes, mesh)
    batch_sh = batch_sharding(mesh)
    if latest is not None:
        state = ckpt.restore(latest, abstract_like(shapes, state_sh))
    else:
        state = jax.jit(init_state, out_shardings=state_sh)(key)
    step_fn = _compiled_step(cfg, mesh, optimizer, shapes, state_sh, batch_sh)
    evaluator = Evaluator(cfg, mesh, source, abstract_like(shapes["params"], state_sh["params"]))

    _say(is_writer, _header(cfg, n_params, mesh, source, start))
    sinks: Sink = NullSink()
    bar = ProgressBar(cfg.name, T, start, cfg.tokens_per_step) if progress and is_writer else NullProgress()
    evals, ckpts = set(cfg.eval_steps()), checkpoint_steps(cfg)
    last_eval: dict[str, float] = {}
    t0 = time.perf_counter()
    ok = False
    completed = saved = start
    log = None
    try:
        sinks = make_sinks(cfg, run_dir, wandb, extra, is_writer)
        log = _TrainLog(cfg, sinks, bar, flops_per_token, peak, start)
        STEPPING.set()
        for s in range(start, T):
            if STOP.is_set():  # a scheduler's stop, taken between steps: no checkpoint or log is cut in half
                if completed > saved and jax.process_count() == 1:  # (the processes of a multi-host run may be
                    log.flush()  # stopped at different steps: a save, a collective, would wait for the others)
                    _save(ckpt, completed, state, meta)  # nothing trained is lost: the run resumes where it stopped
                raise KeyboardInterrupt
            done = s + 1
            state, metrics = step_fn(state, _device_batch(source.train_batch(s), batch_sh))
            log.push(done, metrics, done % cfg.logging.log_every == 0 or done == T or done in evals)
            if done in evals or done in ckpts:
                log.flush()  # a step's train metrics come before its eval and its checkpoint
                if done in evals:
                    last_eval = evaluator(state["params"]) | {k: v for k, v in source.info.items() if k == ENTROPY_FLOOR}
                    sinks.log(last_eval, done)
                if done in ckpts:
                    _save(ckpt, done, state, meta)
                    saved = done
                if is_writer:  # at each eval too: a run killed outright is marked crashed near where it was
                    runfiles.write_status(run_dir, "running" if done < T else "finished", done)
                log.restart(done)
            completed = done
        ok = True
    except BaseException:
        if STOP.is_set() and log is not None:  # stopped between steps: the last step's train metrics are whole
            with contextlib.suppress(OSError):  # (a full disk refuses them: the error on its way says so)
                log.flush()
        if is_writer:
            runfiles.write_status_anyway(run_dir, "crashed", completed)
        raise
    finally:
        STEPPING.clear()
        bar.close()
        sinks.close(ok)
        ckpt.close()
    return _finished(cfg, run_dir, is_writer, last_eval, tuple(log.losses), latest, time.perf_counter() - t0)


def _begin_files(cfg: RunConfig, run_dir: Path, source: DataSource, start: int) -> None:
    """The run folder as training (re)starts at `start`: its config, data manifest, metrics up to `start`, status."""
    cfg.save(run_dir / runfiles.CONFIG_FILE)
    if source.manifest is not None:
        write_text_atomic(run_dir / MANIFEST_FILE, json.dumps(source.manifest, indent=1) + "\n")
    truncate_metrics(run_dir / runfiles.METRICS_FILE, start)
    runfiles.write_status(run_dir, "running", start)


def _finished(cfg: RunConfig, run_dir: Path, is_writer: bool, last_eval: dict[str, float], losses: tuple[float, ...],
              resumed_from: int | None, wall: float) -> TrainResult:
    """A run that has trained its last step: its status, its closing line, and its result."""
    T = cfg.stop_after_steps
    if is_writer:
        runfiles.write_status(run_dir, "finished", T)
    trained = f"{T} steps in {wall:.1f}s" if not resumed_from else \
        f"{T} steps (resumed at {resumed_from}: {T - resumed_from} in {wall:.1f}s)"
    _say(is_writer, f"{cfg.name}: finished {trained}; eval loss "
         f"{last_eval.get(keys.EVAL_LOSS, float('nan')):.4f} (dropless "
         f"{last_eval.get(keys.EVAL_DROPLESS_LOSS, float('nan')):.4f})")
    return TrainResult(
        run_dir=run_dir,
        steps=T,
        eval_loss=last_eval.get(keys.EVAL_LOSS),
        eval_dropless_loss=last_eval.get(keys.EVAL_DROPLESS_LOSS),
        train_losses=losses,
        resumed_from=resumed_from,
        wall_seconds=wall,
    )


def _already_finished(cfg: RunConfig, run_dir: Path, is_writer: bool) -> TrainResult:
    """A run whose last checkpoint is its last step: its status and the last eval its metrics file holds."""
    T = cfg.stop_after_steps
    if is_writer:
        runfiles.write_status(run_dir, "finished", T)
    last = _last_eval_from_file(run_dir)
    _say(is_writer, f"{cfg.name}: already finished ({T} steps) in {run_dir}")
    return TrainResult(run_dir, T, last.get(keys.EVAL_LOSS), last.get(keys.EVAL_DROPLESS_LOSS), (), T, 0.0)


def _compiled_step(cfg: RunConfig, mesh: Any, optimizer: optax.GradientTransformation, shapes: Any,
                   state_sh: Any, batch_sh: Any) -> Callable:
    """The train step compiled before the loop, for the state's `shapes` and shardings (donated each step)."""
    batch = jax.ShapeDtypeStruct((cfg.batch_size, cfg.seq_len + 1), jnp.int32, sharding=batch_sh)
    return jax.jit(
        make_train_step(cfg, mesh, optimizer), in_shardings=(state_sh, batch_sh),
        out_shardings=(state_sh, replicated(mesh)), donate_argnums=0,
    ).lower(abstract_like(shapes, state_sh), batch).compile()


def _init_state(spec: ModelSpec, optimizer: optax.GradientTransformation, key: jax.Array) -> dict[str, Any]:
    params = init_params(spec, key)
    return {"params": params, "opt_state": optimizer.init(params), "step": jnp.zeros((), jnp.int32)}


def _resume_point(ckpt: Checkpointer, meta: dict[str, Any], cfg: RunConfig, run_dir: Path, resume: bool) -> int | None:
    """The checkpoint step to continue from (None: start from scratch), or a `LadderError`."""
    T = cfg.stop_after_steps
    latest = ckpt.latest_step()
    if latest is None:
        latest = _without_checkpoint(cfg, run_dir, resume)
        if latest is None:
            return None
    else:
        check_compatible(ckpt.read_meta(latest), meta, latest, run_dir)  # another run's checkpoints are said as such
    if latest > T:
        raise LadderError(f"the checkpoint at step {latest} is past this run's {T} steps: use a fresh run_dir")
    if not resume and latest == T:
        raise LadderError(f"{run_dir} holds this run trained to its last step ({T}): it is finished; to train it "
                          "again, choose another run_dir")
    if not resume:
        raise LadderError(
            f"{run_dir} already holds checkpoints up to step {latest}: pass --resume to continue "
            "that run, or choose another run_dir"
        )
    return latest


def _without_checkpoint(cfg: RunConfig, run_dir: Path, resume: bool) -> int | None:
    """Where `run_dir` holds no checkpoint: the last step for a run that finished with this very config (its
    checkpoints removed since, to free the disk), None to train from step 0, or a `LadderError` where that would
    replace metrics past step 0. A resumed run that was stopped before its first checkpoint does start over (what
    its stop said it would); one whose status is past a checkpoint step lost its checkpoints, and is refused."""
    T = cfg.stop_after_steps
    logged = _last_logged_step(run_dir)
    if logged >= T and finished_in(run_dir, cfg):
        return T
    if logged <= 0:
        return None
    reached = run_step(run_dir)
    first_save = min(checkpoint_steps(cfg))
    if resume and run_state(run_dir) is None:  # metrics with no status of a run: no run this trainer started
        raise LadderError(f"{run_dir} holds metrics up to step {logged} but no status of a run ({runfiles.STATUS_FILE}) "
                          "and no checkpoint: they are not a run this trainer stopped, and training would replace "
                          f"them. Use a fresh run_dir to keep them, or remove {run_dir} to train the run there")
    if resume and reached < first_save:
        return None
    if reached < first_save:
        raise LadderError(f"{run_dir} holds metrics up to step {logged} but no checkpoint to continue from: training "
                          "from step 0 would replace them. Use a fresh run_dir to keep them, or pass --resume (or "
                          f"remove {run_dir}) to train the run again from step 0")
    raise LadderError(f"{run_dir} holds metrics up to step {logged}, its status says {run_state(run_dir)} at step "
                      f"{reached}, but its checkpoints are gone ({run_dir / runfiles.CHECKPOINT_DIR}): training from "
                      f"step 0 would replace those metrics. Use a fresh run_dir to keep them, or remove {run_dir} to "
                      "train the run again from step 0")


def _last_logged_step(run_dir: Path) -> int:
    """The last step the run's metrics file holds (0 for none)."""
    steps = [r["step"] for r in runfiles.metric_records(run_dir) if isinstance(r.get("step"), int)]
    return max(steps, default=0)


def _throughput(tokens_per_second: float, flops_per_token: float, peak: float) -> dict[str, float]:
    return {
        keys.TOKENS_PER_SECOND: tokens_per_second,
        MODEL_FLOPS: tokens_per_second * flops_per_token,
        keys.MFU: tokens_per_second * flops_per_token / peak,
    }


class _TrainLog:
    """Train metrics, logged one step behind the device: step s's values are fetched while step
    s + 1 runs, so the host's work (sinks, progress bar, the next batch) overlaps the device's.
    Throughput is measured between fetched steps, leaving out evaluation and checkpoint time."""

    def __init__(self, cfg: RunConfig, sinks: Sink, bar: Any, flops_per_token: float, peak: float, start: int):
        self._cfg, self._sinks, self._bar = cfg, sinks, bar
        self._flops_per_token, self._peak = flops_per_token, peak
        self._pending: tuple[int, dict[str, jax.Array]] | None = None
        self.losses: list[float] = []
        self.restart(start)

    def push(self, step: int, metrics: dict[str, jax.Array], logged: bool) -> None:
        """`step` has been dispatched: log the step before it, and keep this one if it is logged."""
        self.flush()
        if logged:
            self._pending = (step, metrics)

    def flush(self) -> None:
        if self._pending is None:
            return
        step, metrics = self._pending
        self._pending = None
        values = {k: float(v) for k, v in jax.device_get(metrics).items()}  # waits for the step
        now = time.perf_counter()
        tokens_per_second = (step - self._since) * self._cfg.tokens_per_step / (now - self._clock)
        values |= _throughput(tokens_per_second, self._flops_per_token, self._peak)
        values[keys.TOKENS_SEEN] = float(step * self._cfg.tokens_per_step)
        self._sinks.log(values, step)
        self.losses.append(values[keys.TRAIN_LOSS])
        self._bar.update(step, values[keys.TRAIN_LOSS])
        self._since, self._clock = step, now

    def restart(self, step: int) -> None:
        """Start the throughput clock after `step` (after an evaluation or a checkpoint)."""
        self._since, self._clock = step, time.perf_counter()


class Evaluator:
    """Mean cross-entropy (nats per token) on the fixed held-out set, as trained and dropless."""

    def __init__(self, cfg: RunConfig, mesh: Any, source: DataSource, params_abstract: Any):
        B = cfg.batch_size
        n = len(source.eval_tokens)
        chunks = -(-n // B)
        tokens = np.zeros((chunks * B, cfg.seq_len + 1), np.int32)
        tokens[:n] = source.eval_tokens
        weight = (np.arange(chunks * B) < n).astype(np.float32)
        sh = batch_sharding(mesh)
        self._chunks = [(_device_batch(tokens[i * B:(i + 1) * B], sh), _device_batch(weight[i * B:(i + 1) * B], sh))
                        for i in range(chunks)]
        self._n_tokens = n * cfg.seq_len
        self._moe = cfg.spec.n_moe_layers > 0
        args = (params_abstract, jax.ShapeDtypeStruct((B, cfg.seq_len + 1), jnp.int32, sharding=sh),
                jax.ShapeDtypeStruct((B,), jnp.float32, sharding=sh))
        self._steps = {
            dropless: jax.jit(make_eval_step(cfg, mesh, dropless), out_shardings=replicated(mesh)).lower(*args).compile()
            for dropless in (False, True)
        }

    def __call__(self, params: Any) -> dict[str, float]:
        out = {}
        for dropless, key in ((False, keys.EVAL_LOSS), (True, keys.EVAL_DROPLESS_LOSS)):
            fn = self._steps[dropless]
            results = jax.device_get([fn(params, tokens, weight) for tokens, weight in self._chunks])  # one wait
            total = sum(float(r["ce_sum"]) for r in results)
            out[key] = total / self._n_tokens
            if not dropless and self._moe:
                # Padding rows of the last chunk count too: a close estimate.
                out[EVAL_DROP_FRACTION] = float(np.mean([float(r["drop"]) for r in results]))
        return out


def _device_batch(host: np.ndarray, sharding: Any) -> jax.Array:
    """A global array from the same host array on every process (each takes its own rows)."""
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def _last_eval_from_file(run_dir: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    for record in runfiles.metric_records(run_dir):
        found |= {k: v for k, v in record.items() if k in (keys.EVAL_LOSS, keys.EVAL_DROPLESS_LOSS)}
    return found


def _header(cfg: RunConfig, n_params: int, mesh: Any, source: DataSource, start: int) -> str:
    spec = cfg.spec
    where = f"resuming at step {start}" if start else "from scratch"
    floor = source.info.get(ENTROPY_FLOOR)
    data = source.name + (f" (entropy floor {floor:.4f} nats/token)" if floor is not None else "")
    return (
        f"{cfg.name}: {n_params:,} parameters, {spec.active_params_exact():,} active per token (exact counts; "
        f"{spec.active_params():,} active by the published count), "
        f"{cfg.stop_after_steps} steps × {cfg.tokens_per_step:,} tokens, {data}, "
        f"mesh {dict(mesh.shape)}, {where}"
    )


def _say(is_writer: bool, text: str) -> None:
    if is_writer:
        print(text, flush=True)
