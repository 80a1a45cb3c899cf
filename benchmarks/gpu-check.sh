#!/usr/bin/env bash
# The static engine's decode step with and without torch.compile, at the Qwen3-1.7B shape, on one GPU.
#
#   device tool (timeout_s 540):  bash benchmarks/gpu-check.sh
#   any GPU box:                  OUT=/tmp/gpu-check PYTHON=.venv/bin/python bash benchmarks/gpu-check.sh
#
# Writes $OUT/decode/scale-*.json, $OUT/rollout/scale-*.json and $OUT/gpu-check.log. Needs torch with
# CUDA, transformers and peft in $PYTHON (default: python; earlier device runs carried wheels).
#
# What it measures (benchmarks/scale.py, random weights built from the published config: no download,
# the embedded model's tokenizer only): 64 rows of 512-632 prompt tokens, 128 sampled tokens each
# (T 1.0), bf16, LoRA r16 merged for decoding, with the `static` engine (captured CUDA graphs: before)
# and `static-compile` (each step compiled by torch.compile first, then captured: after), side by side
# in one process: decode tok/s, the share of the memory-bandwidth bound, the warm-up's compile and
# capture seconds, the graphs compiled. Then the same for 64 episodes of the recall game (rollout
# part), in a second process with its own time limit, so that a slow compile there cannot cost the
# decode numbers. Issue 31's target: decode at batch 64 on the 1.7B shape >= 40 % of the bound.
# Budget: under 8 minutes on an H100: each process is capped at 3.5 minutes (compiling ~1-2 of them).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to a folder for the results}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
PYTHON=${PYTHON:-python}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG"
"$PYTHON" -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$LOG"
# decode: the number the issue's target is about
timeout 210 "$PYTHON" benchmarks/scale.py --shapes qwen3-1.7b --rows 64 --engines static,static-compile \
    --parts decode --lora-bf16 --out "$OUT/decode" 2>&1 | tail -n 40 | tee -a "$LOG"
echo "decode exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
# rollout: multi-turn episodes (more buckets: rows leave, prompts grow)
timeout 210 "$PYTHON" benchmarks/scale.py --shapes qwen3-1.7b --rows 64 --engines static,static-compile \
    --parts decode,rollout --new-tokens 16 --lora-bf16 --out "$OUT/rollout" 2>&1 | tail -n 40 | tee -a "$LOG"
echo "rollout exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
