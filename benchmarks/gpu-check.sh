#!/usr/bin/env bash
# playpen's static engine at the Qwen3-1.7B shape on one GPU: with and without torch.compile, and against
# transformers' own continuous batching.
#
#   device tool (timeout_s 560):  bash benchmarks/gpu-check.sh
#   any GPU box:                  OUT=/tmp/gpu-check PYTHON=.venv/bin/python bash benchmarks/gpu-check.sh
#
# Writes $OUT/decode/scale-*.json, $OUT/continuous/scale-*.json, $OUT/rollout/scale-*.json and
# $OUT/gpu-check.log. Needs torch with CUDA, transformers and peft in $PYTHON (default: python; earlier
# device runs carried wheels; vLLM's CUDA wheel is too large to carry, so transformers' continuous
# batching is the outside engine here).
#
# What it measures (benchmarks/scale.py, random weights built from the published config: no download,
# the embedded model's tokenizer only): 64 rows of 512-632 prompt tokens, 128 sampled tokens each
# (T 1.0), bf16, LoRA r16 (bf16), decode tok/s, the share of the memory-bandwidth bound and peak GPU
# memory of each engine, side by side in one process per line below, each with its own time limit so that
# a slow compile or a stuck engine cannot cost the other numbers:
# 1. decode: the `static` engine (captured CUDA graphs, adapter merged into a copy: before) and
#    `static-compile` (each step compiled by torch.compile first, then captured: after), with the warm-up's
#    compile and capture seconds and the graphs compiled; issue 31's target: >= 40 % of the bound;
# 2. continuous: `static` against transformers' continuous batching (ContinuousBatchingManager, its
#    defaults but a cache sized to the rows) on the peft model as it is (`hf-continuous`, adapter unmerged)
#    and on a merged copy (`hf-continuous-merged`); each row records the attention and CUDA graphs it chose;
#    issue 41's GPU comparison;
# 3. rollout: 64 episodes of the recall game (multi-turn: rows leave, prompts grow), static and
#    static-compile.
# Budget: 200 + 150 + 170 s at most (compiling takes ~1-2 minutes of the first on an H100), under 9 minutes
# with the version checks; the device tool's 15 minutes also pay for the machine's start.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
PYTHON=${PYTHON:-python}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG"
"$PYTHON" -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$LOG"
# decode: the number the issue's target is about
timeout 200 "$PYTHON" benchmarks/scale.py --shapes qwen3-1.7b --rows 64 --engines static,static-compile \
    --parts decode --lora-bf16 --out "$OUT/decode" 2>&1 | tail -n 40 | tee -a "$LOG"
echo "decode exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
# continuous: playpen's static engine against transformers' continuous batching (decode only: not behind playpen's door)
timeout 150 "$PYTHON" benchmarks/scale.py --shapes qwen3-1.7b --rows 64 \
    --engines static,hf-continuous,hf-continuous-merged --parts decode --lora-bf16 --out "$OUT/continuous" \
    2>&1 | tail -n 40 | tee -a "$LOG"
echo "continuous exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
# rollout: multi-turn episodes (more buckets: rows leave, prompts grow)
timeout 170 "$PYTHON" benchmarks/scale.py --shapes qwen3-1.7b --rows 64 --engines static,static-compile \
    --parts decode,rollout --new-tokens 16 --lora-bf16 --out "$OUT/rollout" 2>&1 | tail -n 40 | tee -a "$LOG"
echo "rollout exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
