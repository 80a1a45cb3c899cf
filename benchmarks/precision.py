"""Training steps in fp32 and in bf16 autocast, side by side, on smol-135m (``--precision``).

    python benchmarks/precision.py            # writes results/precision-<date>.json
    python benchmarks/precision.py --quick    # the tiny random model, 2 steps each; nothing written

Each variant runs in a process of its own (its peak memory is its own), one torch thread
unless OMP_NUM_THREADS says otherwise:

- ``sft-fp32``, ``sft-bf16``: ``playpen run sft`` on taboo's programmatic demonstrations (both
  roles, ``--demo-max-instances 4``), ``--max-steps`` steps of ``--batch-size`` rows, LoRA r 16;
- ``grpo-fp32``, ``grpo-bf16``: ``playpen run grpo-teacher`` as taboo's guesser beside the
  programmatic describer (2 groups of 8, ``-T 1.0``, ``-L 24``), ``--grpo-steps`` steps,
  playpen's engine sampling in fp32 (only the training step's precision changes).

Per variant: the seconds of each step after the first (SFT: between logged steps; GRPO: the
step's ``time/step_s`` and its forward, backward and log-prob passes), peak RSS, and every
step's loss and gradient norm. The loss check: the same seed gives both precisions the same
rows and the same starting weights, so step 1's loss and gradient norm differ by bf16's
rounding alone (later steps also by the diverging weights).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from harness import RESULTS, machine

VARIANTS = {"sft-fp32": ("sft", "fp32"), "sft-bf16": ("sft", "bf16"),
            "grpo-fp32": ("grpo", "fp32"), "grpo-bf16": ("grpo", "bf16")}


def command(name: str, args, work: Path) -> list[str]:
    trainer, precision = VARIANTS[name]
    common = ["-l", args.learner, "--precision", precision, "--save-steps", "1000", "--no-evaluate",
              "--models-dir", str(work / "models"), "--seed", "1"]
    if trainer == "sft":
        return ["run", "sft", *common, "--games", "taboo", "--demo-max-instances", "1" if args.quick else "4",
                "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size), "-o", str(work / "demos")]
    return ["run", "grpo-teacher", *common, "-t", "programmatic", "-T", "1.0", "-L", "24", "--games", "taboo",
            "--roles", "Guesser", "--num-generations", "2" if args.quick else "8", "--groups-per-step",
            "1" if args.quick else "2", "--max-steps", str(args.grpo_steps), "--stop-without-signal", "0",
            "-o", str(work / "records")]


def run_variant(name: str, args) -> dict:
    """One variant's run in this process; its steps from the run's log."""
    from click.testing import CliRunner
    from playpen.cli import cli
    started_in = Path.cwd()
    work = Path(tempfile.mkdtemp(prefix=f"playpen-precision-{name}-"))
    if Path("model_registry.json").exists():  # the learner as the folder it was started in names it
        shutil.copy("model_registry.json", work)
    os.chdir(work)
    argv = command(name, args, work)
    result = CliRunner().invoke(cli, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"{name}: exit {result.exit_code}: {result.output[-2000:]}")
    log = [json.loads(line) for line in next(work.rglob("playpen-log.jsonl")).read_text().splitlines()]
    steps = [r for r in log if r.get("event") == "train_step"]
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
           + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    row = dict(variant=name, trainer=VARIANTS[name][0], precision=VARIANTS[name][1], command="playpen " + " ".join(argv),
               steps=len(steps), loss=[round(s["train/loss"], 5) for s in steps],
               grad_norm=[round(s["train/grad_norm"], 5) for s in steps if "train/grad_norm" in s],
               peak_rss_mb=round(rss))
    if VARIANTS[name][0] == "sft":  # wall seconds between logged steps: the steps after the first
        times = [b["time"] - a["time"] for a, b in zip(steps, steps[1:])]
        row.update(step_s=round(sum(times) / len(times), 2) if times else None,
                   tokens_per_s=round(sum(s["train/tokens_per_s"] for s in steps[1:]) / max(1, len(steps) - 1), 1))
    else:
        later = steps[1:] or steps
        for key in ("time/step_s", "time/rollout_s", "time/forward_s", "time/backward_s", "time/logprob_s"):
            values = [float(s[key]) for s in later if s.get(key) is not None]
            row[key.split("/")[1]] = round(sum(values) / len(values), 2) if values else None
    os.chdir(started_in)
    shutil.rmtree(work, ignore_errors=True)  # the run's checkpoints (about 0.6 GB at full size): the row holds its numbers
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted(VARIANTS), help="run one variant here (the parent runs all)")
    parser.add_argument("--only", default=None, help="comma-separated variants [default: all]")
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--max-steps", type=int, default=6, help="SFT steps")
    parser.add_argument("--batch-size", type=int, default=8, help="SFT rows a step")
    parser.add_argument("--grpo-steps", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.learner, args.max_steps, args.batch_size, args.grpo_steps = "tiny-random", 2, 2, 2
    if args.variant:
        print("RESULT " + json.dumps(run_variant(args.variant, args)), flush=True)
        return 0
    names = args.only.split(",") if args.only else list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        print(f"precision.py: --only: unknown variant {unknown[0]!r} (valid: {', '.join(VARIANTS)})", file=sys.stderr)
        return 2
    rows = []
    for name in names:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--variant", name, "-l", args.learner,
                               "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size),
                               "--grpo-steps", str(args.grpo_steps)], capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1")))
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{done.stderr[-3000:]}", file=sys.stderr, flush=True)
            return 1
        rows.append(json.loads(line[7:]) | {"wall_s": round(time.perf_counter() - started, 1)})
        r = rows[-1]
        print(f"{name:10} {r['steps']} steps, {r.get('step_s')} s a step after the first, peak RSS "
              f"{r['peak_rss_mb']} MB, loss {r['loss'][:3]}", flush=True)
    by = {r["variant"]: r for r in rows}
    ratios = {}
    for trainer in ("sft", "grpo"):
        fp32, bf16 = by.get(f"{trainer}-fp32"), by.get(f"{trainer}-bf16")
        if fp32 and bf16 and fp32.get("step_s") and bf16.get("step_s"):
            ratios[f"{trainer}: fp32 step / bf16 step"] = round(fp32["step_s"] / bf16["step_s"], 2)
            if fp32["loss"][0]:
                ratios[f"{trainer}: step-1 loss, bf16 / fp32 - 1"] = round(bf16["loss"][0] / fp32["loss"][0] - 1, 5)
            if fp32["grad_norm"] and bf16["grad_norm"] and fp32["grad_norm"][0]:
                ratios[f"{trainer}: step-1 grad norm, bf16 / fp32 - 1"] = round(
                    bf16["grad_norm"][0] / fp32["grad_norm"][0] - 1, 5)
    for key, value in ratios.items():
        print(f"{key}: {value}", flush=True)
    if not args.quick:
        out = RESULTS / f"precision-{datetime.now():%Y%m%d-%H%M%S}.json"
        out.write_text(json.dumps(dict(date=datetime.now().isoformat(timespec="seconds"), machine=machine(),
                                       settings=dict(learner=args.learner, max_steps=args.max_steps,
                                                     batch_size=args.batch_size, grpo_steps=args.grpo_steps),
                                       rows=rows, ratios=ratios), indent=1))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
