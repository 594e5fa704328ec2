"""ipywidgets front-ends (no custom JavaScript). Each widget only wires controls to plain functions.

Submodules: ``base`` (`LessonWidget`, the interface and drawing they all share), ``head_widgets``
(lesson 05), ``cache_widgets`` (lesson 06), ``induction_widgets`` (lesson 09), ``shakespeare_widgets``
(lesson 10).
"""
