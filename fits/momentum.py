"""Momentum law (Tissue et al. 2024, arXiv:2408.11029): a cheaper schedule-aware curve law.

    L(t) = L0 + A·S1(t)^−α − B·S2(t),   S2(t) = m_1 + … + m_{t−1},   m_k = λ·m_{k−1} + (η_{k−1} − η_k),

with S1 the LR area of steps 0 … t−1 (warmup included). The annealing area S2 is a first-order
filter of the LR drops: a drop keeps paying off for about 1/(1 − λ) steps. One shape parameter,
λ, shared by every run; the rest as in `fits.curvelaw`.

This module owns S2 and its derivative by λ; `fits.curvelaw` fits it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import lfilter


@dataclass(frozen=True)
class MomentumTerms:
    drop: np.ndarray
    """η_{k−1} − η_k for k = 0 … t_max − 1 (0 at k = 0)."""
    steps: np.ndarray


class Momentum:
    """The momentum law's annealing term, for `fits.curvelaw`."""

    name = "momentum law"
    shape_names = ("lambda",)
    shape_lower = np.array([0.0])
    shape_upper = np.array([1.0 - 1e-7])
    shape_starts = ((0.99,), (0.999,), (0.9999,))

    @staticmethod
    def precompute(lrs: np.ndarray, steps: np.ndarray) -> MomentumTerms:
        lrs = np.asarray(lrs, dtype=np.float64)
        steps = np.asarray(steps, dtype=np.int64)
        n = int(steps.max())
        drop = np.zeros(n)
        drop[1:] = lrs[: n - 1] - lrs[1:n]
        return MomentumTerms(drop, steps)

    @staticmethod
    def drop(pre: MomentumTerms, shape: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """S2 at every point, and its derivative by λ."""
        lam = float(shape[0])
        m = lfilter([1.0], [1.0, -lam], pre.drop)
        # dm_k/dλ = m_{k−1} + λ·dm_{k−1}/dλ
        dm = lfilter([1.0], [1.0, -lam], np.concatenate([[0.0], m[:-1]]))
        s2 = np.concatenate([[0.0], np.cumsum(m)])
        ds2 = np.concatenate([[0.0], np.cumsum(dm)])
        # S2(t) sums m_1 … m_{t−1}: the prefix of length t.
        return s2[pre.steps], ds2[pre.steps][:, None]


def fit_momentum(curves, *, E: float | None = None, shape: dict[str, float] | None = None):
    """Fit the momentum law to `curves` (`fits.Curve`): λ shared by every run, L0, A, α, B as power
    laws in each curve's scale; `E` pins the floor of L0. Returns a `CurveLawFit`."""
    from fits.curvelaw import fit_curve_law

    return fit_curve_law(Momentum, curves, E=E, shape=shape)
