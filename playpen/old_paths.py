"""Module paths of earlier releases, kept importing for one release (issue 29): the flat modules
of ``playpen/training/`` before it was grouped by family, and the generation modules of
``playpen/rollouts/`` before :mod:`playpen.inference` owned generation.

- A module that moved whole is the new module itself: ``import playpen.training.run`` gives
  :mod:`playpen.training.common.lifecycle` (the same module object: patching one patches the
  other), ``python -m playpen.training.rubric_files FILE`` runs the new module.
- A module whose names went to several modules (``playpen.rollouts.decoding``, a drawer split
  by what each piece is) is a stand-in that finds each name in its new home; setting a name on
  it (a test's ``monkeypatch.setattr(generation, "generate", spy)``) sets it in that home.

An import hook rather than a file per old name: with the old files gone, git sees each move
as a rename, and edits made elsewhere to an old file merge into its new home. The packages
whose old names these are (:mod:`playpen.rollouts`, :mod:`playpen.training`) put the finder
on ``sys.meta_path`` when they are imported.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types


def _under(prefix: str, table: dict) -> dict:
    return {prefix + old: prefix + new for old, new in table.items()}


MOVED = {  # old module -> the module it now is
    **_under("playpen.training.", {
        "base": "common.base", "config": "common.config", "run": "common.lifecycle",
        "checkpoints": "common.checkpoints", "memory": "common.memory", "plotting": "common.plotting",
        "finite": "common.finite", "advantages": "grpo.advantages", "anticollapse": "grpo.anticollapse",
        "mixes": "grpo.mixes", "offpolicy": "grpo.offpolicy", "past": "grpo.past", "grpo_steps": "grpo.steps",
        "sft_anchor": "sft.anchor", "dpo": "preference.dpo", "spin": "preference.spin",
        "self_rewarding": "preference.self_rewarding", "spag_run": "spag.phases", "rubric_files": "rubrics.files",
        "judging": "rubrics.judging", "proposer_solver": "hierarchy.proposer_solver",
        "instance_store": "hierarchy.instance_store",
    }),
    "playpen.training.old_paths": "playpen.old_paths",
    "playpen.rollouts.mixed_lora": "playpen.inference.mixed_lora",
}
_DRAWER = ("types", "model_facts", "transformers_compat", "prefixes", "sampling")  # what decoding.py held
SPLIT = {  # old module -> the modules now holding its names, searched in this order
    "playpen.rollouts.generation": tuple(f"playpen.inference.{m}" for m in ("engine", "hf_generate", *_DRAWER,
                                                                            "mixed_lora")),
    "playpen.rollouts.kvcache": tuple(f"playpen.inference.{m}" for m in ("kvcache", "engine", "prefill", "dynamic")),
    "playpen.rollouts.decoding": tuple(f"playpen.inference.{m}" for m in _DRAWER),
}


def former_module(name: str, homes: tuple) -> types.ModuleType:
    """A stand-in for a split module: each name of its new homes (the first home holding it
    wins) is a property of the stand-in's class that reads and writes the name in its home, so
    that a patch through the old path (pytest's ``monkeypatch`` included, which restores a
    property through ``setattr``) is a patch of the module that uses the name."""
    modules = [importlib.import_module(home) for home in homes]
    owner = {attr: module for module in reversed(modules) for attr in vars(module) if not attr.startswith("__")}

    def forward(attr, module):
        return property(lambda self: getattr(module, attr), lambda self, value: setattr(module, attr, value))

    namespace = {attr: forward(attr, module) for attr, module in owner.items()}
    namespace["__dir__"] = lambda self: sorted(owner)
    stand_in = type("FormerModule", (types.ModuleType,), namespace)
    return stand_in(name, f"Former module; its names now live in {', '.join(homes)}.")


def former_names(package: str, former: types.ModuleType):
    """The module ``__getattr__`` of a package that replaced a module of the same name: the
    names its ``import *`` of ``former`` (the module now holding them) leaves out, private
    helpers, are found there too, for one release."""
    def __getattr__(name: str):
        try:
            return getattr(former, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    return __getattr__


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds an old name and loads it as the moved module (or a stand-in of a split one)."""

    def __init__(self):
        self.real_specs: dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED or fullname in SPLIT:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        if spec.name in SPLIT:
            return former_module(spec.name, SPLIT[spec.name])
        module = importlib.import_module(MOVED[spec.name])
        self.real_specs[spec.name] = module.__spec__  # the import system writes the alias's spec over it
        return module

    def exec_module(self, module):
        real = self.real_specs.get(module.__spec__.name)
        if real is not None:
            module.__spec__, module.__loader__ = real, real.loader  # the module stays itself (reload, -m)

    def get_source(self, fullname):
        """``python -m OLD`` (runpy asks for code): run the new module as __main__."""
        if fullname not in MOVED:
            return None
        return f"import runpy\nrunpy.run_module({MOVED[fullname]!r}, run_name='__main__', alter_sys=True)\n"


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
