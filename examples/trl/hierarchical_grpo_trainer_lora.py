"""The packaged trainer `hierarchical-grpo` (GRPO with LoRA over proposer-solver: propose problems,
solve them) as a file: `playpen run examples/trl/hierarchical_grpo_trainer_lora.py -l MODEL` is
`playpen run hierarchical-grpo -l MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
HierarchicalGRPOTrainer in playpen/training/hierarchy/trainer.py; `playpen run hierarchical-grpo
--help` shows it with the options. A trainer file of your own imports (or subclasses) it as this
one does.
"""

from playpen.training.hierarchy.trainer import HierarchicalGRPOTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
