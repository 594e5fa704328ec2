"""The toy task of lesson 04: data, training, and the behaviour the shipped weights show.

Retraining is checked by behaviour (which relationships heads specialise in), not bitwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from lessons_lib.inspect_heads import EVAL_SEED, head_behaviour, head_roles, load_toy_heads, run_layer
from lessons_lib.toy_task import ToyConfig, make_batch, targets, token_labels

THRESHOLD = 0.6  # a head "specialises" when >= 60 % of its weight sits on one relationship (uniform: 1/8)


def test_batches_have_one_marker_each() -> None:
    config = ToyConfig()
    tokens, marker = make_batch(50, config, seed=0)
    assert tokens.shape == (50, 8) and marker.shape == (50,)
    marked = tokens >= config.symbols
    assert np.all(marked.sum(axis=1) == 1)
    assert np.array_equal(marked.argmax(axis=1), marker)
    again, _ = make_batch(50, config, seed=0)
    assert np.array_equal(tokens, again)


def test_targets() -> None:
    tokens = np.array([[0, 7, 2, 3]])  # symbols 0 1 2 3, with the token at position 1 marked (V=6)
    goal = targets(tokens, np.array([1]), symbols=6)
    assert goal[0, :, 0].tolist() == [-1, 0, 1, 2]  # previous
    assert goal[0, :, 1].tolist() == [1, 2, 3, -1]  # next
    assert goal[0, :, 2].tolist() == [1, 1, 1, 1]  # the marked symbol
    assert token_labels(tokens[0], 6) == ["a", "B", "c", "d"]


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="not divisible by heads"):
        ToyConfig(width=16, heads=3)
    with pytest.raises(ValueError, match=r"ToyConfig.steps"):
        ToyConfig(steps=0)
    with pytest.raises(ValueError, match="batch"):
        make_batch(0)


def _specialists(behaviour: dict[str, NDArray[np.floating]]) -> dict[str, list[int]]:
    roles = head_roles(behaviour, THRESHOLD)
    found: dict[str, list[int]] = {}
    for head, role in enumerate(roles):
        if role != "mixed":
            found.setdefault(role, []).append(head)
    return found


def test_retraining_gives_specialised_heads() -> None:
    pytest.importorskip("torch")
    from lessons_lib.mha_numpy import MultiHead
    from lessons_lib.toy_task import train

    config = ToyConfig()
    result = train(config)
    assert result.accuracy.min() > 0.95
    assert result.losses[-1] < 0.1 * result.losses[0]
    layer = MultiHead(config.width, config.heads)
    for name in ("wq", "wk", "wv", "wo"):
        setattr(layer, name, result.arrays[name].astype(np.float64))
    tokens, marker = make_batch(256, config, seed=EVAL_SEED)
    x = result.arrays["token_embedding"].astype(np.float64)[tokens] + result.arrays["position_embedding"]
    _, weights = layer(x.astype(np.float64))
    found = _specialists(head_behaviour(weights, marker))
    assert len(found) >= 2, f"fewer than two relationships learned: {found}"


def test_shipped_weights_show_what_the_lesson_claims() -> None:
    model = load_toy_heads()
    tokens, marker = make_batch(256, model.config, seed=EVAL_SEED)
    behaviour = head_behaviour(run_layer(model, tokens)[1], marker)
    # Lesson 04 states: head 0 reads the previous token, head 1 the marker, head 2 the next token,
    # and head 3 splits its weight between previous and next.
    assert head_roles(behaviour, THRESHOLD) == ["previous", "marker", "next", "mixed"]
    assert behaviour["previous"][0] > 0.9
    assert behaviour["marker"][1] > 0.9
    assert behaviour["next"][2] > 0.9
    assert 0.35 < behaviour["previous"][3] < 0.6 and 0.35 < behaviour["next"][3] < 0.6
    assert np.all(model.accuracy > 0.99)
