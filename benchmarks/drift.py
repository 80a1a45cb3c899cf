"""Where the drift is (issue 39): for every finished configuration of a protocol run, the change
in log-likelihood of its warm-up's own greedy test replies, per setting, item by item
(playpen/evaluation/retention.py; forward passes only, nothing is played).

    python benchmarks/drift.py --out benchmarks/results/protocol-trust --seeds 1
    python benchmarks/drift.py --out benchmarks/results/protocol --seeds 1,2,3 --methods continued-sft,expert-iteration

For each seed the warm-up (method ``sft``) is the start: its greedy episodes of the test split
(the records its one test play left in ``<out>/work/results``) give the replies, the learner's
turns only. Every other configuration's final adapter scores them; a negative mean change per
token is drift away from what the start does. Which settings a method trains is in
``protocol.py``'s METHODS: on a setting it does not train, any change is forgetting. Written
to ``<out>/drift.json`` (per item) and printed as a table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv=None) -> int:
    from protocol import METHODS, SETTINGS, WARM_UP
    from protocol_forgetting import final_configurations
    from protocol_report import run_folder
    from playpen.data import conversational_records
    from playpen.evaluation.retention import adapters_logprobs, drift, turn_rows
    from playpen.models import load_model_by_name

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="a protocol run's folder (its work/ beside it)")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--methods", default=",".join(m for m in METHODS if m != WARM_UP))
    parser.add_argument("--settings", default="taboo/guesser,referencegame/follower")
    parser.add_argument("-l", "--learner", default="smol-135m")
    args = parser.parse_args(argv)
    out, work = Path(args.out), Path(args.out) / "work"
    names = [m for m in args.methods.split(",") if m]
    settings = [s for s in SETTINGS if s.name in args.settings.split(",")]
    learner = load_model_by_name(args.learner, role="learner")
    report = {"learner": args.learner, "seeds": {}}
    for seed in (int(s) for s in args.seeds.split(",")):
        found = final_configurations(seed, names, out, work)
        if not found:
            print(f"seed {seed}: no finished warm-up test in {out}", flush=True)
            continue
        adapters = {name: adapter for name, adapter, _, _ in found}
        report["seeds"][seed] = {}
        for setting in settings:
            folder = work / "results" / run_folder(f"seed{seed}-{WARM_UP}", "test", setting.name)
            if not folder.exists():
                print(f"seed {seed} {setting.name}: the warm-up's test records are not in {folder}", flush=True)
                continue
            records, _ = conversational_records(folder)
            rows = turn_rows(learner.tokenizer, records)
            values = adapters_logprobs(learner.model, rows, adapters)
            changes = drift(values, WARM_UP)
            for name, row in changes.items():
                row["trains_this_game"] = setting.game in METHODS[name].trains if name in METHODS else None
            report["seeds"][seed][setting.name] = {"changes": changes, "items": values}
            print(f"seed {seed} {setting.name} ({len(records)} conversations, {len(rows)} turns): "
                  f"start {changes and next(iter(changes.values()))['start_mean_logprob']:.3f} nats/token", flush=True)
            for name, row in changes.items():
                trained = {True: "trained", False: "not trained", None: "?"}[row["trains_this_game"]]
                print(f"  {name:34s} {row['mean_change']:+.4f}  rose {row['rose']:3d} fell {row['fell']:3d}  "
                      f"p {row['p']:.4f}  ({trained})", flush=True)
    target = out / "drift.json"
    target.write_text(json.dumps(report, indent=1))
    print(f"-> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
