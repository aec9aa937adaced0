"""The MoE transformer: its parameter tree against the spec's accounting, attention masks, routing,
capacity and dispatch against naive references (values and gradients), and the auxiliary losses'
normalisation."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ladder.config.spec import ModelSpec
from trainer_jax import model as M

BASE = dict(d_model=32, n_layers=3, n_heads=4, head_dim=8, n_kv_heads_local=1, n_kv_heads_global=2,
            vocab_size=64, window=4, global_every=2)
SPECS = {
    "moe_latent_shared": ModelSpec(**BASE, n_experts=8, top_k=2, expert_width=12, n_shared_experts=2,
                                   shared_width=10, latent_dim=16, dense_layers=(0,), dense_width=40),
    "moe_sigmoid_no_latent": ModelSpec(**BASE, n_experts=4, top_k=1, expert_width=24, router="sigmoid"),
    "dense_tied": ModelSpec(**BASE, dense_width=64, tied_embeddings=True),
    "moe_tied_all_dense_but_one": ModelSpec(**BASE, n_experts=6, top_k=3, expert_width=8, latent_dim=12,
                                            dense_layers=(0, 2), dense_width=24, tied_embeddings=True),
}


def _init(spec: ModelSpec, seed: int) -> M.Params:
    return jax.jit(functools.partial(M.init_params, spec))(jax.random.key(seed))


def _groups(params: M.Params) -> dict[str, int]:
    """Sizes of the parameter tree gathered into the spec's exact groups."""
    g = dict.fromkeys(("attention_qo", "attention_kv", "router", "latent_projections", "routed_experts",
                       "shared_experts", "dense_ffn", "norms", "embedding", "head"), 0)
    size = lambda tree: sum(int(x.size) for x in jax.tree.leaves(tree))  # noqa: E731
    g["embedding"] = size(params["embed"])
    g["head"] = size(params.get("head", {}))
    g["norms"] = size(params["final_norm"])
    for layer in params["layers"]:
        g["attention_qo"] += size([layer["wq"], layer["wo"]])
        g["attention_kv"] += size([layer["wk"], layer["wv"]])
        g["norms"] += size([layer["attn_norm"], layer["ffn_norm"]])
        if "moe" in layer:
            moe = layer["moe"]
            g["router"] += size(moe["router"])
            g["latent_projections"] += size([moe.get("latent_down", []), moe.get("latent_up", [])])
            g["routed_experts"] += size(moe["experts"])
            g["shared_experts"] += size(moe.get("shared", {}))
        else:
            g["dense_ffn"] += size(layer["ffn"])
    return g


@pytest.mark.parametrize("name", sorted(SPECS))
def test_parameter_tree_matches_the_exact_accounting(name):
    spec = SPECS[name]
    params = jax.eval_shape(functools.partial(M.init_params, spec), jax.random.key(0))
    assert M.param_count(params) == spec.total_params_exact()
    expected = spec.param_breakdown("total", "exact")
    assert _groups(params) == {k: expected.get(k, 0) for k in _groups(params)}


def test_micro_cpu_runs_have_exact_trees():
    from ladder import load_recipe
    from ladder.config.plan import plan

    for run in plan(load_recipe("micro-cpu")).runs():
        shapes = jax.eval_shape(functools.partial(M.init_params, run.spec), jax.random.key(0))
        assert M.param_count(shapes) == run.spec.total_params_exact(), run.name


def test_forward_is_causal_and_shaped():
    spec = SPECS["moe_latent_shared"]
    params = _init(spec, 1)
    tokens = jax.random.randint(jax.random.key(2), (2, 12), 0, spec.vocab_size)
    fwd = jax.jit(functools.partial(M.forward, spec=spec, dropless=True))
    logits, stats = fwd(params, tokens)
    assert logits.shape == (2, 12, spec.vocab_size) and logits.dtype == jnp.float32
    changed = tokens.at[:, 7].set((tokens[:, 7] + 1) % spec.vocab_size)
    logits2, _ = fwd(params, changed)
    np.testing.assert_array_equal(logits[:, :7], logits2[:, :7])  # the past never sees the future
    assert float(jnp.max(jnp.abs(logits[:, 7:] - logits2[:, 7:]))) > 1e-4
    assert set(stats) == set(M.MOE_STATS)


def test_local_layers_see_only_their_window():
    spec = SPECS["dense_tied"]  # layer 0 is local with window 4
    layers = _init(spec, 3)["layers"]
    x = jax.random.normal(jax.random.key(4), (1, 10, spec.d_model))
    out = M.attention(x, layers[0], spec, 0)
    far = M.attention(x.at[:, 5].add(1.0), layers[0], spec, 0)  # position 9 attends to 6..9 only
    np.testing.assert_allclose(out[:, 9], far[:, 9], atol=1e-6)
    near = M.attention(x.at[:, 6].add(1.0), layers[0], spec, 0)
    assert float(jnp.max(jnp.abs(out[:, 9] - near[:, 9]))) > 1e-4
    glob = M.attention(x.at[:, 0].add(1.0), layers[1], spec, 1)  # layer 1 is global: sees position 0
    assert float(jnp.max(jnp.abs(M.attention(x, layers[1], spec, 1)[:, 9] - glob[:, 9]))) > 1e-4


def _reference_attention(x, p, spec, layer):
    """Plain softmax attention over the full S × S scores with K and V repeated per query head."""
    B, S, _ = x.shape
    H, hd, KV = spec.n_heads, spec.head_dim, spec.kv_heads(layer)
    pos = jnp.arange(S)
    q = _pairwise_rotary((x @ p["wq"]).reshape(B, S, H, hd), pos)
    k = jnp.repeat(_pairwise_rotary((x @ p["wk"]).reshape(B, S, KV, hd), pos), H // KV, axis=2)
    v = jnp.repeat((x @ p["wv"]).reshape(B, S, KV, hd), H // KV, axis=2)
    scores = jnp.einsum("bshd,bthd->bhst", q, k) / math.sqrt(hd)
    allowed = pos[None, :] <= pos[:, None]
    if not spec.is_global(layer):
        allowed &= pos[None, :] > pos[:, None] - spec.window
    probs = jax.nn.softmax(jnp.where(allowed, scores, -jnp.inf), axis=-1)
    return jnp.einsum("bhst,bthd->bshd", probs, v).reshape(B, S, H * hd) @ p["wo"]


def _pairwise_rotary(x, positions):
    half = x.shape[-1] // 2
    angles = positions[:, None] * M.ROPE_BASE ** (-jnp.arange(half) / half)
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def test_rotary_matches_the_pairwise_formula_exactly():
    x = jax.random.normal(jax.random.key(11), (2, 40, 3, 8))
    pos = jnp.arange(40)
    np.testing.assert_array_equal(jax.jit(M.rotary)(x, pos), jax.jit(_pairwise_rotary)(x, pos))


@pytest.mark.parametrize("layer", [0, 1])  # local (window 4), global
@pytest.mark.parametrize("seq_len", [7, 40])  # one query block; a full block and a partial one
def test_blocked_attention_and_its_gradient_match_full_attention(layer, seq_len):
    spec = SPECS["dense_tied"]  # 4 query heads over 1 (local) or 2 (global) KV heads
    p = _init(spec, 12)["layers"][layer]
    x = jax.random.normal(jax.random.key(13), (2, seq_len, spec.d_model))
    ct = jax.random.normal(jax.random.key(14), (2, seq_len, spec.d_model))

    def outputs_and_grads(fn):
        grads = jax.grad(lambda x, p: jnp.sum(fn(x, p, spec, layer) * ct), argnums=(0, 1))
        return jax.jit(lambda x, p: (fn(x, p, spec, layer), grads(x, p)))(x, p)

    got, want = outputs_and_grads(M.attention), outputs_and_grads(_reference_attention)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_assign_slots_keeps_first_choices_first_and_respects_capacity():
    # One group of 4 tokens, top-2 over 2 experts: every token picks both experts.
    top_e = jnp.array([[[0, 1], [0, 1], [1, 0], [0, 1]]])  # [B=1, S=4, k=2]
    slots, kept = M.assign_slots(top_e, n_experts=2, cap=3)
    # Queue order: first choices (experts 0,0,1,0) before second choices (1,1,0,1); each expert
    # keeps its first 3, so token 2's second choice (expert 0) and token 3's (expert 1) drop.
    np.testing.assert_array_equal(kept[0], [True, True, True, True, True, True, False, False])
    np.testing.assert_array_equal(slots[0], [0, 1, 3, 2, 4, 5, 6, 6])  # slot = expert·3 + place; 6 = dropped


def _reference_moe(x, p, spec):
    """Every token through its top-k experts, one at a time (no capacity)."""
    top_e, top_w, _ = M.route(x, p["router"], spec)
    h = x @ p["latent_down"] if "latent_down" in p else x
    out = np.zeros(h.shape, np.float32)
    for b in range(x.shape[0]):
        for s in range(x.shape[1]):
            for j in range(spec.top_k):
                e = int(top_e[b, s, j])
                w = jax.tree.map(lambda a, e=e: a[e], p["experts"])
                out[b, s] += float(top_w[b, s, j]) * np.asarray(M.swiglu(h[b, s], w))
    y = jnp.asarray(out) @ p["latent_up"] if "latent_up" in p else jnp.asarray(out)
    for j in range(spec.n_shared_experts):
        y = y + M.swiglu(x, jax.tree.map(lambda a, j=j: a[j], p["shared"]))
    return y


@pytest.mark.parametrize("name", ["moe_latent_shared", "moe_sigmoid_no_latent"])
def test_dropless_dispatch_matches_a_naive_loop(name):
    spec = SPECS[name]
    p = _init(spec, 5)["layers"][1]["moe"]
    x = jax.random.normal(jax.random.key(6), (2, 6, spec.d_model))
    y, stats = jax.jit(functools.partial(M.moe_block, spec=spec, dropless=True, mesh=None))(x, p)
    np.testing.assert_allclose(y, _reference_moe(x, p, spec), rtol=2e-5, atol=2e-5)
    assert float(stats["drop_fraction"]) == 0.0


def _dense_experts(x, p, spec, dropless):
    """Every expert on every token, kept assignments picked by masks: differentiable, O(E)."""
    B, S, _ = x.shape
    top_e, top_w, _ = M.route(x, p["router"], spec)
    _, kept = M.assign_slots(top_e, spec.n_experts, M.capacity(spec, S, dropless))
    kept = jnp.swapaxes(kept.reshape(B, spec.top_k, S), 1, 2)  # [B, S, k]
    h = x @ p["latent_down"] if "latent_down" in p else x
    w = p["experts"]
    every = jnp.einsum("bsef,efd->bsed", jax.nn.silu(jnp.einsum("bsd,edf->bsef", h, w["w_gate"]))
                       * jnp.einsum("bsd,edf->bsef", h, w["w_up"]), w["w_down"])  # [B, S, E, di]
    pick = jax.nn.one_hot(top_e, spec.n_experts) * (top_w * kept)[..., None]  # [B, S, k, E]
    y = jnp.einsum("bske,bsed->bsd", pick, every)
    y = y @ p["latent_up"] if "latent_up" in p else y
    for j in range(spec.n_shared_experts):
        y = y + M.swiglu(x, jax.tree.map(lambda a, j=j: a[j], p["shared"]))
    return y


@pytest.mark.parametrize("dropless", [False, True])
@pytest.mark.parametrize("name", ["moe_latent_shared", "moe_sigmoid_no_latent"])
def test_moe_block_and_its_gradient_match_dense_experts(name, dropless):
    spec = SPECS[name]
    p = _init(spec, 17)["layers"][1]["moe"]
    x = jax.random.normal(jax.random.key(18), (3, 16, spec.d_model))
    ct = jax.random.normal(jax.random.key(19), (3, 16, spec.d_model))
    block = functools.partial(M.moe_block, spec=spec, dropless=dropless, mesh=None)
    assert dropless or float(block(x, p)[1]["drop_fraction"]) > 0  # some assignments were dropped

    def outputs_and_grads(fn):
        grads = jax.grad(lambda x, p: jnp.sum(fn(x, p) * ct), argnums=(0, 1))
        return jax.jit(lambda x, p: (fn(x, p), grads(x, p)))(x, p)

    got = outputs_and_grads(lambda x, p: block(x, p)[0])
    want = outputs_and_grads(lambda x, p: _dense_experts(x, p, spec, dropless))
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_capacity_drops_the_overflow_and_drops_nothing_when_large():
    spec = SPECS["moe_latent_shared"]
    assert M.capacity(spec, 128, dropless=False) == math.ceil(1.0 * 128 * 2 / 8)
    assert M.capacity(spec, 128, dropless=True) == 128
    p = _init(spec, 7)["layers"][1]["moe"]
    # Positive inputs and this router send every token to experts 0 and 1.
    p = {**p, "router": jnp.zeros_like(p["router"]).at[:, 0].set(1.0).at[:, 1].set(0.5)}
    x = jnp.abs(jax.random.normal(jax.random.key(8), (2, 16, spec.d_model)))
    block = jax.jit(M.moe_block, static_argnames=("spec", "dropless", "mesh"))
    _, stats = block(x, p, spec=spec, dropless=False, mesh=None)
    # Each expert gets 16 assignments per sequence and keeps capacity 4: 48 of the 64 drop.
    assert float(stats["drop_fraction"]) == pytest.approx(48 / 64)
    assert float(stats["load_max_over_mean"]) == pytest.approx(8 * 0.5)
    _, dropless = block(x, p, spec=spec, dropless=True, mesh=None)
    assert float(dropless["drop_fraction"]) == 0.0


def test_auxiliary_losses_under_uniform_routing():
    spec = SPECS["moe_latent_shared"]
    x = jax.random.normal(jax.random.key(9), (2, 8, spec.d_model))
    _, _, stats = jax.jit(functools.partial(M.route, spec=spec))(x, jnp.zeros((spec.d_model, spec.n_experts)))
    assert float(stats["load_balancing"]) == pytest.approx(1.0, abs=1e-6)
    assert float(stats["router_z"]) == pytest.approx(math.log(8) ** 2, rel=1e-6)
    assert float(stats["router_entropy"]) == pytest.approx(math.log(8), rel=1e-6)
