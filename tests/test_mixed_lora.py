"""The stacked mixed-adapter LoRA forward (playpen.inference.mixed_lora) against peft's."""
import pytest
import torch

from playpen.rollouts import SamplingConfig, chat
from playpen.inference import mixed_lora as ml
from playpen.inference.engine import generate
from playpen.inference.kvcache import KVCacheStore

BASE = "__base__"
NAMES = ["alice", "bob", BASE, "carol", "alice", "bob"]
MESSAGES = [[{"role": "user", "content": "Say hello"}],
            [{"role": "user", "content": "Say hello there, friend"}],
            [{"role": "user", "content": "Another prompt entirely, somewhat longer than the others"}]]


def lora(r=4, alpha=8, **kwargs):
    from peft import LoraConfig
    # random A and B: every adapter answers differently from the base and from the others
    return LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", init_lora_weights=False, **kwargs)


@pytest.fixture
def peft_model(tiny_model_dir):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), lora(), adapter_name="alice")
    model.add_adapter("bob", lora())
    model.add_adapter("carol", lora(r=2, alpha=3))  # another rank and scaling: a stack of its own
    model.eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def peft_calls(monkeypatch):
    """Counts the layer forwards that went to peft's own mixed-batch path."""
    from peft.tuners.lora.layer import Linear
    calls = []
    original = Linear._mixed_batch_forward

    def spy(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(Linear, "_mixed_batch_forward", spy)
    return calls


def _ids(rows=6, length=7, seed=1):
    return torch.randint(0, 200, (rows, length), generator=torch.Generator().manual_seed(seed))


def _logits(model, ids, names, fast: bool):
    with torch.no_grad(), ml.mixed_lora(model, enabled=fast) as layers:
        assert (layers > 0) == fast
        return model(input_ids=ids, adapter_names=names).logits


def _lora_layers(model):
    from peft.tuners.lora.layer import Linear
    return [m for m in model.modules() if type(m) is Linear]


def test_logits_match_peft_mixed_batch(peft_model, peft_calls):
    model, _ = peft_model
    ids = _ids()
    reference = _logits(model, ids, NAMES, fast=False)
    assert peft_calls  # peft's path, once per layer
    peft_calls.clear()
    fast = _logits(model, ids, NAMES, fast=True)
    assert not peft_calls  # every layer took the stacked path
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0)
    assert not (fast[0] - fast[2]).abs().max() < 1e-3  # the adapters do change the logits
    # a base row is exactly the base model
    with torch.no_grad(), model.disable_adapter():
        base = model(input_ids=ids[2:3]).logits
    assert torch.allclose(fast[2], base[0], atol=1e-6, rtol=0)
    # the layers are peft's again afterwards
    assert all("forward" not in m.__dict__ for m in _lora_layers(model))


def test_greedy_tokens_equal_each_adapter_alone(peft_model, peft_calls):
    model, tokenizer = peft_model
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES] * 2
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    mixed = generate(model, tokenizer, prompts, sampling, adapter_names=NAMES)
    assert not peft_calls
    alone = []
    for prompt, name in zip(prompts, NAMES):  # peft's plain single-adapter path, no per-row names
        if name == BASE:
            with model.disable_adapter():
                alone.append(generate(model, tokenizer, [prompt], sampling)[0])
        else:
            model.set_adapter(name)
            alone.append(generate(model, tokenizer, [prompt], sampling)[0])
    assert [g.token_ids for g in mixed] == [g.token_ids for g in alone]
    for gen, single in zip(mixed, alone):
        assert torch.allclose(torch.tensor(gen.logprobs), torch.tensor(single.logprobs), atol=1e-4)
    assert len({g.token_ids for g in mixed[:3]}) > 1


def test_kv_cache_decode_loop_takes_the_fast_path(peft_model, peft_calls, monkeypatch):
    model, tokenizer = peft_model
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES] * 2
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    fast = generate(model, tokenizer, prompts, sampling, adapter_names=NAMES, cache=KVCacheStore(10**9),
                    conversations=list(range(6)))
    assert not peft_calls
    monkeypatch.setattr(ml, "ENABLED", False)
    slow = generate(model, tokenizer, prompts, sampling, adapter_names=NAMES, cache=KVCacheStore(10**9),
                    conversations=list(range(6)))
    assert peft_calls
    assert [g.token_ids for g in fast] == [g.token_ids for g in slow]
    for a, b in zip(fast, slow):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_training_and_gradient_forwards_stay_peft(peft_model, peft_calls):
    model, _ = peft_model
    ids = _ids()
    with ml.mixed_lora(model):
        with torch.no_grad():
            model.train()  # peft refuses adapter_names in training mode; the layers must not be asked
            with pytest.raises(ValueError, match="training mode"):
                model(input_ids=ids, adapter_names=NAMES)
            model.eval()
        model(input_ids=ids, adapter_names=NAMES)  # gradients on: peft's path
    assert peft_calls


def test_unsupported_adapters_fall_back_to_peft(peft_model, peft_calls):
    model, _ = peft_model
    model.add_adapter("biased", lora(lora_bias=True))
    ids = _ids()
    names = ["alice", "biased", BASE, "bob", "carol", "biased"]
    reference = _logits(model, ids, names, fast=False)
    peft_calls.clear()
    assert torch.allclose(_logits(model, ids, names, fast=True), reference, atol=1e-5, rtol=0)
    assert peft_calls  # a LoRA bias: peft's business
    peft_calls.clear()
    _logits(model, ids, NAMES, fast=True)  # a batch without it: stacked
    assert not peft_calls


def test_big_forwards_run_sub_batches_by_adapter(peft_model, peft_calls, monkeypatch):
    model, tokenizer = peft_model
    ids = _ids(length=40)
    reference = _logits(model, ids, NAMES, fast=False)
    peft_calls.clear()
    monkeypatch.setattr(ml, "MAX_STACKED_ELEMENTS", 0)  # every forward by sub-batches
    assert torch.allclose(_logits(model, ids, NAMES, fast=True), reference, atol=1e-5, rtol=0)
    only_base = [BASE] * 6
    assert torch.allclose(_logits(model, ids, only_base, fast=True), _logits(model, ids, only_base, fast=False),
                          atol=1e-6, rtol=0)
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES] * 2
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=4)
    peft_calls.clear()
    sub_batches = generate(model, tokenizer, prompts, sampling, adapter_names=NAMES)
    assert not peft_calls
    monkeypatch.setattr(ml, "ENABLED", False)
    assert [g.token_ids for g in sub_batches] == [g.token_ids for g in
                                                  generate(model, tokenizer, prompts, sampling, adapter_names=NAMES)]


def test_dora_adapters_are_left_to_peft(peft_model):
    model, _ = peft_model
    model.add_adapter("dora", lora(use_dora=True))
    with torch.no_grad(), ml.mixed_lora(model), pytest.raises(ValueError, match="DoRA"):
        model(input_ids=_ids(), adapter_names=["dora"] + NAMES[1:])  # peft's answer, unchanged
    assert torch.allclose(_logits(model, _ids(), NAMES, fast=True), _logits(model, _ids(), NAMES, fast=False),
                          atol=1e-5, rtol=0)


def test_stacks_follow_weight_changes_and_adapter_sets(peft_model, peft_calls):
    model, _ = peft_model
    ids = _ids()

    def same():
        peft_calls.clear()
        fast = _logits(model, ids, NAMES, fast=True)
        assert not peft_calls
        assert torch.allclose(fast, _logits(model, ids, NAMES, fast=False), atol=1e-5, rtol=0)

    same()
    layer = _lora_layers(model)[0]
    weight = layer.lora_A["alice"].weight
    stack = ml._STACKS[layer]
    assert any(weight.data_ptr() == s.A[s.index["alice"]].data_ptr() for s in stack.values())  # a view, no copy
    with torch.no_grad():
        weight.mul_(3.0)  # in place: the stack sees it
    same()
    with torch.no_grad():
        layer.lora_B["bob"].weight.data = torch.randn_like(layer.lora_B["bob"].weight)  # replaced: rebuilt
    same()
    model.add_adapter("dave", lora())
    same()
    model.delete_adapter("bob")
    names = [n if n != "bob" else "dave" for n in NAMES]
    assert torch.allclose(_logits(model, ids, names, fast=True), _logits(model, ids, names, fast=False),
                          atol=1e-5, rtol=0)


def test_stacked_adapters_train_and_save_as_before(peft_model, tmp_path):
    from safetensors.torch import load_file
    model, _ = peft_model
    _logits(model, _ids(), NAMES, fast=True)  # the weights are views of the stacks now
    model.set_adapter("bob")
    model.train()
    params = [p for n, p in model.named_parameters() if ".bob." in n]
    assert params and all(p.requires_grad for p in params)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if ".alice." in n}
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    model(input_ids=_ids(), labels=_ids()).loss.backward()
    optimizer.step()
    model.eval()
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters() if ".alice." in n)
    ids = _ids()
    assert torch.allclose(_logits(model, ids, NAMES, fast=True), _logits(model, ids, NAMES, fast=False),
                          atol=1e-5, rtol=0)
    model.save_pretrained(str(tmp_path), selected_adapters=["bob"])
    saved = load_file(str(tmp_path / "bob" / "adapter_model.safetensors"))
    size = sum(t.numel() for t in saved.values())
    assert size == sum(p.numel() for p in params)  # only bob's weights, not the stacks around them
    state = {n.replace(".bob", ""): p for n, p in model.named_parameters() if ".bob." in n}
    assert all(torch.equal(saved[k], state[k]) for k in saved)


def test_switched_off(peft_model, peft_calls, monkeypatch):
    model, tokenizer = peft_model
    monkeypatch.setattr(ml, "ENABLED", False)
    prompts = [chat.prompt_ids(tokenizer, m) for m in MESSAGES]
    generate(model, tokenizer, prompts, SamplingConfig(temperature=0.0, max_new_tokens=2), adapter_names=NAMES[:3])
    assert peft_calls
