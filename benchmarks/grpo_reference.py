"""playpen's GRPO against TRL's stock ``GRPOTrainer`` on arith_solver (issue 39): the same start
adapter, prompts, reward, group size, prompts per step, learning rate, beta, LoRA, temperature,
loss type and advantage scaling; greedy accuracy on freshly generated held-out problems.

    python benchmarks/grpo_reference.py --seeds 1,2,3                 # smol-135m, 60 steps each
    python benchmarks/grpo_reference.py --seeds 1 --steps 4 --eval-every 2 --problems 16 --out /tmp/gr  # plumbing

1. the start: SFT-LoRA on the programmatic solver's won arith_solver training episodes
   (``--sft-steps``), shared by both arms of a seed;
2. playpen: ``playpen run grpo --games arith_solver`` from it (the game's own master renders the
   prompt and scores the reply; reward: outcome, i.e. 1 right, 0 wrong, -1 unparsable);
3. stock TRL: ``GRPOTrainer`` on the same problems as conversational prompts rendered from the
   game's own template, a reward function of the same three values (the game's own parser);
4. both: the adapter at steps 0 / ``--eval-every`` / ... greedy on ``--problems`` problems drawn
   with the game's own generator from a seed no training set uses; accuracy per checkpoint and
   the reward curve per step, cached per seed in ``--out``; the summary with the two one-sided
   tests (TOST, +-5 points, on per-problem differences averaged over seeds) at the last step is
   written to
   ``results/grpo-reference-<date>.json``.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

# the benchmarks' shared module, beside this script: arith_solver's prompt, reward, problems, start and tests
from harness import (ARITH_MAX_TOKENS, ARITH_TRAIN as TRAIN, correct, held_out_problems, percent, reward_of,
                     solver_prompt, start_adapter, train_problems, tost_p)

HERE = Path(__file__).resolve().parent

COMMON = dict(num_generations=8, learning_rate=2e-5, beta=0.02, loss_type="dapo", scale_rewards="group",
              epsilon=0.2, temperature=1.0, max_tokens=ARITH_MAX_TOKENS, prompts_per_step=2)


def run_playpen(args, seed: int, start: Path) -> tuple[Path, list]:
    from playpen.models import load_model_by_name
    from playpen.training import catalog
    from transformers import set_seed
    models = Path(args.out) / f"seed-{seed}" / "models"
    run_dir = models / "grpo+lora" / args.learner / "selfplay"
    if not (run_dir / f"checkpoint-{args.steps}").exists():
        from playpen.training.common.checkpoints import latest_checkpoint
        set_seed(seed)
        cls = catalog.trainer_class("grpo")
        config = cls.config_class(
            games="arith_solver", train_instances=TRAIN, init_adapter=str(start), max_steps=args.steps, save_steps=args.eval_every,
            save_total_limit=100, num_generations=COMMON["num_generations"],
            groups_per_step=COMMON["prompts_per_step"], learning_rate=COMMON["learning_rate"], beta=COMMON["beta"],
            loss_type=COMMON["loss_type"], scale_rewards=COMMON["scale_rewards"], epsilon=COMMON["epsilon"],
            reward="outcome", models_dir=str(models), evaluate=False,
            resume=latest_checkpoint(run_dir) is not None)  # a killed arm goes on from its last checkpoint
        learner = load_model_by_name(args.learner, role="learner", gen_args=dict(
            temperature=COMMON["temperature"], max_tokens=COMMON["max_tokens"]))
        cls(learner, config=config, seed=seed, progress=True).learn(None)
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    # by step, the last row of each: a resumed arm logs again the steps after its checkpoint
    steps = {r["step"]: r for r in log if r.get("event") == "train_step"}
    curve = [steps[step].get("rollout/reward_mean") for step in sorted(steps)]
    return run_dir, curve


def run_stock(args, seed: int, start: Path) -> tuple[Path, list]:
    from datasets import Dataset
    from peft import PeftModel
    from playpen.models import load_model_by_name
    from playpen.peft_internals import set_lora_dropout
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer
    run_dir = Path(args.out) / f"seed-{seed}" / "stock"
    if not (run_dir / f"checkpoint-{args.steps}").exists():
        set_seed(seed)
        base = load_model_by_name(args.learner, role="learner")
        model = PeftModel.from_pretrained(base.model, str(start), is_trainable=True)
        set_lora_dropout(model, 0.0)  # as playpen's GRPO does: the trained policy is the one that sampled
        problems = train_problems()
        random.Random(seed).shuffle(problems)
        rows = (problems * (1 + args.steps * COMMON["prompts_per_step"] // len(problems)))
        rows = rows[:args.steps * COMMON["prompts_per_step"]]
        dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": solver_prompt(p)}] for p in rows],
                                     "problem": rows})

        def game_reward(completions, problem, **kwargs):
            return [reward_of(c[0]["content"] if isinstance(c, list) else c, p) for c, p in zip(completions, problem)]

        group = COMMON["num_generations"]
        config = GRPOConfig(
            output_dir=str(run_dir), max_steps=args.steps, learning_rate=COMMON["learning_rate"], beta=COMMON["beta"],
            num_generations=group, per_device_train_batch_size=group * COMMON["prompts_per_step"],
            gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1, temperature=COMMON["temperature"],
            max_completion_length=COMMON["max_tokens"], loss_type=COMMON["loss_type"],
            scale_rewards=COMMON["scale_rewards"], epsilon=COMMON["epsilon"], shuffle_dataset=False, logging_steps=1,
            save_strategy="steps", save_steps=args.eval_every, report_to="none", seed=seed, use_cpu=True,
            bf16=False, fp16=False,  # TRL's configs default to bf16 autocast; playpen's GRPO trains in fp32 on a CPU
            disable_tqdm=False)
        trainer = GRPOTrainer(model=model, reward_funcs=[game_reward], args=config, train_dataset=dataset,
                              processing_class=base.tokenizer)
        # a killed arm goes on from its last complete checkpoint, as the playpen arm does
        from playpen.training.common.checkpoints import latest_checkpoint
        last = latest_checkpoint(run_dir)
        trainer.train(resume_from_checkpoint=str(last) if last else None)
        (run_dir / "log.json").write_text(json.dumps(trainer.state.log_history))
    log = json.loads((run_dir / "log.json").read_text())
    return run_dir, [r.get("reward") for r in log if "reward" in r]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--sft-steps", type=int, default=16)
    parser.add_argument("--problems", type=int, default=300)
    parser.add_argument("--out", default=str(HERE / "results" / "grpo-reference-work"))
    args = parser.parse_args(argv)
    problems = held_out_problems(args.problems)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    began = time.time()
    results = {}
    for seed in seeds:
        cache = Path(args.out) / f"seed-{seed}" / "result.json"
        if cache.exists():
            results[seed] = json.loads(cache.read_text())
            continue
        start = start_adapter(args, seed)
        evaluated = Path(args.out) / f"seed-{seed}" / "correct"  # each checkpoint's answers, kept for a rerun
        row = {"step-0": correct(args.learner, start, problems, evaluated / "step-0.json")}
        for arm, run in (("playpen", run_playpen), ("stock", run_stock)):
            run_dir, curve = run(args, seed, start)
            row[arm] = {"reward_curve": curve, "correct": {
                str(step): correct(args.learner, run_dir / f"checkpoint-{step}", problems,
                                   evaluated / f"{arm}-{step}.json")
                for step in range(args.eval_every, args.steps + 1, args.eval_every)}}
            row[arm]["accuracy"] = {step: percent(items) for step, items in row[arm]["correct"].items()}
            print(f"seed {seed} {arm}: {row[arm]['accuracy']} (start {percent(row['step-0']):.1f})", flush=True)
        cache.write_text(json.dumps(row, indent=1))
        results[seed] = row
    last = str(args.steps)
    differences = [r["playpen"]["accuracy"][last] - r["stock"]["accuracy"][last] for r in results.values()]
    # per problem, averaged over seeds: playpen's minus stock's right answers, in points
    per_problem = [100.0 * sum(r["playpen"]["correct"][last][i] - r["stock"]["correct"][last][i]
                               for r in results.values()) / len(results) for i in range(len(problems))]
    summary = {"date": time.strftime("%Y-%m-%d"), "learner": args.learner, "settings": COMMON, "steps": args.steps,
               "problems": args.problems, "seeds": results, "difference_at_last_step": differences,
               "tost_p_5_points": tost_p(per_problem, 5.0),
               "start": {seed: percent(r["step-0"]) for seed, r in results.items()},
               "seconds": round(time.time() - began, 1)}
    quick = args.problems < 300 or args.steps < 60
    # a run of some seeds never replaces an earlier summary: the file is named by the time it ends
    target = Path(args.out) / "summary.json" if quick else HERE / "results" / f"grpo-reference-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(summary, indent=1))
    print(f"playpen - stock at step {last}: {differences}; TOST p (+-5 points) {summary['tost_p_5_points']:.3f} "
          f"-> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
