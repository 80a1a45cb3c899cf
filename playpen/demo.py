"""The main job end to end on the embedded default model (`make demo`).

1. evaluate smol-135m on a few held-out referencegame instances (baseline),
2. play the training instances with the programmatic players (demonstrations),
3. a few LoRA SFT steps on the won episodes (``playpen run sft``, playpen/training/sft/trainers.py),
4. evaluate the adapter on the same held-out instances,
5. print the before/after table and where every file is.

Each demo run gets its own folder under playpen-records/demo-<time>/: nothing earlier
is overwritten. Options: ``python -m playpen.demo --help``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def _playpen(*args: str) -> None:
    command = [sys.executable, "-m", "playpen", *args]
    print("$ playpen " + " ".join(args), flush=True)
    subprocess.run(command, check=True)


def _eval_table(results_dir: Path, name: str) -> dict:
    return json.loads((results_dir / name / "playpen-eval.json").read_text(encoding="utf-8"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playpen.demo", description=__doc__.splitlines()[0])
    parser.add_argument("-g", "--game", default="referencegame")
    parser.add_argument("-n", "--eval-instances", type=int, default=2,
                        help="held-out instances per experiment to evaluate")
    parser.add_argument("--steps", type=int, default=6, help="LoRA SFT steps")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--demo-instances", type=int, default=6,
                        help="training instances per experiment played for demonstrations")
    parser.add_argument("-o", "--output-dir", default=None)
    args = parser.parse_args(argv)

    root = Path(args.output_dir or f"playpen-records/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    if root.exists():
        raise SystemExit(f"playpen demo: {root} already exists; choose another --output-dir")
    results, models = root / "results", root / "models"
    started = time.time()

    _playpen("eval", "-m", "smol-135m", "-g", args.game, "-n", str(args.eval_instances),
             "-L", "60", "-r", str(results), "--name", "smol-135m")
    before = _eval_table(results, "smol-135m")
    _playpen("run", "sft", "-l", "smol-135m", "-L", "60", "-o", str(root),
             "--games", args.game, "--max-steps", str(args.steps), "--batch-size", str(args.batch_size),
             "--max-length", "768", "--demo-max-instances", str(args.demo_instances),
             "--models-dir", str(models), "--results-dir", str(results),
             "--eval-max-instances", str(args.eval_instances))
    run_dir = models / "sft+lora" / "smol-135m"
    summary = json.loads((run_dir / "playpen-run.json").read_text(encoding="utf-8"))
    after = summary.get("eval")

    print("\n" + "=" * 72)
    print(f"playpen demo: {args.game}, smol-135m before and after {args.steps} LoRA SFT steps")
    print(f"{'model':<40} {'% played':>9} {'quality':>8} {'clemscore':>9}")
    for label, table in (("smol-135m (baseline)", before), ("smol-135m + sft+lora adapter", after)):
        if table is None:
            print(f"{label:<40} {'(not evaluated)':>28}")
            continue
        row = table["overall"]
        quality = "n/a" if row["quality"] is None else f"{row['quality']:.1f}"
        print(f"{label:<40} {row['percent_played']:>9.1f} {quality:>8} {table['clemscore']:>9.2f}")
    print(f"\nwall time: {time.time() - started:.0f} s")
    print("files:")
    print(f"  demonstrations (clemcore layout): {root / 'demonstrations'}")
    print(f"  adapter checkpoints:              {run_dir}")
    print(f"  learning curve:                   {run_dir / 'learning-curve.png'}")
    print(f"  evaluation episodes and tables:   {results}")
    print("  inspect an episode:               clem transcribe -r " + str(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
