"""A ladder whose truth is known: planner configs, losses drawn from a multi-power law, written as
trainer run folders (run.yaml, metrics.jsonl, status.json) so the real pull, store and fits read them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import fits.multipower as mp
from ladder import load_recipe
from ladder.config.plan import override, plan
from ladder.config.runconfig import RunConfig

SHAPE = {"C": 2.0, "beta": 0.6, "gamma": 0.6}


E = 1.2
"""The irreducible loss of the synthetic ladder."""


def truth(config: RunConfig, steps: np.ndarray) -> np.ndarray:
    """Multi-power law with L0 = E and A, B shrinking as one power of the run's fit FLOPs per token."""
    s = config.fit_flops_per_token / 1e6
    L0, A, alpha, B = E, 1.1 * s**-0.3, 0.45, 150.0 * s**-0.3
    lrs = config.schedule.lrs(0, int(steps.max()))
    area = np.cumsum(np.concatenate([[0.0], lrs]))[steps]
    drop = mp.exact_drop(lrs, steps, SHAPE["C"], SHAPE["beta"], SHAPE["gamma"])
    return L0 + A * area**-alpha - B * drop


def pf_truth(config: RunConfig, steps: np.ndarray) -> np.ndarray:
    """Exactly the per-fraction law: L = E + A(g)·(C·g)^−α(g), C the planned fit compute."""
    g = steps / config.schedule.total_steps
    C = config.fit_flops_per_token * config.schedule.total_steps * config.tokens_per_step
    alpha = 0.12 + 0.03 * g
    return E + 60.0 * (1 + 0.5 * g) * (C * g) ** -alpha


def micro_plan(**sets):
    """The micro-cpu plan at 32 sequences per step (a few hundred steps per run), evals on exact fractions
    and one peak LR for every run (and any overrides)."""
    items = ["batch_sequences=32", "step_multiple=20", "lr.coefficient=0.004", "lr.tokens_exponent=0",
             "lr.width_exponent=0", "lr.batch_exponent=0"] + [f"{k}={v}" for k, v in sets.items()]
    return plan(override(load_recipe("micro-cpu"), sets=items))


def write_run(root: Path, config: RunConfig, noise: float = 0.0, seed: int = 0, upto: int | None = None,
              shift=None, state: str = "finished", law=truth, train_noise: float = 0.002) -> Path:
    """A run folder with eval/loss at the config's eval steps (up to step `upto`) and a train loss every step
    (`train_noise`: its relative noise).

    `shift(step) -> relative change` perturbs the eval loss (for drift and jump replays)."""
    run_dir = root / config.name
    run_dir.mkdir(parents=True, exist_ok=True)
    config.save(run_dir / "run.yaml")
    rng = np.random.default_rng(seed)
    last = upto or config.stop_after_steps
    every = np.arange(1, last + 1)
    train = law(config, every) * (1 + train_noise * rng.standard_normal(every.size))
    evals = np.array([s for s in config.eval_steps() if s <= last])
    ev = law(config, evals) * (1 + noise * rng.standard_normal(evals.size))
    if shift is not None:
        ev = ev * (1 + np.array([shift(int(s)) for s in evals]))
    grad = np.exp(0.2 * rng.standard_normal(every.size)) * (0.8 + 0.2 * every / last)
    drop = np.clip(0.08 + 0.02 * rng.standard_normal(every.size), 0, 1)
    lines = [json.dumps({"step": int(s), "tokens": int(s) * config.tokens_per_step, "train/loss": float(v),
                         "optim/learning_rate": float(config.schedule.lr(int(s) - 1)),
                         "grad/norm/total": float(gn), "moe/drop_fraction": float(d)})
             for s, v, gn, d in zip(every, train, grad, drop)]
    lines += [json.dumps({"step": int(s), "eval/loss": float(v)}) for s, v in zip(evals, ev)]
    lines.sort(key=lambda x: json.loads(x)["step"])
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"state": state, "step": int(last), "updated": 0.0}))
    return run_dir
