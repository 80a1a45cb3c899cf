"""CPU threads under `playpen eval`: torch with ONE thread vs torch's default, side by side.

    python benchmarks/threads.py [--repeats 3] [--model smol-135m]

Plays the same evaluation in one process with the same loaded model (greedy, so every
run generates the same tokens), switching only ``torch.set_num_threads`` between runs:

  short  many short calls: the toy game ``probes`` (tests/toygames; 2 turns + 2 in-step
         side calls per episode, 3 episodes) and ``relay``'s ``lenient`` experiment
         (self-play, re-prompts after format errors), at 8 new tokens per call
  long   few long generations: ``referencegame``, 1 instance per experiment (5 episodes,
         batched), at 192 new tokens per call

Runs alternate (1, default, 1, default, ...) so that a busy machine slows both alike; the
median wall time of each is reported with the ratio default / 1 (> 1: one thread is
faster). Prints a table and writes benchmarks/results/threads-<date>.json. The numbers
and the default they chose are in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORKLOADS = {
    "short": dict(games=["probes", "relay"], max_tokens=8, max_instances=None),
    "long": dict(games=["referencegame"], max_tokens=192, max_instances=1),
}


def run_once(model, workload: dict, threads: int, results_dir: Path) -> float:
    from playpen.evaluation import evaluate
    model.set_gen_args(temperature=0.0, max_tokens=workload["max_tokens"])
    started = time.perf_counter()
    evaluate([model], workload["games"], results_dir=results_dir, max_instances=workload["max_instances"],
             run_name=f"threads-{threads}", overwrite=True, threads=threads)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per thread setting and workload")
    parser.add_argument("--model", default="smol-135m")
    parser.add_argument("--workloads", default="short,long")
    args = parser.parse_args(argv)

    import torch
    default_threads = torch.get_num_threads()
    load_before = os.getloadavg()
    os.chdir(REPO)  # the workspace registries name the model
    from playpen.models import load_model_by_name
    model = load_model_by_name(args.model, gen_args=dict(temperature=0.0, max_tokens=8))
    torch.set_num_threads(default_threads)  # whatever loading did
    workspace = Path(tempfile.mkdtemp(prefix="playpen-threads-"))
    (workspace / "game_registry.json").write_text(json.dumps(
        [{"benchmark_path": str(REPO / "tests" / "toygames")}, {"benchmark_path": str(REPO / "playpen" / "games")}]))
    os.chdir(workspace)  # games: the toy games and playpen's
    settings = [1, default_threads]
    rows = {}
    for workload in args.workloads.split(","):
        run_workload = WORKLOADS[workload]
        run_once(model, run_workload, default_threads, workspace / "warmup")  # caches, lazy imports
        seconds = {n: [] for n in settings}
        for repeat in range(args.repeats):
            for threads in settings if repeat % 2 == 0 else reversed(settings):
                seconds[threads].append(run_once(model, run_workload, threads, workspace / "results"))
                print(f"[threads] {workload} threads={threads} run {repeat + 1}: {seconds[threads][-1]:.1f} s",
                      flush=True)
        medians = {n: statistics.median(v) for n, v in seconds.items()}
        rows[workload] = dict(games=run_workload["games"], max_tokens=run_workload["max_tokens"],
                              seconds=seconds, median_seconds=medians,
                              ratio_default_over_1=medians[default_threads] / medians[1])
    print(f"\nplaypen eval, {args.model}, torch threads 1 vs default ({default_threads}); "
          f"median of {args.repeats} alternating runs; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'workload':<8} {'games':<22} {'tokens':>6} {'1 thread s':>11} {f'{default_threads} threads s':>12} "
          f"{'default/1':>10}")
    for workload, row in rows.items():
        print(f"{workload:<8} {','.join(row['games']):<22} {row['max_tokens']:>6} "
              f"{row['median_seconds'][1]:>11.1f} {row['median_seconds'][default_threads]:>12.1f} "
              f"{row['ratio_default_over_1']:>10.2f}")
    report = dict(date=datetime.now().isoformat(timespec="seconds"), machine=platform.node(),
                  cpu_count=os.cpu_count(), default_threads=default_threads, torch=torch.__version__,
                  python=sys.version.split()[0], model=args.model, repeats=args.repeats,
                  load_average_before=load_before, load_average_after=os.getloadavg(), workloads=rows)
    out = REPO / "benchmarks" / "results" / f"threads-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
