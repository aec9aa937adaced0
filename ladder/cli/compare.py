"""`ladder compare GROUP_A GROUP_B`: how much more compute ladder B needs to reach ladder A's loss.

Prints the compute-equivalent multiplier at each rung and at the hero's compute with its bands, and
the loss each ladder predicts at the hero; writes compare.png and compare.json to --out.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from ladder.cli.app import Format, command, console, print_json, warn
from ladder.config.limits import resamples
from ladder.errors import LadderError
from ladder.files import write_text_atomic
from ladder.outpaths import out_dir


@command("compare")
def compare_command(
    group_a: str = typer.Argument(..., help="Group of the reference ladder A (see `ladder runs`)."),
    group_b: str = typer.Argument(..., help="Group of ladder B, the same sizes with one recipe choice changed."),
    store: Path | None = typer.Option(None, "--store", help="Store folder holding both ladders, or ladder A where --store-b holds B (default: .ladder/)."),
    store_b: Path | None = typer.Option(None, "--store-b", help="Store folder holding ladder B, where it is not in --store: two ladders planned from one recipe have the same run ids, so each is pulled into a store of its own (GROUP_B may then be GROUP_A)."),
    metric: str | None = typer.Option(None, "--metric", help="Metric whose final value is compared (default: the store's fit metric, eval/loss)."),
    hero: Path | None = typer.Option(None, "--hero", help="The hero's run config (YAML from `ladder plan`) or target file (as `ladder predict --target` takes it): the target is its fit compute over the steps of the plan it starts with, before any planned cut of its horizon (as `ladder predict` counts it; `plan` and `spec` show the compute after the cut)."),
    hero_compute: float | None = typer.Option(None, "--hero-compute", help="The target's compute in FLOPs (instead of --hero): fit FLOPs, or 6·N·D where the rungs' computes are (said)."),
    E: str = typer.Option("shared", "--E", help="Irreducible loss: 'shared' (one fitted for both ladders), 'separate', or a number to pin it."),
    n_boot: int = typer.Option(1000, "--bootstrap", help="Paired resamples over sizes for the bands (0: none; else 2 to 10,000)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the bootstrap resampling (0 to 2³² − 1)."),
    out: Path = typer.Option(Path("compare"), "--out", help="Folder for compare.png and compare.json."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, or json (the JSON written to --out, on stdout)."),
) -> None:
    """Compare two ladders that differ in one recipe choice (z-loss, data mix, router, ...).

    Each ladder's final losses are fitted with L(C) = E + A·C^-α (fit compute C: 3 × forward FLOPs
    without the head × tokens; 6·N·D for a rung whose coordinates give only N, and the output says so). The multiplier m(C) = C_B(L_A(C)) / C is how much more compute B
    needs to reach the loss A reaches at C: > 1 means B is worse. It is given at each rung and at
    the hero's compute (--hero or --hero-compute; default the hero run of group A in the store, else B's, as
    `ladder check` takes it, else 10× the largest rung of either group; said in the output),
    with 50% / 90% bands from a paired bootstrap over sizes (rungs paired by size: the i-th smallest compute of each), and
    the loss each ladder predicts at the hero. E is shared by default: a few rungs do not pin two
    separate irreducible losses.
    """
    # pandas, scipy and matplotlib: only when comparing, so `ladder --help` stays light
    from ladder.compare import OUTPUT_FILES, compare_groups, draw, to_json, written_here
    from ladder.data.store import DEFAULT_ROOT, Store

    resamples("--bootstrap", n_boot)
    folder = out_dir(out, files=OUTPUT_FILES, ours=(written_here, "an output of `ladder compare`"))
    cmp = compare_groups(Store(store or DEFAULT_ROOT), group_a, group_b, metric=metric, hero=hero, hero_compute=hero_compute,
                         E=_E(E), n_boot=n_boot, seed=seed, store_b=None if store_b is None else Store(store_b))
    data = to_json(cmp)
    png = draw(cmp, folder)
    path = write_text_atomic(folder / "compare.json", json.dumps(data, indent=2) + "\n")
    if fmt is Format.json:
        print_json(data)
        return
    _print(data)
    for w in data["warnings"]:
        warn(w)
    console.print(f"Wrote {png} and {path}", highlight=False)


def _E(text: str) -> str | float:
    if text in ("shared", "separate"):
        return text
    try:
        return float(text)
    except ValueError:
        raise LadderError(f"--E {text!r}: give 'shared', 'separate' or a number (nats) to pin it") from None


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "never" if x is None else format(x, spec)


def _print(data: dict) -> None:
    a, b = data["groups"]["a"], data["groups"]["b"]
    E = data["E"]
    e_text = (f"E separate: A {E['E_a']:.4f}, B {E['E_b']:.4f}" if E["mode"] == "separate"
              else f"E {E['mode']} = {E['value']:.4f}")
    console.print(f"[bold]{escape(b['label'])}[/] (B) against [bold]{escape(a['label'])}[/] (A) on final "
                  f"{escape(data['metric'])}; {e_text}; alpha A {a['fit']['alpha']:.4f}, B {b['fit']['alpha']:.4f}",
                  highlight=False, markup=True)
    t = Table(title="Compute multiplier of B: compute B needs to reach A's loss ÷ A's compute (> 1: B is worse)",
              caption="C: rung A's compute; loss A and loss B: each rung's final loss at its own compute (on the "
                      "target's row, each law's at the target's compute)")
    for col in ("rung A", "rung B", "C of A (FLOPs)", "loss A", "loss B", "multiplier", "50% band", "90% band"):
        t.add_column(col, justify="left" if col.startswith("rung") else "right")
    losses = zip(a["rungs"], b["rungs"])
    resampled = data["bootstrap"]["n"] > 0
    for row, (ra, rb) in zip(data["multiplier"]["rungs"], losses):
        t.add_row(row["rung_a"], row["rung_b"], f"{row['compute']:.3g}", f"{ra['loss']:.4f}", f"{rb['loss']:.4f}",
                  _fmt(row["multiplier"], ".4g"), _range(row, "50", resampled), _range(row, "90", resampled))
    tg, lt = data["multiplier"]["target"], data["loss_at_target"]
    t.add_row("target", "", f"{tg['compute']:.3g}", f"{lt['a']:.4f}", f"{lt['b']:.4f}",
              _fmt(tg["multiplier"], ".4g"), _range(tg, "50", resampled), _range(tg, "90", resampled))
    console.print(t)
    left = [f"{key} ({g['label']}) {'; '.join(g['left_out'])}" for key, g in (("A", a), ("B", b)) if g["left_out"]]
    if left:
        console.print("Left out: " + "; ".join(left), highlight=False,
                      soft_wrap=True)
    console.print(f"Target: {tg['compute']:.3g} FLOPs, {tg['extrapolation']:.3g}× the largest rung's compute of "
                  "either group; "
                  f"from {tg['source']}.", highlight=False)
    boot = data["bootstrap"]
    band = f" (90% band [{_fmt(lt['lo90'], '+.4f')}, {_fmt(lt['hi90'], '+.4f')}])" if boot["n"] else ""
    console.print(f"Loss at the target: A {lt['a']:.4f}, B {lt['b']:.4f}; B − A {lt['difference']:+.4f} nats{band}.",
                  highlight=False)
    if not boot["n"]:
        why = boot.get("no_bands") or "--bootstrap 0: no resamples"
        console.print(f"Bands: none ({why}); rungs paired by size (the i-th smallest compute of each ladder).", highlight=False)
        return
    console.print(f"Bands: {boot['n']} paired resamples over sizes (seed {boot['seed']}"
                  + (f", {boot['failed']} failed" if boot["failed"] else "") + "); rungs paired by size (the i-th smallest compute of each ladder).",
                  highlight=False)


def _range(row: dict, level: str, resampled: bool) -> str:
    if not resampled:  # --bootstrap 0: no band at all (null in the JSON); "never" is a band reaching infinity
        return "–"
    return f"{_fmt(row['lo' + level], '.3g')} .. {_fmt(row['hi' + level], '.3g')}"
