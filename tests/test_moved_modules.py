"""The old import paths keep working for one release (issue 29): of ``playpen/training/`` after
its modules moved into family folders (an old module name is the new module itself, and a
family package still answers every name of the module it replaced), and of the generation
modules of ``playpen/rollouts/`` after :mod:`playpen.inference` took them over (a module
that moved whole is the new module; a split one answers every public name it had)."""
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


ROLLOUTS_SPLIT = {  # old module (playpen.rollouts.*) -> its public names, each now in a module of inference
    "generation": ["Generation", "MIN_SAVED_POSITIONS", "PrefixPlan", "SamplingConfig", "cache_kwarg",
                   "check_finite_scores", "context_limit", "eos_token_ids", "generate", "generate_within",
                   "mixed_lora", "plan_prefixes"],
    "kvcache": ["CHUNK_OVERHEAD_POSITIONS", "ENGINES", "KVCacheStore", "MIN_REUSED_TOKENS", "PrefillCounts",
                "SamplingConfig", "generate_cached", "mixed_lora", "use_static_engine"],
    "decoding": ["Generation", "PrefixPlan", "cache_kwarg", "check_finite_scores", "choose_tokens", "device_of",
                 "eos_token_ids", "plan_prefixes", "supports_kv_reuse"],
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


def test_the_moved_generation_modules_import_from_their_old_paths():
    import playpen.inference.mixed_lora as new
    import playpen.rollouts.mixed_lora as old
    assert old is new
    assert importlib.import_module("playpen.training.old_paths") is importlib.import_module("playpen.old_paths")


@pytest.mark.parametrize("old", sorted(ROLLOUTS_SPLIT))
def test_a_split_rollouts_module_answers_every_name_it_had(old):
    module = importlib.import_module(f"playpen.rollouts.{old}")
    inference = [importlib.import_module(f"playpen.inference.{m}") for m in (
        "engine", "hf_generate", "kvcache", "prefill", "dynamic", "types", "model_facts", "transformers_compat",
        "prefixes", "sampling", "mixed_lora")]
    for name in ROLLOUTS_SPLIT[old]:
        value = getattr(module, name)
        assert any(getattr(home, name, None) is value for home in inference), name
    with pytest.raises(AttributeError):
        getattr(module, "no_such_name")


def test_patching_the_old_generate_patches_what_the_rollouts_call(monkeypatch):
    """Spies written against the old path (``monkeypatch.setattr(generation, "generate", spy)``)
    still see the rollout loop's calls: the write goes to the engine."""
    from playpen.inference import engine
    from playpen.rollouts import generation

    def spy(*args, **kwargs):
        return []
    monkeypatch.setattr(generation, "generate", spy)
    assert engine.generate is spy and generation.generate is spy
    monkeypatch.undo()
    assert engine.generate is not spy


def test_sampling_config_is_one_class():
    from playpen import SamplingConfig as top
    from playpen.inference.types import SamplingConfig
    from playpen.rollouts import SamplingConfig as rollouts
    assert top is rollouts is SamplingConfig
