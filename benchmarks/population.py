"""Players as adapters: what 8 LoRA players on one base model cost against one.

    python benchmarks/population.py                 # smol-135m: 8 adapters, 16 turns of 48 tokens, 3 repeats
    python benchmarks/population.py --quick         # a smoke check: 4 adapters, 8 turns of 8 tokens, 1 repeat

Two measurements (issue 15's targets in brackets):

- **memory** [<= 1.2x]: the peak resident memory (Linux ``VmHWM``) of a process that loads
  smol-135m, adds N adapter players (LoRA r=16 on every linear layer, a population) and
  generates one batch spread over all of them, against the same with ONE adapter player.
  Each variant runs in a child process of its own, so each peak is its own.
- **speed** [>= 0.7x]: generated tokens/s of one batch of turns (chat prompts of
  different lengths, greedy) spread evenly over the N adapters in ONE ``generate``
  (peft's per-row ``adapter_names``), against the same batch on one adapter (the plain
  path: that adapter active, no per-row names; and, for reference, per-row names that all
  name it). The spread batch runs playpen's stacked mixed-adapter forward
  (``playpen.inference.mixed_lora``) and, for reference, peft's own mixed batch (one
  sub-batch per adapter in every LoRA layer). Fresh LoRA adapters (B = 0) generate the same tokens in every variant, so the
  ratio measures only the cost of mixing. Variants alternate, the median of the repeats counts.

Prints a table and writes benchmarks/results/population-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

TOPICS = ["the sea", "winter", "music", "a kitchen", "trees", "a city", "sports", "the sky", "school", "a farm",
          "travel", "books", "the body", "weather", "tools", "colours"]


def prompts_for(tokenizer, n: int) -> list[list[int]]:
    """n chat prompts of different lengths, as a game's turns would be."""
    from playpen.rollouts import chat
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        history = " ".join(f"Round {r}: name a word about {topic}." for r in range(1 + i % 4))
        out.append(chat.prompt_ids(tokenizer, [{"role": "user", "content": f"{history} Answer with one word."}]))
    return out


def population(num_adapters: int):
    """smol-135m with ``num_adapters`` fresh LoRA players ``player0..``."""
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from playpen.models import prepare_default_model
    from playpen.population import Population
    folder = prepare_default_model()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pop = Population(model, tokenizer, str(folder), LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    for i in range(num_adapters):
        pop.add_adapter(f"player{i}")
    pop.model.eval()
    return pop


def child_memory(num_adapters: int, batch: int, new_tokens: int) -> dict:
    """In a child process: build the population, generate one batch over all its adapters."""
    from playpen.rollouts import SamplingConfig
    from playpen.inference.engine import generate
    from playpen.training.common.memory import process_peak_rss_mb
    pop = population(num_adapters)
    names = [f"player{i % num_adapters}" for i in range(batch)]
    generate(pop.model, pop.tokenizer, prompts_for(pop.tokenizer, batch),
             SamplingConfig(temperature=0.0, max_new_tokens=new_tokens), adapter_names=names)
    return {"adapters": num_adapters, "peak_rss_mb": process_peak_rss_mb()}


def measure_memory(num_adapters: int, batch: int, new_tokens: int) -> dict:
    out = {}
    for n in (1, num_adapters):
        done = subprocess.run([sys.executable, __file__, "--child-memory", str(n), "--batch", str(batch),
                               "--new-tokens", str(new_tokens)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"the memory child with {n} adapter(s) failed:\n{done.stderr[-2000:]}")
        out[n] = json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"]
    return {"one_adapter_mb": out[1], "adapters_mb": out[num_adapters],
            "ratio": out[num_adapters] / out[1]}


def measure_speed(num_adapters: int, batch: int, new_tokens: int, repeats: int) -> dict:
    from playpen.rollouts import SamplingConfig
    from playpen.inference.engine import generate
    pop = population(num_adapters)
    prompts = prompts_for(pop.tokenizer, batch)
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=new_tokens, max_batch_size=batch)
    from playpen.inference import mixed_lora
    spread = [f"player{i % num_adapters}" for i in range(batch)]
    # name: (per-row adapter names, playpen's stacked mixed-adapter LoRA forward on)
    variants = {"one adapter (active)": (None, True), "one adapter (per-row names)": (["player0"] * batch, True),
                "spread over adapters": (spread, True), "spread, peft's mixed batch": (spread, False)}
    pop.model.set_adapter("player0")
    generate(pop.model, pop.tokenizer, prompts[:2], sampling)  # warm-up
    generate(pop.model, pop.tokenizer, prompts[:2], sampling, adapter_names=spread[:2])  # builds the stacks
    rates: dict[str, list[float]] = {k: [] for k in variants}
    tokens: dict[str, int] = {}
    for _ in range(repeats):
        for name, (names, stacked) in variants.items():
            mixed_lora.ENABLED = stacked
            started = time.perf_counter()
            gens = generate(pop.model, pop.tokenizer, prompts, sampling, share_prefix=False, adapter_names=names)
            elapsed = time.perf_counter() - started
            mixed_lora.ENABLED = True
            tokens[name] = sum(len(g.token_ids) for g in gens)
            rates[name].append(tokens[name] / elapsed)
    median = {k: statistics.median(v) for k, v in rates.items()}
    return {"tokens_per_s": median, "tokens": tokens, "all_rates": rates,
            "ratio": median["spread over adapters"] / median["one adapter (active)"],
            "ratio_vs_named": median["spread over adapters"] / median["one adapter (per-row names)"],
            "ratio_peft": median["spread, peft's mixed batch"] / median["one adapter (active)"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke check (4 adapters, 8 turns of 8 tokens)")
    parser.add_argument("--adapters", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child-memory", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_memory is not None:
        print(json.dumps(child_memory(args.child_memory, args.batch, args.new_tokens)))
        return 0
    if args.quick:
        args.adapters, args.batch, args.new_tokens, args.repeats = 4, 8, 8, 1
    if args.adapters < 2 or args.batch < args.adapters:
        parser.error("--adapters must be >= 2 and --batch >= --adapters")
    memory = measure_memory(args.adapters, args.batch, args.new_tokens)
    speed = measure_speed(args.adapters, args.batch, args.new_tokens, args.repeats)
    print(f"population on smol-135m: {args.adapters} adapters, {args.batch} turns x <= {args.new_tokens} tokens, "
          f"{args.repeats} repeat(s)")
    print(f"memory  peak RSS: 1 adapter {memory['one_adapter_mb']:.0f} MB, {args.adapters} adapters "
          f"{memory['adapters_mb']:.0f} MB -> ratio {memory['ratio']:.3f} (target <= 1.2)")
    for name, rate in speed["tokens_per_s"].items():
        print(f"speed   {name:<28} {rate:8.1f} tokens/s ({speed['tokens'][name]} tokens)")
    print(f"speed   spread / one adapter: {speed['ratio']:.3f} (target >= 0.7); "
          f"spread / per-row names: {speed['ratio_vs_named']:.3f}; peft's mixed batch / one adapter: "
          f"{speed['ratio_peft']:.3f}")
    result = {"benchmark": "population", "date": datetime.now().isoformat(timespec="seconds"),
              "quick": args.quick, "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "adapters": args.adapters, "batch": args.batch, "new_tokens": args.new_tokens, "repeats": args.repeats,
              "memory": memory, "speed": speed}
    out = Path(__file__).parent / "results" / f"population-{datetime.now():%Y%m%d-%H%M%S}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
