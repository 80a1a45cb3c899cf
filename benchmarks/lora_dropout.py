"""What LoRA dropout costs a training step on a CPU: the same forward + backward with
LoRA dropout 0.05 (the SFT trainers' default) and 0 (the GRPO trainers' default).

    python benchmarks/lora_dropout.py [--batch 8] [--length 330] [--rounds 3]

One process, smol-135m (fp32), LoRA r=16 on all linear layers, the shape of a GRPO
step on referencegame (``--batch`` trajectories of ``--length`` tokens, loss on the last
41 positions). Both variants are warmed up, then measured alternately ``--rounds``
times; prints the median seconds per step of each and their ratio, and writes
benchmarks/results/lora-dropout-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import datetime
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=330)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from playpen.default_model import DEFAULT_MODEL, prepare_default_model

    folder = prepare_default_model()
    models = {}
    for dropout in (0.05, 0.0):
        base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=dropout,
                                                target_modules="all-linear", task_type="CAUSAL_LM"))
        model.train()
        models[dropout] = model
    generator = torch.Generator().manual_seed(0)

    def step(model) -> tuple[float, float]:
        ids = torch.randint(100, 20000, (args.batch, args.length), generator=generator)
        started = time.perf_counter()
        out = model(input_ids=ids, logits_to_keep=41)
        forward = time.perf_counter() - started
        torch.log_softmax(out.logits, -1).mean().backward()
        model.zero_grad(set_to_none=True)
        return forward, time.perf_counter() - started - forward

    for _ in range(args.warmup):
        for model in models.values():
            step(model)
    times: dict[float, list[tuple[float, float]]] = {d: [] for d in models}
    for round_ in range(args.rounds):
        for dropout, model in models.items():
            times[dropout].append(step(model))
            fwd, bwd = times[dropout][-1]
            print(f"round {round_ + 1}: dropout {dropout:<4} forward {fwd:6.1f} s  backward {bwd:6.1f} s", flush=True)
    summary = {}
    for dropout, runs in times.items():
        summary[str(dropout)] = dict(forward_s=round(statistics.median(f for f, _ in runs), 2),
                                     backward_s=round(statistics.median(b for _, b in runs), 2),
                                     step_s=round(statistics.median(f + b for f, b in runs), 2))
    ratio = summary["0.05"]["step_s"] / summary["0.0"]["step_s"]
    print(f"median step: dropout 0.05 {summary['0.05']['step_s']} s, dropout 0 {summary['0.0']['step_s']} s "
          f"-> ratio {ratio:.2f}")
    report = dict(date=datetime.now().isoformat(timespec="seconds"), machine=platform.node(),
                  cpu_count=os.cpu_count(), torch=torch.__version__, torch_threads=torch.get_num_threads(),
                  model=DEFAULT_MODEL, batch=args.batch, length=args.length, rounds=args.rounds,
                  warmup=args.warmup, median=summary, ratio_dropout_over_none=round(ratio, 3))
    target = Path(__file__).resolve().parent / "results"
    target.mkdir(exist_ok=True)
    path = target / f"lora-dropout-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
