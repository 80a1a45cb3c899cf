"""Expert iteration: rounds of play, the learner's own won episodes kept, SFT on its turns.

:class:`ExpertIterationTrainer` (``trainer``) with its options (``config``) and the choice
of what is imitated (``selection``, no torch); ``playpen run expert-iteration --help``
shows the trainer's documentation. Importing this package loads no torch, transformers or TRL.
"""
from playpen.training.expert_iteration.config import ExpertIterationConfig, ExpertIterationOptions
from playpen.training.expert_iteration.trainer import ExpertIterationTrainer

__all__ = ["ExpertIterationConfig", "ExpertIterationOptions", "ExpertIterationTrainer"]
