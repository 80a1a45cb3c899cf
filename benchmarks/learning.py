"""Proof that learning works: before → SFT-LoRA → GRPO (self-play), on held-out instances.

    python benchmarks/learning.py                       # smol-135m, referencegame + wordle
    python benchmarks/learning.py --games referencegame,taboo --sft-steps 8 --grpo-minutes 30
    python benchmarks/learning.py --quick               # a few minutes: plumbing check only

Stages (all with the same learner, same held-out instances, one process):
1. baseline: the learner as is;
2. SFT-LoRA on the programmatic teachers' won episodes of the training instances
   (examples/trl/sft_trainer_lora.py), at most ``--sft-steps`` steps;
3. GRPO self-play from that adapter on ``--grpo-game`` (examples/trl/grpo_trainer_lora_sp.py)
   for at most ``--grpo-minutes`` of wall time (a callback stops it, with a checkpoint).

Writes ``benchmarks/results/learning.json`` (the table: % played, quality, clemscore per
stage and game, wall time per stage) and ``learning.png`` (the stages side by side and the
GRPO learning curve). Needs a quiet machine: wall times on a shared 2-core CPU are not
comparable across runs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from playpen.files import write_json

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAINERS = REPO_ROOT / "examples" / "trl"


def stop_after(seconds: float):
    """A playpen callback that stops training after `seconds` (the trainer saves a checkpoint)."""
    from playpen.callbacks import BaseCallback

    class StopAfter(BaseCallback):
        def _on_learn_start(self, trainer_name, total_steps):
            self.started = time.time()

        def _on_train_step(self, step, metrics):
            return time.time() - self.started < seconds
    return StopAfter()


def evaluate(learner, games, out, name, max_instances, batch_size):
    from playpen.evaluation import evaluate as run_eval
    started = time.time()
    # overwrite: a benchmark run replaces the previous run's stages (as learning.json and,
    # with overwrite=True, the trainers' checkpoints); --out keeps runs apart
    table = run_eval([learner], games, results_dir=out / "results", max_instances=max_instances,
                     batch_size=batch_size, run_name=name, overwrite=True)
    print(table.to_text(), flush=True)
    return table.to_dict(), time.time() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-l", "--learner", default="smol-135m")
    parser.add_argument("--games", default="referencegame,wordle", help="SFT and evaluation games")
    parser.add_argument("--grpo-game", default="referencegame", help="GRPO game (short episodes are cheapest)")
    parser.add_argument("--sft-steps", type=int, default=8)
    parser.add_argument("--sft-batch-size", type=int, default=8)
    parser.add_argument("--grpo-minutes", type=float, default=30.0)
    parser.add_argument("--grpo-steps", type=int, default=200, help="upper bound; the time budget usually ends it")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--eval-instances", type=int, default=6,
                        help="held-out instances per experiment (6 = two referencegame targets at each of the "
                             "three positions: a follower that always answers one label scores 33.3)")
    parser.add_argument("--max-tokens", type=int, default=40, help="tokens per generated turn")
    parser.add_argument("--temperature", type=float, default=0.7, help="GRPO sampling temperature")
    parser.add_argument("--grpo-lr", type=float, default=2e-4, help="GRPO learning rate (LoRA)")
    parser.add_argument("--grpo-groups-per-step", type=int, default=2,
                        help="groups per step (self-play: an instance's two roles are two groups)")
    parser.add_argument("--grpo-save-steps", type=int, default=5,
                        help="checkpoint interval; the checkpoint nearest half the budget is evaluated too")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--quick", action="store_true", help="tiny budgets: checks the plumbing only")
    args = parser.parse_args(argv)
    if args.quick:
        args.sft_steps, args.grpo_minutes, args.eval_instances, args.grpo_steps = 2, 1.0, 1, 3
        args.grpo_save_steps = 1

    from playpen.cli.run import load_trainer_class
    from playpen.models import load_model_by_name
    from playpen.seeding import seed_everything
    from playpen.training import run as training

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    games = [g for g in args.games.split(",") if g]
    seed_everything(args.seed)
    learner = load_model_by_name(args.learner, gen_args=dict(temperature=0.0, max_tokens=args.max_tokens),
                                 role="learner")
    report = {"learner": args.learner, "games": games, "grpo_game": args.grpo_game, "args": vars(args),
              "stages": []}

    def record(stage, table, eval_seconds, train_seconds):
        report["stages"].append({"stage": stage, "eval": table, "eval_seconds": round(eval_seconds, 1),
                                 "train_seconds": round(train_seconds, 1)})
        write_json(out / "learning.json", report)

    # 1. baseline
    table, seconds = evaluate(learner, games, out, f"{args.learner}+baseline", args.eval_instances, 16)
    record("baseline", table, seconds, 0.0)

    # 2. SFT-LoRA on programmatic demonstrations (greedy decoding for evaluation)
    sft_cls = load_trainer_class(TRAINERS / "sft_trainer_lora.py")
    sft_cfg = sft_cls.config_class(games=",".join(games), max_steps=args.sft_steps, batch_size=args.sft_batch_size,
                                   save_steps=args.sft_steps, models_dir=str(out / "models"), overwrite=True,
                                   evaluate=False, max_length=768)
    started = time.time()
    sft_cls(learner, config=sft_cfg, output_dir=out / "records", seed=args.seed).learn(None)
    sft_seconds = time.time() - started
    adapter = training.latest_checkpoint(out / "models" / "sft+lora" / training.safe_name(args.learner))
    table, seconds = evaluate(learner, games, out, f"{args.learner}+sft+lora", args.eval_instances, 16)
    record("sft+lora", table, seconds, sft_seconds)

    # 3. GRPO self-play from the SFT adapter, on a fresh copy of the base model
    learner = load_model_by_name(args.learner, gen_args=dict(temperature=args.temperature,
                                                              max_tokens=args.max_tokens), role="learner")
    grpo_cls = load_trainer_class(TRAINERS / "grpo_trainer_lora_sp.py")
    grpo_cfg = grpo_cls.config_class(games=args.grpo_game, max_steps=args.grpo_steps,
                                     num_generations=args.num_generations,
                                     groups_per_step=args.grpo_groups_per_step, learning_rate=args.grpo_lr,
                                     init_adapter=str(adapter), beta=0.0, save_steps=args.grpo_save_steps,
                                     save_total_limit=10_000,
                                     models_dir=str(out / "models"), overwrite=True, evaluate=False)
    trainer = grpo_cls(learner, config=grpo_cfg, output_dir=out / "records", seed=args.seed)
    trainer.add_callback(stop_after(args.grpo_minutes * 60))
    started = time.time()
    trainer.learn(None)
    grpo_seconds = time.time() - started
    learner.set_gen_args(temperature=0.0, max_tokens=args.max_tokens)
    grpo_run = out / "models" / "grpo+lora" / training.safe_name(args.learner) / "selfplay"
    # the checkpoint nearest half the budget (30 CPU-minutes = 15 wall-minutes on 2 cores)
    half = halfway_checkpoint(grpo_run, grpo_seconds / 2)
    if half is not None:
        from playpen.models import load_model_by_name
        checkpoint, half_seconds = half
        name = f"{args.learner}+sft+lora+grpo-{checkpoint.name}"
        half_model = load_model_by_name(args.learner, adapter=checkpoint, run_name=name,
                                        gen_args=dict(temperature=0.0, max_tokens=args.max_tokens))
        table, seconds = evaluate(half_model, games, out, name, args.eval_instances, 16)
        record(f"sft+lora+grpo ({checkpoint.name})", table, seconds, half_seconds)
        del half_model
    table, seconds = evaluate(learner, games, out, f"{args.learner}+sft+lora+grpo", args.eval_instances, 16)
    record("sft+lora+grpo", table, seconds, grpo_seconds)
    report["grpo_run"] = str(grpo_run)
    write_json(out / "learning.json", report)
    plot(report, grpo_run, out / "learning.png")
    print(table_text(report))
    return 0


def halfway_checkpoint(run_dir: Path, seconds: float):
    """(checkpoint, GRPO seconds at its step) for the saved checkpoint whose step ended
    nearest ``seconds`` after the start of training, or None."""
    from playpen.training import run as training
    from playpen.training.plotting import PlotError, read_log
    try:
        steps = read_log(run_dir)
    except PlotError:  # no log: GRPO never finished a step
        return None
    if not steps:
        return None
    start = steps[0]["time"] - steps[0].get("train/step_time", 0.0)
    ended = {s["step"]: s["time"] - start for s in steps if "time" in s}
    saved = [(c, ended[training.checkpoint_step(c)]) for c in training.checkpoints(run_dir)
             if training.checkpoint_step(c) in ended]
    saved = [(c, t) for c, t in saved if t < seconds * 1.5]  # not the final one
    if not saved:
        return None
    return min(saved, key=lambda pair: abs(pair[1] - seconds))


def table_text(report: dict) -> str:
    lines = [f"{'stage':<30} {'game':<16} {'% played':>9} {'quality':>8} {'clemscore':>9} {'train s':>8}"]
    for stage in report["stages"]:
        for row in stage["eval"]["games"] + [stage["eval"]["overall"]]:
            quality = "n/a" if row["quality"] is None else f"{row['quality']:.1f}"
            lines.append(f"{stage['stage']:<30} {row['game']:<16} {row['percent_played']:>9.1f} {quality:>8} "
                         f"{row['clemscore']:>9.1f} {stage['train_seconds']:>8.0f}")
    return "\n".join(lines)


def plot(report: dict, grpo_run: Path, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from playpen.training.plotting import read_log
    fig, (bars, curve) = plt.subplots(1, 2, figsize=(11, 3.8))
    stages = [s["stage"].replace(" (", "\n(") for s in report["stages"]]
    games = [g["game"] for g in report["stages"][0]["eval"]["games"]]
    width = 0.8 / max(1, len(games))
    for i, game in enumerate(games):
        played = [next(g for g in s["eval"]["games"] if g["game"] == game)["percent_played"]
                  for s in report["stages"]]
        quality = [next(g for g in s["eval"]["games"] if g["game"] == game)["quality"] or 0
                   for s in report["stages"]]
        xs = [x + i * width for x in range(len(stages))]
        bars.bar(xs, played, width * 0.5, label=f"{game} % played")
        bars.bar([x + width * 0.5 for x in xs], quality, width * 0.5, label=f"{game} quality")
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(stages))], stages)
    bars.set_ylim(0, 135)
    bars.set_yticks(range(0, 101, 20))
    bars.tick_params(axis="x", labelsize=8)
    bars.legend(fontsize=7, loc="upper left", ncol=2)
    bars.set_title("held-out instances")
    try:
        steps = read_log(grpo_run)
        xs = [s["step"] for s in steps]
        rewards = [s.get("rollout/reward_mean", float("nan")) for s in steps]
        curve.plot(xs, rewards, label="reward (mean)", alpha=0.5)
        window = 5  # one or two instances per step: the running mean shows the trend
        smooth = [sum(rewards[max(0, i - window + 1):i + 1]) / len(rewards[max(0, i - window + 1):i + 1])
                  for i in range(len(rewards))]
        curve.plot(xs, smooth, label=f"reward (mean of {window} steps)")
        curve.plot(xs, [s.get("rollout/percent_played", float("nan")) / 100 for s in steps],
                   label="played (fraction)")
        curve.legend(fontsize=7)
    except Exception as e:  # a missing curve must not hide the table
        curve.text(0.1, 0.5, f"no GRPO log: {e}")
    curve.set_title(f"GRPO self-play on {report['grpo_game']}")
    curve.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
