"""`Schedule`: the learning-rate schedule and sequence-length phases of one run, as data.

Steps count optimizer updates from 0; the run trains steps 0 .. horizon-1. Warmup is linear,
lr = peak·(t+1)/warmup_steps, then the decay shape takes the LR from the peak to
``min_lr_ratio × peak`` on the last step. Two *edits* change a schedule mid-run, and both keep the
LR continuous at the step where they apply:

- ``shorten(at_step, new_total_steps)``: the horizon moves to ``new_total_steps`` and the rest of
  the decay is re-aimed so it still ends at the minimum LR on the new last step: the LR continues
  along the same shape from where it stands, compressed into the steps left (for WSD the stable
  phase ends earlier and the cooldown keeps its length);
- ``early_cooldown(at_step, length)``: branch off at ``at_step`` and cool down to the minimum over
  ``length`` steps; the run then ends at ``at_step + length``.

Edits only cut a run: neither may end past the horizon the edits before it leave.

The trainer calls `lr`; the fits receive the array `lrs()` returns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ladder.config.limits import MAX_SEQ_LEN, MAX_STEPS, positive
from ladder.errors import LadderError

Shape = Literal["linear", "cosine", "1-sqrt"]
Decay = Literal["constant", "linear", "cosine", "1-sqrt", "wsd"]


@dataclass(frozen=True)
class SeqPhase:
    """From `start_fraction` of the planned steps on, train at `seq_len` tokens per sequence."""

    start_fraction: float
    seq_len: int

    def __post_init__(self) -> None:
        if not 0.0 < self.start_fraction < 1.0:
            raise LadderError(f"seq phase start_fraction={self.start_fraction} must be in (0, 1)")
        positive("seq phase seq_len", self.seq_len, MAX_SEQ_LEN)


@dataclass(frozen=True)
class ScheduleEdit:
    """A change made to a schedule at `at_step` (see the module docstring)."""

    kind: Literal["shorten", "cooldown"]
    at_step: int
    new_total_steps: int = 0
    """shorten: the new horizon in steps."""
    length: int = 0
    """cooldown: steps of the cooldown branch."""
    shape: Shape = "linear"
    """cooldown: the shape of the branch's decay."""

    @property
    def horizon(self) -> int:
        return self.new_total_steps if self.kind == "shorten" else self.at_step + self.length

    def describe(self) -> str:
        if self.kind == "shorten":
            return f"shortened at step {self.at_step} to {self.new_total_steps} steps"
        return f"{self.shape} cooldown from step {self.at_step} over {self.length} step{'' if self.length == 1 else 's'}"


@dataclass(frozen=True)
class Schedule:
    """LR schedule in optimizer steps; LRs in the optimizer's units (Adam step size)."""

    peak_lr: float
    total_steps: int
    """Planned steps before any edit."""
    warmup_steps: int = 0
    decay: Decay = "linear"
    min_lr_ratio: float = 0.0
    """Final LR as a fraction of the peak."""
    cooldown_steps: int = 0
    """WSD only: length of the final cooldown in steps."""
    cooldown_shape: Shape = "linear"
    """WSD only: shape of the final cooldown."""
    seq_phases: tuple[SeqPhase, ...] = ()
    """Sequence-length switches after the first phase (whose length the run config gives)."""
    edits: tuple[ScheduleEdit, ...] = ()

    def __post_init__(self) -> None:
        positive("peak_lr", self.peak_lr, 1e3, "the Adam step size, e.g. 3e-4")
        positive("total_steps", self.total_steps, MAX_STEPS)
        if not 0 <= self.warmup_steps < self.total_steps:
            raise LadderError(
                f"warmup_steps={self.warmup_steps} must be in [0, total_steps={self.total_steps})"
            )
        if not 0.0 <= self.min_lr_ratio <= 1.0:  # false for NaN too
            raise LadderError(f"min_lr_ratio={self.min_lr_ratio} must be in [0, 1]")
        if self.decay != "wsd" and self.cooldown_steps:
            raise LadderError(f"cooldown_steps={self.cooldown_steps} is read with decay: wsd only (this schedule's "
                              f"decay is {self.decay}); leave it out, or give decay: wsd")
        if self.decay == "wsd" and not self.cooldown_steps:  # left out, or 0: the same to a schedule
            raise LadderError("decay: wsd needs cooldown_steps (the length of its final cooldown, in steps: more than "
                              f"0, at most total_steps - warmup_steps = {self.total_steps - self.warmup_steps})")
        if self.decay == "wsd" and not 0 < self.cooldown_steps <= self.total_steps - self.warmup_steps:
            raise LadderError(
                f"cooldown_steps={self.cooldown_steps} must be in (0, total_steps - warmup_steps] for WSD"
            )
        fractions = [p.start_fraction for p in self.seq_phases]
        if fractions != sorted(set(fractions)):
            raise LadderError(f"seq_phases must start at increasing fractions, got {fractions}")
        horizon = self.total_steps
        for before, edit in zip((None,) + self.edits, self.edits):
            if before is not None and edit.at_step < before.at_step:
                raise LadderError(
                    f"{edit.kind} edit at step {edit.at_step} is placed before the earlier {before.kind} edit at "
                    f"step {before.at_step}; edits apply in order, so place it at step {before.at_step} or later"
                )
            if not self.warmup_steps <= edit.at_step < horizon:
                raise LadderError(
                    f"{edit.kind} edit at step {edit.at_step} must fall after warmup "
                    f"({self.warmup_steps}) and before the current horizon ({horizon})"
                )
            if edit.kind == "shorten" and edit.new_total_steps <= edit.at_step:
                raise LadderError(
                    f"shorten at step {edit.at_step}: new_total_steps={edit.new_total_steps} "
                    "must be past the step of the edit"
                )
            if edit.kind == "cooldown" and edit.length <= 0:
                raise LadderError(f"cooldown at step {edit.at_step}: length={edit.length} must be positive")
            _refuse_lengthening(edit, horizon)
            if edit.horizon > MAX_STEPS:
                raise LadderError(f"{edit.kind} at step {edit.at_step}: a horizon of {edit.horizon} steps "
                                  f"is beyond the {MAX_STEPS:.0e} a run may have")
            horizon = edit.horizon

    # ---- edits ----------------------------------------------------------------------------------
    @property
    def horizon(self) -> int:
        """Steps the run trains with every edit applied."""
        return self.edits[-1].horizon if self.edits else self.total_steps

    def shorten(self, at_step: int, new_total_steps: int) -> Schedule:
        edit = ScheduleEdit("shorten", int(at_step), new_total_steps=int(new_total_steps))
        return dataclasses.replace(self, edits=self.edits + (edit,))

    def early_cooldown(self, at_step: int, length: int, shape: Shape = "linear") -> Schedule:
        edit = ScheduleEdit("cooldown", int(at_step), length=int(length), shape=shape)
        return dataclasses.replace(self, edits=self.edits + (edit,))

    def without_edits(self) -> Schedule:
        return dataclasses.replace(self, edits=())

    # ---- evaluation -------------------------------------------------------------------------------
    def lr(self, steps: np.ndarray | int) -> np.ndarray:
        """LR at each step (float64); steps past the horizon hold the final LR."""
        t = np.asarray(steps, dtype=np.float64)
        out = self._base(t)
        for i, edit in enumerate(self.edits):
            mask = t >= edit.at_step
            if np.any(mask):
                start = float(self._upto(edit.at_step, i))
                out = np.where(mask, self._edited(edit, t, start), out)
        return out

    def lrs(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """LRs of steps start .. stop-1 (default: the whole run)."""
        return self.lr(np.arange(start, self.horizon if stop is None else stop))

    def _upto(self, step: int, n_edits: int) -> float:
        return float(dataclasses.replace(self, edits=self.edits[:n_edits]).lr(step))

    @property
    def min_lr(self) -> float:
        return self.min_lr_ratio * self.peak_lr

    def _base(self, t: np.ndarray) -> np.ndarray:
        peak, W, T = self.peak_lr, self.warmup_steps, self.total_steps
        if self.decay == "constant":
            decayed = np.full_like(t, peak)
        elif self.decay == "wsd":
            begin = T - self.cooldown_steps
            p = (t - begin) / max(self.cooldown_steps - 1, 1)
            decayed = np.where(t < begin, peak, _segment(self.cooldown_shape, p, peak, self.min_lr))
        else:
            p = (t - W) / max(T - 1 - W, 1)
            decayed = _segment(self.decay, p, peak, self.min_lr)
        if W == 0:
            return decayed
        return np.where(t < W, peak * (t + 1) / W, decayed)

    def _edited(self, edit: ScheduleEdit, t: np.ndarray, start: float) -> np.ndarray:
        s = edit.at_step
        if edit.kind == "cooldown":
            return _segment(edit.shape, (t - s) / max(edit.length - 1, 1), start, self.min_lr)
        end_step = edit.new_total_steps - 1
        if self.decay == "constant":
            return np.full_like(t, start)
        if self.decay == "wsd":
            begin = max(edit.new_total_steps - self.cooldown_steps, s)
            p = (t - begin) / max(end_step - begin, 1)
            return np.where(t < begin, start, _segment(self.cooldown_shape, p, start, self.min_lr))
        # Continue along the same shape from where the LR stands, compressed to end on the new last step.
        p0 = _progress(self.decay, (start - self.min_lr) / max(self.peak_lr - self.min_lr, 1e-300))
        p = p0 + (1.0 - p0) * (t - s) / max(end_step - s, 1)
        return _segment(self.decay, p, self.peak_lr, self.min_lr)

    # ---- sequence length --------------------------------------------------------------------------
    def seq_len_at(self, steps: np.ndarray | int, base_seq_len: int) -> np.ndarray:
        """Sequence length at each step, given the first phase's length."""
        frac = np.asarray(steps, dtype=np.float64) / self.total_steps
        out = np.full(frac.shape, base_seq_len, dtype=np.int64)
        for phase in self.seq_phases:
            out = np.where(frac >= phase.start_fraction, phase.seq_len, out)
        return out

    def describe(self) -> str:
        """One line a person can read: shape, warmup, floor, edits."""
        if self.decay == "wsd":
            shape = f"WSD ({self.cooldown_shape} cooldown over the last {self.cooldown_steps} steps)"
        else:
            shape = f"{self.decay} decay"
        text = (
            f"{shape}, peak {self.peak_lr:.3g}, warmup {self.warmup_steps} step{'s' * (self.warmup_steps != 1)}, "
            f"floor {self.min_lr_ratio:g}×peak, {self.total_steps} steps"
        )
        for e in self.edits:
            text += f"; {e.describe()}"
        for ph in self.seq_phases:
            text += f"; seq len {ph.seq_len} from {ph.start_fraction:.0%}"
        return text


def as_logged(lrs: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The LR a trainer logs at each of `steps` (the updates done) from a schedule's LR of every update `lrs`: that of
    the update ending there, ``lrs[s - 1]``, as the JAX trainer logs it (step 0: the first)."""
    return lrs[np.clip(np.asarray(steps, dtype=np.int64) - 1, 0, len(lrs) - 1)]


LOGGED_AGREE = 0.05
"""How far (a share of the peak) a run's logged LR may lie from the LR its declared schedule gives at the same step
before they are said to disagree (the watch's `lr_tol` for a hero)."""


def logged_disagrees(schedule: Schedule, steps, values, tol: float = LOGGED_AGREE, persist: int = 2) -> str:
    """Where a run's logged LR (`values` at `steps`) departs from its declared `schedule` at `persist` logged values in a
    row, each further than `tol` of the peak outside the LRs of the updates ending at the step and after it (trainers
    log either): the first such value against the schedule's, and how many depart; "" where they agree."""
    steps, values = np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values) & (steps >= 0) & (steps < schedule.horizon)
    steps, values = steps[keep], values[keep]
    if steps.size < persist:
        return ""
    lrs = schedule.lrs()
    ending, next_ = as_logged(lrs, steps), lrs[steps]
    lo, hi = np.minimum(ending, next_), np.maximum(ending, next_)
    peak = schedule.peak_lr
    off = (values < lo - tol * peak) | (values > hi + tol * peak)
    runs = np.convolve(off, np.ones(persist, dtype=int), mode="valid") == persist
    if not runs.any():
        return ""
    i = int(np.argmax(runs))
    declared = float(np.clip(values[i], lo[i], hi[i]))
    return (f"its logged LR departs from its declared schedule: {values[i]:.3g} at step {int(steps[i]):,} against "
            f"{declared:.3g} ({abs(values[i] - declared) / peak:.0%} of the peak {peak:.3g}), at {int(off.sum())} of "
            f"{steps.size} logged values; the laws read the declared one ({schedule.describe()}): correct it (its "
            "warmup_steps, peak_lr, decay, total_steps) and import the run again with --replace, or leave `schedule` "
            "out to read the logged LR")


def _refuse_lengthening(edit: ScheduleEdit, horizon: int) -> None:
    """An edit only cuts the run: one ending past the `horizon` the edits before it leave would train steps the
    plan never had (its LR and evals were set for the planned length, and no rung trained past its plan). A longer
    run is planned with its longer horizon (``schedule.total_steps``)."""
    if edit.horizon <= horizon:
        return
    if edit.kind == "shorten":
        raise LadderError(f"shorten at step {edit.at_step}: new_total_steps={edit.new_total_steps} must not be past "
                          f"the current horizon ({horizon} steps); a shorten edit cuts the run: give at most "
                          f"{horizon}, or plan the longer run with schedule.total_steps")
    raise LadderError(f"cooldown at step {edit.at_step}: length={edit.length} ends at step {edit.horizon}, past the "
                      f"current horizon ({horizon} steps); an early cooldown ends sooner: give a length of at most "
                      f"{horizon - edit.at_step} steps")


def _progress(shape: str, factor: float) -> float:
    """Inverse of a shape's factor: how far along the decay (0..1) the LR fraction `factor` sits."""
    f = float(np.clip(factor, 0.0, 1.0))
    if shape == "linear":
        return 1.0 - f
    if shape == "cosine":
        return float(np.arccos(2.0 * f - 1.0) / np.pi)
    return (1.0 - f) ** 2  # 1-sqrt


def _segment(shape: str, p: np.ndarray, start: float, end: float) -> np.ndarray:
    """LR going from `start` (p=0) to `end` (p=1) along `shape`; p is clipped to [0, 1]."""
    p = np.clip(p, 0.0, 1.0)
    if shape == "linear":
        factor = 1.0 - p
    elif shape == "cosine":
        factor = 0.5 * (1.0 + np.cos(np.pi * p))
    elif shape == "1-sqrt":
        factor = 1.0 - np.sqrt(p)
    else:  # pragma: no cover - Literal types keep other values out
        raise ValueError(shape)
    return end + (start - end) * factor
