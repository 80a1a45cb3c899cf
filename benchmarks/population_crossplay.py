"""Cross-play after population training (issue 15): no private protocol on referencegame.

    flock /tmp/bench.lock python benchmarks/population_crossplay.py              # 12 min FSP + evaluation
    flock /tmp/bench.lock python benchmarks/population_crossplay.py --quick      # the plumbing only

Protocol: smol-135m from the shared SFT adapter of ``benchmarks/learning.py``. Training:
fictitious self-play (``playpen run fsp``) on referencegame's training
instances — the learner plays Giver and Follower against frozen snapshots of itself, so its
Follower learns with a population of Givers — for ``--minutes`` of wall time. Evaluation on
the held-out instances (the first ``--eval-instances`` per experiment, greedy, as
``benchmarks/learning.py`` evaluates): the Follower with the programmatic Giver (cross-play:
the target is at least the SFT Follower's quality) and self-play (a private protocol would
show as self-play well above cross-play), for the SFT adapter and the last snapshot, with
the Follower's answer distribution. Cached as ``benchmarks/results/population-crossplay.{json,md}``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from harness import RESULTS, SFT_ADAPTER, answer_distribution, run_playpen, snapshots  # the benchmarks' shared module

GAME = "referencegame"
TRAINER = "fsp"  # the packaged trainer (playpen run --list)


def evaluate(base: str, adapter: Path, label: str, args, work: Path) -> dict:
    from playpen.evaluation import evaluate as play
    from playpen.models import load_model_by_name
    greedy = dict(temperature=0.0, max_tokens=args.max_tokens)
    learner = load_model_by_name(base, gen_args=greedy, role="learner", adapter=adapter, run_name=label)
    giver = load_model_by_name("programmatic", gen_args=greedy, role="partner")
    rows = {}
    for setting, players in (("follower with programmatic giver", [giver, learner]), ("self-play", [learner])):
        table = play(players, [GAME], results_dir=work / "results", batch_size=16, max_instances=args.eval_instances,
                     run_name=f"{label}--{setting.replace(' ', '-')}", overwrite=True)
        game = table.to_dict()["games"][0]
        rows[setting] = {"percent_played": game["percent_played"], "quality": game["quality"],
                         "episodes": game["num_episodes"], "answers": answer_distribution(Path(table.run_dir))}
        print(f"  {label:<12} {setting:<34} played {game['percent_played']:6.1f}  quality {game['quality']}  "
              f"answers {rows[setting]['answers']}", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learner", default="smol-135m")
    parser.add_argument("--sft", type=Path, default=SFT_ADAPTER)
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--matches-per-epoch", type=int, default=4)
    parser.add_argument("--instances-per-match", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--eval-instances", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=RESULTS / "population-crossplay")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    name = "population-crossplay"
    if args.quick:
        args.minutes, args.matches_per_epoch, args.instances_per_match, args.num_generations = 0.3, 2, 1, 2
        args.eval_instances, args.work, name = 1, Path("/tmp/population-crossplay-quick"), "population-crossplay-quick"
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    options = ["run", str(TRAINER), "-l", args.learner, "-T", "1.0", "-L", str(args.max_tokens), "--seed",
               str(args.seed), "-o", str(work / "playpen-records"), "--games", GAME, "--train-instances",
               "instances_train", "--init-adapter", str(args.sft), "--epochs", "100", "--time-budget",
               str(args.minutes), "--matches-per-epoch", str(args.matches_per_epoch), "--instances-per-match",
               str(args.instances_per_match), "--num-generations", str(args.num_generations), "--learning-rate",
               str(args.learning_rate), "--opponents", "uniform", "--lora-dropout", "0.0",
               "--models-dir", str(work / "models"), "--overwrite"]
    print(f"training: {' '.join(options)}", flush=True)
    train_seconds = run_playpen(options, work / "train.log")
    run = work / "models" / "fsp+lora" / args.learner
    names = snapshots(run)
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    started = time.time()
    results = {"sft": evaluate(args.learner, args.sft, "sft", args, work)}
    last = names[-1]
    results[last] = evaluate(args.learner, run / "population" / "adapters" / last, last, args, work)
    cross = {k: v["follower with programmatic giver"]["quality"] for k, v in results.items()}
    met = cross[last] is not None and cross["sft"] is not None and cross[last] >= cross["sft"]
    result = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "train": {"seconds": round(train_seconds, 1), "epochs": len(names), "budget_min": args.minutes,
                        "metrics": metrics},
              "eval_seconds": round(time.time() - started, 1), "results": results,
              "verdict": {"cross_play_quality": cross, "met": met}}
    (RESULTS if not args.quick else work).joinpath(f"{name}.json").write_text(json.dumps(result, indent=1))
    lines = [f"# Cross-play after population training ({result['date']})", "",
             f"FSP on {GAME} from SFT: {len(names)} epochs, {train_seconds / 60:.1f} min (budget {args.minutes} min).",
             "", "| player | setting | % played | quality | follower's answers |", "|---|---|---:|---:|---|"]
    for player, rows in results.items():
        for setting, row in rows.items():
            lines.append(f"| {player} | {setting} | {row['percent_played']:.1f} | {row['quality']} | "
                         f"{row['answers']} |")
    lines += ["", f"Target (the trained follower with the programmatic giver >= the SFT follower): "
                  f"**{'met' if met else 'not met'}** ({cross})."]
    (RESULTS if not args.quick else work).joinpath(f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
