"""Helpers for the Several Heads notebooks.

Modules, by the lesson that introduces them:

- `numpy_core` (01-03): attention, split/merge heads, the `MultiHead` layer in NumPy.
- `torch_core` (03): the same in PyTorch (imports torch; import it explicitly).
- `validation`: the argument checks both share, so both give the same error messages.
- `toy_task`, `heads`, `plotting.heads`, `widgets.heads` (04): the trained toy layer, per-head
  maps and re-slicing, their drawings and widgets.
- `gqa`, `gqa_torch`, `kv_cache`, `decoding`, `plotting.kv`, `widgets.kv` (05): grouped-query
  attention, model presets and cache sizes, incremental decoding with a KV cache.
- `rope`, `mla` (06): rotary positions and multi-head latent attention.
- `efficient` (07): online softmax and tiled attention.
- `checks`: the Quick check at the end of each lesson (`checks.lesson01` ... `checks.lesson07`).

``import lessons_lib`` loads NumPy only, so NumPy-only lessons never pay for importing torch.
"""

__version__ = "0.1.0"
