"""Build a conversational SFT dataset from game records (a thin example over playpen.data).

    python examples/trl/data_utils.py RESULTS_DIR [OUT.jsonl [GAME ...]]

is the same as ``playpen dataset RESULTS_DIR -o OUT.jsonl -g GAME``; without OUT.jsonl it
writes ``results.jsonl`` beside this script (upstream playpen's form), never over an
existing file. In a trainer:

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


def main(argv):
    from playpen.errors import PlaypenError
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2 if not argv else 0
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent / "results.jsonl"
    try:
        if len(argv) == 1 and out.exists():
            raise PlaypenError(f"{out} exists: name another OUT.jsonl (second argument) or remove it")
        report = build_dataset(argv[0], out, DatasetFilter(games=tuple(argv[2:])))
    except PlaypenError as e:
        print(f"data_utils: error: {e}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
