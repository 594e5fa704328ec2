"""Properties of attention that hold for every input, checked with Hypothesis.

Hypothesis draws the sizes, a seed for the numbers and the boolean mask; each property runs on
`mha_numpy` and on `mha_torch` (float64). Runs are derandomized so every run tests the same examples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.typing import NDArray

from lessons_lib import mha_numpy as nc
from lessons_lib import mha_torch as tc

# Tiny tensors: extra threads only add start-up cost (tens of ms per op on a busy machine).
torch.set_num_threads(1)

SETTINGS = settings(derandomize=True, max_examples=50, deadline=None, database=None)
Arrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]


def numpy_attention(q: Any, k: Any, v: Any, allowed: Any) -> tuple[NDArray[Any], NDArray[Any]]:
    return nc.attention(q, k, v, allowed)


def torch_attention(q: Any, k: Any, v: Any, allowed: Any) -> tuple[NDArray[Any], NDArray[Any]]:
    mask = None if allowed is None else torch.from_numpy(allowed)
    out, weights = tc.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), mask)
    return out.numpy(), weights.numpy()


# Each example runs through both libraries (one Hypothesis run instead of two keeps this fast).
BOTH = (numpy_attention, torch_attention)


@st.composite
def attention_inputs(draw: st.DrawFn, scale: float = 3.0) -> Arrays:
    """``q (B, T, d)``, ``k (B, S, d)``, ``v (B, S, d_v)`` and a mask ``(B, T, S)`` with >= 1 True per row.

    Hypothesis draws the sizes, a seed and how dense the mask is (0.0: exactly one allowed position
    per row, 1.0: no masking); the numbers come from that seed, which keeps each example cheap.
    """
    B = draw(st.integers(1, 2))
    T = draw(st.integers(1, 4))
    S = draw(st.integers(1, 5))
    d = draw(st.integers(1, 4))
    d_v = draw(st.integers(1, 3))
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.uniform(-scale, scale, (B, T, d))
    k = rng.uniform(-scale, scale, (B, S, d))
    v = rng.uniform(-scale, scale, (B, S, d_v))
    allowed = rng.random((B, T, S)) < density
    rescue = rng.integers(0, S, size=(B, T))
    np.put_along_axis(allowed, rescue[..., None], True, axis=-1)  # every row keeps one position
    return q, k, v, allowed


@SETTINGS
@given(inputs=attention_inputs())
def test_weights_are_probability_rows(inputs: Arrays) -> None:
    q, k, v, allowed = inputs
    for attend in BOTH:
        for mask in (None, allowed):
            _, weights = attend(q, k, v, mask)
            assert np.all(weights >= 0), attend.__name__
            np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12, err_msg=attend.__name__)


@SETTINGS
@given(inputs=attention_inputs())
def test_masked_positions_get_exactly_zero_weight(inputs: Arrays) -> None:
    q, k, v, allowed = inputs
    for attend in BOTH:
        _, weights = attend(q, k, v, allowed)
        assert np.all(weights[~allowed] == 0.0), attend.__name__


@SETTINGS
@given(inputs=attention_inputs())
def test_output_is_a_convex_combination_of_allowed_values(inputs: Arrays) -> None:
    q, k, v, allowed = inputs
    # For each (b, t) and feature, the output lies between the smallest and largest allowed value.
    visible = allowed[..., None]  # (B, T, S, 1) against v (B, 1, S, d_v)
    low = np.where(visible, v[:, None], np.inf).min(axis=2)  # (B, T, d_v)
    high = np.where(visible, v[:, None], -np.inf).max(axis=2)
    for attend in BOTH:
        out, _ = attend(q, k, v, allowed)
        assert np.all(out >= low - 1e-12) and np.all(out <= high + 1e-12), attend.__name__


@SETTINGS
@given(inputs=attention_inputs(), data=st.data())
def test_permuting_source_positions_permutes_weights_only(inputs: Arrays, data: st.DataObject) -> None:
    q, k, v, allowed = inputs
    order = np.array(data.draw(st.permutations(range(k.shape[1]))))
    for attend in BOTH:
        out, weights = attend(q, k, v, allowed)
        out_permuted, weights_permuted = attend(q, k[:, order], v[:, order], allowed[..., order])
        np.testing.assert_allclose(weights_permuted, weights[..., order], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out_permuted, out, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(inputs=attention_inputs(scale=1e3))
def test_no_nan_for_any_mask_with_an_allowed_position_per_row(inputs: Arrays) -> None:
    q, k, v, allowed = inputs  # large values: scores up to ~1e6, exp would overflow unshifted
    for attend in BOTH:
        out, weights = attend(q, k, v, allowed)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights)), attend.__name__


@SETTINGS
@given(
    B=st.integers(1, 3), T=st.integers(1, 6), d_h=st.integers(1, 8), heads=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_merge_undoes_split_exactly(B: int, T: int, d_h: int, heads: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((B, T, heads * d_h))
    assert np.array_equal(nc.merge_heads(nc.split_heads(x, heads)), x)
    x_t = torch.from_numpy(x)
    assert torch.equal(tc.merge_heads(tc.split_heads(x_t, heads)), x_t)


@SETTINGS
@given(
    B=st.integers(1, 2), T=st.integers(1, 4), S=st.integers(1, 5), D=st.integers(1, 8),
    seed=st.integers(0, 2**16), cross=st.booleans(), data=st.data(),
)
def test_one_head_layer_is_single_head_attention_of_the_projections(
    B: int, T: int, S: int, D: int, seed: int, cross: bool, data: st.DataObject
) -> None:
    S = S if cross else T
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((B, T, D))
    context = rng.standard_normal((B, S, D)) if cross else query
    allowed = data.draw(hnp.arrays(np.bool_, (T, S)))
    allowed[:, -1] = True  # every query may see the last source position
    layer = nc.MultiHead(D, 1, seed=seed)
    output, weights = layer(query, context if cross else None, allowed)
    single_out, single_weights = nc.attention(query @ layer.wq, context @ layer.wk, context @ layer.wv, allowed)
    np.testing.assert_allclose(output, single_out @ layer.wo, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(weights[:, 0], single_weights, rtol=1e-12, atol=1e-14)
    torch_layer = tc.MultiHead(D, 1, seed=seed, dtype=torch.float64)
    with torch.no_grad():
        torch_output, _ = torch_layer(
            torch.from_numpy(query), torch.from_numpy(context) if cross else None, torch.from_numpy(allowed)
        )
    np.testing.assert_allclose(torch_output.numpy(), output, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(
    B=st.integers(1, 2), T=st.integers(1, 4), heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16), data=st.data(),
)
def test_layer_weights_are_probability_rows_per_head(
    B: int, T: int, heads: int, seed: int, data: st.DataObject
) -> None:
    D = 4
    allowed = data.draw(hnp.arrays(np.bool_, (B, heads, T, T)))
    allowed[..., 0] = True  # every query may see the first position
    query = np.random.default_rng(seed).standard_normal((B, T, D))
    _, weights = nc.MultiHead(D, heads, seed=seed)(query, None, allowed)
    assert weights.shape == (B, heads, T, T)
    assert np.all(weights[~allowed] == 0.0) and np.all(weights >= 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
