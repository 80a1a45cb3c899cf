"""The packaged trainer `self-rewarding` (self-rewarding with LoRA: judged candidates, best vs
worst, DPO) as a file: `playpen run examples/trl/self_rewarding_trainer_lora.py -l MODEL` is
`playpen run self-rewarding -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
SelfRewardingTrainer in playpen/training/preference/trainer.py; `playpen run self-rewarding
--help` shows it with the options. A trainer file of your own imports (or subclasses) it as this
one does.
"""

from playpen.training.preference.trainer import SelfRewardingTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
