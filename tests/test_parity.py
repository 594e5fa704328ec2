"""Parity: every route to multi-head attention gives the same numbers.

The routes, all fed the same weights (`mha_numpy.init_weights`) and inputs:

1. a plain per-head loop written here (slice each head's columns of ``wq, wk, wv``, attend,
   concatenate, multiply by ``wo``), computed in float64: the reference;
2. `mha_numpy.MultiHead`;
3. `mha_torch.MultiHead`;
4. ``torch.nn.MultiheadAttention`` with our weights copied in (its boolean mask: True = BLOCKED);
5. ``torch.nn.functional.scaled_dot_product_attention`` on our split q, k, v (True = take part).

Shapes, masks, self/cross attention and dtypes vary over many seeded cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from lessons_lib import mha_numpy as nc
from lessons_lib import mha_torch as tc

# Tiny tensors: extra threads only add start-up cost (tens of ms per op on a busy machine).
torch.set_num_threads(1)

MASK_KINDS = ("none", "causal", "random_TS", "random_BTS", "random_BhTS")
TORCH_DTYPES: dict[Any, torch.dtype] = {np.float32: torch.float32, np.float64: torch.float64}
# (rtol, atol) against the float64 reference; float32 sums over at most D = 20 terms.
TOLERANCE: dict[Any, tuple[float, float]] = {np.float32: (1e-4, 2e-5), np.float64: (1e-10, 1e-12)}


@dataclass(frozen=True)
class Case:
    seed: int
    B: int
    T: int
    S: int
    h: int
    d_h: int
    cross: bool
    mask: str
    dtype: Any  # np.float32 or np.float64

    @property
    def D(self) -> int:
        return self.h * self.d_h

    @property
    def id(self) -> str:
        kind = "cross" if self.cross else "self"
        return (
            f"{kind}-{self.mask}-{np.dtype(self.dtype).name}-"
            f"B{self.B}T{self.T}S{self.S}D{self.D}h{self.h}-seed{self.seed}"
        )


def build_cases() -> list[Case]:
    """Every (self/cross, mask kind, dtype) combination twice, with random sizes per seed."""
    cases = []
    seed = 0
    for _ in range(2):
        for cross in (False, True):
            for mask in MASK_KINDS:
                for dtype in (np.float32, np.float64):
                    rng = np.random.default_rng(1000 + seed)
                    B = int(rng.integers(1, 4))
                    T = int(rng.integers(1, 7))
                    h = int(rng.choice([1, 2, 3, 4]))
                    d_h = int(rng.integers(1, 6))
                    if not cross:
                        S = T
                    elif mask == "causal":  # queries are the last T of S positions
                        S = T + int(rng.integers(1, 4))
                    else:
                        S = int(rng.choice([s for s in range(1, 8) if s != T]))
                    cases.append(Case(seed, B, T, S, h, d_h, cross, mask, dtype))
                    seed += 1
    # Edge sizes: one query, one head, one feature per head, one source position.
    cases.append(Case(seed, 1, 1, 1, 1, 1, False, "causal", np.float64))
    cases.append(Case(seed + 1, 2, 1, 5, 4, 1, True, "random_BhTS", np.float32))
    cases.append(Case(seed + 2, 1, 5, 1, 2, 3, True, "none", np.float64))
    return cases


CASES = build_cases()
CASE_IDS = [case.id for case in CASES]


def random_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """Random boolean mask ``(..., T, S)`` in which every row has at least one True."""
    allowed = rng.random(shape) < 0.5
    rescue = rng.integers(0, shape[-1], size=shape[:-1])  # one allowed position per row
    np.put_along_axis(allowed, rescue[..., None], True, axis=-1)
    return allowed


def make_inputs(case: Case) -> tuple[NDArray[Any], NDArray[Any] | None, NDArray[np.bool_] | None]:
    """``query (B, T, D)``, ``context (B, S, D)`` or None (self-attention), mask or None."""
    rng = np.random.default_rng(case.seed)
    query: NDArray[Any] = rng.standard_normal((case.B, case.T, case.D)).astype(case.dtype)
    context: NDArray[Any] | None = None  # self-attention
    if case.cross:
        context = rng.standard_normal((case.B, case.S, case.D)).astype(case.dtype)
    shapes = {
        "random_TS": (case.T, case.S),
        "random_BTS": (case.B, case.T, case.S),
        "random_BhTS": (case.B, case.h, case.T, case.S),
    }
    if case.mask == "none":
        allowed = None
    elif case.mask == "causal":
        allowed = nc.causal_mask(case.T, case.S)
    else:
        allowed = random_mask(rng, shapes[case.mask])
    return query, context, allowed


def as_four_axes(allowed: NDArray[np.bool_], B: int, h: int, T: int, S: int) -> NDArray[np.bool_]:
    """A layer mask ``(T, S)``, ``(B, T, S)`` or ``(B, h, T, S)`` spelled out as ``(B, h, T, S)``."""
    if allowed.ndim == 3:
        allowed = allowed[:, None]  # (B, T, S) -> (B, 1, T, S)
    return np.broadcast_to(allowed, (B, h, T, S))


def per_head_loop(
    weights: dict[str, NDArray[np.float64]],
    query: NDArray[Any],
    context: NDArray[Any],
    allowed: NDArray[np.bool_] | None,
    heads: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Reference layer in float64, one head at a time: ``(output (B, T, D), weights (B, h, T, S))``."""
    query = query.astype(np.float64)
    context = context.astype(np.float64)
    B, T, D = query.shape
    S = context.shape[1]
    d_h = D // heads
    full = None if allowed is None else as_four_axes(allowed, B, heads, T, S)
    head_outputs, head_weights = [], []
    for i in range(heads):
        cols = slice(i * d_h, (i + 1) * d_h)  # head i owns these columns of wq, wk, wv
        q = query @ weights["wq"][:, cols]  # (B, T, d_h)
        k = context @ weights["wk"][:, cols]  # (B, S, d_h)
        v = context @ weights["wv"][:, cols]  # (B, S, d_h)
        scores = np.einsum("btd,bsd->bts", q, k) / math.sqrt(d_h)
        if full is not None:
            scores = np.where(full[:, i], scores, -np.inf)
        exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
        w = exps / exps.sum(axis=-1, keepdims=True)  # (B, T, S)
        head_outputs.append(np.einsum("bts,bsd->btd", w, v))
        head_weights.append(w)
    concatenated = np.concatenate(head_outputs, axis=-1)  # (B, T, h * d_h) = (B, T, D)
    return concatenated @ weights["wo"], np.stack(head_weights, axis=1)


def reference(case: Case) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    query, context, allowed = make_inputs(case)
    context = query if context is None else context
    return per_head_loop(nc.init_weights(case.D, case.seed), query, context, allowed, case.h)


def tensor(x: NDArray[Any]) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def to_torch(x: NDArray[Any] | None) -> torch.Tensor | None:
    return None if x is None else tensor(x)


def assert_close(actual: Any, expected: NDArray[Any], dtype: Any) -> None:
    actual = actual.detach().numpy() if isinstance(actual, torch.Tensor) else actual
    assert actual.shape == expected.shape
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def torch_layer(case: Case) -> tc.MultiHead:
    return tc.MultiHead(case.D, case.h, seed=case.seed, dtype=TORCH_DTYPES[case.dtype])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_numpy_layer_matches_per_head_loop(case: Case) -> None:
    query, context, allowed = make_inputs(case)
    layer = nc.MultiHead(case.D, case.h, seed=case.seed, dtype=case.dtype)
    output, weights = layer(query, context, allowed)
    assert output.dtype == np.dtype(case.dtype)
    expected_output, expected_weights = reference(case)
    assert_close(output, expected_output, case.dtype)
    assert_close(weights, expected_weights, case.dtype)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_torch_layer_matches_numpy_layer_and_loop(case: Case) -> None:
    query, context, allowed = make_inputs(case)
    with torch.no_grad():
        output, weights = torch_layer(case)(to_torch(query), to_torch(context), to_torch(allowed))
    assert output.dtype == TORCH_DTYPES[case.dtype]
    numpy_output, numpy_weights = nc.MultiHead(case.D, case.h, seed=case.seed, dtype=case.dtype)(
        query, context, allowed
    )
    assert_close(output, numpy_output, case.dtype)
    assert_close(weights, numpy_weights, case.dtype)
    expected_output, expected_weights = reference(case)
    assert_close(output, expected_output, case.dtype)
    assert_close(weights, expected_weights, case.dtype)


def pytorch_blocked_mask(allowed: NDArray[np.bool_] | None, case: Case) -> torch.Tensor | None:
    """Our ``allowed`` as ``nn.MultiheadAttention``'s ``attn_mask``: True = BLOCKED, ``(T, S)`` or ``(B*h, T, S)``."""
    if allowed is None:
        return None
    blocked = torch.from_numpy(~allowed)
    if blocked.ndim == 2:
        return blocked
    if blocked.ndim == 3:  # (B, T, S) -> (B*h, T, S); PyTorch's row b*h + i is batch b, head i
        return blocked.repeat_interleave(case.h, dim=0)
    return blocked.reshape(case.B * case.h, case.T, case.S)  # (B, h, T, S) -> (B*h, T, S)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_nn_multihead_attention_with_our_weights(case: Case) -> None:
    query, context, allowed = make_inputs(case)
    ours = torch_layer(case)
    mha = torch.nn.MultiheadAttention(
        case.D, case.h, bias=False, batch_first=True, dtype=TORCH_DTYPES[case.dtype]
    )
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([ours.wq.weight, ours.wk.weight, ours.wv.weight]))
        mha.out_proj.weight.copy_(ours.wo.weight)
        q = to_torch(query)
        kv = q if context is None else to_torch(context)
        output, weights = mha(
            q, kv, kv,
            attn_mask=pytorch_blocked_mask(allowed, case),
            need_weights=True,
            average_attn_weights=False,
        )
    expected_output, expected_weights = reference(case)
    assert_close(output, expected_output, case.dtype)
    assert_close(weights, expected_weights, case.dtype)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_scaled_dot_product_attention_on_our_heads(case: Case) -> None:
    query, context, allowed = make_inputs(case)
    layer = torch_layer(case)
    with torch.no_grad():
        x = to_torch(query)
        c = x if context is None else to_torch(context)
        q = tc.split_heads(layer.wq(x), case.h)  # (B, h, T, d_h)
        k = tc.split_heads(layer.wk(c), case.h)  # (B, h, S, d_h)
        v = tc.split_heads(layer.wv(c), case.h)  # (B, h, S, d_h)
        mask = to_torch(allowed)
        if mask is not None and mask.ndim == 3:
            mask = mask[:, None]  # (B, T, S) -> (B, 1, T, S); SDPA's True = take part, like ours
        heads_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        output = layer.wo(tc.merge_heads(heads_out))
    expected_output, _ = reference(case)
    assert_close(output, expected_output, case.dtype)


def test_there_are_many_parity_cases_covering_every_combination() -> None:
    assert len(CASES) >= 30
    combos = {(c.cross, c.mask, c.dtype) for c in CASES}
    assert len(combos) == 2 * len(MASK_KINDS) * 2


@pytest.mark.parametrize("width, heads", [(1, 1), (6, 3), (12, 4)])
def test_layer_weights_are_init_weights_in_both_libraries(width: int, heads: int) -> None:
    weights = nc.init_weights(width, seed=7)
    numpy_layer = nc.MultiHead(width, heads, seed=7)
    torch_layer64 = tc.MultiHead(width, heads, seed=7, dtype=torch.float64)
    for name in ("wq", "wk", "wv", "wo"):
        assert np.array_equal(getattr(numpy_layer, name), weights[name])
        # nn.Linear stores (out, in): the NumPy (in, out) matrix transposed.
        assert np.array_equal(getattr(torch_layer64, name).weight.detach().numpy(), weights[name].T)
    assert numpy_layer.head_width == torch_layer64.head_width == width // heads


# --- the attention function with extra leading axes and broadcast masks -------------------------

ATTENTION_CASES = [
    # (q leading axes, k/v leading axes, T, S, d, d_v, mask shape or None)
    ((2, 3), (2, 3), 4, 5, 3, 2, None),
    ((2, 3), (2, 3), 4, 5, 3, 2, (4, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (1, 4, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (3, 4, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (2, 1, 4, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (2, 3, 4, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (1, 5)),
    ((2, 3), (2, 3), 4, 5, 3, 2, (3, 1, 5)),
    ((2, 3), (3,), 4, 4, 2, 6, (4, 4)),
    ((4, 1, 2), (4, 1, 2), 1, 3, 5, 1, (1, 2, 1, 3)),
    ((), (), 3, 6, 4, 4, (3, 6)),
]


def attention_rowwise(
    q: NDArray[np.float64], k: NDArray[np.float64], v: NDArray[np.float64], allowed: NDArray[np.bool_] | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Reference: one query row at a time, over every leading index."""
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    T, S = q.shape[-2], k.shape[-2]
    q = np.broadcast_to(q, lead + q.shape[-2:])
    k = np.broadcast_to(k, lead + k.shape[-2:])
    v = np.broadcast_to(v, lead + v.shape[-2:])
    mask = np.ones((*lead, T, S), bool) if allowed is None else np.broadcast_to(allowed, (*lead, T, S))
    out = np.zeros((*lead, T, v.shape[-1]))
    weights = np.zeros((*lead, T, S))
    for index in np.ndindex(*lead):
        for t in range(T):
            scores = np.array([q[index][t] @ k[index][s] for s in range(S)]) / math.sqrt(q.shape[-1])
            scores = np.where(mask[index][t], scores, -np.inf)
            w = np.exp(scores - scores.max())
            w /= w.sum()
            weights[index][t] = w
            out[index][t] = w @ v[index]
    return out, weights


@pytest.mark.parametrize("q_lead, kv_lead, T, S, d, d_v, mask_shape", ATTENTION_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_function_numpy_torch_and_rowwise_agree(
    q_lead: tuple[int, ...], kv_lead: tuple[int, ...], T: int, S: int, d: int, d_v: int,
    mask_shape: tuple[int, ...] | None, dtype: Any,
) -> None:
    rng = np.random.default_rng(T * 100 + S * 10 + d)
    q: NDArray[Any] = rng.standard_normal((*q_lead, T, d)).astype(dtype)
    k: NDArray[Any] = rng.standard_normal((*kv_lead, S, d)).astype(dtype)
    v: NDArray[Any] = rng.standard_normal((*kv_lead, S, d_v)).astype(dtype)
    allowed = None if mask_shape is None else random_mask(rng, mask_shape)
    numpy_out, numpy_weights = nc.attention(q, k, v, allowed)
    torch_out, torch_weights = tc.attention(tensor(q), tensor(k), tensor(v), to_torch(allowed))
    expected_out, expected_weights = attention_rowwise(q, k, v, allowed)
    lead = np.broadcast_shapes(q_lead, kv_lead)
    assert numpy_out.shape == tuple(torch_out.shape) == (*lead, T, d_v)
    assert numpy_weights.shape == tuple(torch_weights.shape) == (*lead, T, S)
    for out, weights in ((numpy_out, numpy_weights), (torch_out, torch_weights)):
        assert_close(out, expected_out, dtype)
        assert_close(weights, expected_weights, dtype)


# --- split / merge, causal masks -----------------------------------------------------------------

SPLIT_SHAPES = [(1, 1, 1, 1), (2, 4, 8, 2), (2, 4, 8, 8), (3, 5, 12, 3), (1, 7, 12, 4), (2, 1, 6, 6)]


@pytest.mark.parametrize("B, T, D, heads", SPLIT_SHAPES)
def test_split_and_merge_round_trip_in_both_libraries(B: int, T: int, D: int, heads: int) -> None:
    x = np.random.default_rng(D).standard_normal((B, T, D))
    d_h = D // heads
    numpy_split = nc.split_heads(x, heads)
    torch_split = tc.split_heads(torch.from_numpy(x), heads)
    assert numpy_split.shape == tuple(torch_split.shape) == (B, heads, T, d_h)
    assert np.array_equal(torch_split.numpy(), numpy_split)
    for i in range(heads):  # head i holds features i*d_h .. (i+1)*d_h - 1 of every position
        assert np.array_equal(numpy_split[:, i], x[:, :, i * d_h : (i + 1) * d_h])
    assert np.array_equal(nc.merge_heads(numpy_split), x)
    assert np.array_equal(tc.merge_heads(torch_split).numpy(), x)
    # And the other way round: split(merge(y)) == y for any (B, h, T, d_h).
    y = np.random.default_rng(T).standard_normal((B, heads, T, d_h))
    assert np.array_equal(nc.split_heads(nc.merge_heads(y), heads), y)
    assert np.array_equal(tc.split_heads(tc.merge_heads(torch.from_numpy(y)), heads).numpy(), y)


@pytest.mark.parametrize("T, S", [(1, None), (4, None), (1, 1), (3, 3), (1, 5), (3, 7), (6, 8)])
def test_causal_mask_numpy_torch_and_definition_agree(T: int, S: int | None) -> None:
    numpy_mask = nc.causal_mask(T, S)
    torch_mask = tc.causal_mask(T, S)
    S_ = T if S is None else S
    expected = np.array([[s <= S_ - T + t for s in range(S_)] for t in range(T)], dtype=bool)
    assert numpy_mask.dtype == np.bool_ and torch_mask.dtype == torch.bool
    assert np.array_equal(numpy_mask, expected)
    assert np.array_equal(torch_mask.numpy(), expected)
    # The last query (the newest token) sees every source position.
    assert numpy_mask[-1].all()


def test_split_and_merge_move_integers_too() -> None:
    """A split only moves numbers, so lessons 02 and 03 may label features with integers."""
    labels = np.arange(2 * 3 * 8).reshape(2, 3, 8)  # (B, T, D), int64
    numpy_heads = nc.split_heads(labels, 2)  # type: ignore[arg-type]  # any dtype is accepted
    assert numpy_heads.dtype == np.int64 and numpy_heads.shape == (2, 2, 3, 4)
    assert np.array_equal(nc.merge_heads(numpy_heads), labels)
    torch_heads = tc.split_heads(torch.from_numpy(labels), 2)
    assert torch_heads.dtype == torch.int64 and tuple(torch_heads.shape) == (2, 2, 3, 4)
    assert np.array_equal(tc.merge_heads(torch_heads).numpy(), labels)
