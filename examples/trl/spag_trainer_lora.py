"""The packaged trainer `spag` (SPAG with LoRA on adversarial_taboo: imitation, then self-play
epochs) as a file: `playpen run examples/trl/spag_trainer_lora.py -l MODEL` is `playpen run spag
-l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of SPAGTrainer in
playpen/training/spag/trainer.py; `playpen run spag --help` shows it with the options. A trainer
file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.spag.trainer import SPAGTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
