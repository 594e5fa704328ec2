"""Lesson 10's character-level GPT in PyTorch: the model ``scripts/train_shakespeare.py`` trains.

Built from the series' own layers: each block is lesson 09's pre-norm block (LayerNorm, attention,
residual; LayerNorm, feed-forward, residual) with lesson 06's `gqa_torch.GroupedQueryAttention` as
its attention (``kv_heads == heads``: ordinary multi-head attention) and a causal mask::

    x = E[tokens] + P[:T]                       # token and learned position embeddings, (B, T, D)
    for each block:
        x = x + attention(LN1(x), causal)       # the heads read the past and write into the stream
        x = x + ffn(LN2(x))                     # ffn(z) = relu(z @ w_in + b_in) @ w_out + b_out
    logits = LN_f(x) @ U                        # (B, T, V): the next character's scores

`lessons_lib.shakespeare` holds the same model in NumPy (the lesson's copy) and loads the weights
this module's `CharGPT.arrays` writes; `reference_logits` computes the same function a second way,
with ``F.scaled_dot_product_attention`` and ``nn.LayerNorm`` only, for the parity tests.

`latent_kv` gives every block a latent K/V cache (lesson 07's ``W_dkv``, ``W_uk``, ``W_uv`` as trainable
layers, cut from the trained projections or fresh): ``scripts/cache_ladder.py`` trains it, and the GQA/MQA
shapes, for the cache-versus-quality ladder of lesson 10's section 6. Training and long evaluations
pass ``need_weights=False``: the same function through ``F.scaled_dot_product_attention``, which never
builds the ``(B, h, T, T)`` weights.

`measure` computes the numbers lesson 10 quotes that take too long for a notebook (the loss over all
487 K validation characters, 20 ablations), stored by ``scripts/train_shakespeare.py`` in
``lessons_lib/data/shakespeare_gpt.json``; the lesson recomputes a sample of each in NumPy and
``tests/test_shakespeare.py`` checks the stored values against the shipped weights.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import Tensor, nn

from lessons_lib.cache_ladder import latent_factors
from lessons_lib.gqa_torch import GroupedQueryAttention
from lessons_lib.mha_torch import causal_mask
from lessons_lib.shakespeare import (
    MODEL_PATH,
    GPTConfig,
    Vocabulary,
    array_shapes,
    check_ablate,
    check_arrays,
    check_tokens,
    head_scores,
    load_arrays,
    load_model,
    load_text,
    loss,
    validation_windows,
)
from lessons_lib.validation import check_instance, check_int

__all__ = ["CharGPT", "GPTBlock", "baselines", "latent_kv", "measure", "reference_logits", "validation_loss"]


class GPTBlock(nn.Module):
    """One pre-norm block: ``norm1``, ``attention`` (GQA), ``norm2``, ``ffn_in``, ``ffn_out``."""

    def __init__(self, config: GPTConfig, seed: int) -> None:
        check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig, e.g. GPTConfig()")
        super().__init__()
        D = config.width
        self.norm1 = nn.LayerNorm(D)
        self.attention = GroupedQueryAttention(D, config.heads, config.kv_heads, seed=seed)
        self.norm2 = nn.LayerNorm(D)
        self.ffn_in = nn.Linear(D, config.hidden)
        self.ffn_out = nn.Linear(config.hidden, D)

    def forward(
        self, x: Tensor, allowed: Tensor, off: list[int] | None = None, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """``x (B, T, D)`` -> ``(x (B, T, D), weights (B, h, T, T))``; heads in ``off`` write nothing.

        ``need_weights=False`` (training, long evaluations): the same function through
        ``F.scaled_dot_product_attention``, which never builds the ``(B, h, T, T)`` weights (4x faster
        with 16 heads here); the weights returned are then ``None``.
        """
        a = self.attention
        z = self.norm1(x)
        k, v = a._keys_values(z)  # (B, h_kv, T, d_h) each
        weights: Tensor | None
        if need_weights and not off:
            out, weights = a._attend(z, k, v, allowed)
        else:
            q = a.wq(z).unflatten(-1, (a.heads, a.head_width)).transpose(1, 2)  # (B, h, T, d_h)
            k, v = k.repeat_interleave(a.group_size, 1), v.repeat_interleave(a.group_size, 1)
            if need_weights:
                scores = (q @ k.transpose(-1, -2)) / a.head_width**0.5
                weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                heads_out = weights @ v  # (B, h, T, d_h)
            else:
                heads_out, weights = F.scaled_dot_product_attention(q, k, v, is_causal=True), None
            if off:  # zero the ablated heads' outputs before W_o: they then write nothing
                keep = torch.ones(a.heads, dtype=x.dtype, device=x.device)
                keep[off] = 0
                heads_out = heads_out * keep[:, None, None]
            out = a.wo(heads_out.transpose(1, 2).flatten(-2))
        x = x + out
        x = x + self.ffn_out(torch.relu(self.ffn_in(self.norm2(x))))
        return x, weights


class CharGPT(nn.Module):
    """The whole model: ``token (V, D)``, ``position (T_max, D)``, ``blocks``, ``norm_f``, ``unembed``."""

    def __init__(self, config: GPTConfig) -> None:
        check_instance("config", config, GPTConfig, "a shakespeare.GPTConfig, e.g. GPTConfig()")
        super().__init__()
        self.config = config
        blocks = [GPTBlock(config, seed=config.seed + i) for i in range(config.layers)]
        torch.manual_seed(config.seed)  # after the attention weights, which come from NumPy's stream
        self.blocks: list[GPTBlock] = nn.ModuleList(blocks)  # type: ignore[assignment]
        for block in self.blocks:  # nn.Linear's default init for the FFN, drawn from torch's seeded stream
            block.ffn_in.reset_parameters()
            block.ffn_out.reset_parameters()
        self.token = nn.Embedding(config.vocab, config.width)
        self.position = nn.Parameter(0.02 * torch.randn(config.context, config.width))
        self.norm_f = nn.LayerNorm(config.width)
        self.unembed = nn.Linear(config.width, config.vocab, bias=False)

    def forward(self, tokens: Tensor, ablate: Any = (), need_weights: bool = True) -> tuple[Tensor, list[Tensor]]:
        """``tokens (B, T)`` int64, ``T <= context`` -> ``(logits (B, T, V), weights per block (B, h, T, T))``.

        ``ablate``: ``(layer, head)`` pairs whose heads write nothing (their weights are still returned).
        ``need_weights=False``: no weights are built (an empty list; see `GPTBlock.forward`).
        """
        check_tokens(tokens.numpy() if tokens.device.type == "cpu" else tokens.cpu().numpy(), self.config)
        off = check_ablate(ablate, self.config)
        T = tokens.shape[1]
        allowed = causal_mask(T).to(tokens.device)
        x = self.token(tokens) + self.position[:T]
        weights = []
        for i, block in enumerate(self.blocks):
            x, w = block(x, allowed, [head for layer, head in off if layer == i], need_weights)
            if w is not None:
                weights.append(w)
        return self.unembed(self.norm_f(x)), weights

    def arrays(self) -> dict[str, NDArray[np.float32]]:
        """Every parameter as a float32 NumPy array in NumPy's ``(in, out)`` layout, named as
        `shakespeare.array_shapes` lists them."""
        named: dict[str, Tensor] = {
            "token_embedding": self.token.weight,
            "position_embedding": self.position,
            "norm_f_gain": self.norm_f.weight,
            "norm_f_bias": self.norm_f.bias,
            "unembedding": self.unembed.weight.T,
        }
        for i, b in enumerate(self.blocks):
            a = b.attention
            named |= {f"block{i}_wq": a.wq.weight.T, f"block{i}_wk": _projection(a.wk).T}
            named |= {f"block{i}_wv": _projection(a.wv).T, f"block{i}_wo": a.wo.weight.T}
            named |= {f"block{i}_norm1_gain": b.norm1.weight, f"block{i}_norm1_bias": b.norm1.bias}
            named |= {f"block{i}_norm2_gain": b.norm2.weight, f"block{i}_norm2_bias": b.norm2.bias}
            named |= {f"block{i}_w_in": b.ffn_in.weight.T, f"block{i}_b_in": b.ffn_in.bias}
            named |= {f"block{i}_w_out": b.ffn_out.weight.T, f"block{i}_b_out": b.ffn_out.bias}
        out = {name: t.detach().cpu().numpy().astype(np.float32) for name, t in named.items()}
        assert {n: a.shape for n, a in out.items()} == array_shapes(self.config)
        return out

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, NDArray[Any]], config: GPTConfig, dtype: torch.dtype = torch.float32
    ) -> CharGPT:
        """A model holding the given ``(in, out)`` arrays (e.g. `shakespeare.load_arrays`), in ``dtype``."""
        check_arrays(arrays, config)
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
        with torch.random.fork_rng(devices=[]):
            model = cls(config)
        model = model.to(dtype)
        params = dict(model.named_parameters())
        target = {
            "token_embedding": "token.weight",
            "position_embedding": "position",
            "norm_f_gain": "norm_f.weight",
            "norm_f_bias": "norm_f.bias",
            "unembedding": "unembed.weight",
        }
        for i in range(config.layers):
            target |= {f"block{i}_{w}": f"blocks.{i}.attention.{w}.weight" for w in ("wq", "wk", "wv", "wo")}
            for n in ("norm1", "norm2"):
                target |= {f"block{i}_{n}_gain": f"blocks.{i}.{n}.weight", f"block{i}_{n}_bias": f"blocks.{i}.{n}.bias"}
            target |= {f"block{i}_w_in": f"blocks.{i}.ffn_in.weight", f"block{i}_b_in": f"blocks.{i}.ffn_in.bias"}
            target |= {f"block{i}_w_out": f"blocks.{i}.ffn_out.weight", f"block{i}_b_out": f"blocks.{i}.ffn_out.bias"}
        with torch.no_grad():
            for name, param_name in target.items():
                value = np.asarray(arrays[name])
                if value.ndim == 2 and name != "token_embedding" and name != "position_embedding":
                    value = value.T  # (in, out) -> nn.Linear's (out, in)
                params[param_name].copy_(torch.from_numpy(np.ascontiguousarray(value)).to(dtype))
        return model


def _projection(layer: nn.Module) -> Tensor:
    """The ``(out, in)`` matrix of a bias-free ``nn.Linear``, or of a latent ``down -> up`` pair
    (`latent_kv`): ``up.weight @ down.weight``."""
    if isinstance(layer, nn.Linear):
        return layer.weight
    if not isinstance(layer, nn.Sequential) or len(layer) != 2:
        raise TypeError(f"expected an nn.Linear or a latent nn.Sequential(down, up), got {layer!r}")
    down, up = layer[0], layer[1]  # down (D -> d_c), up (d_c -> h_kv d_h)
    assert isinstance(down, nn.Linear) and isinstance(up, nn.Linear)
    product: Tensor = up.weight @ down.weight
    return product


def latent_kv(model: CharGPT, rank: int, from_weights: bool = True, seed: int = 0) -> CharGPT:
    """Give every block of ``model`` a latent K/V cache of ``rank = d_c`` numbers per token (in place).

    Each block's ``wk`` and ``wv`` become ``nn.Sequential(down, up_k)`` and ``nn.Sequential(down,
    up_v)`` with one shared ``down (D -> d_c)``, lesson 07's ``W_dkv``, ``W_uk``, ``W_uv`` without the
    latent's RMSNorm or a rotary part (the model has learned positions). ``from_weights``: the factors
    of the block's current ``[W_k | W_v]`` by `cache_ladder.latent_factors` (the best rank-``d_c``
    approximation, the conversion); otherwise fresh ``nn.Linear`` initial weights from ``seed``
    (training a latent model from scratch). Returns ``model``; `CharGPT.arrays` then writes the
    products ``W_dkv W_uk`` and ``W_dkv W_uv``, so the NumPy model runs the same function.
    """
    check_instance("model", model, CharGPT, "a shakespeare_torch.CharGPT")
    config = model.config
    kv = config.kv_heads * config.head_width
    rank = check_int("rank", rank, symbol="d_c")
    if rank > min(config.width, 2 * kv):
        raise ValueError(f"rank d_c = {rank} is larger than [W_k | W_v] ({config.width}, {2 * kv}) can use")
    generator = torch.Generator().manual_seed(int(seed))
    for block in model.blocks:
        a = block.attention
        if not isinstance(a.wk, nn.Linear):
            raise ValueError("the model already has a latent K/V cache")
        dtype = a.wq.weight.dtype
        down = nn.Linear(config.width, rank, bias=False, dtype=dtype)
        up_k, up_v = nn.Linear(rank, kv, bias=False, dtype=dtype), nn.Linear(rank, kv, bias=False, dtype=dtype)
        with torch.no_grad():
            if from_weights:
                wk, wv = a.wk.weight.T.double().numpy(), a.wv.weight.T.double().numpy()  # (D, h_kv d_h)
                w_dkv, w_uk, w_uv = latent_factors(wk, wv, rank)
                for layer, w in ((down, w_dkv), (up_k, w_uk), (up_v, w_uv)):
                    layer.weight.copy_(torch.from_numpy(w.T.copy()))
            else:
                for layer in (down, up_k, up_v):  # nn.Linear's own default: uniform in +-1/sqrt(fan_in)
                    bound = 1 / layer.in_features**0.5
                    layer.weight.uniform_(-bound, bound, generator=generator)
        # one down-projection (one cached latent) shared by the keys and the values
        setattr(a, "wk", nn.Sequential(down, up_k))  # noqa: B010 (the attribute is typed nn.Linear)
        setattr(a, "wv", nn.Sequential(down, up_v))  # noqa: B010
    return model


def reference_logits(arrays: dict[str, NDArray[Any]], config: GPTConfig, tokens: Tensor) -> Tensor:
    """The same model written a second way, from the arrays alone: ``F.layer_norm`` via ``nn.LayerNorm``
    modules and ``F.scaled_dot_product_attention(is_causal=True)`` with K/V heads repeated for GQA."""
    check_arrays(arrays, config)
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.dtype != torch.int64:
        got = f"{type(tokens).__name__} {getattr(tokens, 'dtype', '')} {tuple(getattr(tokens, 'shape', ()))}"
        raise TypeError(f"tokens must be an int64 tensor (B, T) of character ids, got {got}")
    dtype = torch.float64 if np.asarray(arrays["block0_wq"]).dtype == np.float64 else torch.float32

    def t(name: str) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(arrays[name])).to(dtype)

    def norm(prefix: str, x: Tensor) -> Tensor:
        layer = nn.LayerNorm(config.width, dtype=dtype)
        with torch.no_grad():
            layer.weight.copy_(t(f"{prefix}_gain"))
            layer.bias.copy_(t(f"{prefix}_bias"))
        out: Tensor = layer(x)
        return out

    h, h_kv, d_h = config.heads, config.kv_heads, config.width // config.heads
    with torch.no_grad():
        T = tokens.shape[1]
        x = t("token_embedding")[tokens] + t("position_embedding")[:T]
        for i in range(config.layers):
            z = norm(f"block{i}_norm1", x)
            q = (z @ t(f"block{i}_wq")).view(*z.shape[:2], h, d_h).transpose(1, 2)
            k = (z @ t(f"block{i}_wk")).view(*z.shape[:2], h_kv, d_h).transpose(1, 2)
            v = (z @ t(f"block{i}_wv")).view(*z.shape[:2], h_kv, d_h).transpose(1, 2)
            k, v = k.repeat_interleave(h // h_kv, dim=1), v.repeat_interleave(h // h_kv, dim=1)
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + heads.transpose(1, 2).reshape(*z.shape[:2], config.width) @ t(f"block{i}_wo")
            z = norm(f"block{i}_norm2", x)
            x = x + F.relu(z @ t(f"block{i}_w_in") + t(f"block{i}_b_in")) @ t(f"block{i}_w_out") + t(f"block{i}_b_out")
        return norm("norm_f", x) @ t("unembedding")


# ----- the numbers lesson 10 quotes -------------------------------------------------------------------
ABLATION_WINDOWS = 400  # windows of T_max characters (about 100 K characters, a fifth of the plays) per ablation
SCORE_WINDOWS = 64  # windows for the head scores (16 K characters)
SAMPLE_WINDOWS = 16  # the sample lesson 10 computes live in NumPy (4 K characters)
# nanoGPT's README: the "baby" character-level run on tiny-shakespeare (about 1.1 M characters, 65 symbols),
# 4 layers, 4 heads, width 128, 64 characters of context, reaches a validation loss of about 1.88 nats.
NANOGPT_BABY = 1.88


def validation_loss(
    model: CharGPT, windows: torch.Tensor, ablate: Any = (), chunk: int = 50, fast: bool = False
) -> float:
    """Mean next-character loss in nats over ``windows (N, T + 1)``; ``ablate`` as in `shakespeare.run`;
    ``fast``: through ``F.scaled_dot_product_attention`` (the same loss to float rounding, ablated or not)."""
    check_instance("model", model, CharGPT, "a shakespeare_torch.CharGPT")
    if not isinstance(windows, Tensor) or windows.ndim != 2 or windows.shape[1] < 2:
        raise TypeError(f"windows must be an int64 tensor (N, T + 1) of character ids, got {type(windows).__name__}")
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), chunk):
            w = windows[i : i + chunk]
            logits, _ = model(w[:, :-1], ablate, need_weights=not fast)
            total += F.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten(), reduction="sum").item()
            count += w[:, 1:].numel()
    return total / count


def baselines(vocabulary: Vocabulary) -> dict[str, float]:
    """Validation losses (nats per character) of models that need no training loop: every character
    equally likely, the training text's character frequencies (unigram), and its frequencies of each
    character after each character (bigram); both counted with one added to every count."""
    check_instance("vocabulary", vocabulary, Vocabulary, "a shakespeare.Vocabulary, e.g. load_arrays()[2]")
    train = vocabulary.encode(load_text("train"))
    valid = vocabulary.encode(load_text("valid"))
    V = len(vocabulary)
    unigram = np.bincount(train, minlength=V) + 1.0
    unigram /= unigram.sum()
    pairs = np.zeros((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    pairs += 1.0
    pairs /= pairs.sum(axis=1, keepdims=True)
    return {
        "uniform": round(math.log(V), 4),
        "unigram": round(float(-np.log(unigram[valid]).mean()), 4),
        "bigram": round(float(-np.log(pairs[valid[:-1], valid[1:]]).mean()), 4),
        "nanogpt_baby_published": NANOGPT_BABY,
    }


def measure(path: Path | str = MODEL_PATH) -> dict[str, Any]:
    """Everything lesson 10 quotes about the model at ``path``: the validation loss (all windows), the
    baselines, the loss with each head and each layer's attention ablated (on `ABLATION_WINDOWS`
    windows, beside the unablated loss on the same windows) and the head scores."""
    arrays, config, vocabulary = load_arrays(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = CharGPT.from_arrays(arrays, config)
        text = load_text("valid")
        every = torch.from_numpy(validation_windows(text, vocabulary, config.context))
        sample = torch.from_numpy(validation_windows(text, vocabulary, config.context, ABLATION_WINDOWS))
        base = validation_loss(model, sample)
        heads = [
            [round(validation_loss(model, sample, [(i, j)]) - base, 4) for j in range(config.heads)]
            for i in range(config.layers)
        ]
        layers = [round(validation_loss(model, sample, [(i, None)]) - base, 4) for i in range(config.layers)]
        full = validation_loss(model, every)
    finally:
        torch.set_num_threads(threads)
    numpy_model = load_model(path)
    sample_loss = loss(numpy_model, validation_windows(text, vocabulary, config.context, SAMPLE_WINDOWS))
    scores = head_scores(numpy_model, validation_windows(text, vocabulary, config.context, SCORE_WINDOWS))
    chance = scores.pop("chance")
    return {
        "validation_loss": round(full, 4),
        "validation_characters": int(every[:, 1:].numel()),
        "sample": {"windows": SAMPLE_WINDOWS, "loss": round(sample_loss, 4)},
        "baselines": baselines(vocabulary),
        "ablation": {"windows": ABLATION_WINDOWS, "loss": round(base, 4), "heads": heads, "layers": layers},
        "head_scores": {
            "windows": SCORE_WINDOWS,
            **{k: np.round(v, 4).tolist() for k, v in scores.items()},
            "chance": {k: round(v, 4) for k, v in chance.items()},
        },
    }
