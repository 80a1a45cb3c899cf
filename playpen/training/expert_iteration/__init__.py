"""Expert iteration: rounds of play, the learner's own won episodes kept, SFT on its turns.

:class:`ExpertIterationTrainer` (``trainer``) with its options (``config``) and the choice
of what is imitated (``selection``, no torch); ``examples/trl/expert_iteration_trainer_lora.py``
runs it with ``playpen run``. Importing this package loads no torch, transformers or TRL.
"""
from playpen.training.expert_iteration.config import ExpertIterationConfig, ExpertIterationOptions
from playpen.training.expert_iteration.trainer import ExpertIterationTrainer

__all__ = ["ExpertIterationConfig", "ExpertIterationOptions", "ExpertIterationTrainer"]
