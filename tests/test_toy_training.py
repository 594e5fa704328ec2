"""The toy task of lesson 05: data, training, and the behaviour the shipped weights show.

Retraining is checked by behaviour (which relationships heads specialise in, whichever heads they
are), not bitwise and not slot by slot. The shipped weights themselves are checked slot by slot,
because lesson 05 shows them and names their heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

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


# Seeds 0 and 1 are the two outcomes the lesson describes: the single head keeps the previous token
# (seed 0) or the next one (seed 1). Retraining them (4 of the 10 runs, about 4 s) checks that the
# script still reproduces the shipped file; the other seeds are checked as shipped, below.
RETRAINED_SEEDS = (0, 1)


LESSON_ROLES = ("previous", "marker", "next", "mixed")  # the roles lesson 05 shows, one head each


def _match_heads(behaviour: dict[str, NDArray[np.floating]], shipped: dict[str, NDArray[np.floating]]) -> list[int]:
    """Slot-agnostic: the heads of ``behaviour`` must take the lesson's roles, one head each, *in any
    order*, and each must match the shipped head of the same role. Returns, per head of ``behaviour``,
    the shipped head it matches (a head's index is only a name: lesson 05, section 3)."""
    roles, shipped_roles = head_roles(behaviour, THRESHOLD), head_roles(shipped, THRESHOLD)
    assert sorted(roles) == sorted(LESSON_ROLES), f"the heads specialise as {roles}, not {LESSON_ROLES} in some order"
    assert sorted(shipped_roles) == sorted(LESSON_ROLES)
    match = [shipped_roles.index(role) for role in roles]
    for name, values in behaviour.items():
        assert values == pytest.approx(shipped[name][match], abs=0.01), name  # tolerance: see below
    return match


def _check_specialised_heads(fresh: dict[str, Any]) -> None:
    """The comparison's run with h = 4 and seed 0 is ``toy_task.train(ToyConfig())``, the very training
    of the shipped lesson-05 weights: retrained, its heads take the lesson's roles, whichever heads
    take which, and each matches the shipped head of its role."""
    run = next(r for r in fresh["runs"] if (r["heads"], r["seed"]) == (ToyConfig().heads, ToyConfig().seed))
    assert min(run["accuracy"].values()) > 0.95
    behaviour = {name: np.array(values) for name, values in run["weight_on"].items()}
    tokens, marker = make_batch(256, ToyConfig(), seed=EVAL_SEED)
    _match_heads(behaviour, head_behaviour(run_layer(load_toy_heads(), tokens)[1], marker))


def test_the_retraining_check_ignores_which_slot_holds_which_role() -> None:
    """The check above accepts the shipped heads in any order and refuses a layer that lost a role."""
    tokens, marker = make_batch(256, ToyConfig(), seed=EVAL_SEED)
    shipped = head_behaviour(run_layer(load_toy_heads(), tokens)[1], marker)
    assert _match_heads(shipped, shipped) == [0, 1, 2, 3]
    order = [2, 3, 0, 1]  # the same heads, in other slots, as a retraining could order them
    assert _match_heads({name: values[order] for name, values in shipped.items()}, shipped) == order
    lost = {name: values[[0, 1, 0, 3]] for name, values in shipped.items()}  # two "previous" heads, no "next"
    with pytest.raises(AssertionError, match="specialise as"):
        _match_heads(lost, shipped)
    nudged = {name: values.copy() for name, values in shipped.items()}
    nudged["marker"][1] -= 0.05  # the right roles, but one head's numbers moved
    with pytest.raises(AssertionError):
        _match_heads(nudged, shipped)


def test_shipped_weights_show_what_the_lesson_claims() -> None:
    model = load_toy_heads()
    tokens, marker = make_batch(256, model.config, seed=EVAL_SEED)
    behaviour = head_behaviour(run_layer(model, tokens)[1], marker)
    # Lesson 05 states: head 0 reads the previous token, head 1 the marker, head 2 the next token,
    # and head 3 splits its weight between previous and next.
    assert head_roles(behaviour, THRESHOLD) == ["previous", "marker", "next", "mixed"]
    assert behaviour["previous"][0] > 0.9
    assert behaviour["marker"][1] > 0.9
    assert behaviour["next"][2] > 0.9
    assert 0.35 < behaviour["previous"][3] < 0.6 and 0.35 < behaviour["next"][3] < 0.6
    assert np.all(model.accuracy > 0.99)


# ----- one head of width 16 vs four heads of width 4: the shipped comparison --------------------
def _comparison_script() -> ModuleType:
    """``scripts/compare_head_counts.py`` as a module (scripts/ is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "compare_head_counts.py"
    spec = importlib.util.spec_from_file_location("compare_head_counts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_head_counts_start_from_the_same_numbers() -> None:
    """The comparison's premise: for one seed, h = 1 and h = 4 begin with identical parameters."""
    torch = pytest.importorskip("torch")
    from lessons_lib.toy_task import _build_model

    one, four = (_build_model(ToyConfig(heads=h, seed=3)).state_dict() for h in (1, 4))
    assert one.keys() == four.keys()
    assert all(torch.equal(one[name], four[name]) for name in one)


def test_retraining_reproduces_the_shipped_comparison_and_heads() -> None:
    """Retrain seeds 0 and 1 of ``scripts/compare_head_counts.py`` and compare with the JSON.

    Tolerance: training is seeded, runs on one CPU thread, and sees batches from NumPy's stable
    generator, so on one machine two runs give bit-identical numbers. Another CPU picks other SIMD
    kernels whose float32 sums round differently, and 300 Adam steps carry that into near-tie
    answers on the held-out set: retrained on a second machine (AMD EPYC) the accuracies moved by
    up to 0.0028, the final losses by up to 0.7 % and the weights on each target by up to 0.0013.
    The bounds below allow about three times that. A different outcome (another head count
    winning, or the single head learning the other neighbour) moves an accuracy by about 0.6, and
    the fresh runs must also say what the lesson says. One test, so the training runs once.
    """
    pytest.importorskip("torch")
    from lessons_lib.inspect_heads import load_head_count_comparison
    from lessons_lib.toy_task import COMPARISON_HEADS, COMPARISON_SEEDS

    shipped = load_head_count_comparison()
    assert shipped.head_counts == COMPARISON_HEADS and shipped.seeds == COMPARISON_SEEDS
    fresh = _comparison_script().comparison_record(RETRAINED_SEEDS)
    _check_specialised_heads(fresh)
    expected_config = {name: getattr(ToyConfig(), name) for name in ("symbols", "length", "width", "steps", "batch")}
    assert {name: shipped.config[name] for name in expected_config} == expected_config
    assert fresh["config"] == shipped.config
    runs = {(run["heads"], run["seed"]): run for run in fresh["runs"]}
    assert sorted(runs) == sorted((h, s) for h in shipped.head_counts for s in RETRAINED_SEEDS)
    for i, heads in enumerate(shipped.head_counts):
        for seed in RETRAINED_SEEDS:
            j = shipped.seeds.index(seed)
            run = runs[heads, seed]
            got = [run["accuracy"][name] for name in shipped.targets]
            assert got == pytest.approx(shipped.accuracy[i, j].tolist(), abs=0.01), (heads, seed)
            assert run["final_loss"] == pytest.approx(shipped.final_loss[i, j], rel=0.03, abs=1e-4)
            for name in shipped.targets:
                assert run["weight_on"][name] == pytest.approx(shipped.weight_on[name][i][j], abs=0.01)
    _check_lesson_claims(
        np.array(
            [
                [[runs[h, s]["accuracy"][name] for name in shipped.targets] for s in RETRAINED_SEEDS]
                for h in shipped.head_counts
            ]
        ),
        {
            name: [[runs[h, s]["weight_on"][name] for s in RETRAINED_SEEDS] for h in shipped.head_counts]
            for name in shipped.targets
        },
        shipped.head_counts,
        shipped.targets,
    )
    # Both outcomes occur among the retrained seeds, so the claim check above sees each of them.
    keeps_previous = [runs[1, s]["accuracy"]["previous"] > runs[1, s]["accuracy"]["next"] for s in RETRAINED_SEEDS]
    assert sorted(keeps_previous) == [False, True]


def _check_lesson_claims(
    accuracy: NDArray[np.floating], weight_on: dict[str, Any], head_counts: Sequence[int], targets: Sequence[str]
) -> None:
    """Lesson 05's prose: four heads name every target; one head names the marker and one neighbour,
    and loses the neighbour it gives the smaller share of its weight.

    ``accuracy`` is ``(head counts, seeds, targets)``; ``weight_on[target][head count][seed]`` lists
    the mean weight each head puts on that target."""
    one, four = head_counts.index(1), head_counts.index(4)
    previous, following, marker = (targets.index(name) for name in ("previous", "next", "marker"))
    assert np.all(accuracy[four] > 0.99)
    assert np.all(accuracy[one, :, marker] > 0.99)
    best = np.maximum(accuracy[one, :, previous], accuracy[one, :, following])
    worst = np.minimum(accuracy[one, :, previous], accuracy[one, :, following])
    assert np.all((best > 0.95) & (0.3 < worst) & (worst < 0.45))
    for j in range(accuracy.shape[1]):
        on_previous = weight_on["previous"][one][j][0]
        on_next = weight_on["next"][one][j][0]
        loses_previous = accuracy[one, j, previous] < accuracy[one, j, following]
        assert loses_previous == (on_previous < on_next)


def test_shipped_comparison_says_what_the_lesson_says() -> None:
    from lessons_lib.inspect_heads import load_head_count_comparison

    shipped = load_head_count_comparison()
    _check_lesson_claims(shipped.accuracy, shipped.weight_on, shipped.head_counts, shipped.targets)
