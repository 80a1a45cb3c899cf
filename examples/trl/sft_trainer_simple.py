"""The packaged trainer `sft-full` (full fine-tuning on won episodes (assistant-only loss)) as a
file: `playpen run examples/trl/sft_trainer_simple.py -l MODEL` is `playpen run sft-full -l
MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
SFTSimpleTrainer in playpen/training/sft/trainer.py; `playpen run sft-full --help` shows it with
the options. A trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.sft.trainer import SFTSimpleTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
