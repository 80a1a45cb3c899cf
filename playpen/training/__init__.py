"""Training: what a trainer file subclasses (:class:`BasePlayPen`), the config dataclasses
it extends, the lifecycle of a run (:mod:`playpen.training.run`: checkpoints, resume,
Ctrl-C, logs, the final evaluation; :mod:`playpen.training.plotting`: curves), and the
library halves of the methods (:mod:`playpen.training.sft`, :mod:`playpen.training.grpo`,
:mod:`playpen.training.preference` with :mod:`~playpen.training.dpo` and
:mod:`~playpen.training.spin`) whose TRL halves are the scripts in ``examples/trl/``.

Importing this package loads no torch, transformers or TRL.
"""
from playpen.training.base import BasePlayPen, config_fields, field_help
from playpen.training.config import (DemonstrationOptions, LoraOptions, RunConfig, option, report_to,
                                     split_list, target_modules)

__all__ = ["BasePlayPen", "config_fields", "field_help", "RunConfig", "LoraOptions", "DemonstrationOptions",
           "option", "split_list", "target_modules", "report_to"]
