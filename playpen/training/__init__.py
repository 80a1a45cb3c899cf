"""Training, one folder per family, each holding its options, its library half and its trainer
classes (``playpen run --list``; :mod:`playpen.training.catalog` names them):

- :mod:`~playpen.training.common`: :class:`BasePlayPen` (what a trainer subclasses), the config
  dataclasses it extends, the lifecycle of a run (lock, resume, Ctrl-C, logs, the final
  evaluation), checkpoints, memory, curves, the non-finite guard;
- :mod:`~playpen.training.sft`, :mod:`~playpen.training.grpo`, :mod:`~playpen.training.preference`
  (DPO, SPIN, self-rewarding), :mod:`~playpen.training.spag`, :mod:`~playpen.training.hierarchy`
  (proposer-solver), :mod:`~playpen.training.pipeline` (stages of the others);
- :mod:`~playpen.training.rubrics`: rewards from rubric files and judges.

Importing this package loads no torch, transformers or TRL.
"""
from playpen.training.common.base import BasePlayPen, config_fields, field_help
from playpen.training.common.config import (DemonstrationOptions, LoraOptions, RunConfig, option, report_to,
                                            split_list, target_modules)

__all__ = ["BasePlayPen", "config_fields", "field_help", "RunConfig", "LoraOptions", "DemonstrationOptions",
           "option", "split_list", "target_modules", "report_to"]
