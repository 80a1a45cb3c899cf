"""Moved to :mod:`playpen.training.hierarchy.instance_store` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.hierarchy import instance_store

sys.modules[__name__] = instance_store
