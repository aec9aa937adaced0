"""ModelSpec accounting: the published names, exact counts against a brute-force count, FLOPs."""

from __future__ import annotations

import dataclasses

import pytest

from ladder import LadderError, ModelSpec, load_recipe
from ladder.config.plan import plan
from ladder.config.recipe import ArchRules


def _brute_force_shapes(s: ModelSpec, kv_for_layer) -> dict[str, list[tuple[int, ...]]]:
    """Every parameter tensor of the model, built from the description rather than the formulas."""
    shapes: dict[str, list[tuple[int, ...]]] = {"embedding": [(s.vocab_size, s.d_model)], "norms": [(s.d_model,)]}
    if not s.tied_embeddings:
        shapes["head"] = [(s.d_model, s.vocab_size)]
    layers = shapes.setdefault("layers", [])
    experts = shapes.setdefault("experts", [])
    for i in range(s.n_layers):
        kv = kv_for_layer(i)
        layers += [(s.d_model,), (s.d_model,)]  # pre-attention and pre-FFN norms
        layers += [(s.d_model, s.n_heads * s.head_dim), (s.d_model, kv * s.head_dim)]
        layers += [(s.d_model, kv * s.head_dim), (s.n_heads * s.head_dim, s.d_model)]
        if i in s.dense_layers or s.n_experts == 0:
            layers += [(s.d_model, s.dense_width)] * 2 + [(s.dense_width, s.d_model)]
            continue
        width_in = s.latent_dim or s.d_model
        layers.append((s.d_model, s.n_experts))
        if s.latent_dim:
            layers += [(s.d_model, s.latent_dim), (s.latent_dim, s.d_model)]
        for _ in range(s.n_experts):
            experts.append([(width_in, s.expert_width)] * 2 + [(s.expert_width, width_in)])
        for _ in range(s.n_shared_experts):
            layers += [(s.d_model, s.shared_width)] * 2 + [(s.shared_width, s.d_model)]
    return shapes


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def _count(s: ModelSpec, kv_for_layer, experts_used: int | None, embeddings: bool, norms: bool) -> int:
    shapes = _brute_force_shapes(s, kv_for_layer)
    total = sum(_size(x) for x in shapes["layers"] if norms or len(x) == 2)
    if norms:
        total += sum(_size(x) for x in shapes["norms"])
    per_layer_experts = s.n_experts
    n_moe = s.n_moe_layers
    expert_tensors = shapes["experts"]
    one_expert = sum(_size(x) for x in expert_tensors[0]) if expert_tensors else 0
    assert len(expert_tensors) == n_moe * per_layer_experts
    total += n_moe * (per_layer_experts if experts_used is None else experts_used) * one_expert
    if embeddings:
        total += _size(shapes["embedding"][0]) + sum(_size(x) for x in shapes.get("head", []))
    return total


SPECS = {
    "published-hero": load_recipe("marin-moe-hero").arch.spec(6144, 48),
    "published-rung1": load_recipe("marin-moe-hero").arch.spec(768, 8),
    "micro": load_recipe("micro-cpu").arch.spec(48, 3),
    "dense-tied": ModelSpec(d_model=64, n_layers=3, n_heads=4, head_dim=16, n_kv_heads_local=2,
                            n_kv_heads_global=1, vocab_size=300, window=16, global_every=3,
                            dense_width=170, tied_embeddings=True),
    "moe-with-dense-layers": ModelSpec(d_model=64, n_layers=4, n_heads=4, head_dim=16, n_kv_heads_local=4,
                                       n_kv_heads_global=2, vocab_size=256, n_experts=6, top_k=2,
                                       expert_width=40, n_shared_experts=0, dense_layers=(0,),
                                       dense_width=128, router="sigmoid"),
}


@pytest.mark.parametrize("name", SPECS)
def test_exact_counts_equal_a_brute_force_count_of_the_matrices(name):
    s = SPECS[name]
    assert s.total_params_exact() == _count(s, s.kv_heads, None, embeddings=True, norms=True)
    assert s.active_params_exact() == _count(s, s.kv_heads, s.top_k, embeddings=False, norms=True)


@pytest.mark.parametrize("name", SPECS)
def test_published_counts_use_the_larger_kv_head_count_and_ignore_norms(name):
    s = SPECS[name]
    kv_max = max(s.kv_heads(i) for i in range(s.n_layers))
    assert s.total_params() == _count(s, lambda i: kv_max, None, embeddings=True, norms=False)
    assert s.active_params() == _count(s, lambda i: kv_max, s.top_k, embeddings=False, norms=False)


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("kind", ["active", "total"])
@pytest.mark.parametrize("convention", ["published", "exact"])
def test_breakdown_sums_exactly(name, kind, convention):
    s = SPECS[name]
    groups = s.param_breakdown(kind, convention)
    expected = {
        ("active", "published"): s.active_params(),
        ("total", "published"): s.total_params(),
        ("active", "exact"): s.active_params_exact(),
        ("total", "exact"): s.total_params_exact(),
    }[(kind, convention)]
    assert sum(groups.values()) == expected


def test_published_hero_architecture():
    s = SPECS["published-hero"]
    assert (s.n_heads, s.head_dim, s.n_kv_heads_local, s.n_kv_heads_global) == (48, 128, 12, 6)
    assert [i for i in range(s.n_layers) if s.is_global(i)] == list(range(3, 48, 4))
    assert (s.n_experts, s.top_k, s.latent_dim, s.expert_width, s.n_shared_experts) == (384, 8, 3072, 3072, 2)
    assert s.param_breakdown("active")["router"] == 48 * 6144 * 384
    assert s.total_params() == 535_305_388_032
    assert s.active_params() == 22_762_487_808


def test_forward_flops_by_hand_on_a_small_model():
    s = ModelSpec(d_model=8, n_layers=2, n_heads=2, head_dim=4, n_kv_heads_local=1, n_kv_heads_global=2,
                  vocab_size=10, window=3, global_every=2, n_experts=4, top_k=1, expert_width=5,
                  n_shared_experts=1, shared_width=6, latent_dim=4)
    seq = 10
    # layer 0 local (span 3, 1 kv head), layer 1 global (span 10, 2 kv heads)
    proj = 2 * ((8 * 8 * 2 + 2 * 8 * 4 * 1) + (8 * 8 * 2 + 2 * 8 * 4 * 2))
    scores = 2 * 2 * 2 * 4 * (3 + 10)
    softmax = 3 * 2 * (3 + 10)
    router = 2 * 2 * 8 * 4
    latent = 2 * 2 * 2 * 8 * 4
    experts = 2 * 2 * 1 * 3 * 4 * 5
    shared = 2 * 2 * 1 * 3 * 8 * 6
    head = 2 * 10 * 8
    body = proj + scores + softmax + router + latent + experts + shared
    assert s.forward_flops_per_token(seq) == body
    assert s.forward_flops_per_token(seq, include_head=True) == body + head
    # a sequence shorter than the window attends over the sequence on every layer
    assert s.flops_breakdown(2)["attention_scores"] == 2 * 2 * 2 * 4 * (2 + 2)


def test_the_planner_reproduces_the_published_ladder():
    p = plan(load_recipe("marin-moe-hero"))
    expected = [("1.6B-A61M", 48e9), ("4.0B-A162M", 128e9), ("11.5B-A481M", 381e9), ("27.7B-A1.2B", 926e9)]
    assert [r.name for r in p.rungs] == [n for n, _ in expected]
    for run, (_, tokens) in zip(p.rungs, expected):
        assert round(run.tokens / 1e9) == tokens / 1e9
    hero = p.hero
    assert round(hero.spec.total_params() / 1e8) == 5353
    assert round(hero.spec.active_params() / 1e7) == 2276
    assert round(hero.tokens / 1e11) == 180
    assert hero.flops_with_head == pytest.approx(2.7e24, rel=0.01)
    assert [r.batch_size for r in p.runs()] == [1024, 2048, 6144, 11264, 11264]
    # the four rungs use well under the 1% budget (about 0.4%)
    assert 0.003 < p.ladder_compute_fraction < 0.005
    # fit compute is 3 × forward without head: below the with-head number, above 6·N·D at this size
    assert hero.flops_6nd < hero.fit_flops < hero.flops_with_head


def test_published_lr_rule():
    hero = plan(load_recipe("marin-moe-hero")).hero
    tokens_per_batch = 11264 * 4096
    expected = 0.087571 * hero.tokens**-0.3461 * 6144**-0.3448 * tokens_per_batch**0.5
    assert hero.schedule.peak_lr == pytest.approx(expected, rel=1e-12)
    assert hero.schedule.warmup_steps == round(0.01 * hero.stop_after_steps)
    assert hero.schedule.min_lr_ratio == 0.05


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(top_k=9), "top_k=9"),
        (dict(n_kv_heads_local=2), "divide n_heads=3"),
        (dict(dense_layers=(7,)), "dense_layers"),
        (dict(d_model=0), "d_model=0"),
    ],
)
def test_invalid_specs_are_refused_with_the_value(change, message):
    base = SPECS["micro"]
    with pytest.raises(LadderError, match=message):
        dataclasses.replace(base, **change)


def test_width_not_divisible_by_the_head_size():
    with pytest.raises(LadderError, match="not divisible by the head size 128"):
        ArchRules(vocab_size=10).spec(1000, 4)


def test_an_odd_head_size_is_refused_before_the_trainer_sees_it():
    # Rotary embeddings turn features in pairs: the trainer refuses an odd head_dim, so the spec and the
    # recipe refuse it first (a width divisible by it would otherwise plan a ladder no run of which trains).
    with pytest.raises(LadderError, match=r"^head_dim=15 must be even for rotary embeddings"):
        dataclasses.replace(SPECS["micro"], d_model=30, n_heads=2, head_dim=15)
    with pytest.raises(LadderError, match=r"^arch.head_dim=15 must be even for rotary embeddings .* e\.g\. 16$"):
        ArchRules(vocab_size=256, head_dim=15)
    assert ArchRules(vocab_size=256, head_dim=2).spec(32, 2).n_heads == 16


@pytest.mark.parametrize("n, name", [
    (15_400, "15K"), (1_100_000, "1.1M"), (61_000_000, "61M"), (999_400_000, "999M"), (999_800_832, "1.0B"),
    (999.96e9, "1.0T"), (535.3e9, "535.3B"), (999.6e3, "1.0M"), (999.6, "1.0K"), (999, "999"),
])
def test_a_count_that_rounds_to_1000_of_a_unit_is_named_in_the_next(n, name):
    """A model of 999,800,832 parameters is 1.0B, not 1000M: the name's unit is chosen after rounding."""
    from ladder.config.spec import format_count

    assert format_count(n) == name
