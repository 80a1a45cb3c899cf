"""The packaged trainer `expert-iteration` (expert iteration with LoRA: the learner's own won
episodes, round by round, SFT) as a file: `playpen run
examples/trl/expert_iteration_trainer_lora.py -l MODEL` is `playpen run expert-iteration -l
MODEL`.

Its documentation (what it trains, example commands, outputs) is the docstring of
ExpertIterationTrainer in playpen/training/expert_iteration/trainer.py; `playpen run expert-
iteration --help` shows it with the options. A trainer file of your own imports (or subclasses)
it as this one does.
"""

from playpen.training.expert_iteration import ExpertIterationTrainer  # noqa: F401  (the trainer `playpen run` finds in this file)
