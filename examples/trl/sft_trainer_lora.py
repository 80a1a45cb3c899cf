"""The packaged trainer `sft` (SFT with LoRA on won episodes (assistant-only loss)) as a file:
`playpen run examples/trl/sft_trainer_lora.py -l MODEL` is `playpen run sft -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of SFTLoraTrainer
in playpen/training/sft/trainer.py; `playpen run sft --help` shows it with the options. A
trainer file of your own imports (or subclasses) it as this one does.
"""

from playpen.training.sft.trainer import SFTLoraTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
