"""Rollout throughput: clemcore's runners vs playpen's batched rollouts vs raw generate.

    python benchmarks/rollouts.py [--game taboo] [--instances 32] [--max-new-tokens 48]

Same model (smol-135m, greedy), same instances, same max new tokens, one process:

  (a) clemcore sequential runner (batch 1)
  (b) clemcore batchwise runner (batch 16)
  (c) playpen.rollouts at 16 concurrent episodes
  (d) raw ``model.generate`` at batch 16 on the episodes' first prompts, left-padded,
      no prefix sharing (the ceiling of naive batching)

Every variant writes its records (clemcore's file savers for a/b, playpen's records for c).
Tokens are counted the same way for all: the ids each ``model.generate`` call produced
per row, up to and including the first EOS. "model time" is the time spent inside
``model.generate`` (plus playpen's shared-prefix prefill); env/bookkeeping share =
1 - model time / wall time. Every forward pass is also timed and split into prefill (more
than one position per row) and decode steps (one position); "c/a bound" = wall time of
(a) / prefill time of (c) is the most any engine could gain over (a) on this machine
while prefilling what (c) prefills, with decoding and bookkeeping for free. Prints a
table and writes benchmarks/results/rollouts-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path


class GenerateMeter:
    """Wraps ``model.generate``: counts generated tokens per row (to the first EOS) and time."""

    def __init__(self, model, eos_ids):
        import playpen.rollouts.generation as generation
        self.model, self.eos = model, set(eos_ids)
        self.original = model.generate
        self.tokens = 0
        self.seconds = 0.0
        self.calls = 0
        model.generate = self._generate
        # every forward pass, split into prefill (several positions per row) and decode steps
        self.forward = model.forward
        model.forward = self._forward
        self.prefill_seconds = self.decode_seconds = 0.0
        self.prefill_positions = self.decode_steps = 0
        # playpen's shared-prefix prefill runs outside generate: it is model time too
        prefix_cache = generation._prefix_cache

        def timed_prefix_cache(*args, **kwargs):
            started = time.perf_counter()
            try:
                return prefix_cache(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
        generation._prefix_cache = timed_prefix_cache

    def _generate(self, *args, **kwargs):
        input_ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        started = time.perf_counter()
        out = self.original(*args, **kwargs)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        sequences = out.sequences if hasattr(out, "sequences") else out
        for row in sequences[:, input_ids.shape[1]:].tolist():
            end = next((i for i, t in enumerate(row) if t in self.eos), None)
            self.tokens += len(row) if end is None else end + 1
        return out

    def _forward(self, *args, **kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args[0] if args else None)
        started = time.perf_counter()
        out = self.forward(*args, **kwargs)
        elapsed = time.perf_counter() - started
        if ids is not None and ids.shape[1] > 1:
            self.prefill_seconds += elapsed
            self.prefill_positions += int(ids.numel())
        else:
            self.decode_seconds += elapsed
            self.decode_steps += 1
        return out

    def reset(self):
        self.tokens, self.seconds, self.calls = 0, 0.0, 0
        self.prefill_seconds = self.decode_seconds = 0.0
        self.prefill_positions = self.decode_steps = 0


def measure(name, fn, meter, num_episodes):
    meter.reset()
    started = time.perf_counter()
    fn()
    wall = time.perf_counter() - started
    row = dict(variant=name, episodes=num_episodes, seconds=round(wall, 2), generate_calls=meter.calls,
               generated_tokens=meter.tokens, episodes_per_s=round(num_episodes / wall, 3),
               tokens_per_s=round(meter.tokens / wall, 1), model_seconds=round(meter.seconds, 2),
               env_share=round(1 - meter.seconds / wall, 3),
               prefill_seconds=round(meter.prefill_seconds, 2), prefill_positions=meter.prefill_positions,
               decode_seconds=round(meter.decode_seconds, 2), decode_steps=meter.decode_steps)
    print(f"  {name:<34} {wall:8.1f} s  {row['episodes_per_s']:7.3f} ep/s  {row['tokens_per_s']:7.1f} tok/s"
          f"  env share {row['env_share']:.1%}  ({meter.tokens} tokens, {meter.calls} generate calls)\n"
          f"  {'':<34} prefill {meter.prefill_seconds:6.1f} s ({meter.prefill_positions} positions), "
          f"decode {meter.decode_seconds:6.1f} s ({meter.decode_steps} steps, "
          f"{1000 * meter.decode_seconds / max(1, meter.decode_steps):.0f} ms/step)", flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="taboo")
    parser.add_argument("--instances", type=int, default=32, help="first N instances of the game")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--skip-sequential", action="store_true", help="skip (a), the slow one")
    args = parser.parse_args(argv)

    import torch
    from playpen import registry
    from playpen.rollouts import chat
    from playpen.clem import clemcore, clemgame, load_model, preserved_logging
    from playpen.envs.loading import game_instance_rows, load_benchmark
    from playpen.registry import game_spec
    from playpen.rollouts.generation import eos_token_ids
    from playpen.default_model import prepare_default_model, DEFAULT_MODEL
    from playpen.rollouts import Learner, SamplingConfig, rollout

    prepare_default_model()
    backends = clemcore().backends
    cg = clemgame()
    clem_model = load_model(backends.ModelSpec.from_dict(registry.resolve_model(DEFAULT_MODEL).spec),
                            dict(temperature=0.0, max_tokens=args.max_new_tokens))
    model, tokenizer = clem_model.model, clem_model.tokenizer
    meter = GenerateMeter(model, eos_token_ids(model, tokenizer))
    spec = game_spec(args.game)
    rows = game_instance_rows(spec)[:args.instances]
    keys = {(r["experiment"]["name"], r["game_instance"]["game_id"]) for r in rows}
    selected = lambda row: (row["experiment"]["name"], row["game_instance"]["game_id"]) in keys  # noqa: E731
    out_dir = Path(tempfile.mkdtemp(prefix="playpen-bench-"))
    print(f"{args.game}: {len(rows)} instances, max_new_tokens={args.max_new_tokens}, "
          f"batch={args.batch_size}, torch threads={torch.get_num_threads()}, records in {out_dir}", flush=True)

    def clem_runner(batch_size, folder):
        from clemcore.clemgame.runners import dispatch
        from clemcore.clemgame.callbacks.files import (ExperimentFileSaver, InstanceFileSaver,
                                                      InteractionsFileSaver, PlayerFileSaver, ResultsFolder,
                                                      RunFileSaver, SignalFileSaver)
        results = ResultsFolder(out_dir / folder, run_dir=clem_model.name)
        infos = backends.Model.to_infos([clem_model])
        callbacks = cg.GameBenchmarkCallbackList([
            InstanceFileSaver(results), ExperimentFileSaver(results, player_model_infos=infos),
            InteractionsFileSaver(results, player_model_infos=infos),
            RunFileSaver(results, player_model_infos=infos), PlayerFileSaver(results), SignalFileSaver(results)])
        with preserved_logging(), load_benchmark(spec) as benchmark:
            instances = cg.GameInstances.from_game_spec(spec).filter(selected)
            dispatch.run(benchmark, instances, [clem_model], callbacks=callbacks, batch_size=batch_size)

    learner = Learner.from_clem(clem_model, SamplingConfig(temperature=0.0, max_new_tokens=args.max_new_tokens))
    stats = {}

    def playpen_rollout():
        result = rollout(args.game, learner, instances=selected, max_concurrent_episodes=args.batch_size,
                         records_dir=out_dir / "playpen")
        stats.update(result.stats.as_metrics(), seconds_env=result.stats.seconds_env,
                     seconds_generate=result.stats.seconds_generate, outcomes=[e.outcome for e in result.episodes])

    # the first prompts of the episodes, as (d) feeds them to generate
    from playpen.envs.game import GameEnv
    with load_benchmark(spec) as benchmark:
        env = GameEnv(benchmark, [clem_model] * int(spec.players))
        first_prompts = []
        for row in rows:
            player, context = env.reset(row["experiment"], row["game_instance"])
            first_prompts.append(chat.prompt_ids(tokenizer, [*player.get_perspective(), context]))

    def raw_generate():
        # plain HF generate on left-padded batches: no prefix sharing, no logprobs, no game
        pad = tokenizer.pad_token_id
        for start in range(0, len(first_prompts), args.batch_size):
            chunk = first_prompts[start:start + args.batch_size]
            width = max(map(len, chunk))
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
            with torch.no_grad():
                model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_new_tokens,
                               do_sample=False, pad_token_id=pad, eos_token_id=eos_token_ids(model, tokenizer))

    with torch.no_grad():  # warm up kernels and caches once
        model.generate(input_ids=torch.tensor([first_prompts[0]]), max_new_tokens=4, do_sample=False)
    rows_out = [measure(f"(d) raw generate, batch {args.batch_size}", raw_generate, meter, len(rows)),
                measure(f"(c) playpen rollout, batch {args.batch_size}", playpen_rollout, meter, len(rows)),
                measure(f"(b) clemcore batchwise, batch {args.batch_size}",
                        lambda: clem_runner(args.batch_size, "batchwise"), meter, len(rows))]
    if not args.skip_sequential:
        rows_out.append(measure("(a) clemcore sequential", lambda: clem_runner(1, "sequential"), meter, len(rows)))
    by = {r["variant"][:3]: r for r in rows_out}
    ratios = {"c/d tokens_per_s": by["(c)"]["tokens_per_s"] / by["(d)"]["tokens_per_s"],
              "c/b episodes_per_s": by["(c)"]["episodes_per_s"] / by["(b)"]["episodes_per_s"]}
    if "(a)" in by:
        ratios["c/a episodes_per_s"] = by["(c)"]["episodes_per_s"] / by["(a)"]["episodes_per_s"]
    if "(a)" in by:
        # the most any engine could gain over (a) on this machine while prefilling what (c)
        # prefills: decoding for free, no bookkeeping (prefill is compute-bound on a CPU)
        ratios["c/a bound (a wall / c prefill)"] = by["(a)"]["seconds"] / max(1e-9, by["(c)"]["prefill_seconds"])
    print("ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items()))
    print(f"playpen rollout stats: env share {stats['rollout/env_share']:.1%} of the loop "
          f"(setup {stats['rollout/seconds_setup']:.2f} s); outcomes {sorted(set(stats['outcomes']))}")
    report = dict(date=datetime.now().isoformat(timespec="seconds"), machine=platform.node(),
                  cpu_count=os.cpu_count(), torch_threads=torch.get_num_threads(), python=sys.version.split()[0],
                  torch=torch.__version__, game=args.game, instances=len(rows), max_new_tokens=args.max_new_tokens,
                  batch_size=args.batch_size, results=rows_out, ratios=ratios,
                  playpen_stats={k: v for k, v in stats.items() if k != "outcomes"})
    target = Path(__file__).resolve().parent / "results"
    target.mkdir(exist_ok=True)
    path = target / f"rollouts-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
