"""The engines side by side: playpen's engine, transformers' ``model.generate`` and vLLM, fp32
and bf16, on smol-135m, in one run.

    python benchmarks/engines.py                  # every variant; writes results/engines-<date>.json
    python benchmarks/engines.py --quick          # a smoke check (4 prompts, 2 episodes; nothing written)

Each variant runs in a process of its own (start-up time and peak memory are its own):

- single turn: a batch of ``--prompts`` (64) chat prompts, ``--max-new-tokens`` (64) sampled
  tokens each (T = 1.0, logprobs on), through ``playpen.inference.generate``;
- multi-turn: ``--episodes`` (64) episodes of the recall game (harness.py; ``--rounds`` learner
  turns each, every turn's prompt the whole history), ``playpen.rollouts.rollout`` with all
  episodes in flight; playpen's engine keeps each conversation's KV cache, vLLM reuses it
  through its prefix cache, ``model.generate`` prefills every turn whole.

tok/s = generated tokens / wall seconds of the workload; start-up = seconds from the process's
start to the first generated token (model load, engine build: vLLM's engine core and its
warm-up); peak RSS = the process's and its children's (vLLM's engine core) peak resident memory.

GRPO steps (``--grpo-steps N``, variants ``grpo-*``): ``playpen run grpo-teacher`` on smol-135m as
the taboo guesser beside the programmatic describer (groups of 8, 2 a step, ``-T 1.0``, ``-L 24``,
no evaluation) with playpen's engine, with vLLM at its default dtype (bf16 for sampled turns on
hardware with native bf16) and with vLLM in fp32; per step the rollout's and the whole step's
seconds from the run's log (the first step, which builds the engine, reported apart), peak RSS.

Agreement with the trainer: for the first 16 single-turn rows, the engine's log-probabilities
of its sampled tokens against those of the fp32 model a trainer holds (one forward pass,
``playpen.inference.logprobs``): the mean and largest absolute difference per token, and the
largest ratio exp(trainer - engine) that GRPO's truncated importance weight would cap. It
says whether a bf16 engine can sample for an fp32 trainer.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from harness import machine, write_recall_game  # the benchmarks' shared module, beside this script

STARTED = time.perf_counter()
VARIANTS = {  # name: (engine, dtype)
    "playpen-fp32": ("dynamic", "float32"), "playpen-bf16": ("dynamic", "bfloat16"),
    "generate-fp32": ("generate", "float32"),
    "vllm-fp32": ("vllm", "float32"), "vllm-bf16": ("vllm", "bfloat16"),
}
GRPO_VARIANTS = {  # name: (--engine, --engine-dtype)
    "grpo-playpen": ("auto", "auto"), "grpo-vllm": ("vllm", "auto"), "grpo-vllm-fp32": ("vllm", "float32"),
}


def run_grpo_variant(name: str, args) -> dict:
    """A short GRPO run with this variant's engine, in this process; its steps' times from its log."""
    from click.testing import CliRunner
    from playpen.cli import cli
    engine, dtype = GRPO_VARIANTS[name]
    work = Path(tempfile.mkdtemp(prefix="playpen-engines-grpo-"))
    os.chdir(work)
    result = CliRunner().invoke(cli, [
        "run", "grpo-teacher", "-l", "smol-135m", "-t", "programmatic", "-T", "1.0", "-L", "24", "--engine", engine,
        "--engine-dtype", dtype, "--games", "taboo", "--roles", "Guesser", "--num-generations", "8",
        "--groups-per-step", "2", "--max-steps", str(args.grpo_steps), "--save-steps", "1000", "--no-evaluate",
        "--stop-without-signal", "0", "--models-dir", str(work / "models"), "-o", str(work / "records")])
    if result.exit_code != 0:
        raise RuntimeError(f"{name}: exit {result.exit_code}: {result.output[-2000:]}")
    log = next(work.rglob("playpen-log.jsonl")).read_text().splitlines()
    steps = [r for r in map(json.loads, log) if r.get("event") == "train_step"]
    later = steps[1:] or steps
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
           + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024

    def mean(key):
        values = [float(r[key]) for r in later if r.get(key) is not None]
        return round(sum(values) / len(values), 2) if values else None
    return dict(variant=name, engine=engine, dtype=dtype, steps=len(steps),
                first_step_s=round(float(steps[0]["time/step_s"]), 1), step_s=mean("time/step_s"),
                rollout_s=mean("time/rollout_s"), logp_diff_mean=mean("sampling/sampling_logp_difference/mean"),
                ratio_max=mean("sampling/importance_sampling_ratio/max"), peak_rss_mb=round(rss))


def variant_sampling(name: str, max_new_tokens: int):
    """The variant's sampling settings (T = 1.0). vLLM computes in the variant's dtype: its
    ``auto`` would sample in bf16 on this CPU whatever the model's dtype (until 2026-11-29 09:00
    the vllm-fp32 row was bf16's)."""
    from playpen.rollouts import SamplingConfig
    engine, dtype = VARIANTS[name]
    return SamplingConfig(temperature=1.0, max_new_tokens=max_new_tokens,
                          engine="dynamic" if engine == "generate" else engine,
                          engine_dtype=dtype if engine == "vllm" else "auto")


def run_variant(name: str, args) -> dict:
    """One variant's numbers, in this process."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.default_model import prepare_default_model
    from playpen.inference import generate
    from playpen.inference.kvcache import KVCacheStore
    from playpen.rollouts import Learner, chat, rollout

    engine, dtype = VARIANTS[name]
    folder = prepare_default_model()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sampling = variant_sampling(name, args.max_new_tokens)

    def answer(prompts, budget_sampling):
        if engine == "generate":  # no store: the named fallback, transformers' model.generate
            return generate(model, tokenizer, prompts, budget_sampling)
        return generate(model, tokenizer, prompts, budget_sampling, cache=KVCacheStore(2**33),
                        conversations=list(range(len(prompts))))

    torch.manual_seed(0)
    answer([chat.prompt_ids(tokenizer, [{"role": "user", "content": "Hi"}])], variant_sampling(name, 1))
    startup = time.perf_counter() - STARTED
    prompts = [chat.prompt_ids(tokenizer, [{"role": "user", "content": f"Write a short story about {t}."}])
               for t in range(args.prompts)]
    began = time.perf_counter()
    single = answer(prompts, sampling)
    single_s = time.perf_counter() - began
    single_tokens = sum(len(g.token_ids) for g in single)
    agreement = trainer_agreement(folder, prompts[:16], single[:16], model if dtype == "float32" else None)

    games = Path(tempfile.mkdtemp(prefix="playpen-engines-"))
    game = str(write_recall_game(games, args.episodes, args.rounds))
    turn = variant_sampling(name, args.turn_tokens)
    began = time.perf_counter()
    result = rollout(game, Learner(model, tokenizer, name, turn), max_concurrent_episodes=args.episodes,
                     records_dir=None, kv_cache_mb=0 if engine == "generate" else 4096.0)
    multi_s = time.perf_counter() - began
    multi_tokens = result.stats.num_generated_tokens
    if engine == "vllm":
        from playpen.inference import vllm_engine
        vllm_engine.shutdown()
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
           + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return dict(variant=name, engine=engine, dtype=dtype, startup_s=round(startup, 1),
                single_tokens=single_tokens, single_s=round(single_s, 1),
                single_tok_s=round(single_tokens / single_s, 1),
                multi_episodes=len(result.episodes), multi_turns=result.stats.num_learner_turns,
                multi_tokens=multi_tokens, multi_s=round(multi_s, 1), multi_tok_s=round(multi_tokens / multi_s, 1),
                peak_rss_mb=round(rss), **agreement)


def trainer_agreement(folder, prompts, generations, fp32_model=None) -> dict:
    """The engine's sampled tokens' log-probabilities against the fp32 trainer's (T = 1)."""
    import math
    import torch
    from transformers import AutoModelForCausalLM
    from playpen.inference.logprobs import sequence_logprobs
    model = fp32_model or AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    diffs = []
    with torch.no_grad():
        for prompt, g in zip(prompts, generations):
            if not g.token_ids:
                continue
            ids = list(prompt) + list(g.token_ids)
            theirs = sequence_logprobs(model, ids, [0] * len(prompt) + [1] * len(g.token_ids)).tolist()
            diffs += [t - e for t, e in zip(theirs, g.logprobs)]
    if not diffs:
        return {}
    return dict(logprob_abs_diff_mean=round(sum(abs(d) for d in diffs) / len(diffs), 5),
                logprob_abs_diff_max=round(max(abs(d) for d in diffs), 4),
                trainer_engine_ratio_max=round(math.exp(max(diffs)), 3), agreement_tokens=len(diffs))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted({**VARIANTS, **GRPO_VARIANTS}),
                        help="run one variant here (the parent runs all)")
    parser.add_argument("--only", default=None, help="comma-separated variants [default: all]")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turn-tokens", type=int, default=24, help="most new tokens of a multi-turn turn")
    parser.add_argument("--grpo-steps", type=int, default=0,
                        help="also the grpo-* variants: GRPO runs of N steps per engine (0 = none)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.max_new_tokens, args.episodes, args.rounds, args.turn_tokens = 4, 8, 2, 2, 8
    if args.variant:
        run = run_grpo_variant if args.variant in GRPO_VARIANTS else run_variant
        print("RESULT " + json.dumps(run(args.variant, args)), flush=True)
        return
    names = args.only.split(",") if args.only else list(VARIANTS) + (list(GRPO_VARIANTS) if args.grpo_steps else [])
    rows = []
    for name in names:
        command = [sys.executable, __file__, "--variant", name, "--prompts", str(args.prompts),
                   "--max-new-tokens", str(args.max_new_tokens), "--episodes", str(args.episodes),
                   "--rounds", str(args.rounds), "--turn-tokens", str(args.turn_tokens),
                   "--grpo-steps", str(args.grpo_steps or 3)]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2"))
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{done.stderr[-3000:]}", flush=True)
            continue
        rows.append(json.loads(line[7:]))
        r = rows[-1]
        if name in GRPO_VARIANTS:
            print(f"{name:14} {r['steps']} steps: first {r['first_step_s']} s, then {r['step_s']} s a step "
                  f"(rollout {r['rollout_s']} s)  peak RSS {r['peak_rss_mb']} MB  logp diff {r['logp_diff_mean']}",
                  flush=True)
            continue
        print(f"{name:14} start {r['startup_s']:6.1f} s  single {r['single_tok_s']:6.1f} tok/s  "
              f"multi-turn {r['multi_tok_s']:6.1f} tok/s ({r['multi_turns']} turns)  peak RSS {r['peak_rss_mb']} MB  "
              f"|logp - trainer's| mean {r.get('logprob_abs_diff_mean')} max {r.get('logprob_abs_diff_max')}",
              flush=True)
    by = {r["variant"]: r for r in rows}
    ratios = {}
    for dtype in ("fp32", "bf16"):
        if f"vllm-{dtype}" in by and "playpen-fp32" in by:
            ratios[f"vllm-{dtype} / playpen-fp32, multi-turn"] = round(
                by[f"vllm-{dtype}"]["multi_tok_s"] / by["playpen-fp32"]["multi_tok_s"], 2)
    if "grpo-playpen" in by:
        for other in ("grpo-vllm", "grpo-vllm-fp32"):
            if other in by and by[other]["step_s"]:
                ratios[f"{other} / grpo-playpen, step time"] = round(
                    by[other]["step_s"] / by["grpo-playpen"]["step_s"], 2)
    for key, value in ratios.items():
        print(f"{key}: {value}x" + ("" if "step time" in key else " (target >= 1.5x)"))
    if not args.quick:
        out = Path(__file__).resolve().parent / "results" / f"engines-{datetime.now():%Y%m%d-%H%M%S}.json"
        out.write_text(json.dumps(dict(date=datetime.now().isoformat(timespec="seconds"), machine=machine(),
                                       settings=dict(prompts=args.prompts, max_new_tokens=args.max_new_tokens,
                                                     episodes=args.episodes, rounds=args.rounds,
                                                     turn_tokens=args.turn_tokens, temperature=1.0,
                                                     grpo_steps=args.grpo_steps),
                                       rows=rows, ratios=ratios), indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
