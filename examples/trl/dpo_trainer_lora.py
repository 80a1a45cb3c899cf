"""The packaged trainer `dpo` (DPO with LoRA on pairs from branched episodes or recorded play) as a
file: `playpen run examples/trl/dpo_trainer_lora.py -l MODEL` is `playpen run dpo -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
DPOGamesTrainer in playpen/training/preference/trainer.py; `playpen run dpo --help` shows it
with the options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.preference.trainer import DPOGamesTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
