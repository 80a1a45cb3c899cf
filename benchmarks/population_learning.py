"""Learning in a population (issue 15): does fictitious self-play from the SFT adapter beat it?

    flock /tmp/bench.lock python benchmarks/population_learning.py            # 30 min FSP + tournament
    flock /tmp/bench.lock python benchmarks/population_learning.py --quick    # minutes: the plumbing only
    python benchmarks/population_learning.py --report-only                    # rebuild json/png/md from the run

Protocol: smol-135m with the shared SFT adapter of ``benchmarks/learning.py`` (the warm-up on
the programmatic players' won episodes of referencegame, taboo and adversarial_taboo).

1. **Training**: ``playpen run fsp`` (examples/trl/fsp_trainer_lora.py) on adversarial_taboo's training
   instances, every snapshot starting from the SFT adapter, ``--time-budget`` minutes of
   wall time for the whole run (no epoch starts that would end past it). Epoch e:
   ``learner-e`` (a copy of ``learner-(e-1)``) plays ``--matches-per-epoch`` seatings,
   both seat orders, against the frozen snapshots (``--opponents hard``; epoch 0 itself),
   ``--num-generations`` episodes per instance and seating at temperature 1, then trains
   (GRPO's clipped objective, per-role rewards: win 1, tie 0, loss or broken format -1).
   Every epoch's snapshot is kept (``population/adapters/learner-N``).
2. **Tournament**: ``playpen tournament`` on held-out adversarial_taboo instances, both
   seatings, greedy, between the frozen SFT adapter, a middle snapshot and the last one;
   Bradley–Terry ratings with 95 % bootstrap intervals. Target: the last snapshot's rating
   lies above the SFT player's interval (and its own interval above SFT's rating).
3. **Report**: the training curve (per epoch: the learner's reward and format breaks per
   role, Elo), the tournament table and the reading of the records (what each player's
   Attacker and Defender say on the same held-out instances), cached as
   ``benchmarks/results/population-learning.{json,png,md}``. Weights and records stay in
   ``benchmarks/results/population-learning/`` (git-ignored).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

from harness import RESULTS, SFT_ADAPTER, run_playpen, snapshots  # the benchmarks' shared module

TRAINER = "fsp"  # the packaged trainer (playpen run --list)
GAME = "adversarial_taboo"


def train(args, work: Path) -> tuple[Path, float]:
    run = work / "models" / "fsp+lora" / args.learner
    options = ["run", str(TRAINER), "-l", args.learner, "-T", str(args.temperature), "-L", str(args.max_tokens),
               "--seed", str(args.seed), "-o", str(work / "playpen-records"),
               "--games", GAME, "--train-instances", "instances_adversarial_train",
               "--init-adapter", str(args.sft), "--epochs", str(args.epochs),
               "--time-budget", str(args.minutes), "--matches-per-epoch", str(args.matches_per_epoch),
               "--instances-per-match", str(args.instances_per_match),
               "--num-generations", str(args.num_generations), "--learning-rate", str(args.learning_rate),
               "--rows-per-step", str(args.rows_per_step), "--opponents", args.opponents,
               "--self-share", str(args.self_share), "--lora-dropout", "0.0",
               "--models-dir", str(work / "models"), "--overwrite"]
    print(f"training: {' '.join(options)}", flush=True)
    seconds = run_playpen(options, work / "train.log")
    return run, seconds


def tournament(args, work: Path, run: Path, picked: list[str]) -> tuple[Path, float, dict]:
    out = work / f"tournament-{datetime.now():%Y%m%d-%H%M%S}"
    players = {"sft": str(args.sft)}
    players.update({name: str(run / "population" / "adapters" / name) for name in picked})
    options = ["tournament", "-g", GAME, "-n", str(args.tournament_instances), "-T", "0", "-L", str(args.max_tokens),
               "--seed", str(args.seed), "-b", "32", "-o", str(out)]
    for folder in players.values():
        options += ["-m", f"{args.learner}+{folder}"]
    print(f"tournament: {' '.join(options)}", flush=True)
    seconds = run_playpen(options, work / "tournament.log")
    rated = json.loads((out / "ratings.json").read_text())
    names = dict(zip(rated["players"], players))  # tournament name -> short name
    return out, seconds, names


# ----------------------------------------------------------------------------- reading the records

def interactions(folder: Path):
    for path in sorted(folder.rglob("interactions.json")):
        try:
            yield path, json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue


def moves(episode: dict) -> list[tuple[str, str]]:
    """(role, text) of the players' replies in order (Player 1 = Attacker, Player 2 = Defender)."""
    out = []
    for turn in episode.get("turns", []):
        for event in turn:
            if event.get("to") == "GM" and event.get("from") in ("Player 1", "Player 2"):
                role = "Attacker" if event["from"] == "Player 1" else "Defender"
                out.append((role, str(event["action"].get("content", ""))))
    return out


def seating_of(path: Path, root: Path, episode: dict | None = None) -> tuple[str, str] | None:
    """The players (attacker, defender) of a record: the model names it gives its players,
    else its run folder ``match-NNN-A-vs-B``."""
    players = (episode or {}).get("players", {})
    named = [players.get(k, {}).get("model_name") for k in ("Player 1", "Player 2")]
    if all(named):
        return named[0], named[1]
    for part in path.relative_to(root).parts:
        if part.startswith("match-") and "-vs-" in part:
            a, b = part.split("-", 2)[2].split("-vs-")
            return a, b
    return None


def training_curve(run: Path) -> list[dict]:
    """Per epoch, from the records: the learner's mean reward and its format breaks per role,
    end reasons, and its Elo."""
    elo = {}
    ratings = run / "ratings.json"
    if ratings.exists():
        for snap in json.loads(ratings.read_text()).get("snapshots", []):
            elo[snap["epoch"]] = snap.get("elo", {})
    metrics = {}
    if (run / "metrics.jsonl").exists():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            m = json.loads(line)
            metrics[m["epoch"]] = m
    rows = []
    for epoch_dir in sorted((run / "records").glob("epoch-*"), key=lambda p: int(p.name.split("-")[1])):
        epoch = int(epoch_dir.name.split("-")[1])
        me = f"learner-{epoch}"
        per_role = {r: Counter() for r in ("Attacker", "Defender")}
        reasons = Counter()
        for path, ep in interactions(epoch_dir):
            seating = seating_of(path, epoch_dir, ep)
            if seating is None:
                continue
            reason = str(ep.get("End Reason"))
            reasons[reason] += 1
            for role, player in zip(("Attacker", "Defender"), seating):
                if player != me:
                    continue
                c = per_role[role]
                c["episodes"] += 1
                c["won"] += int(ep.get(f"{role} Win", 0) == 1)
                c["lost"] += int(ep.get(f"{'Defender' if role == 'Attacker' else 'Attacker'} Win", 0) == 1)
                c["broke format"] += int(ep.get("Aborted By") == role)
                c["tie"] += int(ep.get("Tie", 0) == 1)
        m = metrics.get(epoch, {})
        row = {"epoch": epoch, "seconds": m.get("seconds"), "end_reasons": dict(reasons.most_common()),
               "elo": elo.get(epoch, {}), "train_steps": m.get(f"{me}/train/steps"),
               "rows_with_signal": m.get(f"{me}/train/rows_with_signal"), "rows": m.get(f"{me}/train/rows")}
        for role, c in per_role.items():
            n = c["episodes"]
            row[role] = {k: c[k] for k in ("episodes", "won", "lost", "tie", "broke format")}
            row[role]["reward"] = round((c["won"] - c["lost"] - c["broke format"]) / n, 3) if n else None
        rows.append(row)
    return rows


def tournament_reading(out: Path, names: dict, limit: int = 4) -> dict:
    """Per player and role: outcomes (end reasons), the share of format breaks, first moves
    and a few whole exchanges on the same instances."""
    by_player = defaultdict(lambda: {"Attacker": Counter(), "Defender": Counter()})
    samples = defaultdict(list)
    matches = [json.loads(x) for x in (out / "matches.jsonl").read_text().splitlines()]
    for path, ep in interactions(out):
        seating = seating_of(path, out, ep)
        if seating is None:
            continue
        attacker, defender = (names.get(x, x) for x in seating)
        reason = str(ep.get("End Reason"))
        by_player[attacker]["Attacker"][reason] += 1
        by_player[defender]["Defender"][reason] += 1
        if len(samples[(attacker, defender)]) < limit:
            samples[(attacker, defender)].append({
                "instance": f"{path.parent.parent.name}/{path.parent.name}", "target": ep.get("Target Word"),
                "end": reason, "moves": [f"{r}: {t[:160]}" for r, t in moves(ep)[:6]]})
    pairs = defaultdict(Counter)  # attacker vs defender: who won each match, and how
    for m in matches:
        attacker, defender = (names.get(x, x) for x in m["players"])
        pairs[f"{attacker} attacks {defender}"][
            "attacker won" if m["score"] == 1 else "defender won" if m["score"] == 0 else "draw"] += 1
    return {"pairs": {k: dict(v) for k, v in pairs.items()},
            "outcomes": {p: {r: dict(c.most_common()) for r, c in roles.items()} for p, roles in by_player.items()},
            "samples": {f"{a} attacks {d}": s for (a, d), s in samples.items()}, "matches": len(matches)}


# ----------------------------------------------------------------------------- report

def verdict(ratings: dict, final: str) -> dict:
    sft, last = ratings["sft"], ratings[final]
    return {"sft": sft, "final": last, "final_above_sft_interval": last["rating"] > sft["high"],
            "intervals_apart": last["low"] > sft["high"], "met": last["rating"] > sft["high"]}


def plot(curve: list[dict], ratings: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    epochs = [r["epoch"] for r in curve]
    ax = axes[0]
    for role, style in (("Attacker", "o-"), ("Defender", "s-")):
        ax.plot(epochs, [r[role]["reward"] for r in curve], style, label=f"{role}: mean reward")
        ax.plot(epochs, [r[role]["broke format"] / r[role]["episodes"] if r[role]["episodes"] else None
                         for r in curve], style.replace("-", "--"), alpha=0.6, label=f"{role}: share broke format")
    ax.set_xlabel("epoch")
    ax.set_title("the learner in training (records)", fontsize=10)
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7)
    ax = axes[1]
    players = sorted({p for r in curve for p in r["elo"]}, key=lambda n: int(n.split("-")[-1]))
    for p in players:
        xs = [r["epoch"] for r in curve if p in r["elo"]]
        ax.plot(xs, [r["elo"][p] for r in curve if p in r["elo"]], ".-", lw=0.8, label=p)
    ax.set_xlabel("epoch")
    ax.set_title("Elo during training (matches between snapshots)", fontsize=10)
    if len(players) <= 12:
        ax.legend(fontsize=6, ncol=2)
    ax = axes[2]
    order = sorted(ratings, key=lambda n: ratings[n]["rating"])
    ax.errorbar([ratings[n]["rating"] for n in order], range(len(order)),
                xerr=[[ratings[n]["rating"] - ratings[n]["low"] for n in order],
                      [ratings[n]["high"] - ratings[n]["rating"] for n in order]], fmt="o", capsize=4)
    ax.set_yticks(range(len(order)), order)
    ax.set_xlabel("Bradley–Terry rating (Elo scale), 95 % bootstrap interval")
    ax.set_title("held-out tournament", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(result: dict) -> str:
    lines = [f"# Learning in a population ({result['date']})", "",
             f"FSP from the SFT adapter on {GAME}: {result['train']['epochs']} epochs in "
             f"{result['train']['seconds'] / 60:.1f} min of training (budget {result['train']['budget_min']} min); "
             f"tournament on {result['tournament']['instances']} held-out instances, both seatings, greedy "
             f"({result['tournament']['seconds'] / 60:.1f} min).", "",
             "## Training curve (the learner of each epoch, from the records)", "",
             "| epoch | min | attacker W/T/L/broke | attacker reward | defender W/T/L/broke | defender reward | "
             "rows with signal |", "|---:|---:|---|---:|---|---:|---:|"]
    for r in result["curve"]:
        cells = []
        for role in ("Attacker", "Defender"):
            c = r[role]
            cells += [f"{c['won']}/{c['tie']}/{c['lost']}/{c['broke format']} of {c['episodes']}",
                      "n/a" if c["reward"] is None else f"{c['reward']:+.2f}"]
        lines.append(f"| {r['epoch']} | {(r['seconds'] or 0) / 60:.1f} | {' | '.join(cells)} | "
                     f"{r['rows_with_signal']}/{r['rows']} |")
    lines += ["", "## Tournament", "", result["tournament"]["table"], ""]
    v = result["verdict"]
    lines += [f"Target (the last snapshot's rating above the SFT player's 95 % interval): "
              f"**{'met' if v['met'] else 'not met'}** — final {v['final']['rating']:.0f} "
              f"[{v['final']['low']:.0f}, {v['final']['high']:.0f}], SFT {v['sft']['rating']:.0f} "
              f"[{v['sft']['low']:.0f}, {v['sft']['high']:.0f}].", "", "## Matches per seating", "",
              "| attacker vs defender | attacker won | draw | defender won |", "|---|---:|---:|---:|"]
    for pair, c in sorted(result["reading"]["pairs"].items()):
        lines.append(f"| {pair.replace(' attacks ', ' vs ')} | {c.get('attacker won', 0)} | {c.get('draw', 0)} | "
                     f"{c.get('defender won', 0)} |")
    lines += ["", "## Outcomes per player and role (end reasons)", ""]
    for p, roles in result["reading"]["outcomes"].items():
        for role, reasons in roles.items():
            lines.append(f"- {p} as {role}: " + ", ".join(f"{k} {n}" for k, n in reasons.items()))
    lines += ["", "## Exchanges (first moves, same held-out instances)", ""]
    for pair, samples in result["reading"]["samples"].items():
        lines.append(f"### {pair}")
        for s in samples:
            lines.append(f"- {s['instance']} (target `{s['target']}`, {s['end']}):")
            lines += [f"    - `{m}`" for m in s["moves"]]
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learner", default="smol-135m")
    parser.add_argument("--sft", type=Path, default=SFT_ADAPTER, help="the SFT adapter every snapshot starts from")
    parser.add_argument("--minutes", type=float, default=30.0, help="training wall-time budget (whole run)")
    parser.add_argument("--epochs", type=int, default=100, help="at most this many epochs (the budget stops first)")
    parser.add_argument("--matches-per-epoch", type=int, default=4)
    parser.add_argument("--instances-per-match", type=int, default=2)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--rows-per-step", type=int, default=8)
    parser.add_argument("--opponents", default="hard")
    parser.add_argument("--self-share", type=float, default=0.0)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--tournament-instances", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=RESULTS / "population-learning",
                        help="weights, records, logs (git-ignored)")
    parser.add_argument("--name", default="population-learning", help="stem of the cached json/png/md")
    parser.add_argument("--quick", action="store_true", help="a tiny budget: checks the plumbing only")
    parser.add_argument("--skip-train", action="store_true", help="reuse the run in --work")
    parser.add_argument("--report-only", action="store_true", help="reuse run and tournament; rebuild the report")
    args = parser.parse_args(argv)
    if args.quick:
        args.minutes, args.epochs, args.matches_per_epoch, args.instances_per_match = 0.5, 2, 2, 1
        args.num_generations, args.tournament_instances, args.max_tokens = 2, 2, 16
        args.work, args.name = Path("/tmp/population-learning-quick"), "population-learning-quick"
    if not (args.sft / "adapter_config.json").exists():
        raise SystemExit(f"population_learning.py: no SFT adapter at {args.sft} (run benchmarks/learning.py "
                         f"--methods sft first)")
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    state_file = work / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    run = work / "models" / "fsp+lora" / args.learner
    if not (args.skip_train or args.report_only):
        run, seconds = train(args, work)
        state = {"train_seconds": round(seconds, 1)}
        state_file.write_text(json.dumps(state))
    names_all = snapshots(run)
    last = len(names_all) - 1
    picked = [names_all[last // 2], names_all[last]] if last >= 2 else [names_all[last]]
    if not args.report_only or "tournament" not in state:
        out, seconds, names = tournament(args, work, run, picked)
        state.update(tournament=str(out), tournament_seconds=round(seconds, 1), names=names)
        state_file.write_text(json.dumps(state))
    out, names = Path(state["tournament"]), state["names"]
    rated = json.loads((out / "ratings.json").read_text())
    ratings = {names[n]: v for n, v in rated["bradley_terry"].items()}
    curve = training_curve(run)
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/population_learning.py" + (" --quick" if args.quick else ""),
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "train": {"epochs": len(names_all), "seconds": state.get("train_seconds", 0.0),
                  "budget_min": args.minutes, "snapshots": names_all,
                  "train_seconds_by_epoch": [r["seconds"] for r in curve]},
        "curve": curve,
        "tournament": {"folder": str(out), "players": picked, "instances": rated["instances"],
                       "seconds": state.get("tournament_seconds", 0.0), "bradley_terry": ratings,
                       "elo": {names[n]: v for n, v in rated["elo"].items()},
                       "table": (out / "ratings.md").read_text().strip()},
        "reading": tournament_reading(out, names),
    }
    for tname, short in names.items():
        result["tournament"]["table"] = result["tournament"]["table"].replace(tname, short)
    result["verdict"] = verdict(ratings, picked[-1])
    target = RESULTS if not args.quick else work
    (target / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    (target / f"{args.name}.md").write_text(markdown(result))
    plot(curve, ratings, target / f"{args.name}.png",
         f"FSP from SFT on {GAME}, {args.learner}: {len(names_all)} epochs in {result['train']['seconds'] / 60:.1f} min")
    print(markdown(result))
    print(f"wrote {target / args.name}.{{json,md,png}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
