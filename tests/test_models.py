"""The embedded default model: preparation, completeness checks, rebuilds; clemcore side effects."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from playpen import default_model as models
from playpen.default_model import MARKER_FILE, check_model_dir, prepare_default_model

REPO_ROOT = Path(__file__).resolve().parents[1]


def fake_converter(gguf, out_dir):
    """Stands in for the 30-s GGUF conversion; the real one runs in the slow test below."""
    out_dir.mkdir(parents=True)
    (out_dir / "config.json").write_text('{"model_type": "llama"}')
    (out_dir / "model.safetensors").write_bytes(os.urandom(4096))


@pytest.fixture
def models_root(tmp_path, monkeypatch):
    monkeypatch.setenv(models.MODELS_DIR_ENV, str(tmp_path / "models"))
    monkeypatch.setattr(models, "_convert_gguf", fake_converter)
    return tmp_path / "models"


def test_prepare_is_idempotent(models_root, capsys):
    folder = prepare_default_model()
    assert folder == models_root / "smol-135m"
    assert check_model_dir(folder, deep=True) is None
    weights = folder / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert "preparing the default model" in capsys.readouterr().err
    assert prepare_default_model() == folder
    assert weights.stat().st_mtime_ns == stamp
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("damage,reason", [
    (lambda f: (f / MARKER_FILE).unlink(), "incomplete"),
    (lambda f: (f / MARKER_FILE).write_text("{"), "corrupt completion marker"),
    (lambda f: (f / "model.safetensors").write_bytes(b"x" * 100), "truncated"),
    (lambda f: (f / "config.json").unlink(), "missing file config.json"),
])
def test_damaged_folder_is_detected_and_rebuilt(models_root, capsys, damage, reason):
    folder = prepare_default_model()
    damage(folder)
    assert reason in check_model_dir(folder)
    capsys.readouterr()
    prepare_default_model()
    assert "rebuilding" in capsys.readouterr().err
    assert check_model_dir(folder, deep=True) is None


def test_same_size_corruption_caught_by_deep_check(models_root):
    folder = prepare_default_model()
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[10] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert check_model_dir(folder) is None  # sizes still match
    assert "hash mismatch" in check_model_dir(folder, deep=True)
    prepare_default_model(deep_check=True)
    assert check_model_dir(folder, deep=True) is None


def test_interrupted_conversion_leaves_no_model(models_root, monkeypatch):
    def crashing(gguf, out_dir):
        fake_converter(gguf, out_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "_convert_gguf", crashing)
    with pytest.raises(KeyboardInterrupt):
        prepare_default_model()
    assert not (models_root / "smol-135m").exists()
    assert list(models_root.iterdir()) == []  # staging folder cleaned up


def test_clemcore_import_side_effects_are_contained(tmp_path):
    code = """
import logging, os, sys
os.chdir(sys.argv[1])
mine = logging.getLogger("mine")
root_level = logging.getLogger().level
from playpen.clem import clemcore
clemcore()
assert not os.path.exists("clembench.log"), "clembench.log written to cwd"
assert os.path.exists("playpen-records/logs/clembench.log")
assert not mine.disabled
assert logging.getLogger().level == root_level
import torch
torch.set_num_threads(2)
from playpen.clem import preserved_torch_threads
with preserved_torch_threads():
    torch.set_num_threads(1)
assert torch.get_num_threads() == 2
"""
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)


@pytest.mark.slow
def test_real_conversion(tmp_path):
    """The real GGUF conversion into a fresh folder gives a loadable 135M model."""
    env = dict(os.environ, PLAYPEN_MODELS_DIR=str(tmp_path / "models"))
    subprocess.run([sys.executable, "-c", "from playpen.models import prepare_default_model as p; p()"],
                   check=True, env=env)
    folder = tmp_path / "models" / "smol-135m"
    assert check_model_dir(folder, deep=True) is None
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6


@pytest.mark.slow
def test_clem_run_smol_from_workspace_root(tmp_path, clem):
    """`clem run -g referencegame -m smol-135m` from the workspace root loads the model offline
    (only the workspace's model_registry.json knows it) and writes scorable episodes."""
    results = tmp_path / "results"
    done = clem(["run", "-g", "referencegame", "-m", "smol-135m", "-r", str(results),
                 "-e", "letter_grids", "-l", "20"], cwd=REPO_ROOT, timeout=900)
    episodes = list(results.rglob("interactions.json"))
    assert episodes, done.stdout + done.stderr
    requests = list(results.rglob("*requests.json"))
    assert requests and "smol-135m" in json.dumps(json.loads(requests[0].read_text()))


def test_load_init_adapter_is_peft_loading_the_checked_folder(tiny_model_dir, tmp_path):
    """Every trainer starts from an adapter through models.load_init_adapter: the model it
    returns answers as peft's own loading of the folder does, its LoRA weights train (or
    stay frozen, for evaluation), and a folder that is no adapter is one AdapterError."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from playpen.errors import AdapterError
    from playpen.models import load_init_adapter

    torch.manual_seed(0)
    trained = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                             LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM",
                                        init_lora_weights=False))
    trained.save_pretrained(tmp_path / "adapter")
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        expected = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                                             str(tmp_path / "adapter"))(input_ids=ids).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(input_ids=ids).logits
    model = load_init_adapter(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path / "adapter")
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert torch.allclose(logits, expected) and not torch.allclose(logits, base)
    lora = [p for n, p in model.named_parameters() if "lora_" in n]
    assert lora and all(p.requires_grad for p in lora)
    frozen = load_init_adapter(AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(tmp_path / "adapter"),
                               trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())
    (tmp_path / "empty").mkdir()
    with pytest.raises(AdapterError, match="has no adapter_config.json"):
        load_init_adapter(AutoModelForCausalLM.from_pretrained(tiny_model_dir), tmp_path / "empty")
