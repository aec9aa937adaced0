"""`ModelSpec`: one decoder-only transformer (dense or MoE), with its parameter and FLOP accounting.

Conventions (DESIGN.md):
- *active* parameters are the non-embedding parameters one token passes through; *total* adds all
  routed experts, the input embedding and the output head.
- The *published* convention counts K and V with the larger of the local/global KV head counts on
  every layer and ignores norms: it reproduces the published model names. The *exact* convention
  counts the real tensors the trainer builds, norms included.
- Forward FLOPs per token: 2 per multiply-add of every matmul a token passes, attention scores and
  the weighted sum over the full attended span (the sequence on global layers, the window on local
  ones), 3 per attention score for the softmax; the output head is reported separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ladder.config.limits import (
    MAX_EXPERTS,
    MAX_FFN_WIDTH,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_SEQ_LEN,
    MAX_VOCAB,
    MAX_WIDTH,
    finite,
    positive,
)
from ladder.errors import LadderError

Kind = Literal["active", "total"]
Convention = Literal["published", "exact"]


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one model. Widths are in features, the window in tokens."""

    d_model: int
    """Residual stream width."""
    n_layers: int
    n_heads: int
    """Query heads per layer."""
    head_dim: int
    n_kv_heads_local: int
    """KV heads on sliding-window (local) layers."""
    n_kv_heads_global: int
    """KV heads on global (full causal) layers."""
    vocab_size: int
    window: int | None = None
    """Sliding-window span of local layers in tokens; None makes every layer global."""
    global_every: int = 1
    """Every k-th layer is global (layers k-1, 2k-1, ... from 0); the rest are local."""
    n_experts: int = 0
    """Routed experts per MoE layer; 0 makes every layer a dense FFN."""
    top_k: int = 0
    """Routed experts each token uses."""
    expert_width: int = 0
    """Hidden width of one routed SwiGLU expert."""
    n_shared_experts: int = 0
    """SwiGLU experts every token passes, working on the full d_model."""
    shared_width: int = 0
    latent_dim: int | None = None
    """Routed experts work in this width: a d_model→latent projection before, latent→d_model after."""
    dense_layers: tuple[int, ...] = ()
    """Layers (from 0) with a dense SwiGLU FFN instead of MoE."""
    dense_width: int = 0
    """Hidden width of the dense SwiGLU FFN."""
    capacity_factor: float = 1.0
    """Expert capacity = capacity_factor × tokens × top_k / n_experts during training."""
    router: Literal["softmax", "sigmoid"] = "softmax"
    tied_embeddings: bool = False
    """Share the input embedding with the output head."""

    def __post_init__(self) -> None:
        for name, hi in (("d_model", MAX_WIDTH), ("n_layers", MAX_LAYERS), ("n_heads", MAX_HEADS),
                         ("head_dim", MAX_WIDTH), ("vocab_size", MAX_VOCAB), ("global_every", MAX_LAYERS)):
            positive(name, getattr(self, name), hi)
        if self.n_heads * self.head_dim != self.d_model:
            raise LadderError(
                f"n_heads={self.n_heads} × head_dim={self.head_dim} = {self.n_heads * self.head_dim} "
                f"must equal d_model={self.d_model}: the heads split the residual width evenly"
            )
        if self.head_dim % 2:
            raise LadderError(f"head_dim={self.head_dim} must be even for rotary embeddings (they turn features in "
                              "pairs); give an even head size, e.g. 16")
        for name, hi in (("n_experts", MAX_EXPERTS), ("top_k", MAX_EXPERTS), ("n_shared_experts", MAX_EXPERTS),
                         ("expert_width", MAX_FFN_WIDTH), ("shared_width", MAX_FFN_WIDTH),
                         ("dense_width", MAX_FFN_WIDTH)):
            if getattr(self, name) > hi:
                raise LadderError(f"{name}={getattr(self, name)} is too large: at most {hi:,}")
        finite("capacity_factor", self.capacity_factor)
        if self.window is not None:
            positive("window", self.window, MAX_SEQ_LEN)
        if self.latent_dim is not None:
            positive("latent_dim", self.latent_dim, MAX_WIDTH)
        if not self.n_experts and self.top_k:
            raise LadderError(
                f"top_k={self.top_k} with n_experts=0: a dense model routes to no experts; "
                "set top_k to 0 (dense) or n_experts to at least top_k"
            )
        for name in ("n_kv_heads_local", "n_kv_heads_global"):
            kv = getattr(self, name)
            if kv <= 0 or self.n_heads % kv:
                raise LadderError(f"{name}={kv} must be positive and divide n_heads={self.n_heads}")
        if self.n_experts < 0:
            raise LadderError(f"n_experts={self.n_experts} must be 0 (dense) or positive")
        if self.n_experts:
            if not 1 <= self.top_k <= self.n_experts:
                raise LadderError(
                    f"top_k={self.top_k} must be between 1 and n_experts={self.n_experts}: "
                    "a token cannot use more experts than the layer has"
                )
            if self.expert_width <= 0:
                raise LadderError(f"expert_width={self.expert_width} must be positive: an MoE layer (n_experts > 0) "
                                  "needs its experts' width (a field left out reads as 0)")
            if self.capacity_factor <= 0:
                raise LadderError(f"capacity_factor={self.capacity_factor} must be positive")
        if self.latent_dim is not None and (self.latent_dim <= 0 or not self.n_experts):
            raise LadderError(f"latent_dim={self.latent_dim} needs n_experts > 0 and a positive width")
        if self.n_shared_experts < 0 or (self.n_shared_experts and self.shared_width <= 0):
            raise LadderError("shared experts need n_shared_experts >= 0 and a positive shared_width")
        bad = [i for i in self.dense_layers if not 0 <= i < self.n_layers]
        if bad or len(set(self.dense_layers)) != len(self.dense_layers):
            raise LadderError(
                f"dense_layers={list(self.dense_layers)} must be distinct layers in 0..{self.n_layers - 1}"
            )
        if self.n_dense_layers and self.dense_width <= 0:
            raise LadderError(f"dense layers need a positive dense_width (got {self.dense_width}; a field left out "
                              "reads as 0)")

    # ---- layer layout -------------------------------------------------------------------------
    def is_global(self, layer: int) -> bool:
        return self.window is None or (layer + 1) % self.global_every == 0

    def is_moe(self, layer: int) -> bool:
        return self.n_experts > 0 and layer not in self.dense_layers

    def kv_heads(self, layer: int) -> int:
        return self.n_kv_heads_global if self.is_global(layer) else self.n_kv_heads_local

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe(i) for i in range(self.n_layers))

    @property
    def n_dense_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    @property
    def expert_in_dim(self) -> int:
        """Width routed experts read and write: the latent width, or d_model."""
        return self.latent_dim if self.latent_dim is not None else self.d_model

    # ---- parameters -----------------------------------------------------------------------------
    def param_breakdown(self, kind: Kind = "active", convention: Convention = "published") -> dict[str, int]:
        """Parameters per group; the values sum exactly to the requested count."""
        d, hd, L = self.d_model, self.head_dim, self.n_layers
        if convention == "published":
            kv_used = {self.kv_heads(i) for i in range(L)}
            kv = 2 * L * d * hd * max(kv_used)
        else:
            kv = sum(2 * d * hd * self.kv_heads(i) for i in range(L))
        experts = self.top_k if kind == "active" else self.n_experts
        moe = self.n_moe_layers
        groups = {
            "attention_qo": L * 2 * d * self.n_heads * hd,
            "attention_kv": kv,
            "router": moe * d * self.n_experts,
            "latent_projections": moe * 2 * d * self.latent_dim if self.latent_dim else 0,
            "routed_experts": moe * experts * 3 * self.expert_in_dim * self.expert_width,
            "shared_experts": moe * self.n_shared_experts * 3 * d * self.shared_width,
            "dense_ffn": self.n_dense_layers * 3 * d * self.dense_width,
        }
        if convention == "exact":
            groups["norms"] = (2 * L + 1) * d
        if kind == "total":
            groups["embedding"] = self.vocab_size * d
            groups["head"] = 0 if self.tied_embeddings else self.vocab_size * d
        return groups

    def active_params(self) -> int:
        """Published convention: non-embedding parameters a token uses (names like 'A23B')."""
        return sum(self.param_breakdown("active", "published").values())

    def total_params(self) -> int:
        """Published convention: all experts plus input embedding and output head."""
        return sum(self.param_breakdown("total", "published").values())

    def active_params_exact(self) -> int:
        return sum(self.param_breakdown("active", "exact").values())

    def total_params_exact(self) -> int:
        """Every parameter the model holds: equals the size of the trainer's parameter tree."""
        return sum(self.param_breakdown("total", "exact").values())

    def name(self) -> str:
        """Published-style name, total then active: e.g. '1.6B-A61M'."""
        return f"{format_count(self.total_params())}-A{format_count(self.active_params())}"

    # ---- FLOPs ------------------------------------------------------------------------------------
    def flops_breakdown(self, seq_len: int) -> dict[str, float]:
        """Forward FLOPs per token by group at sequence length `seq_len` (the head included)."""
        if seq_len <= 0:
            raise LadderError(f"seq_len={seq_len} must be positive")
        d, hd, H = self.d_model, self.head_dim, self.n_heads
        exact = self.param_breakdown("active", "exact")
        scores = softmax = 0.0
        for layer in range(self.n_layers):
            span = seq_len if self.is_global(layer) else min(self.window or seq_len, seq_len)
            scores += 2 * 2 * H * hd * span  # q·k for every key, then the weighted sum of values
            softmax += 3 * H * span
        return {
            "attention_projections": 2.0 * (exact["attention_qo"] + exact["attention_kv"]),
            "attention_scores": scores,
            "attention_softmax": softmax,
            "router": 2.0 * exact["router"],
            "latent_projections": 2.0 * exact["latent_projections"],
            "routed_experts": 2.0 * exact["routed_experts"],
            "shared_experts": 2.0 * exact["shared_experts"],
            "dense_ffn": 2.0 * exact["dense_ffn"],
            "head": 2.0 * self.vocab_size * d,
        }

    def forward_flops_per_token(self, seq_len: int, include_head: bool = False) -> float:
        groups = self.flops_breakdown(seq_len)
        return sum(v for k, v in groups.items() if include_head or k != "head")


def format_count(n: float) -> str:
    """Human count as in model names: 15K, 1.1M, 61M, 162M, 1.2B, 27.7B, 535.3B."""
    units = (("", 1.0), ("K", 1e3), ("M", 1e6), ("B", 1e9), ("T", 1e12))
    i = max([0] + [k for k, (_, scale) in enumerate(units) if n >= scale])
    while True:
        unit, scale = units[i]
        x = n / scale
        # billions always carry a decimal (4.0B, 27.7B); smaller units only below 10 (1.1M, 61M)
        text = f"{x:.1f}" if unit in ("T", "B") or (unit and x < 9.95) else f"{x:.0f}"
        if float(text) < 1000 or i == len(units) - 1:
            return text + unit
        i += 1  # 999.96M rounds to 1000M: it is 1.0B
