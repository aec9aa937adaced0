"""Two ladders from the store, compared as a compute-equivalent multiplier (`ladder compare`).

Reads each group's finished rungs (final value of the fit metric, fit compute = fit FLOPs per token
× tokens per step × planned steps), hands them to `fits.compare`, and turns the result into the JSON
and the figure the command writes. The hero's compute comes from its run config, from a number, or,
when neither is given, is ten times the largest rung's compute (the result says which).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fits.compare import Comparison, compare_ladders
from ladder.check import (
    HeroCompute,
    below_smallest,
    hero_file,
    hero_from_config,
    not_logged,
    other_group,
    stored_hero,
)
from ladder.config.limits import hero_flops
from ladder.data.runview import (
    SIX_N,
    flops_per_token,
    last_as_read,
    named,
    ran_its_plan,
    role_hint,
    six_n_note,
    trainable_ratio,
)
from ladder.data.store import PULL_FIRST, Store
from ladder.errors import LadderError

MIN_RUNGS = 3
DEFAULT_REACH = 10.0
"""Without a hero: the target is this many times the largest rung's compute."""
CONVENTION = "m(C) = C_B(L_A(C)) / C: compute B needs to reach the loss A reaches at C, over C; > 1: B is worse"


@dataclass(frozen=True)
class GroupFinals:
    """One group's rungs, by fit compute: final loss (nats per token) at fit compute (FLOPs)."""

    group: str
    names: list[str]
    compute: np.ndarray
    loss: np.ndarray
    left_out: tuple[str, ...] = ()
    """Rungs of the group that are not used, each with the reason."""
    six_n: tuple[str, ...] = ()
    """Rungs whose compute is 6·N·D: their coordinates give N but no fit FLOPs per token."""
    store: str = ""
    """The store it was read from."""
    six_nd: np.ndarray | None = None
    """Each rung's 6·N·D (NaN where it gives no N): the axis both ladders are put on where one counts fit FLOPs and
    the other cannot."""

    def on_six_nd(self) -> GroupFinals:
        """The same rungs at 6·N·D (every one gives N)."""
        order = np.argsort(self.six_nd, kind="stable")
        return dataclasses.replace(self, names=[self.names[i] for i in order], compute=self.six_nd[order],
                                   loss=self.loss[order], six_nd=self.six_nd[order])


@dataclass(frozen=True)
class GroupComparison:
    a: GroupFinals
    b: GroupFinals
    metric: str
    target: HeroCompute
    result: Comparison
    notes: tuple[str, ...] = ()
    """Warnings of the comparison's inputs (a hero of another group)."""
    six_nd: bool = False
    """Both ladders (and the target) are on 6·N·D: some rung of either gives only N (`_one_axis`)."""

    def label(self, g: GroupFinals) -> str:
        """The group's name, and its store's where the two ladders come from two stores."""
        return g.group if self.a.store == self.b.store else f"{g.group} (in {g.store})"


def group_finals(store: Store, group: str, metric: str) -> GroupFinals:
    """The finished rungs of `group` with their final `metric` and fit compute, smallest first."""
    runs = store.runs()
    known = sorted(set(runs["group"].dropna()))
    if group not in known:
        raise LadderError(f"no group {group!r} in {store.root}; groups there: {', '.join(known) or 'none'}")
    in_group = runs[runs["group"] == group]
    runs = in_group[in_group["role"] == "rung"]
    hist = store.history(list(runs["run_id"]), [metric], include_nonfinite=True) if len(runs) else None
    if hist is not None and hist.empty:
        not_logged(store, runs, group, metric)
    names, compute, loss, left_out, six_n, six_nd = [], [], [], [], [], []
    for row in runs.to_dict("records"):
        why, value = _final(store, row, hist, metric)
        if why:
            left_out.append(f"{row['name']}: {why}")
            continue
        per_token, source = flops_per_token(str(row["name"]), row)
        names.append(str(row["name"]))
        tokens = float(row["tokens_per_step"]) * float(row["stop_after_steps"])
        compute.append(per_token * tokens)
        n = pd.to_numeric(row.get("active_params"), errors="coerce")
        known = bool(pd.notna(n) and n > 0)
        if known:
            trainable_ratio(f"rung {row['name']!r} of {group!r}", float(n), tokens)
        six_nd.append(6.0 * float(n) * tokens if known else np.nan)
        loss.append(value)
        if source == SIX_N:
            six_n.append(str(row["name"]))
    if len(names) < MIN_RUNGS:
        extra = f" ({'; '.join(left_out)})" if left_out else ""
        raise LadderError(f"group {group!r} has {len(names)} finished rung{'' if len(names) == 1 else 's'} with a final {metric!r}, "
                          f"a comparison needs at least {MIN_RUNGS}{extra}" + role_hint(in_group, "rung", role_option=False,
                                                                      whose=f"the runs of group {group!r}"))
    order = np.argsort(compute, kind="stable")
    return GroupFinals(group, [names[i] for i in order], np.asarray(compute)[order], np.asarray(loss)[order],
                       tuple(left_out), tuple(six_n), str(store.root), np.asarray(six_nd, dtype=np.float64)[order])


SAME_SIZE = 1.5
"""Two rungs of the two ladders whose computes lie within this factor of each other are of one size (as
`fits.compare` warns of paired rungs further apart)."""


SAME_RUN = 1.01
"""Two rungs of one ladder whose computes lie within this factor of each other are runs of one size and plan (a
seed's rerun)."""


def _partnered(a: GroupFinals, b: GroupFinals) -> tuple[GroupFinals, GroupFinals]:
    """Where one ladder has more usable rungs than the other (a rung crashed): each rung of the shorter ladder with
    the rung of the other nearest it in compute, where each has its own within `SAME_SIZE`; the other's rungs with
    no partner are left out, and said."""
    short, long_ = (a, b) if a.loss.size < b.loss.size else (b, a)
    near = [int(np.argmin(np.abs(np.log(long_.compute / c)))) for c in short.compute]
    apart = [float(max(long_.compute[j] / c, c / long_.compute[j])) for j, c in zip(near, short.compute)]
    if len(set(near)) < len(near) or max(apart) > SAME_SIZE or len(short.names) < MIN_RUNGS:
        left = "".join(f"; {g.group!r} leaves out {'; '.join(g.left_out)}" for g in (a, b) if g.left_out)
        shared = [i for i, j in enumerate(near) if near.count(j) > 1][1:]  # a rung of `long_` nearest two of `short`
        lone = next((i for i, x in enumerate(apart) if x > SAME_SIZE), shared[0] if shared else None)
        which = "" if lone is None else (f" ({short.names[lone]!r}, at C = {short.compute[lone]:.3g}, has none"
                                         + ("" if apart[lone] > SAME_SIZE else " of its own") + ")")
        raise LadderError(f"group {a.group!r} has {a.loss.size} usable rungs and {b.group!r} has {b.loss.size}, and "
                          f"not every rung of {short.group!r} has one of {long_.group!r} within {SAME_SIZE:g}× its "
                          f"compute to pair with{which}; rungs are paired by size, so both need the same sizes{left}")
    alone = [i for i in range(long_.loss.size) if i not in near]

    def why(i: int) -> str:  # a second run of a size the other ladder has (a seed's rerun) is not a missing size
        twin = next((j for j in near if abs(np.log(long_.compute[j] / long_.compute[i])) < np.log(SAME_RUN)), None)
        return (f"no rung of {short.group!r} of its size to pair with" if twin is None else
                f"a second rung of its size ({long_.names[twin]} is the one paired; a comparison takes one rung a "
                "size)")
    kept = dataclasses.replace(
        long_, names=[long_.names[i] for i in near], compute=long_.compute[near], loss=long_.loss[near],
        left_out=long_.left_out + tuple(f"{long_.names[i]}: {why(i)}" for i in alone))
    return (short, kept) if short is a else (kept, short)


def _final(store: Store, row: dict[str, Any], hist, metric: str) -> tuple[str, float]:
    """(reason the run cannot be used, '' if it can; its final value). A metric logged far more often than the
    run's evals (a per-step train loss) is read at its last step as the fits read it (`runview.at_evals`), not
    taken from its last, noisy value."""
    if row["state"] != "finished":
        return f"state {row['state']}", math.nan
    for col in ("tokens_per_step", "stop_after_steps"):
        if _missing(row[col]):
            return f"no {col.replace('_', ' ')} in its coordinates", math.nan
    h = hist[hist["run_id"] == row["run_id"]]
    if h.empty:
        return f"no {metric!r} values", math.nan
    last = h.sort_values("step").iloc[-1]
    value = float(last["value"])
    if not math.isfinite(value):
        return f"its last {metric!r}, at step {int(last['step']):,}, is not finite ({value})", math.nan
    if not ran_its_plan(str(row["state"]), int(last["step"]), int(row["stop_after_steps"])):
        return f"last {metric!r} at step {int(last['step']):,} of {int(row['stop_after_steps']):,}", math.nan
    if value <= 0:
        return f"its final {metric!r} is {value:g}, not a positive loss", math.nan
    return "", last_as_read(store, str(row["run_id"]), int(row["stop_after_steps"]), h["step"].to_numpy(),
                            h["value"].to_numpy(float), value)


def _missing(value: Any) -> bool:
    try:
        return value is None or bool(np.isnan(value))
    except TypeError:
        return False


def target_compute(hero: Path | None, flops: float | None, largest: float, by_params: bool = False,
                   stored: HeroCompute | None = None) -> HeroCompute:
    """The hero's fit compute from its config (6·N·D with `by_params`: every rung's compute is), from `flops`, the
    hero in the store (`stored`, as `ladder check` takes it), or `DEFAULT_REACH` × the largest rung's."""
    if hero is not None and flops is not None:
        raise LadderError("give --hero CONFIG.yaml or --hero-compute FLOPS, not both")
    if hero is not None:
        return hero_from_config(hero_file(hero), by_params)
    if flops is not None:
        return HeroCompute(hero_flops("--hero-compute", flops), "--hero-compute" + (
            ", read as 6·N·D as the rungs' computes are" if by_params else ""))
    if stored is not None:
        return stored
    return HeroCompute(DEFAULT_REACH * largest, "default (no --hero or --hero-compute given, and no hero run of "
                                                "either group in the store)")


def compare_groups(store: Store, group_a: str, group_b: str, *, metric: str | None = None,
                   hero: Path | None = None, hero_compute: float | None = None, E: str | float = "shared",
                   n_boot: int = 1000, seed: int = 0, store_b: Store | None = None) -> GroupComparison:
    """Compare group B (of `store_b`, else of `store`) with group A (see `fits.compare`): rungs paired by rank of
    compute."""
    store.must_exist(PULL_FIRST)
    store_b = store if store_b is None or store_b.root.resolve() == store.root.resolve() else store_b
    if store_b is not store:
        store_b.must_exist(PULL_FIRST.replace("--store", "--store-b"))
    elif group_a == group_b:
        raise LadderError(f"both groups are {group_a!r}: compare two different ladders (`ladder runs` lists the groups; "
                          "two ladders of one group name, in two stores: --store-b)")
    metric = metric or store.settings().fit_metric
    a, b = group_finals(store, group_a, metric), group_finals(store_b, group_b, metric)
    a, b, axis = _one_axis(a, b)
    if a.loss.size != b.loss.size:
        a, b = _partnered(a, b)
    by_params = bool(axis) or (len(a.six_n) == len(a.names) and len(b.six_n) == len(b.names))
    stored = None
    if hero is None and hero_compute is None:  # the reference ladder's hero in the store, else B's, as check takes it
        for st, g in ((store, group_a), (store_b, group_b)):
            runs = st.runs()
            if (stored := stored_hero(st, runs[runs["group"] == g], by_params)) is not None:
                break
    target = target_compute(hero, hero_compute, float(max(a.compute.max(), b.compute.max())), by_params, stored)
    least = min((a, b), key=lambda g: g.compute.min())
    i = int(np.argmin(least.compute))
    below_smallest(target, f"{least.names[i]} of {least.group!r}", float(least.compute[i]))
    if n_boot < 0:
        raise LadderError(f"--bootstrap {n_boot}: must be 0 or more")
    result = compare_ladders(a.compute, a.loss, b.compute, b.loss, target.flops, E=E, n_boot=n_boot, seed=seed)
    notes = () if hero is None else other_group(hero, (group_a, group_b), f"the ladders compared of {group_a!r} and "
                                                                           f"{group_b!r}")
    return GroupComparison(a, b, metric, target, result, axis + notes, by_params)


ONE_AXIS = "both ladders are compared on 6·N·D"


def _one_axis(a: GroupFinals, b: GroupFinals) -> tuple[GroupFinals, GroupFinals, tuple[str, ...]]:
    """Both ladders on one compute axis: where some rungs count fit FLOPs and others only give N (6·N·D, which leaves
    attention out: OLMo's 190M is 1.8× apart on the two), both go on 6·N·D, said; a rung without N then is refused."""
    every = [*a.names, *b.names]
    counted = len(a.six_n) + len(b.six_n)
    if counted in (0, len(every)):
        return a, b, ()
    if np.isnan(np.r_[a.six_nd, b.six_nd]).any():
        fit = [n for g in (a, b) for n, c in zip(g.names, g.six_nd) if np.isnan(c)][:3]
        raise LadderError(f"{named(list(a.six_n + b.six_n))} give no fit FLOPs per token (their compute is 6·N·D) and "
                          f"{', '.join(fit)} no N, so the two ladders' computes are on no one axis: give the rungs' "
                          "fit_flops_per_token, or every rung's active_params")
    said = (f"{named(list(a.six_n + b.six_n))} give no fit FLOPs per token: {ONE_AXIS} (parameters × tokens), which "
            "every rung gives, not on fit FLOPs, which count attention too")
    return a.on_six_nd(), b.on_six_nd(), (said,)


def _not_above(cmp: GroupComparison) -> tuple[str, ...]:
    """A warning where the target's compute is not above the largest rung of either group."""
    from ladder.check import not_above

    group = max((cmp.a, cmp.b), key=lambda g: g.compute.max())
    return not_above(cmp.target, f"{group.names[-1]} of {group.group!r}", float(group.compute.max()))


# ---- JSON -------------------------------------------------------------------------------------------
def _num(x: Any) -> float | None:
    """A finite float, or None (JSON has no infinity: B never reaching A's loss is null)."""
    v = float(x)
    return v if math.isfinite(v) else None


def _band_at(result: Comparison, i: int, band=None) -> dict[str, float | None]:
    """The bootstrap's median and bands at index `i`; without resamples (--bootstrap 0) there are no bands: null."""
    b = band or result.band
    return {k: _num(getattr(b, k)[i]) if result.n_boot or k == "median" else None
            for k in ("median", "lo50", "hi50", "lo90", "hi90")}


def _E(result: Comparison) -> dict[str, Any]:
    if result.E_mode == "separate":
        return {"mode": "separate", "E_a": result.law_a.E, "E_b": result.law_b.E}
    return {"mode": result.E_mode, "value": result.law_a.E}


def to_json(cmp: GroupComparison) -> dict[str, Any]:
    """Every number of the comparison, with units and conventions."""
    r = cmp.result
    rungs = [
        {"rung_a": na, "rung_b": nb, "compute": float(c), "multiplier": _num(m), **_band_at(r, i)}
        for i, (na, nb, c, m) in enumerate(zip(cmp.a.names, cmp.b.names, r.compute_a, r.multiplier[:-1]))
    ]
    gap = r.loss_gap_band
    return {
        "metric": cmp.metric,
        "units": {"compute": "6·N·D (6 × active parameters × tokens) for every rung and the target: some rungs give "
                             "only N (the warnings name them)" if cmp.six_nd else
                             "fit FLOPs (3 × forward without the output head × tokens); 6·N·D for a rung whose "
                             "coordinates give only N (the warnings name them)", "loss": "nats per token"},
        "groups": {key: _group_json(g, law, cmp.label(g)) for key, g, law in (("a", cmp.a, r.law_a),
                                                                              ("b", cmp.b, r.law_b))},
        "law": "L(C) = E + A·C^-alpha",
        "E": _E(r),
        "pairing": "rungs paired by rank of compute (i-th smallest of A with i-th smallest of B)",
        "multiplier": {
            "convention": CONVENTION,
            "rungs": rungs,
            "target": {"compute": r.target, "source": cmp.target.source,
                       "extrapolation": r.target / float(max(r.compute_a.max(), r.compute_b.max())),
                       "multiplier": _num(r.multiplier_target), **_band_at(r, -1)},
        },
        "loss_at_target": {
            "a": r.loss_target_a, "b": r.loss_target_b, "difference": r.loss_gap,
            "convention": "B − A in nats per token; > 0: B is worse",
            **_band_at(r, 0, gap),
        },
        "bootstrap": {"method": "paired over sizes: size indices drawn with replacement, both laws refitted",
                      "n": r.n_boot, "failed": r.failed, "seed": r.seed, **({"no_bands": r.no_bands} if r.no_bands else {})},
        "warnings": list(cmp.notes) + list(r.warnings) + ([] if any(ONE_AXIS in n for n in cmp.notes) else
                                                          six_n_note(list(cmp.a.six_n + cmp.b.six_n)))
        + list(_not_above(cmp)),
    }


def _group_json(g: GroupFinals, law, label: str) -> dict[str, Any]:
    return {
        "group": g.group,
        "store": g.store,
        "label": label,
        "rungs": [{"name": n, "compute": float(c), "loss": float(y)} for n, c, y in zip(g.names, g.compute, g.loss)],
        "fit": {"E": law.E, "A": law.A, "alpha": law.alpha},
        "left_out": list(g.left_out),
    }


OUTPUT_FILES = ("compare.png", "compare.json")


def written_here(path: Path) -> bool:
    """Whether `path`, one of `OUTPUT_FILES` in an --out folder, is an earlier output of `ladder compare`: the JSON by
    its keys, the figure by its metadata (`plots.FIGURE_TAG`) or by such a JSON beside it (a figure drawn before
    figures carried the tag)."""
    from ladder.output.plots import drawn_here

    if path.suffix == ".png":
        return drawn_here(path) or written_here(path.with_name("compare.json"))
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"metric", "groups", "pairing", "multiplier"} <= set(data)


# ---- figure -----------------------------------------------------------------------------------------
def ratio_ticks(low: float, high: float, most: int = 7) -> list[float]:
    """Round ratios between `low` and `high` for a log axis: the finest of the steps 1-1.1-1.2-…, 1-1.5-2-3-5-7,
    1-2-5 and 1 a decade that gives at least three and at most `most` of them, else 1-2-5 (its fewest)."""
    fine = [1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    ladders = (fine, [1.0, 1.5, 2.0, 3.0, 5.0, 7.0], [1.0, 2.0, 5.0], [1.0])
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    found = []
    for subs in ladders:
        ticks = [round(k * 10.0**e, 12) for e in decades for k in subs if low <= k * 10.0**e <= high]
        found.append(ticks)
        if 3 <= len(ticks) <= most:
            return ticks
    return found[2]


def draw(cmp: GroupComparison, out_dir: Path) -> Path:
    """Both ladders' rungs and fits against compute, and the multiplier with its bands; a PNG."""
    from ladder.output.plots import FIGURE_TAG, use_agg_outside_ipython

    use_agg_outside_ipython()
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from ladder.files import atomic_path

    r = cmp.result
    lo = float(min(r.compute_a.min(), r.compute_b.min())) / 1.5
    grid = np.geomspace(lo, max(r.target, float(r.compute_a.max()), float(r.compute_b.max())) * 1.5, 200)
    fig, (ax, mx) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, g, law, color in (("A", cmp.a, r.law_a, "#2c7fb8"), ("B", cmp.b, r.law_b, "#d95f0e")):
        ax.scatter(g.compute, g.loss, color=color, zorder=3, label=f"{label}: {cmp.label(g)} rungs")
        ax.plot(grid, law.predict(grid), color=color, lw=1.2,
                label=f"{label} fit: E {law.E:.3f}, α {law.alpha:.3f}")
        ax.scatter([r.target], [law.predict(r.target)], color=color, marker="*", s=120, zorder=4)
    ax.axvline(r.target, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("compute C = 6·N·D (FLOPs, both ladders)" if cmp.six_nd else
                  "fit compute C (FLOPs, 3 × forward without head × tokens)")
    ax.set_ylabel(f"final {cmp.metric} (nats per token)")
    ax.set_title(f"fits with E {r.E_mode}; ★ at the target ({cmp.target.source.split(' (')[0]})", fontsize=9)
    ax.legend(fontsize=8)

    with np.errstate(all="ignore"):
        mx.plot(grid, r.multiplier_at(grid), color="black", lw=1.2, label="m(C), full fit")
    b, by = r.band, np.argsort(r.at, kind="stable")  # a target among the rungs comes last in `at`: in its place
    if r.n_boot:  # --bootstrap 0: no resamples, no bands
        mx.fill_between(r.at[by], b.lo90[by], b.hi90[by], color="#bbbbbb", alpha=0.5, label="90% band (paired bootstrap)")
        mx.fill_between(r.at[by], b.lo50[by], b.hi50[by], color="#888888", alpha=0.5, label="50% band")
    mx.scatter(r.at, r.multiplier, color="black", zorder=3)
    mx.axhline(1.0, color="grey", lw=0.8)
    mx.axvline(r.target, color="grey", ls=":", lw=1)
    mx.set_xscale("log")
    mx.set_yscale("log")
    low, high = mx.get_ylim()  # multipliers all near 1 (no difference): a span of a rounding error, ticks all "1"
    if high / low < 1.5:
        mid = math.sqrt(low * high)
        mx.set_ylim(mid / math.sqrt(1.5), mid * math.sqrt(1.5))
    low, high = mx.get_ylim()  # labels at a few round ratios, none beside another (0.9 sat on 1)
    mx.yaxis.set_major_locator(matplotlib.ticker.FixedLocator(ratio_ticks(low, high)))
    mx.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
    mx.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    mx.set_xlabel(f"{'compute C = 6·N·D' if cmp.six_nd else 'fit compute C'} of A (FLOPs)")
    mx.set_ylabel("compute multiplier of B (> 1: B is worse)")
    m_target = f"{r.multiplier_target:.3g}" if np.isfinite(r.multiplier_target) else "never (B does not reach A's loss)"
    mx.set_title(f"{cmp.label(cmp.b)} vs {cmp.label(cmp.a)}: m at target {m_target}", fontsize=9)
    mx.legend(fontsize=8)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "compare.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=130, metadata={"Software": FIGURE_TAG})
    plt.close(fig)
    return path
