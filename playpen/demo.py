"""The main job end to end on the embedded default model (`make demo`): does the taboo
guesser get better?

1. play held-out taboo instances with smol-135m as the guesser and the programmatic
   describer (before),
2. play the training instances with the programmatic players (demonstrations) and train a
   LoRA adapter on the guesser's turns of the won episodes (``playpen run sft``,
   playpen/training/sft/trainer.py),
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
import resource
import subprocess
import sys
import time
from pathlib import Path

from playpen.evaluation import evaluate, read_episode_scores
from playpen.evaluation.statistics import sign_flip_test
from playpen.models import load_model_by_name

GAME, ROLE, PARTNER = "taboo", "Guesser", "programmatic"
MAX_TOKENS = 30  # tokens per turn in play


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its finished children (the SFT run):
    the demo's cost, which other jobs on the machine do not inflate as they do the wall time."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_gb() -> float:
    """The highest resident memory of this process or of its largest child (Linux: KiB)."""
    kib = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return kib / 2**20


def _playpen(*args: str) -> None:
    print("$ playpen " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "playpen", *args], check=True)


def play_guesser(learner_name: str, adapter: Path | None, results: Path, name: str, per_experiment: int) -> dict:
    """Play the held-out instances with the learner (+ `adapter`) guessing: the table and
    each episode's score (aborted = 0, as clemscore counts it)."""
    # a guess is a few tokens ("GUESS: melody"); the untrained model's rambling past 30 tokens
    # changes nothing about its score, only the time it takes
    greedy = dict(temperature=0.0, max_tokens=MAX_TOKENS)
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
    parser.add_argument("--batch-size", type=int, default=4, help="conversations per SFT step")
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--demo-instances", type=int, default=0,
                        help="training instances per experiment played for demonstrations (0 = all)")
    parser.add_argument("-o", "--output-dir", default=None)
    args = parser.parse_args(argv)
    if min(args.eval_instances, args.steps, args.batch_size) < 1 or args.demo_instances < 0 or args.learning_rate <= 0:
        parser.error("--eval-instances, --steps and --batch-size must be >= 1, --demo-instances >= 0, "
                     "--learning-rate > 0")

    root = Path(args.output_dir or f"playpen-records/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    if root.exists():
        raise SystemExit(f"playpen demo: {root} already exists; choose another --output-dir")
    results, models = root / "results", root / "models"
    started, cpu = time.time(), {}

    name = args.learner
    print(f"== before: {name} guesses, the {PARTNER} player describes", flush=True)
    before = play_guesser(name, None, results, name, args.eval_instances)
    cpu["before"] = cpu_seconds()
    # LoRA dropout 0: on a CPU the masks cost ~1.4x per step (benchmarks/results/LOG.md,
    # 2026-11-21); a guesser's conversation is ~160 tokens, so --max-length truncates nothing
    _playpen("run", "sft", "-l", name, "-L", str(MAX_TOKENS), "-o", str(root),
             "--games", GAME, "--roles", ROLE, "--max-steps", str(args.steps), "--batch-size", str(args.batch_size),
             "--max-length", "512", "--learning-rate", str(args.learning_rate), "--lora-dropout", "0",
             "--save-steps", str(args.steps), "--demo-max-instances", str(args.demo_instances), "--models-dir", str(models),
             "--evaluate", "false")
    run_dir = models / "sft+lora" / name
    cpu["training"] = cpu_seconds() - cpu["before"]
    adapter = Path(json.loads((run_dir / "playpen-run.json").read_text(encoding="utf-8"))["checkpoint"])
    print(f"== after: {name} + {adapter.name} guesses", flush=True)
    after = play_guesser(name, adapter, results, f"{name}+sft-{adapter.name}", args.eval_instances)
    cpu["after"] = cpu_seconds() - cpu["before"] - cpu["training"]

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
    steps = sum(json.loads(line).get("time/cpu_s", 0.0)
                for line in (run_dir / "playpen-log.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    print(f"wall time: {time.time() - started:.0f} s; CPU (user + system): {sum(cpu.values()):.0f} s = before "
          f"{cpu['before']:.0f} + training run {cpu['training']:.0f} (its steps {steps:.0f}) + after "
          f"{cpu['after']:.0f}; peak RSS {peak_rss_gb():.2f} GB")
    print("files:")
    print(f"  demonstrations (clemcore layout): {root / 'demonstrations'}")
    print(f"  adapter checkpoints:              {run_dir}")
    print(f"  learning curve:                   {run_dir / 'learning-curve.png'}")
    print(f"  evaluation episodes and tables:   {results}")
    print("  read an episode:                  clem transcribe -r " + str(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
