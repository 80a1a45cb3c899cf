"""What a GRPO step without signal costs, with and without its forward and backward passes.

    python benchmarks/grpo_no_signal.py [--learner smol-135m] [--steps 2]

Two short runs of ``playpen run grpo-teacher`` on the taboo guesser (the learner guesses, the
programmatic describer is the teacher) with ``--reward binary``: the base model wins no
episode, so every group's rewards are equal and every advantage is 0. With ``--beta 0`` the
trainer skips the forward and backward passes of such micro-batches (``train/no_signal_rows``,
docs/trainers.md "GRPO steps without signal"); with a tiny ``--beta`` (1e-6) the KL term keeps
them, and the reference pass (``time/logprob_s``) runs too. Same seed, same rollouts. Prints
each step's seconds per phase (``time/*_s`` of playpen-log.jsonl, wall) and the CPU seconds
(``time/cpu_s``: not inflated by other jobs) side by side, and writes
benchmarks/results/grpo-no-signal-<date>.json.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime
from pathlib import Path

from harness import RESULTS, machine, run_playpen, workspace

VARIANTS = {"skip (beta 0)": "0", "passes (beta 1e-6)": "1e-6"}
KEYS = ("time/rollout_s", "time/logprob_s", "time/forward_s", "time/backward_s", "time/optimizer_s",
        "time/step_s", "time/cpu_s", "train/no_signal_rows", "train/frac_reward_zero_std")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learner", default="smol-135m")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--groups-per-step", type=int, default=2)
    args = parser.parse_args(argv)

    from playpen.training.common.plotting import read_log

    runs = {}
    with tempfile.TemporaryDirectory(prefix="grpo-no-signal-") as tmp:
        root = workspace(Path(tmp), args.learner)
        for label, beta in VARIANTS.items():
            out = root / f"beta-{beta}"
            run_playpen(["run", "grpo-teacher", "-l", args.learner, "-t", "programmatic", "-L", "30",
                         "--seed", "1", "-o", str(out), "--models-dir", str(out / "models"),
                         "--games", "taboo", "--roles", "Guesser", "--reward", "binary",
                         "--max-steps", str(args.steps), "--save-steps", str(args.steps + 1),
                         "--num-generations", str(args.num_generations),
                         "--groups-per-step", str(args.groups_per_step),
                         "--micro-batch-size", str(args.num_generations),
                         "--beta", beta, "--evaluate", "false"], out / "run.log")
            run_dir = next((out / "models").glob("grpo*/*/*"))
            runs[label] = [{k: s[k] for k in ("step", *KEYS) if k in s} for s in read_log(run_dir)]

    print(f"\n{'':<28}" + "".join(f"{label:>24}" for label in runs))
    for i in range(args.steps):
        for key in KEYS:
            cells = [run[i].get(key) if i < len(run) else None for run in runs.values()]
            if any(c is not None for c in cells):
                print(f"step {i + 1} {key:<21}" + "".join(f"{'-' if c is None else round(c, 2):>24}" for c in cells))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"grpo-no-signal-{datetime.now():%Y%m%d-%H%M%S}.json"
    path.write_text(json.dumps({"args": vars(args), "machine": machine(), "runs": runs}, indent=1))
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
