"""The ranges a config number must fall in: finite, positive where it is a size, small enough to plan.

The upper bounds sit far beyond any model trained so far (the published 535B run has d_model 6144,
48 layers, 384 experts and a few million steps); they exist so that a typo such as ``d_model: 1e15``
is refused with a clear line instead of planning a model whose accounting never returns.
"""

from __future__ import annotations

import math

from ladder.errors import LadderError

MAX_WIDTH = 2**20
"""d_model, head_dim, latent width."""
MAX_FFN_WIDTH = 2**24
"""Hidden width of an expert, a shared expert or a dense FFN."""
MAX_LAYERS = 10_000
MAX_HEADS = 2**16
MAX_EXPERTS = 2**16
MAX_VOCAB = 2**31 - 1
"""Token ids are 32-bit in the trainer."""
MAX_SEQ_LEN = 2**24
MAX_BATCH = 2**24
"""Sequences per optimizer step."""
MAX_STEPS = 10**8
"""Optimizer steps of one run (the longest published runs have a few million)."""
MAX_PREDICTED_POINTS = 100_000
"""The most steps a target's prediction may be made at (`eval_every`): each bootstrap refit holds a value at
every one."""
MIN_EVAL_FRACTION = 1e-5
"""Evals every this fraction of a run at the most often (100,000 evals)."""
MAX_SEED = 2**32 - 1
"""A seed (the model's, the data's): JAX's random keys keep only the low 32 bits, so a larger seed would train the
run of a smaller one."""
MAX_HOSTS = 100_000
"""Hosts one run trains on (one trainer process each): past any cluster built so far, a typo."""
MAX_PER_PROCESS = 65_536
"""CPU cores, or GPUs, one trainer process asks of a cluster: past any single host (the largest hold a few
thousand cores), a typo that no cluster could ever place."""


def in_range(name: str, value: float, lo: float, hi: float, what: str = "") -> None:
    """Refuse a non-finite `value` or one outside [lo, hi], naming the field."""
    if not _finite(value):
        raise LadderError(f"{name}={_num(value)} must be a finite number")
    if not lo <= value <= hi:
        hint = f" ({what})" if what else ""
        raise LadderError(f"{name}={_num(value)} is out of range: must be in [{_num(lo)}, {_num(hi)}]{hint}")


def check_seed(name: str, value: int, what: str = "JAX's random keys keep only 32 bits, so a larger seed would "
               "repeat a smaller one's run") -> None:
    """Refuse a seed outside 0 .. `MAX_SEED`, naming the field; `what` says why the range."""
    in_range(name, value, 0, MAX_SEED, what)


def positive(name: str, value: float, hi: float = math.inf, what: str = "") -> None:
    """Refuse a value that is not finite, not above zero, or above `hi`."""
    if not _finite(value) or value <= 0:
        raise LadderError(f"{name}={_num(value)} must be positive and finite" + (f" ({what})" if what else ""))
    if value > hi:
        raise LadderError(f"{name}={_num(value)} is too large: at most {_num(hi)}" + (f" ({what})" if what else ""))


def _num(x: float) -> str:
    """A bound or value as a user reads it: whole numbers in full with separators (16,777,216, not 1.67772e+07)."""
    try:
        return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e18 else f"{float(x):g}"
    except (TypeError, ValueError, OverflowError):  # not a number, or an int beyond any float
        return str(x)


def finite(name: str, value: float | None) -> None:
    if value is not None and not _finite(value):
        raise LadderError(f"{name}={_num(value)} must be a finite number")


def positive_or_none(value) -> float | None:
    """`value` as a positive finite float; None where it is missing, no number, or not above 0."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except (TypeError, OverflowError):
        return False


MAX_COMPUTE = 1e40
"""FLOPs of one run: ten orders beyond the largest trained so far (about 1e26); a larger number is a typo."""


def hero_flops(option: str, flops: float) -> float:
    """A hero's fit compute given as `option`: positive, finite, at most `MAX_COMPUTE`."""
    positive(option, flops, MAX_COMPUTE, "the hero's fit FLOPs, e.g. 3.2e24")
    return float(flops)


MAX_PARAMS = 1e18
"""Parameters of one model: six orders beyond the largest trained so far (about 2e12); a larger count is a typo
or another unit."""
MAX_TOKENS = 1e20
"""Tokens of one run: six orders beyond the most trained on so far (about 4e13); 6·MAX_PARAMS·MAX_TOKENS stays
under `MAX_COMPUTE`."""

MAX_TOKENS_PER_SECOND = 1e12
"""A run's throughput: past any cluster's (the largest train at about 1e8 tokens/s), a typo."""


MAX_RESAMPLES = 10_000
"""The most bootstrap refits a command takes: percentile bands settle within a few thousand, while memory
and time grow with every refit kept."""


def resamples(option: str, n: int, least: int = 2, none_ok: bool = True) -> int:
    """`n` bootstrap refits for `option`: 0 (none, where `none_ok`) or `least` to `MAX_RESAMPLES` (a band, or an
    interval, needs two refits at least)."""
    if n == 0 and none_ok:
        return 0
    if not least <= n <= MAX_RESAMPLES:
        raise LadderError(f"{option} {n}: give {'0 (none) or ' if none_ok else ''}{least} to {MAX_RESAMPLES:,} refits")
    return n


MAX_POLL_S = 7 * 86400.0
"""The longest wait between a watcher's checks: a week."""


def poll_seconds(poll: float, option: str = "--poll") -> float:
    """`poll` seconds between checks: positive and finite, at most `MAX_POLL_S`."""
    if not math.isfinite(poll) or not 0 < poll <= MAX_POLL_S:
        raise LadderError(f"{option} {poll}: must be positive seconds, at most a week")
    return poll
