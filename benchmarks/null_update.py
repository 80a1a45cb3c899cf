"""The null update on the real model (issue 39): a trainer's whole path at learning rate 0 must
reproduce the adapter it started from, episode for episode.

    python benchmarks/null_update.py                      # smol-135m, the taboo guesser's 80 test items
    python benchmarks/null_update.py --max-items 8 -l tiny-random --out /tmp/null   # the plumbing

1. a start adapter: SFT-LoRA on the programmatic players' won taboo guesser episodes
   (``--sft-steps``; any adapter that plays differently from the base model will do);
2. expert iteration as the taboo guesser from it at learning rate 0 — the arm of the learning
   protocol that fell furthest below its start (-6.1): play a round with the programmatic
   describer, keep the won episodes, train on them (SFT at lr 0), save;
3. the start adapter and the saved checkpoint, each loaded from disk as ``playpen eval`` loads
   an adapter, play the protocol's taboo guesser test split greedily (the programmatic
   describer; ``benchmarks/protocol-splits.json``); every item's turns are compared.

Each stage is cached in the work folder (``--out``); the result (per-item scores of both,
the items whose episodes differ, whether the saved tensors equal the start's) is written to
``results/null-update-<date>.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPLITS = HERE / "protocol-splits.json"


def run_trainer(name: str, learner: str, teacher: str | None, temperature: float, max_tokens: int, seed: int,
                **options) -> None:
    from playpen.models import load_model_by_name
    from playpen.training import catalog
    from transformers import set_seed
    set_seed(seed)
    cls = catalog.trainer_class(name)
    model = load_model_by_name(learner, gen_args=dict(temperature=temperature, max_tokens=max_tokens),
                               role="learner")
    partner = load_model_by_name(teacher, role="teacher") if teacher else None
    config = cls.config_class(**options)
    cls.check(config, learner, teacher)
    cls(model, partner, config=config, seed=seed, progress=True).learn(None)


def guesser_episodes(learner: str, adapter: Path, label: str, items: list[str], work: Path,
                     max_tokens: int) -> dict:
    """item -> {"score", "turns"} of the taboo guesser (learner + adapter) with the programmatic describer."""
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    greedy = dict(temperature=0.0, max_tokens=max_tokens)
    model = load_model_by_name(learner, gen_args=greedy, role="learner", adapter=adapter, run_name=label)
    describer = load_model_by_name("programmatic", gen_args=greedy, role="partner")
    instances = json.loads(SPLITS.read_text())["games"]["taboo"]["instances"]
    table = evaluate([describer, model], ["taboo"], results_dir=work / "results", instances=instances, items=items,
                     batch_size=16, run_name=label, overwrite=True)
    out = {}
    for path in sorted((Path(table.run_dir) / "taboo").rglob("interactions.json")):
        episode = path.parent
        instance = json.loads((episode / "instance.json").read_text())
        item = f"{episode.parent.name}/{instance['game_id']}"
        scores = json.loads((episode / "scores.json").read_text())["episode scores"]
        score = scores.get("Main Score")
        turns = [str(e["action"].get("content")) for t in json.loads(path.read_text())["turns"] for e in t]
        out[item] = {"score": 0.0 if score is None or score != score else float(score), "turns": turns}
    return out


def tensors_equal(a: Path, b: Path) -> tuple[bool, int]:
    import torch
    from safetensors.torch import load_file
    x, y = load_file(a / "adapter_model.safetensors"), load_file(b / "adapter_model.safetensors")
    return sorted(x) == sorted(y) and all(torch.equal(x[k], y[k]) for k in x), len(x)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--out", default=str(HERE / "results" / "null-update-work"))
    parser.add_argument("--sft-steps", type=int, default=4, help="the start adapter's SFT steps (any adapter that plays unlike the base model will do)")
    parser.add_argument("--max-items", type=int, default=0, help="the first N test items (0 = all 80)")
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    items = json.loads(SPLITS.read_text())["games"]["taboo"]["test"]
    items = items[:args.max_items] if args.max_items else items
    began = time.time()

    start_dir = work / "models" / "sft+lora" / args.learner.replace("/", "_")
    start = start_dir / f"checkpoint-{args.sft_steps}"
    if not start.exists():
        run_trainer("sft", args.learner, None, 0.7, args.max_tokens, args.seed, games="taboo", roles="Guesser",
                    max_steps=args.sft_steps, batch_size=8, max_length=768, learning_rate=2e-4,
                    save_steps=args.sft_steps, models_dir=str(work / "models"), evaluate=False)
    after_dir = work / "models" / "expert-iteration+lora" / args.learner.replace("/", "_") / "programmatic"
    after = after_dir / "checkpoint-2"
    if not after.exists():
        run_trainer("expert-iteration", args.learner, "programmatic", 1.0, args.max_tokens, args.seed, games="taboo",
                    roles="Guesser", rounds=1, instances_per_round=12, samples_per_instance=4, batch_size=4,
                    max_length=768, learning_rate=0.0, max_steps=2, save_steps=2, init_adapter=str(start),
                    models_dir=str(work / "models"), evaluate=False)
    same_tensors, count = tensors_equal(start, after)
    base = guesser_episodes(args.learner, start, "start", items, work, args.max_tokens)
    mine = guesser_episodes(args.learner, after, "after", items, work, args.max_tokens)
    differ = sorted(i for i in base if base[i]["turns"] != mine.get(i, {}).get("turns"))
    mean = lambda rows: sum(r["score"] for r in rows.values()) / max(1, len(rows))  # noqa: E731
    result = {"date": time.strftime("%Y-%m-%d"), "learner": args.learner, "items": len(items),
              "start": str(start.relative_to(work)), "after": str(after.relative_to(work)),
              "same_tensors": same_tensors, "tensors": count, "episodes_differ": differ,
              "start_mean": round(mean(base), 3), "after_mean": round(mean(mine), 3),
              "per_item": {i: {"start": base[i]["score"], "after": mine[i]["score"]} for i in sorted(base)},
              "seconds": round(time.time() - began, 1)}
    name = "null-update-plumbing.json" if args.max_items else f"null-update-{time.strftime('%Y%m%d')}.json"
    target = work / name if args.max_items else HERE / "results" / name
    target.write_text(json.dumps(result, indent=1) + "\n")
    print(f"null update: tensors {'equal' if same_tensors else 'CHANGED'} ({count}); {len(differ)} of {len(base)} "
          f"episodes differ; start {result['start_mean']:.2f}, after {result['after_mean']:.2f} -> {target}")
    return 0 if same_tensors and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
