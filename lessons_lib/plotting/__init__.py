"""Drawing functions (Matplotlib); the numbers they draw come from plain functions.

One submodule per lesson picture: ``attention_flow`` (01: one head's weight heatmap and Q/K/V data
flow), ``head_split`` (02: the split and the direct reshape's scrambled assignment), ``head_merge``
(03: concatenation and the blocks of rows of ``W_o``), ``mask_conventions`` (04: one mask in three
conventions), ``attention_maps`` (05: per-head heatmaps, column blocks, split layouts),
``cache_charts`` (06: KV-cache charts, growth while decoding, which query heads share a K/V head),
``latent_flow`` (07: the MLA data flow), ``tiling`` (08: the tiles a tiled pass visits),
``residual_stream`` (09: the block on its residual stream) and ``induction_maps`` (09: the induction
model's loss, heads, ablation and composition, and the widget's panels).
"""
