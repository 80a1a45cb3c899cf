"""The main job end to end on the embedded default model (`make demo`): does the taboo
guesser get better?

1. play held-out taboo instances with smol-135m as the guesser and the programmatic
   describer (before),
2. play the training instances with the programmatic players (demonstrations) and train a
   LoRA adapter on the guesser's turns of the won episodes (``playpen run sft``,
   playpen/training/sft/trainers.py),
3. play the same held-out instances with the adapter (after),
4. print % played, quality and clemscore before and after, how many episodes got better
   or worse (with the exact sign-flip p-value of the paired difference), and where every
   file is.

The held-out instances never share a target word with the training instances. Each demo
run gets its own folder under playpen-records/demo-<time>/: nothing earlier is
overwritten. Options: ``python -m playpen.demo --help``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from playpen.evaluation import evaluate, read_episode_scores
from playpen.evaluation.statistics import sign_flip_test
from playpen.models import load_model_by_name

GAME, ROLE, PARTNER = "taboo", "Guesser", "programmatic"


def _playpen(*args: str) -> None:
    print("$ playpen " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "playpen", *args], check=True)


def play_guesser(learner_name: str, adapter: Path | None, results: Path, name: str, per_experiment: int) -> dict:
    """Play the held-out instances with the learner (+ `adapter`) guessing: the table and
    each episode's score (aborted = 0, as clemscore counts it)."""
    greedy = dict(temperature=0.0, max_tokens=60)
    learner = load_model_by_name(learner_name, gen_args=greedy, role="learner", adapter=adapter, run_name=name)
    describer = load_model_by_name(PARTNER, gen_args=greedy, role="partner")
    table = evaluate([describer, learner], [GAME], results_dir=results, max_instances=per_experiment,
                     batch_size=16, run_name=name)
    episodes = {f"{e['experiment']}/{e['episode']}": 0.0 if e["Aborted"] else float(e["Main Score"])
                for e in read_episode_scores(results / name)}
    return {"table": table.to_dict(), "episodes": episodes}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playpen.demo", description=__doc__.splitlines()[0])
    parser.add_argument("-l", "--learner", default="smol-135m", help="registered huggingface_local model to train")
    parser.add_argument("-n", "--eval-instances", type=int, default=8,
                        help="held-out taboo instances per experiment (3 experiments) played before and after")
    parser.add_argument("--steps", type=int, default=24, help="LoRA SFT steps")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--demo-instances", type=int, default=0,
                        help="training instances per experiment played for demonstrations (0 = all)")
    parser.add_argument("-o", "--output-dir", default=None)
    args = parser.parse_args(argv)
    if min(args.eval_instances, args.steps, args.batch_size) < 1 or args.demo_instances < 0:
        parser.error("--eval-instances, --steps and --batch-size must be >= 1, --demo-instances >= 0")

    root = Path(args.output_dir or f"playpen-records/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    if root.exists():
        raise SystemExit(f"playpen demo: {root} already exists; choose another --output-dir")
    results, models = root / "results", root / "models"
    started = time.time()

    name = args.learner
    print(f"== before: {name} guesses, the {PARTNER} player describes", flush=True)
    before = play_guesser(name, None, results, name, args.eval_instances)
    _playpen("run", "sft", "-l", name, "-L", "60", "-o", str(root),
             "--games", GAME, "--roles", ROLE, "--max-steps", str(args.steps), "--batch-size", str(args.batch_size),
             "--max-length", "768", "--learning-rate", "2e-4", "--demo-max-instances", str(args.demo_instances),
             "--models-dir", str(models), "--evaluate", "false")
    run_dir = models / "sft+lora" / name
    adapter = Path(json.loads((run_dir / "playpen-run.json").read_text(encoding="utf-8"))["checkpoint"])
    print(f"== after: {name} + {adapter.name} guesses", flush=True)
    after = play_guesser(name, adapter, results, f"{name}+sft-{adapter.name}", args.eval_instances)

    print("\n" + "=" * 72)
    print(f"playpen demo: the {GAME} guesser (held-out targets) before and after {args.steps} LoRA SFT steps")
    print(f"{'model':<36} {'% played':>9} {'quality':>8} {'clemscore':>9}")
    for label, run in ((name, before), (f"{name} + adapter ({adapter.name})", after)):
        row = run["table"]["overall"]
        quality = "n/a" if row["quality"] is None else f"{row['quality']:.1f}"
        print(f"{label:<36} {row['percent_played']:>9.1f} {quality:>8} {run['table']['clemscore']:>9.2f}")
    shared = sorted(set(before["episodes"]) & set(after["episodes"]))
    differences = [after["episodes"][k] - before["episodes"][k] for k in shared]
    better, worse = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
    p = sign_flip_test(differences).p_value if any(differences) else 1.0
    print(f"\n{len(shared)} held-out episodes: {better} better, {worse} worse, {len(shared) - better - worse} "
          f"unchanged (exact sign-flip p = {p:.3g}; one seed, a demo: benchmarks/protocol.py measures claims)")
    print(f"wall time: {time.time() - started:.0f} s")
    print("files:")
    print(f"  demonstrations (clemcore layout): {root / 'demonstrations'}")
    print(f"  adapter checkpoints:              {run_dir}")
    print(f"  learning curve:                   {run_dir / 'learning-curve.png'}")
    print(f"  evaluation episodes and tables:   {results}")
    print("  read an episode:                  clem transcribe -r " + str(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
