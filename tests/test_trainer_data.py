"""The trainer's data: the standard-library corpus and its manifest, the Markov chain's exact entropy
rate, and batches that depend only on (seed, step)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from trainer_jax import data as D


@pytest.fixture(scope="module")
def stdlib():
    return D.stdlib_source(seed=3, seq_len=64, batch_size=4, eval_sequences=16)


def test_manifest_names_every_file_with_its_hash(stdlib):
    m = stdlib.manifest
    files = D.stdlib_files()
    assert [e["path"] for e in m["files"]] == [rel for rel, _ in files]
    assert len(files) > 100
    for entry, (rel, path) in list(zip(m["files"], files))[::50]:
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert entry["split"] == ("eval" if D.is_eval_file(rel) else "train")
    assert not any(set(e["path"].split("/")[:-1]) & D.SKIPPED_DIRS for e in m["files"])
    sizes = {s: sum(e["bytes"] for e in m["files"] if e["split"] == s) for s in ("train", "eval")}
    n = {s: sum(e["split"] == s for e in m["files"]) for s in ("train", "eval")}
    # files are joined with one separator byte
    assert m["train_bytes"] == sizes["train"] + n["train"] - 1 and m["eval_bytes"] == sizes["eval"] + n["eval"] - 1
    assert 0.02 < n["eval"] / len(files) < 0.09  # about one file in 20 is held out
    assert stdlib.info["data/corpus_sha256"] == m["digest"]


def test_eval_windows_come_from_held_out_files(stdlib):
    held_out = b"\0".join(p.read_bytes() for rel, p in D.stdlib_files() if D.is_eval_file(rel))
    for row in stdlib.eval_tokens[:4]:
        assert bytes(row.astype(np.uint8).tolist()) in held_out
    assert stdlib.eval_tokens.shape == (16, 65)


def test_batches_depend_only_on_seed_and_step(stdlib):
    again = D.stdlib_source(seed=3, seq_len=64, batch_size=4, eval_sequences=16)
    b7 = stdlib.train_batch(7)
    assert b7.shape == (4, 65) and b7.dtype == np.int32
    np.testing.assert_array_equal(again.train_batch(7), b7)  # a fresh source, asked out of order
    assert not np.array_equal(stdlib.train_batch(8), b7)
    other = D.stdlib_source(seed=4, seq_len=64, batch_size=4, eval_sequences=16)
    assert not np.array_equal(other.train_batch(7), b7)
    np.testing.assert_array_equal(again.eval_tokens, stdlib.eval_tokens)


def test_markov_entropy_rate_of_a_two_state_chain():
    trans = np.array([[0.9, 0.1], [0.4, 0.6]])
    pi = D.stationary(trans)
    np.testing.assert_allclose(pi, [0.8, 0.2], atol=1e-12)
    h = lambda p: -sum(x * math.log(x) for x in p)  # noqa: E731
    expected = 0.8 * h([0.9, 0.1]) + 0.2 * h([0.4, 0.6])
    plogp = trans * np.log(trans)
    assert -np.sum(pi * plogp.sum(axis=1)) == pytest.approx(expected, rel=1e-12)


def test_markov_samples_have_the_stated_entropy_rate():
    vocab, conc = 16, 0.5
    trans, pi, entropy = D.markov_chain(vocab, conc, seed=1)
    np.testing.assert_allclose(pi @ trans, pi, atol=1e-12)
    assert 0 < entropy < math.log(vocab)
    src = D.markov_source(vocab, conc, seed=1, seq_len=256, batch_size=64, eval_sequences=8)
    tokens = np.concatenate([src.train_batch(s) for s in range(8)])  # 512 × 257 tokens
    # Mean negative log-likelihood of the sampled transitions under the true chain: its
    # expectation is exactly the entropy rate; 131k transitions make the standard error < 0.005.
    nll = -np.log(trans[tokens[:, :-1], tokens[:, 1:]]).mean()
    assert nll == pytest.approx(entropy, abs=0.02)
    first = np.bincount(tokens[:, 0], minlength=vocab) / len(tokens)
    assert np.abs(first - pi).max() < 0.08  # sequences start from the stationary distribution
    assert src.info["data/entropy_floor"] == entropy
    np.testing.assert_array_equal(src.train_batch(5), src.train_batch(5))
