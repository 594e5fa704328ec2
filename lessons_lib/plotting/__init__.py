"""Drawing functions (Matplotlib). Each returns the figure; the numbers come from plain functions.

Submodules: ``heads`` (lesson 04: per-head heatmaps), ``kv`` (lesson 05: KV-cache charts).
"""
