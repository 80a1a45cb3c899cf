"""Resident memory (and GRPO's time) per training step of every trainer on smol-135m.

    python benchmarks/memory.py                                  # SFT, SPIN, DPO, GRPO: a few steps each
    python benchmarks/memory.py --trainers grpo --steps 20       # GRPO: peak per step and growth over 20 steps
    python benchmarks/memory.py --trainers grpo --steps 4 --compare   # + step time vs rollout + one fwd/bwd

Each trainer runs as a user runs it (``playpen run <trainer> -l smol-135m
...``) in a child process of its own (its peak is its own) inside a temporary workspace,
on referencegame, with options that give the shapes of issue 11: GRPO as Instruction
Follower with the programmatic giver, 8 episodes × 2 groups = 16 trajectories per step of
up to ``--max-length`` tokens (``-L`` sets the turn's budget so that prompt + turn fill it);
SFT at its default batch (8 conversations); SPIN and DPO at their default batch (4 pairs;
DPO trains on the pairs SPIN wrote). Everything else is the trainer's default unless given
with ``--extra TRAINER=OPTIONS``.

Per step the run's ``playpen-log.jsonl`` has ``memory/peak_rss_mb`` (the step's own peak
resident memory: VmHWM reset as the step begins) and, for GRPO, ``time/*_s``. Growth over
the run = the highest peak of its second half / the highest peak of its first half − 1
(a constant cost is 0 %; trajectory lengths vary from step to step).

``--compare`` (GRPO): after each logged step, the same process runs ONE forward and
backward pass, without gradient checkpointing, over exactly that step's tokens (its rows,
in the step's micro-batches; gradients discarded), and reports the step's time against its
rollout time + that pass: the cost of everything GRPO adds (target ≤ 1.3×).

Results: ``benchmarks/results/memory-<trainers>-<date>.json`` and a table on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from harness import COMPARE_FILE, RUNS, machine, run_trainer, workspace  # the benchmarks' shared module

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))


def table(results: list[dict]) -> str:
    lines = [f"{'trainer':<6} {'steps':>5} {'peak RSS MB':>11} {'step 1':>8} {'last':>8} {'growth':>7} "
             f"{'s/step':>7} {'step/(rollout+fwd+bwd)':>22}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['trainer']:<6} failed (exit {r['error']})")
            continue
        times = [s.get("time/step_s") for s in r["steps"] if s.get("time/step_s")]
        if not times:  # SFT, SPIN, DPO: the wall time between logged steps (the first step's start is not logged)
            stamps = [s["time"] for s in r["steps"] if "time" in s]
            times = [b - a for a, b in zip(stamps, stamps[1:])]
        per_step = f"{sum(times) / len(times):.1f}" if times else "-"
        ratio = r.get("step_over_rollout_plus_fwd_bwd", "-")
        lines.append(f"{r['trainer']:<6} {r['num_steps']:>5} {r['peak_rss_mb']:>11.0f} {r['first_step_peak_mb']:>8.0f} "
                     f"{r['last_step_peak_mb']:>8.0f} {r['growth_percent']:>6.1f}% {per_step:>7} {ratio:>22}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- --compare (in the child)

def reference_pass(trainer, batch: dict) -> float:
    """Seconds of one plain forward + backward (no gradient checkpointing) over ``batch``
    (a step's rows as TRL prepared them), in the step's micro-batches; gradients discarded."""
    import torch
    from trl.models.utils import disable_gradient_checkpointing
    model, micro = trainer.model, trainer.args.per_device_train_batch_size
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    keep = batch["completion_ids"].size(1)
    began = time.perf_counter()
    with disable_gradient_checkpointing(model, trainer.args.gradient_checkpointing_kwargs):
        for start in range(0, ids.size(0), micro):
            labels = ids[start:start + micro].masked_fill(mask[start:start + micro] == 0, -100)
            labels[:, :-keep] = -100
            out = model(input_ids=ids[start:start + micro], attention_mask=mask[start:start + micro],
                        labels=labels, fused_lm_head=True)
            out.log_probs.sum().backward()
    seconds = time.perf_counter() - began
    model.zero_grad(set_to_none=True)
    return seconds


def child_compare(argv: list[str]) -> int:
    """``playpen run ...`` in this process, with GRPO's trainer measuring :func:`reference_pass`
    after every logged step into ``<run>/compare.jsonl``."""
    from playpen.training import trl_trainers

    class Comparing(trl_trainers.PlaypenGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            self._step_batch = out
            return out

        def log(self, logs, *args, **kwargs):
            step = self.clock.metrics() if "loss" in logs else None
            super().log(logs, *args, **kwargs)
            if step is None or getattr(self, "_step_batch", None) is None:
                return
            fwd_bwd = reference_pass(self, self._step_batch)
            rollout = step.get("time/rollout_s", 0.0)
            record = {"step": int(self.state.global_step), "step_s": step["time/step_s"], "rollout_s": rollout,
                      "fwd_bwd_s": round(fwd_bwd, 3), "ratio": round(step["time/step_s"] / (rollout + fwd_bwd), 3),
                      "rows": int(self._step_batch["completion_ids"].size(0)),
                      "tokens": int(self._step_batch["prompt_ids"].size(1) + self._step_batch["completion_ids"].size(1))}
            with open(Path(self.args.output_dir) / COMPARE_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            self._step_batch = None

    trl_trainers.PlaypenGRPOTrainer = Comparing  # what the GRPO trainers build (imported when they run)
    from playpen.cli import main
    return main(argv)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child-compare"]:
        return child_compare(argv[2:] if argv[1:2] == ["--"] else argv[1:]) or 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainers", default="sft,spin,dpo,grpo", help="comma-separated: " + ", ".join(RUNS))
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps (20 for the growth check)")
    parser.add_argument("--other-steps", type=int, default=4, help="steps of SFT, SPIN and DPO")
    parser.add_argument("--turn-tokens", type=int, default=160,
                        help="-L: tokens per generated turn (referencegame's follower prompt is ~350 tokens: "
                             "160 gives trajectories of up to ~512)")
    parser.add_argument("--compare", action="store_true", help="GRPO: step time vs rollout + one fwd/bwd")
    parser.add_argument("--extra", action="append", default=[], metavar="TRAINER=OPTIONS",
                        help="more options for one trainer, e.g. grpo='--micro-batch-size 2'")
    parser.add_argument("--keep", help="run in this folder (kept) instead of a temporary one")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    names = [n for n in args.trainers.split(",") if n]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        print(f"memory.py: unknown trainer '{unknown[0]}'; choose from {', '.join(RUNS)}", file=sys.stderr)
        return 2
    extra = {}
    for item in args.extra:
        name, _, options = item.partition("=")
        if name not in RUNS:
            print(f"memory.py: --extra {item!r}: expected TRAINER=OPTIONS with TRAINER in {', '.join(RUNS)}",
                  file=sys.stderr)
            return 2
        extra[name] = f"{extra.get(name, '')} {options}".strip()
    args.extra = extra
    if "dpo" in names and "spin" not in names and not args.keep:
        names.insert(names.index("dpo"), "spin")  # DPO trains on the pairs SPIN writes
    with tempfile.TemporaryDirectory(prefix="playpen-memory-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        workspace(root, args.learner)
        results = [run_trainer(name, args, root) for name in names]
    from playpen.files import write_json
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) / f"memory-{'-'.join(names)}-{stamp}.json"
    write_json(out, {"date": stamp, "args": {k: v for k, v in vars(args).items()}, "machine": machine(),
                     "results": results}, indent=1)
    print(table(results))
    print(f"[memory] results: {out}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
