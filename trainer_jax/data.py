"""Training data that needs no download, in a fixed order derived from the seed and the step.

Two sources (``data.source`` in the run config):

- ``stdlib_text``: the bytes of the Python standard library's ``.py`` files (test suites and
  site-packages left out, since distributions ship them differently). Files are sorted by path; a
  file is held out for evaluation when the SHA-256 of its path falls in 1/20 of the hash range, so
  the split does not move when files are added. A manifest (every file, its size, its SHA-256 and
  its split) goes to the run directory, and its digest to the run's metrics config, so the corpus
  of any run can be checked.
- ``markov``: an order-1 Markov chain over the vocabulary whose rows are Dirichlet(concentration)
  draws. Sequences start from the stationary distribution, so every target token has conditional
  entropy exactly the chain's entropy rate H = -Σ_i π_i Σ_j P_ij log P_ij (nats per token): no
  model can score below it on average, and the fits can be checked against it.

A training batch is a pure function of (data seed, step): a resumed run sees exactly the batches an
uninterrupted one would. Every sequence holds seq_len + 1 tokens (inputs and shifted targets).
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ladder.config.runconfig import BYTE_VOCAB, RunConfig
from ladder.errors import LadderError

EVAL_SHARE = 20
"""One file in this many (by path hash) is held out for evaluation."""
SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"})
DOC_SEPARATOR = 0
"""Byte between concatenated files (it never occurs in Python source text)."""
_TRAIN_STREAM, _EVAL_STREAM = 1, 2


@dataclass(frozen=True, eq=False)
class DataSource:
    """A fixed eval set and a seed-and-step-addressed stream of training batches."""

    name: str
    vocab_size: int
    seq_len: int
    batch_size: int
    seed: int
    eval_tokens: np.ndarray
    """[eval_sequences, seq_len + 1] held-out token ids."""
    info: dict[str, Any] = field(default_factory=dict)
    """Scalars logged with the run (entropy floor, corpus digest, sizes)."""
    manifest: dict[str, Any] | None = None
    """What the corpus was built from, written to the run directory."""
    _train: np.ndarray | None = None
    _cdf: np.ndarray | None = None
    _stationary: np.ndarray | None = None

    def train_batch(self, step: int) -> np.ndarray:
        """[batch_size, seq_len + 1] int32 tokens of training step `step` (0-based)."""
        rng = np.random.default_rng([self.seed, _TRAIN_STREAM, step])
        if self._train is not None:
            return _windows(self._train, self.batch_size, self.seq_len + 1, rng)
        return _markov_sample(self._cdf, self._stationary, self.batch_size, self.seq_len + 1, rng)


def make_source(cfg: RunConfig) -> DataSource:
    data = cfg.data
    if data.eval_sequences <= 0:
        raise LadderError(f"data.eval_sequences={data.eval_sequences} must be positive")
    if data.source == "markov":
        return markov_source(cfg.spec.vocab_size, data.markov_concentration, data.seed, cfg.seq_len,
                             cfg.batch_size, data.eval_sequences)
    data.check_vocab(cfg.spec.vocab_size)  # RunConfig checks it too; this holds for one changed in place
    return stdlib_source(data.seed, cfg.seq_len, cfg.batch_size, data.eval_sequences)


# ---- Python standard library text -------------------------------------------------------------
def stdlib_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """(relative POSIX path, path) of the standard library's source files, sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    found = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if SKIPPED_DIRS.isdisjoint(rel.parts[:-1]) and p.is_file():
            found.append((rel.as_posix(), p))
    return sorted(found)


def is_eval_file(rel: str) -> bool:
    return int(hashlib.sha256(rel.encode()).hexdigest()[:8], 16) % EVAL_SHARE == 0


@functools.lru_cache(maxsize=2)
def _stdlib_corpus(root: Path | None) -> tuple[np.ndarray, np.ndarray, tuple[dict[str, Any], ...], str]:
    """Train bytes, held-out bytes, manifest entries and their digest (read once per process)."""
    parts: dict[str, list[bytes]] = {"train": [], "eval": []}
    entries = []
    for rel, path in stdlib_files(root):
        blob = path.read_bytes()
        split = "eval" if is_eval_file(rel) else "train"
        parts[split].append(blob)
        entries.append({"path": rel, "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest(), "split": split})
    sep = bytes([DOC_SEPARATOR])
    train = np.frombuffer(sep.join(parts["train"]), dtype=np.uint8)
    held_out = np.frombuffer(sep.join(parts["eval"]), dtype=np.uint8)
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
    return train, held_out, tuple(entries), digest


def stdlib_source(seed: int, seq_len: int, batch_size: int, eval_sequences: int, root: Path | None = None) -> DataSource:
    train, held_out, entries, digest = _stdlib_corpus(root)
    if len(held_out) < 10 * (seq_len + 1) or len(train) < 10 * (seq_len + 1):
        raise LadderError(
            f"the standard library text found ({len(train)} train / {len(held_out)} eval bytes) is too "
            f"small for seq_len={seq_len}: use data.source=markov"
        )
    eval_rng = np.random.default_rng([seed, _EVAL_STREAM])
    manifest = {
        "source": "stdlib_text",
        "python": platform.python_version(),
        "root": str(root or sysconfig.get_paths()["stdlib"]),
        "rule": f"*.py under the root, skipping {sorted(SKIPPED_DIRS)}; sorted by path; "
        f"eval when int(sha256(path)[:8], 16) % {EVAL_SHARE} == 0; files joined with byte {DOC_SEPARATOR}",
        "digest": digest,
        "train_bytes": int(len(train)),
        "eval_bytes": int(len(held_out)),
        "files": list(entries),
    }
    info = {
        "data/corpus_sha256": digest,
        "data/train_tokens_available": int(len(train)),
        "data/eval_tokens_available": int(len(held_out)),
    }
    return DataSource(
        name="stdlib_text",
        vocab_size=BYTE_VOCAB,
        seq_len=seq_len,
        batch_size=batch_size,
        seed=seed,
        eval_tokens=_windows(held_out, eval_sequences, seq_len + 1, eval_rng),
        info=info,
        manifest=manifest,
        _train=train,
    )


def _windows(text: np.ndarray, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    starts = rng.integers(0, len(text) - length + 1, size=n)
    return text[starts[:, None] + np.arange(length)].astype(np.int32)  # [n, length]


# ---- Markov chain with a known entropy rate -------------------------------------------------------
def markov_chain(vocab_size: int, concentration: float, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Transition matrix P [V, V], stationary distribution π [V], entropy rate (nats per token)."""
    if concentration <= 0:
        raise LadderError(f"data.markov_concentration={concentration} must be positive")
    rng = np.random.default_rng([seed, 0])
    trans = rng.dirichlet(np.full(vocab_size, concentration), size=vocab_size)  # [V, V] float64
    trans /= trans.sum(axis=1, keepdims=True)
    pi = stationary(trans)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(trans > 0, trans * np.log(trans), 0.0)
    return trans, pi, float(-np.sum(pi * plogp.sum(axis=1)))


def stationary(trans: np.ndarray) -> np.ndarray:
    """π with π P = π and Σπ = 1: the balance equations with one of them (redundant) replaced by Σπ = 1."""
    V = trans.shape[0]
    a = trans.T - np.eye(V)
    a[-1] = 1.0
    b = np.zeros(V)
    b[-1] = 1.0
    pi = np.clip(np.linalg.solve(a, b), 0.0, None)
    return pi / pi.sum()


def markov_source(
    vocab_size: int, concentration: float, seed: int, seq_len: int, batch_size: int, eval_sequences: int
) -> DataSource:
    trans, pi, entropy = markov_chain(vocab_size, concentration, seed)
    cdf = np.cumsum(trans, axis=1)
    eval_rng = np.random.default_rng([seed, _EVAL_STREAM])
    info = {
        "data/entropy_floor": entropy,
        "data/markov_concentration": concentration,
        "data/unigram_entropy": float(-np.sum(pi[pi > 0] * np.log(pi[pi > 0]))),
    }
    return DataSource(
        name="markov",
        vocab_size=vocab_size,
        seq_len=seq_len,
        batch_size=batch_size,
        seed=seed,
        eval_tokens=_markov_sample(cdf, pi, eval_sequences, seq_len + 1, eval_rng),
        info=info,
        _cdf=cdf,
        _stationary=pi,
    )


def _markov_sample(cdf: np.ndarray, pi: np.ndarray, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    V = cdf.shape[0]
    out = np.empty((n, length), dtype=np.int32)
    out[:, 0] = np.minimum(np.searchsorted(np.cumsum(pi), rng.random(n), side="right"), V - 1)
    u = rng.random((n, length - 1))
    for t in range(1, length):
        rows = cdf[out[:, t - 1]]  # [n, V]
        out[:, t] = np.minimum((rows <= u[:, t - 1, None]).sum(axis=1), V - 1)
    return out
