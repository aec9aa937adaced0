"""E from every run of a ladder (`fits.asymptote`, `--E ladder`): recovered from a ladder of several token
ratios drawn from a known surface, refused where the ladder cannot pin it, and used by the per-fraction law."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fits import FitError
from fits import predictor as core
from fits.asymptote import classes, ladder_E
from fits.candidates import Options
from fits.runs import Run

TPS = 4096.0
E_TRUE, A, B, ALPHA = 1.8, 400.0, 900.0, 0.32


def surface_run(name: str, n: float, ratio: float, rng, noise: float = 0.002) -> Run:
    """Evals every 5% of a run of n parameters at `ratio` tokens per parameter; the loss at tokens d seen so
    far is E + A/N^α + B/d^α (a one-exponent Chinchilla surface along the run)."""
    T = int(round(ratio * n / TPS))
    steps = np.round(np.arange(1, 21) * 0.05 * T).astype(np.int64)
    d = steps * TPS
    values = (E_TRUE + A / n**ALPHA + B / d**ALPHA) * np.exp(rng.normal(0, noise, steps.size))
    return Run(name, 6 * n, TPS, T, steps=steps, values=values, n_params=n)


def ladder(ratios=(10.0, 20.0, 40.0), n_sizes=5, seed=0) -> tuple[list[Run], Run]:
    rng = np.random.default_rng(seed)
    ns = 1e6 * 2.0 ** np.arange(n_sizes)
    runs = [surface_run(f"n{i}-r{r:g}", n, r, rng) for i, n in enumerate(ns) for r in ratios]
    hero = surface_run("hero", ns[-1] * 8, 20.0, rng, noise=0.0)
    return runs, hero


def test_several_token_ratios_pin_the_ladder_E():
    runs, _ = ladder()
    got = ladder_E(runs)
    assert got is not None and got.n_runs == 15 and got.n_ratios == 3
    assert abs(got.E - E_TRUE) < 2.5 * got.se and got.se < 0.3
    assert "surface of 15 runs' final losses (3 token ratios)" in got.why()


def test_the_ladder_cannot_pin_E_without_several_ratios_and_sizes():
    runs, _ = ladder(ratios=(20.0,))
    assert ladder_E(runs) is None  # one token ratio
    runs, _ = ladder(n_sizes=2)
    assert ladder_E(runs) is None  # two sizes
    runs, _ = ladder()
    assert ladder_E([dataclasses.replace(r, n_params=None) for r in runs]) is None  # no parameter counts
    crashed = [dataclasses.replace(r, steps=r.steps[:10], values=r.values[:10], finished=False) for r in runs]
    assert ladder_E(crashed) is None  # no final losses
    assert classes(np.array([20.0, 20.1, 40.0])) == 2


def test_the_per_fraction_law_takes_the_ladder_E_when_asked():
    runs, hero = ladder()
    blank = dataclasses.replace(hero, steps=np.zeros(0), values=np.zeros(0))
    named = core.Settings(method="per-fraction", candidates=("per-fraction",), options=Options(n_boot=40, E_from="ladder"))
    res = core.predict(runs, blank, hero.steps, named)
    out = res.outcomes["per-fraction"]
    assert out.params["E_from"] == "ladder surface" and "token ratios)" in out.why
    assert abs(out.params["E"] - E_TRUE) < 2.5 * out.params["E_se"]
    err = res.band.median[-1] / hero.values[-1] - 1
    assert abs(err) < 0.005  # 8× the largest rung
    inside = (res.band.lo90 <= hero.values) & (hero.values <= res.band.hi90)
    assert inside.mean() >= 0.8
    # the default fits E at the target's ratio, and says so
    fitted = core.predict(runs, blank, hero.steps, dataclasses.replace(named, options=Options(n_boot=40)))
    assert fitted.outcomes["per-fraction"].params["E_from"] == "fitted"
    assert "E fitted at the target's token ratio" in fitted.outcomes["per-fraction"].why
    assert "as asked" not in fitted.outcomes["per-fraction"].why
    # asked for on a ladder of one token ratio: fitted at the target's, and the why says it could not be had
    one, hero1 = ladder(ratios=(20.0,))
    blank1 = dataclasses.replace(hero1, steps=np.zeros(0), values=np.zeros(0))
    asked = core.predict(one, blank1, hero1.steps, named).outcomes["per-fraction"]
    assert asked.params["E_from"] == "fitted"
    assert "E fitted at the target's token ratio (E from the whole ladder, as asked, needs" in asked.why
    with pytest.raises(FitError, match="unknown E source"):
        core.predict(runs, blank, hero.steps, dataclasses.replace(named, options=Options(E_from="surface")))
