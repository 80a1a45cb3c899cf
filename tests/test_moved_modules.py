"""The old import paths of ``playpen/training/`` keep working for one release after the modules
moved into family folders (issue 29): an old module name is the new module itself, and a
family package still answers every name of the module it replaced."""
import importlib
import subprocess
import sys

import pytest

MOVED = {  # old module (playpen.training.*) -> its new home
    "base": "common.base",
    "config": "common.config",
    "run": "common.lifecycle",
    "checkpoints": "common.checkpoints",
    "memory": "common.memory",
    "plotting": "common.plotting",
    "finite": "common.finite",
    "advantages": "grpo.advantages",
    "anticollapse": "grpo.anticollapse",
    "mixes": "grpo.mixes",
    "offpolicy": "grpo.offpolicy",
    "past": "grpo.past",
    "grpo_steps": "grpo.steps",
    "sft_anchor": "sft.anchor",
    "dpo": "preference.dpo",
    "spin": "preference.spin",
    "self_rewarding": "preference.self_rewarding",
    "spag_run": "spag.phases",
    "rubric_files": "rubrics.files",
    "judging": "rubrics.judging",
    "proposer_solver": "hierarchy.proposer_solver",
    "instance_store": "hierarchy.instance_store",
}
BECAME_PACKAGES = {  # old module -> the module now holding what it held
    "grpo": "grpo.parts",
    "sft": "sft.demonstrations",
    "preference": "preference.rounds",
    "spag": "spag.objective",
    "pipeline": "pipeline.stages",
    "rubrics": "rubrics.rubric",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_is_the_moved_module(old):
    assert importlib.import_module(f"playpen.training.{old}") is importlib.import_module(
        f"playpen.training.{MOVED[old]}")


@pytest.mark.parametrize("old", sorted(BECAME_PACKAGES))
def test_a_family_package_answers_the_names_of_the_module_it_replaced(old):
    package = importlib.import_module(f"playpen.training.{old}")
    former = importlib.import_module(f"playpen.training.{BECAME_PACKAGES[old]}")
    names = [n for n in vars(former) if not n.startswith("__")]
    assert names and all(getattr(package, n) is getattr(former, n) for n in names)
    with pytest.raises(AttributeError):
        getattr(package, "no_such_name")


def test_old_style_imports_still_work_and_patching_the_old_path_patches_the_new():
    from playpen.training import run as lifecycle  # how every example trainer imported it
    from playpen.training.common import lifecycle as new
    from playpen.training.grpo import _pick, training_slots  # noqa: F401  (a private name, as before)
    assert lifecycle is new
    import playpen.training.anticollapse as old_module
    old_module.chance_level, saved = None, old_module.chance_level
    try:
        assert importlib.import_module("playpen.training.grpo.anticollapse").chance_level is None
    finally:
        old_module.chance_level = saved


def test_the_old_rubric_file_checker_command_still_runs(tmp_path):
    rubric = tmp_path / "r.json"
    rubric.write_text("{}")
    done = subprocess.run([sys.executable, "-m", "playpen.training.rubric_files", str(rubric)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "expected an object with" in done.stderr
