"""One head of width 16 against four heads of width 4 on lesson 05's toy task; writes the shipped results.

    python scripts/compare_head_counts.py                 # the shipped run: seeds 0-4, about 10 s on CPU
    python scripts/compare_head_counts.py --out /tmp/comparison.json

Both models have the same total width D = 16, the same initial numbers, the same batches, the same
number of Adam steps and learning rate (`lessons_lib.toy_task.ToyConfig`); only the head count
differs. Each run is scored on a held-out batch. The results go to
``lessons_lib/data/head_count_comparison.json``; lesson 05 loads that file (with NumPy) and never
trains. ``tests/test_toy_training.py`` retrains with these settings and compares with the file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessons_lib.inspect_heads import trained_behaviour
from lessons_lib.toy_task import COMPARISON_PATH, COMPARISON_SEEDS, TARGET_NAMES, ToyConfig, compare_head_counts

DESCRIPTION = "one head of width D vs h heads of width D/h on the toy task of lesson 05, several seeds"


def comparison_record(seeds: Sequence[int] = COMPARISON_SEEDS) -> dict[str, Any]:
    """Every run of the shipped comparison (or of the given ``seeds`` only, as the retraining test
    does), with where each trained model's heads look."""
    record = compare_head_counts(ToyConfig(), seeds=seeds, measure=trained_behaviour)
    return {"what": DESCRIPTION, "written_by": "scripts/compare_head_counts.py", **record}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=COMPARISON_PATH)
    args = parser.parse_args(argv)

    import torch  # only to record the version that produced the numbers

    record = comparison_record()
    record["torch_version"] = torch.__version__
    for run in record["runs"]:
        accuracy = ", ".join(f"{name} {run['accuracy'][name]:.3f}" for name in TARGET_NAMES)
        print(
            f"seed {run['seed']}, h={run['heads']} (d_h={run['head_width']:2d}): {accuracy}; "
            f"final loss {run['final_loss']:.4f}; mean weight on previous/next/marker per head "
            f"{[[round(w, 2) for w in run['weight_on'][name]] for name in TARGET_NAMES]}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
