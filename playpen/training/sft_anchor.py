"""Moved to :mod:`playpen.training.sft.anchor` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.sft import anchor

sys.modules[__name__] = anchor
