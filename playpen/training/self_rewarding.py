"""Moved to :mod:`playpen.training.preference.self_rewarding` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.preference import self_rewarding

sys.modules[__name__] = self_rewarding
