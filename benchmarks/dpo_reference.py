"""playpen's DPO against TRL's stock ``DPOTrainer`` on arith_solver (issue 39): the same start
adapter, pairs, token ids, beta, loss, learning rate, batch, steps, LoRA and reference (the start
adapter); greedy accuracy on freshly generated held-out problems.

    python benchmarks/dpo_reference.py --start-from benchmarks/results/grpo-reference-work  # seed 1, ~30 CPU-min
    python benchmarks/dpo_reference.py --k 2 --steps 2 --problems 16 --out /tmp/dr           # plumbing

1. the start: grpo_reference.py's 16-step SFT-LoRA (``harness.start_adapter``), trained into
   ``--out``, or read from that script's work folder (``--start-from``; never written to);
2. the pairs, made once: the start samples ``--k`` answers (T 1.0, <= 16 tokens) to each of the
   game's training problems; a problem with a right and a wrong answer gives up to
   ``--pairs-per-problem`` pairs (a right answer chosen, a wrong or unparsable one rejected: distinct
   answers), ``--pairs`` of them drawn; written to ``seed-S/pairs.jsonl``, the file
   ``playpen run dpo --source pairs`` reads;
3. playpen: the ``dpo`` trainer (``--source pairs --init-adapter START``) through its config class
   and ``learn()``, as ``playpen run`` calls it;
4. stock TRL: ``DPOTrainer`` on the same pairs as text (the prompt rendered by the chat template
   with its generation prompt, the answer; TRL appends EOS and tokenises), in the order playpen's
   dataset has them, the start adapter trainable with ``ref_model=None`` (TRL copies it as the
   frozen reference, as in playpen's run); its token ids are checked equal to playpen's, row by row;
5. both: greedy right or wrong per held-out problem (``--problems``, the game's generator from a
   seed no training set uses) for the start and each arm's last checkpoint; playpen - stock per
   problem, its mean and the two one-sided tests (TOST, +-5 points), and each arm against the start
   (exact sign-flip test), written to ``results/dpo-reference-<date>.json`` (smaller runs:
   ``--out``'s ``summary.json``). Every stage is cached in ``--out/seed-S``.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

# the benchmarks' shared module, beside this script: arith_solver's prompt, reward, problems, start and tests
from harness import (ARITH_MAX_TOKENS, correct, held_out_problems, percent, reward_of, solver_prompt, start_adapter,
                     start_path, tost_p, train_problems)

HERE = Path(__file__).resolve().parent
COMMON = dict(beta=0.1, loss_type="sigmoid", learning_rate=2e-4, batch_size=4, max_length=1024, temperature=1.0,
              max_tokens=ARITH_MAX_TOKENS)
FULL = dict(k=16, pairs=128, steps=32, problems=300)
MARGIN = 5.0  # points: the equivalence margin of the two one-sided tests
# CPU-seconds on one niced thread of the 2-core vm under a load of ~3.5, smol-135m (the quick mode of
# 2026-11-29: 480 answers in 152 s, steps of 4 pairs in 8.2 s playpen / 18.5 s stock, 32 problems in 15 s)
COST = dict(answer=0.3, playpen_pair=2.05, stock_pair=4.6, problem=0.35, load=10.0)


def estimate_minutes(args) -> float:
    """The run's minutes on this machine from the measured costs (training the start not included)."""
    pairs = args.steps * COMMON["batch_size"]
    seconds = (len(train_problems()) * args.k * COST["answer"] + pairs * (COST["playpen_pair"] + COST["stock_pair"])
               + 3 * args.problems * COST["problem"] + 6 * COST["load"])
    return seconds / 60


# ----------------------------------------------------------------------------- the pairs

def sample_answers(args, start: Path, seed: int) -> list[dict]:
    """``--k`` answers of the start to each training problem (playpen's engine, rows of one prompt
    sharing its prefill), each with the game's reward."""
    from playpen.inference import SamplingConfig, generate
    from playpen.models import load_model_by_name
    from playpen.rollouts.chat import prompt_ids, template_kwargs_of
    from transformers import set_seed
    learner = load_model_by_name(args.learner, role="learner", adapter=start,
                                 gen_args=dict(temperature=COMMON["temperature"], max_tokens=COMMON["max_tokens"]))
    learner.model.eval()
    problems = train_problems()
    prompts = [prompt_ids(learner.tokenizer, [{"role": "user", "content": solver_prompt(p)}],
                          template_kwargs_of(learner)) for p in problems]
    set_seed(seed)
    sampling = SamplingConfig(temperature=COMMON["temperature"], max_new_tokens=COMMON["max_tokens"], max_batch_size=64)
    replies = generate(learner.model, learner.tokenizer, [p for p in prompts for _ in range(args.k)], sampling)
    rows = [{"problem": p, "reply": r.text.strip()} for p, r in zip([p for p in problems for _ in range(args.k)],
                                                                   replies)]
    return [{**row, "reward": reward_of(row["reply"], row["problem"])} for row in rows]


def make_pairs(samples: list[dict], per_problem: int, total: int, seed: int) -> list:
    """Per problem, `per_problem` of the pairs (a distinct right answer, a distinct wrong or
    unparsable one), drawn at random (the start rarely gives two different right answers: most
    of a problem's pairs share the chosen one); `total` of them drawn, kept in problem order."""
    from playpen.pairs import PreferencePair
    rng = random.Random(seed)
    answers: dict[str, dict[bool, list[str]]] = {}
    for s in samples:
        sides = answers.setdefault(s["problem"], {True: [], False: []})
        if s["reply"] not in sides[s["reward"] == 1.0]:
            sides[s["reward"] == 1.0].append(s["reply"])
    pairs = []
    for problem, sides in answers.items():
        combinations = [(right, wrong) for right in sides[True] for wrong in sides[False]]
        for chosen, rejected in rng.sample(combinations, min(per_problem, len(combinations))):
            pairs.append(PreferencePair(({"role": "user", "content": solver_prompt(problem)},), chosen, rejected,
                                        {"game": "arith_solver", "problem": problem, "source": "dpo_reference"}))
    if len(pairs) > total:
        pairs = [pairs[i] for i in sorted(rng.sample(range(len(pairs)), total))]
    return pairs


def pairs_of(args, start: Path, seed: int) -> Path:
    """The seed's pairs file, made once (the answers sampled beside it, in ``samples.jsonl``)."""
    from playpen.pairs import write_pairs
    target = Path(args.out) / f"seed-{seed}" / "pairs.jsonl"
    if not target.exists():
        samples = sample_answers(args, start, seed)
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
        pairs = make_pairs(samples, args.pairs_per_problem, args.pairs, seed)
        right = sum(s["reward"] == 1.0 for s in samples)
        print(f"seed {seed}: {right} of {len(samples)} sampled answers right; {len(pairs)} pairs", flush=True)
        if not pairs:
            raise SystemExit(f"dpo_reference.py: no training problem got a right and a wrong answer in {args.k} "
                             f"samples; raise --k")
        write_pairs(pairs, target)
    return target


# ----------------------------------------------------------------------------- the two arms

def run_playpen(args, seed: int, start: Path, pairs_file: Path) -> tuple[Path, list]:
    from playpen.models import load_model_by_name
    from playpen.training import catalog
    from transformers import set_seed
    work = Path(args.out) / f"seed-{seed}"
    run_dir = work / "models" / "dpo+lora" / args.learner / "pairs"
    if not (run_dir / f"checkpoint-{args.steps}").exists():
        cls = catalog.trainer_class("dpo")
        config = cls.config_class(
            games="arith_solver", source="pairs", pairs_file=str(pairs_file), init_adapter=str(start),
            max_steps=args.steps, save_steps=args.steps, batch_size=COMMON["batch_size"],
            learning_rate=COMMON["learning_rate"], beta=COMMON["beta"], loss_type=COMMON["loss_type"],
            max_length=COMMON["max_length"], models_dir=str(work / "models"), evaluate=False)
        cls.check(config, args.learner)
        set_seed(seed)
        learner = load_model_by_name(args.learner, role="learner", gen_args=dict(temperature=0.0,
                                                                                max_tokens=COMMON["max_tokens"]))
        cls(learner, config=config, output_dir=work / "records", seed=seed, progress=True).learn(None)
    log = [json.loads(line) for line in (run_dir / "playpen-log.jsonl").read_text().splitlines()]
    return run_dir, [r.get("train/loss", r.get("loss")) for r in log if r.get("event") == "train_step"]


def playpen_rows(pairs: list, tokenizer, template_kwargs: dict, seed: int) -> tuple[list[int], list[dict]]:
    """The order playpen's DPO trains the pairs in (its round-1 dataset, shuffled with seed + 1)
    and that dataset's token-id rows, from playpen's own function."""
    from playpen.training.preference.rounds import pair_dataset
    rows = pair_dataset(pairs, tokenizer, max_length=COMMON["max_length"], template_kwargs=template_kwargs,
                        seed=seed + 1).to_list()
    order = list(range(len(pairs)))
    random.Random(seed + 1).shuffle(order)  # pair_dataset's shuffle: a permutation of that length and seed
    return order, rows


def run_stock(args, seed: int, start: Path, pairs_file: Path) -> tuple[Path, list]:
    from datasets import Dataset
    from peft import PeftModel
    from playpen.inference.transformers_compat import checkpointing_args
    from playpen.models import load_model_by_name
    from playpen.pairs import read_pairs
    from playpen.rollouts.chat import template_kwargs_of
    from transformers import set_seed
    from trl import DPOConfig, DPOTrainer
    run_dir = Path(args.out) / f"seed-{seed}" / "stock"
    if not (run_dir / f"checkpoint-{args.steps}").exists():
        set_seed(seed)
        base = load_model_by_name(args.learner, role="learner")
        tokenizer, template_kwargs = base.tokenizer, template_kwargs_of(base)
        pairs = read_pairs(pairs_file)
        order, expected = playpen_rows(pairs, tokenizer, template_kwargs, seed)
        ordered = [pairs[i] for i in order]
        dataset = Dataset.from_dict({
            "prompt": [tokenizer.apply_chat_template(list(p.prompt), add_generation_prompt=True, tokenize=False,
                                                     **template_kwargs) for p in ordered],
            "chosen": [p.chosen for p in ordered], "rejected": [p.rejected for p in ordered]})
        model = PeftModel.from_pretrained(base.model, str(start), is_trainable=True)
        config = DPOConfig(
            output_dir=str(run_dir), max_steps=args.steps, learning_rate=COMMON["learning_rate"], beta=COMMON["beta"],
            loss_type=[COMMON["loss_type"]], max_length=COMMON["max_length"], lr_scheduler_type="constant",
            per_device_train_batch_size=COMMON["batch_size"], gradient_accumulation_steps=1,
            **checkpointing_args(False),  # the same gradients in fewer passes (playpen's shared prompts have none)
            logging_steps=1, save_strategy="steps", save_steps=args.steps, report_to="none", seed=seed,
            dataloader_num_workers=0, bf16=False, fp16=False, use_cpu=True, disable_tqdm=False)
        trainer = DPOTrainer(model=model, ref_model=None, args=config, train_dataset=dataset,
                             processing_class=tokenizer)
        check_same_ids(trainer.train_dataset, expected)
        trainer.train()
        (run_dir / "log.json").write_text(json.dumps(trainer.state.log_history))
    log = json.loads((run_dir / "log.json").read_text())
    return run_dir, [r["loss"] for r in log if "loss" in r]


def check_same_ids(stock_dataset, expected: list[dict]) -> None:
    """TRL's own tokenisation of the text pairs gives playpen's token ids, row by row, in order."""
    keys = ("prompt_ids", "chosen_ids", "rejected_ids")
    got = [{k: list(row[k]) for k in keys} for row in stock_dataset]
    if len(got) != len(expected):
        raise RuntimeError(f"stock DPOTrainer kept {len(got)} pairs, playpen {len(expected)}")
    for i, (mine, theirs) in enumerate(zip(expected, got)):
        for k in keys:
            if list(mine[k]) != theirs[k]:
                raise RuntimeError(f"pair {i}: {k} differ: playpen {mine[k]} vs stock TRL {theirs[k]}")
    print(f"the stock trainer's token ids equal playpen's for all {len(got)} pairs", flush=True)


# ----------------------------------------------------------------------------- the comparison

def compare(first: list[int], second: list[int]) -> dict:
    """first - second per problem, in points: the mean, the exact sign-flip test and the TOST."""
    from playpen.evaluation.statistics import sign_flip_test
    differences = [100.0 * (a - b) for a, b in zip(first, second)]
    return {"mean_points": sum(differences) / len(differences),
            "sign_flip_p": sign_flip_test(differences).p_value,
            f"tost_p_{MARGIN:g}_points": tost_p(differences, MARGIN),
            "better": sum(d > 0 for d in differences), "worse": sum(d < 0 for d in differences)}


def start_of(args, seed: int, parser) -> Path:
    if not args.start_from:
        return start_adapter(args, seed)
    found = start_path(args.start_from, args.learner, args.sft_steps, seed)
    if not (found / "adapter_config.json").is_file():
        parser.error(f"--start-from {args.start_from}: no start adapter of seed {seed} at {found}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--k", type=int, default=FULL["k"], help="answers sampled per training problem")
    parser.add_argument("--pairs", type=int, default=FULL["pairs"], help="pairs drawn (at most)")
    parser.add_argument("--pairs-per-problem", type=int, default=4)
    parser.add_argument("--steps", type=int, default=FULL["steps"], help=f"DPO steps of {COMMON['batch_size']} pairs")
    parser.add_argument("--sft-steps", type=int, default=16)
    parser.add_argument("--problems", type=int, default=FULL["problems"], help="held-out problems")
    parser.add_argument("--out", default=str(HERE / "results" / "dpo-reference-work"))
    parser.add_argument("--start-from", default="", help="a grpo_reference.py work folder holding the seed's start")
    args = parser.parse_args(argv)
    if min(args.k, args.pairs, args.pairs_per_problem, args.steps, args.problems) < 1:
        parser.error("--k, --pairs, --pairs-per-problem, --steps and --problems must be >= 1")
    seed, began = args.seed, time.time()
    start = start_of(args, seed, parser)
    print(f"estimate: ~{estimate_minutes(args):.0f} minutes on one thread of the loaded 2-core vm"
          f"{'' if args.start_from else ' (and the SFT start, if not yet trained: ~15)'}", flush=True)
    problems = held_out_problems(args.problems)
    cache = Path(args.out) / f"seed-{seed}" / "result.json"
    if cache.exists():
        row = json.loads(cache.read_text())
    else:
        clock = time.time()
        pairs_file = pairs_of(args, start, seed)
        row = {"pairs": sum(1 for _ in pairs_file.open()), "start": str(start),
               "seconds": {"pairs": round(time.time() - clock, 1)}, "correct": {}, "loss": {}}
        clock = time.time()
        row["correct"]["start"] = correct(args.learner, start, problems)
        row["seconds"]["eval start"], clock = round(time.time() - clock, 1), time.time()
        for arm, run in (("playpen", run_playpen), ("stock", run_stock)):
            run_dir, row["loss"][arm] = run(args, seed, start, pairs_file)
            row["seconds"][arm], clock = round(time.time() - clock, 1), time.time()
            row["correct"][arm] = correct(args.learner, run_dir / f"checkpoint-{args.steps}", problems)
            row["seconds"][f"eval {arm}"], clock = round(time.time() - clock, 1), time.time()
            print(f"seed {seed} {arm}: {percent(row['correct'][arm]):.1f} % "
                  f"(start {percent(row['correct']['start']):.1f} %)", flush=True)
        cache.write_text(json.dumps(row, indent=1))
    right = row["correct"]
    summary = {"date": time.strftime("%Y-%m-%d"), "learner": args.learner, "seed": seed,
               "settings": {**COMMON, "k": args.k, "pairs_per_problem": args.pairs_per_problem, "steps": args.steps,
                            "sft_steps": args.sft_steps},
               "start_adapter": row["start"], "pairs": row["pairs"], "problems": args.problems,
               "accuracy": {arm: percent(items) for arm, items in right.items()},
               "playpen_minus_stock": compare(right["playpen"], right["stock"]),
               "playpen_minus_start": compare(right["playpen"], right["start"]),
               "stock_minus_start": compare(right["stock"], right["start"]),
               "loss": row["loss"], "loss_max_difference": max(abs(a - b) for a, b in zip(*row["loss"].values())),
               "correct": right, "seconds": row["seconds"], "seconds_this_call": round(time.time() - began, 1)}
    quick = any(getattr(args, name) < FULL[name] for name in FULL)
    target = Path(args.out) / "summary.json" if quick else HERE / "results" / f"dpo-reference-{time.strftime('%Y%m%d')}.json"
    target.write_text(json.dumps(summary, indent=1))
    versus = summary["playpen_minus_stock"]
    print(f"playpen - stock: {versus['mean_points']:+.1f} points; TOST p (+-{MARGIN:g} points) "
          f"{versus[f'tost_p_{MARGIN:g}_points']:.3f}; sign-flip p {versus['sign_flip_p']:.3f} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
