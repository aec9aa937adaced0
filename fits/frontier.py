"""The least loss at each compute: a law through the runs' lower envelope, beside the surface's own.

A surface L(N, D) = E + A/N^α + B/D^β says what the least loss at compute C = 6·N·D is (its minimum over
N at that C), and so does a plain power law through the runs that reach the lowest losses for their
compute: the lower envelope of the runs in (log C, log L). Where the runs follow the surface the two agree.
Where they do not, the surface's form ties the curvature of each compute's valley (how the loss rises off
the best size) to how fast the least loss falls with compute, so a fit to many off-optimal runs can follow
the valleys and miss the frontier (on isoFLOP sweeps it lands high, benchmarks/RESULTS.md). The runs do
not say which of the two is right at a larger compute: `fits.surfacechoice` widens its bands to hold both.
"""

from __future__ import annotations

import numpy as np

from fits import checks
from fits.endpoint import EndpointFit, fit_endpoint
from fits.errors import FitError


def lower_envelope(compute, loss) -> np.ndarray:
    """Indices of the runs on the lower convex hull of (log compute, log loss), by increasing compute, up
    to the lowest loss: the runs no mix of two others undercuts, the least losses for their compute."""
    x = np.log(checks.as_array("compute", compute))
    y = np.log(checks.as_array("loss", loss))
    checks.same_length(compute=x, loss=y)
    hull: list[int] = []
    for i in np.lexsort((y, x)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a]) <= 0:
                hull.pop()
            else:
                break
        if not hull or x[i] > x[hull[-1]]:
            hull.append(int(i))
    out = np.array(hull, dtype=int)
    return out[: int(np.argmin(y[out])) + 1] if out.size else out


def envelope_law(n_params, tokens, loss) -> tuple[EndpointFit | None, np.ndarray]:
    """L*(C) = E + A·C^−α fitted to the lower envelope's runs (C = 6·N·D), and their indices; None for the
    law where fewer than three computes lie on the envelope."""
    N = checks.as_array("n_params", n_params)
    D = checks.as_array("tokens", tokens)
    L = checks.as_array("loss", loss)
    C = 6.0 * N * D
    idx = lower_envelope(C, L)
    if idx.size < 3:
        return None, idx
    try:
        return fit_endpoint(C[idx], L[idx]), idx
    except FitError:
        return None, idx


def optimum(compute, E: float, A: float, B: float, alpha: float, beta: float,
            gamma: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(least loss, N there) of the surface E + (A/N^α + B/D^β)^γ along 6·N·D = `compute`, in closed form:
    N* = (αA / βB)^(1/(α+β)) · (C/6)^(β/(α+β)) (γ > 0 does not move it). NaN where a term vanishes (A or B at 0:
    the loss then has no least value at a finite size)."""
    C = np.asarray(compute, dtype=np.float64)
    if not (A > 0 and B > 0 and alpha > 0 and beta > 0):
        return np.full(C.shape, np.nan), np.full(C.shape, np.nan)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # exponents near 0: N* out of range, inf
        log_n = (np.log(alpha * A / (beta * B)) + beta * np.log(C / 6.0)) / (alpha + beta)
        n_opt = np.exp(log_n)
        loss = E + (A * np.exp(-alpha * log_n) + B * np.exp(-beta * (np.log(C / 6.0) - log_n))) ** gamma
    return loss, n_opt


def least_loss(fit, compute) -> np.ndarray:
    """The surface `fit`'s least loss at compute C = 6·N·D (`optimum` of its parameters)."""
    return optimum(compute, **fit.params)[0]


def scaled_by_envelope(fit, law: EndpointFit | None, n_params, tokens) -> np.ndarray:
    """The surface's prediction at (N, D) times the envelope law's least loss over the surface's at that
    compute: what the surface would predict if its frontier were the envelope's. NaN without a law."""
    pred = np.asarray(fit.predict(n_params, tokens), dtype=np.float64)
    if law is None:
        return np.full(pred.shape, np.nan)
    C = 6.0 * np.asarray(n_params, dtype=np.float64) * np.asarray(tokens, dtype=np.float64)
    return pred * np.asarray(law.predict(C), dtype=np.float64) / least_loss(fit, C)
