"""Moved to :mod:`playpen.training.common.base` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.common import base

sys.modules[__name__] = base
