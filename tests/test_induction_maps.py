"""Lesson 09's figures: what the head maps and the loss curve show (positions, tokens, guides)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from lessons_lib import induction
from lessons_lib.plotting import induction_maps


def test_head_maps_label_positions_and_tokens_and_draw_the_guides() -> None:
    T, half = 7, 4
    weights = [np.tile(np.eye(T, k=-1), (2, 1, 1)), np.tile(np.eye(T), (2, 1, 1))]
    labels = induction_maps.token_labels([5, 17, 3, 28, 5, 17, 3])
    scores = np.zeros((2, 2))
    fig = induction_maps.plot_head_maps(weights, labels, scores, scores, half=half)
    maps = fig.axes[:4]
    assert [int(t) for t in maps[0].get_yticks()] == [0, 2, 4, 6]  # every second position is labelled
    ticks = {int(t) for t in maps[0].get_yticks()} | {int(t) for t in maps[0].get_yticks(minor=True)}
    assert ticks == set(range(T))  # and every position has a tick
    assert maps[2].xaxis.get_label().get_text() == "key position s"
    assert maps[0].yaxis.get_label().get_text() == "query position t"
    table = [text.get_text() for text in fig.texts if text.get_text().startswith("position")]
    assert table == ["position   0  1  2  3  4  5  6\ntoken      5 17  3 28  5 17  3"]  # one column each
    previous, induction = maps[0].lines  # s = t - 1 for t = 1 .. T-1, s = t - L + 1 for t = L .. T-1
    np.testing.assert_array_equal(previous.get_xdata(), np.arange(0, T - 1))
    np.testing.assert_array_equal(previous.get_ydata(), np.arange(1, T))
    np.testing.assert_array_equal(induction.get_xdata(), np.arange(1, T - half + 1))
    np.testing.assert_array_equal(induction.get_ydata(), np.arange(half, T))
    assert "s = t - L + 1" in fig.get_suptitle()
    plt.close(fig)
    fig = induction_maps.plot_head_maps(weights, labels, scores, scores)
    assert not fig.axes[0].lines and "s = t - 1" not in fig.get_suptitle()  # no guides without L
    plt.close(fig)
    with pytest.raises(ValueError, match=r"weights\[0\] must be \(h, T, T\) with T = len\(labels\) = 6"):
        induction_maps.plot_head_maps(weights, labels[:-1], scores, scores)


def test_loss_curve_draws_the_best_possible_loss() -> None:
    loss, best = np.full(7, 3.0), np.log(10 - np.arange(3) - 1.0)
    fig = induction_maps.plot_loss_per_position(loss, 4, np.log(10), best=best)
    curve = [line for line in fig.axes[0].lines if str(line.get_label()).startswith("best possible")]
    assert len(curve) == 1
    np.testing.assert_allclose(np.asarray(curve[0].get_ydata(), dtype=float), best)
    plt.close(fig)
    with pytest.raises(ValueError, match="best must have 1 axis"):
        induction_maps.plot_loss_per_position(loss, 4, np.log(10), best=best[None])


def test_ov_circuit_maps_share_one_centred_scale() -> None:
    model = induction.load_induction_model()
    circuits = {f"layer 1, head {j}": induction.full_ov_circuit(model, 1, j) for j in (0, 2)}
    fig = induction_maps.plot_ov_circuits(circuits)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 2
    limit = max(float(np.abs(c).max()) for c in circuits.values())
    for image in images:
        assert image.get_clim() == (-limit, limit)
    assert [ax.get_title() for ax in fig.axes if ax.images] == list(circuits)
    with pytest.raises(ValueError):
        induction_maps.plot_ov_circuits({"bad": np.zeros(3)})
    plt.close(fig)


def test_training_curve_draws_every_series() -> None:
    curve = induction.load_training_curve()
    fig = induction_maps.plot_training_curve(curve)
    top, bottom = fig.axes
    assert len(top.lines) == 3 and len(bottom.lines) == 2
    np.testing.assert_array_equal(bottom.lines[0].get_ydata(), curve["induction_score"])
    plt.close(fig)
