"""The packaged trainer `grpo` (online GRPO with LoRA in self-play: the learner plays every role)
as a file: `playpen run examples/trl/grpo_trainer_lora_sp.py -l MODEL` is `playpen run grpo -l
MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
GRPOSelfPlayTrainer in playpen/training/grpo/trainer.py; `playpen run grpo --help` shows it with
the options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.grpo.trainer import GRPOSelfPlayTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
