"""Rollout throughput: clemcore's runners vs playpen's batched rollouts vs raw generate.

    python benchmarks/rollouts.py [--game taboo] [--instances 32] [--max-new-tokens 48]
    python benchmarks/rollouts.py --game recall [--rounds 6]   # multi-turn: 6 learner turns per episode
    python benchmarks/rollouts.py --quick                       # a smoke check (2 recall episodes)

Same model (smol-135m, greedy), same instances, same max new tokens, one process:

  (a) clemcore sequential runner (batch 1)
  (b) clemcore batchwise runner (batch 16)
  (c) playpen.rollouts at 16 concurrent episodes (KV caches kept between turns)
  (e) the same with ``kv_cache_mb=0``: every turn prefills its whole prompt
  (d) raw ``model.generate`` at batch 16 on the episodes' first prompts, left-padded,
      no prefix sharing (the ceiling of naive batching)

``--game recall`` is the multi-turn variant: a scripted one-player game this script writes
into a temporary folder (harness.py's RECALL_MASTER): each round the model names a word related to
a topic, and every reply, whatever it says, continues the episode, so every episode lasts
exactly ``--rounds`` learner turns and its history grows turn by turn.

Every variant writes its records (clemcore's file savers for a/b, playpen's records for c/e).
Tokens are counted the same way for all: the ids each ``model.generate`` call produced
per row, up to and including the first EOS (playpen's own count for c/e, which is the
same count: (c) decodes with its own loop, not ``model.generate``). Every forward pass is
timed and split into prefill (more than one position per row; positions counted with
padding) and decode steps (one position); "model time" = the time of all forward passes
(plus playpen's shared-prefix prefill of e); env/bookkeeping share = 1 - model time / wall
time. "c/a bound" = wall time of (a) / prefill time of (c) is the most any engine could
gain over (a) on this machine while prefilling what (c) prefills, with decoding and
bookkeeping for free. Peak RSS is the process's peak resident memory during each variant
(Linux ``VmHWM``, reset before each). Prints a table and writes
benchmarks/results/rollouts-<date>.json.
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

from harness import MULTI_TURN_GAME, write_recall_game  # the benchmarks' shared module, beside this script


class GenerateMeter:
    """Wraps ``model.generate``: counts generated tokens per row (to the first EOS) and time."""

    def __init__(self, model, eos_ids):
        from playpen.inference import hf_generate
        self.model, self.eos = model, set(eos_ids)
        self.original = model.generate
        self.tokens = 0
        self.seconds = 0.0
        self.calls = 0
        model.generate = self._generate
        # every forward pass, split into prefill (several positions per row) and decode steps;
        # timed by module hooks: replacing model.forward would hide its signature from
        # generate, which then builds no position ids from the attention mask (left-padded
        # rows would run at shifted positions; an earlier version of this meter did that)
        self._started = None
        model.register_forward_pre_hook(self._before, with_kwargs=True)
        model.register_forward_hook(self._after, with_kwargs=True)
        self.prefill_seconds = self.decode_seconds = self.outside_forward_seconds = 0.0
        self.prefill_positions = self.decode_steps = 0
        # playpen's shared-prefix prefill runs outside generate: it is model time too
        prefix_cache = hf_generate._prefix_cache

        def timed_prefix_cache(*args, **kwargs):
            started, forward_before = time.perf_counter(), self.prefill_seconds + self.decode_seconds
            try:
                return prefix_cache(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                self.seconds += elapsed
                self.outside_forward_seconds += elapsed - (self.prefill_seconds + self.decode_seconds - forward_before)
        hf_generate._prefix_cache = timed_prefix_cache

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

    def _before(self, module, args, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args[0] if args else None)
        self._started = (time.perf_counter(), ids)

    def _after(self, module, args, kwargs, output):
        started, ids = self._started
        elapsed = time.perf_counter() - started
        if ids is not None and ids.shape[1] > 1:
            self.prefill_seconds += elapsed
            self.prefill_positions += int(ids.numel())
        else:
            self.decode_seconds += elapsed
            self.decode_steps += 1

    def reset(self):
        self.tokens, self.seconds, self.calls = 0, 0.0, 0
        self.prefill_seconds = self.decode_seconds = self.outside_forward_seconds = 0.0
        self.prefill_positions = self.decode_steps = 0


def measure(name, fn, meter, num_episodes):
    """Run one variant; ``fn`` may return (generated tokens, generate calls) counted by itself."""
    from playpen.training.common.memory import peak_rss_mb, reset_peak
    meter.reset()
    reset_peak()
    started = time.perf_counter()
    counted = fn()
    wall = time.perf_counter() - started
    if counted is not None:
        meter.tokens, meter.calls = counted
    # every forward pass is model time, plus the shared-prefix prefill that runs outside them
    model_seconds = meter.prefill_seconds + meter.decode_seconds + meter.outside_forward_seconds
    row = dict(variant=name, episodes=num_episodes, seconds=round(wall, 2), generate_calls=meter.calls,
               generated_tokens=meter.tokens, episodes_per_s=round(num_episodes / wall, 3),
               tokens_per_s=round(meter.tokens / wall, 1), model_seconds=round(model_seconds, 2),
               env_share=round(1 - model_seconds / wall, 3),
               prefill_seconds=round(meter.prefill_seconds, 2), prefill_positions=meter.prefill_positions,
               decode_seconds=round(meter.decode_seconds, 2), decode_steps=meter.decode_steps,
               peak_rss_mb=round(peak_rss_mb(), 1))
    print(f"  {name:<34} {wall:8.1f} s  {row['episodes_per_s']:7.3f} ep/s  {row['tokens_per_s']:7.1f} tok/s"
          f"  env share {row['env_share']:.1%}  ({meter.tokens} tokens, {meter.calls} generate calls)\n"
          f"  {'':<34} prefill {meter.prefill_seconds:6.1f} s ({meter.prefill_positions} positions), "
          f"decode {meter.decode_seconds:6.1f} s ({meter.decode_steps} steps, "
          f"{1000 * meter.decode_seconds / max(1, meter.decode_steps):.0f} ms/step), "
          f"peak RSS {row['peak_rss_mb']:.0f} MB", flush=True)
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default=None,
                        help=f"a game name, or '{MULTI_TURN_GAME}' for the multi-turn variant (default: taboo)")
    parser.add_argument("--instances", type=int, default=None, help="first N instances of the game (default 32)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default 48")
    parser.add_argument("--batch-size", type=int, default=None, help="default 16")
    parser.add_argument("--rounds", type=int, default=None, help=f"learner turns per {MULTI_TURN_GAME} episode (default 6)")
    parser.add_argument("--skip-sequential", action="store_true", help="skip (a), the slow one")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's; --quick: 1, which a busy machine needs)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke check: {MULTI_TURN_GAME}, 2 instances, 4 rounds, 8 new tokens, batch 2 "
                             "(numbers meaningless; nothing written to benchmarks/results)")
    args = parser.parse_args(argv)
    quick = dict(game=MULTI_TURN_GAME, instances=2, max_new_tokens=8, batch_size=2, rounds=4, threads=1)
    full = dict(game="taboo", instances=32, max_new_tokens=48, batch_size=16, rounds=6, threads=0)
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import torch
    from playpen import registry
    from playpen.rollouts import chat
    from playpen.clem import clemcore, clemgame, load_model, preserved_logging
    from playpen.envs.loading import game_instance_rows, load_benchmark
    from playpen.registry import game_spec
    from playpen.inference.model_facts import eos_token_ids
    from playpen.default_model import prepare_default_model, DEFAULT_MODEL
    from playpen.rollouts import Learner, SamplingConfig, rollout

    prepare_default_model()
    backends = clemcore().backends
    cg = clemgame()
    clem_model = load_model(backends.ModelSpec.from_dict(registry.resolve_model(DEFAULT_MODEL).spec),
                            dict(temperature=0.0, max_tokens=args.max_new_tokens))
    model, tokenizer = clem_model.model, clem_model.tokenizer
    if args.threads:  # after loading: clemcore's backend sets its own
        torch.set_num_threads(args.threads)
    meter = GenerateMeter(model, eos_token_ids(model, tokenizer))
    out_dir = Path(tempfile.mkdtemp(prefix="playpen-bench-"))
    game = args.game
    if game == MULTI_TURN_GAME:  # a game folder named by its path (playpen and clemcore alike)
        game = str(write_recall_game(out_dir / "games", args.instances, args.rounds))
    spec = game_spec(game)
    rows = game_instance_rows(spec)[:args.instances]
    keys = {(r["experiment"]["name"], r["game_instance"]["game_id"]) for r in rows}
    selected = lambda row: (row["experiment"]["name"], row["game_instance"]["game_id"]) in keys  # noqa: E731
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
    stats, completions = {}, {}

    def playpen_rollout(kv_cache_mb=1024.0):
        result = rollout(game, learner, instances=selected, max_concurrent_episodes=args.batch_size,
                         records_dir=out_dir / "playpen", kv_cache_mb=kv_cache_mb)
        completions[kv_cache_mb > 0] = [(t.completion_ids, t.logprobs) for t in result.trajectories]
        if kv_cache_mb > 0:
            stats.update(result.stats.as_metrics(), seconds_env=result.stats.seconds_env,
                         seconds_generate=result.stats.seconds_generate,
                         learner_turns_per_episode=result.stats.num_learner_turns / max(1, len(result.episodes)),
                         outcomes=[e.outcome for e in result.episodes])
        # playpen's own count: (c) decodes in its own loop, the meter sees no model.generate
        return result.stats.num_generated_tokens, result.stats.num_generate_calls

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
                measure(f"(e) playpen, no KV cache, batch {args.batch_size}", lambda: playpen_rollout(0),
                        meter, len(rows)),
                measure(f"(b) clemcore batchwise, batch {args.batch_size}",
                        lambda: clem_runner(args.batch_size, "batchwise"), meter, len(rows))]
    if not args.skip_sequential:
        rows_out.append(measure("(a) clemcore sequential", lambda: clem_runner(1, "sequential"), meter, len(rows)))
    by = {r["variant"][:3]: r for r in rows_out}
    ratios = {"c/d tokens_per_s": by["(c)"]["tokens_per_s"] / by["(d)"]["tokens_per_s"],
              "c/b episodes_per_s": by["(c)"]["episodes_per_s"] / by["(b)"]["episodes_per_s"],
              "c/b tokens_per_s": by["(c)"]["tokens_per_s"] / by["(b)"]["tokens_per_s"],
              "c/e tokens_per_s (KV cache on/off)": by["(c)"]["tokens_per_s"] / by["(e)"]["tokens_per_s"],
              "e/c prefill positions": by["(e)"]["prefill_positions"] / max(1, by["(c)"]["prefill_positions"])}
    if "(a)" in by:
        ratios["c/a episodes_per_s"] = by["(c)"]["episodes_per_s"] / by["(a)"]["episodes_per_s"]
        ratios["c/a tokens_per_s"] = by["(c)"]["tokens_per_s"] / by["(a)"]["tokens_per_s"]
    if "(a)" in by:
        # the most any engine could gain over (a) on this machine while prefilling what (c)
        # prefills: decoding for free, no bookkeeping (prefill is compute-bound on a CPU)
        ratios["c/a bound (a wall / c prefill)"] = by["(a)"]["seconds"] / max(1e-9, by["(c)"]["prefill_seconds"])
    print("ratios: " + ", ".join(f"{k} = {v:.2f}" for k, v in ratios.items()))
    same = len(completions[True]) == len(completions[False]) and all(
        a[0] == b[0] and max((abs(x - y) for x, y in zip(a[1], b[1])), default=0.0) < 1e-3
        for a, b in zip(completions[True], completions[False]))
    for index, (a, b) in enumerate(zip(completions[True], completions[False])):
        gap = max((abs(x - y) for x, y in zip(a[1], b[1])), default=0.0)
        if gap >= 1e-3:
            print(f"trajectory {index}: logprobs of (c) and (e) differ by up to {gap:.2e}")
        if a[0] != b[0]:
            at = next((i for i, (x, y) in enumerate(zip(a[0], b[0])) if x != y), min(len(a[0]), len(b[0])))
            print(f"trajectory {index}: (c) and (e) differ from completion token {at} of {len(a[0])}/{len(b[0])}")
    print(f"playpen rollout stats: env share {stats['rollout/env_share']:.1%} of the loop "
          f"(setup {stats['rollout/seconds_setup']:.2f} s); {stats['learner_turns_per_episode']:.1f} learner "
          f"turns per episode; prompt tokens prefilled {stats['rollout/prefill_tokens']}, reused "
          f"{stats['rollout/reused_tokens']}; outcomes {sorted(set(stats['outcomes']))}; "
          f"(c) and (e) generated the same tokens: {same}")
    report = dict(date=datetime.now().isoformat(timespec="seconds"), machine=platform.node(),
                  cpu_count=os.cpu_count(), torch_threads=torch.get_num_threads(), python=sys.version.split()[0],
                  torch=torch.__version__, game=args.game, instances=len(rows), max_new_tokens=args.max_new_tokens,
                  batch_size=args.batch_size, rounds=args.rounds if args.game == MULTI_TURN_GAME else None,
                  results=rows_out, ratios=ratios, same_tokens_with_and_without_kv_cache=same,
                  playpen_stats={k: v for k, v in stats.items() if k != "outcomes"})
    if args.quick:
        print("--quick: a smoke check, nothing written")
        return report
    target = Path(__file__).resolve().parent / "results"
    target.mkdir(exist_ok=True)
    path = target / f"rollouts-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
