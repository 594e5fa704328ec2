"""The guard against answers on screen: no Predict and no exercise is answered by anything a
learner sees before trying it.

Each lesson declares its answers in cell metadata, under ``several_heads``:

* a ``**Predict:**`` markdown cell: ``{"predict": {"answer": ["phrase", "0.5", ...]}}``, the key
  phrases or numbers of its answer as the next code cell (the *reveal*) prints them;
* a ``**Your turn N**`` markdown cell: ``{"exercise": {"solution": "<cell id>", "sizes": {...},
  "answer": [...]}}``: the id of its solution cell, the notation letters its statement uses and their
  values (checked by ``tests/test_solutions.py`` in the running kernel), for an exercise whose
  answer is a number or a phrase that answer, and for an exercise that hands the learner code to
  mend ("find the bug") the ids of the cells holding that code (``"given": [...]``).

What a learner sees before running a reveal is every cell above it (its text, its code and, since
they ran those cells, their printed output) and the reveal's own source. The guard fails when

(a) a Predict's phrase is among those, is missing from the reveal's output, or stands in the
    markdown right after the reveal outside a folded ``<details>`` block (it would share the screen
    with the question);
(b) an exercise's answer phrase stands anywhere above its solution, or its solution's code, with
    names and literals abstracted (attribute names kept), shares at least `COPY_SHARE` of its
    `SHINGLE`-token runs with the code cells and markdown code spans a learner sees above it, taken
    together (the exercise's own blank cell does not count, nor do runs that are in the code the
    exercise gives to mend: the mend is what must not be shown).

It is a guard, not a proof: a blind trial by someone who has not seen the solutions is the proof.
"""

from __future__ import annotations

import io
import json
import keyword
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
KEY = "several_heads"
SHINGLE = 6
COPY_SHARE = 0.5

Cell = dict[str, Any]


def text(cell: Cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def tags(cell: Cell) -> list[str]:
    found: list[str] = cell.get("metadata", {}).get("tags", [])
    return found


def declared(cell: Cell) -> dict[str, Any]:
    found: dict[str, Any] = cell.get("metadata", {}).get(KEY, {})
    return found


def output_text(cell: Cell) -> str:
    """Everything a code cell printed or displayed as text (streams, results, errors)."""
    parts: list[str] = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append("".join(output.get("text", "")))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}")
        else:
            data = output.get("data", {})
            plain = data.get("text/plain", "")
            parts.append("".join(plain) if isinstance(plain, list) else str(plain))
    return "\n".join(parts)


def alt_text(cell: Cell) -> str:
    return str(cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt", ""))


def seen_text(cell: Cell) -> str:
    """What a learner who ran this cell has seen of it: its text, its output, its figure's alt text."""
    return "\n".join((text(cell), output_text(cell), alt_text(cell)))


# --- phrases ------------------------------------------------------------------------------------------


def normalise(words: str) -> str:
    """Lower case, markdown emphasis and code marks dropped, every run of whitespace one space."""
    return re.sub(r"\s+", " ", re.sub(r"[*`]", "", words)).strip().lower()


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """``phrase`` as a whole word or number: "0.5" is not found in "0.55", "10.5" or "0.5e3"."""
    body = re.escape(normalise(phrase))
    return re.compile(rf"(?<![\w.])(?<!\d\.){body}(?![\w])(?!\.\d)")


def contains(haystack: str, phrase: str) -> bool:
    return phrase_pattern(phrase).search(normalise(haystack)) is not None


def unfolded(markdown: str) -> str:
    """The markdown a reader sees before opening anything: every ``<details>`` block but its summary
    removed."""
    return re.sub(
        r"<details>\s*(<summary>(.*?)</summary>)?.*?</details>",
        lambda match: match.group(2) or "",
        markdown,
        flags=re.DOTALL,
    )


# --- code shingles ------------------------------------------------------------------------------------


def code_tokens(code: str) -> list[str]:
    """Python tokens with every name a placeholder (but attribute names and keywords kept), every
    literal another, comments and layout dropped. Code that does not tokenize (an IPython magic, a
    fragment in a markdown span) gives the tokens read before the problem."""
    kept: list[str] = []
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
                kept.append(token.string if kept and kept[-1] == "." else "<name>")
            elif token.type in (tokenize.NUMBER, tokenize.STRING, getattr(tokenize, "FSTRING_START", -1)):
                kept.append("<literal>")
            elif token.type in (getattr(tokenize, "FSTRING_MIDDLE", -1), getattr(tokenize, "FSTRING_END", -1)):
                continue
            else:
                kept.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return kept


def shingles(tokens: list[str], size: int = SHINGLE) -> set[tuple[str, ...]]:
    if not tokens:
        return set()
    if len(tokens) <= size:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def solution_code(cell: Cell) -> str:
    """A solution cell's code without its first line (the "# Solution ..." / "#@title" banner)."""
    return "\n".join(text(cell).splitlines()[1:])


def code_spans(markdown: str) -> list[str]:
    """The code in a markdown cell: fenced blocks and inline spans."""
    fenced = re.findall(r"```[\w-]*\n(.*?)```", markdown, flags=re.DOTALL)
    rest = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    return fenced + re.findall(r"`([^`\n]+)`", rest)


def visible_code(cell: Cell) -> list[str]:
    """The pieces of code a learner reads in a cell (none in a solution, which stays folded)."""
    if "solution" in tags(cell):
        return []
    if cell["cell_type"] == "code":
        return [text(cell)]
    if cell["cell_type"] == "markdown":
        return code_spans(text(cell))
    return []


def copied_share(solution: str, seen: str, given: str = "") -> float:
    """The share of the solution's shingles that also occur in ``seen`` (those that occur in the
    ``given`` code are left out)."""
    wanted = shingles(code_tokens(solution)) - shingles(code_tokens(given))
    if not wanted:
        return 0.0
    return len(wanted & shingles(code_tokens(seen))) / len(wanted)


# --- the findings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leak:
    lesson: str
    item: str  # "Predict 2" or "Your turn 3"
    problem: str

    def __str__(self) -> str:
        return f"{self.lesson} {self.item}: {self.problem}"


def read(path: Path) -> list[Cell]:
    cells: list[Cell] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def predicts(cells: list[Cell]) -> Iterator[tuple[int, Cell]]:
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and "**Predict:**" in text(cell):
            yield i, cell


def exercises(cells: list[Cell]) -> Iterator[tuple[int, Cell]]:
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and re.match(r"\*\*Your turn \d+\*\*", text(cell).lstrip()):
            yield i, cell


def predict_leaks(lesson: str, cells: list[Cell]) -> list[Leak]:
    leaks: list[Leak] = []
    for number, (i, cell) in enumerate(predicts(cells), 1):
        item = f"Predict {number} (cell {i})"
        phrases = declared(cell).get("predict", {}).get("answer", [])
        if not phrases:
            leaks.append(Leak(lesson, item, 'declares no answer (metadata several_heads.predict.answer)'))
            continue
        if i + 1 >= len(cells) or cells[i + 1]["cell_type"] != "code":
            leaks.append(Leak(lesson, item, "is not followed by the code cell that reveals it"))
            continue
        reveal = cells[i + 1]
        after = cells[i + 2] if i + 2 < len(cells) and cells[i + 2]["cell_type"] == "markdown" else None
        for phrase in phrases:
            for j in range(i + 1):
                if contains(seen_text(cells[j]), phrase):
                    where = "the question itself" if j == i else f"cell {j}, above the question"
                    leaks.append(Leak(lesson, item, f"its answer {phrase!r} is on screen before the reveal, in {where}"
                                      ))
            if contains(text(reveal), phrase):
                leaks.append(Leak(lesson, item, f"its answer {phrase!r} is in the source of the reveal (cell {i + 1})"))
            if not contains(output_text(reveal), phrase):
                leaks.append(Leak(lesson, item, f"its answer {phrase!r} is not in the reveal's output (cell {i + 1})"))
            if after is not None and contains(unfolded(text(after)), phrase):
                problem = f"its answer {phrase!r} stands unfolded right after the reveal (cell {i + 2})"
                leaks.append(Leak(lesson, item, problem))
    return leaks


def exercise_leaks(lesson: str, cells: list[Cell]) -> list[Leak]:
    leaks: list[Leak] = []
    ids = {cell.get("id"): j for j, cell in enumerate(cells)}
    for i, cell in exercises(cells):
        item = re.match(r"\*\*(Your turn \d+)\*\*", text(cell).lstrip()).group(1)  # type: ignore[union-attr]
        item = f"{item} (cell {i})"
        spec = declared(cell).get("exercise", {})
        where = ids.get(spec.get("solution"))
        if where is None or "solution" not in tags(cells[where]) or where <= i:
            leaks.append(Leak(lesson, item, "does not name its solution cell (several_heads.exercise.solution)"))
            continue
        if "sizes" not in spec:
            leaks.append(Leak(lesson, item, "does not declare its sizes (metadata several_heads.exercise.sizes)"))
        for phrase in spec.get("answer", []):
            for j, seen in enumerate(cells[:where]):
                if "solution" not in tags(seen) and contains(seen_text(seen), phrase):
                    leaks.append(Leak(lesson, item, f"its answer {phrase!r} is on screen above its solution (cell {j})"
                                      ))
        solution = solution_code(cells[where])
        given_ids = spec.get("given", [])
        given = "\n".join(text(cells[ids[g]]) for g in given_ids if g in ids)
        if len(given_ids) != sum(g in ids for g in given_ids):
            leaks.append(Leak(lesson, item, f"names a given cell that is not in the lesson: {given_ids}"))
        # Everything visible above the solution counts together (runs copied from two cells are as
        # copied as runs from one), except the exercise's own blank cells and the code it hands over.
        own = {j for j in range(i + 1, where) if "exercise" in tags(cells[j])}
        pieces = [(j, piece) for j, seen in enumerate(cells[:where])
                  if j not in own and seen.get("id") not in given_ids and "solution" not in tags(seen)
                  for piece in visible_code(seen)]
        given = "\n".join([given, *(text(cells[j]) for j in sorted(own))])  # the blank template is given
        share = copied_share(solution, "\n".join(piece for _, piece in pieces), given)
        if share >= COPY_SHARE:
            most = max(pieces, key=lambda jp: copied_share(solution, jp[1], given))[0]
            problem = f"{share:.0%} of its solution's code is on screen above it (most in cell {most})"
            leaks.append(Leak(lesson, item, problem))
    return leaks


def leaks(path: Path) -> list[Leak]:
    cells = read(path)
    lesson = path.name[:2]
    return predict_leaks(lesson, cells) + exercise_leaks(lesson, cells)


if __name__ == "__main__":  # python tests/answer_guard.py [notebooks...]: every leak, one a line
    import sys

    found = [leak for path in (map(Path, sys.argv[1:]) if sys.argv[1:] else LESSONS) for leak in leaks(path)]
    print("\n".join(map(str, found)) or "no leak")
