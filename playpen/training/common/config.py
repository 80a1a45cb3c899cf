"""Trainer options: one base dataclass every trainer config extends, mixins for LoRA and for
supervised data, and the parsers of comma-separated options.

A trainer file declares only its own fields::

    @dataclass
    class MyConfig(LoraOptions, RunConfig):
        temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})

``playpen run FILE --help`` lists every field with its ``help``; ``--field value`` sets it.
Values are checked when the config is built — before any model loads — and a bad one is a
:class:`~playpen.errors.PlaypenError` naming the option, the value and what is valid.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from playpen.errors import PlaypenError, TrainingSetupError
from playpen.evaluation.splits import training_items

PRECISIONS = ("auto", "fp32", "bf16")
TRACKERS = ("none", "tensorboard", "wandb", "trackio", "mlflow", "comet_ml", "clearml", "dvclive")


def option(default: Any, help: str) -> Any:
    """A config field with its ``--help`` text."""
    return field(default=default, metadata={"help": help})


def split_list(value: str) -> list[str]:
    """A comma-separated option (``--games a,b``) as a list; empty items are dropped."""
    return [v.strip() for v in value.split(",") if v.strip()]


def target_modules(value: str):
    """``--target-modules`` for peft: ``all-linear`` or a list of module names."""
    return value if value == "all-linear" else split_list(value)


def report_to(value: str):
    """``--report-to`` for TRL: ``none`` or a list of trackers."""
    return "none" if value in ("", "none") else split_list(value)


# option name -> (check, what is valid); applied to the fields a config has
_RULES = {
    "max_steps": (lambda v: v >= 1, "an integer >= 1"),
    # 0 is a null update: the whole path (train, save, load, evaluate) with the weights unchanged
    "learning_rate": (lambda v: v >= 0, "a number >= 0 (0 = a null update: the path runs, the weights stay)"),
    "save_steps": (lambda v: v >= 1, "an integer >= 1"),
    "save_total_limit": (lambda v: v >= 1, "an integer >= 1"),
    "eval_max_instances": (lambda v: v >= 0, "an integer >= 0 (0 = all)"),
    "eval_batch_size": (lambda v: v >= 1, "an integer >= 1"),
    "eval_set_instances": (lambda v: v >= 0, "an integer >= 0 (0 = all)"),
    "eval_static_limit": (lambda v: v >= 0, "an integer >= 0 (0 = all)"),
    "eval_sets": (lambda v: v.strip().lower() == "none" or bool(split_list(v)),
                  "set names of the sets file, comma-separated, or none"),
    "batch_size": (lambda v: v >= 1, "an integer >= 1"),
    "gradient_accumulation_steps": (lambda v: v >= 1, "an integer >= 1"),
    "max_length": (lambda v: v >= 16, "an integer >= 16"),
    "demo_max_instances": (lambda v: v >= 0, "an integer >= 0 (0 = all)"),
    "lora_r": (lambda v: v >= 1, "an integer >= 1"),
    "lora_alpha": (lambda v: v > 0, "a number > 0"),
    "lora_dropout": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    "num_generations": (lambda v: v >= 2, "an integer >= 2 (a group needs two episodes to compare)"),
    "groups_per_step": (lambda v: v >= 1, "an integer >= 1"),
    "micro_batch_size": (lambda v: v >= 0, "an integer >= 0 (0 = automatic: up to 16 on a GPU, 1 on a CPU)"),
    "max_concurrent_episodes": (lambda v: v >= 1, "an integer >= 1"),
    "beta": (lambda v: v >= 0, "a number >= 0"),
    "rounds": (lambda v: v >= 1, "an integer >= 1"),
    "branches": (lambda v: v >= 2, "an integer >= 2 (a fork needs two branches to compare)"),
    "candidates": (lambda v: v >= 2, "an integer >= 2 (best vs worst needs two)"),
    "pair_instances": (lambda v: v >= 0, "an integer >= 0 (0 = all)"),
    "fork_turns": (lambda v: bool(split_list(v)) and all(t.isdigit() for t in split_list(v)),
                   "learner turn numbers >= 0, comma-separated (0 = the first move)"),
    "pairs_per_round": (lambda v: v >= 1, "an integer >= 1"),
    "generation_batch_size": (lambda v: v >= 1, "an integer >= 1"),
    "past_every": (lambda v: v >= 1, "an integer >= 1"),
    "credit": (lambda v: v in ("flat", "hierarchical"), "flat (TRL's groups) or hierarchical (groups by level, "
                                                      "episode type, role and group)"),
    "baseline_decay": (lambda v: 0.0 <= v < 1.0, "a number in [0, 1) (the old value's weight per update)"),
    "max_policy_lag": (lambda v: v >= 0, "an integer >= 0 (optimizer steps)"),
    "off_policy": (lambda v: v in ("drop", "clip"), "drop or clip"),
    "judge_max_tokens": (lambda v: v >= 1, "an integer >= 1"),
    "judge_batch_size": (lambda v: v >= 1, "an integer >= 1"),
    "epochs": (lambda v: v >= 1, "an integer >= 1"),
    "episodes_per_epoch": (lambda v: v >= 1, "an integer >= 1"),
    "imitation_steps": (lambda v: v >= 0, "an integer >= 0"),
    "imitation_kl": (lambda v: v >= 0, "a number >= 0"),
    "sft_coef": (lambda v: v >= 0, "a number >= 0"),
    "sft_batch": (lambda v: v >= 1, "an integer >= 1"),
    "clip": (lambda v: 0 < v < 1, "a number in (0, 1)"),
    "dev_every": (lambda v: v >= 0, "an integer >= 0 (0 = no dev evaluation during the run)"),
    "dev_patience": (lambda v: v >= 0, "an integer >= 0 (0 = never stop early: train --max-steps, keep the best)"),
    "precision": (lambda v: v in PRECISIONS, "auto, fp32 or bf16"),
    "report_to": (lambda v: all(t in TRACKERS for t in split_list(v) or ["none"]),
                  "none or a comma-separated list of " + ", ".join(TRACKERS[1:])),
    "games": (lambda v: bool(split_list(v)), "one or more game names, comma-separated"),
    "models_dir": (lambda v: _folder_or_new(v), "a folder (this or a folder above it is a file)"),
    "results_dir": (lambda v: _folder_or_new(v), "a folder (this or a folder above it is a file)"),
}


def _folder_or_new(value) -> bool:
    path = Path(value)
    # a folder to be made under a file (afile/x) fails at mkdir, after the models load
    return bool(str(value)) and not any(p.exists() and not p.is_dir() for p in (path, *path.parents))


@dataclass
class SplitOptions:
    """Training on a named split of the instances file (:mod:`playpen.evaluation.splits`): the
    run plays and learns only the split's items of each game. A config with these options has
    ``games`` and ``train_instances``; it calls :meth:`check_split` when it is built, so that a
    bad split stops the run before any model loads or any folder is made."""

    split: str = option("", "train only on this split's items of each game, as --splits FILE lists them "
                            "(docs/evaluation.md)")
    splits: str = option("", "the splits file of --split: {\"games\": {GAME: {SPLIT: [ITEMS], ...}}}")

    @property
    def train_items(self) -> Optional[dict[str, list[str]]]:
        """game -> the items of ``--split`` the run trains on; None: every instance of
        ``--train-instances``."""
        if not self.split:
            return None
        return training_items(self.splits, self.split, split_list(self.games), self.train_instances)

    def check_split(self) -> None:
        if bool(self.split) != bool(self.splits):
            raise TrainingSetupError("--split and --splits go together: --split NAME --splits FILE")
        self.train_items  # noqa: B018 -- reads the file and the games' instances: one line for a bad split


@dataclass
class RunConfig(SplitOptions):
    """What every trainer has: the games, the length of the run, where its outputs go,
    resuming, and the final evaluation on the held-out instances."""

    games: str = option("referencegame", "games to train on (comma-separated)")
    train_instances: str = option("instances_train", "instances file to train on")
    max_steps: int = option(20, "optimizer steps")
    learning_rate: float = option(2e-4, "learning rate")
    save_steps: int = option(10, "save a checkpoint every N steps (and at the end)")
    save_total_limit: int = option(2, "checkpoints kept")
    models_dir: str = option("models", "root of the checkpoint folders")
    results_dir: str = option("results", "root of the evaluation results")
    report_to: str = option("none", "tracker: none, trackio, tensorboard, wandb")
    resume: bool = option(False, "continue from the last checkpoint")
    overwrite: bool = option(False, "start over although checkpoints (and their evaluation results) exist")
    evaluate: bool = option(True, "evaluate at the end: the trained games on their held-out instances, "
                                  "--eval-sets and the static suite, before and after (docs/trainers.md)")
    # a sample, not all: referencegame's 90 held-out episodes, played twice (base and adapter),
    # took many minutes of a first run on a 2-core CPU; 4 per experiment is 20 of them
    eval_max_instances: int = option(4, "held-out instances per experiment of the trained games at the end "
                                        "(0 = all)")
    eval_batch_size: int = option(16, "episodes generated together in evaluation")
    eval_before: bool = option(True, "evaluate the base model (adapters off) too and print before -> after; "
                                     "cached per model and settings in --results-dir")
    eval_sets: str = option("out_of_domain", "game sets of the sets file evaluated at the end too "
                                             "(comma-separated; none: only the trained games)")
    eval_sets_file: str = option("", "the game sets file [default: ./game_sets.json, else playpen's]")
    eval_set_instances: int = option(1, "instances per experiment of the --eval-sets games (0 = all)")
    eval_static: bool = option(True, "statscore at the end: the sets file's static tasks (lm-evaluation-harness; "
                                     "a note and no statscore when it is not installed)")
    eval_static_limit: int = option(50, "questions per static task at the end (0 = all)")

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """PlaypenError for the first value out of range (fields of every mixin included)."""
        for f in dataclasses.fields(self):
            rule = _RULES.get(f.name)
            value = getattr(self, f.name)
            if rule is None or value is None:
                continue
            check, valid = rule
            if not check(value):
                raise PlaypenError(f"option --{f.name.replace('_', '-')}: {value!r} is not valid; "
                                   f"expected {valid}")
        if self.resume and self.overwrite:
            raise PlaypenError("--resume and --overwrite exclude each other: continue the run or start over")
        self.check_split()

    @property
    def game_list(self) -> list[str]:
        return split_list(self.games)


@dataclass
class LoraOptions:
    """LoRA adapters: only they are trained; the base model stays frozen."""

    lora_r: int = option(16, "LoRA rank")
    lora_alpha: int = option(32, "LoRA alpha")
    lora_dropout: float = option(0.05, "LoRA dropout")
    target_modules: str = option("all-linear", "LoRA target modules (all-linear or a comma-separated list)")

    def lora_config(self):
        """The peft ``LoraConfig`` of these options."""
        from peft import LoraConfig
        return LoraConfig(r=self.lora_r, lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout,
                          target_modules=target_modules(self.target_modules), task_type="CAUSAL_LM")


@dataclass
class PrecisionOptions:
    """The precision of a TRL trainer's steps (accelerate's mixed precision)."""

    precision: str = option("auto", "training precision: auto (fp32 on a CPU; bf16 on a GPU that has it, "
                                    "else fp16), fp32, or bf16 (autocast: weights and optimizer in fp32, "
                                    "the forward's matrix products in bf16)")


@dataclass
class DemonstrationOptions:
    """Supervised data: a dataset file, a records folder, or demonstrations played on the
    training instances; kept by role and outcome."""

    dataset: str = option("", "a JSON-lines file of {messages, meta} records")
    records: str = option("", "a folder of clemcore results / playpen records")
    demo_model: str = option("programmatic", "plays the training instances when neither --dataset nor "
                                             "--records is given")
    demo_max_instances: int = option(0, "training instances per experiment to play for demonstrations (0 = all)")
    roles: str = option("", "game roles to learn (comma-separated; empty = all)")
    outcomes: str = option("success", "episode outcomes to learn from")
    batch_size: int = option(8, "conversations per optimizer step (per device)")
    gradient_accumulation_steps: int = option(1, "micro-batches per step")
    max_length: int = option(1024, "tokens per conversation (longer: truncated)")

    def validate(self) -> None:
        if self.split and (self.dataset or self.records):
            raise TrainingSetupError("--split chooses the training instances the demonstrations are played on: it "
                                     "does not filter --dataset or --records (drop one or the other)")
        super().validate()


@dataclass
class DevOptions:
    """Early stopping on a dev split (:mod:`~playpen.training.common.dev_stopping`): every
    ``--dev-every`` steps the dev items of ``--dev-splits`` are played; the best chunk wins."""

    dev_every: int = option(0, "every N steps: save, play the dev items of --dev-splits greedily and keep the best "
                               "checkpoint (0 = off)")
    dev_patience: int = option(0, "stop after P dev evaluations in a row without a better dev mean "
                                  "(0 = never stop early; needs --dev-every)")
    dev_splits: str = option("", "a splits file naming each game's dev items (as `playpen eval --splits`; "
                                 "needs --dev-every)")

    def validate(self) -> None:
        super().validate()
        if not self.dev_every and (self.dev_patience or self.dev_splits):
            raise TrainingSetupError("--dev-patience and --dev-splits need --dev-every N (the steps between "
                                     "dev evaluations)")
        if self.dev_every and not self.dev_splits:
            raise TrainingSetupError("--dev-every needs --dev-splits FILE: the dev items of each game "
                                     "({\"games\": {GAME: {\"dev\": [...]}}}, docs/evaluation.md)")
