"""Where the drift is (issue 39): for every finished configuration of a protocol run, the change
in log-likelihood of its warm-up's own greedy test replies, per setting, item by item
(playpen/evaluation/retention.py; forward passes only, nothing is played).

    python benchmarks/protocol.py --drift-only --seeds 1 --out benchmarks/results/protocol-trust \\
        --methods null-expert-iteration-describer,role-matched-sft --settings taboo/guesser,referencegame/follower

For each seed the warm-up (method ``sft``) is the start: its greedy episodes of the test split
(the records its one test play left in ``<out>/work/results``) give the replies, the learner's
turns only. Every other finished configuration's final adapter scores them; a negative mean
change per token is drift away from what the start does. On a setting a method does not train,
any change is forgetting. Written to ``<out>/drift--seed<S>.json`` (per item) and printed.
"""
from __future__ import annotations

from pathlib import Path

from protocol_forgetting import final_configurations
from protocol_report import WARM_UP, run_folder

from playpen.data import conversational_records
from playpen.evaluation.retention import adapters_logprobs, drift, turn_rows
from playpen.files import write_json
from playpen.models import load_model_by_name


def run_drift(seeds, names, args, out: Path, work: Path, trains: dict) -> None:
    """``trains``: method -> the games it trains (a method not in it: unknown)."""
    learner = load_model_by_name(args.learner, role="learner")
    for seed in seeds:
        found = final_configurations(seed, names, out, work)
        if not found:
            print(f"== drift: seed {seed} has no finished warm-up test in {out}", flush=True)
            continue
        adapters = {name: adapter for name, adapter, _, _ in found}
        report = {"learner": args.learner, "seed": seed, "adapters": {k: str(v) for k, v in adapters.items()},
                  "settings": {}}
        for setting in args.settings:
            folder = work / "results" / run_folder(f"seed{seed}-{WARM_UP}", "test", setting.name)
            if not folder.exists():
                print(f"== drift: seed {seed} {setting.name}: no warm-up test records in {folder}", flush=True)
                continue
            records, _ = conversational_records(folder)
            rows = turn_rows(learner.tokenizer, records)
            values = adapters_logprobs(learner.model, rows, adapters)
            changes = drift(values, WARM_UP)
            for name, row in changes.items():
                row["trains_this_game"] = setting.game in trains[name] if name in trains else None
            report["settings"][setting.name] = {"turns": len(rows), "changes": changes, "items": values}
            start = next(iter(changes.values()))["start_mean_logprob"] if changes else float("nan")
            print(f"== drift: seed {seed} {setting.name}: {len(values[WARM_UP])} conversations, {len(rows)} turns, "
                  f"start {start:.3f} nats/token", flush=True)
            for name, row in changes.items():
                trained = {True: "trained", False: "not trained", None: "?"}[row["trains_this_game"]]
                print(f"   {name:34s} {row['mean_change']:+.4f}  rose {row['rose']:3d} fell {row['fell']:3d}  "
                      f"p {row['p']:.4f}  ({trained})", flush=True)
        write_json(out / f"drift--seed{seed}.json", report)
