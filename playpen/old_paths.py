"""The module paths of ``playpen/training/`` before it was grouped by family (issue 29), kept
importing for one release: ``import playpen.training.run`` gives
:mod:`playpen.training.common.lifecycle` itself (the same module object: patching one patches
the other), ``python -m playpen.training.rubric_files FILE`` runs the new module.

An import hook rather than a file per old name: with the old files gone, git sees each move
as a rename, and edits made elsewhere to an old file merge into its new home.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {  # old module -> its new home (both under playpen.training)
    "base": "common.base", "config": "common.config", "run": "common.lifecycle", "checkpoints": "common.checkpoints",
    "memory": "common.memory", "plotting": "common.plotting", "finite": "common.finite",
    "advantages": "grpo.advantages", "anticollapse": "grpo.anticollapse", "mixes": "grpo.mixes",
    "offpolicy": "grpo.offpolicy", "past": "grpo.past", "grpo_steps": "grpo.steps",
    "sft_anchor": "sft.anchor", "dpo": "preference.dpo", "spin": "preference.spin",
    "self_rewarding": "preference.self_rewarding", "spag_run": "spag.phases", "rubric_files": "rubrics.files",
    "judging": "rubrics.judging", "proposer_solver": "hierarchy.proposer_solver",
    "instance_store": "hierarchy.instance_store",
}
PREFIX = "playpen.training."


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds an old name and loads it as the moved module."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(PREFIX) and fullname[len(PREFIX):] in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def __init__(self):
        self.real_specs: dict[str, object] = {}

    def create_module(self, spec):
        module = importlib.import_module(PREFIX + MOVED[spec.name[len(PREFIX):]])
        self.real_specs[spec.name] = module.__spec__  # the import system writes the alias's spec over it
        return module

    def exec_module(self, module):
        real = self.real_specs[module.__spec__.name]
        module.__spec__, module.__loader__ = real, real.loader  # the module stays itself (reload, -m)

    def get_source(self, fullname):
        """``python -m OLD`` (runpy asks for code): run the new module as __main__."""
        new = PREFIX + MOVED[fullname[len(PREFIX):]]
        return f"import runpy\nrunpy.run_module({new!r}, run_name='__main__', alter_sys=True)\n"


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
