"""What a screen reader and a keyboard need from a lesson widget, and ipywidgets does not give.

ipywidgets draws its controls without some of what assistive technology reads: an ``Image`` has no
``alt`` attribute, a slider's handle (``role="slider"``) has no name, a toggle button does not say
whether it is pressed, and a change of the readout is not announced. And inside JupyterLab the arrow
keys never reach a dropdown or a toggle group: the notebook's shortcuts take them first (ArrowDown
moves to the next cell), so a keyboard user cannot change a dropdown the usual way.

`access_layer()` returns a small invisible widget that each lesson widget adds to its box. Its
script runs in the page, finds the box it sits in (``.lesson-widget``) and, now and after every change
in the box (a ``MutationObserver``):

* gives every picture (``<img>``) the words the readout already carries for screen readers (the
  ``lesson-sr-only`` text after "The picture above: ") as its ``alt``;
* names every slider handle after its slider's description (``aria-label``);
* marks a toggle group as a ``group`` named after its description and each of its buttons with
  ``aria-pressed``, and lets ArrowLeft/ArrowRight (and Up/Down, Home, End) move the choice, as in a
  radio group (Tab stops on the pressed button only, the arrows choose among them);
* makes the readout (``.lesson-readout``) a polite live region, so a change is read out;
* sets ``data-lm-suppress-shortcuts`` on every dropdown, toggle button and slider handle: JupyterLab's
  keyboard shortcuts (Lumino's command registry) stop looking at an element that carries it, so the
  arrow keys go to the control.

Where the script cannot run, nothing breaks: without ``anywidget`` installed, and in Google Colab
(which shows third-party widgets only after ``enable_custom_widget_manager()``), `access_layer()`
returns None and the widget is shown without it; its pictures' words are still in the readout.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import ipywidgets as widgets

__all__ = ["ACCESS_SCRIPT", "access_layer"]

# An ES module (anywidget's `_esm`): `render` is called with the layer's own element, which sits in the
# lesson widget's box once the box is on the page.
ACCESS_SCRIPT = r"""
const PICTURE = 'The picture above: ';
const KEYS = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1};

function nameOf(control) {
  const label = control.querySelector('.widget-label');
  return label ? label.textContent.trim() : '';
}

function set(element, name, value) {  // only when it differs: no mutation, no endless observing
  if (element.getAttribute(name) !== value) element.setAttribute(name, value);
}

function moveChoice(group, event) {
  const buttons = Array.from(group.querySelectorAll('.widget-toggle-button:not([disabled])'));
  const at = buttons.indexOf(event.target.closest('.widget-toggle-button'));
  if (at < 0 || buttons.length === 0) return;
  let next;
  if (event.key in KEYS) next = (at + KEYS[event.key] + buttons.length) % buttons.length;
  else if (event.key === 'Home') next = 0;
  else if (event.key === 'End') next = buttons.length - 1;
  else return;
  event.preventDefault();
  event.stopPropagation();
  buttons[next].focus();
  buttons[next].click();
}

function dress(box) {
  const words = box.querySelector('.lesson-sr-only');
  const text = words ? words.textContent.trim() : '';
  const alt = text.startsWith(PICTURE) ? text.slice(PICTURE.length) : text;
  for (const img of box.querySelectorAll('img')) set(img, 'alt', alt);
  for (const readout of box.querySelectorAll('.lesson-readout')) set(readout, 'aria-live', 'polite');
  for (const control of box.querySelectorAll('select, .widget-toggle-button, .noUi-handle')) {
    set(control, 'data-lm-suppress-shortcuts', 'true');
  }
  for (const slider of box.querySelectorAll('.widget-slider')) {
    for (const handle of slider.querySelectorAll('.noUi-handle')) set(handle, 'aria-label', nameOf(slider));
  }
  for (const group of box.querySelectorAll('.widget-toggle-buttons')) {
    set(group, 'role', 'group');
    set(group, 'aria-label', nameOf(group));
    for (const button of group.querySelectorAll('.widget-toggle-button')) {  // Tab stops on the pressed one
      const pressed = button.classList.contains('mod-active');
      set(button, 'aria-pressed', pressed ? 'true' : 'false');
      set(button, 'tabindex', pressed ? '0' : '-1');
    }
    if (!group.dataset.lessonKeys) {
      group.dataset.lessonKeys = 'on';
      group.addEventListener('keydown', event => moveChoice(group, event));
    }
  }
}

function render({ el }) {
  let observer = null;
  let tries = 0;
  const start = () => {
    const box = el.closest('.lesson-widget');
    if (!box) {  // not on the page yet: the box inserts its children after rendering them
      if (++tries < 400) setTimeout(start, 25);
      return;
    }
    dress(box);
    observer = new MutationObserver(() => dress(box));
    observer.observe(box, {subtree: true, childList: true, characterData: true,
                           attributes: true, attributeFilter: ['class', 'src']});
  };
  start();
  return () => { if (observer) observer.disconnect(); };
}

export default { render };
"""


@functools.cache
def _layer_class() -> Any | None:
    """The widget class (one for every layer, so the page loads its script once), or None without anywidget."""
    try:
        import anywidget
    except ImportError:
        return None

    class AccessLayer(anywidget.AnyWidget):
        """Runs `ACCESS_SCRIPT` in the lesson widget's box; shows nothing itself."""

        _esm = ACCESS_SCRIPT

    return AccessLayer


def access_layer() -> widgets.DOMWidget | None:
    """The invisible widget that runs `ACCESS_SCRIPT` in a lesson widget's box, or None where it cannot run
    (``anywidget`` missing, or Google Colab)."""
    layer = _layer_class()
    if layer is None or "google.colab" in sys.modules:
        return None
    made: widgets.DOMWidget = layer(layout=widgets.Layout(display="none"))
    return made
