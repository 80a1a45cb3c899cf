"""The private surfaces of TRL and peft that playpen touches, each checked against the
installed library: a test per name fails loudly, naming it, when a new release moves it
(then fix :mod:`playpen.training.trl_trainers` or :mod:`playpen.peft_internals` and widen the
pin in pyproject.toml). Every TRL name is touched in trl_trainers.py alone, every peft name
in peft_internals.py alone."""
import inspect
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "playpen"


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


# ----------------------------------------------------------------------------- TRL

TRL_METHODS = {  # (class, method) -> the leading parameters playpen's overrides take and pass on
    ("GRPOTrainer", "_generate_and_score_completions"): ["self", "inputs"],
    ("GRPOTrainer", "_get_per_token_logps_and_entropies"): ["self", "model", "input_ids", "attention_mask",
                                                            "logits_to_keep", "batch_size", "compute_entropy",
                                                            "compute_aux_loss"],
    ("GRPOTrainer", "_prepare_inputs"): ["self", "generation_batch"],
    ("GRPOTrainer", "_compute_loss"): ["self", "model", "inputs"],
    ("DPOTrainer", "_prepare_dataset"): ["self", "dataset", "processing_class", "args", "dataset_name"],
    ("DPOTrainer", "_compute_loss"): ["self", "model", "inputs", "return_outputs"],
    ("DPOTrainer", "compute_ref_log_probs"): ["self", "model", "inputs"],
}


@pytest.mark.parametrize("owner,method", sorted(TRL_METHODS))
def test_trl_private_method_is_there_with_its_parameters(owner, method):
    import trl
    function = getattr(getattr(trl, owner), method, None)
    assert function is not None, f"trl.{owner}.{method} is gone (trl {trl.__version__})"
    wanted = TRL_METHODS[owner, method]
    assert parameters(function)[:len(wanted)] == wanted, f"trl.{owner}.{method}{inspect.signature(function)}"


def test_the_prepare_inputs_override_copies_trls_training_branch():
    """PlaypenGRPOTrainer._prepare_inputs is TRL's training branch with rows_by_prompt where
    TRL shuffles: TRL's must still be that branch, on the attributes it keeps."""
    from trl import GRPOTrainer
    source = inspect.getsource(GRPOTrainer._prepare_inputs)
    for line in ("generate_every = self.args.steps_per_generation * self.num_iterations",
                 "if self._step % generate_every == 0 or self._buffered_inputs is None:",
                 "generation_batch = self._generate_and_score_completions(generation_batch)",
                 "generation_batch = split_pixel_values_by_grid(generation_batch)",
                 "generation_batch = shuffle_sequence_dict(generation_batch)",
                 "generation_batches = split_tensor_dict(generation_batch, self.args.steps_per_generation)",
                 "self._buffered_inputs = [unsplit_pixel_values_by_grid(batch) for batch in generation_batches]",
                 "inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]"):
        assert line in source, f"TRL's GRPOTrainer._prepare_inputs changed: no `{line}`"
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "self._step = 0" in init and "self._buffered_inputs = None" in init


def test_trl_batch_helpers_take_what_the_override_passes():
    from trl.trainer.utils import split_pixel_values_by_grid, split_tensor_dict, unsplit_pixel_values_by_grid
    assert parameters(split_tensor_dict) == ["tensor_dict", "num_chunks"]
    assert parameters(split_pixel_values_by_grid) == ["batch"]
    assert parameters(unsplit_pixel_values_by_grid) == ["batch"]


@pytest.mark.parametrize("module,name", [("trl.kernels.chunked_logprob", "TOKEN_CHUNK_SIZE"),
                                         ("trl.trainer.utils", "_CHUNKED_LOGPROB_CHUNK_SIZE")])
def test_trl_logprob_tile_constant_is_read_at_call_time(module, name):
    """use_cpu_logprob_tiles sets these module constants: they must exist, be ints, and be
    read by name inside TRL's functions (a default argument would keep the old value)."""
    import importlib
    mod = importlib.import_module(module)
    assert isinstance(getattr(mod, name, None), int), f"{module}.{name} is gone"
    source = inspect.getsource(mod)
    assert re.search(rf"def \w+\([^)]*\b{name}\b", source) is None, f"{name} became a default argument"
    assert source.count(name) >= 2


def test_use_cpu_logprob_tiles_sets_trls_tiles(monkeypatch):
    import torch
    import trl.kernels.chunked_logprob as kernel
    import trl.trainer.utils as trl_utils

    from playpen.training import trl_trainers
    monkeypatch.setattr(kernel, "TOKEN_CHUNK_SIZE", 4096)
    monkeypatch.setattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", 32768)
    assert trl_trainers.use_cpu_logprob_tiles() is (not torch.cuda.is_available())
    if not torch.cuda.is_available():
        assert (kernel.TOKEN_CHUNK_SIZE, trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE) == (512, 8192)


def test_trls_grpo_logger_and_the_warning_playpen_filters():
    import trl.trainer.grpo_trainer as grpo
    assert grpo.logger.logger.name == "trl.trainer.grpo_trainer"
    assert "All reward functions returned None" in inspect.getsource(grpo)


# ----------------------------------------------------------------------------- peft

PEFT_LAYER_NAMES = ["lora_A", "lora_B", "scaling", "lora_variant", "use_dora", "lora_bias", "lora_dropout",
                    "merged_adapters", "disable_adapters", "_disable_adapters", "base_layer", "active_adapters",
                    "merged", "get_base_layer", "get_delta_weight"]


@pytest.fixture
def lora_layer():
    """A peft LoRA Linear (r 2, adapter "default", B not zero) on a plain torch layer."""
    import torch
    from peft import LoraConfig, get_peft_model

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 6)

        def forward(self, x):
            return self.proj(x)

    torch.manual_seed(0)
    model = get_peft_model(Tiny(), LoraConfig(r=2, lora_alpha=4, target_modules=["proj"], init_lora_weights=False))
    model.eval()
    return model, model.base_model.model.proj


@pytest.mark.parametrize("name", PEFT_LAYER_NAMES)
def test_peft_lora_layer_has(lora_layer, name):
    import peft
    _, layer = lora_layer
    assert hasattr(layer, name), f"peft {peft.__version__}: a LoRA Linear has no {name}"


def test_peft_names_playpen_imports():
    from peft.tuners.lora import LoraLayer
    from peft.tuners.lora.layer import VARIANT_KWARG_KEYS, Linear
    assert issubclass(Linear, LoraLayer)
    assert all(isinstance(key, str) for key in VARIANT_KWARG_KEYS)
    assert parameters(Linear.get_delta_weight) == ["self", "adapter"]
    assert "kwargs" in parameters(Linear.forward)  # adapter_names and the variant keywords arrive here


def test_peft_internals_read_and_switch_a_lora_layer(lora_layer):
    """Each helper of playpen.peft_internals against peft's own answer."""
    import torch

    from playpen import peft_internals as pi
    model, layer = lora_layer
    x = torch.randn(3, 8)
    assert pi.lora_layers(model) == [layer] and isinstance(layer, pi.lora_linear_class())
    a, b = pi.adapter_weights(layer, "default")
    assert pi.adapter_names(layer) == ["default"] and pi.plain_adapters(layer) == {"default": (a, b)}
    assert pi.adapter_scaling(layer, "default") == 2.0  # alpha / r
    delta = pi.delta_weight(layer, "default")
    assert torch.allclose(delta, 2.0 * b @ a)
    assert torch.equal(pi.base_weight(layer), layer.get_base_layer().weight)
    assert pi.mergeable_adapter(layer, None) == "default" and pi.mergeable_adapter(layer, "other") is None
    with torch.no_grad():
        adapted, plain = layer(x), pi.base_forward(layer, x)
        assert torch.allclose(adapted, plain + x @ delta.T, atol=1e-6)
        assert not pi.adapters_bypassed(layer)
        assert pi.set_adapters_disabled(layer, True) is False
        assert pi.adapters_bypassed(layer) and torch.equal(layer(x), plain)
        assert pi.set_adapters_disabled(layer, False) is True
        assert torch.equal(layer(x), adapted)
    assert a.requires_grad and b.requires_grad  # switching off and on left the gradients alone


def test_only_the_fenced_modules_touch_the_private_surfaces():
    """TRL's private names appear in trl_trainers.py alone, peft's layer internals in
    peft_internals.py alone."""
    trl_private = re.compile(r"trl[\w.]*\._[a-z]|_CHUNKED_LOGPROB|TOKEN_CHUNK_SIZE|shuffle_sequence_dict")
    peft_private = re.compile(r"\.(lora_A|lora_B|_disable_adapters|get_delta_weight|use_dora|lora_variant)\b"
                              r"|VARIANT_KWARG_KEYS|peft\.tuners\.lora|\"lora_dropout\"")
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE).as_posix()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", '"', "-", ":")))
        if name != "training/trl_trainers.py" and trl_private.search(code):
            wrong.append(f"{name}: TRL")
        if name != "peft_internals.py" and peft_private.search(code):
            wrong.append(f"{name}: peft")
    assert not wrong, wrong
