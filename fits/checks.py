"""Input checks that raise `FitError` with a message for the user, and the trust warnings fits carry.

A fit that runs but cannot be trusted says so in its `warnings` (too few runs for the form, a
solver that did not converge, E at its bound, an interval wider than the prediction's use); its
summary prints them. Nothing is silent.
"""

from __future__ import annotations

import numpy as np

from fits.errors import FitError, GivenValueError

MAX_REL_WIDTH = 0.05
"""A 90% interval wider than this fraction of the prediction is flagged as too wide to act on."""


def as_array(name: str, values, *, positive: bool = True, ndim: int = 1) -> np.ndarray:
    """`values` as a finite float64 array (strictly positive unless `positive=False`)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise FitError(f"{name}: expected numbers, got {values!r:.80}") from None
    if arr.ndim != ndim:
        raise FitError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if np.any(bad):
        i = np.flatnonzero(bad.ravel())[0]
        raise FitError(f"{name} has a non-finite value ({arr.ravel()[i]}) at position {i}; drop or fix that run")
    if positive and np.any(arr <= 0):
        i = np.flatnonzero((arr <= 0).ravel())[0]
        raise FitError(f"{name} must be positive, got {arr.ravel()[i]:g} at position {i}")
    return arr


def at_positive(name: str, values) -> np.ndarray:
    """`values` (a number or an array of any shape) as float64, refused unless every one is finite and positive: where
    a fitted law is asked for its prediction (a power law of a negative or zero compute, size or token count has no
    value)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise FitError(f"{name}: expected numbers, got {values!r:.80}") from None
    bad = ~np.isfinite(arr) | (arr <= 0)
    if np.any(bad):
        raise FitError(f"{name} must be positive and finite, got {arr.ravel()[np.flatnonzero(bad.ravel())[0]]:g}")
    return arr


def same_length(**arrays: np.ndarray) -> int:
    sizes = {k: len(v) for k, v in arrays.items()}
    if len(set(sizes.values())) != 1:
        raise FitError("inputs differ in length: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
    return next(iter(sizes.values()))


def need_runs(n: int, needed: int, form: str, what: str = "runs of distinct compute", free_E: bool = False) -> None:
    """Refuse fewer than `needed` runs; `free_E`: the fit leaves E free, and one with E pinned needs a run less."""
    if n < needed:
        pin = f" (or {needed - 1} with E pinned, --E)" if free_E else ""
        raise FitError(f"the {form} needs at least {needed} {what}{pin}, got {n}")


def resample_need(n_distinct: int, p: int) -> int:
    """Distinct runs a bootstrap resample must keep: one beyond the parameter count `p` when the
    data have at least two beyond it, else `p`. Resamples with fewer make the refit interpolate a
    handful of runs, whose wild extrapolations widen the intervals far past their nominal level."""
    return p + 1 if n_distinct >= p + 2 else p


def few_runs(n: int, p: int, form: str) -> list[str]:
    """Warn when fewer than two runs are left over the parameter count."""
    if n - p < 2:
        return [f"too few runs for the {form}: {n} runs for {p} free parameters ({max(n - p, 0)} left over)"]
    return []


def not_converged(converged: bool, message: str) -> list[str]:
    return [] if converged else [f"the solver did not converge ({message})"]


def pinned_E(E: float, y_min: float) -> None:
    """Refuse an asymptote given (`--E`) that is not in [0, the smallest loss): no power law falls to it."""
    if not 0 <= E < y_min:
        raise GivenValueError(f"pinned E = {E:g} (--E) must be in [0, the smallest loss {y_min:.6g}): the asymptote "
                              "lies below every loss the law fits")


def E_at_bound(E: float, y_min: float, pinned: bool) -> list[str]:
    if pinned:
        return []
    if E <= 1e-9 * y_min:
        return ["E at its lower bound 0: the data do not pin the irreducible loss; pin E or add runs"]
    if E >= (1 - 1e-6) * y_min:
        return ["E at its upper bound (the smallest loss): the fit is not a power law; check the runs"]
    return []


def at_bound(name: str, value: float, lo: float, hi: float) -> list[str]:
    span = hi - lo
    if value <= lo + 1e-9 * span or value >= hi - 1e-9 * span:
        return [f"{name} = {value:.4g} sits at its bound [{lo:g}, {hi:g}]"]
    return []


def too_wide(lo: np.ndarray, hi: np.ndarray, pred: np.ndarray, max_rel_width: float = MAX_REL_WIDTH) -> list[str]:
    width = (np.asarray(hi) - np.asarray(lo)) / np.asarray(pred)
    worst = float(np.nanmax(width)) if np.size(width) else 0.0
    if not np.isfinite(worst) or worst > max_rel_width:
        return [f"interval too wide to act on: {worst:.1%} of the prediction (limit {max_rel_width:.0%})"]
    return []


OFF_LAW = 0.05
"""How far (relative) a run may sit off the fitted law before it is named, when the other runs sit ten times
closer: seeds differ by 0.1–0.3% in final loss, and a run 5% off is another recipe, a crashed run or a typo."""


def far_off(loss: np.ndarray, fitted: np.ndarray, tol: float = OFF_LAW) -> np.ndarray:
    """The positions of the runs the fitted law misses by more than `tol` and by ten times the runs' median miss."""
    size = np.abs(np.asarray(loss, dtype=np.float64) / np.asarray(fitted, dtype=np.float64) - 1)
    return np.flatnonzero((size > tol) & (size > 10 * np.median(size)))


def off_the_law(loss: np.ndarray, fitted: np.ndarray, where, tol: float = OFF_LAW, names=None) -> list[str]:
    """A warning naming the run (`where(i)` says where run i sits, e.g. "at C = 1e18"; asked only of the run
    named, as a fit refitted many times names none; `names`, where given, the runs' names, said first) that the
    fitted law misses by more than `tol` and by ten times the median miss of the runs, with how many more there
    are."""
    far = far_off(loss, fitted, tol)
    if not far.size:
        return []
    miss = np.asarray(loss, dtype=np.float64) / np.asarray(fitted, dtype=np.float64) - 1
    size = np.abs(miss)
    order = far[np.argsort(-size[far], kind="stable")]
    i = int(order[0])

    def off(j: int) -> str:
        return f"{miss[j]:+.1%} off" if size[j] < 10 else f"{miss[j] + 1:.3g}×"  # a loss off by digits: as a ratio

    def run(j: int) -> str:  # runs of one size and length share their coordinates: the name tells them apart
        return where(j) if names is None else f"{str(names[j])!r} {where(j)}"

    also = "".join(f"; {run(int(j))}, {off(int(j))}" for j in order[1:NAMED])
    rest = f" and {len(order) - NAMED} more" if len(order) > NAMED else ""
    runs = "runs" if len(order) > 2 else "run"
    return [f"the run {run(i)} ends at {loss[i]:.4g}, {off(i)} the fitted law where the runs' median miss is "
            f"{np.median(size):.2%}" + (f" (also the {runs} {also[2:]}{rest})" if also else "") + ": another recipe, a "
            f"crashed run, a typo, or a run outside the law's reach? Check {'them' if also else 'it'}, or leave "
            f"{'them' if also else 'it'} out and fit again"]


NAMED = 5
"""How many runs off the law a warning names (the worst first); the rest it counts."""


def _above(rise: float) -> str:
    """"2.50% above", or for a loss off by digits "1e+05× the loss of"."""
    return f"{rise:.2%} above" if rise < 10 else f"{rise + 1:.3g}× the loss of"


def and_more(found, what: str = "") -> str:
    """" (and 2 more such runs)" after the first of `found` is named; "" for one."""
    return f" (and {len(found) - 1} more{' such ' + what if what else ''})" if len(found) > 1 else ""


RISE_TOL = 0.005
"""How far (relative) a run's final loss may sit above that of a shorter run of the same size before it is
flagged: past the seed-to-seed spread of final losses (0.1–0.3% on public ladders)."""


def rises_with_size(group, size, loss, tol: float = RISE_TOL) -> list[tuple[float, int, int]]:
    """(rise, i, j) for each run i that ends more than `tol` above the lowest-ending smaller run j of its group
    (runs of one group share a recipe and token ratio, so a larger model should end lower), worst first."""
    group, size, loss = (np.asarray(a) for a in (group, size, loss))
    found = []
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        for i in idx:
            smaller = idx[size[idx] < size[i]]
            if smaller.size:
                j = int(smaller[np.argmin(loss[smaller])])
                rise = float(loss[i] / loss[j] - 1)
                if rise > tol:
                    found.append((rise, int(i), j))
    return sorted(found, reverse=True)


def rises_with_tokens(n_params: np.ndarray, tokens: np.ndarray, loss: np.ndarray, tol: float = RISE_TOL) -> list[str]:
    """Warn where a run of one size ends above a run of that size trained on fewer tokens: more data should
    not raise the final loss of one recipe, so one of the two is likely another checkpoint, recipe or eval."""
    found = []
    for n in np.unique(n_params):
        idx = np.flatnonzero(n_params == n)
        idx = idx[np.argsort(tokens[idx], kind="stable")]
        for k in range(1, idx.size):
            shorter = idx[:k][tokens[idx[:k]] < tokens[idx[k]]]
            if shorter.size:
                low = shorter[np.argmin(loss[shorter])]
                rise = loss[idx[k]] / loss[low] - 1
                if rise > tol:
                    found.append((rise, n, tokens[idx[k]], tokens[low]))
    if not found:
        return []
    rise, n, d, d0 = max(found)
    more = and_more(found, "runs")
    digits = 3
    while f"{d:.{digits}g}" == f"{d0:.{digits}g}" and digits < 17:  # token counts that differ past 3 digits
        digits += 1
    return [f"at N = {n:.3g} the run on {d:.{digits}g} tokens ends {_above(rise)} the one on {d0:.{digits}g}{more}: more tokens "
            "should not raise the final loss of one size; check those runs (another checkpoint, learning rate, recipe or eval?)"]


MOST_NATS = 14.0
"""Above this, a final loss is no cross-entropy in nats: ln of a vocabulary of a million tokens is 13.8."""
LEAST_FLOPS = 1e10
"""Below this, a run's compute is in other units (GFLOPs, PF-days, exaFLOPs): a 10k-parameter model on 200k tokens
takes 1.2e10 FLOPs, and a ladder's smallest rung many times more."""
LEAST_COUNTED = 1e3
"""Below this a parameter or token count is written in millions or billions (70 for 70M), not counted: no sign of
swapped columns."""
RISE_CORR = 0.5
"""A rank correlation of final loss with compute above this (over 4 runs or more) is no scaling ladder."""


def units_warnings(loss: np.ndarray, compute: np.ndarray | None = None, n_params: np.ndarray | None = None,
                   tokens: np.ndarray | None = None, counted: bool = False) -> list[str]:
    """Warnings for inputs that fit without complaint but are likely not what the laws take: a loss that is a
    perplexity, compute in PF-days (unless `counted` from N and D), a loss that rises with compute, parameters and
    tokens swapped."""
    from scipy.stats import spearmanr

    loss = np.asarray(loss, dtype=np.float64)
    out = []
    if loss.max() > MOST_NATS:
        out.append(f"losses run up to {loss.max():.4g}: no cross-entropy in nats is that high (ln of a million-token "
                   f"vocabulary is {np.log(1e6):.1f}); is it a perplexity (fit its log) or another column?")
    if compute is not None and not counted and np.min(compute) < LEAST_FLOPS:
        out.append(f"compute as small as {np.min(compute):.3g}: compute is counted in FLOPs (a 10k-parameter model on "
                   f"200k tokens takes 1.2e10); in GFLOPs, multiply by 1e9, in PF-days, multiply by 8.64e19")
    if compute is not None and loss.size >= 4 and np.unique(compute).size >= 4:
        rho = float(spearmanr(compute, loss).statistic)
        if rho > RISE_CORR:
            out.append(f"the loss rises with compute (rank correlation {rho:+.2f}): a scaling ladder's falls; is the "
                       "loss column a loss (not an accuracy), and the compute column its runs' compute?")
    counts = n_params is not None and tokens is not None and min(np.min(n_params), np.min(tokens)) >= LEAST_COUNTED
    if counts and np.all(np.asarray(tokens) < np.asarray(n_params)):  # (in millions or billions: another warning's)
        ratio = np.asarray(tokens, dtype=np.float64) / np.asarray(n_params, dtype=np.float64)
        out.append(f"every run sees fewer tokens than it has parameters ({ratio.min():.3g}–{ratio.max():.3g} tokens "
                   "per parameter): are the parameter and token columns swapped, or the tokens counted in sequences "
                   "or batches?")
    return out
