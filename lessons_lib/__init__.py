"""Helpers for the Several Heads notebooks: one module per concept, NumPy and PyTorch twins side by side.

The map, lesson by lesson (``*_numpy`` and ``*_torch`` twins mirror each other line for line):

- 01 one head, 02 splitting into heads, 03 concatenate and project, 04 matching PyTorch:
  `mha_numpy` / `mha_torch`: ``softmax``, ``causal_mask``, ``attention``, ``split_heads``,
  ``merge_heads``, ``init_weights`` and the ``MultiHead`` layer; their pictures in
  `plotting.attention_flow` (01), `plotting.head_split` (02), `plotting.head_merge` (03) and
  `plotting.mask_conventions` (04).
- 05 inspecting heads: `inspect_heads` (the trained toy layer, per-head maps, re-slicing, cost),
  `toy_task` (its data and training run), `plotting.attention_maps`, `widgets.head_widgets`.
- 06 grouped-query attention: `gqa_numpy` / `gqa_torch` (``GroupedQueryAttention``, ``repeat_kv``,
  ``from_multihead``), `kv_cache` (byte maths, model presets, the ``KVCache`` class, decoding loops),
  `plotting.cache_charts`, `widgets.cache_widgets`.
- 07 latent attention: `rope` (rotary positions), `mla` (``LatentAttention``, NumPy only),
  `plotting.latent_flow`.
- 08 efficient attention: `efficient` (online softmax, tiled attention; NumPy only),
  `plotting.tiling`.
- 09 heads at work: `block_numpy` / `block_torch` (the pre-norm transformer ``Block``),
  `induction` (the two-layer model of repeated tokens, its head scores, ablation and composition),
  `plotting.residual_stream`, `plotting.induction_maps`, `widgets.induction_widgets`.
- 10 a real model's heads: `shakespeare` (the character GPT trained on Shakespeare's plays, in NumPy:
  its text, weights, forward pass with ablation, cached decoding and head scores), `shakespeare_torch`
  (the same model in PyTorch, its reference implementation and the measurements the lesson quotes),
  `plotting.text_maps`, `widgets.shakespeare_widgets`.
- Every lesson: `checks.<lesson topic>` holds its Quick-check functions (``checks.one_head`` for
  ``01_one_head.ipynb``, ...); the `checks` package itself holds what they share: answer parsing,
  one tolerance and the ``Verdict``.
- `widgets.base` is the interface every widget shares; `validation` holds the argument checks every
  public function runs once at its boundary (internal: lessons never import it).

Every layer can be built from a seed (``MultiHead(D, h, seed=0)``) or from given weights
(``MultiHead.from_weights(...)``): NumPy weights are ``(in, out)``, PyTorch weights ``(out, in)`` as
in ``nn.Linear``. ``import lessons_lib`` loads nothing heavy; only the ``*_torch`` modules import torch.
"""

__version__ = "0.2.0"
