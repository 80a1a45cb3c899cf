"""Full fine-tuning on won episodes; loss on the assistant turns only.

    playpen run examples/trl/sft_trainer_simple.py -l smol-135m
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --games referencegame,wordle --max-steps 8
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --dataset my_episodes.jsonl
    playpen run examples/trl/sft_trainer_simple.py -l smol-135m --resume     # after Ctrl-C or a crash

Data (first that applies): ``--dataset FILE`` (JSON lines of {messages, meta}), ``--records
DIR`` (clemcore results / playpen records), else the games' training instances played
by ``--demo-model`` (default: the games' programmatic players) into
``<output_dir>/demonstrations/``. Only the episodes whose outcome is in ``--outcomes``
(default: success) and whose role is in ``--roles`` (default: all roles) are kept.

Checkpoints (full models with tokenizer, loadable as a ``huggingface_id``) go to
``models/sft/<learner>/checkpoint-N``; the run is then evaluated on the held-out
instances (``results/<learner>+sft-checkpoint-N/``), the metrics are in
``playpen-log.jsonl`` and the curve in ``learning-curve.png`` beside the checkpoints.
With LoRA instead: sft_trainer_lora.py.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from playpen import sft, training
from playpen.base import BasePlayPen


@dataclass
class SFTSimpleConfig:
    games: str = field(default="referencegame", metadata={"help": "games to train on (comma-separated)"})
    dataset: str = field(default="", metadata={"help": "a JSON-lines file of {messages, meta} records"})
    records: str = field(default="", metadata={"help": "a folder of clemcore results / playpen records"})
    demo_model: str = field(default="programmatic", metadata={
        "help": "plays the training instances when neither --dataset nor --records is given"})
    train_instances: str = field(default="instances_train", metadata={
        "help": "instances file the demonstrations are played on"})
    demo_max_instances: int = field(default=0, metadata={
        "help": "training instances per experiment to play for demonstrations (0 = all)"})
    roles: str = field(default="", metadata={"help": "game roles to learn (comma-separated; empty = all)"})
    outcomes: str = field(default="success", metadata={"help": "episode outcomes to learn from"})
    max_steps: int = field(default=20, metadata={"help": "optimizer steps"})
    batch_size: int = field(default=8, metadata={"help": "conversations per optimizer step (per device)"})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "micro-batches per step"})
    learning_rate: float = field(default=2e-5, metadata={"help": "peak learning rate"})
    max_length: int = field(default=1024, metadata={"help": "tokens per conversation (longer: truncated)"})
    save_steps: int = field(default=10, metadata={"help": "save a checkpoint every N steps (and at the end)"})
    save_total_limit: int = field(default=2, metadata={"help": "checkpoints kept"})
    models_dir: str = field(default="models", metadata={"help": "root of the checkpoint folders"})
    results_dir: str = field(default="results", metadata={"help": "root of the evaluation results"})
    report_to: str = field(default="none", metadata={"help": "tracker: none, trackio, tensorboard, wandb"})
    resume: bool = field(default=False, metadata={"help": "continue from the last checkpoint"})
    overwrite: bool = field(default=False, metadata={
        "help": "start over although checkpoints (and their evaluation results) exist"})
    evaluate: bool = field(default=True, metadata={"help": "evaluate on the held-out instances at the end"})
    eval_max_instances: int = field(default=0, metadata={"help": "held-out instances per experiment (0 = all)"})
    eval_batch_size: int = field(default=16, metadata={"help": "episodes generated together in evaluation"})


class SFTSimpleTrainer(BasePlayPen):
    """Full fine-tuning on won episodes (assistant-only loss)."""

    config_class = SFTSimpleConfig
    kind = "sft"

    def learn(self, game_registry) -> None:
        from trl import SFTConfig, SFTTrainer

        cfg = self.config
        games = _split(cfg.games)
        run_dir = Path(cfg.models_dir) / self.kind / training.safe_name(self.learner.name)
        resume_from = training.resume_checkpoint(run_dir, cfg.resume)
        if not cfg.resume and not cfg.overwrite and training.latest_checkpoint(run_dir):
            raise training.ResumeError(f"{run_dir} already holds checkpoints: pass --resume to continue "
                                       f"or --overwrite to start over")
        # the final evaluation replaces results only of this run's own checkpoints (resumed or
        # restarted); refuse now, not after training, to replace another run's
        eval_prefix = f"{self.learner.name}+{self.kind}-"
        if cfg.evaluate and not (cfg.resume or cfg.overwrite):
            from playpen.evaluation import check_no_earlier_results
            check_no_earlier_results(cfg.results_dir, f"{eval_prefix}checkpoint-{cfg.max_steps}", games,
                                     hint="pass --overwrite to replace them or --results-dir DIR to keep them")
        started = time.time()

        # 1. conversations: won episodes of the chosen roles
        if cfg.dataset:
            records = sft.read_dataset_file(cfg.dataset)
        elif cfg.records:
            records = sft.read_results(cfg.records)
        else:
            demos = sft.play_demonstrations(games, self.output_dir / "demonstrations", model=cfg.demo_model,
                                            instances=cfg.train_instances,
                                            max_instances=cfg.demo_max_instances or None)
            records = sft.read_results(demos)
        records = sft.select(records, games=games, roles=_split(cfg.roles), outcomes=_split(cfg.outcomes))
        if not records:
            raise sft.DatasetError(f"no episodes of {', '.join(games)} with outcome {cfg.outcomes} "
                                   f"(roles: {cfg.roles or 'all'}) to learn from")
        tokenizer = training.tokenizer_of(self.learner)
        dataset = sft.build_dataset(records, tokenizer, max_length=cfg.max_length, seed=self.seed)
        print(f"[playpen] {len(dataset)} conversations from {len(records)} records", flush=True)

        # 2. TRL: the assistant_masks column restricts the loss to assistant tokens
        args = SFTConfig(
            output_dir=str(run_dir), max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps, learning_rate=cfg.learning_rate,
            lr_scheduler_type="constant_with_warmup", warmup_steps=0, max_length=cfg.max_length,
            logging_steps=1, save_strategy="steps", save_steps=cfg.save_steps,
            save_total_limit=cfg.save_total_limit, report_to=_report_to(cfg.report_to), seed=self.seed,
            gradient_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True, **training.precision_kwargs())
        interrupt = training.GracefulInterrupt()
        trainer = SFTTrainer(model=training.model_of(self.learner), args=args, train_dataset=dataset,
                             processing_class=tokenizer,
                             callbacks=[training.make_trainer_callback(self.callbacks, run_dir, interrupt)])

        # 3. train; Ctrl-C saves a checkpoint and stops
        self.callbacks.on_learn_start(self.name, cfg.max_steps)
        with interrupt:
            trainer.train(resume_from_checkpoint=resume_from)
        self.callbacks.on_learn_end()
        checkpoint = training.latest_checkpoint(run_dir)
        summary = {"trainer": self.name, "learner": self.learner.name, "config": asdict(cfg),
                   "checkpoint": str(checkpoint), "num_examples": len(dataset),
                   "train_seconds": round(time.time() - started, 1), "interrupted": interrupt.requested}

        # 4. evaluate the trained model (in memory) on the held-out instances
        if cfg.evaluate and not interrupt.requested and checkpoint is not None:
            from playpen.evaluation import evaluate
            training.model_of(self.learner).eval()
            table = evaluate([self.learner], games, results_dir=cfg.results_dir,
                             max_instances=cfg.eval_max_instances or None, batch_size=cfg.eval_batch_size,
                             run_name=f"{eval_prefix}{checkpoint.name}",
                             overwrite=cfg.resume or cfg.overwrite)
            print(table.to_text(), flush=True)
            summary["eval"] = table.to_dict()
        training.write_json(run_dir / "playpen-run.json", summary)
        from playpen.plotting import plot_run
        plot_run(run_dir)
        print(f"[playpen] checkpoint: {checkpoint}  curve: {run_dir / training.CURVE_FILE}", flush=True)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _report_to(value: str):
    return "none" if value in ("", "none") else _split(value)
