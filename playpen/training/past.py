"""Moved to :mod:`playpen.training.grpo.past` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.grpo import past

sys.modules[__name__] = past
