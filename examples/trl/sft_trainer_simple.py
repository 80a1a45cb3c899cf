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

from dataclasses import dataclass, field

from playpen import sft
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
        # the demonstrations, TRL's SFTTrainer, Ctrl-C-safe training and the final evaluation;
        # no peft_config: every parameter is trained (sft_trainer_lora.py trains adapters)
        sft.train_sft(self, kind=self.kind)
