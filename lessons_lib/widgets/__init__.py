"""ipywidgets front-ends. Each widget only wires controls to plain functions.

Submodules: ``base`` (`LessonWidget`, the interface and drawing they all share), ``access`` (the one
piece of JavaScript: names, states, alt text and arrow keys for screen readers and keyboards, run
through anywidget), ``head_widgets`` (lesson 05), ``cache_widgets`` (lesson 06), ``induction_widgets``
(lesson 09), ``shakespeare_widgets`` (lesson 10).
"""
