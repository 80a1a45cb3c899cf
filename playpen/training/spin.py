"""Moved to :mod:`playpen.training.preference.spin` (``training/`` by family, issue 29). This old
path stays for one release as the same module object (patching either patches both); import
the new one."""
import sys

from playpen.training.preference import spin

sys.modules[__name__] = spin
