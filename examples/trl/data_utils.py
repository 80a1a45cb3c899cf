"""Build a conversational SFT dataset from game records (a thin example over playpen.data).

    python examples/trl/data_utils.py RESULTS_DIR OUT.jsonl [GAME ...]

is the same as ``playpen dataset RESULTS_DIR -o OUT.jsonl -g GAME``. In a trainer:

    from data_utils import load_conversations
    train = load_conversations("results", games=["taboo"], outcomes=["success"])
"""
import sys
from pathlib import Path

from playpen.data import DatasetFilter, build_dataset


def load_conversations(results_dir, *, games=(), roles=(), models=(), outcomes=(), cache="playpen-records/datasets"):
    """A ``datasets.Dataset`` with ``messages`` and ``meta`` columns built from ``results_dir``."""
    from datasets import load_dataset
    keep = DatasetFilter(games=tuple(games), roles=tuple(roles), models=tuple(models), outcomes=tuple(outcomes))
    out = Path(cache) / f"{Path(results_dir).resolve().name}.jsonl"
    report = build_dataset(results_dir, out, keep)
    for line in report.lines():
        print(f"[data_utils] {line}", file=sys.stderr)
    return load_dataset("json", data_files=str(out), split="train")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    report = build_dataset(sys.argv[1], sys.argv[2], DatasetFilter(games=tuple(sys.argv[3:])))
    print("\n".join(report.lines()))
