"""The packaged trainer `grpo-teacher` (online GRPO with LoRA; a frozen teacher (-t) plays the
other roles) as a file: `playpen run examples/trl/grpo_trainer_lora_mp.py -l MODEL` is `playpen
run grpo-teacher -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
GRPOTeacherTrainer in playpen/training/grpo/trainer.py; `playpen run grpo-teacher --help` shows
it with the options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.grpo.trainer import GRPOTeacherTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
