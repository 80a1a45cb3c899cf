"""Hierarchical GRPO on proposer-solver end to end, and what the proposer learnt, read from the records.

    python benchmarks/hierarchical.py                         # smol-135m: SFT warm-up, then hierarchical GRPO
    python benchmarks/hierarchical.py --quick --out /tmp/bh   # minutes: the plumbing only
    python benchmarks/hierarchical.py --report                # rebuild the report from the last run's files

Protocol: the learner (smol-135m) first gets an SFT-LoRA warm-up on the programmatic
players' won episodes of both games' training instances (``--warmup-steps``; it knows
neither reply format out of the box), then ``playpen run hierarchical-grpo``
trains from that adapter for ``--steps`` steps with G = ``--num-generations`` proposals per
proposer instance and G solver episodes per proposal, the learner playing both levels.

The report (``<results>/hierarchical.json`` and ``hierarchical.png``) holds, per step:
the reward of each level and role (``reward/<level>/<role>/mean`` from the training log),
the advantages used, and — read from the proposer episodes' records, not from the log —
the share of valid problems, their difficulty (operators + parenthesis pairs), the solvers'
solve rate, the proposer's reward and example problems of the first and last steps.
Wall times on a shared 2-core CPU are comparable only within a quiet run.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GAMES = "arith_proposer,arith_solver"


def configure(trainer: str, options: dict, learner: str):
    """(trainer class, its config); the trainer's own checks run before any model loads."""
    from playpen.training.catalog import trainer_class
    cls = trainer_class(trainer)
    unknown = sorted(set(options) - set(cls.config_class.__dataclass_fields__))
    if unknown:
        raise SystemExit(f"hierarchical.py: {trainer} has no option(s) {unknown}")
    config = cls.config_class(**options)
    cls.check(config, learner, None)
    return cls, config


def train(trainer: str, options: dict, args, records: Path) -> float:
    from playpen.models import load_model_by_name
    cls, config = configure(trainer, options, args.learner)
    learner = load_model_by_name(args.learner, gen_args=dict(temperature=args.temperature, max_tokens=args.max_tokens),
                                 role="learner")
    started = time.time()
    cls(learner, None, config=config, output_dir=records, seed=args.seed).learn(None)
    return time.time() - started


def last_checkpoint(run_dir: Path) -> Path | None:
    done = [p for p in run_dir.glob("checkpoint-*") if (p / "trainer_state.json").exists()]
    return max(done, key=lambda p: int(p.name.split("-")[1])) if done else None


def proposals(records: Path) -> list[dict]:
    """Every proposer episode of the run's records: its step (policy version), problem,
    validity, difficulty, reward and its solvers' outcomes."""
    out = []
    for meta_file in sorted(records.glob("**/arith_proposer/*/instance_*/episode.json")):
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        interactions_file = meta_file.parent / "interactions.json"
        logged = json.loads(interactions_file.read_text(encoding="utf-8")) if interactions_file.exists() else {}
        hierarchy = meta.get("hierarchy", {})
        valid = logged.get("Panel Solve Rate") is not None
        children = [c["outcome"] for c in hierarchy.get("children") or []]
        usable = [c for c in children if c != "error"]
        out.append({"step": hierarchy.get("policy_version", 0), "problem": logged.get("Problem"), "valid": valid,
                    "difficulty": logged.get("Difficulty"), "reward": next(iter(meta["rewards"].values()), None),
                    "solve_rate": (sum(c == "success" for c in usable) / len(usable)) if valid and usable else None,
                    "end_reason": logged.get("End Reason")})
    return out


def mean(values) -> float | None:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(values) / len(values) if values else None


def report(run_dir: Path, records: Path, results: Path, facts: dict) -> dict:
    from playpen.training.common.plotting import read_log
    log = read_log(run_dir)  # one record per optimizer step
    curves = [{k: v for k, v in row.items() if k == "step" or k.startswith(("reward/", "advantage/", "hierarchy/",
                                                                          "store/", "offpolicy/"))}
              for row in log]
    played = proposals(records)
    per_step = []
    for step in sorted({p["step"] for p in played}):
        rows = [p for p in played if p["step"] == step]
        valid = [p for p in rows if p["valid"]]
        per_step.append({"step": step, "proposals": len(rows), "valid_share": len(valid) / len(rows),
                         "difficulty": mean(p["difficulty"] for p in valid),
                         "solve_rate": mean(p["solve_rate"] for p in valid),
                         "proposer_reward": mean(p["reward"] for p in rows),
                         "examples": [p["problem"] for p in valid][:4]})
    summary = {"facts": facts, "curves": curves, "proposer_by_step": per_step,
               "first_step": per_step[0] if per_step else None, "last_step": per_step[-1] if per_step else None}
    results.mkdir(parents=True, exist_ok=True)
    from playpen.files import write_json
    write_json(results / "hierarchical.json", summary, indent=1)
    plot(curves, per_step, results / "hierarchical.png")
    return summary


def plot(curves: list[dict], per_step: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    keys = sorted({k for row in curves for k in row  # reward/<level>/<role>/mean
                   if k.startswith("reward/") and k.endswith("/mean") and k.split("/")[1].isdigit()})
    for key in keys:
        points = [(row["step"], row[key]) for row in curves if key in row]
        left.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=key[len("reward/"):-len("/mean")])
    left.set(title="reward per level/role", xlabel="step")
    left.legend()
    for key, label in (("valid_share", "valid problems"), ("solve_rate", "solvers' solve rate")):
        points = [(row["step"], row[key]) for row in per_step if row[key] is not None]
        right.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    right.set(title="proposer (from the records)", xlabel="policy version (step)", ylim=(-0.05, 1.05))
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learner", default="smol-135m")
    parser.add_argument("--steps", type=int, default=30, help="hierarchical GRPO steps")
    parser.add_argument("--warmup-steps", type=int, default=16, help="SFT warm-up steps (0: none)")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "playpen-records" / "benchmarks",
                        help="work folder (adapters, records)")
    parser.add_argument("--results", type=Path, default=None, help="report folder (default: benchmarks/results, "
                                                                  "with --quick: <out>)")
    parser.add_argument("--quick", action="store_true", help="tiny budgets: checks the plumbing only")
    parser.add_argument("--report", action="store_true", help="rebuild the report from the last run's files")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.warmup_steps, args.num_generations, args.max_tokens = 2, 1, 2, 16
    work = args.out / "hierarchical"
    results = args.results or (work if args.quick else REPO_ROOT / "benchmarks" / "results")
    run_dir = work / "models" / "grpo" / "hierarchical-grpo+lora" / args.learner / "self"
    records = work / "records" / "grpo"
    facts = {"learner": args.learner, "steps": args.steps, "warmup_steps": args.warmup_steps,
             "num_generations": args.num_generations, "max_tokens": args.max_tokens, "quick": args.quick}
    if not args.report:
        # the report reads every proposer episode under records/: an earlier run's must not mix in
        import shutil
        shutil.rmtree(work / "records", ignore_errors=True)
        adapter = None
        if args.warmup_steps:
            facts["warmup_seconds"] = round(train("sft", dict(
                games=GAMES, max_steps=args.warmup_steps, save_steps=args.warmup_steps, batch_size=4,
                demo_max_instances=2 if args.quick else 0, models_dir=str(work / "models" / "sft"), overwrite=True,
                evaluate=False), args, work / "records" / "sft"), 1)
            adapter = last_checkpoint(work / "models" / "sft" / "sft+lora" / args.learner)
        options = dict(games=GAMES, max_steps=args.steps, save_steps=max(1, args.steps // 3),
                       num_generations=args.num_generations, models_dir=str(work / "models" / "grpo"),
                       overwrite=True, evaluate=not args.quick, eval_max_instances=2 if args.quick else 5,
                       init_adapter=str(adapter) if adapter else "")
        facts["grpo_seconds"] = round(train("hierarchical-grpo", options, args, records), 1)
    summary = report(run_dir, records, results, facts)
    first, last = summary["first_step"], summary["last_step"]
    print(json.dumps({"facts": facts, "first_step": first, "last_step": last}, indent=1))
    print(f"report: {results / 'hierarchical.json'}  plot: {results / 'hierarchical.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
