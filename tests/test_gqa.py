"""Grouped-query attention (lesson 06): NumPy vs PyTorch vs SDPA vs an explicit per-head loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from lessons_lib import gqa_torch, mha_numpy, mha_torch
from lessons_lib.gqa_numpy import GroupedQueryAttention, from_multihead, kv_head_of_query, relative_error, repeat_kv


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def layer_setups(draw: st.DrawFn) -> dict[str, object]:
    heads = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
    d_h = draw(st.integers(1, 5))
    return {
        "heads": heads,
        "kv_heads": draw(st.sampled_from(divisors(heads))),
        "width": heads * d_h,
        "B": draw(st.integers(1, 3)),
        "T": draw(st.integers(1, 5)),
        "S": draw(st.integers(1, 6)),
        "cross": draw(st.booleans()),
        "mask": draw(st.sampled_from(["none", "causal", "random"])),
        "seed": draw(st.integers(0, 1000)),
    }


Floats = NDArray[np.floating]
Mask = NDArray[np.bool_]


def make_inputs(p: dict[str, object], dtype: type | np.dtype[np.floating]) -> tuple[Floats, Floats | None, Mask | None]:
    rng = np.random.default_rng(int(p["seed"]))  # type: ignore[call-overload]
    B, T, S, D = (int(p[k]) for k in ("B", "T", "S", "width"))  # type: ignore[call-overload]
    query: Floats = rng.normal(size=(B, T, D)).astype(dtype)
    context: Floats | None = rng.normal(size=(B, S, D)).astype(dtype) if p["cross"] else None
    S = S if p["cross"] else T
    allowed: Mask | None = None
    if p["mask"] == "causal" and S >= T:
        allowed = mha_numpy.causal_mask(T, S)
    elif p["mask"] == "random":
        allowed = rng.random((B, T, S)) < 0.6
        allowed[..., 0] = True  # every query row keeps one allowed position
    return query, context, allowed


def per_head_loop(
    layer: GroupedQueryAttention, query: Floats, context: Floats, allowed: Mask | None
) -> Floats:
    """Independent route: each query head i uses its own wq columns and K/V head i // g's columns."""
    d_h, g = layer.head_width, layer.group_size
    outputs = []
    for i in range(layer.heads):
        j = i // g
        q = query @ layer.wq[:, i * d_h : (i + 1) * d_h]
        k = context @ layer.wk[:, j * d_h : (j + 1) * d_h]
        v = context @ layer.wv[:, j * d_h : (j + 1) * d_h]
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d_h)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        outputs.append(weights @ v)
    result: Floats = np.concatenate(outputs, axis=-1) @ layer.wo
    return result


@settings(max_examples=40, deadline=None)
@given(layer_setups())
def test_numpy_matches_per_head_loop(p: dict[str, object]) -> None:
    layer = GroupedQueryAttention(p["width"], p["heads"], p["kv_heads"], seed=p["seed"])  # type: ignore[arg-type]
    query, context, allowed = make_inputs(p, np.float64)
    out, weights = layer(query, context, allowed)
    expected = per_head_loop(layer, query, query if context is None else context, allowed)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    B, T, _ = query.shape
    S = T if context is None else context.shape[1]
    assert weights.shape == (B, layer.heads, T, S)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(layer_setups(), st.sampled_from(["float32", "float64"]))
def test_torch_matches_numpy_and_sdpa(p: dict[str, object], dtype_name: str) -> None:
    np_dtype = np.dtype(dtype_name)
    torch_dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    tol = 1e-5 if dtype_name == "float32" else 1e-12
    args = (p["width"], p["heads"], p["kv_heads"])
    np_layer = GroupedQueryAttention(*args, seed=p["seed"], dtype=np_dtype)  # type: ignore[arg-type]
    t_layer = gqa_torch.GroupedQueryAttention(*args, seed=p["seed"], dtype=torch_dtype)  # type: ignore[arg-type]
    query, context, allowed = make_inputs(p, np_dtype)
    tq = torch.from_numpy(query)
    tc = None if context is None else torch.from_numpy(context)
    ta = None if allowed is None else torch.from_numpy(allowed)
    np_out, np_weights = np_layer(query, context, allowed)
    with torch.no_grad():
        t_out, t_weights = t_layer(tq, tc, ta)
        k, v = t_layer.keys_values(tq if tc is None else tc)  # (B, h_kv, S, d_h)
        q = mha_torch.split_heads(t_layer.wq(tq), t_layer.heads)  # (B, h, T, d_h)
        mask = None if ta is None else (ta[:, None] if ta.ndim == 3 else ta)
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        sdpa_out = t_layer.wo(mha_torch.merge_heads(sdpa))
        repeated = F.scaled_dot_product_attention(
            q, k.repeat_interleave(t_layer.group_size, 1), v.repeat_interleave(t_layer.group_size, 1), attn_mask=mask
        )
        repeated_out = t_layer.wo(mha_torch.merge_heads(repeated))
    np.testing.assert_allclose(t_out.numpy(), np_out, atol=tol, rtol=tol)
    np.testing.assert_allclose(t_weights.numpy(), np_weights, atol=tol, rtol=tol)
    np.testing.assert_allclose(sdpa_out.numpy(), t_out.numpy(), atol=tol, rtol=tol)
    np.testing.assert_allclose(repeated_out.numpy(), t_out.numpy(), atol=tol, rtol=tol)


def test_torch_weights_are_transposed_numpy_weights() -> None:
    np_layer = GroupedQueryAttention(12, 6, 2, seed=5)
    t_layer = gqa_torch.GroupedQueryAttention(12, 6, 2, seed=5, dtype=torch.float64)
    for name in ("wq", "wk", "wv", "wo"):
        np.testing.assert_array_equal(getattr(t_layer, name).weight.detach().numpy(), getattr(np_layer, name).T)
    assert np_layer.wk.shape == np_layer.wv.shape == (12, 2 * 2)
    assert t_layer.wk.weight.shape == (4, 12)


@pytest.mark.parametrize(("width", "heads", "seed"), [(8, 2, 0), (12, 4, 3), (16, 8, 7), (6, 1, 1)])
def test_equals_multihead_when_kv_heads_equals_heads(width: int, heads: int, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(2, 5, width))
    c = np.random.default_rng(seed + 1).normal(size=(2, 3, width))
    mha, layer = mha_numpy.MultiHead(width, heads, seed=seed), GroupedQueryAttention(width, heads, heads, seed=seed)
    for name in ("wq", "wk", "wv", "wo"):
        np.testing.assert_array_equal(getattr(layer, name), getattr(mha, name))
    for args in ((x,), (x, c), (x, None, mha_numpy.causal_mask(5))):
        out, weights = layer(*args)
        ref_out, ref_weights = mha(*args)
        np.testing.assert_array_equal(out, ref_out)
        np.testing.assert_array_equal(weights, ref_weights)
    t_mha = mha_torch.MultiHead(width, heads, seed=seed, dtype=torch.float64)
    t_layer = gqa_torch.GroupedQueryAttention(width, heads, heads, seed=seed, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(t_layer(torch.from_numpy(x))[0], t_mha(torch.from_numpy(x))[0])


def test_kv_columns_are_the_first_kv_heads_of_multihead() -> None:
    mha, layer = mha_numpy.MultiHead(16, 8, seed=2), GroupedQueryAttention(16, 8, 2, seed=2)
    np.testing.assert_array_equal(layer.wk, mha.wk[:, :4])
    np.testing.assert_array_equal(layer.wv, mha.wv[:, :4])
    np.testing.assert_array_equal(layer.wq, mha.wq)


def test_mqa_every_query_head_reads_the_same_keys() -> None:
    layer = GroupedQueryAttention(12, 4, 1, seed=0)
    x = np.random.default_rng(0).normal(size=(1, 4, 12))
    k, v = layer.keys_values(x)
    assert k.shape == v.shape == (1, 1, 4, 3)
    np.testing.assert_array_equal(kv_head_of_query(4, 1), [0, 0, 0, 0])


def test_repeat_kv_is_repeat_interleave_not_tile() -> None:
    kv = np.arange(2 * 3 * 1 * 1, dtype=float).reshape(2, 3, 1, 1)
    out = repeat_kv(kv, 2)
    assert out.shape == (2, 6, 1, 1)
    np.testing.assert_array_equal(out[0, :, 0, 0], [0, 0, 1, 1, 2, 2])
    assert not np.array_equal(out, np.tile(kv, (1, 2, 1, 1)))
    t_out = gqa_torch.repeat_kv(torch.from_numpy(kv), 2)
    np.testing.assert_array_equal(t_out.numpy(), out)


def test_kv_head_of_query() -> None:
    np.testing.assert_array_equal(kv_head_of_query(8, 2), [0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(kv_head_of_query(6, 3), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(kv_head_of_query(4, 4), [0, 1, 2, 3])


@pytest.mark.parametrize("kv_heads", [0, -2, 3, 5, 16])
def test_kv_heads_must_divide_heads(kv_heads: int) -> None:
    with pytest.raises(ValueError, match=r"kv_heads h_kv=.* positive divisor of heads h=8.*\[1, 2, 4, 8\]"):
        GroupedQueryAttention(16, 8, kv_heads)
    with pytest.raises(ValueError, match=r"\[1, 2, 4, 8\]"):
        gqa_torch.GroupedQueryAttention(16, 8, kv_heads)


def test_kv_heads_must_be_int() -> None:
    with pytest.raises(TypeError, match="kv_heads must be an int"):
        GroupedQueryAttention(16, 8, 2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("width", "heads", "message"), [(10, 4, "not divisible"), (0, 1, "width"), (8, 0, "heads")])
def test_layer_size_errors(width: int, heads: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GroupedQueryAttention(width, heads, 1)
    with pytest.raises(ValueError, match=message):
        gqa_torch.GroupedQueryAttention(width, heads, 1)


def test_input_errors() -> None:
    layer = GroupedQueryAttention(8, 4, 2)
    x = np.zeros((1, 3, 8))
    with pytest.raises(ValueError, match="width D is 8"):
        layer(np.zeros((1, 3, 6)))
    with pytest.raises(ValueError, match="width D is 8"):
        layer(x, np.zeros((1, 3, 5)))
    with pytest.raises(TypeError, match="floating-point"):
        layer(np.zeros((1, 3, 8), dtype=int))
    with pytest.raises(TypeError, match="dtype float32"):
        layer(x.astype(np.float32))
    with pytest.raises(ValueError, match="no allowed position"):
        layer(x, allowed=np.zeros((3, 3), dtype=bool))
    with pytest.raises(ValueError, match=r"\(T, S\)"):
        layer(x, allowed=np.ones((2, 3), dtype=bool))
    k, v = layer.keys_values(x)
    with pytest.raises(ValueError, match="h_kv=2"):
        layer.attend(x, repeat_kv(k, 2), repeat_kv(v, 2))
    with pytest.raises(ValueError, match="group_size"):
        repeat_kv(k, 0)
    with pytest.raises(ValueError, match="exactly 4 axes"):
        repeat_kv(k[0], 2)


def test_from_multihead_pools_contiguous_groups() -> None:
    mha = mha_numpy.MultiHead(16, 8, seed=4)
    layer = from_multihead(mha, 2)
    d_h = 2
    heads_k = mha.wk.reshape(16, 8, d_h)  # (D, h, d_h)
    np.testing.assert_allclose(layer.wk[:, :d_h], heads_k[:, 0:4].mean(axis=1))
    np.testing.assert_allclose(layer.wk[:, d_h:], heads_k[:, 4:8].mean(axis=1))
    np.testing.assert_array_equal(layer.wq, mha.wq)
    np.testing.assert_array_equal(layer.wo, mha.wo)
    assert layer.wv.shape == (16, 4)


def test_from_multihead_identity_and_mqa() -> None:
    mha = mha_numpy.MultiHead(12, 6, seed=1)
    x = np.random.default_rng(1).normal(size=(2, 4, 12))
    same = from_multihead(mha, 6)
    np.testing.assert_allclose(same(x)[0], mha(x)[0], atol=1e-15)
    assert relative_error(same(x)[0], mha(x)[0]) < 1e-14
    mqa = from_multihead(mha, 1)
    np.testing.assert_allclose(mqa.wk, mha.wk.reshape(12, 6, 2).mean(axis=1))
    assert relative_error(mqa(x)[0], mha(x)[0]) > 0.01


def test_from_multihead_exact_when_heads_in_a_group_agree() -> None:
    """If every head of a group already has the same K/V columns, pooling changes nothing."""
    mha = mha_numpy.MultiHead(16, 8, seed=2)
    for w in (mha.wk, mha.wv):
        per_head = w.reshape(16, 2, 4, 2)  # (D, h_kv, g, d_h)
        per_head[:] = per_head[:, :, :1]  # copy the first head of each group over the others
    x = np.random.default_rng(2).normal(size=(1, 5, 16))
    np.testing.assert_allclose(from_multihead(mha, 2)(x)[0], mha(x)[0], atol=1e-13)


def test_from_multihead_torch_matches_numpy() -> None:
    np_mha = mha_numpy.MultiHead(12, 6, seed=3)
    t_mha = mha_torch.MultiHead(12, 6, seed=3, dtype=torch.float64)
    x = np.random.default_rng(3).normal(size=(2, 4, 12))
    for kv_heads in (1, 2, 3, 6):
        np_out = from_multihead(np_mha, kv_heads)(x)[0]
        with torch.no_grad():
            t_out = gqa_torch.from_multihead(t_mha, kv_heads)(torch.from_numpy(x))[0]
        np.testing.assert_allclose(t_out.numpy(), np_out, atol=1e-12)
        with torch.no_grad():
            t_ref = t_mha(torch.from_numpy(x))[0]
        torch_error = gqa_torch.relative_error(t_out, t_ref)
        assert math.isclose(torch_error, relative_error(np_out, t_ref.numpy()), rel_tol=1e-9, abs_tol=1e-12)


def test_from_multihead_errors() -> None:
    with pytest.raises(TypeError, match="MultiHead"):
        from_multihead(GroupedQueryAttention(8, 2, 1), 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\[1, 2, 4\]"):
        from_multihead(mha_numpy.MultiHead(8, 4), 3)
    with pytest.raises(TypeError, match="MultiHead"):
        gqa_torch.from_multihead(mha_numpy.MultiHead(8, 4), 2)  # type: ignore[arg-type]


def test_reprs() -> None:
    assert "g=4" in repr(GroupedQueryAttention(16, 8, 2))
    assert "kv_heads=2" in repr(gqa_torch.GroupedQueryAttention(16, 8, 2))


def test_gqa_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, lessons_lib.gqa_numpy, lessons_lib.kv_cache; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_building_the_torch_layer_leaves_torch_rng_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    gqa_torch.GroupedQueryAttention(16, 8, 2, seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_numpy_integers_are_accepted_as_kv_heads() -> None:
    layer = GroupedQueryAttention(16, 8, np.int64(2))  # type: ignore[arg-type]
    assert layer.group_size == 4
    assert repeat_kv(np.zeros((1, 2, 3, 4)), np.int64(2)).shape == (1, 4, 3, 4)  # type: ignore[arg-type]
