"""Helpers for the Several Heads notebooks.

Modules, by the lesson that introduces them:

- `numpy_core` (01-03): attention, split/merge heads, the `MultiHead` layer in NumPy.
- `torch_core` (03): the same in PyTorch (imports torch; import it explicitly).
- `checks` : the Quick check at the end of each lesson.

``import lessons_lib`` loads NumPy only, so NumPy-only lessons never pay for importing torch.
"""

__version__ = "0.1.0"
