"""Pure math for scaling laws: functional forms, robust fits, curve models, uncertainty, backtests.

Takes numpy arrays and small records; knows nothing of files, wandb or plots. Every fit minimises
one objective (`huber`: mean Huber, δ = 1e-3, on log residuals, float64) and returns an immutable
result with `predict`, `interval`, `summary` and the `warnings` that say when not to trust it.

- `fit_endpoint(compute, loss)`: L(C) = E + A·C^−α on final losses (profile over E).
- `fit_surface(n_params, tokens, loss)`: L(N, D) = E + A/N^α + B/D^β (variable projection; `kaplan=True`:
  E + (A/N^α + B/D^β)^γ); `choose_surface` picks α and β free or one exponent by a backtest on the runs (of an
  isoFLOP sweep given its budgets: by budget, the composed form among them), and carries its error;
  `fits.frontier` gives the least loss of the runs' lower envelope, which its bands also hold.
- `fit_per_fraction(compute, fractions, losses)`: L(g) = E + A_g·(C·g)^−α_g for whole curves
  (`smooth=K`: A_g, α_g smooth in g; `select_smooth` picks K by leaving out one run at a time).
- `fit_multipower(curves)`, `fit_momentum(curves)`: schedule-aware curve laws across runs and sizes.
- `fits.predictor.predict(runs, target, steps)`: the prediction core (`ladder predict` adapts a store to it): a
  target's whole curve from the rungs' (`fits.runs.Run`: coordinates, LR of every step, evals), every candidate
  law backtested on the ladder and the chosen one's 50% / 90% bands (`CorePrediction`); README, "From Python".
- `bootstrap(fit, n)`, `jackknife(fit)`: refits over runs → `Ensemble` with intervals and bands.
- `backtest_*`: fit on smaller runs, predict the larger, score errors and coverage.
- `fits.synthetic`: runs drawn from known laws, for checks and for sizing a ladder.
"""

from fits.backtest import (
    Backtest,
    BacktestRow,
    backtest_curve_law,
    backtest_endpoint,
    backtest_per_fraction,
    backtest_prefix,
    backtest_surface,
)
from fits.curvelaw import Curve, CurveLawFit, FloorProfile, fit_curve_law, profile_floor
from fits.endpoint import EndpointFit, fit_endpoint
from fits.errors import FitError
from fits.momentum import Momentum, fit_momentum
from fits.multipower import MultiPower, fit_multipower
from fits.objective import HUBER_DELTA, huber, log_residuals
from fits.perfraction import (
    Collapse,
    PerFractionFit,
    SmoothChoice,
    fit_per_fraction,
    sample_curve,
    select_smooth,
)
from fits.powerlaw import EProfile
from fits.surface import SurfaceFit, fit_surface
from fits.surfacechoice import SurfaceChoice, choose_surface
from fits.uncertainty import Band, Ensemble, FormSpread, bootstrap, form_spread, jackknife

__all__ = [
    "HUBER_DELTA",
    "Backtest",
    "BacktestRow",
    "Band",
    "Collapse",
    "Curve",
    "CurveLawFit",
    "FloorProfile",
    "EProfile",
    "EndpointFit",
    "Ensemble",
    "FitError",
    "FormSpread",
    "Momentum",
    "MultiPower",
    "PerFractionFit",
    "SmoothChoice",
    "SurfaceChoice",
    "SurfaceFit",
    "backtest_curve_law",
    "backtest_endpoint",
    "backtest_per_fraction",
    "backtest_prefix",
    "backtest_surface",
    "bootstrap",
    "choose_surface",
    "fit_curve_law",
    "profile_floor",
    "fit_endpoint",
    "fit_momentum",
    "fit_multipower",
    "fit_per_fraction",
    "fit_surface",
    "form_spread",
    "huber",
    "jackknife",
    "log_residuals",
    "sample_curve",
    "select_smooth",
]
