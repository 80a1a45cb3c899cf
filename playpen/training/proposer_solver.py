"""Moved to :mod:`playpen.training.hierarchy.proposer_solver` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.hierarchy import proposer_solver

sys.modules[__name__] = proposer_solver
