"""The decoder-only Mixture-of-Experts transformer, built from a `ModelSpec`, as pure functions.

Features:
- RMSNorm before attention and before the feed-forward block, and before the output head.
- Rotary position embeddings (RoFormer, Su et al. 2021), base 10,000.
- Grouped-query attention (Ainslie et al. 2023) with sliding-window local layers and global layers
  (the spec says which), causal.
- SwiGLU feed-forward blocks (Shazeer 2020): dense layers, routed experts and shared experts.
- MoE layers: a float32 top-k router, softmax (the top-k probabilities renormalised to sum to 1, as
  in Mixtral) or sigmoid (the top-k scores normalised, as in DeepSeek-V3); routed experts optionally
  work in a latent width (a d_model→latent projection before, latent→d_model after); shared
  experts every token passes.
- Capacity with token dropping (GShard, Lepikhin et al. 2020): a *group* is one sequence, each
  expert takes at most C = ceil(capacity_factor × seq_len × top_k / n_experts) of a group's
  assignments, first choices before second choices, earlier tokens first. Dispatch and combine
  are row gathers on slot indices, so memory grows with tokens, not tokens squared.
  `dropless=True` sets C = seq_len (no assignment is ever dropped), used for evaluation.
  Because groups are sequences, results do not depend on how the batch is split over devices.
- Expert parallelism: given a mesh, the experts' work runs under `jax.shard_map` with the groups
  split over every device and the experts over the `expert` axis, exchanging slots with all-to-all.
- Auxiliary losses (each averaged over MoE layers; coefficients live in the run config):
  load balancing (Switch, Fedus et al. 2021) `E · Σ_i f_i · P_i`, with f_i the share of routed
  assignments sent to expert i and P_i its mean (normalised) router probability over the batch;
  it equals 1.0 under uniform routing and grows when routing concentrates. Router z-loss (ST-MoE,
  Zoph et al. 2022): the mean over tokens of logsumexp(router logits)². Logit z-loss (PaLM): the
  mean of logsumexp(output logits)², computed in `loss_fn`.

Parameters live in a nested dict (`init_params`); the leaves' sizes sum exactly to
`spec.total_params_exact()` (norms included, no biases).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from ladder.config.spec import ModelSpec
from trainer_jax.mesh import BATCH_AXES, EXPERT_AXIS

Params = dict[str, Any]
ROPE_BASE = 10_000.0


# ---- initialisation ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Init:
    """One parameter tensor: its shape and the std of its normal init (None: ones, for norm gains)."""

    shape: tuple[int, ...]
    std: float | None


def _matrix(shape: tuple[int, ...], fan_in: int, scale: float = 1.0) -> Init:
    return Init(shape, scale / math.sqrt(fan_in))


def _swiglu_layout(lead: tuple[int, ...], d_in: int, width: int, out_scale: float) -> dict[str, Init]:
    return {
        "w_gate": _matrix((*lead, d_in, width), d_in),
        "w_up": _matrix((*lead, d_in, width), d_in),
        "w_down": _matrix((*lead, width, d_in), width, out_scale),
    }


def param_layout(spec: ModelSpec) -> dict[str, Any]:
    """Every parameter tensor with its init: weights N(0, 1/fan_in), the outputs that write to the
    residual stream further scaled by 1/sqrt(2·layers), norm gains at one."""
    d, hd, H = spec.d_model, spec.head_dim, spec.n_heads
    out_scale = 1.0 / math.sqrt(2 * spec.n_layers)
    layers = []
    for i in range(spec.n_layers):
        kv = spec.kv_heads(i)
        layer: dict[str, Any] = {
            "attn_norm": Init((d,), None),
            "wq": _matrix((d, H * hd), d),
            "wk": _matrix((d, kv * hd), d),
            "wv": _matrix((d, kv * hd), d),
            "wo": _matrix((H * hd, d), H * hd, out_scale),
            "ffn_norm": Init((d,), None),
        }
        if spec.is_moe(i):
            di = spec.expert_in_dim
            moe: dict[str, Any] = {
                "router": _matrix((d, spec.n_experts), d),
                "experts": _swiglu_layout((spec.n_experts,), di, spec.expert_width, out_scale),
            }
            if spec.latent_dim is not None:
                moe["latent_down"] = _matrix((d, di), d)
                moe["latent_up"] = _matrix((di, d), di)
            if spec.n_shared_experts:
                moe["shared"] = _swiglu_layout((spec.n_shared_experts,), d, spec.shared_width, out_scale)
            layer["moe"] = moe
        else:
            layer["ffn"] = _swiglu_layout((), d, spec.dense_width, out_scale)
        layers.append(layer)
    # A tied table is also the head, so it gets the head's scale (logits of unit variance at init).
    layout: dict[str, Any] = {
        "embed": Init((spec.vocab_size, d), 1.0 / math.sqrt(d) if spec.tied_embeddings else 1.0),
        "layers": layers,
        "final_norm": Init((d,), None),
    }
    if not spec.tied_embeddings:
        layout["head"] = _matrix((d, spec.vocab_size), d)
    return layout


def init_params(spec: ModelSpec, key: jax.Array) -> Params:
    """Random parameters from one normal draw of the total size, cut into the layout's tensors.

    One draw rather than one per tensor: XLA compiles a single random-number kernel in about a
    second on CPU, where one kernel per tensor takes several. The values do not depend on the mesh.
    """
    specs, tree = jax.tree.flatten(param_layout(spec), is_leaf=lambda x: isinstance(x, Init))
    sizes = [math.prod(t.shape) for t in specs]
    draws = jax.random.normal(key, (sum(sizes),), jnp.float32)
    leaves, offset = [], 0
    for t, n in zip(specs, sizes):
        if t.std is None:
            leaves.append(jnp.ones(t.shape, jnp.float32))
        else:
            leaves.append(draws[offset:offset + n].reshape(t.shape) * t.std)
        offset += n
    return jax.tree.unflatten(tree, leaves)


def param_count(params: Params) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(params))


# ---- building blocks --------------------------------------------------------------------------
def rms_norm(x: jax.Array, weight: jax.Array, eps: float = 1e-6) -> jax.Array:
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (x32 * scale).astype(x.dtype) * weight


def swiglu(x: jax.Array, w: Params) -> jax.Array:
    """x [..., d_in] → [..., d_in] through a hidden width; gate and up projections in one matmul."""
    gate, up = jnp.split(x @ jnp.concatenate([w["w_gate"], w["w_up"]], axis=-1), 2, axis=-1)  # [..., width]
    return (jax.nn.silu(gate) * up) @ w["w_down"]


def rotary(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotate pairs (i, i + head_dim/2) of x [B, S, heads, hd] by position-dependent angles.

    Written as x·cos + swap(x)·sin with sign-folded tables, one elementwise pass (and so is its
    gradient); the products and sums are the same as the pairwise formula's.
    """
    half = x.shape[-1] // 2
    freqs = ROPE_BASE ** (-jnp.arange(half, dtype=jnp.float32) / half)  # [hd/2]
    angles = positions[:, None].astype(jnp.float32) * freqs  # [S, hd/2]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1)[None, :, None, :]  # [1, S, 1, hd]
    sin = jnp.concatenate([-jnp.sin(angles), jnp.sin(angles)], axis=-1)[None, :, None, :]
    x32 = x.astype(jnp.float32)
    swapped = jnp.flip(x32.reshape(*x.shape[:-1], 2, half), axis=-2).reshape(x.shape)  # halves swapped
    return (x32 * cos + swapped * sin).astype(x.dtype)


def attention(x: jax.Array, p: Params, spec: ModelSpec, layer: int) -> jax.Array:
    """Causal grouped-query attention, windowed on local layers. x [B, S, d] → [B, S, d].

    The query heads that share a KV head are stacked as rows ([B, KV, S·G, hd]), so each KV head
    needs one matmul and no copies of K or V. Queries go in blocks of `QUERY_BLOCK` positions, and a
    block scores only the keys its causal (or sliding) span reaches: the masked part of the S × S
    scores is mostly never computed. The softmax divides the output rows, not the probabilities.
    """
    B, S, _ = x.shape
    H, hd, KV = spec.n_heads, spec.head_dim, spec.kv_heads(layer)
    G = H // KV
    pos = jnp.arange(S)
    qkv = x @ jnp.concatenate([p["wq"], p["wk"], p["wv"]], axis=1)  # [B, S, (H + 2·KV)·hd], one matmul
    q, k, v = jnp.split(qkv, [H * hd, (H + KV) * hd], axis=-1)
    q = rotary(q.reshape(B, S, H, hd), pos)  # [B, S, H, hd]
    k = rotary(k.reshape(B, S, KV, hd), pos)  # [B, S, KV, hd]
    v = v.reshape(B, S, KV, hd)  # [B, S, KV, hd]
    q = jnp.swapaxes(q.reshape(B, S, KV, G, hd), 1, 2).reshape(B, KV, S * G, hd)  # [B, KV, S·G, hd]
    k, v = jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2)  # [B, KV, S, hd]
    window = None if spec.is_global(layer) else spec.window
    outs = []
    for start in range(0, S, QUERY_BLOCK):
        stop = min(S, start + QUERY_BLOCK)
        first = 0 if window is None else max(0, start - window + 1)
        q_pos = jnp.repeat(pos[start:stop], G)[:, None]  # [rows, 1] each row's query position
        k_pos = pos[None, first:stop]  # [1, keys]
        allowed = k_pos <= q_pos
        if window is not None:
            allowed &= k_pos > q_pos - window
        outs.append(_attend(q[:, :, start * G:stop * G], k[:, :, first:stop], v[:, :, first:stop], allowed))
    out = jnp.concatenate(outs, axis=2) if len(outs) > 1 else outs[0]  # [B, KV, S·G, hd]
    out = jnp.swapaxes(out.reshape(B, KV, S, G, hd), 1, 2).reshape(B, S, H * hd)  # [B, S, H·hd]
    return out @ p["wo"]


QUERY_BLOCK = 32
"""Query positions per attention block (S = 128: four blocks, about 40% of the scores skipped)."""


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, allowed: jax.Array) -> jax.Array:
    """Softmax attention of q [B, KV, rows, hd] over k, v [B, KV, keys, hd] where `allowed`
    [rows, keys] → [B, KV, rows, hd]. Every row allows at least one key (its own position)."""
    scores = jnp.einsum("bkqd,bktd->bkqt", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    # A finite floor rather than -inf: the same result (every row keeps its own token) and faster.
    scores = jnp.where(allowed, scores, -1e30)  # [B, KV, rows, keys]
    weights = jnp.exp(scores - jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True)))
    total = jnp.sum(weights, axis=-1, keepdims=True)  # [B, KV, rows, 1]
    out = jnp.einsum("bkqt,bktd->bkqd", weights.astype(v.dtype), v)  # [B, KV, rows, hd]
    return out / total.astype(v.dtype)


# ---- mixture of experts -----------------------------------------------------------------------
def capacity(spec: ModelSpec, seq_len: int, dropless: bool) -> int:
    """Slots per expert per group (one sequence)."""
    if dropless:
        return seq_len  # top-k experts are distinct, so an expert sees each token at most once
    return min(seq_len, math.ceil(spec.capacity_factor * seq_len * spec.top_k / spec.n_experts))


def route(x: jax.Array, router: jax.Array, spec: ModelSpec) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """Top-k routing in float32. x [B, S, d] → expert ids [B, S, k], weights [B, S, k], statistics."""
    logits = x.astype(jnp.float32) @ router.astype(jnp.float32)  # [B, S, E]
    if spec.router == "softmax":
        probs = jax.nn.softmax(logits, axis=-1)
        top_w, top_e = jax.lax.top_k(probs, spec.top_k)  # [B, S, k]
    else:
        scores = jax.nn.sigmoid(logits)
        top_w, top_e = jax.lax.top_k(scores, spec.top_k)
        probs = scores / jnp.sum(scores, axis=-1, keepdims=True)
    top_w = top_w / jnp.sum(top_w, axis=-1, keepdims=True)
    E = spec.n_experts
    load = jnp.mean(jax.nn.one_hot(top_e, E, dtype=jnp.float32), axis=(0, 1, 2))  # [E], sums to 1
    importance = jnp.mean(probs, axis=(0, 1))  # [E], sums to 1
    stats = {
        "load_balancing": E * jnp.sum(load * importance),
        "router_z": jnp.mean(jax.nn.logsumexp(logits, axis=-1) ** 2),
        "router_entropy": jnp.mean(-jnp.sum(probs * jnp.log(jnp.maximum(probs, 1e-30)), axis=-1)),
        "load_max_over_mean": jnp.max(load) * E,
        "load_min_over_mean": jnp.min(load) * E,
    }
    return top_e, top_w, stats


def assign_slots(top_e: jax.Array, n_experts: int, cap: int) -> tuple[jax.Array, jax.Array]:
    """Slot of every assignment in its group's expert buffer [E × cap], or E·cap when dropped.

    top_e [B, S, k] → slots [B, k·S] in priority order (all first choices, then second, ...), and
    the kept mask [B, k·S].
    """
    B, S, k = top_e.shape
    order = jnp.swapaxes(top_e, 1, 2).reshape(B, k * S)  # [B, kS] first choices first
    onehot = jax.nn.one_hot(order, n_experts, dtype=jnp.int32)  # [B, kS, E]
    position = jnp.sum((jnp.cumsum(onehot, axis=1) - 1) * onehot, axis=-1)  # [B, kS] place in queue
    kept = position < cap
    return jnp.where(kept, order * cap + position, n_experts * cap), kept


def _take_rows(x: jax.Array, index: jax.Array) -> jax.Array:
    """x [N, ...] → x[index] [*index.shape, ...]; the index N (one past the end) gives a zero row."""
    return jnp.take(x, index, axis=0, mode="fill", fill_value=0)


def _run_experts(
    x: jax.Array,
    slots: jax.Array,
    weights: jax.Array,
    experts: Params,
    n_experts: int,
    cap: int,
    expert_axis: str | None,
) -> jax.Array:
    """Dispatch, expert SwiGLUs, combine, for the groups this device holds.

    x [B, S, di], slots [B, kS], weights [B, S, k], experts' weights [E_local, ...] → [B, S, di].
    The slot buffer is expert-major (expert e, group b, place c at row e·B·cap + b·cap + c), so each
    expert's SwiGLU is one plain matmul over all its slots, with gate and up projections fused.
    With `expert_axis`, the slot buffers travel to the devices holding their experts and back.
    """
    B, S, di = x.shape
    k = weights.shape[-1]
    n = n_experts * B * cap
    group = jnp.arange(B)[:, None]  # [B, 1]
    kept = slots < n_experts * cap
    flat = jnp.where(kept, (slots // cap) * (B * cap) + group * cap + slots % cap, n)  # [B, kS], n: dropped
    token_row = group * S + jnp.arange(k * S)[None, :] % S  # [B, kS] the token of each assignment
    # Which token row fills each slot (B·S, a zero row, where none does); dropped ones land past the end.
    slot_token = jnp.full((n + 1,), B * S, jnp.int32).at[flat.ravel()].set(token_row.ravel())[:n]  # [n]
    buf = _take_rows(x.reshape(B * S, di), slot_token).reshape(n_experts, B * cap, di)  # [E, B·C, di]
    if expert_axis is not None:
        # Send each expert's slots to the device that holds it: [E, B·C, di] → [E/ep, ep·B·C, di].
        buf = jax.lax.all_to_all(buf, expert_axis, split_axis=0, concat_axis=1, tiled=True)
    w_in = jnp.concatenate([experts["w_gate"], experts["w_up"]], axis=-1)  # [E_local, di, 2·width]
    gate, up = jnp.split(jnp.einsum("end,edf->enf", buf, w_in), 2, axis=-1)  # [E_local, .., width] each
    out = jnp.einsum("enf,efd->end", jax.nn.silu(gate) * up, experts["w_down"])  # [E_local, .., di]
    if expert_axis is not None:
        out = jax.lax.all_to_all(out, expert_axis, split_axis=1, concat_axis=0, tiled=True)
    token_slots = jnp.swapaxes(flat.reshape(B, k, S), 1, 2)  # [B, S, k]
    picked = _take_rows(out.reshape(n, di), token_slots)  # [B, S, k, di], dropped → 0
    return jnp.einsum("bskd,bsk->bsd", picked, weights.astype(picked.dtype))


def moe_block(
    x: jax.Array, p: Params, spec: ModelSpec, dropless: bool, mesh: Mesh | None
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """x [B, S, d] → [B, S, d] plus routing statistics and the drop fraction."""
    B, S, _ = x.shape
    top_e, top_w, stats = route(x, p["router"], spec)
    cap = capacity(spec, S, dropless)
    slots, kept = assign_slots(top_e, spec.n_experts, cap)
    stats["drop_fraction"] = jnp.mean(jnp.logical_not(kept).astype(jnp.float32))
    h = x @ p["latent_down"] if "latent_down" in p else x  # [B, S, di]
    if mesh is None:
        y = _run_experts(h, slots, top_w, p["experts"], spec.n_experts, cap, None)
    else:
        groups = P(BATCH_AXES)

        def local(h: jax.Array, slots: jax.Array, w: jax.Array, experts: Params) -> jax.Array:
            return _run_experts(h, slots, w, experts, spec.n_experts, cap, EXPERT_AXIS)

        y = jax.shard_map(
            local, mesh=mesh, in_specs=(groups, groups, groups, P(EXPERT_AXIS)), out_specs=groups
        )(h, slots, top_w, p["experts"])
    if "latent_up" in p:
        y = y @ p["latent_up"]  # [B, S, d]
    if "shared" in p:
        shared = p["shared"]
        for j in range(spec.n_shared_experts):
            y = y + swiglu(x, jax.tree.map(lambda w, j=j: w[j], shared))
    return y, stats


# ---- the model --------------------------------------------------------------------------------
MOE_STATS = ("load_balancing", "router_z", "router_entropy", "load_max_over_mean", "load_min_over_mean", "drop_fraction")


def forward(
    params: Params, tokens: jax.Array, spec: ModelSpec, *, dropless: bool = False, mesh: Mesh | None = None
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """tokens [B, S] int → logits [B, S, vocab] (float32) and MoE statistics averaged over MoE layers.

    `load_max_over_mean` is the largest over layers (the worst-balanced layer), the rest are means.
    """
    x = params["embed"][tokens]  # [B, S, d]
    per_layer: list[dict[str, jax.Array]] = []
    for i, p in enumerate(params["layers"]):
        x = x + attention(rms_norm(x, p["attn_norm"]), p, spec, i)
        h = rms_norm(x, p["ffn_norm"])
        if "moe" in p:
            y, stats = moe_block(h, p["moe"], spec, dropless, mesh)
            per_layer.append(stats)
        else:
            y = swiglu(h, p["ffn"])
        x = x + y
    x = rms_norm(x, params["final_norm"])
    head = params["embed"].T if spec.tied_embeddings else params["head"]
    logits = (x @ head).astype(jnp.float32)  # [B, S, vocab]
    if not per_layer:
        return logits, {name: jnp.zeros((), jnp.float32) for name in MOE_STATS}
    stats = {name: jnp.mean(jnp.stack([s[name] for s in per_layer])) for name in MOE_STATS}
    stats["load_max_over_mean"] = jnp.max(jnp.stack([s["load_max_over_mean"] for s in per_layer]))
    stats["load_min_over_mean"] = jnp.min(jnp.stack([s["load_min_over_mean"] for s in per_layer]))
    return logits, stats


def cross_entropy(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-token cross-entropy in nats [B, S], and logsumexp of the logits [B, S] (for the z-loss)."""
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return lse - picked, lse
