"""Throughput at the sizes researchers train, with random weights (no download).

    python benchmarks/scale.py                                   # GPU: the three Qwen3 shapes
    python benchmarks/scale.py --shapes qwen3-1.7b --rows 64     # one shape
    python benchmarks/scale.py --quick --out /tmp/scale          # CPU smoke test (tiny shape; the test suite runs it)

Models are built from a config alone in the published shapes of Qwen3-0.6B, -1.7B and -4B
(layers, widths, heads, key/value heads, head size, vocabulary; tied embeddings), with the
embedded model's tokenizer, in bf16 on a GPU, with a LoRA adapter (r 16, every linear layer)
as in playpen's trainers. Throughput does not depend on the weights' values; random weights
never end a turn early, so every turn decodes its whole budget. Measured side by side in one
process, for each shape:

1. **decode**: ``--rows`` prompts of ~``--prompt-tokens`` tokens, ``--new-tokens`` sampled
   tokens each, through playpen's generation (``generate`` with a KV-cache store) with the
   ``dynamic`` engine (a growing cache, eager steps), the ``static`` engine (pre-allocated
   cache, captured CUDA graphs: playpen.inference.static) and ``static-compile`` (the same, each
   step compiled by torch.compile first: ``SamplingConfig.compile_decode``; its first call's
   compiling and capturing time is ``warmup_s``); beside them, on the same prompts and
   sampling, transformers' own continuous batching (``hf-continuous``: ``ContinuousBatchingManager``,
   a paged cache and its scheduler, the peft model as it is, adapter unmerged in every adapted
   layer; ``hf-continuous-merged``: the adapter merged into a copy of the model, as playpen's
   static engine merges it for its captured steps). Prefill tokens/s come from a call
   with a budget of 1; decode tokens/s from the difference of the two calls. The bound:
   every decode step reads the weights once and each row's keys and values so far; that
   many bytes at the device's copy bandwidth (measured here: a device-to-device copy) is the
   fastest any engine can decode; "of bound" = bound time / measured time;
2. **rollout**: ``--rows`` episodes of the multi-turn recall game (benchmarks/rollouts.py:
   every reply continues, ``--rounds`` learner turns each) through ``rollout()``, every
   playpen engine (transformers' continuous batching is not behind playpen's door):
   wall time, decoded and prefilled tokens/s;
3. **train**: one pass over the static rollout's rows (G x N = ``--rows``), all rows at once
   (``--train-rows`` per micro-batch): forward, then backward of a GRPO-shaped loss
   (advantage x log-prob of the learner's tokens, projected to the vocabulary only there),
   AdamW on the LoRA weights. Model FLOPs = 2 x forward FLOPs (the frozen base only needs
   input gradients): 2 x params x tokens + the LM head at the learner's tokens + causal
   attention; MFU against the bf16 matrix rate measured here (8192^3 products) and against
   the datasheet's 989 TFLOP/s;
4. **step**: rollout + pass + optimizer timed as one step, against rollout + forward +
   backward.

``--parts`` picks parts (benchmarks/gpu-check.sh runs decode and rollout only). Peak GPU
memory per part. Results: ``<out>/scale-<date>.json`` and a table on stdout.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import platform
import random
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from harness import write_recall_game  # the benchmarks' shared module, beside this script: the multi-turn game

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

# The published Qwen3 shapes (config.json of each release); tied input/output embeddings.
QWEN3_VOCAB = 151936
SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=QWEN3_VOCAB),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=QWEN3_VOCAB),
    "qwen3-4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=QWEN3_VOCAB),
    # the CPU smoke test's shape (vocabulary: the tokenizer's; untied, or greedy rows repeat their last prompt token)
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=None, tie_word_embeddings=False),
}
DATASHEET_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0}
PLAYPEN_ENGINES = ("dynamic", "static", "static-compile")
ENGINES = PLAYPEN_ENGINES + ("hf-continuous", "hf-continuous-merged")  # the last two: transformers' own
CONTINUOUS_PAGE = 256  # tokens per page of transformers' paged cache (its default)
PARTS = ("decode", "rollout", "train")  # train: the pass and the whole step


def sampling_of(engine: str, **values):
    """The SamplingConfig of an engine label (``static-compile``: the static engine, compiled)."""
    from playpen.rollouts import SamplingConfig
    return SamplingConfig(engine="static" if engine == "static-compile" else engine,
                          compile_decode=engine == "static-compile", **values)


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()


def reset_peak(device):
    import torch
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_gb(device):
    import torch
    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.type == "cuda" else None


def device_facts(device) -> dict:
    """The device's name and what it does here: copy bandwidth (bytes read + written by a
    device-to-device copy) and the bf16 matrix rate (8192^3 products)."""
    import torch
    if device.type != "cuda":
        return {"device": platform.processor() or "cpu", "bandwidth_gbs": None, "bf16_tflops": None}
    name = torch.cuda.get_device_name()
    src = torch.empty(2 * 2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    sync(device)
    start = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    sync(device)
    bandwidth = 2 * src.numel() * 10 / (time.perf_counter() - start) / 1e9
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    b = torch.randn_like(a)
    for _ in range(3):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(device)
    tflops = 2 * 8192**3 * 10 / (time.perf_counter() - start) / 1e12
    datasheet = next((v for k, v in DATASHEET_BF16_TFLOPS.items() if k in name), None)
    return {"device": name, "bandwidth_gbs": round(bandwidth, 1), "bf16_tflops": round(tflops, 1),
            "datasheet_bf16_tflops": datasheet}


def build(shape: str, tokenizer, device, dtype, lora_rank: int, lora_fp32: bool = True):
    """A random-weight model of ``shape`` with a LoRA adapter (every linear layer)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen3Config
    dims = dict(SHAPES[shape])
    dims["vocab_size"] = dims["vocab_size"] or len(tokenizer)
    dims.setdefault("tie_word_embeddings", True)
    config = Qwen3Config(**dims, max_position_embeddings=40960,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    # the tiny shape's adapter random (peft's default zeroes one factor), so the smoke test's token checks see it
    # applied; the large shapes keep peft's start (random factors there would scale every layer's output up)
    lora = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0, target_modules="all-linear",
                      init_lora_weights=shape != "tiny")
    # peft keeps adapters in fp32 by default (autocast_adapter_dtype); --lora-bf16: the model's dtype
    model = get_peft_model(model, lora, autocast_adapter_dtype=lora_fp32)
    return model


def parameter_bytes(model) -> tuple[int, int, int]:
    """(bytes of every parameter, parameters outside the embedding, LoRA parameters)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    embed = model.get_input_embeddings().weight.numel()
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    body = sum(p.numel() for p in model.parameters()) - embed - lora
    return total, body, lora


def kv_bytes_per_token(model) -> int:
    config = model.config
    element = next(model.parameters()).element_size()
    return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * element


def playpen_caller(model, tokenizer, prompts, args, device, engine: str):
    """``call(budget) -> (seconds, token ids per row)`` through playpen's generation, a fresh
    KV-cache store each call (no prefix kept from the call before)."""
    import torch
    from playpen.inference.engine import generate
    from playpen.inference.kvcache import KVCacheStore
    sampling = sampling_of(engine, temperature=args.temperature, max_new_tokens=args.new_tokens,
                           max_batch_size=args.rows)

    def call(budget):
        torch.manual_seed(1)
        sync(device)
        start = time.perf_counter()
        gens = generate(model, tokenizer, prompts, replace(sampling, max_new_tokens=budget),
                        cache=KVCacheStore(2**40), conversations=range(len(prompts)))
        sync(device)
        return time.perf_counter() - start, [list(g.token_ids) for g in gens]
    return call


@contextmanager
def continuous_caller(model, prompts, args, device, merged: bool, facts: dict):
    """``call(budget)`` like playpen's through transformers' continuous batching: one manager,
    warmed up (its CUDA graphs captured) and started once, so each call times generation alone.
    Its paged cache is sized to the workload (every row's prompt and budget), not to 90 % of
    free memory (its default), so that peak memory compares with playpen's engines; no prefix
    sharing (a call would reuse the last call's prompt pages; playpen's calls start from an
    empty store); logprobs returned, as playpen's engines return them. ``facts`` gets what it
    chose: attention, CUDA graphs."""
    from transformers.generation import ContinuousBatchingConfig, GenerationConfig
    served = copy.deepcopy(model).merge_and_unload() if merged else model  # the peft model's forward: adapter unmerged
    pages = -(-(max(map(len, prompts)) + args.new_tokens) // CONTINUOUS_PAGE)
    config = ContinuousBatchingConfig(
        page_size=CONTINUOUS_PAGE, num_blocks=len(prompts) * pages, safety_margin=0.0,
        max_requests_per_batch=len(prompts),
        allow_block_sharing=False, return_logprobs=True, seed=1)
    sampled = args.temperature > 0
    generation = GenerationConfig(max_new_tokens=args.new_tokens, do_sample=sampled,
                                  temperature=args.temperature if sampled else None, top_k=0 if sampled else None,
                                  top_p=1.0 if sampled else None, eos_token_id=model.generation_config.eos_token_id)
    manager = served.init_continuous_batching(generation_config=generation, continuous_batching_config=config)
    try:
        manager.warmup()
        manager.start()
        facts.update(attention=served.config._attn_implementation,
                     cuda_graphs=list(manager.continuous_batching_config.use_cuda_graph))

        def call(budget):
            sync(device)
            start = time.perf_counter()
            ids = manager.add_requests(inputs=prompts, max_new_tokens=budget)
            done = {}
            while len(done) < len(ids):
                result = manager.get_result(timeout=1)
                if result is None and not manager.is_running():
                    raise RuntimeError(f"continuous batching stopped with {len(ids) - len(done)} rows unanswered")
                if result is not None and result.is_finished():
                    if result.error is not None:
                        raise RuntimeError(f"continuous batching failed {result.request_id}: {result.error}")
                    done[result.request_id] = result.generated_tokens
            sync(device)
            return time.perf_counter() - start, [list(done[i]) for i in ids]
        yield call
    finally:
        manager.stop(block=True, timeout=30)
        manager.destroy()
        del served


def decode(model, tokenizer, args, device, weights_bytes: int, bandwidth_gbs) -> dict:
    """Part 1: prefill and decode tokens/s of every engine on the same prompts."""
    from playpen.inference.static import release_static_decoders, static_decoder
    rng = random.Random(0)
    prompts = [[rng.randrange(100, len(tokenizer) - 100) for _ in range(args.prompt_tokens + 8 * (i % 16))]
               for i in range(args.rows)]
    out = {}
    for engine in args.engine_list:
        chosen = {}
        began = time.perf_counter()
        if engine in PLAYPEN_ENGINES:
            caller = nullcontext(playpen_caller(model, tokenizer, prompts, args, device, engine))
        else:
            release_static_decoders()  # its peak memory without playpen's kept buffers and merged weights
            caller = continuous_caller(model, prompts, args, device, engine.endswith("-merged"), chosen)
        decoder = static_decoder(model)
        compiles, compile_s = decoder.num_compiles, decoder.compile_seconds
        with caller as call:
            row = measure_decode(call, engine, prompts, args, device, model, weights_bytes, bandwidth_gbs, began)
        del call  # a continuous batching manager, its cache and merged copy: gone before the next engine's peak
        gc.collect()
        row.update(chosen)
        if engine == "static-compile":  # graphs compiled during this engine's calls, and the time in them
            row["compiles"] = decoder.num_compiles - compiles
            row["compile_s"] = round(decoder.compile_seconds - compile_s, 2)
            row["compile_error"] = decoder.compile_error
        out[engine] = row
        # each engine's row as it finishes: a process cut by its time limit keeps the rows before
        print(f"[scale] {engine}: {json.dumps({k: v for k, v in row.items() if k != 'tokens'})}", flush=True)
    for name, (before, after) in {"speedup": ("dynamic", "static"), "compile_speedup": ("static", "static-compile"),
                                  "static_over_continuous": ("hf-continuous", "static"),
                                  "static_over_continuous_merged": ("hf-continuous-merged", "static")}.items():
        if before in out and after in out:
            out[name] = round(out[after]["decode_tok_s"] / out[before]["decode_tok_s"], 2)
    return out


def measure_decode(call, engine: str, prompts, args, device, model, weights_bytes: int, bandwidth_gbs,
                   began: float) -> dict:
    """One engine's decode row: a warm-up call (its time from ``began``: set-up, kernels, the
    allocator, compiled and captured steps), then a call with a budget of 1 and a full one."""
    call(args.new_tokens)
    warmup_s = time.perf_counter() - began
    if args.profile and device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            call(args.new_tokens)
        print(f"[scale] profile of one {engine} call:\n" + prof.key_averages().table(
            sort_by="cuda_time_total", row_limit=18, max_name_column_width=60), flush=True)
    reset_peak(device)
    prefill_s, _ = call(1)
    total_s, rows = call(args.new_tokens)
    decode_s = max(total_s - prefill_s, 1e-9)
    steps = max(map(len, rows)) - 1
    decoded = sum(len(r) - 1 for r in rows)
    row = {"rows": len(prompts), "prompt_tokens": sum(map(len, prompts)), "new_tokens": args.new_tokens,
           "generated_tokens": sum(map(len, rows)), "prefill_s": round(prefill_s, 4), "decode_s": round(decode_s, 4),
           "prefill_tok_s": round(sum(map(len, prompts)) / prefill_s, 1),
           "decode_tok_s": round(decoded / decode_s, 1), "warmup_s": round(warmup_s, 2), "peak_gb": peak_gb(device),
           "tokens": rows[:4]}
    if bandwidth_gbs:
        kv = kv_bytes_per_token(model)
        lengths = [len(p) for p in prompts]
        read = sum(weights_bytes + kv * sum(n + s for n in lengths) for s in range(1, steps + 1))
        row["bound_s"] = round(read / (bandwidth_gbs * 1e9), 4)
        row["of_bound"] = round(row["bound_s"] / decode_s, 3)
    return row


def rollout_episodes(model, tokenizer, args, device, games_dir: Path, engine: str, episodes: int = 0):
    """Part 2: ``--rows`` recall episodes (or the first ``episodes``) through ``rollout()``."""
    from playpen.rollouts import Learner, rollout
    sampling = sampling_of(engine, temperature=args.temperature, max_new_tokens=args.turn_tokens,
                           max_batch_size=args.rows)
    learner = Learner(model, tokenizer, name="scale", sampling=sampling)
    sync(device)
    start = time.perf_counter()
    count = episodes or args.rows
    result = rollout(str(games_dir / "recall"), learner, max_concurrent_episodes=count, records_dir=None,
                     kv_cache_mb=2**20, instances=lambda row: row["game_instance"]["game_id"] < count)
    sync(device)
    return time.perf_counter() - start, result


def train_pass(model, trajectories, args, device, optimizer) -> dict:
    """Part 3: forward and backward over every row (``--train-rows`` per micro-batch)."""
    import torch
    rows = sorted(trajectories, key=lambda t: len(t.prompt_ids) + len(t.completion_ids))
    base = model.get_base_model()
    head = base.get_output_embeddings()
    model.train()
    forward_s = backward_s = 0.0
    tokens = learner_tokens = attention_pairs = 0
    step = args.train_rows or len(rows)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    for start in range(0, len(rows), step):
        chunk = rows[start:start + step]
        width = max(len(t.prompt_ids) + len(t.completion_ids) for t in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        trained = torch.zeros((len(chunk), width), dtype=torch.bool)  # positions whose token is the learner's
        for r, t in enumerate(chunk):
            seq = list(t.prompt_ids) + list(t.completion_ids)
            ids[r, :len(seq)] = torch.tensor(seq)
            mask[r, :len(seq)] = 1
            env = torch.tensor(t.env_mask, dtype=torch.bool)
            trained[r, len(t.prompt_ids):len(seq)] = env
            tokens += len(seq)
            attention_pairs += len(seq) * (len(seq) + 1) // 2
        learner_tokens += int(trained.sum())
        ids, mask, trained = ids.to(device), mask.to(device), trained.to(device)
        advantages = torch.randn(len(chunk), 1, device=device)
        sync(device)
        began = time.perf_counter()
        with autocast:
            hidden = base.model(input_ids=ids, attention_mask=mask).last_hidden_state
            where = trained[:, 1:]
            logits = head(hidden[:, :-1][where]).float()
            logps = torch.log_softmax(logits, -1).gather(1, ids[:, 1:][where][:, None]).squeeze(1)
            weights = advantages.expand_as(where)[where]
            loss = -(weights * logps).sum() / max(1, int(where.sum()))
        sync(device)
        middle = time.perf_counter()
        loss.backward()
        sync(device)
        forward_s += middle - began
        backward_s += time.perf_counter() - middle
    began = time.perf_counter()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    sync(device)
    model.eval()
    return {"rows": len(rows), "tokens": tokens, "learner_tokens": learner_tokens, "attention_pairs": attention_pairs,
            "forward_s": round(forward_s, 4), "backward_s": round(backward_s, 4),
            "optimizer_s": round(time.perf_counter() - began, 4)}


def model_flops(model, passed: dict) -> float:
    """FLOPs of one forward and backward (input gradients) over ``passed``'s rows."""
    config = model.config
    _, body, lora = parameter_bytes(model)
    width = config.num_attention_heads * config.head_dim
    forward = (2 * (body + lora) * passed["tokens"]
               + 2 * config.hidden_size * config.vocab_size * passed["learner_tokens"]
               + 4 * config.num_hidden_layers * width * passed["attention_pairs"])
    return 2.0 * forward


def measure_shape(shape: str, tokenizer, args, device, dtype, facts: dict, games_dir: Path) -> dict:
    import torch
    model = build(shape, tokenizer, device, dtype, args.lora_rank, not args.lora_bf16)
    model.eval()
    weights, body, lora = parameter_bytes(model)
    out = {"shape": shape, "parameters_m": round((body + lora + model.get_input_embeddings().weight.numel()) / 1e6, 1),
           "weights_gb": round(weights / 2**30, 2), "kv_bytes_per_token": kv_bytes_per_token(model)}
    print(f"[scale] {shape}: {out['parameters_m']} M parameters, {facts['device']}", flush=True)
    out["decode"] = decode(model, tokenizer, args, device, weights, facts.get("bandwidth_gbs"))
    from playpen.inference.static import static_decoder
    shown = {engine: {k: v for k, v in row.items() if k != "tokens"} if isinstance(row, dict) else row
             for engine, row in out["decode"].items()}
    print(f"[scale] {shape} decode: {json.dumps(shown)}; captured steps {static_decoder(model).num_captures}, "
          f"capture error: {static_decoder(model).capture_error}", flush=True)
    out["rollout"] = {}
    for engine in [e for e in args.engine_list if e in PLAYPEN_ENGINES] if "rollout" in args.part_list else ():
        rollout_episodes(model, tokenizer, args, device, games_dir, engine, episodes=2)  # warm-up
        reset_peak(device)
        seconds, result = rollout_episodes(model, tokenizer, args, device, games_dir, engine)
        stats = result.stats
        out["rollout"][engine] = {"episodes": len(result.episodes), "seconds": round(seconds, 3),
                                  "generated_tokens": stats.num_generated_tokens,
                                  "prefill_tokens": stats.num_prefill_tokens,
                                  "decoded_tok_s": round(stats.num_generated_tokens / seconds, 1),
                                  "seconds_generate": round(stats.seconds_generate, 3),
                                  "seconds_env": round(stats.seconds_env, 3), "peak_gb": peak_gb(device)}
        trajectories = result.trajectories
    print(f"[scale] {shape} rollout: {json.dumps(out['rollout'])}", flush=True)
    if "train" in args.part_list:
        train_and_step(model, tokenizer, args, device, games_dir, facts, trajectories, out)
    decoder = static_decoder(model)
    out["static_captures"] = decoder.num_captures
    out["static_capture_error"] = decoder.capture_error
    out["static_compiles"], out["static_compile_s"] = decoder.num_compiles, round(decoder.compile_seconds, 2)
    out["static_compile_error"] = decoder.compile_error
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def train_and_step(model, tokenizer, args, device, games_dir: Path, facts: dict, trajectories, out: dict) -> None:
    """Parts 3 and 4 (into ``out``): one training pass over the last rollout's rows, then a
    whole step (a static rollout, the pass, the optimizer) against its parts."""
    import torch
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    train_pass(model, trajectories, args, device, optimizer)  # warm-up: the same shapes (cuBLAS plans, allocator)
    reset_peak(device)
    passed = train_pass(model, trajectories, args, device, optimizer)
    passed["peak_gb"] = peak_gb(device)
    seconds = passed["forward_s"] + passed["backward_s"]
    passed["tok_s"] = round(passed["tokens"] / seconds, 1)
    flops = model_flops(model, passed)
    passed["tflops"] = round(flops / seconds / 1e12, 2)
    if facts.get("bf16_tflops"):
        passed["mfu_measured_peak"] = round(flops / seconds / 1e12 / facts["bf16_tflops"], 3)
    if facts.get("datasheet_bf16_tflops"):
        passed["mfu_datasheet"] = round(flops / seconds / 1e12 / facts["datasheet_bf16_tflops"], 3)
    out["train"] = passed
    print(f"[scale] {out['shape']} train: {json.dumps(passed)}", flush=True)
    # part 4: one whole step (rollout, pass, optimizer) against its parts
    reset_peak(device)
    began = time.perf_counter()
    rollout_s, result = rollout_episodes(model, tokenizer, args, device, games_dir, "static")
    step_pass = train_pass(model, result.trajectories, args, device, optimizer)
    step_s = time.perf_counter() - began
    parts = rollout_s + step_pass["forward_s"] + step_pass["backward_s"]
    out["step"] = {"step_s": round(step_s, 3), "rollout_s": round(rollout_s, 3), "forward_s": step_pass["forward_s"],
                   "backward_s": step_pass["backward_s"], "optimizer_s": step_pass["optimizer_s"],
                   "ratio": round(step_s / parts, 3), "peak_gb": peak_gb(device)}
    print(f"[scale] {out['shape']} step: {json.dumps(out['step'])}", flush=True)


def table(results: dict) -> str:
    lines = ["| shape | engine | decode tok/s | of bound | prefill tok/s | rollout tok/s | train tok/s | MFU | "
             "step / parts | peak GB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for shape in results["shapes"]:
        for engine in [e for e in ENGINES if e in shape["decode"]]:
            d, r = shape["decode"][engine], shape["rollout"].get(engine, {})
            train = shape.get("train", {}) if engine == "static" else {}
            step = shape.get("step", {}) if engine == "static" else {}
            mfu = train.get("mfu_measured_peak", "")
            lines.append(f"| {shape['shape']} | {engine} | {d['decode_tok_s']} | {d.get('of_bound', '')} | "
                         f"{d['prefill_tok_s']} | {r.get('decoded_tok_s', '')} | {train.get('tok_s', '')} | {mfu} | "
                         f"{step.get('ratio', '')} | {max(x for x in (d['peak_gb'], r.get('peak_gb'), train.get('peak_gb'), step.get('peak_gb')) if x is not None) if d['peak_gb'] is not None else ''} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="qwen3-0.6b,qwen3-1.7b,qwen3-4b")
    parser.add_argument("--rows", type=int, default=64, help="decode rows, rollout episodes, training rows")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4, help="learner turns per recall episode")
    parser.add_argument("--turn-tokens", type=int, default=64, help="tokens per recall turn")
    parser.add_argument("--train-rows", type=int, default=16,
                        help="rows per forward/backward (0: all at once; 64 rows of the 1.7B shape need more than "
                             "the H200's 140 GB of activations without checkpointing)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded model's)")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help="engines to measure (dynamic,static,static-compile: playpen's; hf-continuous, "
                             "hf-continuous-merged: transformers' continuous batching, decode only)")
    parser.add_argument("--parts", default=",".join(PARTS), help="parts to run (decode,rollout,train)")
    parser.add_argument("--lora-bf16", action="store_true", help="LoRA weights in bf16 (peft's default: fp32)")
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's table of each decode call")
    parser.add_argument("--quick", action="store_true", help="CPU smoke test: the tiny shape, a few rows, greedy")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.rows, args.prompt_tokens, args.new_tokens = "tiny", 4, 24, 6
        args.rounds, args.turn_tokens, args.temperature, args.train_rows = 2, 5, 0.0, 0
    args.engine_list = [e for e in args.engines.split(",") if e]
    if not args.engine_list or any(e not in ENGINES for e in args.engine_list):
        parser.error(f"--engines takes {', '.join(ENGINES)} (comma-separated), got {args.engines!r}")
    args.part_list = [p for p in args.parts.split(",") if p]
    if "decode" not in args.part_list or any(p not in PARTS for p in args.part_list) \
            or ("train" in args.part_list and ("rollout" not in args.part_list or "static" not in args.engine_list)):
        parser.error(f"--parts takes {', '.join(PARTS)} (comma-separated, decode always; train needs rollout and "
                     f"the static engine), got {args.parts!r}")
    unknown = [s for s in args.shapes.split(",") if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; valid: {', '.join(SHAPES)}")
    import torch
    from transformers import AutoTokenizer
    if args.tokenizer is None:
        from playpen.default_model import prepare_default_model
        args.tokenizer = str(prepare_default_model())
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.quick else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    facts = device_facts(device)
    print(f"[scale] {json.dumps(facts)}", flush=True)
    games_dir = Path(tempfile.mkdtemp(prefix="playpen-scale-"))
    write_recall_game(games_dir, args.rows, args.rounds)
    results = {"date": datetime.now().isoformat(timespec="seconds"), "args": vars(args), "facts": facts,
               "torch": torch.__version__, "python": platform.python_version(), "shapes": []}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"scale-{datetime.now():%Y-%m-%d-%H%M}.json"
    try:
        for shape in args.shapes.split(","):
            results["shapes"].append(measure_shape(shape, tokenizer, args, device, dtype, facts, games_dir))
            path.write_text(json.dumps(results, indent=1))  # each shape kept as it finishes
    finally:
        shutil.rmtree(games_dir, ignore_errors=True)
    print(table(results))
    print(f"[scale] results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
