"""Drawing functions (Matplotlib); the numbers they draw come from plain functions.

Submodules: ``attention_maps`` (lesson 04: per-head heatmaps, column blocks, split layouts),
``cache_charts`` (lesson 05: KV-cache charts, which query heads share a K/V head).
"""
