"""Loaders for the published datasets in ../shared/data, in the shapes `fits` takes.

Each follows the conventions its SOURCE.md documents (units, which points to drop, how the LR of
every step is rebuilt). Used by the fit benchmarks and by the tests that reproduce published
numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fits import Curve, sample_curve

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


# ---- chinchilla_epoch -----------------------------------------------------------------------------
def chinchilla(root: Path = DATA) -> pd.DataFrame:
    """The 240 points of Epoch's default fit (the 5 marked excluded are dropped)."""
    df = pd.read_csv(root / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv")
    return df[~df["excluded_in_epoch_fit"]].reset_index(drop=True)


# ---- olmo_ladder ----------------------------------------------------------------------------------
OLMO_SIZES = ("190M", "370M", "760M", "1.3B", "3.2B")
OLMO_MULTIPLIERS = (0.5, 1.0, 2.0, 5.0, 10.0)
OLMO_WARMUP = {"190M": 363, "370M": 472, "760M": 578, "1.3B": 813, "3.2B": 1008}


def olmo_ladder(root: Path = DATA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(checkpoints, runs) of the ladder, seed reruns left out."""
    d = root / "olmo_ladder"
    lad = pd.read_csv(d / "ladder_tidy.csv")
    runs = pd.read_csv(d / "ladder_runs.csv")
    return lad[~lad["rerun"]], runs[~runs["rerun"]].reset_index(drop=True)


def olmo_finals(lad: pd.DataFrame, last: int = 5) -> pd.DataFrame:
    """One row per run: N (non-embedding), D (tokens at the last checkpoint), loss = mean C4 loss of
    the last `last` evals (the paper's --moving_avg 5), FLOPs per token, size and multiplier."""
    rows = []
    for rid, g in lad.groupby("run_id", sort=False):
        g = g.sort_values("step")
        rows.append({
            "run_id": rid, "size": g["size"].iloc[0], "multiplier": float(g["length_multiplier_xC"].iloc[0]),
            "N": float(g["params_nonembed"].iloc[0]), "D": float(g["tokens"].iloc[-1]),
            "flops_per_token": float(g["flops_per_token"].iloc[0]), "loss": float(g["loss"].tail(last).mean()),
            "paper": bool(g["used_in_paper_step1_fit"].iloc[0]),
        })
    return pd.DataFrame(rows)


def olmo_targets(root: Path = DATA) -> dict[str, tuple[float, float, float]]:
    """OLMo 2 targets as (N, D, actual C4 loss): 13B = mean of its last 5 evals, 7B = the anneal row."""
    tg = pd.read_csv(root / "olmo_ladder" / "targets_olmo2_tidy.csv")
    t13 = tg[tg["run_id"] == "olmo2_13b_final"].sort_values("step")
    t7 = tg[tg["run_id"] == "olmo2_7b_anneal_final"]
    return {
        "7B": (float(t7["params_nonembed"].iloc[0]), float(t7["tokens"].iloc[-1]), float(t7["loss"].iloc[-1])),
        "13B": (float(t13["params_nonembed"].iloc[0]), float(t13["tokens"].iloc[-1]), float(t13["loss"].tail(5).mean())),
    }


def olmo_lrs(size: str, peak: float, total_steps: int) -> np.ndarray:
    """LR of every step: linear warmup peak·s/W, then cosine to 0.1·peak at the last step
    (matches the logged LR to within 1%)."""
    w = OLMO_WARMUP[size]
    s = np.arange(total_steps + 1, dtype=np.float64)
    cos = 0.1 * peak + 0.45 * peak * (1 + np.cos(np.pi * (s - w) / (total_steps - w)))
    return np.where(s < w, peak * s / w, cos)


def olmo_curves(lad: pd.DataFrame, runs: pd.DataFrame, fractions: np.ndarray):
    """{(size, multiplier): (total fit compute, C4 loss at `fractions`)}; compute = FLOPs/token × tokens."""
    out = {}
    for _, r in runs.iterrows():
        g = lad[lad["run_id"] == r["run_id"]].sort_values("step")
        compute = float(g["flops_per_token"].iloc[0]) * float(r["total_tokens"])
        out[(r["size"], float(r["length_multiplier_xC"]))] = (
            compute, sample_curve(g["step"].to_numpy(), g["loss"].to_numpy(), float(r["total_steps"]), fractions)
        )
    return out


def olmo_lr_curves(lad: pd.DataFrame, runs: pd.DataFrame) -> dict[tuple[str, float], Curve]:
    """Curves with the LR of every step; checkpoints before 2× warmup and 5% of the run left out."""
    out = {}
    for _, r in runs.iterrows():
        g = lad[lad["run_id"] == r["run_id"]].sort_values("step")
        T = int(r["total_steps"])
        steps = g["step"].to_numpy()
        keep = (steps >= max(2 * OLMO_WARMUP[r["size"]], 0.05 * T)) & (steps <= T)
        out[(r["size"], float(r["length_multiplier_xC"]))] = Curve(
            steps[keep], g["loss"].to_numpy()[keep], olmo_lrs(r["size"], float(r["peak_lr"]), T),
            float(r["params_nonembed"]), r["run_id"],
        )
    return out


# ---- multipower_schedules -------------------------------------------------------------------------
MPL_WARMUP, MPL_PEAK = 2160, 3e-4
MPL_SIZES = {"25M": 25e6, "100M": 100e6, "400M": 400e6}
MPL_README = {  # the authors' fitted parameters (README table): L0, A, alpha, B, C, beta, gamma
    "25M": (3.040, 0.525, 0.508, 363.788, 2.066, 0.583, 0.641),
    "100M": (2.651, 0.601, 0.453, 437.946, 2.132, 0.598, 0.655),
    "400M": (2.375, 0.654, 0.429, 523.425, 2.025, 0.594, 0.635),
}


def mpl_lrs(schedule: str, total_steps: int) -> np.ndarray:
    """LR of every step of one schedule, from the formulas of SOURCE.md (warmup linspace(0, peak, 2160))."""
    P, W, T = MPL_PEAK, MPL_WARMUP, total_steps
    s = np.arange(T + 1, dtype=np.float64)
    if schedule.startswith("cosine"):
        lr = 3e-5 + 0.5 * (P - 3e-5) * (1 + np.cos(np.pi * (s - W) / (T - W)))
    elif schedule.startswith("wsdld"):
        lr = np.where(s < 20000, P, P + (3e-5 - P) * (s - 20000) / 4000)
    elif schedule.startswith("wsd_"):
        lr = np.where(s < 20000, P, P ** ((T - s) / 4000) * 3e-5 ** ((s - 20000) / 4000))
    elif schedule.startswith("wsdcon"):
        lr = np.where(s < 8000, P, int(schedule.split("_")[1]) * 1e-5)
    else:
        lr = np.full(s.size, P)
    lr[:W] = P * np.arange(W) / (W - 1)
    return lr


def mpl_curves(root: Path = DATA, size: str | None = None, split: str | None = None) -> list[Curve]:
    """The schedule curves (of one size and split, if given); scale = the nominal parameter count."""
    df = pd.read_csv(root / "multipower_schedules" / "multipower_tidy.csv")
    out = []
    for _, g in df.groupby("run_id", sort=True):
        if (size and g["model_size"].iloc[0] != size) or (split and g["mpl_split"].iloc[0] != split):
            continue
        lrs = mpl_lrs(g["schedule"].iloc[0], int(g["total_steps"].iloc[0]))
        out.append(Curve(g["step"].to_numpy(), g["loss"].to_numpy(), lrs, MPL_SIZES[g["model_size"].iloc[0]],
                         f"{g['model_size'].iloc[0]} {g['schedule'].iloc[0]}"))
    return out


# ---- misfitting_li2025 ----------------------------------------------------------------------------
MISFIT_WARMUP = 50


def misfitting(root: Path = DATA) -> pd.DataFrame:
    """Every checkpoint of the clean runs (the flagged 17m sweep left out)."""
    df = pd.read_csv(root / "misfitting_li2025" / "misfitting_tidy.csv")
    return df[df["quality_flag"].isna()].reset_index(drop=True)


def misfitting_lrs(peak: float, total_steps: int, length: int | None = None) -> np.ndarray:
    """open_lm cosine: warmup peak·(s+1)/50, then 0.1·peak + ½(1 + cos(π(s−50)/(T−50)))·0.9·peak;
    `length` steps in all (past T the LR stays at its floor: a few runs log a checkpoint past T)."""
    s = np.minimum(np.arange(max(length or 0, total_steps + 1), dtype=np.float64), total_steps)
    cos = 0.1 * peak + 0.45 * peak * (1 + np.cos(np.pi * (s - MISFIT_WARMUP) / (total_steps - MISFIT_WARMUP)))
    return np.where(s < MISFIT_WARMUP, peak * (s + 1) / MISFIT_WARMUP, cos)
