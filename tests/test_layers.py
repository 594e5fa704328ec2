"""The layers' manners: built from given weights, converted like any nn.Module, checked once per call.

Covers every layer: `mha_numpy.MultiHead`, `mha_torch.MultiHead`, `gqa_numpy.GroupedQueryAttention`,
`gqa_torch.GroupedQueryAttention` and `mla.LatentAttention`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest
import torch

from lessons_lib import gqa_numpy, gqa_torch, mha_numpy, mha_torch, validation
from lessons_lib.mla import LatentAttention

torch.set_num_threads(1)

TORCH_LAYERS: list[Callable[[], torch.nn.Module]] = [
    lambda: mha_torch.MultiHead(8, 2, seed=3),
    lambda: gqa_torch.GroupedQueryAttention(8, 4, 2, seed=3),
]
TORCH_IDS = ["mha_torch", "gqa_torch"]


def x64(*shape: int, seed: int = 0) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.random.default_rng(seed).normal(size=shape)


# ----- nn.Module manners ---------------------------------------------------------------------
@pytest.mark.parametrize("make", TORCH_LAYERS, ids=TORCH_IDS)
@pytest.mark.parametrize(
    ("convert", "dtype"),
    [
        (lambda m: m.double(), torch.float64),
        (lambda m: m.double().float(), torch.float32),
        (lambda m: m.half(), torch.float16),
        (lambda m: m.to(torch.float64), torch.float64),
        (lambda m: m.to("cpu", torch.float64), torch.float64),
        (lambda m: m.to(device="cpu"), torch.float32),
    ],
    ids=["double", "double_float", "half", "to_dtype", "to_device_dtype", "to_device"],
)
def test_conversions_keep_the_layer_working(
    make: Callable[[], torch.nn.Module], convert: Callable[[torch.nn.Module], torch.nn.Module], dtype: torch.dtype
) -> None:
    reference = make().double()
    layer = convert(make())
    assert layer.dtype == dtype  # read from the parameters, never a stale copy
    x = torch.from_numpy(x64(2, 3, 8)).to(dtype)
    out, weights = layer(x)
    assert out.dtype == weights.dtype == dtype
    expected, _ = reference(x.double())
    tolerance = 1e-2 if dtype == torch.float16 else 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(out.double(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("make", TORCH_LAYERS, ids=TORCH_IDS)
def test_input_in_another_dtype_still_gets_a_clear_error(make: Callable[[], torch.nn.Module]) -> None:
    layer = make().double()
    with pytest.raises(TypeError, match=r"query has dtype torch.float32 but the layer's weights are torch.float64"):
        layer(torch.ones(1, 2, 8))


def test_state_dict_keys_are_documented_and_round_trip() -> None:
    source = mha_torch.MultiHead(8, 2, seed=1)
    assert list(source.state_dict()) == ["wq.weight", "wk.weight", "wv.weight", "wo.weight"]
    target = mha_torch.MultiHead(8, 2, seed=2)
    target.load_state_dict(source.state_dict())
    x = torch.ones(1, 3, 8)
    assert torch.equal(target(x)[0], source(x)[0])
    gqa = gqa_torch.GroupedQueryAttention(8, 4, 2, seed=1)
    shapes = {name: tuple(p.shape) for name, p in gqa.state_dict().items()}
    assert shapes == {"wq.weight": (8, 8), "wk.weight": (4, 8), "wv.weight": (4, 8), "wo.weight": (8, 8)}
    other = gqa_torch.GroupedQueryAttention(8, 4, 2, seed=5).double()
    other.load_state_dict(gqa.state_dict())  # copies into the float64 parameters
    assert other.dtype == torch.float64
    assert torch.allclose(other(x.double())[0].float(), gqa(x)[0], atol=1e-6)
    with pytest.raises(RuntimeError, match="size mismatch"):
        gqa_torch.GroupedQueryAttention(8, 4, 4).load_state_dict(gqa.state_dict())


# ----- building from given weights -----------------------------------------------------------
ONES = np.ones((8, 8))


def test_numpy_multihead_from_weights_equals_the_seeded_layer() -> None:
    seeded = mha_numpy.MultiHead(8, 2, seed=4)
    given = mha_numpy.MultiHead.from_weights(seeded.wq, seeded.wk, seeded.wv, seeded.wo, heads=2)
    x = x64(2, 3, 8)
    np.testing.assert_array_equal(given(x)[0], seeded(x)[0])
    assert (given.width, given.heads, given.head_width) == (8, 2, 4) and given.dtype == np.float64
    wq, wk, wv, wo = (w.astype(np.float32) for w in (seeded.wq, seeded.wk, seeded.wv, seeded.wo))
    as_f32 = mha_numpy.MultiHead.from_weights(wq, wk, wv, wo, 4)
    assert as_f32.dtype == np.float32 and as_f32.head_width == 2


def test_torch_multihead_from_weights_takes_nn_linear_layout() -> None:
    numpy_layer = mha_numpy.MultiHead(8, 2, seed=4)
    numpy_weights = (numpy_layer.wq, numpy_layer.wk, numpy_layer.wv, numpy_layer.wo)
    wq, wk, wv, wo = (torch.from_numpy(w.T.copy()) for w in numpy_weights)
    layer = mha_torch.MultiHead.from_weights(wq, wk, wv, wo, heads=2)
    assert layer.dtype == torch.float64
    x = x64(1, 4, 8)
    np.testing.assert_allclose(layer(torch.from_numpy(x))[0].detach().numpy(), numpy_layer(x)[0], atol=1e-12)
    wq[0, 0] = 99.0  # the layer holds copies
    assert layer.wq.weight[0, 0] != 99.0


def test_gqa_from_weights_in_both_libraries() -> None:
    numpy_layer = gqa_numpy.GroupedQueryAttention(8, 4, 2, seed=6)
    wq, wk, wv, wo = numpy_layer.wq, numpy_layer.wk, numpy_layer.wv, numpy_layer.wo
    given = gqa_numpy.GroupedQueryAttention.from_weights(wq, wk, wv, wo, heads=4, kv_heads=2)
    tq, tk, tv, to = (torch.from_numpy(w.T.copy()) for w in (wq, wk, wv, wo))
    torch_layer = gqa_torch.GroupedQueryAttention.from_weights(tq, tk, tv, to, heads=4, kv_heads=2)
    x = x64(2, 5, 8)
    np.testing.assert_array_equal(given(x)[0], numpy_layer(x)[0])
    np.testing.assert_allclose(torch_layer(torch.from_numpy(x))[0].detach().numpy(), numpy_layer(x)[0], atol=1e-12)


def test_latent_attention_from_weights() -> None:
    seeded = LatentAttention(8, 2, latent_width=3, rope_width=2, nope_width=5, value_width=3, seed=7)
    names = ("w_dkv", "w_uk", "w_uv", "w_kr", "w_q", "w_qr", "w_o")
    given = LatentAttention.from_weights(*(getattr(seeded, n) for n in names))
    assert repr(given) == repr(seeded)
    x = x64(1, 4, 8)
    np.testing.assert_array_equal(given(x)[0], seeded(x)[0])
    bad = [getattr(seeded, n) for n in names]
    bad[4] = bad[4][:, :, :4]  # w_q with d_nope=4 while w_uk says 5
    with pytest.raises(ValueError, match=r"w_q must have shape \(h, D, d_nope\) = \(2, 8, 5\), got \(2, 8, 4\)"):
        LatentAttention.from_weights(*bad)


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: mha_numpy.MultiHead.from_weights(ONES, np.ones((8, 4)), ONES, ONES, 2),
         ValueError, r"wk must have shape \(D, D\) = \(8, 8\), got \(8, 4\)"),
        (lambda: mha_numpy.MultiHead.from_weights(ONES, ONES, ONES, ONES, 3),
         ValueError, "not divisible by heads h=3"),
        (lambda: mha_numpy.MultiHead.from_weights(ONES, ONES.astype(np.float32), ONES, ONES, 2),
         TypeError, "must share one dtype"),
        (lambda: mha_numpy.MultiHead.from_weights(np.ones(8), np.ones(8), np.ones(8), np.ones(8), 2),
         ValueError, "wq must have exactly 2 axes"),
        (lambda: mha_torch.MultiHead.from_weights(*(np.ones((8, 8)),) * 4, heads=2),  # type: ignore[arg-type]
         TypeError, "wq must be a torch.Tensor here, got ndarray"),
        (lambda: gqa_numpy.GroupedQueryAttention.from_weights(*(np.ones((8, 8)),) * 4, heads=4, kv_heads=2),
         ValueError, r"wk must have shape \(D, h_kv \* d_h\) = \(8, 4\), got \(8, 8\)"),
        (lambda: gqa_torch.GroupedQueryAttention.from_weights(*(torch.ones(8, 8),) * 4, heads=4, kv_heads=2),
         ValueError, r"wk must have shape \(h_kv \* d_h, D\) = \(4, 8\), got \(8, 8\)"),
        (lambda: gqa_torch.GroupedQueryAttention.from_weights(*(torch.ones(8, 8),) * 4, heads=4, kv_heads=3),
         ValueError, "positive divisor of heads h=4"),
    ],
    ids=["mha_wrong_shape", "mha_bad_heads", "mha_mixed_dtypes", "mha_rank_1", "torch_given_numpy",
         "gqa_numpy_wrong_kv_shape", "gqa_torch_wrong_kv_shape", "gqa_bad_kv_heads"],
)
def test_from_weights_rejects_bad_weights(build: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        build()


# ----- checks at the boundary: each check runs once per call ---------------------------------
VALIDATION_FILE = Path(validation.__file__).resolve()


@contextmanager
def validation_calls() -> Iterator[Counter[str]]:
    """Count calls into `lessons_lib.validation` made from outside it (checks calling checks do not count)."""
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or Path(frame.f_code.co_filename).resolve() != VALIDATION_FILE:
            return
        caller = frame.f_back
        if caller is not None and Path(caller.f_code.co_filename).resolve() != VALIDATION_FILE:
            calls[frame.f_code.co_name] += 1

    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize(
    ("make", "x"),
    [
        (lambda: mha_numpy.MultiHead(8, 2), lambda: x64(2, 3, 8)),
        (lambda: gqa_numpy.GroupedQueryAttention(8, 4, 2), lambda: x64(2, 3, 8)),
        (lambda: mha_torch.MultiHead(8, 2, dtype=torch.float64), lambda: torch.from_numpy(x64(2, 3, 8))),
        (lambda: gqa_torch.GroupedQueryAttention(8, 4, 2, dtype=torch.float64), lambda: torch.from_numpy(x64(2, 3, 8))),
        (lambda: LatentAttention(8, 2, latent_width=4, rope_width=2), lambda: x64(2, 3, 8)),
    ],
    ids=["mha_numpy", "gqa_numpy", "mha_torch", "gqa_torch", "mla"],
)
def test_one_forward_runs_each_check_once(make: Callable[[], Any], x: Callable[[], Any]) -> None:
    layer, inputs = make(), x()
    allowed = mha_numpy.causal_mask(3)
    mask = torch.from_numpy(allowed) if isinstance(inputs, torch.Tensor) else allowed
    with validation_calls() as calls:
        layer(inputs, allowed=mask)
    assert calls, "the profiler saw no check at all: the test would pass for any layer"
    repeated = {name: n for name, n in calls.items() if n > 1}
    assert not repeated, f"checks run more than once in one forward: {repeated}"
    assert sum(calls.values()) <= 3, f"one forward should need at most three boundary checks, made {dict(calls)}"
