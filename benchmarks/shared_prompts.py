"""GRPO steps with and without shared prompt passes (``--share-prompts``), side by side.

    python benchmarks/shared_prompts.py                 # 6 steps per variant (~5 minutes on 2 cores)
    python benchmarks/shared_prompts.py --steps 10

The same GRPO run (smol-135m, Instruction Follower with the programmatic giver on
referencegame, 8 episodes x 2 groups per step, each group's episodes on 3 grid orders:
``--augment-variants 3``, temperature 1.0, seed 42) in three variants, one after the
other, each a ``playpen run`` child process of its own (harness.py's run_trainer runs them, as for memory.py):

- ``rows``: micro-batches of 1 row, no sharing (the memory-safe default before prompts
  were shared);
- ``batch``: micro-batches of 8 rows, no sharing (TRL's one pass over every row);
- ``shared``: micro-batches of 8 rows whose prompts run once (``--share-prompts``, the
  default).

Printed per variant: the median over steps 2..N (step 1 warms up) of the step's time,
its rollout, training forward and backward, and its peak resident memory; then the
ratios against ``shared`` and step 1's loss and gradient norm (the rollouts of step 1
are the same in every variant — same seed, same weights — so equal numbers show the same
computation). Results: ``benchmarks/results/shared-prompts-<date>.json``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness import REPO_ROOT, SFT_ADAPTER, machine, run_trainer, workspace  # the benchmarks' shared module

COMMON = "--augment-variants 3 --max-concurrent-episodes 16"
VARIANTS = {
    "rows": "--micro-batch-size 1 --share-prompts false",
    "batch": "--micro-batch-size 8 --share-prompts false",
    "shared": "--micro-batch-size 8 --share-prompts true",
}
PHASES = ("time/step_s", "time/rollout_s", "time/forward_s", "time/backward_s", "memory/peak_rss_mb")


def first_step(run_dir: Path) -> dict:
    from playpen.training.common.plotting import read_log
    steps = read_log(run_dir)
    return {k: steps[0].get(k) for k in ("train/loss", "train/grad_norm")} if steps else {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--turn-tokens", type=int, default=40, help="-L: tokens per follower turn")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--init-adapter", default=str(SFT_ADAPTER),
                        help="start every variant from this adapter (default: benchmarks/learning.py's SFT warm-up; "
                             "from the bare model the follower rarely plays, its groups carry no signal and the "
                             "loss is 0)")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or args.steps < 2:
        print(f"shared_prompts.py: unknown variant '{unknown[0]}'; choose from {', '.join(VARIANTS)}" if unknown
              else "shared_prompts.py: --steps must be >= 2 (step 1 warms up)", file=sys.stderr)
        return 2
    init = f"--init-adapter {args.init_adapter}" if args.init_adapter and Path(args.init_adapter).exists() else ""
    if not init:
        print(f"[shared] no adapter at {args.init_adapter}: every variant starts from the bare model "
              f"(run benchmarks/learning.py --methods sft first for a signal in step 1)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="playpen-shared-") as tmp:
        root = workspace(Path(tmp), args.learner)
        for name in names:
            run_args = argparse.Namespace(turn_tokens=args.turn_tokens, steps=args.steps, other_steps=0,
                                          learner=args.learner, compare=False,
                                          extra={"grpo": f"{COMMON} {init} {VARIANTS[name]}"})
            result = run_trainer("grpo", run_args, root)
            if "error" in result:
                print(f"[shared] {name} failed (exit {result['error']})")
                return 1
            later = result["steps"][1:]
            result["median"] = {k: round(statistics.median(s[k] for s in later if k in s), 2) for k in PHASES
                                if any(k in s for s in later)}
            result["first_step"] = first_step(root / "models" / "grpo+lora" / args.learner / "programmatic")
            results[name] = result
    lines = [f"{'variant':<8} {'step s':>7} {'rollout':>8} {'forward':>8} {'backward':>9} {'peak MB':>8} "
             f"{'step-1 loss':>12} {'step-1 grad norm':>17}"]
    for name, r in results.items():
        m, f = r["median"], r["first_step"]
        lines.append(f"{name:<8} {m['time/step_s']:>7.2f} {m['time/rollout_s']:>8.2f} {m['time/forward_s']:>8.2f} "
                     f"{m['time/backward_s']:>9.2f} {m['memory/peak_rss_mb']:>8.0f} "
                     f"{f.get('train/loss', float('nan')):>12.6f} {f.get('train/grad_norm', float('nan')):>17.6f}")
    ratios = {}
    if "shared" in results:
        base = results["shared"]["median"]
        for name, r in results.items():
            if name == "shared":
                continue
            m = r["median"]
            ratios[name] = {
                "step": round(m["time/step_s"] / base["time/step_s"], 2),
                "forward_backward": round((m["time/forward_s"] + m["time/backward_s"])
                                          / (base["time/forward_s"] + base["time/backward_s"]), 2),
                "peak_rss": round(m["memory/peak_rss_mb"] / base["memory/peak_rss_mb"], 2)}
            lines.append(f"{name} / shared: step {ratios[name]['step']}x, forward+backward "
                         f"{ratios[name]['forward_backward']}x, peak RSS {ratios[name]['peak_rss']}x")
    print("\n".join(lines))
    from playpen.files import write_json
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) / f"shared-prompts-{stamp}.json"
    write_json(out, {"date": stamp, "args": vars(args), "machine": machine(), "results": results,
                     "ratios_against_shared": ratios}, indent=1)
    print(f"[shared] results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
