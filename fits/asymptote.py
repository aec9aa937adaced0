"""The irreducible loss E from every run of a ladder, for the per-fraction law at one token ratio.

The per-fraction law fits E + A_g·(C·g)^−α_g to the runs that share the target's token ratio: on a
ladder of four or five sizes, E and the slope trade off, and the fit often leaves E at its bound 0
(OLMo: 0 to 1.6 across its five lengths, no pattern; the micro demo: 0). A power law with E = 0
falls too fast further out, so larger runs are predicted low. But E, the loss no size or token count
removes, is one number for the whole ladder: every surface L(N, D) = E + A/N^α + B/D^β tends to it
at any fixed token ratio. A ladder that trains several token ratios can pin it from all its runs'
final losses. This module fits that surface (its form chosen by a backtest on the runs,
`fits.surfacechoice`) and returns E with its standard error, or None where the ladder cannot say:
fewer than 3 sizes, a single token ratio, runs without a parameter count, or an E whose 90% interval
does not lie inside (0, the smallest final loss).

The per-fraction law uses it when asked (`ladder predict --E ladder`), not by default: it rests on
the additive surface being the right form, which a ladder whose loss follows compute alone breaks
(benchmarks/RESULTS.md, the prediction leaderboard).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fits.errors import FitError
from fits.runs import Run, distinct
from fits.uncertainty import Z90


@dataclass(frozen=True)
class LadderE:
    E: float
    se: float
    """Standard error (the surface fit's covariance)."""
    form: str
    n_runs: int
    n_ratios: int

    def why(self) -> str:
        exponent = "one-exponent" if self.form == "shared" else "free"
        return (f"E = {self.E:.3g} ± {self.se:.2g} from the {exponent} surface of {self.n_runs} runs' final losses "
                f"({self.n_ratios} token ratios)")


def finals(runs: list[Run]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, D, final loss) of the finished runs with a parameter count and an eval at their last planned step."""
    keep = [r for r in runs if r.n_params and r.finished and r.steps.size and r.fractions[-1] >= 0.999]
    N = np.array([float(r.n_params) for r in keep])
    D = np.array([float(r.steps[-1]) * r.tokens_per_step for r in keep])
    L = np.array([float(r.values[-1]) for r in keep])
    return N, D, L


def ladder_E(runs: list[Run]) -> LadderE | None:
    """E from the surface of every run's final loss, or None where the ladder cannot pin it."""
    return _from_finals(*(x.tobytes() for x in finals(runs)))


@functools.lru_cache(maxsize=16)
def _from_finals(n: bytes, d: bytes, loss: bytes) -> LadderE | None:
    """`ladder_E` on the finals' bytes: a prediction asks for the same ladder's E when it chooses the
    per-fraction basis and again when it fits, so the surface and its backtest run once."""
    N, D, L = (np.frombuffer(x, dtype=np.float64).copy() for x in (n, d, loss))
    if N.size < 6 or classes(N) < 3:
        return None
    ratios = classes(D / N)
    if ratios < 2:
        return None
    from fits.surfacechoice import choose_surface  # the surface's band uses the predictor's floor

    try:
        choice = choose_surface(N, D, L)
    except FitError:
        return None
    fit = choice.fit
    se = float(np.sqrt(fit.cov[0, 0])) if fit.cov.size and np.isfinite(fit.cov[0, 0]) else np.inf
    if not (fit.E - Z90 * se > 0 and fit.E + Z90 * se < L.min()):
        return None
    return LadderE(float(fit.E), se, choice.form, int(N.size), ratios)


def classes(x: np.ndarray, tol: float = 0.01) -> int:
    """How many distinct values `x` holds, values within `tol` (relative) of the last counted being one."""
    return int(distinct(x, tol).size)


__all__ = ["LadderE", "finals", "ladder_E"]
