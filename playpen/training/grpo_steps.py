"""Moved to :mod:`playpen.training.grpo.steps` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.grpo import steps

sys.modules[__name__] = steps
