"""The packaged trainer `spin` (SPIN with LoRA: demonstrations chosen, the learner's own answers
rejected) as a file: `playpen run examples/trl/spin_trainer_lora.py -l MODEL` is `playpen run
spin -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of SPINTrainer in
playpen/training/preference/trainer.py; `playpen run spin --help` shows it with the options. A
trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.preference.trainer import SPINTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
