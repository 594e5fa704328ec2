"""The pre-norm transformer block (lesson 09): NumPy == PyTorch == nn.TransformerEncoderLayer, and bad inputs.

Weights are random everywhere (LayerNorm gains and biases too), so a mistake in any piece shows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import nn

from lessons_lib import block_numpy, block_torch
from lessons_lib.mha_numpy import causal_mask

# (rtol, atol). float32 keeps about 7 significant digits: outputs here reach |y| ~ 5, where one ulp is
# 4.8e-7, and PyTorch's fused fast path sums in another order, so float32 is compared to 1e-6 relative
# as well as absolute. float64 agrees to 1e-12 absolute.
TOLERANCE = {np.float32: (1e-6, 1e-6), np.float64: (0.0, 1e-12)}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
SHAPES = [(1, 1, 4, 1, 4), (2, 5, 8, 2, 16), (3, 7, 12, 3, 20), (2, 16, 32, 4, 64)]  # (B, T, D, h, F)


def random_weights(D: int, F_: int, bias: bool, seed: int) -> dict[str, NDArray[np.float64]]:
    """Random NumPy ``(in, out)`` weights; gains near 1 and non-zero biases."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in block_numpy.weight_shapes(D, F_, bias).items():
        scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.3
        weights[name] = rng.normal(0.0, scale, size=shape) + (1.0 if name.endswith("gain") else 0.0)
    return weights


def both_blocks(
    D: int, h: int, F_: int, dtype: Any, bias: bool, activation: str, seed: int = 0
) -> tuple[block_numpy.Block, block_torch.Block]:
    w = {name: value.astype(dtype) for name, value in random_weights(D, F_, bias, seed).items()}
    mine = block_numpy.Block.from_weights(w, h, activation)
    as_torch = {name: torch.from_numpy(value.T.copy() if value.ndim == 2 else value) for name, value in w.items()}
    return mine, block_torch.Block.from_weights(as_torch, h, activation)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_torch_and_pytorch_layer_agree(
    dtype: Any, bias: bool, activation: str, shape: tuple[int, int, int, int, int]
) -> None:
    B, T, D, h, F_ = shape
    numpy_block, torch_block = both_blocks(D, h, F_, dtype, bias, activation, seed=T)
    x = np.random.default_rng(1).normal(size=(B, T, D)).astype(dtype)
    rtol, atol = TOLERANCE[dtype]
    y, weights = numpy_block(x)
    with torch.no_grad():
        y_torch, weights_torch = torch_block(torch.from_numpy(x))
        layer = torch_block.to_encoder_layer().eval()
        blocked = torch.from_numpy(~causal_mask(T))  # PyTorch's bool src_mask: True = may NOT attend
        y_layer = layer(torch.from_numpy(x), src_mask=blocked)
        additive = nn.Transformer.generate_square_subsequent_mask(T, dtype=TORCH_DTYPE[dtype])  # 0 / -inf
        y_additive = layer(torch.from_numpy(x), src_mask=additive, is_causal=True)
        y_training_mode = layer.train()(torch.from_numpy(x), src_mask=blocked)  # no fast path here
    assert y.dtype == dtype and weights.shape == (B, h, T, T)
    np.testing.assert_allclose(y_torch.numpy(), y, rtol=rtol, atol=atol)
    np.testing.assert_allclose(weights_torch.numpy(), weights, rtol=rtol, atol=atol)
    for other in (y_layer, y_additive, y_training_mode):
        np.testing.assert_allclose(other.numpy(), y_torch.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_from_encoder_layer_copies_a_pytorch_layer(bias: bool, activation: str) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        12, 3, 24, dropout=0.0, activation=activation, batch_first=True, norm_first=True, bias=bias,
        dtype=torch.float64,
    )  # fmt: skip
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "self_attn" in name and name.endswith("bias"):
                p.zero_()  # MultiHead has no attention biases
            elif name.startswith("norm"):
                p.add_(0.2 * torch.randn_like(p))  # gains and biases away from 1 and 0
    block = block_torch.Block.from_encoder_layer(layer)
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(9, dtype=torch.float64)
    with torch.no_grad():
        np.testing.assert_allclose(block(x)[0].numpy(), layer(x, src_mask=mask).numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(block(x, causal=False)[0].numpy(), layer(x).numpy(), rtol=0, atol=1e-12)
    assert (block.ffn_in.bias is not None) == bias and (block.norm1.bias is not None) == bias


def test_bias_false_means_no_bias_anywhere_in_both() -> None:
    theirs = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True, bias=False)
    assert theirs.self_attn.in_proj_bias is None and theirs.self_attn.out_proj.bias is None
    assert theirs.norm1.bias is None and theirs.linear1.bias is None
    mine = block_torch.Block(8, 2, 16, bias=False)
    assert not [name for name, _ in mine.named_parameters() if "bias" in name]
    assert block_numpy.Block(8, 2, 16, bias=False).norm1_bias is None


def test_seeded_blocks_match_and_torch_block_is_an_ordinary_module() -> None:
    numpy_block = block_numpy.Block(8, 2, 16, seed=5)
    torch_block = block_torch.Block(8, 2, 16, seed=5, dtype=torch.float64)
    np.testing.assert_array_equal(torch_block.ffn_in.weight.detach().numpy(), numpy_block.w_in.T)
    np.testing.assert_array_equal(torch_block.attention.wq.weight.detach().numpy(), numpy_block.attention.wq.T)
    state = torch_block.state_dict()
    assert {"norm1.weight", "norm1.bias", "ffn_in.weight", "ffn_out.bias", "attention.wq.weight"} <= set(state)
    as_float = block_torch.Block(8, 2, 16, seed=9).double()
    assert as_float.dtype == torch.float64
    as_float.load_state_dict(state)
    x = torch.randn(1, 3, 8, dtype=torch.float64)
    with torch.no_grad():
        np.testing.assert_allclose(as_float(x)[0].numpy(), numpy_block(x.numpy())[0], rtol=0, atol=1e-12)


def test_building_leaves_torch_random_state_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    block_torch.Block(8, 2, 16).to_encoder_layer()
    assert torch.equal(torch.rand(3), expected)


def test_layer_norm_and_activations_match_pytorch() -> None:
    rng = np.random.default_rng(2)
    x, gain, bias = rng.normal(size=(2, 3, 6)), rng.normal(size=6), rng.normal(size=6)
    expected = F.layer_norm(torch.from_numpy(x), (6,), torch.from_numpy(gain), torch.from_numpy(bias), eps=1e-5)
    np.testing.assert_allclose(block_numpy.layer_norm(x, gain, bias), expected.numpy(), rtol=0, atol=1e-12)
    t = torch.from_numpy(x)
    g = torch.from_numpy(gain)
    np.testing.assert_allclose(block_torch.layer_norm(t, g).numpy(), F.layer_norm(t, (6,), g).numpy(), atol=1e-12)
    np.testing.assert_allclose(block_numpy.activate(x, "gelu"), F.gelu(t).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(block_torch.activate(t, "gelu").numpy(), F.gelu(t).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(block_numpy.activate(x, "relu"), F.relu(t).numpy())
    normed = block_numpy.layer_norm(x, np.ones(6))
    np.testing.assert_allclose(normed.mean(-1), 0, atol=1e-12)  # the mean RMSNorm would not remove
    np.testing.assert_allclose(normed.var(-1), 1 / (1 + 1e-5 / x.var(-1)), atol=1e-12)


def test_causal_block_ignores_the_future() -> None:
    block = block_numpy.Block(8, 2, 16, seed=1)
    x = np.random.default_rng(0).normal(size=(1, 6, 8))
    changed = x.copy()
    changed[:, 4:] += np.random.default_rng(1).normal(size=(1, 2, 8))  # change positions 4 and 5 only
    y, weights = block(x)
    np.testing.assert_allclose(block(changed)[0][:, :4], y[:, :4], atol=1e-12)
    assert np.all(np.triu(weights[0, 0], k=1) == 0)
    assert not np.allclose(block(changed, causal=False)[0][:, :4], block(x, causal=False)[0][:, :4])


# ----- bad inputs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("module", [block_numpy, block_torch])
def test_bad_constructor_arguments(module: Any) -> None:
    with pytest.raises(ValueError, match="not divisible by heads"):
        module.Block(10, 3, 16)
    with pytest.raises(ValueError, match="activation must be one of"):
        module.Block(8, 2, 16, activation="tanh")
    with pytest.raises(ValueError, match="eps must be a positive float"):
        module.Block(8, 2, 16, eps=0.0)
    with pytest.raises(ValueError, match=r"hidden \(F\) must be positive"):
        module.Block(8, 2, 0)
    with pytest.raises(TypeError, match="dtype must be a floating-point type"):
        module.Block(8, 2, 16, dtype=int)


def test_bad_calls_numpy() -> None:
    block = block_numpy.Block(8, 2, 16)
    with pytest.raises(ValueError, match=r"exactly 3 axes, laid out as \(B, T, D\)"):
        block(np.zeros((4, 8)))
    with pytest.raises(ValueError, match="layer width D is 8"):
        block(np.zeros((1, 4, 6)))
    with pytest.raises(TypeError, match="dtype float32 but the layer's weights are float64"):
        block(np.zeros((1, 4, 8), dtype=np.float32))
    with pytest.raises(TypeError, match="must be a NumPy array here"):
        block(torch.zeros(1, 4, 8, dtype=torch.float64))  # type: ignore[arg-type]


def test_bad_calls_torch() -> None:
    block = block_torch.Block(8, 2, 16)
    with pytest.raises(ValueError, match="layer width D is 8"):
        block(torch.zeros(1, 4, 6))
    with pytest.raises(TypeError, match=r"dtype torch\.float64 but the layer's weights are torch\.float32"):
        block(torch.zeros(1, 4, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"must be a torch\.Tensor here"):
        block(np.zeros((1, 4, 8), dtype=np.float32))


def test_bad_weights() -> None:
    w = random_weights(8, 16, True, 0)
    with pytest.raises(ValueError, match=r"plus \['b_in', 'b_out', 'norm1_bias', 'norm2_bias'\]"):
        block_numpy.Block.from_weights({k: v for k, v in w.items() if k != "b_in"}, 2)
    with pytest.raises(ValueError, match=r"w_out must have shape \(F, D\) = \(16, 8\)"):
        block_numpy.Block.from_weights({**w, "w_out": w["w_in"]}, 2)
    with pytest.raises(TypeError, match="must share one dtype"):
        block_numpy.Block.from_weights({**w, "b_in": w["b_in"].astype(np.float32)}, 2)
    with pytest.raises(TypeError, match="weights must be a dict"):
        block_numpy.Block.from_weights([w["wq"]], 2)  # type: ignore[arg-type]
    as_torch = {k: torch.from_numpy(v.T.copy() if v.ndim == 2 else v) for k, v in w.items()}
    with pytest.raises(ValueError, match=r"w_out must have shape \(D, F\) = \(8, 16\)"):
        block_torch.Block.from_weights({**as_torch, "w_out": as_torch["w_in"]}, 2)


def test_encoder_layers_the_block_cannot_copy() -> None:
    post_norm = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    with pytest.raises(ValueError, match="norm_first=True"):
        block_torch.Block.from_encoder_layer(post_norm)
    with pytest.raises(ValueError, match=r"dropout=0\.0"):
        block_torch.Block.from_encoder_layer(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True))
    biased = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
    block_torch.Block.from_encoder_layer(biased)  # nn.MultiheadAttention starts its biases at zero: fine
    with torch.no_grad():
        biased.self_attn.in_proj_bias.fill_(0.1)
    with pytest.raises(ValueError, match="in_proj_bias is not zero"):
        block_torch.Block.from_encoder_layer(biased)
    with pytest.raises(TypeError, match=r"must be an nn\.TransformerEncoderLayer"):
        block_torch.Block.from_encoder_layer(nn.Linear(2, 2))  # type: ignore[arg-type]
