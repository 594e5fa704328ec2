"""Train the tiny attention layer of lesson 05 and write ``lessons_lib/data/toy_heads.npz``.

    python scripts/train_toy_heads.py                # the shipped run (seed 0, a few seconds on CPU)
    python scripts/train_toy_heads.py --seed 1 --out /tmp/other.npz

The notebook only loads the file (NumPy); it never trains. See `lessons_lib.toy_task` for the task.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lessons_lib.inspect_heads import EVAL_SEED, head_behaviour, head_roles, load_toy_heads, run_layer
from lessons_lib.toy_task import DATA_PATH, ToyConfig, make_batch, save_weights, train


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=ToyConfig.seed)
    parser.add_argument("--steps", type=int, default=ToyConfig.steps)
    parser.add_argument("--out", type=Path, default=DATA_PATH)
    args = parser.parse_args(argv)

    config = ToyConfig(seed=args.seed, steps=args.steps)
    result = train(config)
    path = save_weights(result, args.out)
    print(f"trained {config.steps} steps in {result.seconds:.1f} s; final loss {result.final_loss:.4f}")
    print("accuracy (previous, next, marker):", result.accuracy.round(3).tolist())

    model = load_toy_heads(path)
    tokens, marker = make_batch(256, config, seed=EVAL_SEED)
    behaviour = head_behaviour(run_layer(model, tokens)[1], marker)
    for name, values in behaviour.items():
        print(f"mean weight on {name:8s} per head:", values.round(3).tolist())
    print("roles:", head_roles(behaviour))
    print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
