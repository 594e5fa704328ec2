"""ipywidgets front-ends (no custom JavaScript). Each widget only wires controls to plain functions.

Submodules: ``heads`` (lesson 04), ``kv`` (lesson 05).
"""
