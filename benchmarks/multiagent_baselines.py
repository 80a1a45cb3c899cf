"""Baselines of the multi-agent games: debate and negotiation on their held-out instances,
programmatic players and smol-135m in every seat.

    python benchmarks/multiagent_baselines.py            # every held-out instance
    python benchmarks/multiagent_baselines.py --quick    # 1 instance per experiment, short replies

Each configuration seats a model in each role and plays the game's held-out set
(``in/instances.json``) through playpen's evaluation (clemcore's runners and scorers, the
numbers ``clem run/score/eval`` give), greedy. Besides % played and quality (mean Main
Score over played episodes) the table shows what each seat achieved:

  negotiation  deal % (of all episodes), mean points of Negotiator A and B (0-10, no deal
               = 0, aborted episodes left out), Pareto-optimal deals %
  debate       truth wins % (= quality), judge correct % (of verdicts given), Debater A
               wins %, concessions %

Writes benchmarks/results/multiagent-baselines-<date>[-quick].json and .md; the records go
to a temporary folder unless --records DIR. Numbers: benchmarks/README.md; their reading: benchmarks/results/LOG.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOL, PROG = "smol-135m", "programmatic"

# game -> [(label, the model of each seat in role order)]
CONFIGS = {
    "negotiation": [
        ("programmatic / programmatic", (PROG, PROG)),
        ("smol-135m self-play", (SMOL, SMOL)),
        ("smol-135m (A) vs programmatic (B)", (SMOL, PROG)),
        ("programmatic (A) vs smol-135m (B)", (PROG, SMOL)),
    ],
    "debate": [
        ("programmatic debaters and judge", (PROG, PROG, PROG)),
        ("smol-135m debaters, programmatic judge", (SMOL, SMOL, PROG)),
        ("programmatic debaters, smol-135m judge", (PROG, PROG, SMOL)),
        ("smol-135m in every seat", (SMOL, SMOL, SMOL)),
    ],
}
# game -> [(column, episode score, how: "all" = over every episode, "played" = over non-aborted)]
COLUMNS = {
    "negotiation": [("deal %", "Success", "all", 100), ("A points", "Negotiator A Points", "played", 1),
                    ("B points", "Negotiator B Points", "played", 1), ("Pareto %", "Pareto Optimal", "played", 100)],
    "debate": [("judge correct %", "Judge Correct", "played", 100), ("A wins %", "Debater A Wins", "played", 100),
               ("conceded %", "Conceded", "played", 100)],
}


def mean(values) -> float:
    values = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return round(statistics.mean(values), 2) if values else math.nan


def seat_columns(run_dir: Path, game: str) -> dict:
    episodes = [json.loads(p.read_text(encoding="utf-8"))["episode scores"]
                for p in sorted((run_dir / game).rglob("scores.json"))]
    out = {}
    for column, key, over, scale in COLUMNS[game]:
        rows = episodes if over == "all" else [e for e in episodes if not e.get("Aborted")]
        value = mean(scale * float(e.get(key, math.nan)) for e in rows)
        out[column] = value
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 instance per experiment, replies of at most 48 tokens")
    parser.add_argument("--games", default="negotiation,debate")
    parser.add_argument("--max-tokens", type=int, default=200, help="tokens per reply of smol-135m")
    parser.add_argument("--records", default="", help="keep the records in this folder (default: a temp folder)")
    args = parser.parse_args(argv)
    games = [g for g in args.games.split(",") if g]
    unknown = [g for g in games if g not in CONFIGS]
    if unknown:
        print(f"multiagent_baselines: unknown game(s) {', '.join(unknown)}; valid: {', '.join(CONFIGS)}",
              file=sys.stderr)
        return 2
    max_instances = 1 if args.quick else None
    max_tokens = 48 if args.quick else args.max_tokens

    os.chdir(REPO)  # the workspace registries name the model
    from playpen.evaluation import evaluate
    from playpen.models import load_model_by_name
    gen_args = dict(temperature=0.0, max_tokens=max_tokens)
    models = {PROG: load_model_by_name(PROG, gen_args=gen_args)}
    records = Path(args.records) if args.records else Path(tempfile.mkdtemp(prefix="multiagent-baselines-"))
    rows, started = [], time.time()
    for game in games:
        for label, seats in CONFIGS[game]:
            for name in seats:
                if name not in models:
                    models[name] = load_model_by_name(name, gen_args=gen_args)
            player_models = [models[name] for name in seats]
            run_name = f"{game}-" + "--".join(seats)
            began = time.time()
            table = evaluate(player_models, [game], results_dir=records, max_instances=max_instances,
                             run_name=run_name, overwrite=True)
            score = table.games[0]
            row = {"game": game, "configuration": label, "seats": list(seats), "episodes": score.num_episodes,
                   "% played": score.percent_played, "quality": None if math.isnan(score.quality) else score.quality,
                   **seat_columns(Path(table.run_dir), game), "seconds": round(time.time() - began, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else "")
    out_dir = REPO / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"date": datetime.now().isoformat(timespec="seconds"), "quick": args.quick, "max_tokens": max_tokens,
            "instances": "in/instances.json" + (" (first per experiment)" if args.quick else ""),
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, load {os.getloadavg()[0]:.1f}",
            "seconds": round(time.time() - started, 1), "records": str(records)}
    (out_dir / f"multiagent-baselines-{stamp}.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n",
                                                                  encoding="utf-8")
    lines = [f"# Multi-agent baselines ({meta['date']}, {meta['instances']}, greedy, {max_tokens} tokens)", ""]
    for game in games:
        extra = [c for c, *_ in COLUMNS[game]]
        lines += [f"## {game}", "", "| configuration | episodes | % played | quality | " + " | ".join(extra) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(extra)]
        for row in (r for r in rows if r["game"] == game):
            cells = [row["configuration"], row["episodes"], row["% played"],
                     "n/a" if row["quality"] is None else row["quality"]]
            cells += ["n/a" if isinstance(row[c], float) and math.isnan(row[c]) else row[c] for c in extra]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        lines.append("")
    (out_dir / f"multiagent-baselines-{stamp}.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {out_dir / f'multiagent-baselines-{stamp}.json'} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
