"""No Predict and no exercise of a lesson is answered by anything a learner sees before trying it
(the guard of `tests/answer_guard.py`), tried first on small notebooks made here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from answer_guard import (
    LESSONS,
    code_tokens,
    contains,
    copied_share,
    exercise_leaks,
    leaks,
    predict_leaks,
    unfolded,
)


@pytest.mark.parametrize("path", LESSONS, ids=[path.name for path in LESSONS])
def test_no_answer_is_on_screen_before_the_learner_tries(path: Path) -> None:
    found = [str(leak) for leak in leaks(path)]
    assert not found, f"{path.name}: answers on screen before the learner tries:\n" + "\n".join(found)


# --- the guard itself ------------------------------------------------------------------------------


def markdown(text: str, **declared: Any) -> dict[str, Any]:
    metadata = {"several_heads": declared} if declared else {}
    return {"cell_type": "markdown", "source": text, "metadata": metadata}


def code(text: str, printed: str = "", tags: tuple[str, ...] = (), cell_id: str | None = None) -> dict[str, Any]:
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
    cell: dict[str, Any] = {"cell_type": "code", "source": text, "metadata": {"tags": list(tags)}, "outputs": outputs}
    if cell_id:
        cell["id"] = cell_id
    return cell


PREDICT = markdown("**Predict:** what is the top weight?", predict={"answer": ["0.5"]})
REVEAL = code("print('top weight', w.max())", "top weight 0.5\n")


def test_a_predict_answered_only_by_its_reveal_passes() -> None:
    cells = [markdown("Some text."), code("w = f()", "shape (2, 2)\n"), PREDICT, REVEAL,
             markdown("<details><summary>What happened?</summary>\n\nHalf: 0.5.\n\n</details>")]
    assert predict_leaks("01", cells) == []


@pytest.mark.parametrize(
    ("cells", "words"),
    [
        ([markdown("The top weight will be 0.5."), PREDICT, REVEAL], "in cell 0, above the question"),
        ([code("w = f()", "w.max() = 0.5\n"), PREDICT, REVEAL], "in cell 0, above the question"),
        ([PREDICT, code("print('0.5 expected:', w.max())", "0.5 expected: 0.5\n")], "in the source of the reveal"),
        ([PREDICT, code("print(w.max())", "0.25\n")], "is not in the reveal's output"),
        ([PREDICT, REVEAL, markdown("It is 0.5: half.")], "stands unfolded right after the reveal"),
        ([markdown("**Predict:** what?"), REVEAL], "declares no answer"),
        ([PREDICT, markdown("no code")], "is not followed by the code cell"),
    ],
)
def test_every_kind_of_leak_of_a_predict_is_found(cells: list[dict[str, Any]], words: str) -> None:
    found = predict_leaks("01", cells)
    assert any(words in str(leak) for leak in found), found


def test_phrases_match_whole_numbers_and_words_only() -> None:
    assert contains("weights 0.5 and 0.25", "0.5")
    assert not any(contains(other, "0.5") for other in ["0.55", "10.5", "0.5e3", "20.5", "x0.5"])
    assert contains("It is **NaN** here", "nan") and not contains("nanosecond", "nan")
    assert contains("a `(B, T, D)`\n  array", "(b, t, d) array")


def test_folded_text_is_not_on_screen_but_its_summary_is() -> None:
    shown = unfolded("Before.\n<details><summary>What happened?</summary>\n\nIt was 0.5.\n</details>\nAfter.")
    assert "0.5" not in shown and "What happened?" in shown and "After." in shown


def exercise(solution: str, *above: dict[str, Any], answer: tuple[str, ...] = (), given: tuple[str, ...] = ()) -> list[
        dict[str, Any]]:
    spec: dict[str, Any] = {"solution": "sol-1", "sizes": {"T": 3}}
    spec |= {"answer": list(answer)} if answer else {}
    spec |= {"given": list(given)} if given else {}
    return [*above, markdown("**Your turn 1** (difficulty 1/3, importance 1/3, about 3 min): do it.", exercise=spec),
            code("answer_1 = None", tags=("exercise",)), code("print(check(answer_1))", tags=("check",)),
            code("# Solution (open it only after you have tried)\n" + solution, tags=("solution",), cell_id="sol-1")]


SOLUTION = "scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])\nanswer_1 = scores.max(axis=-1)"


def test_an_exercise_nothing_answers_passes() -> None:
    cells = exercise(SOLUTION, code("x = rng.normal(size=(3, 4))\nprint(x.shape)", "(3, 4)\n"))
    assert exercise_leaks("01", cells) == []


def test_a_solution_shown_above_under_other_names_is_found() -> None:
    shown = code("s = a @ np.swapaxes(b, -1, -2) / math.sqrt(a.shape[-1])\nbest = s.max(axis=-1)\nprint(best)")
    found = exercise_leaks("01", exercise(SOLUTION, shown))
    assert [str(leak) for leak in found] == [
        "01 Your turn 1 (cell 1): 100% of its solution's code is on screen above it (most in cell 0)"
    ]


def test_a_solution_shown_in_pieces_across_cells_is_found() -> None:
    """Neither cell alone holds half of the solution; the two together hold all of it."""
    first = code("s = a @ np.swapaxes(b, -1, -2) / 2.0\nprint(s)")
    second = code("u = a.shape[-1]\nw = math.sqrt(c)\nbest = s.max(axis=-1)")
    assert all(copied_share(SOLUTION, piece["source"]) < 0.5 for piece in (first, second))
    found = exercise_leaks("01", exercise(SOLUTION, first, second))
    assert len(found) == 1 and "of its solution's code is on screen above it" in str(found[0]), found


def test_the_blank_template_of_the_exercise_is_not_a_copy() -> None:
    """The exercise cell hands over the signature and docstring: the solution repeats them."""
    template = "def f(x: np.ndarray) -> np.ndarray:\n    \"\"\"(B, h, T, d) -> (B, T, h * d).\"\"\"\n    ..."
    solution = template.replace("    ...", "    return x.swapaxes(1, 2).reshape(x.shape[0], x.shape[2], -1)")
    cells = exercise(solution)
    cells[-3]["source"] = template
    assert exercise_leaks("01", cells) == []


def test_a_solution_shown_in_a_hint_is_found() -> None:
    hint = markdown("<details><summary>Hint</summary>\n\n`s = a @ np.swapaxes(b, -1, -2) / math.sqrt(a.shape[-1])`\n")
    assert exercise_leaks("01", exercise(SOLUTION, hint))


def test_other_calls_are_not_a_copy() -> None:
    """Names are abstracted, attribute names are not: another function of the same shape differs."""
    assert copied_share("y = np.tril(np.ones((T, S), dtype=bool), k=S - T)",
                        "z = np.triu(np.zeros((T, S), dtype=int), k=1)") < 0.5
    assert code_tokens("a.view(B, 2)  # comment") == ["<name>", ".", "view", "(", "<name>", ",", "<literal>", ")"]


def test_an_answer_phrase_above_the_solution_is_found() -> None:
    found = exercise_leaks("01", exercise("answer_1 = 12.0", markdown("For example 12.0."), answer=("12.0",)))
    assert any("its answer '12.0' is on screen above its solution (cell 0)" in str(leak) for leak in found), found


def test_code_given_to_mend_is_not_a_copy_but_a_shown_mend_is() -> None:
    broken = code("def f(x):\n    y = x.reshape(2, 3, 4)\n    return y.sum(axis=0) / x.size", cell_id="bug")
    fixed = "def f(x):\n    y = x.reshape(2, 3, 4)\n    return y.sum(axis=0) / x.shape[0]"
    assert exercise_leaks("01", exercise(fixed, broken, given=("bug",))) == []
    shown = code("total = z.sum(axis=0) / z.shape[0]")
    assert exercise_leaks("01", exercise(fixed, broken, shown, given=("bug",)))


def test_an_exercise_must_name_its_solution_and_sizes() -> None:
    cells = exercise(SOLUTION)
    cells[0]["metadata"]["several_heads"]["exercise"] = {"solution": "elsewhere"}
    assert "does not name its solution cell" in str(exercise_leaks("01", cells)[0])
    cells[0]["metadata"]["several_heads"]["exercise"] = {"solution": "sol-1"}
    assert "does not declare its sizes" in str(exercise_leaks("01", cells)[0])
